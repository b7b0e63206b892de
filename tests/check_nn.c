/* check_nn.c - the layers of ref/nn.h, their tuned twins (fast/nn_fast.h)
 * and the linear layer and FFN (layers/linear.h): hand-checked values
 * ("Core"), edge cases ("Limits"), each tuned op against its plain
 * reference twin ("Twins"), and
 * finite-difference checks of every backward ("Gradient").
 *
 * Gradient checks: the scalar checked is L = sum(out * R) for a fixed random
 * R (so dout = R), summed in double. Each parameter entry is nudged by +-h
 * and (L(+h) - L(-h)) / 2h is compared with the backward pass. The layers
 * run in float32, so h cannot be tiny: the rounding error of L is about
 * 1e-7 * |L|, divided by 2h. Each test states its h and tolerance; an entry
 * passes when |numeric - analytic| <= atol + rtol * max(|numeric|, |analytic|)
 * (testutil.h's fd_check).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fast/nn_fast.h"
#include "layers/linear.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "testutil.h"

#include "fast/parallel.h"

/* ========================================================================== */
/* Core: hand-checked values                                                  */
/* ========================================================================== */

START_TEST(test_linear_values) {
    /* inp (2,3) @ W (3,2) + b (2), by hand:
     * [1 2 3] @ [[1 0],[0 1],[1 1]] = [4 5];  [0 -1 2] @ W = [2 1] */
    float inp[6] = {1, 2, 3, 0, -1, 2};
    float W[6] = {1, 0, 0, 1, 1, 1};
    float b[2] = {0.5f, -1};
    float out[4];
    linear_forward(out, inp, W, b, 2, 3, 2);
    float want[4] = {4.5f, 4, 2.5f, 0};
    ck_assert_close_arrays(out, want, 4, 1e-6);
    linear_forward(out, inp, W, NULL, 2, 3, 2);
    float want_nob[4] = {4, 5, 2, 1};
    ck_assert_close_arrays(out, want_nob, 4, 1e-6);

    /* backward with dout = ones: dinp = row sums of W, dW = column sums of
     * inp repeated, dbias = N; and it accumulates onto what is there */
    float dout[4] = {1, 1, 1, 1};
    float dinp[6] = {10, 10, 10, 10, 10, 10}, dW[6] = {0}, db[2] = {0};
    linear_backward(dinp, dW, db, dout, inp, W, 2, 3, 2);
    float want_dinp[6] = {11, 11, 12, 11, 11, 12};
    float want_dW[6] = {1, 1, 1, 1, 5, 5};
    float want_db[2] = {2, 2};
    ck_assert_close_arrays(dinp, want_dinp, 6, 1e-6);
    ck_assert_close_arrays(dW, want_dW, 6, 1e-6);
    ck_assert_close_arrays(db, want_db, 2, 1e-6);
    linear_backward(NULL, NULL, db, dout, inp, W, 2, 3, 2);   /* NULLs are skipped */
    ck_assert_float_eq(db[0], 4.0f);
}
END_TEST

START_TEST(test_relu_values) {
    float x[5] = {-2, -0.0f, 0, 0.5f, 3};
    float y[5], dx[5] = {0};
    relu_forward(y, x, 5);
    float want[5] = {0, 0, 0, 0.5f, 3};
    ck_assert_close_arrays(y, want, 5, 0.0);
    float dy[5] = {1, 1, 1, 1, 1};
    relu_backward(dx, dy, y, 5);
    float want_dx[5] = {0, 0, 0, 1, 1};
    ck_assert_close_arrays(dx, want_dx, 5, 0.0);
}
END_TEST

START_TEST(test_ffn_values) {
    /* Eq. 2 by hand, d_model = 2, d_ff = 3:
     *   x W1 = [1 -1] @ [[1 0 2],[0 1 1]] = [1 -1 1]
     *   + b1 [0 0.5 -2]                   = [1 -0.5 -1]
     *   max(0, .)                          = [1 0 0]      (hidden)
     *   @ W2 [[1 2],[3 4],[5 6]] + b2 [.5 .5] = [1.5 2.5] */
    float x[2] = {1, -1};
    float W1[6] = {1, 0, 2, 0, 1, 1}, b1[3] = {0, 0.5f, -2};
    float W2[6] = {1, 2, 3, 4, 5, 6}, b2[2] = {0.5f, 0.5f};
    float out[2], hidden[3];
    ffn_forward(out, hidden, x, W1, b1, W2, b2, 1, 2, 3);
    float want_h[3] = {1, 0, 0}, want[2] = {1.5f, 2.5f};
    ck_assert_close_arrays(hidden, want_h, 3, 1e-6);
    ck_assert_close_arrays(out, want, 2, 1e-6);

    /* backward with dout = [1 0]: only hidden unit 0 is on, so
     * dx = W2[0,0] * W1[:,0] = [1 0], db1 = [1 0 0], dW2 = hidden^T dout */
    float dout[2] = {1, 0}, dhidden[3];
    float dx[2] = {0}, dW1[6] = {0}, db1[3] = {0}, dW2[6] = {0}, db2[2] = {0};
    ffn_backward(dx, dW1, db1, dW2, db2, dhidden, dout, hidden, x, W1, W2, 1, 2, 3);
    float want_dx[2] = {1, 0}, want_db1[3] = {1, 0, 0}, want_dW1[6] = {1, 0, 0, -1, 0, 0};
    float want_dW2[6] = {1, 0, 0, 0, 0, 0}, want_db2[2] = {1, 0};
    ck_assert_close_arrays(dx, want_dx, 2, 1e-6);
    ck_assert_close_arrays(db1, want_db1, 3, 1e-6);
    ck_assert_close_arrays(dW1, want_dW1, 6, 1e-6);
    ck_assert_close_arrays(dW2, want_dW2, 6, 1e-6);
    ck_assert_close_arrays(db2, want_db2, 2, 1e-6);
}
END_TEST

