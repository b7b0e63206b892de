/* model.c - the encoder-decoder Transformer of Figure 1, forward and backward.
 *
 * Read model.h first for the picture. This file has five parts:
 *   1. Config: the base model of Table 3, validation, the parameter count.
 *   2. Parameters: one allocation, named tensors in a fixed order, their
 *      initialisation (the embedding N(0, 1/d_model), Xavier elsewhere).
 *   3. Activations: one allocation sized at build, laid out per call.
 *   4. Forward: embed -> encoder stack -> decoder stack -> x E^T -> log-softmax.
 *   5. Backward: the same steps in reverse, each quoting the line it undoes.
 *
 * Every op is called through m->be, the backend table (backend.h): on the
 * CPU `be->layernorm_forward` IS nn.c's layernorm_forward; with --device
 * cuda it is the kernel in cuda/. This file is the only model; nothing in
 * it knows which backend it runs on.
 *
 * The order of the parameter tensors (also the order in a checkpoint):
 *   embed                                              (vocab, d_model)
 *   pos_embed                                          (max_len, d_model), POS_LEARNED only
 *   for i in 0..N-1:
 *     encoder.i.self_attn.{w_q,w_k,w_v,w_o}            (d_model,h*d_k) x2, (d_model,h*d_v), (h*d_v,d_model)
 *     encoder.i.ln1.{gamma,beta}                       (d_model)
 *     encoder.i.ffn.{w1,b1,w2,b2}                      (d_model,d_ff) (d_ff) (d_ff,d_model) (d_model)
 *     encoder.i.ln2.{gamma,beta}
 *   encoder.ln.{gamma,beta}                            pre-LN only
 *   for i in 0..N-1:
 *     decoder.i.self_attn.{w_q,w_k,w_v,w_o}, decoder.i.ln1.{gamma,beta}
 *     decoder.i.cross_attn.{w_q,w_k,w_v,w_o}, decoder.i.ln2.{gamma,beta}
 *     decoder.i.ffn.{w1,b1,w2,b2}, decoder.i.ln3.{gamma,beta}
 *   decoder.ln.{gamma,beta}                            pre-LN only
 */
#include "model/model.h"
#include "ref/attention.h"
#include "core/dropout_mask.h"
#include "model/backend.h"
#include "core/fail.h"
#include "ref/nn.h"
#include "fast/gemm.h"
#include "ref/ops.h"
#include "fast/parallel.h"
#include "core/tensor.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================================
 * 1. Config
 * ========================================================================== */

Config config_base(void) {
    Config c = {
        .N = 6, .d_model = 512, .d_ff = 2048, .h = 8, .d_k = 64, .d_v = 64,
        .vocab = 37000, .max_len = 512, .dropout = 0.1f, .pre_ln = 0, .pad_id = 0,
    };
    return c;
}

static int check_range(const char *what, int v, int lo, int hi, char *err, size_t errlen) {
    if (v < lo || v > hi) return fail(err, errlen, "%s is %d; it must be between %d and %d", what, v, lo, hi);
    return 0;
}

/* Parameters of one multi-head attention (Sec. 3.2.2, no biases): W^Q and
 * W^K are (d_model, h*d_k), W^V is (d_model, h*d_v), W^O is (h*d_v, d_model). */
static size_t mha_params(const Config *c) {
    size_t D = (size_t)c->d_model, hk = (size_t)c->h * c->d_k, hv = (size_t)c->h * c->d_v;
    return 2 * D * hk + 2 * D * hv;
}

/* FFN (Eq. 2): W1 (d_model,d_ff) + b1 (d_ff) + W2 (d_ff,d_model) + b2 (d_model). */
static size_t ffn_params(const Config *c) {
    size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    return 2 * D * F + F + D;
}

size_t model_param_count(const Config *c) {
    size_t D = (size_t)c->d_model, ln = 2 * D;                   /* gamma, beta */
    size_t enc = mha_params(c) + ffn_params(c) + 2 * ln;         /* 2 sub-layers */
    size_t dec = 2 * mha_params(c) + ffn_params(c) + 3 * ln;     /* 3 sub-layers */
    size_t embed = (size_t)c->vocab * D;                         /* shared, once */
    size_t final_ln = c->pre_ln ? 2 * ln : 0;
    size_t pos = c->pos == POS_LEARNED ? (size_t)c->max_len * D : 0;  /* Table 3 (E) */
    return embed + pos + (size_t)c->N * (enc + dec) + final_ln;
}

int config_validate(const Config *c, char *err, size_t errlen) {
    int rc;
    if ((rc = check_range("N (layers)", c->N, 1, MODEL_MAX_N, err, errlen))) return rc;
    if ((rc = check_range("d_model", c->d_model, 1, MODEL_MAX_WIDTH, err, errlen))) return rc;
    if ((rc = check_range("d_ff", c->d_ff, 1, MODEL_MAX_WIDTH, err, errlen))) return rc;
    if ((rc = check_range("h (heads)", c->h, 1, MODEL_MAX_HEADS, err, errlen))) return rc;
    if ((rc = check_range("d_k", c->d_k, 1, MODEL_MAX_WIDTH, err, errlen))) return rc;
    if ((rc = check_range("d_v", c->d_v, 1, MODEL_MAX_WIDTH, err, errlen))) return rc;
    if ((rc = check_range("vocab", c->vocab, 2, MODEL_MAX_VOCAB, err, errlen))) return rc;
    if ((rc = check_range("max_len", c->max_len, 1, MODEL_MAX_LEN, err, errlen))) return rc;
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return fail(err, errlen, "dropout is %g; it must be in [0, 1)", (double)c->dropout);
    if (c->pre_ln != 0 && c->pre_ln != 1)
        return fail(err, errlen, "pre_ln is %d; it must be 0 (post-LN, the paper) or 1 (pre-LN)", c->pre_ln);
    if (c->pos != POS_SINUSOID && c->pos != POS_LEARNED)
        return fail(err, errlen, "pos is %d; it must be 0 (sinusoids, the paper) or 1 (learned positional "
                    "embeddings, Table 3 (E))", c->pos);
    if (c->pad_id < -1 || c->pad_id >= c->vocab)
        return fail(err, errlen, "pad_id is %d; it must be -1 (no padding) or a token id in 0..%d",
                    c->pad_id, c->vocab - 1);
    /* Each factor is bounded above, so this product cannot overflow 64 bits. */
    size_t n = model_param_count(c);
    if (n > MODEL_MAX_PARAMS)
        return fail(err, errlen, "this configuration has %.3g billion parameters (%.3g GB of float32); "
                    "the limit is %.3g billion", n / 1e9, n * 4.0 / 1e9, MODEL_MAX_PARAMS / 1e9);
    return 0;
}

/* ============================================================================
 * 2. Parameters
 * ========================================================================== */

size_t named_tensor_numel(const NamedTensor *t) {
    return t->ndim == 1 ? (size_t)t->shape[0] : (size_t)t->shape[0] * (size_t)t->shape[1];
}

const NamedTensor *params_find(const Params *p, const char *name) {
    for (int i = 0; i < p->n_tensors; i++)
        if (!strcmp(p->tensors[i].name, name)) return &p->tensors[i];
    return NULL;
}

static int tensors_per_model(const Config *c) {
    /* encoder layer: 4 attention + 2 LN + 4 FFN + 2 LN = 12;
     * decoder layer: 4 + 2 + 4 + 2 + 4 + 2 = 18; pre-LN: 2 final LNs of 2 */
    return 1 + (c->pos == POS_LEARNED) + 12 * c->N + 18 * c->N + (c->pre_ln ? 4 : 0);
}

/* Hands out consecutive slices of p->mem and records each as a NamedTensor. */
typedef struct {
    Params *p;
    size_t used;
} Carver;

