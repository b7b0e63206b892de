/* check_lm.c - the decoder alone as a language model (Config.arch =
 * ARCH_DECODER, chapter 14; issue 43), and the 2026 switches it carries
 * (Config.norm = NORM_RMS, Config.ffn = FFN_SWIGLU): its parameters and shapes, causality, the
 * gradient of every tensor by finite differences, a checkpoint round trip,
 * and a tiny text learned.
 *
 *   CK_RUN_SUITE=lm make test
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/model.h"
#include "model/train.h"
#include "layers/lm_ffn.h"
#include "io/checkpoint.h"
#include "io/torch_export.h"
#include "model/decode.h"
#include "core/rng.h"
#include "testutil.h"

/* The tiny model of testutil.h (N=2, d_model 8, d_ff 12, h 2, d_k 4, d_v 3,
 * vocab 11, max_len 16), decoder only. */
static Config lm_config(int pre_ln, float dropout, int pos) {
    Config c = test_config_tiny(dropout);
    c.arch = ARCH_DECODER;
    c.pre_ln = pre_ln;
    c.pos = pos;
    return c;
}
static Config lm_config_rms(int pre_ln, float dropout) {
    Config c = lm_config(pre_ln, dropout, POS_SINUSOID);
    c.norm = NORM_RMS;
    return c;
}

static void build_lm(Model *m, const Config *c, int B, int T, uint64_t seed) { build_or_fail(m, c, B, 0, T, seed); }

/* ============================================================================
 * Core: what the model holds, what it computes
 * ========================================================================== */

/* By hand, for the tiny config: one multi-head attention 2*8*(2*4) + 2*8*(2*3)
 * = 224, the FFN 2*8*12 + 12 + 8 = 212, two Norms 2*(8+8) = 32: a layer 468,
 * two 936, the embedding 11*8 = 88: 1024; pre-LN adds the final Norm, 16. */
START_TEST(test_param_count_by_hand) {
    for (int pre = 0; pre <= 1; pre++) {
        Config c = lm_config(pre, 0.0f, POS_SINUSOID);
        size_t want = pre ? 1040u : 1024u;
        ck_assert_uint_eq(model_param_count(&c), want);
        Model m;
        build_lm(&m, &c, 1, 4, 1);
        ck_assert_uint_eq(m.params.n, want);
        size_t sum = 0;
        for (int i = 0; i < m.params.n_tensors; i++) {
            const NamedTensor *t = &m.params.tensors[i];
            ck_assert_msg(t->data == m.params.mem + sum, "%s is not where the previous tensor ended", t->name);
            sum += named_tensor_numel(t);
            ck_assert_msg(strncmp(t->name, "encoder.", 8) != 0, "a decoder-only model holds %s", t->name);
            ck_assert_msg(strstr(t->name, "cross_attn") == NULL && strstr(t->name, ".ln2.") == NULL,
                          "a decoder-only model holds %s", t->name);
        }
        ck_assert_uint_eq(sum, want);
        /* embed, then per layer 4 attention + 2 Norm + 4 FFN + 2 Norm, then the final Norm */
        ck_assert_int_eq(m.params.n_tensors, 1 + 12 * c.N + (pre ? 2 : 0));
        ck_assert_ptr_nonnull(params_find(&m.params, "decoder.1.ln3.gamma"));
        ck_assert_ptr_null(m.params.enc);
        ck_assert_ptr_null(m.params.dec[0].cross_attn.w_q);
        model_free(&m);
    }
    /* learned positions add their (max_len, d_model) table */
    Config c = lm_config(0, 0.0f, POS_LEARNED);
    ck_assert_uint_eq(model_param_count(&c), 1024u + 16 * 8);
}
END_TEST

/* RMSNorm keeps a gain and drops the bias: each Norm 8 floats instead of
 * 16, so the tiny decoder is 1024 - 2 layers x 2 Norms x 8 = 992, pre-LN
 * 992 + 8 = 1000; the encoder-decoder loses 8 per Norm: 5 per layer pair,
 * 2 final ones in pre-LN. No tensor named "beta" is left. */