START_TEST(test_layernorm_values) {
    /* row [1 2 3 4]: mean 2.5, biased variance (2.25+0.25+0.25+2.25)/4 = 1.25,
     * rstd = 1/sqrt(1.25 + 1e-5) = 0.8944236; (x - mean) * rstd =
     * [-1.3416354 -0.4472118 0.4472118 1.3416354]. Second row: gamma 2, beta 1. */
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    float gamma[4] = {1, 1, 1, 1}, beta[4] = {0, 0, 0, 0};
    float out[8], mean[2], rstd[2];
    layernorm_forward(out, mean, rstd, x, gamma, beta, 2, 4);
    float want[8] = {-1.3416354f, -0.4472118f, 0.4472118f, 1.3416354f,
                     -1.3416354f, -0.4472118f, 0.4472118f, 1.3416354f};
    ck_assert_close_arrays(out, want, 8, 1e-6);
    ck_assert_float_eq_tol(mean[0], 2.5f, 1e-7f);
    ck_assert_float_eq_tol(rstd[0], 0.8944236f, 1e-6f);

    float g2[4] = {2, 2, 2, 2}, b2[4] = {1, 1, 1, 1};
    layernorm_forward(out, mean, rstd, x, g2, b2, 1, 4);
    float want2[4] = {-1.6832708f, 0.1055764f, 1.8944236f, 3.6832708f};
    ck_assert_close_arrays(out, want2, 4, 2e-6);
}
END_TEST

START_TEST(test_residual_values) {
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3];
    residual_forward(out, a, b, 3);
    float want[3] = {11, 22, 33};
    ck_assert_close_arrays(out, want, 3, 0.0);
    float da[3] = {1, 1, 1}, db[3] = {0}, dout[3] = {0.5f, -1, 2};
    residual_backward(da, db, dout, 3);
    float want_da[3] = {1.5f, 0, 3};
    ck_assert_close_arrays(da, want_da, 3, 0.0);
    ck_assert_close_arrays(db, dout, 3, 0.0);
}
END_TEST

START_TEST(test_dropout) {
    enum { n = 100000 };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *keep = malloc(n * sizeof(float)), *keep2 = malloc(n * sizeof(float));
    float *y2 = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = 1.0f + (i % 7);

    /* p = 0: the identity (inference), keep all ones */
    dropout_forward(y, keep, x, 0.0f, n, 1, 0);
    ck_assert_close_arrays(y, x, n, 0.0);
    for (int i = 0; i < n; i++) ck_assert_float_eq(keep[i], 1.0f);

    /* p = 0.1 (Sec. 5.4): about 90% kept, survivors scaled by exactly 1/0.9 */
    float p = 0.1f, scale = 1.0f / (1.0f - p);
    dropout_forward(y, keep, x, p, n, 7, 0);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        ck_assert(keep[i] == 0.0f || keep[i] == scale);
        ck_assert_float_eq(y[i], x[i] * keep[i]);
        kept += keep[i] != 0.0f;
    }
    /* binomial: std of the kept fraction is sqrt(.9*.1/n) ~ 0.001; allow 5 std */
    ck_assert_msg(fabs(kept / (double)n - 0.9) < 0.005, "kept fraction %g", kept / (double)n);

    /* the same key draws the same mask; another key a different one */
    dropout_forward(y2, keep2, x, p, n, 7, 0);
    ck_assert(memcmp(keep, keep2, n * sizeof(float)) == 0);
    ck_assert(memcmp(y, y2, n * sizeof(float)) == 0);
    dropout_forward(y2, keep2, x, p, n, 8, 0);
    ck_assert(memcmp(keep, keep2, n * sizeof(float)) != 0);

    /* in place (out == inp) gives the same result */
    memcpy(y2, x, n * sizeof(float));
    dropout_forward(y2, keep2, y2, p, n, 7, 0);
    ck_assert(memcmp(y, y2, n * sizeof(float)) == 0);

    /* backward uses the forward's mask: dropped elements get no gradient */
    float *dx = zeros(n), *dy = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) dy[i] = 2.0f;
    dropout_backward(dx, dy, keep, n);
    for (int i = 0; i < n; i++) ck_assert_float_eq(dx[i], 2.0f * keep[i]);
    free(x); free(y); free(y2); free(keep); free(keep2); free(dx); free(dy);
}
END_TEST

