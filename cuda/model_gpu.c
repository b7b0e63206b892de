/* model_gpu.c - the encoder-decoder of common/model.c on the GPU (see
 * model_gpu.h). Read model.c first: this file follows it step for step, with
 * each CPU op replaced by its kernel, and quotes the same forward lines in
 * backward. Parts:
 *   1. Build: parameters rebased into GPU memory, one activation allocation.
 *   2. Forward: embed -> encoder -> decoder -> x E^T -> log-softmax.
 *   3. Backward.
 *   4. The training step, reading results back, one-op helpers.
 * Without USE_CUDA only stubs are compiled (the end of the file).
 */
#include "model_gpu.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_CUDA

#include "kernels.h"
#include "nn.h"

/* ============================================================================
 * 1. Build
 * ========================================================================== */

/* One attention's saved tensors on the GPU: attention.h's MhaActs, plus the
 * (B,h,T,d) copies of q, k, v and of the heads' output that the CUDA sdpa
 * kernels read and write (the CPU reads the heads in place, without them). */
typedef struct {
    MhaActs a;
    float *qh, *kh, *vh;  /* (B,h,Tq,d_k), (B,h,Tk,d_k), (B,h,Tk,d_v)        */
    float *oh;            /* (B,h,Tq,d_v)                                     */
} GpuMhaActs;

static size_t gpu_mha_acts_size(int B, int Tq, int Tk, int h, int dk, int dv) {
    size_t q = (size_t)B * Tq * h * dk, k = (size_t)B * Tk * h * dk, v = (size_t)B * Tk * h * dv;
    return mha_acts_size(B, Tq, Tk, h, dk, dv) + q + k + v + (size_t)B * Tq * h * dv;
}

static void gpu_mha_acts_layout(GpuMhaActs *m, float *buf, int B, int Tq, int Tk, int h, int dk,
                                int dv) {
    mha_acts_layout(&m->a, buf, B, Tq, Tk, h, dk, dv);
    float *p = buf + mha_acts_size(B, Tq, Tk, h, dk, dv);
    m->qh = p, p += (size_t)B * Tq * h * dk;
    m->kh = p, p += (size_t)B * Tk * h * dk;
    m->vh = p, p += (size_t)B * Tk * h * dv;
    m->oh = p;
}

/* One residual sub-layer's saved tensors, as model.c's SubActs (device). */
typedef struct {
    float *ln;          /* (B,T,D) LayerNorm output                             */
    float *mean, *rstd; /* (B*T)                                                */
    float *out;         /* (B,T,D) Sublayer output (before dropout)              */
    float *keep;        /* (B,T,D) dropout scales                               */
    float *res;         /* (B,T,D) x + Dropout(out)                             */
} GpuSub;

typedef struct {
    GpuSub sub[2];      /* 0 self-attention, 1 FFN                              */
    float *attn_buf;    /* mha_acts_size at capacity; attn is laid out per call */
    GpuMhaActs attn;
    float *hidden;      /* (B,Ts,d_ff)                                          */
} GpuEnc;

typedef struct {
    GpuSub sub[3];      /* 0 masked self-attention, 1 cross-attention, 2 FFN    */
    float *self_buf, *cross_buf;
    GpuMhaActs self, cross;
    float *hidden;      /* (B,Tt,d_ff)                                          */
} GpuDec;

struct GpuModel {
    Config cfg;
    int max_B, max_Ts, max_Tt;
    int B, Ts, Tt;                /* sizes of the last forward pass             */
    int encoded, decoded;
    Params params, grads;         /* model.h's layout; every pointer on the GPU */
    float *adam_m, *adam_v;       /* (n) on the GPU                             */
    float *pe;                    /* (max_len, D) on the GPU                    */
    Rng dropout_rng;              /* draws one seed per dropout site and call   */

    float *acts;                  /* the one activation allocation (device)     */
    GpuEnc *enc;                  /* [N] host tables of device pointers         */
    GpuDec *dec;                  /* [N]                                        */
    int *src, *tgt, *tgt_out;     /* (B,Ts), (B,Tt), (B,Tt) token ids           */
    uint8_t *enc_mask, *dec_mask, *cross_mask;  /* (B,Ts,Ts) (B,Tt,Tt) (B,Tt,Ts) */
    float *src_emb, *src_keep;    /* (B,Ts,D)                                   */
    float *tgt_emb, *tgt_keep;    /* (B,Tt,D)                                   */
    float *enc_ln, *enc_mean, *enc_rstd, *dec_ln, *dec_mean, *dec_rstd;  /* pre-LN */
    const float *memory;          /* (B,Ts,D) the encoder's output              */
    const float *dec_out;         /* (B,Tt,D) input of the output projection    */
    float *logits, *logp, *dlogits;  /* (B*Tt, vocab)                           */
    float *row_loss;              /* (B*Tt) per-position losses                 */
    /* backward: (B,T,D) with T = max(Ts, Tt) unless noted, as model.c */
    float *d_y, *d_x, *d_res, *d_sub;
    float *d_mem;                 /* (B,Ts,D)                                   */
    float *d_hidden, *d_pre;      /* (B,T,d_ff) at the FFN's hidden layer, before/after ReLU */
    float *d_scratch;             /* mha backward's work space                  */
    float *d_src_emb, *d_tgt_emb;

    uint8_t *h_mask, *h_tmp;      /* host scratch for building masks            */
    int *h_src;                   /* (B,Ts) host copy of the source ids (cross mask) */
};

/* Bump allocator over one region; base NULL only counts (as in model.c). */
typedef struct {
    float *base;
    size_t used;
} Bump;

static float *take(Bump *b, size_t n) {
    float *p = b->base ? b->base + b->used : NULL;
    b->used += (n + 63) & ~(size_t)63;   /* 256-byte alignment: full memory transactions */
    return p;
}
static int *take_ints(Bump *b, size_t n) { return (int *)take(b, n); }
static uint8_t *take_bytes(Bump *b, size_t n) { return (uint8_t *)take(b, (n + 3) / 4); }

static void take_sub(Bump *b, GpuSub *s, size_t rows, size_t D) {
    s->ln = take(b, rows * D);
    s->mean = take(b, rows);
    s->rstd = take(b, rows);
    s->out = take(b, rows * D);
    s->keep = take(b, rows * D);
    s->res = take(b, rows * D);
}

