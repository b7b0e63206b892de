/* check_model.c - the whole Transformer of Figure 1: sizes, wiring, gradients.
 *
 * Core      parameter counts (closed form == named tensors == allocation,
 *           base model exactly 63,045,632), the embedding stage and one
 *           encoder layer recomputed by hand, layout reuse across batch
 *           sizes, batch independence, greedy decode == full forward.
 * Masks     causality (a later target token changes no earlier logit),
 *           source padding changes nothing, padding positions get no gradient.
 * Sharing   one embedding matrix, fed gradient by all three of its uses.
 * Gradient  finite differences of model_backward for EVERY parameter tensor,
 *           post-LN and pre-LN, with and without dropout, and with learned
 *           positional embeddings (Table 3 (E)); a learned table holding the
 *           sinusoids gives the sinusoid model's logits bit for bit.
 * Limits    config_validate / model_build / token and size checks refuse bad
 *           input with a message instead of crashing.
 * Capacity  model_acts_floats is the block a build allocates; a block sized
 *           for two batch shapes (many short rows, few long ones) runs both
 *           bit for bit as the per-dimension build does; a batch beyond it
 *           is refused by model_check_sizes and stops forward at an assertion.
 */
#include <signal.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "model/model.h"
#include "ref/nn.h"
#include "core/rng.h"
#include "testutil.h"

/* ============================================================================
 * Core: sizes
 * ========================================================================== */

START_TEST(test_param_count_base) {
    /* Table 3 base with a shared vocabulary of 37000 (Sec. 5.1):
     *   embedding 37000*512                     = 18,944,000
     *   encoder layer 4*512^2 + FFN 2*512*2048+2048+512 + 2 LN*1024 = 3,150,336, x6 = 18,902,016
     *   decoder layer 8*512^2 + FFN + 3 LN                         = 4,199,936, x6 = 25,199,616
     *   total                                                        63,045,632
     * (the paper's Table 3 says 65M; the chapter README discusses why.) */
    Config c = config_base();
    ck_assert_uint_eq(model_param_count(&c), 63045632u);
    /* big: N=6, d_model=1024, d_ff=4096, h=16 (paper 213M) */
    c.d_model = 1024, c.d_ff = 4096, c.h = 16;
    ck_assert_uint_eq(model_param_count(&c), 214171648u);
    char err[128];
    ck_assert_int_eq(config_validate(&c, err, sizeof err), 0);
}
END_TEST

/* Loop test: for several configs, closed form == sum of named tensors ==
 * size of the one allocation, names unique, tensors tile mem exactly. */