static float *carve(Carver *cv, int rows, int cols, const char *fmt, ...) {
    Params *p = cv->p;
    NamedTensor *t = &p->tensors[p->n_tensors++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->data = p->mem + cv->used;
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 1;
    cv->used += named_tensor_numel(t);
    return t->data;
}

static void carve_mha(Carver *cv, MhaParams *a, const Config *c, const char *prefix) {
    int D = c->d_model, hk = c->h * c->d_k, hv = c->h * c->d_v;
    a->w_q = carve(cv, D, hk, "%s.w_q", prefix);
    a->w_k = carve(cv, D, hk, "%s.w_k", prefix);
    a->w_v = carve(cv, D, hv, "%s.w_v", prefix);
    a->w_o = carve(cv, hv, D, "%s.w_o", prefix);
}

/* Points every field of p into p->mem (n floats, already allocated) in the
 * order documented at the top of this file. enc/dec/tensors are allocated. */
static int params_layout(Params *p, const Config *c) {
    int N = c->N, D = c->d_model, F = c->d_ff;
    p->enc = calloc((size_t)N, sizeof *p->enc);
    p->dec = calloc((size_t)N, sizeof *p->dec);
    p->tensors = calloc((size_t)tensors_per_model(c), sizeof *p->tensors);
    if (!p->enc || !p->dec || !p->tensors) return -1;
    p->n_tensors = 0;
    Carver cv = {p, 0};
    char pre[40];
    p->embed = carve(&cv, c->vocab, D, "embed");
    p->pos_embed = c->pos == POS_LEARNED ? carve(&cv, c->max_len, D, "pos_embed") : NULL;
    for (int i = 0; i < N; i++) {
        EncoderLayer *l = &p->enc[i];
        snprintf(pre, sizeof pre, "encoder.%d.self_attn", i);
        carve_mha(&cv, &l->self_attn, c, pre);
        l->ln1_g = carve(&cv, D, 0, "encoder.%d.ln1.gamma", i);
        l->ln1_b = carve(&cv, D, 0, "encoder.%d.ln1.beta", i);
        l->ffn_w1 = carve(&cv, D, F, "encoder.%d.ffn.w1", i);
        l->ffn_b1 = carve(&cv, F, 0, "encoder.%d.ffn.b1", i);
        l->ffn_w2 = carve(&cv, F, D, "encoder.%d.ffn.w2", i);
        l->ffn_b2 = carve(&cv, D, 0, "encoder.%d.ffn.b2", i);
        l->ln2_g = carve(&cv, D, 0, "encoder.%d.ln2.gamma", i);
        l->ln2_b = carve(&cv, D, 0, "encoder.%d.ln2.beta", i);
    }
    if (c->pre_ln) {
        p->enc_ln_g = carve(&cv, D, 0, "encoder.ln.gamma");
        p->enc_ln_b = carve(&cv, D, 0, "encoder.ln.beta");
    }
    for (int i = 0; i < N; i++) {
        DecoderLayer *l = &p->dec[i];
        snprintf(pre, sizeof pre, "decoder.%d.self_attn", i);
        carve_mha(&cv, &l->self_attn, c, pre);
        l->ln1_g = carve(&cv, D, 0, "decoder.%d.ln1.gamma", i);
        l->ln1_b = carve(&cv, D, 0, "decoder.%d.ln1.beta", i);
        snprintf(pre, sizeof pre, "decoder.%d.cross_attn", i);
        carve_mha(&cv, &l->cross_attn, c, pre);
        l->ln2_g = carve(&cv, D, 0, "decoder.%d.ln2.gamma", i);
        l->ln2_b = carve(&cv, D, 0, "decoder.%d.ln2.beta", i);
        l->ffn_w1 = carve(&cv, D, F, "decoder.%d.ffn.w1", i);
        l->ffn_b1 = carve(&cv, F, 0, "decoder.%d.ffn.b1", i);
        l->ffn_w2 = carve(&cv, F, D, "decoder.%d.ffn.w2", i);
        l->ffn_b2 = carve(&cv, D, 0, "decoder.%d.ffn.b2", i);
        l->ln3_g = carve(&cv, D, 0, "decoder.%d.ln3.gamma", i);
        l->ln3_b = carve(&cv, D, 0, "decoder.%d.ln3.beta", i);
    }
    if (c->pre_ln) {
        p->dec_ln_g = carve(&cv, D, 0, "decoder.ln.gamma");
        p->dec_ln_b = carve(&cv, D, 0, "decoder.ln.beta");
    }
    assert(cv.used == p->n && p->n_tensors == tensors_per_model(c));
    return 0;
}

static void params_free(Params *p) {
    free(p->mem);
    free(p->enc);
    free(p->dec);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

static int params_alloc(Params *p, const Config *c) {
    memset(p, 0, sizeof *p);
    p->n = model_param_count(c);
    /* weights: written first by their initialisation, gradients by the
     * zeroing before each step, both in the calling thread: not touched */
    p->mem = calloc_big(p->n, sizeof(float), 0);
    if (!p->mem || params_layout(p, c)) {
        params_free(p);
        return -1;
    }
    return 0;
}

/* The initialisation, tensor by tensor (the paper does not give one; its
 * code, tensor2tensor, and fairseq, PyTorch do what is said here):
 *
 *   embed (V, d_model)     N(0, d_model^-1/2). The embedding is multiplied
 *                          by sqrt(d_model) on the way in (Sec. 3.4), so a
 *                          word enters with entries of std 1, the size of
 *                          the positional encoding's sines and cosines
 *                          (Sec. 3.5) it is added to. As the output
 *                          projection (tied, Sec. 3.4) it gives logits of
 *                          std |x| d_model^-1/2 = 1 for a LayerNorm output x.
 *                          Xavier over (V, d_model) would give std
 *                          sqrt(2/(V+d_model)): 0.031 at V = 2000, d = 64,
 *                          a word of std 0.25 beside a PE of amplitude 1,
 *                          drowned: the model sees positions, not words.
 *   W_Q, W_K, W_V          Xavier-uniform with gain 1/sqrt(2), as fairseq
 *   (d_model, h d_k)       does ("convergence much better with the scaled
 *                          initialization") and as PyTorch's one packed
 *                          (3 d_model, d_model) in_proj_weight gets: U(-a, a),
 *                          a = sqrt(3 / (d_model + h d_k)). Full Xavier on each
 *                          gives q and k entries of variance 1, so the scores
 *                          q.k / sqrt(d_k) start with std 1 (Eq. 1) and the
 *                          softmax already picks favourites among random
 *                          keys; at 1/sqrt(2) each, the scores start with
 *                          std 1/2 and attention near uniform. On the Ding
 *                          corpus (chapter 11's README) that was the last
 *                          gap to PyTorch: dev perplexity 57.2 with full
 *                          Xavier against 52.5 with the gain (PyTorch: 52.7).
 *   every other matrix     Xavier/Glorot uniform (Glorot & Bengio 2010):
 *   (fan_in, fan_out)      U(-a, a), a = sqrt(6 / (fan_in + fan_out)), which
 *                          keeps the variance of activations and gradients
 *                          about the same from layer to layer.
 *   LayerNorm gamma, beta  1 and 0: each sub-layer starts as a plain norm.
 *   biases                 0.
 *
 * Tensors are filled in their fixed order from one Rng, so a seed fixes
 * every weight. */
static void params_init(Params *p, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < p->n_tensors; i++) {
        NamedTensor *t = &p->tensors[i];
        size_t n = named_tensor_numel(t);
        if (t == &p->tensors[0]) {   /* "embed": carved first (params_layout) */
            rng_fill_normal(&rng, t->data, n, 0.0f, 1.0f / sqrtf((float)t->shape[1]));
        } else if (t->ndim == 2) {
            float a = sqrtf(6.0f / (float)(t->shape[0] + t->shape[1]));
            const char *dot = strrchr(t->name, '.');
            if (dot && (!strcmp(dot, ".w_q") || !strcmp(dot, ".w_k") || !strcmp(dot, ".w_v"))) a *= sqrtf(0.5f);
            rng_fill_uniform(&rng, t->data, n, -a, a);
        } else {
            const char *dot = strrchr(t->name, '.');
            float v = dot && !strcmp(dot, ".gamma") ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; j++) t->data[j] = v;
        }
    }
}