static size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Every activation at capacity, in one pass that counts (base NULL) or
 * points (base = the allocation). The layout is fixed: a (B,T,...) tensor
 * of a smaller batch uses the front of its slot. */
static size_t layout(GpuModel *g, float *base) {
    const Config *c = &g->cfg;
    Bump b = {base, 0};
    size_t B = (size_t)g->max_B, Ts = (size_t)g->max_Ts, Tt = (size_t)g->max_Tt;
    size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, V = (size_t)c->vocab;
    size_t rs = B * Ts, rt = B * Tt, rmax = B * (Ts > Tt ? Ts : Tt);
    int h = c->h, dk = c->d_k, dv = c->d_v;
    g->src = take_ints(&b, rs);
    g->tgt = take_ints(&b, rt);
    g->tgt_out = take_ints(&b, rt);
    g->enc_mask = take_bytes(&b, rs * Ts);
    g->dec_mask = take_bytes(&b, rt * Tt);
    g->cross_mask = take_bytes(&b, rt * Ts);
    g->src_emb = take(&b, rs * D);
    g->src_keep = take(&b, rs * D);
    for (int l = 0; l < c->N; l++) {
        GpuEnc *e = &g->enc[l];
        take_sub(&b, &e->sub[0], rs, D);
        take_sub(&b, &e->sub[1], rs, D);
        e->attn_buf = take(&b, gpu_mha_acts_size((int)B, (int)Ts, (int)Ts, h, dk, dv));
        e->hidden = take(&b, rs * F);
    }
    g->enc_ln = take(&b, rs * D);
    g->enc_mean = take(&b, rs);
    g->enc_rstd = take(&b, rs);
    g->tgt_emb = take(&b, rt * D);
    g->tgt_keep = take(&b, rt * D);
    for (int l = 0; l < c->N; l++) {
        GpuDec *d = &g->dec[l];
        for (int s = 0; s < 3; s++) take_sub(&b, &d->sub[s], rt, D);
        d->self_buf = take(&b, gpu_mha_acts_size((int)B, (int)Tt, (int)Tt, h, dk, dv));
        d->cross_buf = take(&b, gpu_mha_acts_size((int)B, (int)Tt, (int)Ts, h, dk, dv));
        d->hidden = take(&b, rt * F);
    }
    g->dec_ln = take(&b, rt * D);
    g->dec_mean = take(&b, rt);
    g->dec_rstd = take(&b, rt);
    g->logits = take(&b, rt * V);
    g->logp = take(&b, rt * V);
    g->dlogits = take(&b, rt * V);
    g->row_loss = take(&b, rt);
    g->d_y = take(&b, rmax * D);
    g->d_x = take(&b, rmax * D);
    g->d_res = take(&b, rmax * D);
    g->d_sub = take(&b, rmax * D);
    g->d_mem = take(&b, rs * D);
    g->d_hidden = take(&b, rmax * F);
    g->d_pre = take(&b, rmax * F);
    g->d_scratch = take(&b, max3(mha_scratch_size((int)B, (int)Ts, (int)Ts, h, dk, dv),
                                 mha_scratch_size((int)B, (int)Tt, (int)Tt, h, dk, dv),
                                 mha_scratch_size((int)B, (int)Tt, (int)Ts, h, dk, dv)));
    g->d_src_emb = take(&b, rs * D);
    g->d_tgt_emb = take(&b, rt * D);
    return b.used;
}

/* dst = src's named tensors, moved into dev (n floats in src's layout). */
#define REBASE(p) ((p) ? dev + ((p) - src->mem) : NULL)
static void rebase_mha(MhaParams *d, const MhaParams *s, const Params *src, float *dev) {
    d->w_q = REBASE(s->w_q), d->w_k = REBASE(s->w_k);
    d->w_v = REBASE(s->w_v), d->w_o = REBASE(s->w_o);
}

static int params_rebase(Params *dst, const Params *src, int N, float *dev) {
    memset(dst, 0, sizeof *dst);
    dst->mem = dev;
    dst->n = src->n;
    dst->enc = calloc((size_t)N, sizeof *dst->enc);
    dst->dec = calloc((size_t)N, sizeof *dst->dec);
    dst->tensors = calloc((size_t)src->n_tensors, sizeof *dst->tensors);
    if (!dst->enc || !dst->dec || !dst->tensors) return -1;
    dst->embed = REBASE(src->embed);
    for (int l = 0; l < N; l++) {
        const EncoderLayer *s = &src->enc[l];
        EncoderLayer *d = &dst->enc[l];
        rebase_mha(&d->self_attn, &s->self_attn, src, dev);
        d->ln1_g = REBASE(s->ln1_g), d->ln1_b = REBASE(s->ln1_b);
        d->ffn_w1 = REBASE(s->ffn_w1), d->ffn_b1 = REBASE(s->ffn_b1);
        d->ffn_w2 = REBASE(s->ffn_w2), d->ffn_b2 = REBASE(s->ffn_b2);
        d->ln2_g = REBASE(s->ln2_g), d->ln2_b = REBASE(s->ln2_b);
    }
    for (int l = 0; l < N; l++) {
        const DecoderLayer *s = &src->dec[l];
        DecoderLayer *d = &dst->dec[l];
        rebase_mha(&d->self_attn, &s->self_attn, src, dev);
        d->ln1_g = REBASE(s->ln1_g), d->ln1_b = REBASE(s->ln1_b);
        rebase_mha(&d->cross_attn, &s->cross_attn, src, dev);
        d->ln2_g = REBASE(s->ln2_g), d->ln2_b = REBASE(s->ln2_b);
        d->ffn_w1 = REBASE(s->ffn_w1), d->ffn_b1 = REBASE(s->ffn_b1);
        d->ffn_w2 = REBASE(s->ffn_w2), d->ffn_b2 = REBASE(s->ffn_b2);
        d->ln3_g = REBASE(s->ln3_g), d->ln3_b = REBASE(s->ln3_b);
    }
    dst->enc_ln_g = REBASE(src->enc_ln_g), dst->enc_ln_b = REBASE(src->enc_ln_b);
    dst->dec_ln_g = REBASE(src->dec_ln_g), dst->dec_ln_b = REBASE(src->dec_ln_b);
    for (int i = 0; i < src->n_tensors; i++) {
        dst->tensors[i] = src->tensors[i];
        dst->tensors[i].data = REBASE(src->tensors[i].data);
    }
    dst->n_tensors = src->n_tensors;
    return 0;
}
#undef REBASE