static const Config count_configs[] = {
    {1, 4, 4, 1, 4, 4, 5, 3, 0.0f, 0, -1, POS_SINUSOID, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
    {2, 8, 12, 2, 4, 3, 11, 16, 0.1f, 0, 0, POS_SINUSOID, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
    {3, 16, 8, 4, 5, 7, 9, 8, 0.2f, 1, 3, POS_SINUSOID, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
    {2, 32, 64, 4, 8, 8, 12, 32, 0.1f, 1, 0, POS_SINUSOID, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
    {1, 6, 10, 3, 2, 2, 100, 5, 0.0f, 0, 99, POS_SINUSOID, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
    {2, 8, 12, 2, 4, 3, 11, 16, 0.1f, 0, 0, POS_LEARNED, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},   /* + pos_embed */
    {1, 6, 10, 3, 2, 2, 100, 5, 0.0f, 1, 99, POS_LEARNED, ARCH_ENC_DEC, NORM_LAYER, FFN_RELU},
};

START_TEST(test_param_count_matches_tensors) {
    const Config *c = &count_configs[_i];
    Model m;
    build_or_fail(&m, c, 1, 2, 2, 1);
    size_t sum = 0;
    for (int i = 0; i < m.params.n_tensors; i++) {
        const NamedTensor *t = &m.params.tensors[i];
        ck_assert_msg(t->data == m.params.mem + sum, "tensor %s is not where the previous one ended", t->name);
        ck_assert(t->ndim == 1 || t->ndim == 2);
        sum += named_tensor_numel(t);
        for (int j = 0; j < i; j++) ck_assert_str_ne(t->name, m.params.tensors[j].name);
        /* the gradient tensor of the same name sits at the same offset */
        ck_assert_str_eq(m.grads.tensors[i].name, t->name);
        ck_assert(m.grads.tensors[i].data - m.grads.mem == t->data - m.params.mem);
    }
    ck_assert_uint_eq(sum, model_param_count(c));
    ck_assert_uint_eq(m.params.n, sum);
    ck_assert_uint_eq(m.grads.n, sum);
    ck_assert_str_eq(m.params.tensors[0].name, "embed");
    ck_assert_ptr_nonnull(params_find(&m.params, "encoder.0.self_attn.w_q"));
    ck_assert_ptr_nonnull(params_find(&m.params, "encoder.0.ln1.gamma"));
    char name[48];
    snprintf(name, sizeof name, "decoder.%d.cross_attn.w_o", c->N - 1);
    const NamedTensor *wo = params_find(&m.params, name);
    ck_assert_ptr_nonnull(wo);
    ck_assert_int_eq(wo->shape[0], c->h * c->d_v);
    ck_assert_int_eq(wo->shape[1], c->d_model);
    ck_assert_int_eq(params_find(&m.params, "encoder.ln.gamma") != NULL, c->pre_ln);
    ck_assert_int_eq(params_find(&m.params, "decoder.ln.beta") != NULL, c->pre_ln);
    ck_assert_ptr_null(params_find(&m.params, "no.such.tensor"));
    model_free(&m);
}
END_TEST

START_TEST(test_init_deterministic) {
    Config c = test_config_tiny(0.0f);
    Model a, b, d;
    build_or_fail(&a, &c, 1, 3, 3, 7);
    build_or_fail(&b, &c, 1, 3, 3, 7);
    build_or_fail(&d, &c, 1, 3, 3, 8);
    ck_assert_int_eq(memcmp(a.params.mem, b.params.mem, a.params.n * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(a.params.mem, d.params.mem, a.params.n * sizeof(float)), 0);
    for (size_t i = 0; i < a.grads.n; i++) ck_assert(a.grads.mem[i] == 0.0f);
    model_free(&a);
    model_free(&b);
    model_free(&d);
}
END_TEST

/* Mean and standard deviation of a tensor's entries, and the largest |w|. */
static void tensor_stats(const NamedTensor *t, double *mean, double *std, double *maxabs) {
    size_t n = named_tensor_numel(t);
    double s = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        s += t->data[i];
        s2 += (double)t->data[i] * t->data[i];
        mx = fabs(t->data[i]) > mx ? fabs(t->data[i]) : mx;
    }
    *mean = s / n;
    *std = sqrt(s2 / n - *mean * *mean);
    *maxabs = mx;
}

/* params.c's params_init, at chapter 11's size on real data (V = 2000,
 * d_model = 64): each tensor has the distribution its comment promises.
 *   embed        N(0, 1/d_model): std 0.125, so E * sqrt(d_model) has std 1,
 *                the amplitude of the positional encoding it is added to
 *   W_Q, W_K, W_V  U(-a, a), a = sqrt(6 / (fan_in + fan_out)) / sqrt(2): std a/sqrt(3)
 *   other matrices U(-a, a), a = sqrt(6 / (fan_in + fan_out))
 *   LayerNorm gamma 1, beta 0; biases 0 */
START_TEST(test_init_statistics) {
    Config c = test_config(2, 64, 256, 4, 16, 16, 2000, 32, 0.1f);
    Model m;
    build_or_fail(&m, &c, 1, 4, 4, 2017);
    double mean, std, mx;
    tensor_stats(params_find(&m.params, "embed"), &mean, &std, &mx);   /* 128,000 draws */
    ck_assert_msg(fabs(mean) < 0.002 && fabs(std - 0.125) < 0.002, "embed: mean %g std %g, want 0 and 0.125",
                  mean, std);
    ck_assert_msg(mx > 3 * 0.125, "embed: max |w| %g: a normal has tails past 3 std", mx);
    static const struct { const char *name; double a; } uni[] = {
        {"encoder.0.self_attn.w_q", 0.15309},   /* sqrt(6/128)/sqrt(2) = sqrt(3/128) */
        {"decoder.1.cross_attn.w_k", 0.15309},
        {"decoder.0.self_attn.w_v", 0.15309},
        {"encoder.1.self_attn.w_o", 0.21651},   /* sqrt(6/128) */
        {"decoder.1.ffn.w1", 0.13693},          /* sqrt(6/320) */
        {"encoder.0.ffn.w2", 0.13693},
    };
    for (size_t i = 0; i < sizeof uni / sizeof uni[0]; i++) {
        tensor_stats(params_find(&m.params, uni[i].name), &mean, &std, &mx);
        double want = uni[i].a / sqrt(3.0);    /* the std of U(-a, a) */
        ck_assert_msg(mx <= uni[i].a + 1e-6 && mx > 0.95 * uni[i].a, "%s: max |w| %g, bound %g", uni[i].name, mx,
                      uni[i].a);
        ck_assert_msg(fabs(std - want) < 0.04 * want && fabs(mean) < 0.1 * want, "%s: mean %g std %g, want 0 and %g",
                      uni[i].name, mean, std, want);
    }
    ck_assert(params_find(&m.params, "decoder.0.ln3.gamma")->data[2] == 1.0f);
    ck_assert(params_find(&m.params, "decoder.0.ln3.beta")->data[2] == 0.0f);
    ck_assert(params_find(&m.params, "decoder.1.ffn.b1")->data[0] == 0.0f);
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Core: the first stages recomputed by hand
 * ========================================================================== */

static void layernorm_ref(double *out, const double *x, const float *g, const float *b, int D) {
    double mean = 0, var = 0;
    for (int j = 0; j < D; j++) mean += x[j];
    mean /= D;
    for (int j = 0; j < D; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= D;
    for (int j = 0; j < D; j++) out[j] = g[j] * (x[j] - mean) / sqrt(var + LAYERNORM_EPS) + b[j];
}

START_TEST(test_embedding_and_layer_by_hand) {
    Config c = test_config_tiny(0.0f);
    Model m;
    build_or_fail(&m, &c, 1, 4, 3, 3);
    perturb_params(&m, 4);
    int src[4] = {5, 2, 9, 3}, tgt[3] = {1, 4, 4};
    model_forward(&m, src, tgt, 1, 4, 3, 0);
    int D = c.d_model, F = c.d_ff;

    /* Sec. 3.4 + 3.5: E[id] * sqrt(d_model) + PE(pos) */
    const float *emb = model_embedded(&m, 0);
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < D; j++) {
            double angle = t / pow(10000.0, (double)(j / 2 * 2) / D);
            double pe = j % 2 == 0 ? sin(angle) : cos(angle);
            double want = m.params.embed[src[t] * D + j] * sqrt((double)D) + pe;
            ck_assert_msg(fabs(emb[t * D + j] - want) < 1e-5, "embedding[%d][%d] %g vs %g", t, j, emb[t * D + j], want);
        }

    /* encoder layer 0, sub-layer 0: LayerNorm(x + SelfAttn(x)) (post-LN) */
    const EncoderLayer *w = &m.params.enc[0];
    const float *att = model_sublayer(&m, 0, 0, 0, 0);
    const float *res = model_sublayer(&m, 0, 0, 0, 1);
    const float *x1 = model_sublayer(&m, 0, 0, 0, 2);
    double row[64] = {0}, ln[64] = {0}, hid[64] = {0};
    for (int t = 0; t < 4; t++) {
        for (int j = 0; j < D; j++) {
            row[j] = (double)emb[t * D + j] + att[t * D + j];
            ck_assert(fabs(res[t * D + j] - row[j]) < 1e-5);
        }
        layernorm_ref(ln, row, w->ln1_g, w->ln1_b, D);
        for (int j = 0; j < D; j++) ck_assert(fabs(x1[t * D + j] - ln[j]) < 1e-4);
    }
    /* sub-layer 1: FFN(x) = max(0, x W1 + b1) W2 + b2  (Eq. 2), then Add & Norm */
    const float *ffn = model_sublayer(&m, 0, 0, 1, 0), *x2 = model_sublayer(&m, 0, 0, 1, 2);
    for (int t = 0; t < 4; t++) {
        for (int f = 0; f < F; f++) {
            double s = w->ffn_b1[f];
            for (int j = 0; j < D; j++) s += (double)x1[t * D + j] * w->ffn_w1[j * F + f];
            hid[f] = s > 0 ? s : 0;
        }
        for (int j = 0; j < D; j++) {
            double s = w->ffn_b2[j];
            for (int f = 0; f < F; f++) s += hid[f] * w->ffn_w2[f * D + j];
            ck_assert_msg(fabs(ffn[t * D + j] - s) < 1e-4, "FFN[%d][%d] %g vs %g", t, j, ffn[t * D + j], s);
            row[j] = (double)x1[t * D + j] + ffn[t * D + j];
        }
        layernorm_ref(ln, row, w->ln2_g, w->ln2_b, D);
        for (int j = 0; j < D; j++) ck_assert(fabs(x2[t * D + j] - ln[j]) < 1e-4);
    }
    /* the next layer reads what this one wrote, and logits = x E^T */
    const float *dec = model_decoder_output(&m), *logits = model_logits(&m);
    for (int r = 0; r < 3; r++)
        for (int v = 0; v < c.vocab; v++) {
            double s = 0;
            for (int j = 0; j < D; j++) s += (double)dec[r * D + j] * m.params.embed[v * D + j];
            ck_assert(fabs(logits[r * c.vocab + v] - s) < 1e-4);
        }
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Core: batches, layout reuse, greedy decoding
 * ========================================================================== */

START_TEST(test_batch_rows_independent_and_layout_reused) {
    Config c = test_config_tiny(0.0f);
    int V = c.vocab;
    Model m;
    build_or_fail(&m, &c, 3, 6, 5, 11);
    int src1[4] = {5, 2, 9, 3}, tgt1[3] = {1, 4, 7};
    float want[3 * 11], got[3 * 11];
    memcpy(want, model_forward(&m, src1, tgt1, 1, 4, 3, 0), sizeof want);
    for (int i = 0; i < 3 * V; i++) ck_assert(isfinite(want[i]) && want[i] <= 0.0f);
    for (int r = 0; r < 3; r++) {     /* each row of logp is a log-distribution */
        double s = 0;
        for (int v = 0; v < V; v++) s += exp((double)want[r * V + v]);
        ck_assert(fabs(s - 1.0) < 1e-5);
    }
    /* the same sequence as row 1 of a batch of 3: other rows must not leak in */
    int src3[12] = {8, 8, 7, 6, 5, 2, 9, 3, 4, 4, 4, 4}, tgt3[9] = {1, 2, 2, 1, 4, 7, 1, 9, 9};
    const float *lp = model_forward(&m, src3, tgt3, 3, 4, 3, 0);
    ck_assert_int_eq(m.B, 3);
    ck_assert_int_eq(m.Ts, 4);
    ck_assert_int_eq(m.Tt, 3);
    memcpy(got, lp + 3 * V, sizeof got);
    ck_assert_close_arrays(got, want, 3 * V, 1e-5);
    /* full capacity, then back to the small pass: same numbers again */
    int srcb[18] = {0}, tgtb[15] = {0};
    for (int i = 0; i < 18; i++) srcb[i] = 1 + i % 10;
    for (int i = 0; i < 15; i++) tgtb[i] = 1 + (i * 3) % 10;
    model_forward(&m, srcb, tgtb, 3, 6, 5, 0);
    memcpy(got, model_forward(&m, src1, tgt1, 1, 4, 3, 0), sizeof got);
    ck_assert_close_arrays(got, want, 3 * V, 0.0);
    /* attention weights: (B,h,Tq,Tk) rows are distributions */
    const float *w = model_attention(&m, ATTN_DEC_CROSS, 1);
    for (int r = 0; r < c.h * 3; r++) {
        double s = 0;
        for (int k = 0; k < 4; k++) s += w[r * 4 + k];
        ck_assert(fabs(s - 1.0) < 1e-5);
    }
    model_free(&m);
}
END_TEST

START_TEST(test_greedy_decode_matches_forward) {
    Config c = test_config_tiny(0.0f);
    int V = c.vocab;
    Model m;
    build_or_fail(&m, &c, 1, 5, 4, 12);
    int src[5] = {3, 9, 2, 7, 5}, tgt[4] = {1, 6, 2, 8};
    float full[4 * 11];
    memcpy(full, model_forward(&m, src, tgt, 1, 5, 4, 0), sizeof full);
    model_encode(&m, src, 1, 5, 0);
    for (int k = 1; k <= 4; k++) {
        const float *lp = model_decode(&m, tgt, k, 0);
        /* the prefix's last row is the full pass's row k-1 (causal mask) */
        ck_assert_close_arrays(lp + (k - 1) * V, full + (k - 1) * V, V, 1e-6);
    }
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Masks
 * ========================================================================== */

START_TEST(test_causality) {
    Config c = test_config_tiny(0.0f);
    c.pre_ln = _i;
    int V = c.vocab, Tt = 5;
    Model m;
    build_or_fail(&m, &c, 1, 4, Tt, 13);
    int src[4] = {4, 5, 6, 7}, tgt[5] = {1, 2, 3, 4, 5};
    float base[5 * 11], now[5 * 11];
    memcpy(base, model_forward(&m, src, tgt, 1, 4, Tt, 0), sizeof base);
    for (int k = 1; k < Tt; k++) {
        int t2[5];
        memcpy(t2, tgt, sizeof t2);
        t2[k] = 9;
        memcpy(now, model_forward(&m, src, t2, 1, 4, Tt, 0), sizeof now);
        /* rows before k cannot see position k (Sec. 3.2.3) ... */
        ck_assert_close_arrays(now, base, (size_t)k * V, 1e-6);
        /* ... and row k, which does see it, changes (so the test can fail) */
        Diff d = diff_arrays(now + k * V, base + k * V, (size_t)V);
        ck_assert_msg(d.max_abs > 1e-4, "changing token %d did not change its own row", k);
    }
    model_free(&m);
}
END_TEST

START_TEST(test_source_padding_changes_nothing) {
    Config c = test_config_tiny(0.0f);   /* pad_id 0 */
    c.pre_ln = _i;
    int V = c.vocab;
    Model m;
    build_or_fail(&m, &c, 2, 6, 3, 14);
    int src[3] = {5, 6, 7}, srcp[6] = {5, 6, 7, 0, 0, 0}, tgt[3] = {1, 5, 6};
    float a[3 * 11], b[3 * 11];
    memcpy(a, model_forward(&m, src, tgt, 1, 3, 3, 0), sizeof a);
    memcpy(b, model_forward(&m, srcp, tgt, 1, 6, 3, 0), sizeof b);
    ck_assert_close_arrays(b, a, 3 * (size_t)V, 1e-5);
    /* the masks the layers used: padding keys blocked */
    const uint8_t *mk = model_mask(&m, ATTN_DEC_CROSS);
    ck_assert_int_eq(mk[0 * 6 + 2], 1);
    ck_assert_int_eq(mk[0 * 6 + 3], 0);
    const uint8_t *ms = model_mask(&m, ATTN_DEC_SELF);
    ck_assert_int_eq(ms[0 * 3 + 1], 0);   /* causal: query 0 cannot see key 1 */
    ck_assert_int_eq(ms[2 * 3 + 1], 1);
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Gradient: finite differences for every parameter tensor
 * ========================================================================== */

/* The loss is a fixed random linear functional of the log-probabilities,
 * L = sum_{r,v} coef[r,v] * logp[r,v], summed in double. Its gradient with
 * respect to the logits, through the log-softmax, is
 *   dL/dlogits[r,k] = coef[r,k] - softmax[r,k] * sum_v coef[r,v].          */
static double linear_loss(const float *logp, const float *coef, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)coef[i] * logp[i];
    return s;
}
static void linear_dlogits(float *dlogits, const float *logp, const float *coef, int rows, int V) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int v = 0; v < V; v++) s += coef[r * V + v];
        for (int v = 0; v < V; v++)
            dlogits[r * V + v] = (float)(coef[r * V + v] - exp((double)logp[r * V + v]) * s);
    }
}

/* 2 sequences, the second padded in both source and target. */
enum { GB = 2, GTS = 5, GTT = 4 };
static const int g_src[GB * GTS] = {3, 7, 2, 9, 5, 4, 8, 6, 0, 0};
static const int g_tgt[GB * GTT] = {1, 5, 6, 10, 1, 3, 0, 0};

/* The loss of the model's forward pass at its current parameters; the
 * dropout RNG is rewound first, so every pass drops the same units. */
typedef struct {
    Model *m;
    const float *coef;
    int training;
    Rng saved;
} ModelLoss;

static double model_loss(void *ctx) {
    ModelLoss *c = ctx;
    model_set_dropout(c->m, c->saved, 0);
    const float *lp = model_forward(c->m, g_src, g_tgt, GB, GTS, GTT, c->training);
    return linear_loss(lp, c->coef, (size_t)GB * GTT * c->m->cfg.vocab);
}

/* Builds the tiny model, runs forward + backward once, and compares the
 * analytic gradient of 4 random entries of every tensor (plus embedding rows
 * that feed the target, the source, and only the output projection) with
 * central differences (fd_check_at): step h = 1e-3 on float32 weights,
 * loss summed in double; pass when |num - ana| <= 3e-3 + 2e-2 * max(|num|, |ana|).
 * ReLU is not differentiable at 0: when a hidden unit sits within ~h of its
 * kink, the difference quotient is wrong, not the backward pass. Such a
 * point shows itself by a second quotient with step 2h disagreeing with
 * the first; those (at most 1 in 10) are skipped, and a point whose 2h
 * quotient agrees with backward passes. A real error, where both quotients
 * agree with each other and not with backward, fails. */
static void gradient_check_pos(int pre_ln, float dropout, uint64_t seed, int pos) {
    Config c = test_config_tiny(0.0f);
    c.pre_ln = pre_ln;
    c.dropout = dropout;
    c.pos = pos;
    int V = c.vocab, rows = GB * GTT, training = dropout > 0;
    Model m;
    build_or_fail(&m, &c, GB, GTS, GTT, seed);
    perturb_params(&m, seed + 1);
    float coef[GB * GTT * 11], dlogits[GB * GTT * 11];
    Rng r;
    rng_seed(&r, seed + 2);
    for (int i = 0; i < rows * V; i++) coef[i] = rng_normal(&r);
    for (int i = 0; i < rows; i++)      /* padding targets do not count */
        if (g_tgt[i] == c.pad_id) memset(coef + i * V, 0, V * sizeof(float));

    Rng saved = m.dropout_rng;
    const float *lp = model_forward(&m, g_src, g_tgt, GB, GTS, GTT, training);
    linear_dlogits(dlogits, lp, coef, rows, V);
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    float *ana = malloc(m.grads.n * sizeof(float));
    memcpy(ana, m.grads.mem, m.grads.n * sizeof(float));

    const double h = 1e-3, atol = 3e-3, rtol = 2e-2;
    ModelLoss loss = {&m, coef, training, saved};
    char what[128];
    int checked = 0, nonzero = 0, skipped = 0;
    for (int ti = 0; ti < m.params.n_tensors; ti++) {
        NamedTensor *t = &m.params.tensors[ti];
        size_t n = named_tensor_numel(t), idx[7];
        int k = 0;
        for (; k < 4; k++) idx[k] = (size_t)rng_int(&r, (int)n);
        if (ti == 0) {   /* embedding rows by use (Sec. 3.4) */
            idx[k++] = (size_t)10 * c.d_model + 1;   /* token 10: target input + output projection */
            idx[k++] = (size_t)9 * c.d_model + 2;    /* token 9: source input + output projection  */
            idx[k++] = (size_t)0 * c.d_model + 3;    /* padding: output projection only            */
        }
        if (!strcmp(t->name, "pos_embed")) {   /* rows by use (Sec. 3.5's learned alternative) */
            idx[k++] = (size_t)0 * c.d_model + 1;    /* position 0: source and target            */
            idx[k++] = (size_t)4 * c.d_model + 2;    /* position 4: source only (GTT = 4)        */
            idx[k++] = (size_t)12 * c.d_model + 5;   /* position 12: never used, gradient 0      */
        }
        const float *grad = ana + (t->data - m.params.mem);
        for (int s = 0; s < k; s++) nonzero += fabs(grad[idx[s]]) > 1e-3;
        snprintf(what, sizeof what, "%s%s%s: %s", pre_ln ? "pre-LN" : "post-LN", dropout > 0 ? " +dropout" : "",
                 pos == POS_LEARNED ? " +learned PE" : "", t->name);
        checked += (int)fd_check_at(model_loss, &loss, t->data, grad, n, idx, (size_t)k, (float)h, atol, rtol,
                                    &skipped, what, __FILE__, __LINE__);
    }
    /* the check must have something to check */
    ck_assert_msg(nonzero > checked / 2, "only %d of %d sampled gradients are non-zero", nonzero, checked);
    ck_assert_msg(skipped * 10 <= checked, "%d of %d entries sat at a ReLU kink", skipped, checked);
    ck_assert_int_ge(checked, m.params.n_tensors * 4);
    free(ana);
    model_free(&m);
}

static void gradient_check(int pre_ln, float dropout, uint64_t seed) {
    gradient_check_pos(pre_ln, dropout, seed, POS_SINUSOID);
}

START_TEST(test_gradient_post_ln) { gradient_check(0, 0.0f, 21); }
END_TEST
START_TEST(test_gradient_pre_ln) { gradient_check(1, 0.0f, 22); }
END_TEST
START_TEST(test_gradient_dropout) { gradient_check(_i, 0.3f, 23 + _i); }
END_TEST
/* Table 3 (E): _i = 0 post-LN, 1 pre-LN + dropout */
START_TEST(test_gradient_learned_pe) { gradient_check_pos(_i, _i ? 0.3f : 0.0f, 27 + _i, POS_LEARNED); }
END_TEST

/* A learned table is used exactly where the sinusoids were: with the same
 * weights and pos_embed = the sinusoid table, the logits are the same bits;
 * positions past the sequence get exactly zero gradient. */
START_TEST(test_learned_pe_replaces_sinusoids) {
    Config c = test_config_tiny(0.0f), cl = c;
    cl.pos = POS_LEARNED;
    Model s, l;
    build_or_fail(&s, &c, GB, GTS, GTT, 31);
    build_or_fail(&l, &cl, GB, GTS, GTT, 32);
    ck_assert_ptr_null(s.params.pos_embed);
    ck_assert_ptr_null(params_find(&s.params, "pos_embed"));
    const NamedTensor *pe = params_find(&l.params, "pos_embed");
    ck_assert_ptr_nonnull(pe);
    ck_assert_int_eq(pe->shape[0], c.max_len);
    ck_assert_int_eq(pe->shape[1], c.d_model);
    ck_assert_uint_eq(l.params.n, s.params.n + (size_t)c.max_len * c.d_model);
    ck_assert_uint_eq(model_param_count(&cl), l.params.n);
    for (int i = 0; i < s.params.n_tensors; i++) {
        const NamedTensor *t = &s.params.tensors[i], *u = params_find(&l.params, t->name);
        ck_assert_ptr_nonnull(u);
        memcpy(u->data, t->data, named_tensor_numel(t) * sizeof(float));
    }
    memcpy(l.params.pos_embed, s.pe, (size_t)c.max_len * c.d_model * sizeof(float));
    size_t n = (size_t)GB * GTT * c.vocab;
    float *ls = malloc(n * sizeof(float));
    memcpy(ls, model_forward(&s, g_src, g_tgt, GB, GTS, GTT, 0), n * sizeof(float));
    ck_assert_int_eq(memcmp(model_forward(&l, g_src, g_tgt, GB, GTS, GTT, 0), ls, n * sizeof(float)), 0);
    /* the loss -logp[target]: rows past position GTS-1 get no gradient */
    float *dl = calloc(n, sizeof(float));
    for (int i = 0; i < GB * GTT; i++) dl[(size_t)i * c.vocab + 3] = 1.0f;
    model_zero_grad(&l);
    model_backward(&l, dl);
    double used = 0;
    for (int t = 0; t < c.max_len; t++)
        for (int j = 0; j < c.d_model; j++) {
            float g = l.grads.pos_embed[t * c.d_model + j];
            if (t >= GTS) ck_assert_msg(g == 0.0f, "pos_embed[%d][%d] gradient %g past the sequence", t, j, g);
            else used += fabs(g);
        }
    ck_assert(used > 0);
    free(ls);
    free(dl);
    model_free(&s);
    model_free(&l);
}
END_TEST

/* Padding tokens are blocked as keys and their target rows carry no loss,
 * so nothing flows back into the positions that hold them. */
START_TEST(test_padding_gets_no_gradient) {
    Config c = test_config_tiny(0.0f);
    c.pre_ln = _i;
    int V = c.vocab, D = c.d_model, rows = GB * GTT;
    Model m;
    build_or_fail(&m, &c, GB, GTS, GTT, 31);
    float coef[GB * GTT * 11], dlogits[GB * GTT * 11];
    Rng r;
    rng_seed(&r, 32);
    for (int i = 0; i < rows * V; i++) coef[i] = g_tgt[i / V] == c.pad_id ? 0.0f : rng_normal(&r);
    const float *lp = model_forward(&m, g_src, g_tgt, GB, GTS, GTT, 0);
    linear_dlogits(dlogits, lp, coef, rows, V);
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    const float *ds = model_input_grad(&m, 0), *dt = model_input_grad(&m, 1);
    for (int i = 0; i < GB * GTS; i++) {
        double s = 0;
        for (int j = 0; j < D; j++) s += fabs(ds[i * D + j]);
        if (g_src[i] == c.pad_id) ck_assert_msg(s == 0.0, "source pad position %d got gradient %g", i, s);
        else ck_assert_msg(s > 0.0, "source position %d got no gradient", i);
    }
    for (int i = 0; i < GB * GTT; i++) {
        double s = 0;
        for (int j = 0; j < D; j++) s += fabs(dt[i * D + j]);
        if (g_tgt[i] == c.pad_id) ck_assert_msg(s == 0.0, "target pad position %d got gradient %g", i, s);
        else ck_assert_msg(s > 0.0, "target position %d got no gradient", i);
    }
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Sharing: one embedding matrix, three uses (Sec. 3.4)
 * ========================================================================== */

START_TEST(test_embedding_shared_three_ways) {
    Config c = test_config_tiny(0.0f);
    c.pad_id = -1;
    int V = c.vocab, D = c.d_model;
    Model m;
    build_or_fail(&m, &c, 1, 2, 2, 41);
    /* pointer identity: the input table and the output projection are the
     * first tensor of the one allocation, and there is no other (vocab, D) */
    ck_assert_ptr_eq(m.params.embed, m.params.mem);
    ck_assert_ptr_eq(m.params.tensors[0].data, m.params.embed);
    for (int i = 1; i < m.params.n_tensors; i++)
        ck_assert(!(m.params.tensors[i].ndim == 2 && m.params.tensors[i].shape[0] == V));
    /* source uses ids 3,4; target 5,6; the loss touches only logit 7 */
    int src[2] = {3, 4}, tgt[2] = {5, 6};
    model_forward(&m, src, tgt, 1, 2, 2, 0);
    float dlogits[2 * 11] = {0};
    dlogits[0 * V + 7] = 1.0f;
    dlogits[1 * V + 7] = -0.5f;
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    const float *dE = m.grads.embed, *x = model_decoder_output(&m);
    for (int v = 0; v < V; v++) {
        double s = 0;
        for (int j = 0; j < D; j++) s += fabs(dE[v * D + j]);
        int used = v == 3 || v == 4 || v == 5 || v == 6 || v == 7;
        ck_assert_msg(used ? s > 0 : s == 0, "embedding row %d gradient %g", v, s);
    }
    /* row 7 gets exactly the output projection's part: dlogits[:,7]^T x */
    for (int j = 0; j < D; j++) {
        float want = 1.0f * x[j] - 0.5f * x[D + j];
        ck_assert(fabsf(dE[7 * D + j] - want) < 1e-5f);
    }
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Dropout: training differs from inference, and is reproducible
 * ========================================================================== */

START_TEST(test_dropout_training_only) {
    Config c = test_config_tiny(0.0f);
    c.dropout = 0.5f;
    int n = 3 * c.vocab;
    Model a, b;
    build_or_fail(&a, &c, 1, 3, 3, 51);
    build_or_fail(&b, &c, 1, 3, 3, 51);
    int src[3] = {2, 3, 4}, tgt[3] = {1, 2, 3};
    float inf1[33], inf2[33], tr[33], trb[33];
    memcpy(inf1, model_forward(&a, src, tgt, 1, 3, 3, 0), sizeof inf1);
    memcpy(tr, model_forward(&a, src, tgt, 1, 3, 3, 1), sizeof tr);
    memcpy(inf2, model_forward(&a, src, tgt, 1, 3, 3, 0), sizeof inf2);
    memcpy(trb, model_forward(&b, src, tgt, 1, 3, 3, 1), sizeof trb);
    ck_assert_close_arrays(inf2, inf1, n, 0.0);   /* inference ignores P_drop */
    ck_assert(diff_arrays(tr, inf1, n).max_abs > 1e-3);
    ck_assert_close_arrays(trb, tr, n, 0.0);      /* same seed, same drops */
    model_free(&a);
    model_free(&b);
}
END_TEST

/* ============================================================================
 * Limits
 * ========================================================================== */

typedef struct {
    const char *what;
    void (*edit)(Config *);
    const char *expect;   /* a piece of the message */
} BadConfig;

static void e_n0(Config *c) { c->N = 0; }
static void e_dmodel(Config *c) { c->d_model = -4; }
static void e_dff(Config *c) { c->d_ff = 0; }
static void e_h(Config *c) { c->h = 0; }
static void e_dk(Config *c) { c->d_k = 0; }
static void e_dv(Config *c) { c->d_v = -1; }
static void e_vocab(Config *c) { c->vocab = 1; }
static void e_maxlen(Config *c) { c->max_len = 0; }
static void e_drop1(Config *c) { c->dropout = 1.0f; }
static void e_dropneg(Config *c) { c->dropout = -0.1f; }
static void e_dropnan(Config *c) { c->dropout = NAN; }
static void e_pad(Config *c) { c->pad_id = c->vocab; }
static void e_pad2(Config *c) { c->pad_id = -2; }
static void e_preln(Config *c) { c->pre_ln = 2; }
static void e_pos(Config *c) { c->pos = 2; }
static void e_huge(Config *c) { c->N = 256, c->d_model = 65536, c->d_ff = 65536; }
static void e_bigwidth(Config *c) { c->d_model = 1 << 20; }

static const BadConfig bad_configs[] = {
    {"N=0", e_n0, "N (layers)"}, {"d_model<0", e_dmodel, "d_model"}, {"d_ff=0", e_dff, "d_ff"},
    {"h=0", e_h, "h (heads)"}, {"d_k=0", e_dk, "d_k"}, {"d_v<0", e_dv, "d_v"},
    {"vocab=1", e_vocab, "vocab"}, {"max_len=0", e_maxlen, "max_len"},
    {"dropout=1", e_drop1, "dropout"}, {"dropout<0", e_dropneg, "dropout"},
    {"dropout=nan", e_dropnan, "dropout"}, {"pad=vocab", e_pad, "pad_id"}, {"pad=-2", e_pad2, "pad_id"},
    {"pre_ln=2", e_preln, "pre_ln"}, {"pos=2", e_pos, "learned positional"}, {"huge", e_huge, "billion parameters"},
    {"d_model 2^20", e_bigwidth, "d_model"},
};

START_TEST(test_config_rejects) {
    const BadConfig *b = &bad_configs[_i];
    Config c = config_base();
    b->edit(&c);
    char err[256] = "";
    ck_assert_int_eq(config_validate(&c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, b->expect) != NULL, "%s: message '%s' lacks '%s'", b->what, err, b->expect);
    /* model_build refuses it too and leaves a model that model_free accepts */
    Model m;
    ck_assert_int_ne(model_build(&m, &c, 1, 1, 1, 0, err, sizeof err), 0);
    model_free(&m);
}
END_TEST

START_TEST(test_build_and_input_limits) {
    Config c = test_config_tiny(0.0f);
    Model m;
    char err[256] = "";
    /* longer than the PE table */
    ck_assert_int_eq(model_build(&m, &c, 1, 17, 3, 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "max_len"));
    model_free(&m);
    ck_assert_int_eq(model_build(&m, &c, 0, 3, 3, 0, err, sizeof err), 2);
    model_free(&m);
    /* a batch that could never fit in memory is a message, not a crash */
    Config big = config_base();
    ck_assert_int_eq(model_build(&m, &big, 1 << 30, 512, 512, 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "GB"));
    model_free(&m);
    model_free(NULL);
    model_free(&m);   /* twice: still a no-op */

    build_or_fail(&m, &c, 2, 4, 4, 0);
    int ids[4] = {1, 2, 11, 3};
    ck_assert_int_eq(model_check_tokens(&c, ids, 4, "--src", err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--src"));
    ck_assert_ptr_nonnull(strstr(err, "11"));
    ids[2] = -1;
    ck_assert_int_eq(model_check_tokens(&c, ids, 4, "--tgt", err, sizeof err), 2);
    ids[2] = 10;
    ck_assert_int_eq(model_check_tokens(&c, ids, 4, "--tgt", err, sizeof err), 0);
    ck_assert_int_eq(model_check_sizes(&m, 2, 4, 4, err, sizeof err), 0);
    ck_assert_int_eq(model_check_sizes(&m, 3, 4, 4, err, sizeof err), 2);
    ck_assert_int_eq(model_check_sizes(&m, 1, 5, 1, err, sizeof err), 2);
    ck_assert_int_eq(model_check_sizes(&m, 1, 1, 17, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "max_len"));
    ck_assert_int_eq(model_check_sizes(&m, 1, 0, 1, err, sizeof err), 2);
    model_free(&m);
}
END_TEST

/* Length 1 everywhere, and a source that is all padding: finite outputs. */
START_TEST(test_limits_tiny_and_all_padding) {
    Config c = test_config_tiny(0.0f);
    c.pre_ln = _i;
    Model m;
    build_or_fail(&m, &c, 1, 3, 1, 61);
    int src1[1] = {4}, tgt1[1] = {1}, src0[3] = {0, 0, 0};
    const float *lp = model_forward(&m, src1, tgt1, 1, 1, 1, 0);
    for (int v = 0; v < c.vocab; v++) ck_assert(isfinite(lp[v]));
    lp = model_forward(&m, src0, tgt1, 1, 3, 1, 0);
    for (int v = 0; v < c.vocab; v++) ck_assert(isfinite(lp[v]));
    float dl[11] = {0};
    dl[3] = 1.0f;
    model_zero_grad(&m);
    model_backward(&m, dl);
    for (size_t i = 0; i < m.grads.n; i++) ck_assert(isfinite(m.grads.mem[i]));
    model_free(&m);
}
END_TEST

/* ============================================================================
 * Capacity: the activation block sized by the batches that run
 * ========================================================================== */

START_TEST(test_acts_floats_is_the_allocation) {
    Config c = test_config_tiny(0.0f);
    static const int shapes[][3] = {{1, 1, 1}, {3, 6, 5}, {4, 3, 2}, {1, 8, 7}, {2, 16, 16}};
    char err[256] = "";
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int B = shapes[i][0], Ts = shapes[i][1], Tt = shapes[i][2];
        size_t want = model_acts_floats(&c, B, Ts, Tt);
        ck_assert_uint_gt(want, 0);
        Model m;
        build_or_fail(&m, &c, B, Ts, Tt, 3);
        ck_assert_msg(m.acts_floats == want, "(%d,%d,%d): built %zu floats, model_acts_floats %zu", B, Ts, Tt,
                      m.acts_floats, want);
        model_free(&m);
        /* exactly that many: a block one alignment step (16 floats) short no
         * longer holds the batch (the smallest batch: then no batch at all) */
        if (want - 16 >= model_acts_floats(&c, 1, 1, 1)) {
            ck_assert_int_eq(model_build_cap(&m, &c, B, Ts, Tt, want - 16, 3, err, sizeof err), 0);
            ck_assert_int_eq(model_check_sizes(&m, B, Ts, Tt, err, sizeof err), 2);
            ck_assert_ptr_nonnull(strstr(err, "activations"));
            model_free(&m);
        }
        /* it grows with each dimension */
        ck_assert_uint_gt(model_acts_floats(&c, B + 1, Ts, Tt), want);
        ck_assert_uint_gt(model_acts_floats(&c, B, Ts + 1, Tt), want);
        ck_assert_uint_gt(model_acts_floats(&c, B, Ts, Tt + 1), want);
    }
    ck_assert_uint_eq(model_acts_floats(&c, 0, 1, 1), 0);
    Config bad = c;
    bad.d_k = 0;
    ck_assert_uint_eq(model_acts_floats(&bad, 1, 1, 1), 0);
    /* a capacity that holds no batch is a message */
    Model m;
    ck_assert_int_eq(model_build_cap(&m, &c, 1, 1, 1, 1, 0, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "model_acts_floats"));
    model_free(&m);
}
END_TEST

/* Two batches under one token budget: 4 rows of (3, 2) tokens and 1 row of
 * (8, 7). Per dimension that is 4 x (8, 7); sized by the batches, the block
 * holds the larger of the two, and both run exactly as before. */
enum { CAP_MAX_B = 4, CAP_MAX_TS = 8, CAP_MAX_TT = 7 };
static const int cap_shapes[2][3] = {{4, 3, 2}, {1, 8, 7}};

static size_t cap_floats(const Config *c) {
    size_t a = model_acts_floats(c, cap_shapes[0][0], cap_shapes[0][1], cap_shapes[0][2]);
    size_t b = model_acts_floats(c, cap_shapes[1][0], cap_shapes[1][1], cap_shapes[1][2]);
    return a > b ? a : b;
}

START_TEST(test_capacity_two_shapes_bit_for_bit) {
    Config c = test_config_tiny(0.0f);
    c.pre_ln = _i;
    c.dropout = 0.2f;   /* training passes: dropout's bits must follow too */
    char err[256] = "";
    Model old, cap;
    build_or_fail(&old, &c, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT, 41);
    ck_assert_int_eq(model_build_cap(&cap, &c, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT, cap_floats(&c), 41, err,
                                     sizeof err), 0);
    ck_assert_uint_lt(cap.acts_floats, old.acts_floats);
    ck_assert_uint_eq(cap.acts_floats, cap_floats(&c));
    perturb_params(&old, 42);
    memcpy(cap.params.mem, old.params.mem, old.params.n * sizeof(float));
    int V = c.vocab, src[CAP_MAX_B * CAP_MAX_TS], tgt[CAP_MAX_B * CAP_MAX_TT];
    float dl[CAP_MAX_B * CAP_MAX_TT * 11];
    Rng r;
    rng_seed(&r, 43);
    /* each shape twice, in turn, training and not: the regions move with every call */
    for (int pass = 0; pass < 4; pass++) {
        int B = cap_shapes[pass % 2][0], Ts = cap_shapes[pass % 2][1], Tt = cap_shapes[pass % 2][2];
        int training = pass >= 2, rows = B * Tt;
        ck_assert_int_eq(model_check_sizes(&cap, B, Ts, Tt, err, sizeof err), 0);
        for (int i = 0; i < B * Ts; i++) src[i] = rng_int(&r, V);
        for (int i = 0; i < B * Tt; i++) tgt[i] = 1 + rng_int(&r, V - 1);
        for (int i = 0; i < rows * V; i++) dl[i] = rng_uniform(&r) - 0.5f;
        const float *a = model_forward(&old, src, tgt, B, Ts, Tt, training);
        const float *b = model_forward(&cap, src, tgt, B, Ts, Tt, training);
        ck_assert_close_arrays(b, a, (size_t)rows * V, 0.0);
        ck_assert(memcmp(a, b, (size_t)rows * V * sizeof(float)) == 0);
        model_zero_grad(&old);
        model_zero_grad(&cap);
        model_backward(&old, dl);
        model_backward(&cap, dl);
        ck_assert(memcmp(old.grads.mem, cap.grads.mem, old.grads.n * sizeof(float)) == 0);
        ck_assert(memcmp(model_input_grad(&old, 0), model_input_grad(&cap, 0), (size_t)B * Ts * c.d_model * 4) == 0);
    }
    /* the per-dimension maxima at once: the old block holds it, this one does not */
    ck_assert_int_eq(model_check_sizes(&old, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT, err, sizeof err), 0);
    ck_assert_int_eq(model_check_sizes(&cap, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "activations"));
    model_free(&old);
    model_free(&cap);
}
END_TEST

/* A forward over capacity is a programming error: it stops at an assertion
 * (SIGABRT) before writing past the block, and before any op runs. In a
 * child process of its own, so it works with CK_FORK=no too; the child's
 * message is discarded. Returns -signal, or the child's exit status. */
static int forward_in_child(Model *m, int B, int Ts, int Tt) {
    static int src[CAP_MAX_B * CAP_MAX_TS], tgt[CAP_MAX_B * CAP_MAX_TT];
    for (int i = 0; i < CAP_MAX_B * CAP_MAX_TT; i++) tgt[i] = 1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        model_forward(m, src, tgt, B, Ts, Tt, 0);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

START_TEST(test_capacity_over_asserts) {
    Config c = test_config_tiny(0.0f);
    Model m;
    char err[256] = "";
    ck_assert_int_eq(model_build_cap(&m, &c, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT, cap_floats(&c), 5, err, sizeof err), 0);
    /* within every per-dimension limit, but not within the block */
    ck_assert_int_eq(forward_in_child(&m, CAP_MAX_B, CAP_MAX_TS, CAP_MAX_TT), -SIGABRT);
    /* the encoder fits (4 rows of 3 source tokens), the decoder's 7 target tokens do not */
    ck_assert_int_eq(forward_in_child(&m, 4, 3, CAP_MAX_TT), -SIGABRT);
    model_free(&m);
}
END_TEST

Suite *model_suite(void) {
    Suite *s = suite_create("model");
    TCase *tc = suite_case(s, "Core", test_param_count_base, test_init_deterministic,
                           test_init_statistics, test_embedding_and_layer_by_hand,
                           test_batch_rows_independent_and_layout_reused,
                           test_greedy_decode_matches_forward);
    tcase_add_loop_test(tc, test_param_count_matches_tensors, 0, (int)(sizeof count_configs / sizeof count_configs[0]));
    tc = tcase_create("Masks");
    tcase_add_loop_test(tc, test_causality, 0, 2);
    tcase_add_loop_test(tc, test_source_padding_changes_nothing, 0, 2);
    tcase_add_loop_test(tc, test_padding_gets_no_gradient, 0, 2);
    suite_add_tcase(s, tc);
    suite_case(s, "Sharing", test_embedding_shared_three_ways, test_dropout_training_only);
    tc = suite_case(s, "Gradient", test_gradient_post_ln, test_gradient_pre_ln,
                    test_learned_pe_replaces_sinusoids);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gradient_dropout, 0, 2);
    tcase_add_loop_test(tc, test_gradient_learned_pe, 0, 2);
    tc = suite_case(s, "Limits", test_build_and_input_limits);
    tcase_add_loop_test(tc, test_config_rejects, 0, (int)(sizeof bad_configs / sizeof bad_configs[0]));
    tcase_add_loop_test(tc, test_limits_tiny_and_all_padding, 0, 2);
    tc = suite_case(s, "Capacity", test_acts_floats_is_the_allocation, test_capacity_over_asserts);
    tcase_add_loop_test(tc, test_capacity_two_shapes_bit_for_bit, 0, 2);
    return s;
}
