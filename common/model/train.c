/* train.c - one training step on a given batch (Section 5), the trainer
 * that holds what a run carries from step to step. (Greedy decoding is
 * decode.h's decode_greedy.)
 *
 * The step runs wherever the model runs: every op goes through the model's
 * backend table (backend.h), and the Trainer's buffers live in the same
 * backend's memory. */
#include "model/train.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/backend.h"
#include "model/backend_cpu.h"
#include "core/fail.h"
#include "ref/optim.h"
#include "core/tensor.h"

/* ======================================================================== */
/* the loss floor                                                           */
/* ======================================================================== */

double smoothed_loss_floor(int V, float eps_ls, int pad_id) {
    /* The loss is the cross-entropy H(q, p) = H(q) + KL(q || p) >= H(q):
     * the best a model can do is p = q, the smoothed targets themselves. */
    int others = pad_id >= 0 ? V - 2 : V - 1;
    double e = eps_ls, h = 0;
    if (e < 1) h -= (1 - e) * log(1 - e);
    if (e > 0) h -= e * log(e / others);
    return h;
}

/* ======================================================================== */
/* the trainer                                                              */
/* ======================================================================== */

TrainHyper train_hyper_paper(void) {
    TrainHyper hp = {.eps_ls = 0.1f, .warmup = 4000, .factor = 1.0f,
                     .beta1 = 0.9f, .beta2 = 0.98f, .adam_eps = 1e-9f};
    return hp;
}

const char *train_status_str(TrainStatus s) {
    switch (s) {
    case TRAIN_OK: return "ok";
    case TRAIN_NONFINITE_LOSS: return "the loss is NaN or infinite";
    case TRAIN_NONFINITE_GRAD: return "a gradient is NaN or infinite";
    case TRAIN_SMALL_BATCH: return "the batch has fewer rows than there are ranks";
    }
    return "?";
}

int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* The Trainer's arrays in the backend's memory: Adam's moments shared with
 * the host ones (the same memory on the CPU), the targets, the per-position
 * losses and the loss gradient. */
static void buffers_free(Trainer *t) {
    const Backend *be = t->be;
    if (!be) return;
    if (t->be_m) be->unshare(t->be_m, t->adam_m);
    if (t->be_v) be->unshare(t->be_v, t->adam_v);
    be->free(t->be_tgt_out);
    be->free(t->row_loss);
    be->free(t->dlogits);
    for (int b = 0; b < TRAIN_TREE_LEVELS; b++) be->free(t->tree[b]), t->tree[b] = NULL;
    be->free(t->leaf);
    t->leaf = NULL;
    t->be_m = t->be_v = t->row_loss = t->dlogits = NULL;
    t->be_tgt_out = NULL;
    t->be = NULL;
}

/* the micro-batch tree's buffers: levels 0..log2(G) and a leaf
 * (with G = 1 under data parallelism, level 0 holds the one scaled slice) */
static int tree_make(Trainer *t) {
    const Backend *be = t->be;
    for (int b = 0; b < TRAIN_TREE_LEVELS && (1 << b) <= t->micro; b++)
        if (!(t->tree[b] = be->alloc(t->n * sizeof(float)))) return -1;
    t->leaf = be->alloc(t->n * sizeof(float));
    return t->leaf ? 0 : -1;
}

static int buffers_make(Trainer *t, const Backend *be) {
    size_t N = (size_t)t->max_rows, V = (size_t)t->model->cfg.vocab;
    t->be = be;
    t->be_m = be->share(t->adam_m, t->n * sizeof(float));
    t->be_v = be->share(t->adam_v, t->n * sizeof(float));
    t->be_tgt_out = be->alloc(N * sizeof(int));
    t->row_loss = be->alloc(N * sizeof(float));
    t->dlogits = be->alloc(N * V * sizeof(float));
    if (!t->be_m || !t->be_v || !t->be_tgt_out || !t->row_loss || !t->dlogits) return -1;
    return t->micro > 1 || t->dp ? tree_make(t) : 0;
}

/* trainer_init_cap, with Adam's moments m0, v0 adopted instead of new zeros
 * when given (trainer_init_adopt) */