static void params_unbase(Params *p) {
    free(p->enc);
    free(p->dec);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

static int fail(char *err, size_t errlen, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return 2;
}

int gpu_model_build(GpuModel **out, const Model *m, char *err, size_t errlen) {
    *out = NULL;
    const Config *c = &m->cfg;
    GpuModel *g = calloc(1, sizeof *g);
    if (!g) return fail(err, errlen, "out of memory building the GPU model");
    g->cfg = *c;
    g->max_B = m->max_B, g->max_Ts = m->max_Ts, g->max_Tt = m->max_Tt;
    rng_seed(&g->dropout_rng, m->dropout_rng.state ^ 0xD1B54A32D192ED03ull);
    g->enc = calloc((size_t)c->N, sizeof *g->enc);
    g->dec = calloc((size_t)c->N, sizeof *g->dec);
    size_t Tmax = (size_t)(g->max_Ts > g->max_Tt ? g->max_Ts : g->max_Tt);
    size_t mask_bytes = (size_t)g->max_B * Tmax * Tmax;
    g->h_mask = malloc(mask_bytes);
    g->h_tmp = malloc(mask_bytes);
    g->h_src = malloc((size_t)g->max_B * g->max_Ts * sizeof(int));
    if (!g->enc || !g->dec || !g->h_mask || !g->h_tmp || !g->h_src) {
        gpu_model_free(g);
        return fail(err, errlen, "out of memory building the GPU model");
    }
    size_t n = m->params.n;
    /* cuda_alloc exits with a message when the GPU is full (a failure of the
     * world that no caller could repair) */
    int rc = params_rebase(&g->params, &m->params, c->N, cuda_alloc(n * sizeof(float)));
    rc |= params_rebase(&g->grads, &m->grads, c->N, cuda_alloc(n * sizeof(float)));
    if (rc) {   /* both own their GPU memory even when their host tables failed */
        gpu_model_free(g);
        return fail(err, errlen, "out of memory building the GPU model");
    }
    g->adam_m = cuda_alloc(n * sizeof(float));
    g->adam_v = cuda_alloc(n * sizeof(float));
    g->pe = cuda_alloc((size_t)c->max_len * c->d_model * sizeof(float));
    g->acts = cuda_alloc(layout(g, NULL) * sizeof(float));
    layout(g, g->acts);
    gpu_model_upload_params(g, m);
    cuda_upload(g->pe, m->pe, (size_t)c->max_len * c->d_model * sizeof(float));
    gpu_model_zero_grad(g);
    cuda_zero(g->adam_m, n * sizeof(float));
    cuda_zero(g->adam_v, n * sizeof(float));
    *out = g;
    return 0;
}

void gpu_model_free(GpuModel *g) {
    if (!g) return;
    cuda_free(g->params.mem);
    cuda_free(g->grads.mem);
    params_unbase(&g->params);
    params_unbase(&g->grads);
    cuda_free(g->adam_m);
    cuda_free(g->adam_v);
    cuda_free(g->pe);
    cuda_free(g->acts);
    free(g->enc);
    free(g->dec);
    free(g->h_mask);
    free(g->h_tmp);
    free(g->h_src);
    free(g);
}

void gpu_model_upload_params(GpuModel *g, const Model *m) {
    assert(m->params.n == g->params.n);
    cuda_upload(g->params.mem, m->params.mem, g->params.n * sizeof(float));
}

void gpu_model_download_params(const GpuModel *g, Model *m) {
    assert(m->params.n == g->params.n);
    cuda_download(m->params.mem, g->params.mem, g->params.n * sizeof(float));
}

void gpu_model_download_grads(const GpuModel *g, Model *m) {
    assert(m->grads.n == g->grads.n);
    cuda_download(m->grads.mem, g->grads.mem, g->grads.n * sizeof(float));
}

void gpu_model_upload_adam(GpuModel *g, const float *adam_m, const float *adam_v) {
    cuda_upload(g->adam_m, adam_m, g->params.n * sizeof(float));
    cuda_upload(g->adam_v, adam_v, g->params.n * sizeof(float));
}

void gpu_model_download_adam(const GpuModel *g, float *adam_m, float *adam_v) {
    cuda_download(adam_m, g->adam_m, g->params.n * sizeof(float));
    cuda_download(adam_v, g->adam_v, g->params.n * sizeof(float));
}

void gpu_model_zero_grad(GpuModel *g) {
    cuda_zero(g->grads.mem, g->grads.n * sizeof(float));
}

/* ============================================================================
 * 2. Forward
 * ========================================================================== */

/* A fresh 64-bit seed for one dropout site in one pass. */
static uint64_t next_seed(GpuModel *g) {
    uint64_t hi = rng_u32(&g->dropout_rng);
    return hi << 32 | rng_u32(&g->dropout_rng);
}

/* mha_forward (attention.c), op for op. out (B,Tq,D); x_q (B,Tq,D);
 * x_kv (B,Tk,D); mask (B,Tq,Tk) or NULL; m laid out for these sizes. */
static void mha_forward_gpu(float *out, GpuMhaActs *m, const MhaParams *p, const float *x_q,
                            const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                            int D, int h, int dk, int dv) {
    MhaActs *a = &m->a;
    /* project: Q W^Q, K W^K, V W^V for all heads at once */
    cuda_linear_forward(a->q, x_q, p->w_q, NULL, B * Tq, D, h * dk);
    cuda_linear_forward(a->k, x_kv, p->w_k, NULL, B * Tk, D, h * dk);
    cuda_linear_forward(a->v, x_kv, p->w_v, NULL, B * Tk, D, h * dv);
    /* split: [batch, seq, h*d] -> [batch, heads, seq, d] */
    cuda_heads_split(m->qh, a->q, B, Tq, h, dk);
    cuda_heads_split(m->kh, a->k, B, Tk, h, dk);
    cuda_heads_split(m->vh, a->v, B, Tk, h, dv);
    /* Eq. (1) for every head; the plain version keeps the weights for backward */
    cuda_sdpa_forward(m->oh, a->weights, m->qh, m->kh, m->vh, mask, B, h, Tq, Tk, dk, dv);
    /* Concat(head_1..head_h) W^O */
    cuda_heads_merge(a->concat, m->oh, B, Tq, h, dv);
    cuda_linear_forward(out, a->concat, p->w_o, NULL, B * Tq, h * dv, D);
}

/* FFN (Eq. 2): out = max(0, x W1 + b1) W2 + b2; hidden saved post-ReLU */
static void ffn_forward_gpu(float *out, float *hidden, const float *x, const float *W1,
                            const float *b1, const float *W2, const float *b2, int rows, int D,
                            int F) {
    cuda_linear_forward(hidden, x, W1, b1, rows, D, F);
    cuda_relu_forward(hidden, hidden, (size_t)rows * F);
    cuda_linear_forward(out, hidden, W2, b2, rows, F, D);
}

/* The Sublayer's input: x (post-LN) or LayerNorm(x) (pre-LN). */
static const float *sub_begin(GpuSub *s, const float *x, const float *gam, const float *bet,
                              int pre_ln, int rows, int D) {
    if (!pre_ln) return x;
    cuda_layernorm_forward(s->ln, s->mean, s->rstd, x, gam, bet, rows, D);
    return s->ln;
}

/* res = x + Dropout(out) in one kernel (Sec. 5.4), then LayerNorm (post-LN). */
static const float *sub_end(GpuModel *g, GpuSub *s, const float *x, const float *gam,
                            const float *bet, float p_drop, int rows, int D) {
    cuda_residual_dropout_forward(s->res, s->keep, x, s->out, p_drop, (size_t)rows * D,
                                  next_seed(g));
    if (g->cfg.pre_ln) return s->res;
    cuda_layernorm_forward(s->ln, s->mean, s->rstd, s->res, gam, bet, rows, D);
    return s->ln;
}

static void encode(GpuModel *g, const int *src, int B, int Ts, int training) {
    const Config *c = &g->cfg;
    const Params *P = &g->params;
    int D = c->d_model, rows = B * Ts, pre = c->pre_ln;
    float p = training ? c->dropout : 0.0f;
    g->B = B, g->Ts = Ts;
    g->encoded = 1, g->decoded = 0;
    cuda_upload(g->src, src, (size_t)rows * sizeof(int));
    memcpy(g->h_src, src, (size_t)rows * sizeof(int));

    /* Sec. 3.4-3.5: E[src] * sqrt(d_model) + PE, then dropout (Sec. 5.4) */
    cuda_embed_forward(g->src_emb, g->src, P->embed, g->pe, B, Ts, D, c->vocab);
    cuda_dropout_forward(g->src_emb, g->src_keep, g->src_emb, p, (size_t)rows * D, next_seed(g));

    /* padding keys are blocked for every query (built on the host, uploaded) */
    const uint8_t *mask = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(g->h_mask, src, c->pad_id, B, Ts, Ts);
        cuda_upload(g->enc_mask, g->h_mask, (size_t)rows * Ts);
        mask = g->enc_mask;
    }

    const float *x = g->src_emb;
    for (int l = 0; l < c->N; l++) {
        const EncoderLayer *w = &P->enc[l];
        GpuEnc *e = &g->enc[l];
        gpu_mha_acts_layout(&e->attn, e->attn_buf, B, Ts, Ts, c->h, c->d_k, c->d_v);
        /* x = LayerNorm(x + Dropout(SelfAttn(x))) */
        const float *in = sub_begin(&e->sub[0], x, w->ln1_g, w->ln1_b, pre, rows, D);
        mha_forward_gpu(e->sub[0].out, &e->attn, &w->self_attn, in, in, mask, B, Ts, Ts, D, c->h,
                        c->d_k, c->d_v);
        x = sub_end(g, &e->sub[0], x, w->ln1_g, w->ln1_b, p, rows, D);
        /* x = LayerNorm(x + Dropout(FFN(x))) */
        in = sub_begin(&e->sub[1], x, w->ln2_g, w->ln2_b, pre, rows, D);
        ffn_forward_gpu(e->sub[1].out, e->hidden, in, w->ffn_w1, w->ffn_b1, w->ffn_w2, w->ffn_b2,
                        rows, D, c->d_ff);
        x = sub_end(g, &e->sub[1], x, w->ln2_g, w->ln2_b, p, rows, D);
    }
    if (pre) {
        cuda_layernorm_forward(g->enc_ln, g->enc_mean, g->enc_rstd, x, P->enc_ln_g, P->enc_ln_b,
                               rows, D);
        x = g->enc_ln;
    }
    g->memory = x;
}