/* ============================================================================
 * 3. Activations
 *
 * One allocation holds three regions, laid out again by every call for the
 * actual B, Ts, Tt (the pointers move, nothing is allocated), one after
 * the other from the start of the block:
 *   encoder region  written by model_encode          (depends on B, Ts)
 *   decoder region  written by model_decode          (B, Ts, Tt), after the encoder's
 *   backward region gradients flowing through layers (B, Ts, Tt), after both
 * Token ids and byte masks are carved out of the same float block. The
 * block is the backend's memory (device memory on a GPU): the counting
 * pass (base NULL) sizes it, model_acts_floats(B, Ts, Tt) = the three
 * regions of one batch. Its size is the largest such sum of the batches
 * the caller will run (model_build_cap), not the sum for the most rows of
 * any batch times the longest of any (model_build's per-dimension limits):
 * under a token budget, 96 short rows or 24 long ones, never 96 long ones.
 * Every call checks that its own three regions fit (acts_fit). Masks are
 * built on the host (attention.h's mask_* functions) in small host buffers
 * and uploaded.
 * ========================================================================== */

/* One residual sub-layer, Sec. 3.1:  y = LayerNorm(x + Dropout(Sublayer(x)))
 * (pre-LN: y = x + Dropout(Sublayer(LayerNorm(x)))). */
typedef struct {
    float *ln;          /* (B,T,D) LayerNorm output                             */
    float *mean, *rstd; /* (B*T)   saved by LayerNorm for backward               */
    float *out;         /* (B,T,D) Sublayer output, dropout applied in place     */
    float *keep;        /* (B,T,D) dropout scales (0 or 1/(1-P_drop))            */
    float *res;         /* (B,T,D) x + out                                      */
} SubActs;

typedef struct {
    SubActs sub[2];     /* 0 self-attention, 1 FFN                              */
    MhaActs attn;       /* (Ts,Ts)                                              */
    float *hidden;      /* (B,Ts,d_ff) FFN's ReLU output                        */
} EncActs;

typedef struct {
    SubActs sub[3];     /* 0 masked self-attention, 1 cross-attention, 2 FFN    */
    MhaActs self, cross;/* (Tt,Tt), (Tt,Ts)                                     */
    float *hidden;      /* (B,Tt,d_ff)                                          */
} DecActs;

struct ModelActs {
    float *mem;                 /* (cap) the one allocation                      */
    size_t cap;                 /* floats in mem: the build's capacity           */
    size_t used_enc, used_dec;  /* floats the last encode's and decode's regions
                                   take: where the next region starts            */
    EncActs *enc;               /* [N] (pointer tables, not activations)         */
    DecActs *dec;               /* [N]                                           */
    int encoded, decoded;       /* which halves hold a valid forward pass        */
    int backward_done;
    uint64_t drop_key;          /* dropout key of this half-pass (dropout_mask.h) */
    uint32_t drop_site;         /* dropout sites used so far in it               */
    uint64_t drop_off;          /* element where this batch starts in the global
                                   batch's tensors (Model.drop_row0), else 0    */

    /* host memory, whatever the backend: what masks are built in, and what
     * the inspection functions hand out */
    int *h_src;                 /* (max_B,max_Ts) the last source ids            */
    uint8_t *h_enc_mask, *h_dec_mask, *h_cross_mask, *h_pad;  /* as below        */
    float *h_next;              /* (max_B, vocab) model_next_logp's rows         */

    /* encoder region */
    int *src;                   /* (B,Ts) copy of the source ids                 */
    float *src_emb, *src_keep;  /* (B,Ts,D) embedding*sqrt(D)+PE after dropout   */
    uint8_t *enc_mask;          /* (B,Ts,Ts) padding keys blocked, or NULL       */
    float *enc_ln, *enc_mean, *enc_rstd;  /* final LayerNorm (pre-LN only)       */
    const float *memory;        /* (B,Ts,D) the encoder's output                 */

    /* decoder region */
    int *tgt;                   /* (B,Tt)                                        */
    float *tgt_emb, *tgt_keep;  /* (B,Tt,D)                                      */
    uint8_t *dec_mask;          /* (B,Tt,Tt) causal AND target padding           */
    uint8_t *cross_mask;        /* (B,Tt,Ts) source padding, or NULL             */
    uint8_t *pad_tmp;           /* (B,Tt,Tt) target padding, before the AND      */
    float *dec_ln, *dec_mean, *dec_rstd;  /* final LayerNorm (pre-LN only)       */
    const float *dec_out;       /* (B,Tt,D) input of the output projection       */
    float *logits, *logp;       /* (B*Tt, vocab)                                 */

    /* backward region: (B,T,D) with T = max(Ts, Tt) unless noted */
    float *d_y, *d_x;           /* gradient at a sub-layer's output / input      */
    float *d_res, *d_sub;       /* pre-LN's LayerNorm input; Sublayer output      */
    float *d_mem;               /* (B,Ts,D) memory, summed over cross-attentions */
    float *d_hidden;            /* (B,T,d_ff)                                    */
    float *d_scratch;           /* mha_backward's work space                     */
    float *d_src_emb, *d_tgt_emb;  /* model_input_grad                           */
    float *ones;                /* (B) all 1: sums the learned PE's gradient over the batch */
    float *h_ones;              /* (max_B) host copy of it                       */
};

/* A bump allocator over one region. With base == NULL it only counts, which
 * is how build sizes each region: the same code computes size and layout. */
typedef struct {
    float *base;
    size_t used;
} Bump;

static float *take(Bump *b, size_t n) {
    float *p = b->base ? b->base + b->used : NULL;
    b->used += (n + 15) & ~(size_t)15;   /* 64-byte alignment for SIMD */
    return p;
}
static int *take_ints(Bump *b, size_t n) { return (int *)take(b, n); }
static uint8_t *take_bytes(Bump *b, size_t n) { return (uint8_t *)take(b, (n + 3) / 4); }

static void take_sub(Bump *b, SubActs *s, size_t rows, size_t D) {
    s->ln = take(b, rows * D);
    s->mean = take(b, rows);
    s->rstd = take(b, rows);
    s->out = take(b, rows * D);
    s->keep = take(b, rows * D);
    s->res = take(b, rows * D);
}

static void take_mha(Bump *b, MhaActs *a, const Config *c, int B, int Tq, int Tk) {
    size_t n = mha_acts_size(B, Tq, Tk, c->h, c->d_k, c->d_v);
    float *buf = take(b, n);
    if (buf) mha_acts_layout(a, buf, B, Tq, Tk, c->h, c->d_k, c->d_v);
}

static size_t layout_encoder(ModelActs *a, const Config *c, float *base, int B, int Ts) {
    Bump b = {base, 0};
    size_t rows = (size_t)B * Ts, D = (size_t)c->d_model;
    a->src = take_ints(&b, rows);
    a->src_emb = take(&b, rows * D);
    a->src_keep = take(&b, rows * D);
    a->enc_mask = take_bytes(&b, rows * (size_t)Ts);
    EncActs count_only;   /* model_acts_floats counts with no per-layer tables */
    for (int l = 0; l < c->N; l++) {
        EncActs *e = a->enc ? &a->enc[l] : &count_only;
        take_sub(&b, &e->sub[0], rows, D);
        take_sub(&b, &e->sub[1], rows, D);
        take_mha(&b, &e->attn, c, B, Ts, Ts);
        e->hidden = take(&b, rows * (size_t)c->d_ff);
    }
    a->enc_ln = take(&b, rows * D);
    a->enc_mean = take(&b, rows);
    a->enc_rstd = take(&b, rows);
    return b.used;
}

