/* grad_dump.c - gradient and Adam dumps, safetensors exports: the C side of
 * tools/parity (see grad_dump.h; the file layouts are in
 * chapters/07_transformer/README.md). The gradients and the Adam step are the
 * training step's own (model/train.h: train_grad, train_adam). */
#include "parity/grad_dump.h"
#include "core/fail.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/train.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/show.h"

/* ---- helpers: a SafeTensor for a NamedTensor; the Config as metadata ------------ */
static SafeTensor named(const char *name, const NamedTensor *t, const float *data) {
    SafeTensor s = {name, SAFETENSORS_F32, data, t->ndim, {t->shape[0], t->shape[1], 0, 0}};
    return s;
}

enum { CFG_META = 10 };
static void config_meta(const Config *c, char val[CFG_META][32], const char **meta) {
    const char *keys[CFG_META] = {"N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab", "max_len", "pre_ln", "pad_id"};
    int v[CFG_META] = {c->N, c->d_model, c->d_ff, c->h, c->d_k, c->d_v, c->vocab, c->max_len, c->pre_ln, c->pad_id};
    for (int i = 0; i < CFG_META; i++) {
        snprintf(val[i], 32, "%d", v[i]);
        meta[2 * i] = keys[i];
        meta[2 * i + 1] = val[i];
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
int adam_step_dump(Trainer *t, const char *path, float *lr_out, char *err, size_t errlen) {
    if (t->step >= 0x7fffffff) return fail_rc(2, err, errlen, "adam step: the step count is too large");
    StepStats st;
    if (train_adam(t, &st) != TRAIN_OK)
        return fail_rc(2, err, errlen, "adam step: %s", train_status_str(TRAIN_NONFINITE_GRAD));
    if (lr_out) *lr_out = st.lr;

    const Model *m = t->model;
    int nt = m->params.n_tensors, k = 0;
    SafeTensor *s = malloc((size_t)3 * nt * sizeof *s);
    char (*names)[64] = malloc((size_t)2 * nt * sizeof *names);
    if (!s || !names) {
        free(s), free(names);
        return fail_rc(1, err, errlen, "adam dump: out of memory");
    }
    for (int i = 0; i < nt; i++) {   /* params.mem, grads.mem, m and v share one layout */
        const NamedTensor *p = &m->params.tensors[i];
        size_t off = (size_t)(p->data - m->params.mem);
        snprintf(names[2 * i], 64, "adam_m.%s", p->name);
        snprintf(names[2 * i + 1], 64, "adam_v.%s", p->name);
        s[k++] = named(p->name, p, p->data);
        s[k++] = named(names[2 * i], p, t->adam_m + off);
        s[k++] = named(names[2 * i + 1], p, t->adam_v + off);
    }
    char val[5][32];
    snprintf(val[0], 32, "%llu", (unsigned long long)t->step);
    snprintf(val[1], 32, "%.9g", st.lr);
    snprintf(val[2], 32, "%.9g", t->hp.beta1);
    snprintf(val[3], 32, "%.9g", t->hp.beta2);
    snprintf(val[4], 32, "%.9g", t->hp.adam_eps);
    const char *meta[] = {"step", val[0], "lr", val[1], "beta1", val[2], "beta2", val[3], "eps", val[4],
                          "format", "aiyn-adam-dump-1"};
    int rc = safetensors_write(path, s, k, meta, 6, err, errlen);
    free(s), free(names);
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
int grad_job_run(const GradJob *job, char *err, size_t errlen) {
    BatchFile bf;
    Batch b = {0};
    Model m = {0};
    TrainState ts = {0};
    Trainer t = {0};
    int rc, has_ts = 0;
    if ((rc = batch_file_read(job->batch_path, &bf, err, errlen))) return rc;
    /* capacity: this batch, in the trainer's terms: B rows of T source and
     * T - 1 target tokens (the decoder reads all but the last target id) */
    int B = bf.n, Tt = bf.max_tgt - 1, T = bf.max_src > Tt + 1 ? bf.max_src : Tt + 1;
    rc = model_load_with_state(&m, job->load, B, bf.max_src, Tt, &ts, &has_ts, err, errlen);
    if (!rc) rc = batch_pad(&bf, &m.cfg, &b, err, errlen);
    if (!rc && model_check_sizes(&m, b.B, b.Ts, b.Tt, err, errlen)) rc = 2;
    if (!rc && T > m.cfg.max_len)
        rc = fail_rc(2, err, errlen, "%s: a target of %d ids; the training step reads at most max_len = %d, so a "
                     "target may have %d ids here (the batch format allows %d)", job->batch_path, Tt + 1,
                     m.cfg.max_len, m.cfg.max_len, m.cfg.max_len + 1);
    if (!rc && (T > m.max_Ts || T - 1 > m.max_Tt)) {   /* the same weights, room for (B, T, T - 1) */
        model_free(&m);
        if (model_load(&m, job->load, B, T, T - 1, NULL, NULL, err, errlen)) rc = 2;
    }
    if (!rc) {   /* the trainer adopts Adam's moments: they are freed with it */
        TrainHyper hp = train_hyper_paper();
        hp.eps_ls = job->eps_ls, hp.warmup = job->warmup;
        rc = trainer_init_adopt(&t, &m, &hp, B, T, b.B * b.Tt, ts.adam_m, ts.adam_v, err, errlen) ? 2 : 0;
        t.step = ts.step;
        ts.adam_m = ts.adam_v = NULL;
    }
    if (rc) goto done;

    show_section("Gradients on demand: one batch, forward and backward, dropout off");
    printf("  %s: %d examples, padded with id %d to src [batch=%d, seq=%d], tgt_in/tgt_out [batch=%d, seq=%d]\n",
           job->batch_path, b.B, m.cfg.pad_id, b.B, b.Ts, b.B, b.Tt);
    int n_tokens;   /* training = 0: dropout off, so another implementation can get the same numbers */
    float loss = train_grad(&t, b.src, b.tgt_in, b.tgt_out, b.B, b.Ts, b.Tt, 0, 0, &n_tokens);
    double sq = 0;
    for (size_t i = 0; i < m.grads.n; i++) sq += (double)m.grads.mem[i] * m.grads.mem[i];
    printf("  loss %.9g: label-smoothed cross-entropy (Sec. 5.4, eps_ls %g) over %d non-padding targets\n"
           "  logits [batch=%d, seq=%d, vocab=%d]; gradients of %d tensors, %zu numbers, L2 norm %.6g\n",
           loss, job->eps_ls, n_tokens, b.B, b.Tt, m.cfg.vocab, m.params.n_tensors, m.grads.n, sqrt(sq));
    if (job->grad_path) {
        if ((rc = grad_dump_write(&m, &b, job->eps_ls, loss, job->grad_path, err, errlen))) goto done;
        printf("  wrote %s (safetensors: loss, logits, ids, one gradient per parameter)\n", job->grad_path);
    }
    if (job->adam_path) {
        float lr;
        if ((rc = adam_step_dump(&t, job->adam_path, &lr, err, errlen))) goto done;
        printf("  Adam step %llu (Sec. 5.3: beta1 %g, beta2 %g, eps %g, lr %.6g with warmup %d; moments %s)\n"
               "  wrote %s (safetensors: new weights, adam_m.*, adam_v.*)\n", (unsigned long long)t.step,
               t.hp.beta1, t.hp.beta2, t.hp.adam_eps, lr, job->warmup,
               has_ts ? "from the checkpoint" : "from zero", job->adam_path);
    }
    if (job->st_path) {
        if ((rc = model_export_safetensors(&m, job->st_path, err, errlen))) goto done;
        printf("  wrote %s (the weights%s, safetensors)\n", job->st_path, job->adam_path ? " after the Adam step" : "");
    }
done:
    trainer_free(&t);
    batch_free(&b);
    batch_file_free(&bf);
    train_state_free(&ts);
    model_free(&m);
    return rc;
}
