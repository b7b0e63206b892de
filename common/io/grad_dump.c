/* grad_dump.c - gradients on demand, one Adam step, safetensors exports
 * (see grad_dump.h; the file layouts are in chapters/07_transformer/README.md). */
#include "io/grad_dump.h"
#include "core/fail.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/nn_fast.h"   /* smoothed_xent_backward */
#include "ref/nn.h"
#include "ref/optim.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/show.h"

/* The paper's Adam (Sec. 5.3): beta1 = 0.9, beta2 = 0.98, epsilon = 1e-9 */
#define ADAM_BETA1 0.9f
#define ADAM_BETA2 0.98f
#define ADAM_EPS   1e-9f

/* ---- forward + loss + backward ------------------------------------------------ */
float model_loss_grad(Model *m, const Batch *b, float eps_ls, float *dlogits) {
    const Config *c = &m->cfg;
    size_t rows = (size_t)b->B * b->Tt;
    model_zero_grad(m);
    /* training = 0: dropout off, so another implementation can get the same numbers */
    const float *logp = model_forward(m, b->src, b->tgt_in, b->B, b->Ts, b->Tt, 0);
    float loss = smoothed_xent_forward(logp, b->tgt_out, (int)rows, c->vocab, eps_ls, c->pad_id, NULL);
    memset(dlogits, 0, rows * c->vocab * sizeof(float));
    smoothed_xent_backward(dlogits, logp, b->tgt_out, (int)rows, c->vocab, eps_ls, c->pad_id);
    model_backward(m, dlogits);
    return loss;
}

/* ---- helpers: a SafeTensor for a NamedTensor; the Config as metadata ------------ */
static SafeTensor named(const char *name, const NamedTensor *t, const float *data) {
    SafeTensor s = {name, SAFETENSORS_F32, data, t->ndim, {t->shape[0], t->shape[1], 0, 0}};
    return s;
}

/* every Config field but dropout (the dump's "dropout" says "off"), from checkpoint.h's one list */
enum { CFG_META = CONFIG_N_FIELDS - 1 };
static void config_meta(const Config *c, char val[CFG_META][32], const char **meta) {
    for (int i = 0, k = 0; i < CONFIG_N_FIELDS; i++) {
        const ConfigField *f = &CONFIG_FIELDS[i];
        if (f->kind == CFG_F32) continue;
        snprintf(val[k], 32, "%d", config_field_int(c, f));
        meta[2 * k] = f->name;
        meta[2 * k + 1] = val[k];
        k++;
    }
}

/* ---- the grad dump ------------------------------------------------------------ */
int grad_dump_write(const Model *m, const Batch *b, float eps_ls, float loss, const char *path,
                    char *err, size_t errlen) {
    const Config *c = &m->cfg;
    int nt = m->params.n_tensors, k = 0;
    SafeTensor *t = malloc((size_t)(nt + 6) * sizeof *t);
    if (!t) return fail_rc(1, err, errlen, "grad dump: out of memory");
    t[k++] = (SafeTensor){"loss", SAFETENSORS_F32, &loss, 1, {1}};
    t[k++] = (SafeTensor){"logits", SAFETENSORS_F32, model_logits(m), 3, {b->B, b->Tt, c->vocab}};
    t[k++] = (SafeTensor){"src", SAFETENSORS_I32, b->src, 2, {b->B, b->Ts}};
    t[k++] = (SafeTensor){"tgt_in", SAFETENSORS_I32, b->tgt_in, 2, {b->B, b->Tt}};
    t[k++] = (SafeTensor){"tgt_out", SAFETENSORS_I32, b->tgt_out, 2, {b->B, b->Tt}};
    for (int i = 0; i < nt; i++) t[k++] = named(m->params.tensors[i].name, &m->grads.tensors[i], m->grads.tensors[i].data);

    char val[CFG_META + 4][32];
    const char *meta[2 * (CFG_META + 4)];
    config_meta(c, val, meta);
    int nm = CFG_META;
    snprintf(val[nm], 32, "%.9g", eps_ls);
    meta[2 * nm] = "eps_ls", meta[2 * nm + 1] = val[nm], nm++;
    snprintf(val[nm], 32, "%d", b->n_tokens);
    meta[2 * nm] = "n_tokens", meta[2 * nm + 1] = val[nm], nm++;
    meta[2 * nm] = "dropout", meta[2 * nm + 1] = "off", nm++;
    meta[2 * nm] = "format", meta[2 * nm + 1] = "aiyn-grad-dump-1", nm++;
    int rc = safetensors_write(path, t, k, meta, nm, err, errlen);
    free(t);
    return rc;
}