static size_t layout_decoder(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt) {
    Bump b = {base, 0};
    size_t rows = (size_t)B * Tt, D = (size_t)c->d_model;
    a->tgt = take_ints(&b, rows);
    a->tgt_emb = take(&b, rows * D);
    a->tgt_keep = take(&b, rows * D);
    a->dec_mask = take_bytes(&b, rows * (size_t)Tt);
    a->cross_mask = take_bytes(&b, rows * (size_t)Ts);
    a->pad_tmp = take_bytes(&b, rows * (size_t)Tt);
    DecActs count_only;
    for (int l = 0; l < c->N; l++) {
        DecActs *d = a->dec ? &a->dec[l] : &count_only;
        for (int s = 0; s < 3; s++) take_sub(&b, &d->sub[s], rows, D);
        take_mha(&b, &d->self, c, B, Tt, Tt);
        take_mha(&b, &d->cross, c, B, Tt, Ts);
        d->hidden = take(&b, rows * (size_t)c->d_ff);
    }
    a->dec_ln = take(&b, rows * D);
    a->dec_mean = take(&b, rows);
    a->dec_rstd = take(&b, rows);
    a->logits = take(&b, rows * (size_t)c->vocab);
    a->logp = take(&b, rows * (size_t)c->vocab);
    return b.used;
}

static size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

static size_t layout_backward(ModelActs *a, const Config *c, float *base, int B, int Ts, int Tt) {
    Bump b = {base, 0};
    size_t T = (size_t)(Ts > Tt ? Ts : Tt), D = (size_t)c->d_model, rows = (size_t)B * T;
    a->d_y = take(&b, rows * D);
    a->d_x = take(&b, rows * D);
    a->d_res = take(&b, rows * D);
    a->d_sub = take(&b, rows * D);
    a->d_mem = take(&b, (size_t)B * Ts * D);
    a->d_hidden = take(&b, rows * (size_t)c->d_ff);
    a->d_scratch = take(&b, max3(mha_scratch_size(B, Ts, Ts, c->h, c->d_k, c->d_v),
                                 mha_scratch_size(B, Tt, Tt, c->h, c->d_k, c->d_v),
                                 mha_scratch_size(B, Tt, Ts, c->h, c->d_k, c->d_v)));
    a->d_src_emb = take(&b, (size_t)B * Ts * D);
    a->d_tgt_emb = take(&b, (size_t)B * Tt * D);
    a->ones = take(&b, (size_t)B);
    return b.used;
}

size_t model_acts_floats(const Config *c, int B, int Ts, int Tt) {
    if (B < 1 || Ts < 1 || Tt < 1 || config_validate(c, NULL, 0)) return 0;
    /* A generous upper bound in double first (every term of the layout
     * below, at T = max(Ts, Tt), twice over): sizes whose count would
     * overflow size_t are answered SIZE_MAX before any size_t product. */
    double T = Ts > Tt ? Ts : Tt, rows = (double)B * T, D = c->d_model, F = c->d_ff, V = c->vocab;
    double attn = c->h * (2.0 * c->d_k + 2.0 * c->d_v + T);
    double bound = 2 * rows * (c->N * (20 * D + 2 * F + 20 + 3 * attn) + 10 * D + F + attn + 2 * V + 2 * T + 20)
                 + 1024.0 * (c->N + 1);
    if (bound > 1e18) return SIZE_MAX;
    ModelActs a = {0};   /* no per-layer tables, no base: the layouts only count */
    return layout_encoder(&a, c, NULL, B, Ts) + layout_decoder(&a, c, NULL, B, Ts, Tt) +
           layout_backward(&a, c, NULL, B, Ts, Tt);
}

/* Every call's regions must fit the block: a batch beyond the capacity the
 * model was built with is a programming error (model_check_sizes tells a
 * caller beforehand, with a message), so it stops here, shapes printed,
 * before anything is written past the end. need: floats from the start of
 * the block to the end of the caller's region. */
static void acts_fit(const Model *m, const char *who, size_t need, int B, int Ts, int Tt) {
    if (need <= m->acts->cap) return;
    char tgt[40] = " (the encoder)";
    if (Tt > 0) snprintf(tgt, sizeof tgt, " / Tt=%d target", Tt);
    fprintf(stderr, "%s: a batch of B=%d sequences of Ts=%d source%s tokens needs %zu floats of activations; "
            "the model holds %zu (built for max_B=%d, max_Ts=%d, max_Tt=%d; model_acts_floats of the largest "
            "batch sizes a model_build_cap)\n", who, B, Ts, tgt, need, m->acts->cap, m->max_B, m->max_Ts, m->max_Tt);
    assert(0 && "batch beyond the activation capacity the model was built with");
    abort();   /* even with NDEBUG: never write past the block */
}

/* Physical memory, for refusing builds that would only end in the OOM killer. */
static double phys_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return (pages > 0 && page > 0) ? (double)pages * (double)page : 8e9;
}

/* ============================================================================
 * Build and free
 * ========================================================================== */

/* The backend's view of the model: the weights, gradients and PE table
 * shared with it (the CPU: the host arrays themselves; a GPU: device copies
 * laid out the same way, so every named pointer has a twin), and the one
 * activation block in its memory, sized by the counting pass above. */
static int views_make(Model *m, const Backend *be) {
    const Config *c = &m->cfg;
    ModelActs *a = m->acts;
    size_t n = m->params.n, npe = (size_t)c->max_len * c->d_model;
    m->be = be;
    m->w.mem = be->share(m->params.mem, n * sizeof(float));
    m->dw.mem = be->share(m->grads.mem, n * sizeof(float));
    m->w_pe = be->share(m->pe, npe * sizeof(float));
    a->mem = be->alloc(a->cap * sizeof(float));
    m->w.n = m->dw.n = n;
    if (!m->w.mem || !m->dw.mem || !m->w_pe || !a->mem) return -1;
    if (params_layout(&m->w, c) || params_layout(&m->dw, c)) return -1;
    return 0;
}

static void views_free(Model *m) {
    const Backend *be = m->be;
    if (!be) return;
    if (m->w.mem) be->unshare(m->w.mem, m->params.mem);
    if (m->dw.mem) be->unshare(m->dw.mem, m->grads.mem);
    if (m->w_pe) be->unshare(m->w_pe, m->pe);
    m->w.mem = m->dw.mem = NULL;
    params_free(&m->w);        /* the pointer tables; mem is NULL here */
    params_free(&m->dw);
    if (m->acts) {
        be->free(m->acts->mem);
        m->acts->mem = NULL;
        m->acts->encoded = m->acts->decoded = m->acts->backward_done = 0;
    }
    m->w_pe = NULL;
    m->be = NULL;
}

int model_build(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt,
                uint64_t seed, char *err, size_t errlen) {
    return model_build_cap(m, c, max_B, max_Ts, max_Tt, model_acts_floats(c, max_B, max_Ts, max_Tt), seed, err,
                           errlen);
}