static const float *decode(GpuModel *g, const int *tgt, int Tt, int training) {
    const Config *c = &g->cfg;
    const Params *P = &g->params;
    int B = g->B, Ts = g->Ts, D = c->d_model, V = c->vocab, rows = B * Tt, pre = c->pre_ln;
    float p = training ? c->dropout : 0.0f;
    g->Tt = Tt;
    g->decoded = 1;
    cuda_upload(g->tgt, tgt, (size_t)rows * sizeof(int));

    /* the same embedding matrix as the encoder's (Sec. 3.4) */
    cuda_embed_forward(g->tgt_emb, g->tgt, P->embed, g->pe, B, Tt, D, V);
    cuda_dropout_forward(g->tgt_emb, g->tgt_keep, g->tgt_emb, p, (size_t)rows * D, next_seed(g));

    /* causal AND target padding for the self-attention; source padding for
     * the cross-attention (Sec. 3.2.3), as model.c builds them */
    mask_causal(g->h_mask, B, Tt, Tt);
    const uint8_t *cross = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(g->h_tmp, tgt, c->pad_id, B, Tt, Tt);
        mask_and(g->h_mask, g->h_tmp, rows * Tt);
    }
    cuda_upload(g->dec_mask, g->h_mask, (size_t)rows * Tt);
    if (c->pad_id >= 0) {
        mask_from_tokens(g->h_mask, g->h_src, c->pad_id, B, Tt, Ts);   /* source padding */
        cuda_upload(g->cross_mask, g->h_mask, (size_t)rows * Ts);
        cross = g->cross_mask;
    }

    const float *x = g->tgt_emb, *memory = g->memory;
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *w = &P->dec[l];
        GpuDec *d = &g->dec[l];
        gpu_mha_acts_layout(&d->self, d->self_buf, B, Tt, Tt, c->h, c->d_k, c->d_v);
        gpu_mha_acts_layout(&d->cross, d->cross_buf, B, Tt, Ts, c->h, c->d_k, c->d_v);
        /* x = LayerNorm(x + Dropout(MaskedSelfAttn(x))) */
        const float *in = sub_begin(&d->sub[0], x, w->ln1_g, w->ln1_b, pre, rows, D);
        mha_forward_gpu(d->sub[0].out, &d->self, &w->self_attn, in, in, g->dec_mask, B, Tt, Tt, D,
                        c->h, c->d_k, c->d_v);
        x = sub_end(g, &d->sub[0], x, w->ln1_g, w->ln1_b, p, rows, D);
        /* x = LayerNorm(x + Dropout(CrossAttn(x, memory))) */
        in = sub_begin(&d->sub[1], x, w->ln2_g, w->ln2_b, pre, rows, D);
        mha_forward_gpu(d->sub[1].out, &d->cross, &w->cross_attn, in, memory, cross, B, Tt, Ts, D,
                        c->h, c->d_k, c->d_v);
        x = sub_end(g, &d->sub[1], x, w->ln2_g, w->ln2_b, p, rows, D);
        /* x = LayerNorm(x + Dropout(FFN(x))) */
        in = sub_begin(&d->sub[2], x, w->ln3_g, w->ln3_b, pre, rows, D);
        ffn_forward_gpu(d->sub[2].out, d->hidden, in, w->ffn_w1, w->ffn_b1, w->ffn_w2, w->ffn_b2,
                        rows, D, c->d_ff);
        x = sub_end(g, &d->sub[2], x, w->ln3_g, w->ln3_b, p, rows, D);
    }
    if (pre) {
        cuda_layernorm_forward(g->dec_ln, g->dec_mean, g->dec_rstd, x, P->dec_ln_g, P->dec_ln_b,
                               rows, D);
        x = g->dec_ln;
    }
    g->dec_out = x;

    /* logits (B*Tt, V) = x (B*Tt, D) @ E^T: the embedding once more (Sec. 3.4) */
    cuda_gemm(0, 1, rows, V, D, 1.0f, x, D, P->embed, D, 0.0f, g->logits, V);
    cuda_logsoftmax_forward(g->logp, g->logits, rows, V);
    return g->logp;
}