START_TEST(test_rms_param_count) {
    for (int pre = 0; pre <= 1; pre++) {
        Config c = lm_config_rms(pre, 0.0f);
        size_t want = pre ? 1000u : 992u;
        ck_assert_uint_eq(model_param_count(&c), want);
        Model m;
        build_lm(&m, &c, 1, 4, 1);
        size_t sum = 0;
        for (int i = 0; i < m.params.n_tensors; i++) {
            sum += named_tensor_numel(&m.params.tensors[i]);
            ck_assert_msg(strstr(m.params.tensors[i].name, "beta") == NULL, "RMSNorm holds %s",
                          m.params.tensors[i].name);
        }
        ck_assert_uint_eq(sum, want);
        ck_assert_int_eq(m.params.n_tensors, 1 + 10 * c.N + pre);
        ck_assert_ptr_null(m.params.dec[0].ln1_b);
        model_free(&m);
        Config ed = test_config_tiny(0.0f), er = ed;
        ed.pre_ln = er.pre_ln = pre;
        er.norm = NORM_RMS;
        ck_assert_uint_eq(model_param_count(&ed) - model_param_count(&er), (size_t)8 * (5 * ed.N + 2 * pre));
    }
    Config c = lm_config_rms(0, 0.0f);
    char err[128];
    c.norm = 2;
    ck_assert_int_eq(config_validate(&c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "norm is 2") != NULL, "message: %s", err);
}
END_TEST

/* SwiGLU's FFN is W1, W2, W3 without biases: 3*8*12 = 288 floats where
 * Eq. 2's had 212, so a tiny decoder layer is 224 + 288 + 32 = 544, the
 * model 88 + 2*544 = 1176 (1144 with RMSNorm: 4 biases of 8 fewer). At
 * swiglu_d_ff's width, 2/3 of d_ff, the count comes within 3*d_model/2 per
 * layer of the ReLU model's less its biases. */
START_TEST(test_swiglu_param_count) {
    Config c = lm_config(0, 0.0f, POS_SINUSOID);
    c.ffn = FFN_SWIGLU;
    ck_assert_uint_eq(model_param_count(&c), 1176u);
    Model m;
    build_lm(&m, &c, 1, 4, 1);
    size_t sum = 0;
    for (int i = 0; i < m.params.n_tensors; i++) {
        sum += named_tensor_numel(&m.params.tensors[i]);
        const char *name = m.params.tensors[i].name;
        ck_assert_msg(strstr(name, ".b1") == NULL && strstr(name, ".b2") == NULL, "SwiGLU holds %s", name);
    }
    ck_assert_uint_eq(sum, 1176u);
    ck_assert_int_eq(m.params.n_tensors, 1 + 11 * c.N);
    const NamedTensor *w3 = params_find(&m.params, "decoder.1.ffn.w3");
    ck_assert_ptr_nonnull(w3);
    ck_assert_int_eq(w3->shape[0], c.d_model);
    ck_assert_int_eq(w3->shape[1], c.d_ff);
    model_free(&m);
    c.norm = NORM_RMS;
    ck_assert_uint_eq(model_param_count(&c), 1144u);
    Config relu = lm_config(0, 0.0f, POS_SINUSOID);
    relu.d_model = 64, relu.d_ff = 256;
    Config glu = relu;
    glu.ffn = FFN_SWIGLU, glu.d_ff = swiglu_d_ff(relu.d_ff, 1);   /* 171 */
    size_t biases = (size_t)relu.N * (relu.d_ff + relu.d_model);
    double gap = fabs((double)model_param_count(&glu) - (double)(model_param_count(&relu) - biases));
    ck_assert_msg(gap <= 3.0 * relu.d_model / 2 * relu.N, "SwiGLU at d_ff %d: %zu parameters against %zu", glu.d_ff,
                  model_param_count(&glu), model_param_count(&relu) - biases);
    c.ffn = 2;
    char err[128];
    ck_assert_int_eq(config_validate(&c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "ffn is 2") != NULL, "message: %s", err);
}
END_TEST

/* Each Norm of the model is x / RMS(x) * g, by hand: the FFN sub-layer of
 * the last layer (post-LN: y = Norm(x + FFN(x)), the sum saved as SUB_SUM),
 * and the final Norm of a pre-LN stack (what feeds the output projection). */