int model_build_cap(Model *m, const Config *c, int max_B, int max_Ts, int max_Tt, size_t acts_floats,
                    uint64_t seed, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    int rc = config_validate(c, err, errlen);
    if (rc) return rc;
    if (max_B < 1 || max_Ts < 1 || max_Tt < 1)
        return fail(err, errlen, "batch capacity must be at least 1 sequence of 1 token (got B=%d, Ts=%d, Tt=%d)",
                    max_B, max_Ts, max_Tt);
    if (max_Ts > c->max_len || max_Tt > c->max_len)
        return fail(err, errlen, "sequences of %d tokens do not fit max_len = %d (the rows of the "
                    "positional-encoding table)", max_Ts > max_Tt ? max_Ts : max_Tt, c->max_len);
    /* no batch within the per-dimension limits needs more than the largest
     * of them: a bigger block would only be memory nobody uses */
    size_t most = model_acts_floats(c, max_B, max_Ts, max_Tt), least = model_acts_floats(c, 1, 1, 1);
    if (acts_floats > most) acts_floats = most;
    if (acts_floats < least)
        return fail(err, errlen, "an activation capacity of %zu floats holds no batch; one sequence of one token "
                    "needs %zu (model_acts_floats)", acts_floats, least);

    /* Size everything in double first: a product of large ints must be
     * caught before it overflows size_t or asks malloc for the impossible
     * (model_acts_floats answers SIZE_MAX for such sizes). The host's masks
     * are bytes, (max_B, T, T) four times. */
    double T = max_Ts > max_Tt ? max_Ts : max_Tt;
    double est = 2.0 * (double)model_param_count(c) + (double)acts_floats
               + (double)max_B * T * T + (double)max_B * c->vocab
               + (double)c->max_len * c->d_model;                 /* the PE table */
    double limit = 0.75 * phys_bytes();
    if (est * sizeof(float) > limit)
        return fail(err, errlen, "this model and batch capacity need about %.3g GB, more than this machine "
                    "can give (%.3g GB); use smaller sizes", est * 4 / 1e9, limit / 1e9);

    m->cfg = *c;
    m->max_B = max_B, m->max_Ts = max_Ts, m->max_Tt = max_Tt;
    m->acts_floats = acts_floats;
    rng_seed(&m->dropout_rng, seed ^ 0x9E3779B97F4A7C15ull);
    ModelActs *a = calloc(1, sizeof *a);
    m->acts = a;
    if (!a) goto oom;
    a->enc = calloc((size_t)c->N, sizeof *a->enc);
    a->dec = calloc((size_t)c->N, sizeof *a->dec);
    if (!a->enc || !a->dec) goto oom;
    a->cap = acts_floats;
    size_t Tm = (size_t)(max_Ts > max_Tt ? max_Ts : max_Tt), masks = (size_t)max_B * Tm * Tm;
    a->h_src = malloc((size_t)max_B * max_Ts * sizeof(int));
    a->h_enc_mask = malloc(masks), a->h_dec_mask = malloc(masks);
    a->h_cross_mask = malloc(masks), a->h_pad = malloc(masks);
    a->h_next = malloc((size_t)max_B * c->vocab * sizeof(float));
    a->h_ones = malloc((size_t)max_B * sizeof(float));
    if (!a->h_src || !a->h_enc_mask || !a->h_dec_mask || !a->h_cross_mask || !a->h_pad || !a->h_next ||
        !a->h_ones)
        goto oom;
    for (int i = 0; i < max_B; i++) a->h_ones[i] = 1.0f;
    m->pe = malloc((size_t)c->max_len * c->d_model * sizeof(float));
    if (!m->pe) goto oom;
    if (params_alloc(&m->params, c) || params_alloc(&m->grads, c)) goto oom;
    posenc_fill(m->pe, c->max_len, c->d_model);
    params_init(&m->params, seed);
    if (views_make(m, backend_cpu())) goto oom;
    return 0;
oom:
    model_free(m);
    return fail(err, errlen, "out of memory building the model (%zu parameters, batch capacity %d x %d/%d)",
                model_param_count(c), max_B, max_Ts, max_Tt);
}

void model_free(Model *m) {
    if (!m) return;
    views_free(m);
    params_free(&m->params);
    params_free(&m->grads);
    free(m->pe);
    if (m->acts) {
        ModelActs *a = m->acts;
        free(a->enc);
        free(a->dec);
        free(a->h_src);
        free(a->h_enc_mask), free(a->h_dec_mask), free(a->h_cross_mask), free(a->h_pad);
        free(a->h_next);
        free(a->h_ones);
        free(a);
    }
    memset(m, 0, sizeof *m);
}

int model_to(Model *m, const Backend *be, char *err, size_t errlen) {
    if (be == m->be) return 0;
    model_pull(m);                 /* the host arrays hold the latest weights */
    views_free(m);
    if (views_make(m, be)) {
        views_free(m);
        int rc = views_make(m, backend_cpu());
        (void)rc;                  /* the CPU's views are the host arrays: nothing to allocate but acts */
        return fail(err, errlen, "out of %s memory for the model (%zu parameters, batch capacity %d x %d/%d)",
                    be->name, m->params.n, m->max_B, m->max_Ts, m->max_Tt);
    }
    return 0;
}

void model_pull(Model *m) {
    m->be->download(m->params.mem, m->w.mem, m->params.n * sizeof(float));
    m->be->download(m->grads.mem, m->dw.mem, m->grads.n * sizeof(float));
}

void model_push(Model *m) {
    m->be->upload(m->w.mem, m->params.mem, m->params.n * sizeof(float));
}

void model_read(const Model *m, void *host, const void *p, size_t bytes) {
    m->be->download(host, p, bytes);
}

void model_zero_grad(Model *m) {
    m->be->zero(m->dw.mem, m->dw.n * sizeof(float));
}

int model_check_tokens(const Config *c, const int *ids, int n, const char *what,
                       char *err, size_t errlen) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab)
            return fail(err, errlen, "%s: token %d (position %d) is %d, outside the vocabulary 0..%d",
                        what, i + 1, i, ids[i], c->vocab - 1);
    return 0;
}

int model_check_sizes(const Model *m, int B, int Ts, int Tt, char *err, size_t errlen) {
    if (B < 1 || Ts < 1 || Tt < 1)
        return fail(err, errlen, "need at least 1 sequence of 1 token (got B=%d, Ts=%d, Tt=%d)", B, Ts, Tt);
    if (Ts > m->cfg.max_len || Tt > m->cfg.max_len)
        return fail(err, errlen, "a sequence of %d tokens is longer than max_len = %d",
                    Ts > Tt ? Ts : Tt, m->cfg.max_len);
    if (B > m->max_B || Ts > m->max_Ts || Tt > m->max_Tt)
        return fail(err, errlen, "batch %d x (%d source, %d target) tokens exceeds the capacity the model "
                    "was built for (%d x (%d, %d))", B, Ts, Tt, m->max_B, m->max_Ts, m->max_Tt);
    size_t need = model_acts_floats(&m->cfg, B, Ts, Tt);
    if (need > m->acts->cap)
        return fail(err, errlen, "batch %d x (%d source, %d target) tokens needs %.1f MB of activations; the "
                    "model was built with room for %.1f MB (its largest batch)", B, Ts, Tt, need * 4.0 / 1e6,
                    m->acts->cap * 4.0 / 1e6);
    return 0;
}

/* ============================================================================
 * 4. Forward
 * ========================================================================== */

/* The Sublayer's input: post-LN (the paper) feeds x itself; pre-LN feeds
 * LayerNorm(x). */
static const float *sub_begin(const Backend *be, SubActs *s, const float *x, const float *g,
                              const float *b, int pre_ln, int rows, int D) {
    if (!pre_ln) return x;
    be->layernorm_forward(s->ln, s->mean, s->rstd, x, g, b, rows, D);
    return s->ln;
}

/* After the Sublayer wrote s->out: "We apply dropout to the output of each
 * sub-layer, before it is added to the sub-layer input and normalized"
 * (Sec. 5.4), then Add & Norm (Sec. 3.1). Returns the sub-layer's output. */