const float *gpu_model_forward(GpuModel *g, const int *src, const int *tgt, int B, int Ts, int Tt,
                               int training) {
    assert(B >= 1 && B <= g->max_B && Ts >= 1 && Ts <= g->max_Ts && Tt >= 1 && Tt <= g->max_Tt);
    encode(g, src, B, Ts, training);
    return decode(g, tgt, Tt, training);
}

/* ============================================================================
 * 3. Backward (model.c's, with the same two halves around each Sublayer)
 * ========================================================================== */

/* mha_backward (attention.c): dx_q +=, dx_kv +=, weight gradients in gr +=. */
static void mha_backward_gpu(float *dx_q, float *dx_kv, MhaParams *gr, float *scratch,
                             const float *dout, const GpuMhaActs *m, const MhaParams *p,
                             const float *x_q, const float *x_kv, int B, int Tq, int Tk, int D,
                             int h, int dk, int dv) {
    const MhaActs *a = &m->a;
    size_t nq = (size_t)B * Tq * h * dk, nk = (size_t)B * Tk * h * dk, nv = (size_t)B * Tk * h * dv;
    size_t nw = (size_t)B * h * Tq * Tk, no = (size_t)B * h * Tq * dv;
    float *dconcat = scratch;          /* (B,Tq,h*d_v) */
    float *doh = dconcat + no;         /* (B,h,Tq,d_v) */
    float *dscores = doh + no;         /* (B,h,Tq,Tk)  */
    float *dqh = dscores + nw;         /* (B,h,Tq,d_k) */
    float *dkh = dqh + nq;             /* (B,h,Tk,d_k) */
    float *dvh = dkh + nk;             /* (B,h,Tk,d_v) */
    float *dq = dvh + nv;              /* (B,Tq,h*d_k) */
    float *dk_ = dq + nq;              /* (B,Tk,h*d_k) */
    float *dv_ = dk_ + nk;             /* (B,Tk,h*d_v) */
    /* forward: out = concat W_O */
    cuda_zero(dconcat, no * sizeof(float));
    cuda_linear_backward(dconcat, gr->w_o, NULL, dout, a->concat, p->w_o, B * Tq, h * dv, D);
    /* forward: concat = merge(oh) */
    cuda_heads_split(doh, dconcat, B, Tq, h, dv);
    /* forward: oh = sdpa(qh, kh, vh) */
    cuda_zero(dqh, (nq + nk + nv) * sizeof(float));   /* dqh, dkh, dvh are adjacent */
    cuda_sdpa_backward(dqh, dkh, dvh, dscores, doh, a->weights, m->qh, m->kh, m->vh, B, h, Tq, Tk,
                       dk, dv);
    /* forward: qh = split(q) etc. */
    cuda_heads_merge(dq, dqh, B, Tq, h, dk);
    cuda_heads_merge(dk_, dkh, B, Tk, h, dk);
    cuda_heads_merge(dv_, dvh, B, Tk, h, dv);
    /* forward: q = x_q W_Q, k = x_kv W_K, v = x_kv W_V */
    cuda_linear_backward(dx_q, gr->w_q, NULL, dq, x_q, p->w_q, B * Tq, D, h * dk);
    cuda_linear_backward(dx_kv, gr->w_k, NULL, dk_, x_kv, p->w_k, B * Tk, D, h * dk);
    cuda_linear_backward(dx_kv, gr->w_v, NULL, dv_, x_kv, p->w_v, B * Tk, D, h * dv);
}