static int trainer_make(Trainer *t, Model *m, const TrainHyper *hp, int B, int T, int max_rows,
                        uint64_t data_seed, float *m0, float *v0, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    /* a decoder-only model has no source side (max_Ts 0) */
    int src_over = m->cfg.arch != ARCH_DECODER && T > m->max_Ts;
    if (B < 1 || T < 2 || B > m->max_B || src_over || T - 1 > m->max_Tt) {
        free(m0), free(v0);
        return fail(err, errlen, "a batch of %d sequences of length %d does not fit a model built for "
                    "%d sequences of %d source / %d target tokens", B, T, m->max_B, m->max_Ts, m->max_Tt);
    }
    if (max_rows < 1) {
        free(m0), free(v0);
        return fail(err, errlen, "the trainer needs room for at least 1 target token, got %d", max_rows);
    }
    /* no batch of at most B rows of T-1 targets has more */
    if ((long)max_rows > (long)B * (T - 1)) max_rows = B * (T - 1);
    if (hp->warmup < 1) {
        free(m0), free(v0);
        return fail(err, errlen, "warmup must be at least 1 step, got %d", hp->warmup);
    }
    t->model = m;
    t->hp = *hp;
    t->n = m->params.n;
    t->step = 0;
    rng_seed(&t->data_rng, data_seed);
    t->B = B;
    t->T = T;
    t->max_rows = max_rows;
    t->micro = 1;
    t->adam_m = m0 ? m0 : calloc_big(t->n, sizeof(float), 1);   /* first written by Adam's threads */
    t->adam_v = v0 ? v0 : calloc_big(t->n, sizeof(float), 1);
    if (!t->adam_m || !t->adam_v || buffers_make(t, m->be)) {
        trainer_free(t);
        return fail(err, errlen, "out of memory for the trainer (%zu parameters, batch %d x %d)", m->params.n, B, T);
    }
    return 0;
}

int trainer_init(Trainer *t, Model *m, const TrainHyper *hp, int B, int T,
                 uint64_t data_seed, char *err, size_t errlen) {
    long rows = (long)B * (T - 1);
    return trainer_make(t, m, hp, B, T, rows > 0 && rows <= INT_MAX ? (int)rows : INT_MAX, data_seed, NULL, NULL, err,
                        errlen);
}

int trainer_init_cap(Trainer *t, Model *m, const TrainHyper *hp, int B, int T, int max_rows,
                     uint64_t data_seed, char *err, size_t errlen) {
    return trainer_make(t, m, hp, B, T, max_rows, data_seed, NULL, NULL, err, errlen);
}

int trainer_init_adopt(Trainer *t, Model *m, const TrainHyper *hp, int B, int T, int max_rows,
                       float *adam_m, float *adam_v, char *err, size_t errlen) {
    return trainer_make(t, m, hp, B, T, max_rows, 0, adam_m, adam_v, err, errlen);
}

int trainer_set_micro(Trainer *t, int G, char *err, size_t errlen) {
    if (G < 1 || G > TRAIN_MAX_MICRO || (G & (G - 1)))
        return fail(err, errlen, "micro-batches must be a power of two from 1 to %d, got %d", TRAIN_MAX_MICRO, G);
    if (G > t->B) return fail(err, errlen, "%d micro-batches need a batch of at least %d sequences, not %d", G, G, t->B);
    const Backend *be = t->be;
    for (int b = 0; b < TRAIN_TREE_LEVELS; b++) be->free(t->tree[b]), t->tree[b] = NULL;
    be->free(t->leaf);
    t->leaf = NULL;
    t->micro = G;
    if ((G > 1 || t->dp) && tree_make(t)) {
        for (int b = 0; b < TRAIN_TREE_LEVELS; b++) be->free(t->tree[b]), t->tree[b] = NULL;
        be->free(t->leaf);
        t->leaf = NULL;
        t->micro = 1;
        return fail(err, errlen, "out of %s memory for the gradient tree of %d micro-batches", be->name, G);
    }
    return 0;
}

int trainer_to(Trainer *t, const Backend *be, char *err, size_t errlen) {
    if (be == t->be && be == t->model->be) return 0;
    /* the host copies of Adam's moments first, then everything moves */
    t->be->download(t->adam_m, t->be_m, t->n * sizeof(float));
    buffers_free(t);
    int rc = model_to(t->model, be, err, errlen);
    if (rc || buffers_make(t, t->model->be)) {
        buffers_free(t);
        if (!rc) rc = fail(err, errlen, "out of %s memory for the trainer", be->name);
        model_to(t->model, backend_cpu(), NULL, 0);
        if (buffers_make(t, backend_cpu())) buffers_free(t);
        return rc;
    }
    return 0;
}

void trainer_free(Trainer *t) {
    if (!t) return;
    buffers_free(t);
    free(t->adam_m);
    free(t->adam_v);
    memset(t, 0, sizeof *t);
}

/* zero grads -> forward (dropout on when training) -> label-smoothed
 * cross-entropy over the non-padding targets (Sec. 5.4) -> backward (unless
 * the loss is not finite and skip_bad): m->be_dw holds d loss / d w of this
 * batch, loss the mean over its *n_tokens tokens */