START_TEST(test_rms_by_hand) {
    for (int pre = 0; pre <= 1; pre++) {
        Config c = lm_config_rms(pre, 0.0f);
        enum { T = 4 };
        int D = c.d_model, tgt[T] = {2, 7, 1, 8};
        Model m;
        build_lm(&m, &c, 1, T, 12 + pre);
        perturb_params(&m, 13);
        model_forward_lm(&m, tgt, 1, T, 0);
        const DecoderLayer *w = &m.params.dec[c.N - 1];
        const float *sum = model_sublayer(&m, 1, c.N - 1, SUB_DEC_FFN, SUB_SUM);
        const float *y = pre ? model_decoder_output(&m) : model_sublayer(&m, 1, c.N - 1, SUB_DEC_FFN, SUB_Y);
        const float *g = pre ? m.params.dec_ln_g : w->ln3_g;
        for (int t = 0; t < T; t++) {
            double ms = 0;
            for (int j = 0; j < D; j++) ms += (double)sum[t * D + j] * sum[t * D + j];
            double r = 1 / sqrt(ms / D + 1e-5);
            for (int j = 0; j < D; j++)
                ck_assert_msg(fabs(y[t * D + j] - sum[t * D + j] * r * g[j]) < 1e-5, "%s: row %d col %d: %g vs %g",
                              pre ? "pre-LN final" : "post-LN", t, j, y[t * D + j], sum[t * D + j] * r * g[j]);
        }
        model_free(&m);
    }
}
END_TEST

/* model_forward_lm: logp (B*T, vocab), each row a distribution; the same
 * through model_forward with no source; the activation block smaller than
 * the encoder-decoder's. */
START_TEST(test_forward_shapes) {
    Config c = lm_config(0, 0.0f, POS_SINUSOID);
    enum { B = 2, T = 5 };
    Model m;
    build_lm(&m, &c, B, T, 2);
    int tgt[B * T] = {1, 4, 7, 2, 9, 3, 3, 10, 5, 6};
    const float *lp = model_forward_lm(&m, tgt, B, T, 0);
    float first[B * T * 11];
    memcpy(first, lp, sizeof first);
    for (int r = 0; r < B * T; r++) {
        double s = 0;
        for (int v = 0; v < c.vocab; v++) s += exp(first[r * c.vocab + v]);
        ck_assert_msg(fabs(s - 1) < 1e-5, "row %d of exp(logp) sums to %g", r, s);
    }
    ck_assert_int_eq(m.B, B);
    ck_assert_int_eq(m.Ts, 0);
    ck_assert_int_eq(m.Tt, T);
    lp = model_forward(&m, NULL, tgt, B, 0, T, 0);
    ck_assert_int_eq(memcmp(lp, first, sizeof first), 0);
    Config ed = c;
    ed.arch = ARCH_ENC_DEC;
    ck_assert_uint_lt(model_acts_floats(&c, B, 0, T), model_acts_floats(&ed, B, T, T));
    ck_assert_uint_eq(model_acts_floats(&c, B, 1, T), 0);   /* a source is an invalid size */
    model_free(&m);
}
END_TEST

/* Position t sees tokens 0..t only (Sec. 3.2.3): changing token t leaves
 * the log-probabilities of every earlier position bit for bit as they were,
 * and changes its own. */
START_TEST(test_causal) {
    for (int pre = 0; pre <= 2; pre++) {   /* post-LN; pre-LN; pre-RMSNorm with SwiGLU */
        Config c = lm_config(pre > 0, 0.0f, POS_SINUSOID);
        if (pre == 2) c.norm = NORM_RMS, c.ffn = FFN_SWIGLU;
        enum { T = 6 };
        int V = c.vocab;
        Model m;
        build_lm(&m, &c, 1, T, 3 + pre);
        perturb_params(&m, 5);
        int tgt[T] = {2, 8, 5, 1, 9, 4};
        float base[T * 11];
        memcpy(base, model_forward_lm(&m, tgt, 1, T, 0), sizeof base);
        for (int t = 0; t < T; t++) {
            int edited[T];
            memcpy(edited, tgt, sizeof edited);
            edited[t] = (tgt[t] + 3) % V;
            const float *lp = model_forward_lm(&m, edited, 1, T, 0);
            ck_assert_msg(memcmp(lp, base, (size_t)t * V * sizeof(float)) == 0,
                          "changing token %d changed an earlier position's output", t);
            ck_assert_msg(memcmp(lp + t * V, base + t * V, V * sizeof(float)) != 0,
                          "changing token %d left its own position's output unchanged", t);
        }
        model_free(&m);
    }
}
END_TEST