START_TEST(test_embed_values) {
    /* vocab 3, d_model 4 (sqrt = 2), B 1, T 3, ids [2 0 2] */
    enum { V = 3, D = 4, T = 3 };
    float table[V * D];
    for (int i = 0; i < V * D; i++) table[i] = 0.1f * i;
    float pe[T * D];
    posenc_fill(pe, T, D);
    int ids[T] = {2, 0, 2};
    float out[T * D];
    embed_forward(out, ids, table, pe, 1, T, D, V);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < D; c++)
            ck_assert_float_eq_tol(out[t * D + c], 2.0f * table[ids[t] * D + c] + pe[t * D + c], 1e-6f);
    /* the two uses of token 2 differ only by their PE rows */
    ck_assert_float_eq_tol(out[2 * D + 0] - out[0], pe[2 * D + 0] - pe[0], 1e-6f);
    ck_assert_float_eq_tol(out[0], 2.0f * 0.8f + 0.0f, 1e-6f);   /* sin(0) = 0 */
    ck_assert_float_eq_tol(out[1], 2.0f * 0.9f + 1.0f, 1e-6f);   /* cos(0) = 1 */

    /* backward: token 2 appears twice, so its row gets both gradients (x2 for sqrt(4)) */
    float dout[T * D];
    for (int i = 0; i < T * D; i++) dout[i] = 1.0f + i;
    float dtable[V * D] = {0};
    embed_backward(dtable, dout, ids, 1, T, D, V);
    for (int c = 0; c < D; c++) {
        ck_assert_float_eq_tol(dtable[2 * D + c], 2.0f * (dout[c] + dout[2 * D + c]), 1e-6f);
        ck_assert_float_eq_tol(dtable[0 * D + c], 2.0f * dout[1 * D + c], 1e-6f);
        ck_assert_float_eq(dtable[1 * D + c], 0.0f);   /* unused token: nothing */
    }
}
END_TEST

START_TEST(test_smoothed_targets) {
    /* V 5, pad 0, target 2, eps 0.1: the other 3 classes share 0.1 */
    float d[5];
    smoothed_targets(d, 2, 5, 0.1f, 0);
    float want[5] = {0, 0.1f / 3, 0.9f, 0.1f / 3, 0.1f / 3};
    ck_assert_close_arrays(d, want, 5, 1e-7);
    double s = 0;
    for (int v = 0; v < 5; v++) s += d[v];
    ck_assert(fabs(s - 1.0) < 1e-6);
    /* no pad class: spread over V-1 = 4 */
    smoothed_targets(d, 2, 5, 0.1f, -1);
    float want_np[5] = {0.025f, 0.025f, 0.9f, 0.025f, 0.025f};
    ck_assert_close_arrays(d, want_np, 5, 1e-7);
    /* eps 0: one-hot; padding target: all zeros */
    smoothed_targets(d, 4, 5, 0.0f, 0);
    float onehot[5] = {0, 0, 0, 0, 1};
    ck_assert_close_arrays(d, onehot, 5, 0.0);
    smoothed_targets(d, 0, 5, 0.1f, 0);
    float none[5] = {0};
    ck_assert_close_arrays(d, none, 5, 0.0);
    /* V = 2 with a pad: nowhere to spread, so the target keeps 1 */
    smoothed_targets(d, 1, 2, 0.1f, 0);
    float v2[2] = {0, 1};
    ck_assert_close_arrays(d, v2, 2, 0.0);
}
END_TEST

START_TEST(test_smoothed_xent_values) {
    /* one row, V 4, pad 0, target 1, eps 0.2: share 0.2/2 = 0.1 each for
     * classes 2 and 3; loss = -(0.8 * -1 + 0.1 * (-2) + 0.1 * (-3)) = 1.3.
     * logp[pad] = -5 must not enter. */
    float logp[4] = {-5, -1, -2, -3};
    int target = 1, n = -1;
    float loss = smoothed_xent_forward(logp, &target, 1, 4, 0.2f, 0, &n);
    ck_assert_float_eq_tol(loss, 1.3f, 1e-6f);
    ck_assert_int_eq(n, 1);

    /* padding rows count for nothing, even if they hold garbage */
    float rows[12] = {-5, -1, -2, -3, NAN, NAN, NAN, NAN, -5, -3, -2, -1};
    int targets[3] = {1, 0, 3};
    /* row 3: -(0.8 * -1 + 0.1 * (-3 - 2)) = 1.3 too; mean = 1.3 */
    loss = smoothed_xent_forward(rows, targets, 3, 4, 0.2f, 0, &n);
    ck_assert_float_eq_tol(loss, 1.3f, 1e-6f);
    ck_assert_int_eq(n, 2);
    float dl[12] = {0};
    smoothed_xent_backward(dl, rows, targets, 3, 4, 0.2f, 0);
    for (int v = 0; v < 4; v++) ck_assert_float_eq(dl[4 + v], 0.0f);

    /* all padding: loss 0, no NaN, no gradient */
    int pads[3] = {0, 0, 0};
    loss = smoothed_xent_forward(rows, pads, 3, 4, 0.2f, 0, &n);
    ck_assert_float_eq(loss, 0.0f);
    ck_assert_int_eq(n, 0);
    float dz[12] = {0}, zero[12] = {0};
    smoothed_xent_backward(dz, rows, pads, 3, 4, 0.2f, 0);
    ck_assert_close_arrays(dz, zero, 12, 0.0);

    /* eps 0 and no pad: plain cross-entropy -logp[target] */
    loss = smoothed_xent_forward(logp, &target, 1, 4, 0.0f, -1, NULL);
    ck_assert_float_eq_tol(loss, 1.0f, 1e-7f);
}
END_TEST

