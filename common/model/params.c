/* params.c - the Transformer's sizes and parameters: the base model of
 * Table 3, validation, the parameter count; one allocation of parameters
 * with named tensors in a fixed order, and their initialisation (the
 * embedding N(0, 1/d_model), Xavier elsewhere). model.c builds a Model from
 * two of these (weights and gradients) and runs it.
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
 * ARCH_DECODER (a language model) has no encoder.* tensors and no
 * decoder.i.cross_attn.* or decoder.i.ln2.* (its layer: self_attn, ln1,
 * ffn, ln3).
 */
#include "model/params.h"
#include "core/fail.h"
#include "core/rng.h"
#include "core/tensor.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * Config
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

/* FFN (Eq. 2): W1 (d_model,d_ff) + b1 (d_ff) + W2 (d_ff,d_model) + b2 (d_model);
 * SwiGLU: W1, W3 (d_model,d_ff), W2 (d_ff,d_model), no biases. */
static size_t ffn_params(const Config *c) {
    size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    return c->ffn == FFN_SWIGLU ? 3 * D * F : 2 * D * F + F + D;
}

size_t model_param_count(const Config *c) {
    size_t D = (size_t)c->d_model, ln = c->norm == NORM_RMS ? D : 2 * D;   /* gamma (, beta) */
    size_t embed = (size_t)c->vocab * D;                         /* shared, once */
    size_t pos = c->pos == POS_LEARNED ? (size_t)c->max_len * D : 0;  /* Table 3 (E) */
    if (c->arch == ARCH_DECODER) {   /* masked self-attention and FFN, 2 sub-layers */
        size_t dec = mha_params(c) + ffn_params(c) + 2 * ln;
        return embed + pos + (size_t)c->N * dec + (c->pre_ln ? ln : 0);
    }
    size_t enc = mha_params(c) + ffn_params(c) + 2 * ln;         /* 2 sub-layers */
    size_t dec = 2 * mha_params(c) + ffn_params(c) + 3 * ln;     /* 3 sub-layers */
    size_t final_ln = c->pre_ln ? 2 * ln : 0;
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
    if (c->arch != ARCH_ENC_DEC && c->arch != ARCH_DECODER)
        return fail(err, errlen, "arch is %d; it must be 0 (encoder-decoder, the paper) or 1 (decoder only, "
                    "a language model)", c->arch);
    if (c->norm != NORM_LAYER && c->norm != NORM_RMS)
        return fail(err, errlen, "norm is %d; it must be 0 (LayerNorm, the paper) or 1 (RMSNorm)", c->norm);
    if (c->ffn != FFN_RELU && c->ffn != FFN_SWIGLU)
        return fail(err, errlen, "ffn is %d; it must be 0 (ReLU, Eq. 2) or 1 (SwiGLU)", c->ffn);
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
 * Parameters
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
    /* a Norm is L = 2 tensors (gamma, beta), 1 for RMSNorm (gamma);
     * encoder layer: 4 attention + L + 4 FFN + L = 8 + 2L;
     * decoder layer: 4 + L + 4 + L + 4 + L = 12 + 3L; pre-LN: 2 final Norms;
     * ARCH_DECODER: its layer 8 + 2L (no cross-attention, no ln2), 1 final Norm;
     * a SwiGLU FFN is 3 tensors (w1, w2, w3), not 4 */
    int L = c->norm == NORM_RMS ? 1 : 2, lead = 1 + (c->pos == POS_LEARNED), f = c->ffn == FFN_SWIGLU ? 3 : 4;
    if (c->arch == ARCH_DECODER) return lead + (4 + f + 2 * L) * c->N + (c->pre_ln ? L : 0);
    return lead + (4 + f + 2 * L) * c->N + (8 + f + 3 * L) * c->N + (c->pre_ln ? 2 * L : 0);
}