/* ---- one Adam step -------------------------------------------------------------- */
int adam_step_dump(Model *m, TrainState *ts, int warmup, float factor, const char *path, float *lr_out,
                   char *err, size_t errlen) {
    if (warmup < 1 || !(factor > 0)) return fail_rc(2, err, errlen, "adam step: warmup must be >= 1 and factor > 0");
    if (ts->step >= 0x7fffffff) return fail_rc(2, err, errlen, "adam step: the step count is too large");
    int step = (int)ts->step + 1;
    float lr = lr_schedule(step, m->cfg.d_model, warmup, factor);
    /* the flat arrays: params.mem, grads.mem, m and v share one layout */
    adam_update(m->params.mem, m->grads.mem, ts->adam_m, ts->adam_v, m->params.n, lr, ADAM_BETA1, ADAM_BETA2,
                ADAM_EPS, step);
    ts->step = (uint64_t)step;
    if (lr_out) *lr_out = lr;

    int nt = m->params.n_tensors, k = 0;
    SafeTensor *t = malloc((size_t)3 * nt * sizeof *t);
    char (*names)[64] = malloc((size_t)2 * nt * sizeof *names);
    if (!t || !names) {
        free(t), free(names);
        return fail_rc(1, err, errlen, "adam dump: out of memory");
    }
    for (int i = 0; i < nt; i++) {
        const NamedTensor *p = &m->params.tensors[i];
        size_t off = (size_t)(p->data - m->params.mem);
        snprintf(names[2 * i], 64, "adam_m.%s", p->name);
        snprintf(names[2 * i + 1], 64, "adam_v.%s", p->name);
        t[k++] = named(p->name, p, p->data);
        t[k++] = named(names[2 * i], p, ts->adam_m + off);
        t[k++] = named(names[2 * i + 1], p, ts->adam_v + off);
    }
    char val[4][32];
    snprintf(val[0], 32, "%d", step);
    snprintf(val[1], 32, "%.9g", lr);
    snprintf(val[2], 32, "%.9g", ADAM_BETA1);
    snprintf(val[3], 32, "%.9g", ADAM_BETA2);
    const char *meta[] = {"step", val[0], "lr", val[1], "beta1", val[2], "beta2", val[3], "eps", "1e-9",
                          "format", "aiyn-adam-dump-1"};
    int rc = safetensors_write(path, t, k, meta, 6, err, errlen);
    free(t), free(names);
    return rc;
}

/* ---- weights only ------------------------------------------------------------------ */
int model_export_safetensors(const Model *m, const char *path, char *err, size_t errlen) {
    int nt = m->params.n_tensors;
    SafeTensor *t = malloc((size_t)nt * sizeof *t);
    if (!t) return fail_rc(1, err, errlen, "safetensors export: out of memory");
    for (int i = 0; i < nt; i++) t[i] = named(m->params.tensors[i].name, &m->params.tensors[i], m->params.tensors[i].data);
    char val[CFG_META][32];
    const char *meta[2 * CFG_META];
    config_meta(&m->cfg, val, meta);
    int rc = safetensors_write(path, t, nt, meta, CFG_META, err, errlen);
    free(t);
    return rc;
}

/* ---- loading with the optimizer state ------------------------------------------------ */
int model_load_with_state(Model *m, const char *path, int max_B, int max_Ts, int max_Tt, TrainState *ts,
                          int *has_ts, char *err, size_t errlen) {
    memset(ts, 0, sizeof *ts);
    *has_ts = 0;
    /* the moments' size is the file's parameter count: read it once for the
     * config, then again with the TrainState (as trainer_resume does) */
    if (model_load(m, path, max_B, max_Ts, max_Tt, NULL, has_ts, err, errlen)) return 2;
    size_t n = m->params.n;
    ts->adam_m = calloc(n, sizeof(float));
    ts->adam_v = calloc(n, sizeof(float));
    if (!ts->adam_m || !ts->adam_v) {
        model_free(m);
        train_state_free(ts);
        return fail_rc(1, err, errlen, "out of memory for Adam's moments");
    }
    if (*has_ts) {
        model_free(m);
        if (model_load(m, path, max_B, max_Ts, max_Tt, ts, has_ts, err, errlen)) {
            train_state_free(ts);
            return 2;
        }
    }
    return 0;
}