/* ========================================================================== */
/* Limits                                                                      */
/* ========================================================================== */

START_TEST(test_logsoftmax_huge) {
    /* exp(1000) overflows float and double; the max-subtracted form does not */
    float x[6] = {1000, 1000, 0, -1000, -1000, -3000};
    float y[6];
    logsoftmax_forward(y, x, 2, 3);
    float l2 = (float)log(2.0);
    float want[6] = {-l2, -l2, -1000 - l2, -l2, -l2, -2000 - l2};
    ck_assert_close_arrays(y, want, 6, 1e-4);
    for (int i = 0; i < 6; i++) ck_assert(isfinite(y[i]));
    /* a normal row: exp(logp) sums to 1 */
    float z[4] = {0.5f, -1, 2, 0}, lz[4];
    logsoftmax_forward(lz, z, 1, 4);
    double s = 0;
    for (int v = 0; v < 4; v++) s += exp(lz[v]);
    ck_assert(fabs(s - 1.0) < 1e-6);
    /* V = 1: the only class has probability 1 */
    float one = 123.0f, lone;
    logsoftmax_forward(&lone, &one, 1, 1);
    ck_assert_float_eq(lone, 0.0f);
}
END_TEST

START_TEST(test_layernorm_constant_row) {
    /* variance 0: eps keeps rstd finite (1/sqrt(1e-5)); out = beta, no NaN */
    float x[4] = {3, 3, 3, 3}, gamma[4] = {1, 2, 3, 4}, beta[4] = {0.5f, 0, -1, 2};
    float out[4], mean, rstd;
    layernorm_forward(out, &mean, &rstd, x, gamma, beta, 1, 4);
    ck_assert_close_arrays(out, beta, 4, 0.0);
    ck_assert(isfinite(rstd));
    float dout[4] = {1, 1, 1, 1}, dx[4] = {0}, dg[4] = {0}, db[4] = {0};
    layernorm_backward(dx, dg, db, dout, x, &mean, &rstd, gamma, 1, 4);
    for (int i = 0; i < 4; i++) ck_assert(isfinite(dx[i]));
}
END_TEST

/* linear against the plain triple loop, over a sweep of sizes (the last big
 * enough to take the threaded bias path) */
static const int linear_sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {64, 33, 17}, {300, 64, 256}};

START_TEST(test_linear_sizes) {
    int N = linear_sizes[_i][0], IN = linear_sizes[_i][1], OUT = linear_sizes[_i][2];
    Rng r;
    rng_seed(&r, 100 + _i);
    float *inp = randn(&r, (size_t)N * IN, 1), *W = randn(&r, (size_t)IN * OUT, 1);
    float *b = randn(&r, OUT, 1), *out = zeros((size_t)N * OUT), *want = zeros((size_t)N * OUT);
    linear_forward(out, inp, W, b, N, IN, OUT);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            double s = b[o];
            for (int i = 0; i < IN; i++) s += (double)inp[n * IN + i] * W[i * OUT + o];
            want[n * OUT + o] = (float)s;
        }
    ck_assert_close_arrays(out, want, (size_t)N * OUT, 1e-4 * sqrt((double)IN));
    free(inp); free(W); free(b); free(out); free(want);
}
END_TEST

/* Sets the pool's thread count (POSIX threads, with OpenMP or without);
 * returns the old one. */
static int set_threads(int n) {
    int old = parallel_threads();
    parallel_set_threads(n);
    return old;
}

/* Threads must not change a single bit: rows are split between threads but
 * each row is still computed by one thread in one order. Sizes are above
 * nn_fast.c's threshold for going parallel. */