/* ============================================================================
 * Limits: wrong sizes are plain errors
 * ========================================================================== */

START_TEST(test_sizes_refused) {
    Config c = lm_config(0, 0.0f, POS_SINUSOID);
    Model m;
    char err[256] = "";
    ck_assert_int_eq(model_build(&m, &c, 1, 4, 4, 1, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "reads no source") != NULL, "message: %s", err);
    model_free(&m);
    build_lm(&m, &c, 2, 4, 1);
    ck_assert_int_eq(model_check_sizes(&m, 2, 0, 4, err, sizeof err), 0);
    ck_assert_int_eq(model_check_sizes(&m, 2, 3, 4, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Ts must be 0") != NULL, "message: %s", err);
    ck_assert_int_eq(model_check_sizes(&m, 2, 0, 5, err, sizeof err), 2);
    /* the KV-cached decoder serves the encoder-decoder with Eq. 2's FFN only */
    Decoder d;
    ck_assert_int_eq(decoder_new(&d, &m, 1, 1, 4, 4, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "no source") != NULL, "message: %s", err);
    decoder_free(&d);
    model_free(&m);
    Config g = test_config_tiny(0.0f);
    g.ffn = FFN_SWIGLU;
    ck_assert_int_eq(model_build(&m, &g, 1, 4, 4, 1, err, sizeof err), 0);
    ck_assert_int_eq(decoder_new(&d, &m, 1, 1, 4, 4, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "SwiGLU") != NULL, "message: %s", err);
    decoder_free(&d);
    model_free(&m);
    /* torch.nn.Transformer has no decoder-only twin: the export says so */
    c.d_v = c.d_k;
    ck_assert_int_eq(torch_export_check(&c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "no twin") != NULL, "message: %s", err);
    c.arch = ARCH_ENC_DEC;
    ck_assert_int_eq(torch_export_check(&c, err, sizeof err), 0);
    c.arch = 2;
    ck_assert_int_eq(config_validate(&c, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "arch is 2") != NULL, "message: %s", err);
}
END_TEST

/* ============================================================================
 * Gradient: every parameter tensor against central differences
 * ========================================================================== */

enum { GB = 2, GT = 5, GS = 4 };
static const int g_tgt[GB * GT] = {1, 5, 6, 10, 2, 3, 9, 7, 4, 8};
static const int g_src[GB * GS] = {3, 7, 2, 9, 5, 4, 8, 6};   /* the encoder-decoder's source */

/* L = sum over rows, classes of coef * logp: dL/dlogits through the
 * log-softmax is coef - softmax * sum(coef) (as check_model.c) */
typedef struct {
    Model *m;
    const float *coef;
    int training;
    Rng saved;
} LmLoss;

/* the decoder alone, or (ARCH_ENC_DEC) the whole model on g_src */
static const float *forward_any(Model *m, int training) {
    if (m->cfg.arch == ARCH_DECODER) return model_forward_lm(m, g_tgt, GB, GT, training);
    return model_forward(m, g_src, g_tgt, GB, GS, GT, training);
}

static double lm_loss(void *ctx) {
    LmLoss *c = ctx;
    model_set_dropout(c->m, c->saved, 0);
    const float *lp = forward_any(c->m, c->training);
    double s = 0;
    for (size_t i = 0; i < (size_t)GB * GT * c->m->cfg.vocab; i++) s += (double)c->coef[i] * lp[i];
    return s;
}

/* check_model.c's gradient_check_pos for the decoder alone: 4 random entries
 * of every tensor (and the embedding's rows by use), step 1e-3, pass when
 * |num - ana| <= 3e-3 + 2e-2 max(|num|, |ana|); an entry at a ReLU kink
 * (the 2h quotient disagrees with the h one) is skipped, at most 1 in 10. */
static void gradient_check_lm(const Config *c, uint64_t seed, const char *label) {
    int V = c->vocab, rows = GB * GT, training = c->dropout > 0;
    Model m;
    char err[256] = "";
    int lm = c->arch == ARCH_DECODER;
    ck_assert_msg(model_build(&m, c, GB, lm ? 0 : GS, GT, seed, err, sizeof err) == 0, "%s", err);
    perturb_params(&m, seed + 1);
    float coef[GB * GT * 11], dlogits[GB * GT * 11];
    Rng r;
    rng_seed(&r, seed + 2);
    for (int i = 0; i < rows * V; i++) coef[i] = rng_normal(&r);

    Rng saved = m.dropout_rng;
    const float *lp = forward_any(&m, training);
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int v = 0; v < V; v++) s += coef[i * V + v];
        for (int v = 0; v < V; v++) dlogits[i * V + v] = (float)(coef[i * V + v] - exp((double)lp[i * V + v]) * s);
    }
    model_zero_grad(&m);
    model_backward(&m, dlogits);
    /* a decoder-only model has no source: its input gradient is the target's */
    const float *dx = model_input_grad(&m, 1);
    double norm = 0;
    for (int i = 0; i < rows * c->d_model; i++) norm += fabs(dx[i]);
    ck_assert_msg(norm > 0, "%s: no gradient reached the embedded tokens", label);
    float *ana = malloc(m.grads.n * sizeof(float));
    ck_assert_ptr_nonnull(ana);
    memcpy(ana, m.grads.mem, m.grads.n * sizeof(float));

    LmLoss loss = {&m, coef, training, saved};
    char what[128];
    int checked = 0, nonzero = 0, skipped = 0;
    for (int ti = 0; ti < m.params.n_tensors; ti++) {
        NamedTensor *t = &m.params.tensors[ti];
        size_t n = named_tensor_numel(t), idx[7];
        int k = 0;
        for (; k < 4; k++) idx[k] = (size_t)rng_int(&r, (int)n);
        if (ti == 0) {   /* embedding rows by use (Sec. 3.4) */
            idx[k++] = (size_t)10 * c->d_model + 1;   /* token 10: input and output projection */
            idx[k++] = (size_t)0 * c->d_model + 3;    /* token 0: output projection only       */
        }
        if (!strcmp(t->name, "pos_embed")) {
            idx[k++] = (size_t)4 * c->d_model + 2;    /* position 4: the last used             */
            idx[k++] = (size_t)12 * c->d_model + 5;   /* position 12: never used, gradient 0   */
        }
        const float *grad = ana + (t->data - m.params.mem);
        for (int s = 0; s < k; s++) nonzero += fabs(grad[idx[s]]) > 1e-3;
        snprintf(what, sizeof what, "%s: %s", label, t->name);
        checked += (int)fd_check_at(lm_loss, &loss, t->data, grad, n, idx, (size_t)k, 1e-3f, 3e-3, 2e-2, &skipped,
                                    what, __FILE__, __LINE__);
    }
    ck_assert_msg(nonzero > checked / 2, "%s: only %d of %d sampled gradients are non-zero", label, nonzero, checked);
    ck_assert_msg(skipped * 10 <= checked, "%s: %d of %d entries sat at a ReLU kink", label, skipped, checked);
    ck_assert_int_ge(checked, m.params.n_tensors * 4);
    free(ana);
    model_free(&m);
}