/* Hands out consecutive slices of p->mem and records each as a NamedTensor. */
typedef struct {
    Params *p;
    size_t used;
    int norm;       /* Config.norm: which tensors a Norm has */
    int ffn;        /* Config.ffn: which tensors an FFN has  */
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

/* a LayerNorm's gamma (D) and beta (D): <prefix>.gamma, <prefix>.beta;
 * an RMSNorm's gamma alone (b NULL) */
static void carve_ln(Carver *cv, float **g, float **b, int D, const char *prefix) {
    *g = carve(cv, D, 0, "%s.gamma", prefix);
    *b = cv->norm == NORM_RMS ? NULL : carve(cv, D, 0, "%s.beta", prefix);
}

/* Eq. (2)'s W1 (D,F), b1 (F), W2 (F,D), b2 (D): <prefix>.w1, .b1, .w2, .b2;
 * SwiGLU's W1 (D,F), W2 (F,D), W3 (D,F): <prefix>.w1, .w2, .w3 (b1, b2 NULL) */
static void carve_ffn(Carver *cv, float **w1, float **b1, float **w2, float **b2, float **w3, int D, int F,
                      const char *prefix) {
    int glu = cv->ffn == FFN_SWIGLU;
    *w1 = carve(cv, D, F, "%s.w1", prefix);
    *b1 = glu ? NULL : carve(cv, F, 0, "%s.b1", prefix);
    *w2 = carve(cv, F, D, "%s.w2", prefix);
    *b2 = glu ? NULL : carve(cv, D, 0, "%s.b2", prefix);
    *w3 = glu ? carve(cv, D, F, "%s.w3", prefix) : NULL;
}

/* "encoder.3.ffn": the name prefix of one layer's part, in at (40 bytes) */
static const char *part(char *at, const char *stack, int layer, const char *what) {
    snprintf(at, 40, "%s.%d.%s", stack, layer, what);
    return at;
}

/* Points every field of p into p->mem (n floats, already allocated) in the
 * order documented at the top of this file. enc/dec/tensors are allocated. */
int params_layout(Params *p, const Config *c) {
    int N = c->N, D = c->d_model, F = c->d_ff, lm = c->arch == ARCH_DECODER;
    p->enc = lm ? NULL : calloc((size_t)N, sizeof *p->enc);
    p->dec = calloc((size_t)N, sizeof *p->dec);
    p->tensors = calloc((size_t)tensors_per_model(c), sizeof *p->tensors);
    if ((!lm && !p->enc) || !p->dec || !p->tensors) return -1;
    p->n_tensors = 0;
    Carver cv = {p, 0, c->norm, c->ffn};
    char at[40];
    p->embed = carve(&cv, c->vocab, D, "embed");
    p->pos_embed = c->pos == POS_LEARNED ? carve(&cv, c->max_len, D, "pos_embed") : NULL;
    for (int i = 0; i < N && !lm; i++) {
        EncoderLayer *l = &p->enc[i];
        carve_mha(&cv, &l->self_attn, c, part(at, "encoder", i, "self_attn"));
        carve_ln(&cv, &l->ln1_g, &l->ln1_b, D, part(at, "encoder", i, "ln1"));
        carve_ffn(&cv, &l->ffn_w1, &l->ffn_b1, &l->ffn_w2, &l->ffn_b2, &l->ffn_w3, D, F,
                  part(at, "encoder", i, "ffn"));
        carve_ln(&cv, &l->ln2_g, &l->ln2_b, D, part(at, "encoder", i, "ln2"));
    }
    if (c->pre_ln && !lm) carve_ln(&cv, &p->enc_ln_g, &p->enc_ln_b, D, "encoder.ln");
    for (int i = 0; i < N; i++) {
        DecoderLayer *l = &p->dec[i];
        carve_mha(&cv, &l->self_attn, c, part(at, "decoder", i, "self_attn"));
        carve_ln(&cv, &l->ln1_g, &l->ln1_b, D, part(at, "decoder", i, "ln1"));
        if (!lm) {   /* a language model has no memory to attend to */
            carve_mha(&cv, &l->cross_attn, c, part(at, "decoder", i, "cross_attn"));
            carve_ln(&cv, &l->ln2_g, &l->ln2_b, D, part(at, "decoder", i, "ln2"));
        }
        carve_ffn(&cv, &l->ffn_w1, &l->ffn_b1, &l->ffn_w2, &l->ffn_b2, &l->ffn_w3, D, F,
                  part(at, "decoder", i, "ffn"));
        carve_ln(&cv, &l->ln3_g, &l->ln3_b, D, part(at, "decoder", i, "ln3"));
    }
    if (c->pre_ln) carve_ln(&cv, &p->dec_ln_g, &p->dec_ln_b, D, "decoder.ln");
    assert(cv.used == p->n && p->n_tensors == tensors_per_model(c));
    return 0;
}

void params_free(Params *p) {
    free(p->mem);
    free(p->enc);
    free(p->dec);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

int params_alloc(Params *p, const Config *c) {
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
void params_init(Params *p, uint64_t seed) {
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