START_TEST(test_threads_bit_identical) {
    enum { N = 512, V = 300 };
    Rng r;
    rng_seed(&r, 5);
    float *x = randn(&r, (size_t)N * V, 3), *a = zeros((size_t)N * V), *b = zeros((size_t)N * V);
    float *g = randn(&r, V, 1), *be = randn(&r, V, 1), m[N], s[N];
    int old = set_threads(1);
    logsoftmax_forward(a, x, N, V);
    set_threads(old > 1 ? old : 2);
    logsoftmax_forward(b, x, N, V);
    ck_assert(memcmp(a, b, sizeof(float) * N * V) == 0);
    layernorm_forward(a, m, s, x, g, be, N, V);
    set_threads(1);
    layernorm_forward(b, m, s, x, g, be, N, V);
    ck_assert(memcmp(a, b, sizeof(float) * N * V) == 0);
    /* the parameter gradients are sums down the rows, which two threads
     * take in turn: still the same bits */
    float dg[2][V], db[2][V];
    for (int t = 0; t < 2; t++) {
        set_threads(t == 0 ? 1 : (old > 1 ? old : 2));
        memcpy(dg[t], g, sizeof dg[t]);
        memcpy(db[t], be, sizeof db[t]);
        layernorm_backward(NULL, dg[t], db[t], x, a, m, s, g, N, V);
        linear_backward(NULL, NULL, db[t], a, NULL, NULL, N, V, V);
    }
    ck_assert(memcmp(dg[0], dg[1], sizeof dg[0]) == 0 && memcmp(db[0], db[1], sizeof db[0]) == 0);
    set_threads(old);
    free(x); free(a); free(b); free(g); free(be);
}
END_TEST

/* ========================================================================== */
/* Gradient: finite differences                                                */
/* ========================================================================== */

typedef struct {
    float *out, *hidden, *x, *W1, *b1, *W2, *b2, *gamma, *beta, *mean, *rstd, *keep, *R;
    const float *pe;
    int *ids;
    int N, IN, OUT, d_ff, V, T;
    float p;
} Ctx;

static double loss_linear(void *v) {
    Ctx *c = v;
    linear_forward(c->out, c->x, c->W1, c->b1, c->N, c->IN, c->OUT);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->OUT);
}

START_TEST(test_grad_linear) {
    /* linear in every input, so only rounding matters: h 1e-2, tolerance 1e-3 */
    Ctx c = {.N = 3, .IN = 4, .OUT = 5};
    Rng r;
    rng_seed(&r, 11);
    c.x = randn(&r, 12, 1); c.W1 = randn(&r, 20, 1); c.b1 = randn(&r, 5, 1);
    c.R = randn(&r, 15, 1); c.out = zeros(15);
    float *dx = zeros(12), *dW = zeros(20), *db = zeros(5);
    linear_backward(dx, dW, db, c.R, c.x, c.W1, c.N, c.IN, c.OUT);
    fd_check(loss_linear, &c, c.x, dx, 12, 1e-2f, 1e-3, 1e-3);
    fd_check(loss_linear, &c, c.W1, dW, 20, 1e-2f, 1e-3, 1e-3);
    fd_check(loss_linear, &c, c.b1, db, 5, 1e-2f, 1e-3, 1e-3);
    free(c.x); free(c.W1); free(c.b1); free(c.R); free(c.out); free(dx); free(dW); free(db);
}
END_TEST

static double loss_ffn(void *v) {
    Ctx *c = v;
    ffn_forward(c->out, c->hidden, c->x, c->W1, c->b1, c->W2, c->b2, c->N, c->IN, c->d_ff);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->IN);
}

START_TEST(test_grad_ffn) {
    /* piecewise linear: exact away from the ReLU kinks. h 1e-3 (pre-activations
     * are moved at least 0.05 from 0 below, so no kink is crossed), tol 2e-3 */
    Ctx c = {.N = 3, .IN = 4, .d_ff = 6};
    Rng r;
    rng_seed(&r, 12);
    c.x = randn(&r, 12, 1); c.W1 = randn(&r, 24, 0.5f); c.b1 = randn(&r, 6, 0.5f);
    c.W2 = randn(&r, 24, 0.5f); c.b2 = randn(&r, 4, 0.5f);
    c.R = randn(&r, 12, 1); c.out = zeros(12); c.hidden = zeros(18);
    /* push every pre-activation away from the kink by adjusting b1 */
    float pre[18];
    linear_forward(pre, c.x, c.W1, c.b1, 3, 4, 6);
    for (int j = 0; j < 6; j++) {
        float closest = INFINITY;
        for (int n = 0; n < 3; n++) closest = fabsf(pre[n * 6 + j]) < fabsf(closest) ? pre[n * 6 + j] : closest;
        if (fabsf(closest) < 0.05f) c.b1[j] += closest >= 0 ? 0.1f : -0.1f;
    }
    float *dx = zeros(12), *dW1 = zeros(24), *db1 = zeros(6), *dW2 = zeros(24), *db2 = zeros(4);
    float *dh = zeros(18);
    loss_ffn(&c);
    ffn_backward(dx, dW1, db1, dW2, db2, dh, c.R, c.hidden, c.x, c.W1, c.W2, 3, 4, 6);
    int on = 0;
    for (int i = 0; i < 18; i++) on += c.hidden[i] > 0;
    ck_assert_msg(on > 3 && on < 15, "want a mix of active and inactive units, got %d of 18", on);
    fd_check(loss_ffn, &c, c.x, dx, 12, 1e-3f, 2e-3, 2e-3);
    fd_check(loss_ffn, &c, c.W1, dW1, 24, 1e-3f, 2e-3, 2e-3);
    fd_check(loss_ffn, &c, c.b1, db1, 6, 1e-3f, 2e-3, 2e-3);
    fd_check(loss_ffn, &c, c.W2, dW2, 24, 1e-3f, 2e-3, 2e-3);
    fd_check(loss_ffn, &c, c.b2, db2, 4, 1e-3f, 2e-3, 2e-3);
    free(c.x); free(c.W1); free(c.b1); free(c.W2); free(c.b2); free(c.R); free(c.out); free(c.hidden);
    free(dx); free(dW1); free(db1); free(dW2); free(db2); free(dh);
}
END_TEST

