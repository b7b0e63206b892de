/* check_sublayer.c - Add & Norm (model/sublayer.h), post-LN and pre-LN:
 *
 *   Core      the forward by hand on rows of four (LayerNorm of 1 2 3 4,
 *             as check_nn's), dropout's scales from dropout_mask.h, the
 *             layout of what a sub-layer saves
 *   Limits    the cached decoding step's aliasing (the sum or the Norm
 *             written over x) gives the same bits as separate buffers
 *   Gradient  finite differences through a whole sub-layer, with a linear
 *             Sublayer and dropout on: dx, the Norm's gain and bias
 *   Model     the module, run on the model's own saved tensors, gives the
 *             very bits the model's forward computed
 *
 * Every op runs through the CPU backend table, as the model calls them.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/dropout_mask.h"
#include "core/rng.h"
#include "layers/linear.h"
#include "model/backend_cpu.h"
#include "model/model.h"
#include "model/sublayer.h"
#include "testutil.h"

static const SubLayerKind POST = {.pre_ln = 0, .norm = NORM_LAYER};
static const SubLayerKind PRE = {.pre_ln = 1, .norm = NORM_LAYER};

/* A SubActs of its own: one calloc'd block, laid out by the module. */
static SubActs acts_new(int rows, int D) {
    SubActs s;
    float *buf = calloc(sublayer_acts_layout(&s, NULL, (size_t)rows, (size_t)D), sizeof(float));
    ck_assert_ptr_nonnull(buf);
    sublayer_acts_layout(&s, buf, (size_t)rows, (size_t)D);
    return s;
}
static void acts_free(SubActs *s) { free(s->ln); }   /* ln is the block's first tensor */

/* A sub-layer's inputs drawn from seed: x and the Sublayer's output out
 * (rows,D), the Norm's gain g and bias b (D); malloc'd. */
typedef struct {
    float *x, *out, *g, *b;
} Inputs;
static Inputs inputs_new(uint64_t seed, int rows, int D) {
    Rng r;
    rng_seed(&r, seed);
    size_t n = (size_t)rows * D;
    return (Inputs){randn(&r, n, 1.0f), randn(&r, n, 1.0f), randn(&r, (size_t)D, 1.0f), randn(&r, (size_t)D, 1.0f)};
}
static void inputs_free(Inputs *in) { free(in->x); free(in->out); free(in->g); free(in->b); }

/* ========================================================================== */
/* Core                                                                       */
/* ========================================================================== */

/* LayerNorm of the row 1 2 3 4: mean 2.5, variance 1.25, so
 * (x - mean) / sqrt(1.25 + 1e-5) is this (and reversed for 4 3 2 1) */
static const float NORM1234[4] = {-1.3416354f, -0.4472118f, 0.4472118f, 1.3416354f};