START_TEST(test_gradient_post_ln) {
    Config c = lm_config(0, 0.0f, POS_SINUSOID);
    gradient_check_lm(&c, 41, "decoder-only post-LN");
}
END_TEST
START_TEST(test_gradient_pre_ln) {
    Config c = lm_config(1, 0.0f, POS_SINUSOID);
    gradient_check_lm(&c, 42, "decoder-only pre-LN");
}
END_TEST
START_TEST(test_gradient_learned_dropout) {
    Config c = lm_config(1, 0.3f, POS_LEARNED);
    gradient_check_lm(&c, 43, "decoder-only pre-LN +learned PE +dropout");
}
END_TEST
START_TEST(test_gradient_rms) {   /* _i = 0 post-RMSNorm, 1 pre-RMSNorm */
    Config c = lm_config_rms(_i, 0.0f);
    gradient_check_lm(&c, 44 + _i, _i ? "decoder-only pre-RMSNorm" : "decoder-only post-RMSNorm");
}
END_TEST
/* _i = 0: SwiGLU with post-LayerNorm; 1: SwiGLU with pre-RMSNorm, learned
 * positions and dropout (the 2026 decoder less RoPE and GQA) */
START_TEST(test_gradient_swiglu) {
    Config c = _i ? lm_config_rms(1, 0.3f) : lm_config(0, 0.0f, POS_SINUSOID);
    c.ffn = FFN_SWIGLU;
    if (_i) c.pos = POS_LEARNED;
    gradient_check_lm(&c, 47 + _i, _i ? "decoder-only SwiGLU pre-RMSNorm +learned PE +dropout"
                                      : "decoder-only SwiGLU post-LN");
}
END_TEST
/* the switches reach the encoder-decoder too: _i = 0 RMSNorm post-LN,
 * 1 SwiGLU with pre-RMSNorm and dropout */