static double loss_layernorm(void *v) {
    Ctx *c = v;
    layernorm_forward(c->out, c->mean, c->rstd, c->x, c->gamma, c->beta, c->N, c->IN);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->IN);
}

START_TEST(test_grad_layernorm) {
    /* smooth; h 1e-2 keeps float rounding (~1e-7 * |L| / 2h) near 1e-5 and
     * the truncation error (h^2 terms) near 1e-4 for rows of std ~2: tol 2e-3 */
    Ctx c = {.N = 3, .IN = 6};
    Rng r;
    rng_seed(&r, 13);
    c.x = randn(&r, 18, 2); c.gamma = randn(&r, 6, 1); c.beta = randn(&r, 6, 1);
    c.R = randn(&r, 18, 1); c.out = zeros(18); c.mean = zeros(3); c.rstd = zeros(3);
    float *dx = zeros(18), *dg = zeros(6), *db = zeros(6);
    loss_layernorm(&c);
    layernorm_backward(dx, dg, db, c.R, c.x, c.mean, c.rstd, c.gamma, 3, 6);
    fd_check(loss_layernorm, &c, c.x, dx, 18, 1e-2f, 2e-3, 2e-3);
    fd_check(loss_layernorm, &c, c.gamma, dg, 6, 1e-2f, 2e-3, 2e-3);
    fd_check(loss_layernorm, &c, c.beta, db, 6, 1e-2f, 2e-3, 2e-3);
    free(c.x); free(c.gamma); free(c.beta); free(c.R); free(c.out); free(c.mean); free(c.rstd);
    free(dx); free(dg); free(db);
}
END_TEST

static double loss_dropout(void *v) {
    Ctx *c = v;
    /* the same key: the same mask on every call, as within one training step */
    dropout_forward(c->out, c->keep, c->x, c->p, (size_t)c->N, 99, 0);
    return weighted_sum(c->out, c->R, (size_t)c->N);
}

static double loss_residual(void *v) {
    Ctx *c = v;
    residual_forward(c->out, c->x, c->b1, (size_t)c->N);
    return weighted_sum(c->out, c->R, (size_t)c->N);
}

START_TEST(test_grad_dropout_residual) {
    /* both linear: h 1e-2, tol 1e-3 */
    Ctx c = {.N = 40, .p = 0.3f};
    Rng r;
    rng_seed(&r, 14);
    c.x = randn(&r, 40, 1); c.b1 = randn(&r, 40, 1); c.R = randn(&r, 40, 1);
    c.out = zeros(40); c.keep = zeros(40);
    float *dx = zeros(40), *db = zeros(40);
    loss_dropout(&c);
    dropout_backward(dx, c.R, c.keep, 40);
    fd_check(loss_dropout, &c, c.x, dx, 40, 1e-2f, 1e-3, 1e-3);
    memset(dx, 0, 40 * sizeof(float));
    residual_backward(dx, db, c.R, 40);
    fd_check(loss_residual, &c, c.x, dx, 40, 1e-2f, 1e-3, 1e-3);
    fd_check(loss_residual, &c, c.b1, db, 40, 1e-2f, 1e-3, 1e-3);
    free(c.x); free(c.b1); free(c.R); free(c.out); free(c.keep); free(dx); free(db);
}
END_TEST

static double loss_embed(void *v) {
    Ctx *c = v;
    embed_forward(c->out, c->ids, c->W1, c->pe, 2, c->T, c->IN, c->V);
    return weighted_sum(c->out, c->R, (size_t)2 * c->T * c->IN);
}

START_TEST(test_grad_embed) {
    /* linear in the table: h 1e-2, tol 1e-3. ids repeat within and across rows. */
    enum { B = 2, T = 4, D = 6, V = 5 };
    int ids[B * T] = {1, 3, 1, 0, 4, 1, 3, 3};
    float pe[T * D];
    posenc_fill(pe, T, D);
    Ctx c = {.T = T, .IN = D, .V = V, .ids = ids, .pe = pe};
    Rng r;
    rng_seed(&r, 15);
    c.W1 = randn(&r, V * D, 1); c.R = randn(&r, B * T * D, 1); c.out = zeros(B * T * D);
    float *dtable = zeros(V * D);
    embed_backward(dtable, c.R, ids, B, T, D, V);
    fd_check(loss_embed, &c, c.W1, dtable, V * D, 1e-2f, 1e-3, 1e-3);
    for (int k = 0; k < D; k++) ck_assert_float_eq(dtable[2 * D + k], 0.0f);   /* id 2 unused */
    free(c.W1); free(c.R); free(c.out); free(dtable);
}
END_TEST