static const float *sub_end(const Backend *be, ModelActs *a, SubActs *s, const float *x,
                            const float *g, const float *b, int pre_ln, float p_drop, int rows,
                            int D) {
    size_t n = (size_t)rows * D;
    uint32_t site = a->drop_site++;
    be->dropout_forward(s->out, s->keep, s->out, p_drop, n, dropout_key_shift(a->drop_key, site, a->drop_off), site);
    be->residual_forward(s->res, x, s->out, n);
    if (pre_ln) return s->res;
    be->layernorm_forward(s->ln, s->mean, s->rstd, s->res, g, b, rows, D);
    return s->ln;
}

/* One dropout key per half of a training pass, the next draw of the model's
 * dropout stream (so a checkpoint of the stream resumes the same masks);
 * sites 0, 1, 2, ... of the half are the tensor numbers of dropout_mask.h.
 * Inference (p = 0) draws nothing. */
static void dropout_begin(Model *m, float p, int T) {
    ModelActs *a = m->acts;
    a->drop_site = 0;
    /* a data-parallel slice from row drop_row0 of (B,T,d_model) tensors */
    a->drop_off = (uint64_t)m->drop_row0 * T * m->cfg.d_model;
    a->drop_key = 0;
    if (p > 0) {
        uint64_t hi = rng_u32(&m->dropout_rng);
        a->drop_key = hi << 32 | rng_u32(&m->dropout_rng);
    }
}

/* The PE added to the embeddings (Sec. 3.5): the fixed sinusoids, or the
 * learned table pos_embed of Table 3 (E); the same (max_len, d_model)
 * layout, so embed_forward reads rows 0..T-1 of either. */
static const float *pos_table(const Model *m) {
    return m->cfg.pos == POS_LEARNED ? m->w.pos_embed : m->w_pe;
}

/* Backward of "+ PE[t]" for a learned table: every sequence of the batch
 * added the same row t, so dPE[t] += sum over b of demb[b,t]. Viewing
 * demb (B,T,D) as a (B, T*D) matrix that is one gemm with a row of ones:
 * dPE (1, T*D) += ones (1,B) . demb (B, T*D). Padding rows of demb are 0. */
static void pos_backward(Model *m, const float *demb, int B, int T) {
    if (m->cfg.pos != POS_LEARNED) return;   /* sinusoids have no parameters */
    const Backend *be = m->be;
    int n = T * m->cfg.d_model;
    be->gemm(0, 0, 1, n, B, 1.0f, m->acts->ones, B, demb, n, 1.0f, m->dw.pos_embed, n);
}

void model_encode(Model *m, const int *src, int B, int Ts, int training) {
    const Config *c = &m->cfg;
    const Backend *be = m->be;
    ModelActs *a = m->acts;
    assert(B >= 1 && B <= m->max_B && Ts >= 1 && Ts <= m->max_Ts);
    int D = c->d_model, rows = B * Ts, pre = c->pre_ln;
    float p = training ? c->dropout : 0.0f;
    a->used_enc = layout_encoder(a, c, a->mem, B, Ts);
    a->used_dec = 0;
    acts_fit(m, "model_encode", a->used_enc, B, Ts, 0);
    m->B = B, m->Ts = Ts;
    a->encoded = 1, a->decoded = 0, a->backward_done = 0;
    memcpy(a->h_src, src, (size_t)rows * sizeof(int));
    be->upload(a->src, src, (size_t)rows * sizeof(int));
    dropout_begin(m, p, Ts);

    /* Sec. 3.4-3.5: E[src] * sqrt(d_model) + PE, then dropout (Sec. 5.4) */
    be->embed_forward(a->src_emb, a->src, m->w.embed, pos_table(m), B, Ts, D, c->vocab);
    be->dropout_forward(a->src_emb, a->src_keep, a->src_emb, p, (size_t)rows * D,
                        dropout_key_shift(a->drop_key, 0, a->drop_off), a->drop_site++);

    /* padding keys are blocked for every query (Sec. 3.2.3's mask, for pads) */
    const uint8_t *mask = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(a->h_enc_mask, src, c->pad_id, B, Ts, Ts);
        be->upload(a->enc_mask, a->h_enc_mask, (size_t)rows * Ts);
        mask = a->enc_mask;
    }

    const float *x = a->src_emb;
    for (int l = 0; l < c->N; l++) {
        const EncoderLayer *w = &m->w.enc[l];
        EncActs *e = &a->enc[l];
        /* x = LayerNorm(x + Dropout(SelfAttn(x)))   (Sec. 3.1, 3.2.3) */
        const float *in = sub_begin(be, &e->sub[0], x, w->ln1_g, w->ln1_b, pre, rows, D);
        be->mha_forward(e->sub[0].out, &e->attn, &w->self_attn, in, in, mask,
                        B, Ts, Ts, D, c->h, c->d_k, c->d_v);
        x = sub_end(be, a, &e->sub[0], x, w->ln1_g, w->ln1_b, pre, p, rows, D);
        /* x = LayerNorm(x + Dropout(FFN(x)))         (Eq. 2) */
        in = sub_begin(be, &e->sub[1], x, w->ln2_g, w->ln2_b, pre, rows, D);
        be->ffn_forward(e->sub[1].out, e->hidden, in, w->ffn_w1, w->ffn_b1, w->ffn_w2, w->ffn_b2, rows, D, c->d_ff);
        x = sub_end(be, a, &e->sub[1], x, w->ln2_g, w->ln2_b, pre, p, rows, D);
    }
    if (pre) {
        be->layernorm_forward(a->enc_ln, a->enc_mean, a->enc_rstd, x, m->w.enc_ln_g, m->w.enc_ln_b, rows, D);
        x = a->enc_ln;
    }
    a->memory = x;
}