START_TEST(test_gradient_enc_dec) {
    Config c = test_config_tiny(_i ? 0.3f : 0.0f);
    c.pad_id = -1;
    c.norm = NORM_RMS;
    c.pre_ln = _i;
    if (_i) c.ffn = FFN_SWIGLU;
    gradient_check_lm(&c, 49 + _i, _i ? "encoder-decoder SwiGLU pre-RMSNorm +dropout" : "encoder-decoder RMSNorm");
}
END_TEST
START_TEST(test_gradient_rms_dropout) {
    Config c = lm_config_rms(1, 0.3f);
    c.pos = POS_LEARNED;
    gradient_check_lm(&c, 46, "decoder-only pre-RMSNorm +learned PE +dropout");
}
END_TEST

/* ============================================================================
 * Checkpoint: the decoder's flag, and the paper's files as they were
 * ========================================================================== */

START_TEST(test_checkpoint_round_trip) {
    char dir[256], path[300], err[256] = "";
    fresh_dir(dir, sizeof dir, "lm");
    snprintf(path, sizeof path, "%s/lm.ckpt", dir);
    Config c = lm_config_rms(1, 0.1f);
    enum { T = 5 };
    int tgt[T] = {3, 1, 4, 1, 5};
    Model a, b;
    build_lm(&a, &c, 1, T, 9);
    perturb_params(&a, 10);
    ck_assert_int_eq(model_save(&a, path, NULL, err, sizeof err), 0);
    size_t len;
    unsigned char *bytes = read_file_or_fail(path, &len);
    unsigned flags = bytes[CKPT_OFF_FLAGS] | bytes[CKPT_OFF_FLAGS + 1] << 8;
    ck_assert_uint_eq(flags, CKPT_FLAG_DECODER | CKPT_FLAG_RMSNORM);
    free(bytes);
    int has = 0;
    ck_assert_msg(model_load(&b, path, 1, 0, T, NULL, &has, err, sizeof err) == 0, "load: %s", err);
    ck_assert_int_eq(b.cfg.arch, ARCH_DECODER);
    ck_assert_int_eq(b.cfg.norm, NORM_RMS);
    ck_assert_uint_eq(b.params.n, a.params.n);
    float la[T * 11];
    memcpy(la, model_forward_lm(&a, tgt, 1, T, 0), sizeof la);
    ck_assert_int_eq(memcmp(model_forward_lm(&b, tgt, 1, T, 0), la, sizeof la), 0);
    model_free(&b);
    /* asked for a source side it does not have: a message, not a crash */
    ck_assert_int_eq(model_load(&b, path, 1, 4, T, NULL, &has, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "reads no source") != NULL, "message: %s", err);
    model_free(&b);
    model_free(&a);

    /* the paper's model sets no new bit: its file's flags are what they were */
    Config ed = test_config_tiny(0.1f);
    char err2[256];
    ck_assert_int_eq(model_build(&a, &ed, 1, 3, 3, 9, err2, sizeof err2), 0);
    ck_assert_int_eq(model_save(&a, path, NULL, err, sizeof err), 0);
    bytes = read_file_or_fail(path, &len);
    ck_assert_uint_eq(bytes[CKPT_OFF_FLAGS], 0);
    free(bytes);
    model_free(&a);
    remove_dir(dir);
}
END_TEST