static double loss_xent(void *v) {
    Ctx *c = v;
    logsoftmax_forward(c->out, c->x, c->N, c->V);
    return smoothed_xent_forward(c->out, c->ids, c->N, c->V, 0.1f, 0, NULL);
}

START_TEST(test_grad_logsoftmax_xent) {
    /* loss ~ 2 returned as float (rounding ~2e-7), h 1e-2 -> ~1e-5; the
     * curvature term h^2/6 * f''' is ~1e-5 too. Gradients are ~0.1: tol 2e-4.
     * Row 2 is padding (target 0) and must get exactly zero gradient. */
    enum { N = 4, V = 6 };
    int targets[N] = {3, 1, 0, 5};
    Ctx c = {.N = N, .V = V, .ids = targets};
    Rng r;
    rng_seed(&r, 16);
    c.x = randn(&r, N * V, 2); c.out = zeros(N * V);
    float *dlogits = zeros(N * V);
    loss_xent(&c);
    smoothed_xent_backward(dlogits, c.out, targets, N, V, 0.1f, 0);
    fd_check(loss_xent, &c, c.x, dlogits, N * V, 1e-2f, 2e-4, 2e-3);
    for (int v = 0; v < V; v++) ck_assert_float_eq(dlogits[2 * V + v], 0.0f);
    free(c.x); free(c.out); free(dlogits);
}
END_TEST

/* ========================================================================== */
/* Twins: each tuned op against its plain reference                            */
/* ========================================================================== */

/* Row widths around the fast loops' strides (8 running sums forward, 16
 * lanes backward): 1, one short of / one past a multiple, and the sizes a
 * model uses. _i picks the width; each runs with 1 and with 5 rows. */
static const int twin_C[] = {1, 7, 8, 15, 16, 17, 63, 64, 65, 129};

START_TEST(test_layernorm_twins) {
    int C = twin_C[_i];
    for (int N = 1; N <= 5; N += 4) {
        size_t n = (size_t)N * C;
        Rng r;
        rng_seed(&r, 700 + (uint64_t)_i);
        float *x = randn(&r, n, 2.0f), *g = randn(&r, C, 1.0f), *be = randn(&r, C, 1.0f);
        float *dy = randn(&r, n, 1.0f);
        /* a large mean on row 0: the variance must not cancel away */
        for (int c = 0; c < C; c++) x[c] += 100.0f;
        float *y = zeros(n), *yr = zeros(n), m[5], mr[5], s[5], sr[5];
        layernorm_forward(y, m, s, x, g, be, N, C);
        layernorm_forward_ref(yr, mr, sr, x, g, be, N, C);
        ck_assert_close_arrays(m, mr, (size_t)N, 1e-6);
        ck_assert_close_arrays(s, sr, (size_t)N, 1e-6);
        ck_assert_close_arrays(y, yr, n, 2e-6);

        /* backward from the same saved statistics; gradients start non-zero
         * to check that both accumulate */
        float *dx = randn(&r, n, 1.0f), *dg = randn(&r, C, 1.0f), *db = randn(&r, C, 1.0f);
        float *dxr = malloc(n * sizeof(float)), *dgr = malloc(C * sizeof(float)), *dbr = malloc(C * sizeof(float));
        memcpy(dxr, dx, n * sizeof(float));
        memcpy(dgr, dg, C * sizeof(float));
        memcpy(dbr, db, C * sizeof(float));
        layernorm_backward(dx, dg, db, dy, x, m, s, g, N, C);
        layernorm_backward_ref(dxr, dgr, dbr, dy, x, m, s, g, N, C);
        ck_assert_close_arrays(dx, dxr, n, 1e-5);
        ck_assert_close_arrays(dg, dgr, (size_t)C, 1e-5);
        ck_assert_close_arrays(db, dbr, (size_t)C, 1e-5);
        /* any of the gradients may be NULL in both */
        layernorm_backward(NULL, dg, NULL, dy, x, m, s, g, N, C);
        layernorm_backward_ref(NULL, dgr, NULL, dy, x, m, s, g, N, C);
        ck_assert_close_arrays(dg, dgr, (size_t)C, 1e-5);
        free(x); free(g); free(be); free(dy); free(y); free(yr);
        free(dx); free(dg); free(db); free(dxr); free(dgr); free(dbr);
    }
}
END_TEST

/* The element-wise and row-wise ops: the tuned twin (fast/nn_fast.c) shares
 * the elements or rows among the threads and computes each as the plain loop
 * does, so the two must agree to the bit. Sizes (rows x width) below and
 * above nn_fast.c's threshold for going parallel (2^15 floats), ragged for
 * the vector loops; accumulating ops start from the same non-zero values. */
static const int twin_rows[][2] = {{1, 1}, {3, 37}, {300, 257}, {1030, 64}};