void train_state_free(TrainState *ts) {
    free(ts->adam_m), free(ts->adam_v);
    memset(ts, 0, sizeof *ts);
}

/* ---- the --batch-file mode ------------------------------------------------------ */
int grad_job_run(const GradJob *job, const Config *cfg, uint64_t seed, char *err, size_t errlen) {
    BatchFile bf;
    Batch b = {0};
    Model m = {0};
    TrainState ts = {0};
    float *dlogits = NULL;
    int rc, has_ts = 0;
    if ((rc = batch_file_read(job->batch_path, &bf, err, errlen))) return rc;
    /* capacity: exactly this batch */
    int B = bf.n, Ts = bf.max_src, Tt = bf.max_tgt - 1;
    if (job->load) {
        rc = model_load_with_state(&m, job->load, B, Ts, Tt, &ts, &has_ts, err, errlen);
    } else if ((rc = model_build(&m, cfg, B, Ts, Tt, seed, err, errlen) ? 2 : 0) == 0) {
        ts.adam_m = calloc(m.params.n, sizeof(float));
        ts.adam_v = calloc(m.params.n, sizeof(float));
        if (!ts.adam_m || !ts.adam_v) rc = fail_rc(1, err, errlen, "out of memory for Adam's moments");
    }
    if (!rc) rc = batch_pad(&bf, &m.cfg, &b, err, errlen);
    if (!rc && model_check_sizes(&m, b.B, b.Ts, b.Tt, err, errlen)) rc = 2;
    if (!rc && !(dlogits = malloc((size_t)b.B * b.Tt * m.cfg.vocab * sizeof(float))))
        rc = fail_rc(1, err, errlen, "out of memory");
    if (rc) goto done;

    show_section("Gradients on demand: one batch, forward and backward, dropout off");
    printf("  %s: %d examples, padded with id %d to src [batch=%d, seq=%d], tgt_in/tgt_out [batch=%d, seq=%d]\n",
           job->batch_path, b.B, m.cfg.pad_id, b.B, b.Ts, b.B, b.Tt);
    float loss = model_loss_grad(&m, &b, job->eps_ls, dlogits);
    double sq = 0;
    for (size_t i = 0; i < m.grads.n; i++) sq += (double)m.grads.mem[i] * m.grads.mem[i];
    printf("  loss %.9g: label-smoothed cross-entropy (Sec. 5.4, eps_ls %g) over %d non-padding targets\n"
           "  logits [batch=%d, seq=%d, vocab=%d]; gradients of %d tensors, %zu numbers, L2 norm %.6g\n",
           loss, job->eps_ls, b.n_tokens, b.B, b.Tt, m.cfg.vocab, m.params.n_tensors, m.grads.n, sqrt(sq));
    if (job->grad_path) {
        if ((rc = grad_dump_write(&m, &b, job->eps_ls, loss, job->grad_path, err, errlen))) goto done;
        printf("  wrote %s (safetensors: loss, logits, ids, one gradient per parameter)\n", job->grad_path);
    }
    if (job->adam_path) {
        float lr;
        if ((rc = adam_step_dump(&m, &ts, job->warmup, 1.0f, job->adam_path, &lr, err, errlen))) goto done;
        printf("  Adam step %llu (Sec. 5.3: beta1 0.9, beta2 0.98, eps 1e-9, lr %.6g with warmup %d; moments %s)\n"
               "  wrote %s (safetensors: new weights, adam_m.*, adam_v.*)\n", (unsigned long long)ts.step, lr,
               job->warmup, has_ts ? "from the checkpoint" : "from zero", job->adam_path);
    }
    if (job->st_path) {
        if ((rc = model_export_safetensors(&m, job->st_path, err, errlen))) goto done;
        printf("  wrote %s (the weights%s, safetensors)\n", job->st_path, job->adam_path ? " after the Adam step" : "");
    }
done:
    free(dlogits);
    batch_free(&b);
    batch_file_free(&bf);
    train_state_free(&ts);
    model_free(&m);
    return rc;
}