/* ffn_backward (nn.c): dx +=, weight gradients +=; dhidden, dpre are scratch */
static void ffn_backward_gpu(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                             float *dhidden, float *dpre, const float *dout, const float *hidden,
                             const float *x, const float *W1, const float *W2, int rows, int D,
                             int F) {
    size_t nh = (size_t)rows * F;
    /* forward: out = hidden W2 + b2 */
    cuda_zero(dhidden, nh * sizeof(float));
    cuda_linear_backward(dhidden, dW2, db2, dout, hidden, W2, rows, F, D);
    /* forward: hidden = max(0, pre): the gradient passes where hidden > 0 */
    cuda_zero(dpre, nh * sizeof(float));
    cuda_relu_backward(dpre, dhidden, hidden, nh);
    /* forward: pre = x W1 + b1 */
    cuda_linear_backward(dx, dW1, db1, dpre, x, W1, rows, D, F);
}

/* From dy = dL/d(sub-layer output) to dsub (in g->d_sub) and dx (residual
 * path); returns where the Sublayer's input gradient goes. */
static float *sub_back_begin(GpuModel *g, const GpuSub *s, const float *dy, float *dx,
                             const float *gam, float *dgam, float *dbet, int rows, int D) {
    size_t n = (size_t)rows * D;
    int pre = g->cfg.pre_ln;
    const float *dres = dy;
    if (!pre) {
        /* forward: y = LayerNorm(res) */
        cuda_zero(g->d_res, n * sizeof(float));
        cuda_layernorm_backward(g->d_res, dgam, dbet, dy, s->res, s->mean, s->rstd, gam, rows, D);
        dres = g->d_res;
    }
    /* forward: res = x + Dropout(out)  ->  dx = dres, dsub = dres * keep */
    cuda_zero(dx, n * sizeof(float));
    cuda_zero(g->d_sub, n * sizeof(float));
    cuda_residual_dropout_backward(dx, g->d_sub, dres, s->keep, n);
    if (!pre) return dx;
    cuda_zero(g->d_res, n * sizeof(float));
    return g->d_res;
}

static void sub_back_end(GpuModel *g, const GpuSub *s, const float *x, float *dx,
                         const float *gam, float *dgam, float *dbet, int rows, int D) {
    /* pre-LN forward: in = LayerNorm(x) */
    if (g->cfg.pre_ln)
        cuda_layernorm_backward(dx, dgam, dbet, g->d_res, x, s->mean, s->rstd, gam, rows, D);
}

static void swap(float **p, float **q) {
    float *t = *p;
    *p = *q;
    *q = t;
}

static const float *sub_output(const GpuSub *s, int pre_ln) { return pre_ln ? s->res : s->ln; }

void gpu_model_backward(GpuModel *g, const float *dlogits) {
    const Config *c = &g->cfg;
    assert(g->encoded && g->decoded && "gpu_model_backward needs a gpu_model_forward first");
    int B = g->B, Ts = g->Ts, Tt = g->Tt, D = c->d_model, V = c->vocab, pre = c->pre_ln;
    int hh = c->h, dk = c->d_k, dv = c->d_v, F = c->d_ff, N = c->N;
    int rt = B * Tt, rs = B * Ts;
    const Params *P = &g->params;
    Params *G = &g->grads;
    float *dy = g->d_y, *dx = g->d_x;

    /* forward: logits = dec_out @ E^T
     *   d dec_out = dlogits @ E,  dE += dlogits^T @ dec_out   (use 1 of 3 of E) */
    cuda_gemm(0, 0, rt, D, V, 1.0f, dlogits, V, P->embed, D, 0.0f, dy, D);
    cuda_gemm(1, 0, V, D, rt, 1.0f, dlogits, V, g->dec_out, D, 1.0f, G->embed, D);

    if (pre) {
        /* forward: dec_out = LayerNorm(x) */
        cuda_zero(dx, (size_t)rt * D * sizeof(float));
        cuda_layernorm_backward(dx, G->dec_ln_g, G->dec_ln_b, dy, sub_output(&g->dec[N - 1].sub[2], 1),
                                g->dec_mean, g->dec_rstd, P->dec_ln_g, rt, D);
        swap(&dy, &dx);
    }

    /* ---- decoder, last layer first ---- */
    cuda_zero(g->d_mem, (size_t)rs * D * sizeof(float));
    for (int l = N - 1; l >= 0; l--) {
        const DecoderLayer *w = &P->dec[l];
        DecoderLayer *gw = &G->dec[l];
        GpuDec *d = &g->dec[l];
        const float *x0 = l == 0 ? g->tgt_emb : sub_output(&g->dec[l - 1].sub[2], pre);
        const float *x1 = sub_output(&d->sub[0], pre), *x2 = sub_output(&d->sub[1], pre);
        const float *in;
        float *din;

        /* forward: x3 = LayerNorm(x2 + Dropout(FFN(x2))) */
        in = pre ? d->sub[2].ln : x2;
        din = sub_back_begin(g, &d->sub[2], dy, dx, w->ln3_g, gw->ln3_g, gw->ln3_b, rt, D);
        ffn_backward_gpu(din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, g->d_hidden, g->d_pre,
                         g->d_sub, d->hidden, in, w->ffn_w1, w->ffn_w2, rt, D, F);
        sub_back_end(g, &d->sub[2], x2, dx, w->ln3_g, gw->ln3_g, gw->ln3_b, rt, D);
        swap(&dy, &dx);

        /* forward: x2 = LayerNorm(x1 + Dropout(CrossAttn(x1, memory))) */
        in = pre ? d->sub[1].ln : x1;
        din = sub_back_begin(g, &d->sub[1], dy, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, rt, D);
        mha_backward_gpu(din, g->d_mem, &gw->cross_attn, g->d_scratch, g->d_sub, &d->cross,
                         &w->cross_attn, in, g->memory, B, Tt, Ts, D, hh, dk, dv);
        sub_back_end(g, &d->sub[1], x1, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, rt, D);
        swap(&dy, &dx);

        /* forward: x1 = LayerNorm(x0 + Dropout(MaskedSelfAttn(x0))) */
        in = pre ? d->sub[0].ln : x0;
        din = sub_back_begin(g, &d->sub[0], dy, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, rt, D);
        mha_backward_gpu(din, din, &gw->self_attn, g->d_scratch, g->d_sub, &d->self, &w->self_attn,
                         in, in, B, Tt, Tt, D, hh, dk, dv);
        sub_back_end(g, &d->sub[0], x0, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, rt, D);
        swap(&dy, &dx);
    }

    /* forward: tgt_emb = Dropout(E[tgt] * sqrt(D) + PE)   (use 2 of 3 of E) */
    size_t nt = (size_t)rt * D, ns = (size_t)rs * D;
    cuda_zero(g->d_tgt_emb, nt * sizeof(float));
    cuda_dropout_backward(g->d_tgt_emb, dy, g->tgt_keep, nt);
    cuda_embed_backward(G->embed, g->d_tgt_emb, g->tgt, B, Tt, D, V);

    /* ---- encoder: its output's gradient is what the cross-attentions sent ---- */
    if (pre) {
        /* forward: memory = LayerNorm(x) */
        cuda_zero(dy, ns * sizeof(float));
        cuda_layernorm_backward(dy, G->enc_ln_g, G->enc_ln_b, g->d_mem,
                                sub_output(&g->enc[N - 1].sub[1], 1), g->enc_mean, g->enc_rstd,
                                P->enc_ln_g, rs, D);
    } else {
        /* memory is the last layer's output: d_mem is dy as it stands (and
         * from here on one of the two buffers the loop swaps) */
        dy = g->d_mem;
    }
    for (int l = N - 1; l >= 0; l--) {
        const EncoderLayer *w = &P->enc[l];
        EncoderLayer *gw = &G->enc[l];
        GpuEnc *e = &g->enc[l];
        const float *x0 = l == 0 ? g->src_emb : sub_output(&g->enc[l - 1].sub[1], pre);
        const float *x1 = sub_output(&e->sub[0], pre);
        const float *in;
        float *din;

        /* forward: x2 = LayerNorm(x1 + Dropout(FFN(x1))) */
        in = pre ? e->sub[1].ln : x1;
        din = sub_back_begin(g, &e->sub[1], dy, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, rs, D);
        ffn_backward_gpu(din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, g->d_hidden, g->d_pre,
                         g->d_sub, e->hidden, in, w->ffn_w1, w->ffn_w2, rs, D, F);
        sub_back_end(g, &e->sub[1], x1, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, rs, D);
        swap(&dy, &dx);

        /* forward: x1 = LayerNorm(x0 + Dropout(SelfAttn(x0))) */
        in = pre ? e->sub[0].ln : x0;
        din = sub_back_begin(g, &e->sub[0], dy, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, rs, D);
        mha_backward_gpu(din, din, &gw->self_attn, g->d_scratch, g->d_sub, &e->attn, &w->self_attn,
                         in, in, B, Ts, Ts, D, hh, dk, dv);
        sub_back_end(g, &e->sub[0], x0, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, rs, D);
        swap(&dy, &dx);
    }

    /* forward: src_emb = Dropout(E[src] * sqrt(D) + PE)   (use 3 of 3 of E) */
    cuda_zero(g->d_src_emb, ns * sizeof(float));
    cuda_dropout_backward(g->d_src_emb, dy, g->src_keep, ns);
    cuda_embed_backward(G->embed, g->d_src_emb, g->src, B, Ts, D, V);
}