static float *copy_of(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* t and p (n) both set to src */
static void both_from(float *t, float *p, const float *src, size_t n) {
    memcpy(t, src, n * sizeof(float));
    memcpy(p, src, n * sizeof(float));
}

#define ck_assert_same_bits(tuned, plain, n) ck_assert_same_bits_at((tuned), (plain), (n), #tuned, __LINE__)
static void ck_assert_same_bits_at(const float *t, const float *p, size_t n, const char *what, int line) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&t[i], &p[i], sizeof(float)))
            ck_abort_msg("line %d: %s[%zu] = %a, its plain twin gave %a", line, what, i, t[i], p[i]);
}

START_TEST(test_rowwise_twins) {
    int N = twin_rows[_i][0], C = twin_rows[_i][1];
    size_t n = (size_t)N * C;
    Rng r;
    rng_seed(&r, 900 + (uint64_t)_i);
    float *x = randn(&r, n, 2.0f), *dy = randn(&r, n, 1.0f), *start = randn(&r, n, 1.0f);
    float *bias = randn(&r, C, 1.0f);
    float *t = copy_of(start, n), *p = copy_of(start, n), *t2 = copy_of(x, n), *p2 = copy_of(x, n);

    relu_forward(t, x, n);
    relu_forward_ref(p, x, n);
    ck_assert_same_bits(t, p, n);
    float *relu_out = copy_of(p, n);
    both_from(t, p, start, n);
    relu_backward(t, dy, relu_out, n);
    relu_backward_ref(p, dy, relu_out, n);
    ck_assert_same_bits(t, p, n);
    both_from(t, p, dy, n);
    relu_backward_inplace(t, relu_out, n);
    relu_backward_inplace_ref(p, relu_out, n);
    ck_assert_same_bits(t, p, n);

    both_from(t, p, x, n);
    bias_forward(t, bias, N, C);
    bias_forward_ref(p, bias, N, C);
    ck_assert_same_bits(t, p, n);
    float *db = copy_of(bias, C), *dbr = copy_of(bias, C);
    bias_backward(db, dy, N, C);
    bias_backward_ref(dbr, dy, N, C);
    ck_assert_same_bits(db, dbr, (size_t)C);

    residual_forward(t, x, dy, n);
    residual_forward_ref(p, x, dy, n);
    ck_assert_same_bits(t, p, n);
    both_from(t, p, start, n);
    residual_backward(t, t2, dy, n);
    residual_backward_ref(p, p2, dy, n);
    ck_assert_same_bits(t, p, n);
    ck_assert_same_bits(t2, p2, n);

    float *keep = zeros(n), *dropped = zeros(n);
    dropout_forward_ref(dropped, keep, x, 0.1f, n, 42, 7);
    both_from(t, p, start, n);
    dropout_backward(t, dy, keep, n);
    dropout_backward_ref(p, dy, keep, n);
    ck_assert_same_bits(t, p, n);

    logsoftmax_forward(t, x, N, C);
    logsoftmax_forward_ref(p, x, N, C);
    ck_assert_same_bits(t, p, n);
    /* targets anywhere in [0, C), every third row padding (pad_id 0) */
    int *targets = malloc((size_t)N * sizeof(int)), pad = C > 1 ? 0 : -1;
    ck_assert_ptr_nonnull(targets);
    for (int i = 0; i < N; i++) targets[i] = i % 3 == 2 && pad >= 0 ? pad : rng_int(&r, C);
    float *logp = copy_of(p, n);
    both_from(t, p, start, n);
    smoothed_xent_backward(t, logp, targets, N, C, 0.1f, pad);
    smoothed_xent_backward_ref(p, logp, targets, N, C, 0.1f, pad);
    ck_assert_same_bits(t, p, n);

    free(x); free(dy); free(start); free(bias); free(t); free(p); free(t2); free(p2);
    free(relu_out); free(db); free(dbr); free(keep); free(dropped); free(targets); free(logp);
}
END_TEST

Suite *nn_suite(void) {
    Suite *s = suite_create("nn");
    suite_case(s, "Core", test_linear_values, test_relu_values, test_ffn_values,
               test_layernorm_values, test_residual_values, test_dropout, test_embed_values,
               test_smoothed_targets, test_smoothed_xent_values);

    TCase *limits = suite_case(s, "Limits", test_logsoftmax_huge, test_layernorm_constant_row,
                               test_threads_bit_identical);
    tcase_add_loop_test(limits, test_linear_sizes, 0, (int)(sizeof linear_sizes / sizeof linear_sizes[0]));

    TCase *twins = tcase_create("Twins");
    tcase_add_loop_test(twins, test_layernorm_twins, 0, (int)(sizeof twin_C / sizeof twin_C[0]));
    tcase_add_loop_test(twins, test_rowwise_twins, 0, (int)(sizeof twin_rows / sizeof twin_rows[0]));
    suite_add_tcase(s, twins);

    suite_case(s, "Gradient", test_grad_linear, test_grad_ffn, test_grad_layernorm,
               test_grad_dropout_residual, test_grad_embed, test_grad_logsoftmax_xent);
    return s;
}