const float *model_decode(Model *m, const int *tgt, int Tt, int training) {
    const Config *c = &m->cfg;
    const Backend *be = m->be;
    ModelActs *a = m->acts;
    assert(a->encoded && "model_decode needs a model_encode first");
    assert(Tt >= 1 && Tt <= m->max_Tt);
    int B = m->B, Ts = m->Ts, D = c->d_model, V = c->vocab, rows = B * Tt, pre = c->pre_ln;
    float p = training ? c->dropout : 0.0f;
    a->used_dec = layout_decoder(a, c, a->mem + a->used_enc, B, Ts, Tt);
    acts_fit(m, "model_decode", a->used_enc + a->used_dec, B, Ts, Tt);
    m->Tt = Tt;
    a->decoded = 1, a->backward_done = 0;
    be->upload(a->tgt, tgt, (size_t)rows * sizeof(int));
    dropout_begin(m, p, Tt);

    /* the same embedding matrix as the encoder's (Sec. 3.4) */
    be->embed_forward(a->tgt_emb, a->tgt, m->w.embed, pos_table(m), B, Tt, D, V);
    be->dropout_forward(a->tgt_emb, a->tgt_keep, a->tgt_emb, p, (size_t)rows * D,
                        dropout_key_shift(a->drop_key, 0, a->drop_off), a->drop_site++);

    /* Masked self-attention: position i sees positions <= i only (Sec. 3.2.3:
     * "preserve the auto-regressive property"), and never a padding token. */
    mask_causal(a->h_dec_mask, B, Tt, Tt);
    const uint8_t *cross = NULL;
    if (c->pad_id >= 0) {
        mask_from_tokens(a->h_pad, tgt, c->pad_id, B, Tt, Tt);
        mask_and(a->h_dec_mask, a->h_pad, rows * Tt);
        mask_from_tokens(a->h_cross_mask, a->h_src, c->pad_id, B, Tt, Ts);   /* source padding */
        be->upload(a->cross_mask, a->h_cross_mask, (size_t)rows * Ts);
        cross = a->cross_mask;
    }
    be->upload(a->dec_mask, a->h_dec_mask, (size_t)rows * Tt);

    const float *x = a->tgt_emb, *memory = a->memory;
    for (int l = 0; l < c->N; l++) {
        const DecoderLayer *w = &m->w.dec[l];
        DecActs *d = &a->dec[l];
        /* x = LayerNorm(x + Dropout(MaskedSelfAttn(x))) */
        const float *in = sub_begin(be, &d->sub[0], x, w->ln1_g, w->ln1_b, pre, rows, D);
        be->mha_forward(d->sub[0].out, &d->self, &w->self_attn, in, in, a->dec_mask,
                        B, Tt, Tt, D, c->h, c->d_k, c->d_v);
        x = sub_end(be, a, &d->sub[0], x, w->ln1_g, w->ln1_b, pre, p, rows, D);
        /* x = LayerNorm(x + Dropout(CrossAttn(x, memory))): queries from the
         * decoder, keys and values from the encoder output (Sec. 3.2.3) */
        in = sub_begin(be, &d->sub[1], x, w->ln2_g, w->ln2_b, pre, rows, D);
        be->mha_forward(d->sub[1].out, &d->cross, &w->cross_attn, in, memory, cross,
                        B, Tt, Ts, D, c->h, c->d_k, c->d_v);
        x = sub_end(be, a, &d->sub[1], x, w->ln2_g, w->ln2_b, pre, p, rows, D);
        /* x = LayerNorm(x + Dropout(FFN(x))) */
        in = sub_begin(be, &d->sub[2], x, w->ln3_g, w->ln3_b, pre, rows, D);
        be->ffn_forward(d->sub[2].out, d->hidden, in, w->ffn_w1, w->ffn_b1, w->ffn_w2, w->ffn_b2, rows, D, c->d_ff);
        x = sub_end(be, a, &d->sub[2], x, w->ln3_g, w->ln3_b, pre, p, rows, D);
    }
    if (pre) {
        be->layernorm_forward(a->dec_ln, a->dec_mean, a->dec_rstd, x, m->w.dec_ln_g, m->w.dec_ln_b, rows, D);
        x = a->dec_ln;
    }
    a->dec_out = x;

    /* The pre-softmax linear transformation IS the embedding matrix (Sec. 3.4):
     * logits (B*Tt, V) = x (B*Tt, D) @ E^T, E (V, D). */
    be->gemm(0, 1, rows, V, D, 1.0f, x, D, m->w.embed, D, 0.0f, a->logits, V);
    be->logsoftmax_forward(a->logp, a->logits, rows, V);
    return a->logp;
}

const float *model_forward(Model *m, const int *src, const int *tgt, int B, int Ts, int Tt,
                           int training) {
    model_encode(m, src, B, Ts, training);
    return model_decode(m, tgt, Tt, training);
}

/* ============================================================================
 * 5. Backward
 *
 * Every residual sub-layer is undone in two halves around the Sublayer's
 * own backward (mha_backward or ffn_backward):
 *   sub_back_begin: from dy = dL/d(output), find dsub = dL/d(Sublayer output)
 *                   and start dx = dL/dx with the residual path;
 *                   returns where the Sublayer's input gradient must go.
 *   sub_back_end:   pre-LN only: LayerNorm's backward adds into dx.
 * ========================================================================== */

static float *sub_back_begin(const Backend *be, ModelActs *a, const SubActs *s, const float *dy,
                             float *dx, const float *g, float *dg, float *db, int pre_ln, int rows,
                             int D) {
    size_t n = (size_t)rows * D;
    /* forward: res = x + out, so dres reaches x unchanged (the residual
     * path) and out too. dx starts as dres: */
    if (!pre_ln) {
        /* post-LN forward: y = LayerNorm(res) */
        be->zero(dx, n * sizeof(float));
        be->layernorm_backward(dx, dg, db, dy, s->res, s->mean, s->rstd, g, rows, D);
    } else {
        be->copy(dx, dy, n * sizeof(float));     /* pre-LN: y = res */
    }
    /* forward: out = Dropout(Sublayer(.)) in place, with scales keep:
     * d_sub = dres * keep */
    be->zero(a->d_sub, n * sizeof(float));
    be->dropout_backward(a->d_sub, dx, s->keep, n);
    if (!pre_ln) return dx;            /* the Sublayer read x itself */
    be->zero(a->d_res, n * sizeof(float));
    return a->d_res;                   /* the Sublayer read LayerNorm(x) */
}

static void sub_back_end(const Backend *be, ModelActs *a, const SubActs *s, const float *x,
                         float *dx, const float *g, float *dg, float *db, int pre_ln, int rows,
                         int D) {
    /* pre-LN forward: in = LayerNorm(x) */
    if (pre_ln) be->layernorm_backward(dx, dg, db, a->d_res, x, s->mean, s->rstd, g, rows, D);
}

static void swap(float **p, float **q) {
    float *t = *p;
    *p = *q;
    *q = t;
}

/* The input the sub-layer read in forward: the previous sub-layer's output. */
static const float *sub_output(const SubActs *s, int pre_ln) { return pre_ln ? s->res : s->ln; }