/* ============================================================================
 * 4. Training step, reading back, one-op helpers
 * ========================================================================== */

TrainStatus gpu_train_step(GpuModel *g, const int *src, const int *tgt_in, const int *tgt_out,
                           int B, int Ts, int Tt, const TrainHyper *hp, float lr, int step,
                           StepStats *st) {
    const Config *c = &g->cfg;
    int V = c->vocab, N = B * Tt;
    assert(step >= 1);
    /* gradients accumulate (+=) in every backward, so start from zero */
    gpu_model_zero_grad(g);
    /* forward with dropout on (training = 1, Sec. 5.4) */
    const float *logp = gpu_model_forward(g, src, tgt_in, B, Ts, Tt, 1);
    /* label-smoothed cross-entropy over the non-padding targets (Sec. 5.4) */
    cuda_upload(g->tgt_out, tgt_out, (size_t)N * sizeof(int));
    int n_tokens = 0;
    float loss = cuda_smoothed_xent_forward(g->row_loss, logp, g->tgt_out, N, V, hp->eps_ls,
                                            c->pad_id, &n_tokens);
    if (st) {
        st->loss = loss;
        st->n_tokens = n_tokens;
        st->lr = 0;
        st->grad_norm = 0;
    }
    /* stop before anything changes, as train_step_batch does */
    if (!isfinite(loss)) return TRAIN_NONFINITE_LOSS;
    cuda_zero(g->dlogits, (size_t)N * V * sizeof(float));
    cuda_smoothed_xent_backward(g->dlogits, logp, g->tgt_out, N, V, hp->eps_ls, c->pad_id);
    gpu_model_backward(g, g->dlogits);
    /* one NaN or inf gradient makes the sum of squares NaN or inf */
    double sq = cuda_sum_squares(g->grads.mem, g->grads.n);
    if (!isfinite(sq)) return TRAIN_NONFINITE_GRAD;
    /* Adam over the one flat parameter array (same layout as the grads) */
    cuda_adam_update(g->params.mem, g->grads.mem, g->adam_m, g->adam_v, g->params.n, lr,
                     hp->beta1, hp->beta2, hp->adam_eps, step);
    if (st) {
        st->lr = lr;
        st->grad_norm = (float)sqrt(sq);
    }
    return TRAIN_OK;
}

void gpu_model_logp(const GpuModel *g, float *logp) {
    assert(g->decoded);
    cuda_download(logp, g->logp, (size_t)g->B * g->Tt * g->cfg.vocab * sizeof(float));
}

void gpu_model_attention(const GpuModel *g, AttnKind kind, int layer, float *weights) {
    assert(layer >= 0 && layer < g->cfg.N);
    int B = g->B, h = g->cfg.h;
    const float *w = NULL;
    size_t n = 0;
    switch (kind) {
    case ATTN_ENC_SELF:
        assert(g->encoded);
        w = g->enc[layer].attn.a.weights, n = (size_t)B * h * g->Ts * g->Ts;
        break;
    case ATTN_DEC_SELF:
        assert(g->decoded);
        w = g->dec[layer].self.a.weights, n = (size_t)B * h * g->Tt * g->Tt;
        break;
    case ATTN_DEC_CROSS:
        assert(g->decoded);
        w = g->dec[layer].cross.a.weights, n = (size_t)B * h * g->Tt * g->Ts;
        break;
    }
    cuda_download(weights, w, n * sizeof(float));
}