START_TEST(test_post_ln_by_hand) {
    /* y = LayerNorm(x + Sublayer(x)), gain 1 2 1 2, bias 0 0 1 0:
     *   row 0: x 0 1 2 3 + out 1 1 1 1 = 1 2 3 4
     *   row 1: x 4 3 2 1 + out 0 0 0 0 = 4 3 2 1 */
    const Backend *be = backend_cpu();
    SubActs s = acts_new(2, 4);
    float x[8] = {0, 1, 2, 3, 4, 3, 2, 1}, out[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    float g[4] = {1, 2, 1, 2}, b[4] = {0, 0, 1, 0};
    ck_assert_ptr_eq(sublayer_in(be, POST, &s, x, g, b, 2, 4), x);   /* post-LN: Sublayer(x) */
    memcpy(s.out, out, sizeof out);
    DropoutSite none = {.p = 0.0f, .key = 7, .site = 1};
    const float *y = sublayer_out(be, POST, &s, x, g, b, &none, 2, 4);
    ck_assert_ptr_eq(y, s.ln);
    ck_assert_ptr_eq(sublayer_output(POST, &s), s.ln);
    ck_assert_ptr_eq(sublayer_input(POST, &s, x), x);
    float res[8] = {1, 2, 3, 4, 4, 3, 2, 1}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float want[8];
    for (int j = 0; j < 4; j++) {
        want[j] = g[j] * NORM1234[j] + b[j];
        want[4 + j] = g[j] * NORM1234[3 - j] + b[j];
    }
    ck_assert_close_arrays(s.out, out, 8, 0.0);    /* p = 0: every scale 1 */
    ck_assert_close_arrays(s.keep, ones, 8, 0.0);
    ck_assert_close_arrays(s.res, res, 8, 0.0);
    ck_assert_close_arrays(y, want, 8, 1e-6);
    ck_assert_float_eq_tol(s.mean[0], 2.5f, 1e-7f);
    ck_assert_float_eq_tol(s.mean[1], 2.5f, 1e-7f);
    ck_assert_float_eq_tol(s.rstd[1], 0.8944236f, 1e-6f);
    acts_free(&s);
}
END_TEST

START_TEST(test_pre_ln_by_hand) {
    /* y = x + Sublayer(LayerNorm(x)): the Sublayer reads LayerNorm(1 2 3 4)
     * (gain 1, bias 0), its output 1 1 1 1 is added to x itself */
    const Backend *be = backend_cpu();
    SubActs s = acts_new(1, 4);
    float x[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, b[4] = {0, 0, 0, 0};
    const float *in = sublayer_in(be, PRE, &s, x, g, b, 1, 4);
    ck_assert_ptr_eq(in, s.ln);
    ck_assert_ptr_eq(sublayer_input(PRE, &s, x), s.ln);
    ck_assert_close_arrays(in, NORM1234, 4, 1e-6);
    for (int j = 0; j < 4; j++) s.out[j] = 1.0f;
    DropoutSite none = {.p = 0.0f};
    const float *y = sublayer_out(be, PRE, &s, x, g, b, &none, 1, 4);
    ck_assert_ptr_eq(y, s.res);
    ck_assert_ptr_eq(sublayer_output(PRE, &s), s.res);
    float want[4] = {2, 3, 4, 5};
    ck_assert_close_arrays(y, want, 4, 0.0);
    ck_assert_close_arrays(s.ln, NORM1234, 4, 1e-6);   /* the Norm after the sum: none */
    acts_free(&s);
}
END_TEST

START_TEST(test_dropout_on_the_output) {
    /* x + Dropout(Sublayer(x)) (Sec. 5.4): each element of the Sublayer's
     * output kept with scale 1/(1-p) or dropped, as dropout_mask.h's keep
     * for this site's key; the sum adds what survived. drop NULL (the
     * cached step): no dropout, keep untouched. */
    enum { R = 3, D = 8, N = R * D };
    const Backend *be = backend_cpu();
    Inputs in = inputs_new(41, R, D);
    const float *x = in.x, *out = in.out, *g = in.g, *b = in.b;
    for (int pre = 0; pre < 2; pre++) {
        SubLayerKind k = pre ? PRE : POST;
        SubActs s = acts_new(R, D);
        memcpy(s.out, out, sizeof(float) * N);
        DropoutSite drop = {.p = 0.5f, .key = 0x1234, .site = 3};
        sublayer_out(be, k, &s, x, g, b, &drop, R, D);
        int dropped = 0;
        for (int i = 0; i < N; i++) {
            float keep = dropout_keep(drop.key, drop.site, (uint64_t)i, drop.p);
            ck_assert_float_eq(s.keep[i], keep);
            ck_assert_float_eq(s.out[i], out[i] * keep);
            ck_assert_float_eq(s.res[i], x[i] + out[i] * keep);
            dropped += keep == 0.0f;
        }
        ck_assert_msg(dropped > 0 && dropped < N, "p = 0.5 dropped %d of %d", dropped, N);

        for (int i = 0; i < N; i++) s.keep[i] = -1.0f;
        memcpy(s.out, out, sizeof(float) * N);
        sublayer_out(be, k, &s, x, g, b, NULL, R, D);
        for (int i = 0; i < N; i++) {
            ck_assert_float_eq(s.keep[i], -1.0f);
            ck_assert_float_eq(s.res[i], x[i] + out[i]);
        }
        acts_free(&s);
    }
    inputs_free(&in);
}
END_TEST

START_TEST(test_layout) {
    /* ln, mean, rstd, out, keep, res in that order, each on a 16-float
     * (64-byte) boundary; the count is what the layout takes */
    size_t rows = 3, D = 5, n = 16, r = 16;   /* 15 floats -> 16, 3 -> 16 */
    SubActs s;
    ck_assert_uint_eq(sublayer_acts_layout(&s, NULL, rows, D), 4 * n + 2 * r);
    ck_assert_ptr_null(s.ln);
    ck_assert_ptr_null(s.res);
    float buf[4 * 16 + 2 * 16];
    ck_assert_uint_eq(sublayer_acts_layout(&s, buf, rows, D), sizeof buf / sizeof *buf);
    float *want[6] = {buf, buf + n, buf + n + r, buf + n + 2 * r, buf + 2 * n + 2 * r, buf + 3 * n + 2 * r};
    float *got[6] = {s.ln, s.mean, s.rstd, s.out, s.keep, s.res};
    for (int i = 0; i < 6; i++) ck_assert_ptr_eq(got[i], want[i]);
    ck_assert_uint_eq(sublayer_acts_layout(&s, NULL, 8, 16), 4 * 128 + 2 * 16);
}
END_TEST

/* ========================================================================== */
/* Limits                                                                     */
/* ========================================================================== */

START_TEST(test_step_aliasing) {
    /* decode.c's cached step keeps one row of x and writes the sub-layer's
     * output over it: pre-LN the sum goes into x itself (res == x), post-LN
     * the Norm of the sum (ln == x). The same bits as separate buffers. */
    enum { R = 2, D = 6, N = R * D };
    const Backend *be = backend_cpu();
    Inputs in = inputs_new(42, R, D);
    const float *x = in.x, *out = in.out, *g = in.g, *b = in.b;
    for (int pre = 0; pre < 2; pre++) {
        SubLayerKind k = pre ? PRE : POST;
        SubActs sep = acts_new(R, D), step = acts_new(R, D);
        float *step_block = step.ln, xs[N];
        memcpy(xs, x, sizeof xs);
        memcpy(sep.out, out, sizeof xs);
        memcpy(step.out, out, sizeof xs);
        if (pre) step.res = xs;
        else step.ln = xs;
        const float *in_sep = sublayer_in(be, k, &sep, x, g, b, R, D);
        const float *in_step = sublayer_in(be, k, &step, xs, g, b, R, D);
        ck_assert_mem_eq(in_sep, in_step, sizeof xs);
        const float *y_sep = sublayer_out(be, k, &sep, x, g, b, NULL, R, D);
        const float *y_step = sublayer_out(be, k, &step, xs, g, b, NULL, R, D);
        ck_assert_ptr_eq(y_step, xs);
        ck_assert_mem_eq(y_sep, y_step, sizeof xs);
        acts_free(&sep);
        free(step_block);
    }
    inputs_free(&in);
}
END_TEST

/* ========================================================================== */
/* Gradient                                                                   */
/* ========================================================================== */

/* One whole sub-layer with a linear Sublayer, y = Add & Norm(x, x' W) with
 * x' what the Sublayer reads, and dropout on; L = sum(y * R). */
typedef struct {
    SubLayerKind k;
    int rows, D;
    float *x, *W, *g, *b, *R;
    SubActs s;
    DropoutSite drop;
} SubCtx;

static double loss_sublayer(void *v) {
    SubCtx *c = v;
    const Backend *be = backend_cpu();
    const float *in = sublayer_in(be, c->k, &c->s, c->x, c->g, c->b, c->rows, c->D);
    linear_forward(c->s.out, in, c->W, NULL, c->rows, c->D, c->D);
    const float *y = sublayer_out(be, c->k, &c->s, c->x, c->g, c->b, &c->drop, c->rows, c->D);
    double L = 0;
    for (int i = 0; i < c->rows * c->D; i++) L += (double)y[i] * c->R[i];
    return L;
}

static void check_sublayer_gradient(SubLayerKind k) {
    /* smooth (LayerNorm, a product; dropout's mask is the same on every
     * call: one key): h 1e-2 and tol 2e-3, as check_nn's LayerNorm */
    enum { R = 3, D = 6, N = R * D };
    const Backend *be = backend_cpu();
    Rng r;
    rng_seed(&r, 43 + (uint64_t)k.pre_ln);
    SubCtx c = {.k = k, .rows = R, .D = D, .drop = {.p = 0.25f, .key = 99, .site = 2}};
    c.x = randn(&r, N, 2.0f), c.W = randn(&r, D * D, 0.5f), c.g = randn(&r, D, 1.0f), c.b = randn(&r, D, 1.0f);
    c.R = randn(&r, N, 1.0f);
    c.s = acts_new(R, D);
    loss_sublayer(&c);
    int dropped = 0;
    for (int i = 0; i < N; i++) dropped += c.s.keep[i] == 0.0f;
    ck_assert_msg(dropped > 0, "no element dropped: the dropout backward goes untested");

    /* the backward as model.c runs it: dx, dsub, dln are the caller's */
    float dx[N], dsub[N], dln[N], dW[D * D] = {0}, dg[D] = {0}, db[D] = {0};
    float *din = sublayer_out_backward(be, k, dx, dsub, dln, dg, db, c.R, &c.s, c.g, R, D);
    ck_assert_ptr_eq(din, k.pre_ln ? dln : dx);
    linear_backward(din, dW, NULL, dsub, sublayer_input(k, &c.s, c.x), c.W, R, D, D);
    sublayer_in_backward(be, k, dx, dg, db, dln, &c.s, c.x, c.g, R, D);

    fd_check(loss_sublayer, &c, c.x, dx, N, 1e-2f, 2e-3, 2e-3);
    fd_check(loss_sublayer, &c, c.g, dg, D, 1e-2f, 2e-3, 2e-3);
    fd_check(loss_sublayer, &c, c.b, db, D, 1e-2f, 2e-3, 2e-3);
    fd_check(loss_sublayer, &c, c.W, dW, D * D, 1e-2f, 2e-3, 2e-3);
    free(c.x); free(c.W); free(c.g); free(c.b); free(c.R);
    acts_free(&c.s);
}

START_TEST(test_grad_post_ln) { check_sublayer_gradient(POST); }
END_TEST

START_TEST(test_grad_pre_ln) { check_sublayer_gradient(PRE); }
END_TEST

/* ========================================================================== */
/* Model                                                                      */
/* ========================================================================== */

/* The model's forward saved, per sub-layer, what the Sublayer wrote (after
 * dropout), the sum and the output. The module on the same input and that
 * Sublayer output must give the model's very bits (drop NULL: the saved
 * output is already dropped out); and for the FFN sub-layers, the FFN run
 * on the module's sublayer_in must give the model's Sublayer output
 * (training = 0: no dropout in between). */
static void check_against_model(int pre_ln, int training) {
    Config c = test_config_tiny(0.3f);
    c.pre_ln = pre_ln;
    enum { B = 2, Ts = 5, Tt = 4 };
    int src[B * Ts] = {3, 4, 5, 6, 7, 8, 9, 10, 2, 3}, tgt[B * Tt] = {1, 5, 6, 7, 1, 8, 9, 10};
    Model m;
    char err[200];
    ck_assert_msg(model_build(&m, &c, B, Ts, Tt, 77, err, sizeof err) == 0, "%s", err);
    model_forward(&m, src, tgt, B, Ts, Tt, training);
    const Backend *be = m.be;
    SubLayerKind k = sublayer_kind(&c);
    ck_assert_int_eq(k.pre_ln, pre_ln);
    int D = c.d_model, checked = 0;
    for (int dec = 0; dec < 2; dec++) {
        int rows = B * (dec ? Tt : Ts), nsub = dec ? 3 : 2;
        size_t n = (size_t)rows * D, bytes = n * sizeof(float);
        SubActs s = acts_new(rows, D);
        float *ffn_out = malloc(bytes), *hidden = malloc((size_t)rows * c.d_ff * sizeof(float));
        const float *x = model_embedded(&m, dec);
        for (int l = 0; l < c.N; l++)
            for (int j = 0; j < nsub; j++) {
                const float *g, *b;
                if (dec) {
                    const DecoderLayer *w = &m.be_w.dec[l];
                    g = j == 0 ? w->ln1_g : j == 1 ? w->ln2_g : w->ln3_g;
                    b = j == 0 ? w->ln1_b : j == 1 ? w->ln2_b : w->ln3_b;
                } else {
                    const EncoderLayer *w = &m.be_w.enc[l];
                    g = j == 0 ? w->ln1_g : w->ln2_g;
                    b = j == 0 ? w->ln1_b : w->ln2_b;
                }
                const float *in = sublayer_in(be, k, &s, x, g, b, rows, D);
                if (j == nsub - 1 && !training) {   /* the FFN (Eq. 2) */
                    const float *w1 = dec ? m.be_w.dec[l].ffn_w1 : m.be_w.enc[l].ffn_w1;
                    const float *b1 = dec ? m.be_w.dec[l].ffn_b1 : m.be_w.enc[l].ffn_b1;
                    const float *w2 = dec ? m.be_w.dec[l].ffn_w2 : m.be_w.enc[l].ffn_w2;
                    const float *b2 = dec ? m.be_w.dec[l].ffn_b2 : m.be_w.enc[l].ffn_b2;
                    be->ffn_forward(ffn_out, hidden, in, w1, b1, w2, b2, rows, D, c.d_ff);
                    ck_assert_mem_eq(ffn_out, model_sublayer(&m, dec, l, (SubKind)j, SUB_OUT), bytes);
                    checked++;
                }
                memcpy(s.out, model_sublayer(&m, dec, l, (SubKind)j, SUB_OUT), bytes);
                const float *y = sublayer_out(be, k, &s, x, g, b, NULL, rows, D);
                ck_assert_mem_eq(s.res, model_sublayer(&m, dec, l, (SubKind)j, SUB_SUM), bytes);
                ck_assert_mem_eq(y, model_sublayer(&m, dec, l, (SubKind)j, SUB_Y), bytes);
                checked++;
                x = model_sublayer(&m, dec, l, (SubKind)j, SUB_Y);
            }
        free(ffn_out); free(hidden);
        acts_free(&s);
    }
    ck_assert_int_eq(checked, c.N * 5 + (training ? 0 : 2 * c.N));
    model_free(&m);
}

START_TEST(test_model_post_ln) {
    check_against_model(0, 0);
    check_against_model(0, 1);
}
END_TEST

START_TEST(test_model_pre_ln) {
    check_against_model(1, 0);
    check_against_model(1, 1);
}
END_TEST

Suite *sublayer_suite(void) {
    Suite *s = suite_create("sublayer");
    suite_case(s, "Core", test_post_ln_by_hand, test_pre_ln_by_hand, test_dropout_on_the_output, test_layout);
    suite_case(s, "Limits", test_step_aliasing);
    suite_case(s, "Gradient", test_grad_post_ln, test_grad_pre_ln);
    suite_case(s, "Model", test_model_post_ln, test_model_pre_ln);
    return s;
}