void model_backward(Model *m, const float *dlogits) {
    const Config *c = &m->cfg;
    ModelActs *a = m->acts;
    assert(a->encoded && a->decoded && "model_backward needs a model_forward first");
    int B = m->B, Ts = m->Ts, Tt = m->Tt, D = c->d_model, V = c->vocab, pre = c->pre_ln;
    int hh = c->h, dk = c->d_k, dv = c->d_v, F = c->d_ff;
    int rt = B * Tt, rs = B * Ts;
    const Backend *be = m->be;
    Params *P = &m->w, *G = &m->dw;
    size_t used = layout_backward(a, c, a->mem + a->used_enc + a->used_dec, B, Ts, Tt);
    acts_fit(m, "model_backward", a->used_enc + a->used_dec + used, B, Ts, Tt);
    if (c->pos == POS_LEARNED) be->upload(a->ones, a->h_ones, (size_t)B * sizeof(float));
    float *dy = a->d_y, *dx = a->d_x;

    /* forward: logits = dec_out @ E^T
     *   d dec_out (rt,D) = dlogits (rt,V) @ E (V,D)
     *   dE (V,D)        += dlogits^T @ dec_out        (use 1 of 3 of E) */
    be->gemm(0, 0, rt, D, V, 1.0f, dlogits, V, P->embed, D, 0.0f, dy, D);
    be->gemm(1, 0, V, D, rt, 1.0f, dlogits, V, a->dec_out, D, 1.0f, G->embed, D);

    const float *dec_last = pre ? sub_output(&a->dec[c->N - 1].sub[2], 1) : NULL;
    if (pre) {
        /* forward: dec_out = LayerNorm(x) */
        be->zero(dx, (size_t)rt * D * sizeof(float));
        be->layernorm_backward(dx, G->dec_ln_g, G->dec_ln_b, dy, dec_last, a->dec_mean, a->dec_rstd,
                           P->dec_ln_g, rt, D);
        swap(&dy, &dx);
    }

    /* ---- decoder, last layer first ---- */
    be->zero(a->d_mem, (size_t)rs * D * sizeof(float));
    for (int l = c->N - 1; l >= 0; l--) {
        const DecoderLayer *w = &P->dec[l];
        DecoderLayer *gw = &G->dec[l];
        DecActs *d = &a->dec[l];
        const float *x0 = l == 0 ? a->tgt_emb : sub_output(&a->dec[l - 1].sub[2], pre);
        const float *x1 = sub_output(&d->sub[0], pre), *x2 = sub_output(&d->sub[1], pre);
        const float *in;
        float *din;

        /* forward: x3 = LayerNorm(x2 + Dropout(FFN(x2))) */
        in = pre ? d->sub[2].ln : x2;
        din = sub_back_begin(be, a, &d->sub[2], dy, dx, w->ln3_g, gw->ln3_g, gw->ln3_b, pre, rt, D);
        be->ffn_backward(din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, a->d_hidden, a->d_sub,
                     d->hidden, in, w->ffn_w1, w->ffn_w2, rt, D, F);
        sub_back_end(be, a, &d->sub[2], x2, dx, w->ln3_g, gw->ln3_g, gw->ln3_b, pre, rt, D);
        swap(&dy, &dx);

        /* forward: x2 = LayerNorm(x1 + Dropout(CrossAttn(x1, memory)));
         * the keys' and values' gradient flows into the memory, summed over
         * all N decoder layers that read it. */
        in = pre ? d->sub[1].ln : x1;
        din = sub_back_begin(be, a, &d->sub[1], dy, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, pre, rt, D);
        be->mha_backward(din, a->d_mem, &gw->cross_attn, a->d_scratch, a->d_sub, &d->cross, &w->cross_attn,
                     in, a->memory, B, Tt, Ts, D, hh, dk, dv);
        sub_back_end(be, a, &d->sub[1], x1, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, pre, rt, D);
        swap(&dy, &dx);

        /* forward: x1 = LayerNorm(x0 + Dropout(MaskedSelfAttn(x0))) */
        in = pre ? d->sub[0].ln : x0;
        din = sub_back_begin(be, a, &d->sub[0], dy, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, pre, rt, D);
        be->mha_backward(din, din, &gw->self_attn, a->d_scratch, a->d_sub, &d->self, &w->self_attn,
                     in, in, B, Tt, Tt, D, hh, dk, dv);
        sub_back_end(be, a, &d->sub[0], x0, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, pre, rt, D);
        swap(&dy, &dx);
    }

    /* forward: tgt_emb = Dropout(E[tgt] * sqrt(D) + PE)  (use 2 of 3 of E) */
    size_t nt = (size_t)rt * D;
    be->zero(a->d_tgt_emb, nt * sizeof(float));
    be->dropout_backward(a->d_tgt_emb, dy, a->tgt_keep, nt);
    be->embed_backward(G->embed, a->d_tgt_emb, a->tgt, B, Tt, D, V);
    pos_backward(m, a->d_tgt_emb, B, Tt);

    /* ---- encoder: its output's gradient is what the cross-attentions sent ---- */
    size_t ns = (size_t)rs * D;
    if (pre) {
        /* forward: memory = LayerNorm(x) */
        const float *enc_last = sub_output(&a->enc[c->N - 1].sub[1], 1);
        be->zero(dy, ns * sizeof(float));
        be->layernorm_backward(dy, G->enc_ln_g, G->enc_ln_b, a->d_mem, enc_last, a->enc_mean, a->enc_rstd,
                           P->enc_ln_g, rs, D);
    } else {
        be->copy(dy, a->d_mem, ns * sizeof(float));
    }
    for (int l = c->N - 1; l >= 0; l--) {
        const EncoderLayer *w = &P->enc[l];
        EncoderLayer *gw = &G->enc[l];
        EncActs *e = &a->enc[l];
        const float *x0 = l == 0 ? a->src_emb : sub_output(&a->enc[l - 1].sub[1], pre);
        const float *x1 = sub_output(&e->sub[0], pre);
        const float *in;
        float *din;

        /* forward: x2 = LayerNorm(x1 + Dropout(FFN(x1))) */
        in = pre ? e->sub[1].ln : x1;
        din = sub_back_begin(be, a, &e->sub[1], dy, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, pre, rs, D);
        be->ffn_backward(din, gw->ffn_w1, gw->ffn_b1, gw->ffn_w2, gw->ffn_b2, a->d_hidden, a->d_sub,
                     e->hidden, in, w->ffn_w1, w->ffn_w2, rs, D, F);
        sub_back_end(be, a, &e->sub[1], x1, dx, w->ln2_g, gw->ln2_g, gw->ln2_b, pre, rs, D);
        swap(&dy, &dx);

        /* forward: x1 = LayerNorm(x0 + Dropout(SelfAttn(x0))) */
        in = pre ? e->sub[0].ln : x0;
        din = sub_back_begin(be, a, &e->sub[0], dy, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, pre, rs, D);
        be->mha_backward(din, din, &gw->self_attn, a->d_scratch, a->d_sub, &e->attn, &w->self_attn,
                     in, in, B, Ts, Ts, D, hh, dk, dv);
        sub_back_end(be, a, &e->sub[0], x0, dx, w->ln1_g, gw->ln1_g, gw->ln1_b, pre, rs, D);
        swap(&dy, &dx);
    }

    /* forward: src_emb = Dropout(E[src] * sqrt(D) + PE)  (use 3 of 3 of E) */
    be->zero(a->d_src_emb, ns * sizeof(float));
    be->dropout_backward(a->d_src_emb, dy, a->src_keep, ns);
    be->embed_backward(G->embed, a->d_src_emb, a->src, B, Ts, D, V);
    pos_backward(m, a->d_src_emb, B, Ts);
    a->backward_done = 1;
}

/* ============================================================================
 * Inspection
 * ========================================================================== */

const float *model_memory(const Model *m) {
    assert(m->acts->encoded);
    return m->acts->memory;
}

const float *model_attention(const Model *m, AttnKind kind, int layer) {
    assert(layer >= 0 && layer < m->cfg.N);
    const ModelActs *a = m->acts;
    switch (kind) {
    case ATTN_ENC_SELF: assert(a->encoded); return a->enc[layer].attn.weights;
    case ATTN_DEC_SELF: assert(a->decoded); return a->dec[layer].self.weights;
    case ATTN_DEC_CROSS: assert(a->decoded); return a->dec[layer].cross.weights;
    }
    return NULL;
}

const uint8_t *model_mask(const Model *m, AttnKind kind) {
    const ModelActs *a = m->acts;
    switch (kind) {
    case ATTN_ENC_SELF: return m->cfg.pad_id >= 0 ? a->h_enc_mask : NULL;
    case ATTN_DEC_SELF: return a->h_dec_mask;
    case ATTN_DEC_CROSS: return m->cfg.pad_id >= 0 ? a->h_cross_mask : NULL;
    }
    return NULL;
}

const float *model_embedded(const Model *m, int decoder) {
    assert(decoder ? m->acts->decoded : m->acts->encoded);
    return decoder ? m->acts->tgt_emb : m->acts->src_emb;
}

const float *model_sublayer(const Model *m, int decoder, int layer, SubKind sub, SubPart part) {
    const ModelActs *a = m->acts;
    assert(layer >= 0 && layer < m->cfg.N && part >= SUB_OUT && part <= SUB_Y);
    assert(decoder ? (a->decoded && sub >= 0 && sub < 3) : (a->encoded && sub >= 0 && sub < 2));
    const SubActs *s = decoder ? &a->dec[layer].sub[sub] : &a->enc[layer].sub[sub];
    switch (part) {
    case SUB_OUT: return s->out;
    case SUB_SUM: return s->res;
    case SUB_Y: break;
    }
    return sub_output(s, m->cfg.pre_ln);
}

const float *model_decoder_output(const Model *m) {
    assert(m->acts->decoded);
    return m->acts->dec_out;
}

const float *model_logits(const Model *m) {
    assert(m->acts->decoded);
    return m->acts->logits;
}

const float *model_input_grad(const Model *m, int decoder) {
    assert(m->acts->backward_done);
    return decoder ? m->acts->d_tgt_emb : m->acts->d_src_emb;
}

const float *model_next_logp(const Model *m) {
    const ModelActs *a = m->acts;
    assert(a->decoded);
    int V = m->cfg.vocab, Tt = m->Tt;
    /* row (b, Tt-1) of logp, one copy per sequence */
    for (int b = 0; b < m->B; b++)
        model_read(m, a->h_next + (size_t)b * V, a->logp + ((size_t)b * Tt + Tt - 1) * V, (size_t)V * sizeof(float));
    return a->h_next;
}