float train_grad(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out, int B, int Ts, int Tt,
                 int training, int skip_bad, int *n_tokens) {
    Model *m = t->model;
    const Backend *be = m->be;
    const Config *c = &m->cfg;
    int V = c->vocab, N = B * Tt;
    assert(B >= 1 && B <= t->B && Tt >= 1 && Tt <= t->T - 1 && be == t->be);
    if (N > t->max_rows) {
        /* a programming error: the caller sized the trainer for smaller
         * batches (trainer_init_cap); dlogits would be written past its end */
        fprintf(stderr, "training step: a batch of B=%d rows x Tt=%d target tokens has %d positions; the trainer "
                "was built for at most %d (B*Tt of its largest batch)\n", B, Tt, N, t->max_rows);
        assert(0 && "batch beyond the trainer's row capacity");
        abort();
    }

    /* gradients accumulate (+=) in every backward, so start from zero */
    model_zero_grad(m);

    /* forward, with dropout when training (Sec. 5.4) */
    const float *logp = model_forward(m, src, tgt_in, B, Ts, Tt, training);

    be->upload(t->be_tgt_out, tgt_out, (size_t)N * sizeof(int));
    float loss = be->smoothed_xent_forward(t->row_loss, logp, t->be_tgt_out, N, V, t->hp.eps_ls,
                                           c->pad_id, n_tokens);
    /* A NaN here would flow through backward into every weight and Adam
     * moment: the caller stops before anything changes, so the last
     * checkpoint (and the weights in memory) stay good. (Data parallel,
     * backward runs anyway: every rank must take part in the reduce.) */
    if (!isfinite(loss) && skip_bad) return loss;

    /* backward: d loss / d logits through the log-softmax, then the model */
    be->zero(t->dlogits, (size_t)N * V * sizeof(float));
    be->smoothed_xent_backward(t->dlogits, logp, t->be_tgt_out, N, V, t->hp.eps_ls, c->pad_id);
    model_backward(m, t->dlogits);
    return loss;
}

/* the training step's gradient pass: dropout on */
static float grad_pass(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out, int B, int Ts, int Tt,
                       int skip_bad, int *n_tokens) {
    return train_grad(t, src, tgt_in, tgt_out, B, Ts, Tt, 1, skip_bad, n_tokens);
}

/* One pass of the optimizer over the flat parameter array (params.mem and
 * grads.mem share one layout, so one call covers the embedding, every
 * attention and FFN matrix and every LayerNorm): every gradient finite?
 * (one NaN or inf makes the sum of squares NaN or inf, and then nothing is
 * updated), their norm, to watch training, and Adam with the Sec. 5.3
 * schedule. */
TrainStatus train_adam(Trainer *t, StepStats *st) {
    Model *m = t->model;
    uint64_t step = t->step + 1;
    float lr = lr_schedule((int)step, m->cfg.d_model, t->hp.warmup, t->hp.factor);
    double sq = m->be->adam_step(m->be_w.mem, m->be_dw.mem, t->be_m, t->be_v, t->n, lr,
                                 t->hp.beta1, t->hp.beta2, t->hp.adam_eps, (int)step);
    if (!isfinite(sq)) return TRAIN_NONFINITE_GRAD;
    t->step = step;
    if (st) {
        st->lr = lr;
        st->grad_norm = (float)sqrt(sq);
    }
    return TRAIN_OK;
}

TrainStatus train_step_batch(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out,
                             int B, int Ts, int Tt, StepStats *st) {
    int n_tokens = 0;
    float loss = grad_pass(t, src, tgt_in, tgt_out, B, Ts, Tt, 1, &n_tokens);
    if (st) {
        st->loss = loss;
        st->n_tokens = n_tokens;
        st->lr = 0;
        st->grad_norm = 0;
    }
    if (!isfinite(loss)) return TRAIN_NONFINITE_LOSS;
    return train_adam(t, st);
}

void train_slice(const int *tgt_out, int B, int Tt, int pad_id, int P, int r, int *row0, int *rows) {
    assert(P >= 1 && r >= 0 && r < P && B >= P);
    /* Rank k starts at the first row whose preceding rows hold at least
     * k/P of the tokens, kept within [k, B-P+k] so no rank is left empty.
     * Every rank of the copy task has the same tokens, so this is B/P rows
     * each; with padded sentences (translation), rows of different
     * lengths even out. */
    long total = 0;
    for (int i = 0; i < B * Tt; i++) total += tgt_out[i] != pad_id;
    int bound[2];
    for (int e = 0; e < 2; e++) {
        int k = r + e;
        if (k == 0) { bound[e] = 0; continue; }
        if (k == P) { bound[e] = B; continue; }
        long want = (total * k + P - 1) / P, acc = 0;
        int b = 0;
        while (b < B && acc < want) {
            for (int j = 0; j < Tt; j++) acc += tgt_out[(size_t)b * Tt + j] != pad_id;
            b++;
        }
        if (total == 0) b = (int)((long)B * k / P);
        bound[e] = b < k ? k : b > B - P + k ? B - P + k : b;
    }
    *row0 = bound[0];
    *rows = bound[1] - bound[0];
}