/* ============================================================================
 * Training: the decoder alone learns a repeated text
 * ========================================================================== */

/* "the cat sat on the mat. " over and over, characters as tokens: 200
 * steps of next-token cross-entropy (eps_ls 0) through train.c's one step
 * with no source bring the loss near zero. Its longest repeated piece is
 * " the " (5 characters), so a position that has seen 6 or more characters
 * knows the next one for certain; the first SEEN positions of each window,
 * which cannot, are given the padding id as target and not scored. */
START_TEST(test_learns_repeated_text) {
    const char *line = "the cat sat on the mat. ";
    int L = (int)strlen(line), ids[256], V = 0;
    char chars[64];
    for (int i = 0; i < L; i++) {
        char *at = memchr(chars, line[i], (size_t)V);
        if (!at) chars[V] = line[i], at = &chars[V++];
        ids[i] = (int)(at - chars);
    }
    enum { B = 8, T = 12, SEEN = 6 };
    int pad = V;   /* one more id, never an input */
    Config c = test_config(2, 32, 64, 4, 8, 8, V + 1, 16, 0.0f);
    c.arch = ARCH_DECODER;
    c.pre_ln = 1;
    c.pad_id = pad;
    c.norm = _i >= 1 ? NORM_RMS : NORM_LAYER;   /* 0 LayerNorm, 1 RMSNorm, 2 RMSNorm + SwiGLU */
    c.ffn = _i == 2 ? FFN_SWIGLU : FFN_RELU;
    Model m;
    build_lm(&m, &c, B, T, 7);
    TrainHyper hp = train_hyper_paper();
    hp.eps_ls = 0.0f;   /* plain cross-entropy */
    hp.warmup = 20;
    Trainer tr;
    char err[256] = "";
    ck_assert_msg(trainer_init(&tr, &m, &hp, B, T + 1, 1, err, sizeof err) == 0, "trainer: %s", err);
    int in[B * T], out[B * T];
    Rng r;
    rng_seed(&r, 8);
    float first = 0, last = 0;
    for (int step = 0; step < 200; step++) {
        for (int b = 0; b < B; b++) {
            int start = rng_int(&r, L);
            for (int t = 0; t < T; t++) {
                in[b * T + t] = ids[(start + t) % L];
                out[b * T + t] = t + 1 < SEEN ? pad : ids[(start + t + 1) % L];
            }
        }
        StepStats st;
        ck_assert_int_eq(train_step_batch(&tr, NULL, in, out, B, 0, T, &st), TRAIN_OK);
        ck_assert_int_eq(st.n_tokens, B * (T - SEEN + 1));
        if (step == 0) first = st.loss;
        last = st.loss;
    }
    ck_assert_msg(first > 1.5f, "norm %d: the first loss %g is not near log(%d) = %g", _i, first, V, log(V));
    ck_assert_msg(last < 0.01f, "norm %d: after 200 steps the loss is %g (first %g)", _i, last, first);
    trainer_free(&tr);
    model_free(&m);
}
END_TEST

Suite *lm_suite(void) {
    Suite *s = suite_create("lm");
    suite_case(s, "Core", test_param_count_by_hand, test_forward_shapes, test_causal, test_checkpoint_round_trip,
               test_rms_param_count, test_rms_by_hand, test_swiglu_param_count);
    suite_case(s, "Limits", test_sizes_refused);
    TCase *g = suite_case(s, "Gradient", test_gradient_post_ln, test_gradient_pre_ln, test_gradient_learned_dropout,
                          test_gradient_rms_dropout);
    tcase_add_loop_test(g, test_gradient_rms, 0, 2);
    tcase_add_loop_test(g, test_gradient_swiglu, 0, 2);
    tcase_add_loop_test(g, test_gradient_enc_dec, 0, 2);
    TCase *tc = tcase_create("Train");   /* _i: LayerNorm, RMSNorm, RMSNorm + SwiGLU */
    tcase_add_loop_test(tc, test_learns_repeated_text, 0, 3);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}