/* a device copy of n host bytes (NULL for NULL) */
static void *upload_new(const void *host, size_t bytes) {
    if (!host) return NULL;
    void *dev = cuda_alloc(bytes);
    cuda_upload(dev, host, bytes);
    return dev;
}

int gpu_sdpa_forward_host(float *out, float *weights, const float *Q, const float *K, const float *V,
                          const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v,
                          char *err, size_t errlen) {
    size_t nq = (size_t)B * h * Tq * d_k, nk = (size_t)B * h * Tk * d_k;
    size_t nv = (size_t)B * h * Tk * d_v, no = (size_t)B * h * Tq * d_v, nw = (size_t)B * h * Tq * Tk;
    float *dQ = upload_new(Q, nq * sizeof(float)), *dK = upload_new(K, nk * sizeof(float));
    float *dV = upload_new(V, nv * sizeof(float));
    uint8_t *dmask = upload_new(mask, (size_t)B * Tq * Tk);
    float *dout = cuda_alloc(no * sizeof(float)), *dw = cuda_alloc(nw * sizeof(float));
    cuda_sdpa_forward(dout, dw, dQ, dK, dV, dmask, B, h, Tq, Tk, d_k, d_v);
    cuda_download(out, dout, no * sizeof(float));
    cuda_download(weights, dw, nw * sizeof(float));
    cuda_free(dQ), cuda_free(dK), cuda_free(dV), cuda_free(dmask), cuda_free(dout), cuda_free(dw);
    return 0;
}

int gpu_mha_forward_host(float *out, float *weights, const MhaParams *p, const float *x_q,
                         const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v, char *err, size_t errlen) {
    size_t D = (size_t)d_model, wq = D * h * d_k, wv = D * h * d_v;
    MhaParams dp = {
        .w_q = upload_new(p->w_q, wq * sizeof(float)), .w_k = upload_new(p->w_k, wq * sizeof(float)),
        .w_v = upload_new(p->w_v, wv * sizeof(float)), .w_o = upload_new(p->w_o, wv * sizeof(float)),
    };
    float *dxq = upload_new(x_q, (size_t)B * Tq * D * sizeof(float));
    float *dxkv = upload_new(x_kv, (size_t)B * Tk * D * sizeof(float));
    uint8_t *dmask = upload_new(mask, (size_t)B * Tq * Tk);
    size_t no = (size_t)B * Tq * D;
    float *dout = cuda_alloc(no * sizeof(float));
    float *acts = cuda_alloc(gpu_mha_acts_size(B, Tq, Tk, h, d_k, d_v) * sizeof(float));
    GpuMhaActs m;
    gpu_mha_acts_layout(&m, acts, B, Tq, Tk, h, d_k, d_v);
    MhaActs a = m.a;
    mha_forward_gpu(dout, &m, &dp, dxq, dxkv, dmask, B, Tq, Tk, d_model, h, d_k, d_v);
    cuda_download(out, dout, no * sizeof(float));
    if (weights) cuda_download(weights, a.weights, (size_t)B * h * Tq * Tk * sizeof(float));
    cuda_free(dp.w_q), cuda_free(dp.w_k), cuda_free(dp.w_v), cuda_free(dp.w_o);
    cuda_free(dxq), cuda_free(dxkv), cuda_free(dmask), cuda_free(dout), cuda_free(acts);
    return 0;
}

#else /* ---- without CUDA: the same functions, saying so ------------------- */

#define NO_CUDA "this build has no CUDA (nvcc not found, or CUDA=0 / SANITIZE=1)"

static int no_cuda(char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", NO_CUDA);
    return 2;
}

/* Unreachable: no GpuModel can exist without CUDA. */
static void unreachable(const char *fn) {
    fprintf(stderr, "%s: %s\n", fn, NO_CUDA);
    abort();
}

int gpu_model_build(GpuModel **out, const Model *m, char *err, size_t errlen) {
    *out = NULL;
    return no_cuda(err, errlen);
}
void gpu_model_free(GpuModel *g) { assert(!g); }
void gpu_model_upload_params(GpuModel *g, const Model *m) { unreachable(__func__); }
void gpu_model_download_params(const GpuModel *g, Model *m) { unreachable(__func__); }
void gpu_model_download_grads(const GpuModel *g, Model *m) { unreachable(__func__); }
void gpu_model_upload_adam(GpuModel *g, const float *adam_m, const float *adam_v) { unreachable(__func__); }
void gpu_model_download_adam(const GpuModel *g, float *adam_m, float *adam_v) { unreachable(__func__); }
const float *gpu_model_forward(GpuModel *g, const int *src, const int *tgt, int B, int Ts, int Tt,
                               int training) {
    unreachable(__func__);
    return NULL;
}
void gpu_model_backward(GpuModel *g, const float *dlogits) { unreachable(__func__); }
void gpu_model_zero_grad(GpuModel *g) { unreachable(__func__); }
TrainStatus gpu_train_step(GpuModel *g, const int *src, const int *tgt_in, const int *tgt_out,
                           int B, int Ts, int Tt, const TrainHyper *hp, float lr, int step,
                           StepStats *st) {
    unreachable(__func__);
    return TRAIN_OK;
}
void gpu_model_logp(const GpuModel *g, float *logp) { unreachable(__func__); }
void gpu_model_attention(const GpuModel *g, AttnKind kind, int layer, float *weights) {
    unreachable(__func__);
}
int gpu_sdpa_forward_host(float *out, float *weights, const float *Q, const float *K, const float *V,
                          const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v,
                          char *err, size_t errlen) {
    return no_cuda(err, errlen);
}
int gpu_mha_forward_host(float *out, float *weights, const MhaParams *p, const float *x_q,
                         const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v, char *err, size_t errlen) {
    return no_cuda(err, errlen);
}

#endif