int train_leaves(int G, int B, int P) {
    int L = 1;
    while (2 * L <= G && 2 * L <= B) L *= 2;
    return L % P == 0 && (P & (P - 1)) == 0 ? L : P;
}

/* Leaf i (counting from this rank's first, which starts a subtree) joins
 * the tree: its gradient m->be_dw scaled by its share, then added to its left
 * neighbour's subtree of the same size while there is one (i's low bits:
 * leaf 1 pairs with 0, leaf 3 with 2 and then (2+3) with (0+1), ...).
 * tree[b] holds a finished subtree of 2^b leaves waiting for its right
 * neighbour. Returns the level where the sum so far now waits. */
static int tree_push(Trainer *t, int i, float share) {
    const Backend *be = t->be;
    int b = 0;
    float *cur = i & 1 ? t->leaf : t->tree[0];
    be->scale_forward(cur, t->model->be_dw.mem, share, t->n);   /* one multiply per float */
    while (i >> b & 1) {                  /* left + right, in that order */
        be->residual_forward(t->tree[b], t->tree[b], cur, t->n);
        cur = t->tree[b++];
    }
    if (cur != t->tree[b]) be->copy(t->tree[b], cur, t->n * sizeof(float));
    return b;
}

TrainStatus train_step_global(Trainer *t, const int *src, const int *tgt_in, const int *tgt_out,
                              int B, int Ts, int Tt, StepStats *st) {
    Model *m = t->model;
    int P = t->dp ? t->dp->size : 1, r = t->dp ? t->dp->rank : 0, pad = m->cfg.pad_id;
    if (B < P) return TRAIN_SMALL_BATCH;   /* the same test on every rank */
    int L = train_leaves(t->micro, B, P);
    if (L == 1) return train_step_batch(t, src, tgt_in, tgt_out, B, Ts, Tt, st);   /* one pass, as always */
    int k = L / P, first = r * k;   /* k <= micro, or 1: tree_make's levels suffice */
    long N = 0;   /* the global batch's tokens: every rank counts them */
    for (long i = 0; i < (long)B * Tt; i++) N += tgt_out[i] != pad;
    double mine[2 * TRAIN_MAX_MICRO], all[2 * TRAIN_MAX_MICRO];
    Rng start = m->dropout_rng;   /* every leaf draws the keys one pass would */
    int top = 0;
    for (int i = 0; i < k; i++) {
        int row0, rows, n_l = 0;
        train_slice(tgt_out, B, Tt, pad, L, first + i, &row0, &rows);
        model_set_dropout(m, start, row0);
        const int *src_l = src ? src + (size_t)row0 * Ts : NULL;   /* NULL: decoder-only */
        float l = grad_pass(t, src_l, tgt_in + (size_t)row0 * Tt, tgt_out + (size_t)row0 * Tt,
                            rows, Ts, Tt, 0, &n_l);
        mine[2 * i] = l, mine[2 * i + 1] = n_l;
        float share = N > 0 ? (float)((double)n_l / N) : 0.0f;
        top = tree_push(t, i, share);
    }
    model_set_dropout(m, m->dropout_rng, 0);   /* the stream where the leaves left it */
    t->be->copy(m->be_dw.mem, t->tree[top], t->n * sizeof(float));
    /* the rest of the tree across the ranks, and every leaf's (loss, tokens) */
    if (t->dp) t->dp->reduce(t->dp, t->be, m->be_dw.mem, t->n, mine, 2 * k, all);
    else memcpy(all, mine, sizeof(double) * 2 * k);
    double sum = 0;
    for (int l = 0; l < L; l++) sum += all[2 * l] * all[2 * l + 1];   /* in leaf order */
    float loss = N > 0 ? (float)(sum / N) : 0.0f;
    if (st) {
        st->loss = loss;
        st->n_tokens = (int)N;
        st->lr = 0;
        st->grad_norm = 0;
    }
    if (!isfinite(loss)) return TRAIN_NONFINITE_LOSS;
    TrainStatus s = train_adam(t, st);
    if (s == TRAIN_OK && t->dp && t->dp->after_step) t->dp->after_step(t->dp, m, t->step);
    return s;
}

void trainer_pull(Trainer *t) {
    model_pull(t->model);
    t->be->download(t->adam_m, t->be_m, t->n * sizeof(float));
    t->be->download(t->adam_v, t->be_v, t->n * sizeof(float));
}
