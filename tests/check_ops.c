/* check_ops.c - gemm, dot, softmax and exp_array (ref/ops.h, with the tuned
 * twins gemm() and exp_array) and matmul (layers/linear.h) against
 * hand-computed values, finite differences, and the worked examples of
 * chapters 01/02. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fast/gemm.h"
#include "fast/ops_fast.h"
#include "layers/linear.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "testutil.h"

typedef void (*GemmFn)(int, int, int, int, int, float, const float *, int,
                       const float *, int, float, float *, int);

/* The worked product used throughout:
 *   A (2,3) = [1 2 3; 4 5 6],  B (3,2) = [7 8; 9 10; 11 12],
 *   A @ B = [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12]
 *         = [58 64; 139 154]. */
static const float AB[4] = {58, 64, 139, 154};
static const float A23[6] = {1, 2, 3, 4, 5, 6}, B32[6] = {7, 8, 9, 10, 11, 12};

/* Stores the (R,C) matrix m, or m^T when trans, with leading dimension ld
 * (> the logical width: the padding holds 99s that must never be read). */
static void store(float *dst, const float *m, int R, int C, int trans, int ld) {
    int rows = trans ? C : R, cols = trans ? R : C;
    for (int i = 0; i < rows * ld; i++) dst[i] = 99.0f;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[i * ld + j] = trans ? m[j * C + i] : m[i * C + j];
}

/* All four transpose combinations, with lda/ldb/ldc wider than the rows,
 * alpha = 2 and beta = 0.5 on a C that starts at 1 (and beta = 0 on a C
 * full of NaN, which must not be read). */
static void check_gemm_hand(GemmFn g, const char *who) {
    for (int tA = 0; tA <= 1; tA++) {
        for (int tB = 0; tB <= 1; tB++) {
            float A[3 * 5], B[3 * 5], C[2 * 4];
            int lda = (tA ? 2 : 3) + 2, ldb = (tB ? 3 : 2) + 3, ldc = 4;
            store(A, A23, 2, 3, tA, lda);
            store(B, B32, 3, 2, tB, ldb);
            for (int i = 0; i < 8; i++) C[i] = 1.0f;
            g(tA, tB, 2, 2, 3, 2.0f, A, lda, B, ldb, 0.5f, C, ldc);
            float got[4] = {C[0], C[1], C[4], C[5]};
            float want[4];
            for (int i = 0; i < 4; i++) want[i] = 2.0f * AB[i] + 0.5f;
            if (diff_arrays(got, want, 4).max_abs > 1e-4)
                ck_abort_msg("%s transA=%d transB=%d: got [%g %g; %g %g]", who, tA, tB,
                             got[0], got[1], got[2], got[3]);
            /* columns 2..3 of each C row are padding: untouched */
            ck_assert_msg(C[2] == 1.0f && C[3] == 1.0f && C[6] == 1.0f && C[7] == 1.0f,
                          "%s wrote past N into C's padding", who);

            for (int i = 0; i < 8; i++) C[i] = NAN;
            g(tA, tB, 2, 2, 3, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
            float got0[4] = {C[0], C[1], C[4], C[5]};
            ck_assert_close_arrays(got0, AB, 4, 1e-4);
        }
    }
}

START_TEST(test_gemm_ref_hand) { check_gemm_hand(gemm_ref, "gemm_ref"); }
END_TEST

START_TEST(test_gemm_hand) { check_gemm_hand(gemm, "gemm"); }
END_TEST

/* gemm() (blocked, SIMD) against gemm_ref on sizes around typical block
 * edges, every transpose combination; _i is the loop index. */
static const int SWEEP[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 64, 64}, {65, 31, 129}, {8, 130, 67}};

START_TEST(test_gemm_vs_ref_sweep) {
    int M = SWEEP[_i][0], N = SWEEP[_i][1], K = SWEEP[_i][2];
    Rng rng;
    rng_seed(&rng, 7 + (uint64_t)_i);
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    float *C0 = malloc(sizeof(float) * M * N);
    rng_fill_uniform(&rng, A, (size_t)M * K, -1, 1);
    rng_fill_uniform(&rng, B, (size_t)K * N, -1, 1);
    rng_fill_uniform(&rng, C0, (size_t)M * N, -1, 1);
    for (int tA = 0; tA <= 1; tA++) {
        for (int tB = 0; tB <= 1; tB++) {
            memcpy(C, C0, sizeof(float) * M * N);
            memcpy(R, C0, sizeof(float) * M * N);
            int lda = tA ? M : K, ldb = tB ? K : N;
            gemm(tA, tB, M, N, K, 0.75f, A, lda, B, ldb, -0.5f, C, N);
            gemm_ref(tA, tB, M, N, K, 0.75f, A, lda, B, ldb, -0.5f, R, N);
            /* float sums of K terms of size <= 1: error grows like K * eps */
            ck_assert_close_arrays(C, R, (size_t)M * N, 1e-5 * (K + 1));
        }
    }
    free(A); free(B); free(C); free(R); free(C0);
}
END_TEST

START_TEST(test_matmul_hand) {
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    float out[4];
    matmul_forward(out, a, b, 2, 3, 2);
    ck_assert_close_arrays(out, AB, 4, 1e-5);

    /* dout = [1 0; 0 1]: da = dout @ b^T = b^T's rows = [7 9 11; 8 10 12],
     * db = a^T @ dout = a^T = [1 4; 2 5; 3 6]. Both ACCUMULATE onto 1s. */
    const float dout[4] = {1, 0, 0, 1};
    float da[6], db[6];
    for (int i = 0; i < 6; i++) da[i] = db[i] = 1.0f;
    matmul_backward(da, db, dout, a, b, 2, 3, 2);
    const float want_da[6] = {8, 10, 12, 9, 11, 13}, want_db[6] = {2, 5, 3, 6, 4, 7};
    ck_assert_close_arrays(da, want_da, 6, 1e-5);
    ck_assert_close_arrays(db, want_db, 6, 1e-5);
    matmul_backward(NULL, db, dout, a, b, 2, 3, 2);   /* either may be NULL */
    matmul_backward(da, NULL, dout, a, b, 2, 3, 2);
}
END_TEST

/* L = sum(G * (a @ b)) computed in double from the float inputs. */
static double matmul_loss(const float *a, const float *b, const float *G, int M, int K, int N) {
    double L = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) s += (double)a[i * K + p] * b[p * N + j];
            L += G[i * N + j] * s;
        }
    return L;
}

typedef struct { const float *a, *b, *G; int M, K, N; } MatmulLoss;
static double matmul_loss_of(void *ctx) {
    MatmulLoss *c = ctx;
    return matmul_loss(c->a, c->b, c->G, c->M, c->K, c->N);
}

START_TEST(test_matmul_gradient) {
    /* Central differences (fd_check), step h = 1e-2 (L is linear in each
     * entry, so the difference quotient is exact up to rounding); tolerance 1e-4. */
    enum { M = 3, K = 4, N = 5 };
    Rng rng;
    rng_seed(&rng, 3);
    float a[M * K], b[K * N], G[M * N], da[M * K] = {0}, db[K * N] = {0};
    rng_fill_normal(&rng, a, M * K, 0, 1);
    rng_fill_normal(&rng, b, K * N, 0, 1);
    rng_fill_normal(&rng, G, M * N, 0, 1);
    matmul_backward(da, db, G, a, b, M, K, N);
    MatmulLoss c = {a, b, G, M, K, N};
    fd_check(matmul_loss_of, &c, a, da, M * K, 1e-2f, 1e-4, 0);
    fd_check(matmul_loss_of, &c, b, db, K * N, 1e-2f, 1e-4, 0);
}
END_TEST

START_TEST(test_dot_golden) {
    /* chapter 01's worked example: 1*3 + 2*4 = 11 */
    const float a[2] = {1, 2}, b[2] = {3, 4};
    ck_assert(dot(a, b, 2) == 11.0f);
    const float z[3] = {1, 0, 0}, w[3] = {0, 5, -2};
    ck_assert(dot(z, w, 3) == 0.0f);   /* perpendicular */
}
END_TEST

/* ---- softmax ---------------------------------------------------------------- */

START_TEST(test_softmax_golden) {
    /* chapter 02: [1000, 1001, 1002] is [-2, -1, 0] after the max shift */
    const float x[3] = {1000, 1001, 1002};
    const float want[3] = {0.09003057f, 0.24472847f, 0.66524096f};
    float y[3];
    softmax_forward(y, x, 1, 3);
    ck_assert_close_arrays(y, want, 3, 1e-6);
    /* and the textbook version cannot do it: exp(1000) = inf, inf/inf */
    softmax_naive(y, x, 1, 3);
    ck_assert(isnan(y[0]) && isnan(y[2]));

    /* softmax([10, 2, 1]) = [1, e^-8, e^-9] / (1 + e^-8 + e^-9), not the
     * [0.99, 0.007, 0.003] of one reading note */
    const float x2[3] = {10, 2, 1};
    const float want2[3] = {0.999541338f, 3.35308764e-4f, 1.233532007e-4f};
    softmax_forward(y, x2, 1, 3);
    ck_assert_close_arrays(y, want2, 3, 1e-7);
    ck_assert_float_eq_tol(y[1] / want2[1], 1.0f, 1e-4f);   /* relative, small entries */
    ck_assert_float_eq_tol(y[2] / want2[2], 1.0f, 1e-4f);
}
END_TEST

/* Rows sum to 1 and adding a constant changes nothing, for row lengths
 * 1..200 (_i indexes LENS). */
static const int LENS[] = {1, 2, 3, 7, 16, 31, 64, 200};

START_TEST(test_softmax_properties) {
    int C = LENS[_i], N = 3;
    Rng rng;
    rng_seed(&rng, 11 + (uint64_t)_i);
    float *x = malloc(sizeof(float) * N * C), *xs = malloc(sizeof(float) * N * C);
    float *y = malloc(sizeof(float) * N * C), *ys = malloc(sizeof(float) * N * C);
    rng_fill_normal(&rng, x, (size_t)N * C, 0, 5);
    for (int i = 0; i < N * C; i++) xs[i] = x[i] + 100.0f;
    softmax_forward(y, x, N, C);
    softmax_forward(ys, xs, N, C);
    for (int r = 0; r < N; r++) {
        double s = 0;
        for (int i = 0; i < C; i++) {
            ck_assert(y[r * C + i] >= 0.0f && y[r * C + i] <= 1.0f);
            s += y[r * C + i];
        }
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    /* x + 100 loses some low bits of x (float spacing at 100 is 7.6e-6) */
    ck_assert_close_arrays(ys, y, (size_t)N * C, 1e-4);
    free(x); free(xs); free(y); free(ys);
}
END_TEST

START_TEST(test_softmax_limits) {
    float y[4];
    /* length 1: the only entry gets everything, however large */
    const float one[1] = {-3e38f};
    softmax_forward(y, one, 1, 1);
    ck_assert(y[0] == 1.0f);

    /* -inf entries get exactly 0; the rest still sum to 1 */
    const float m[4] = {2.0f, -INFINITY, 1.0f, -INFINITY};
    softmax_forward(y, m, 1, 4);
    ck_assert(y[1] == 0.0f && y[3] == 0.0f);
    ck_assert_float_eq_tol(y[0], 1.0f / (1.0f + expf(-1.0f)), 1e-6f);
    ck_assert_float_eq_tol(y[0] + y[2], 1.0f, 1e-6f);

    /* a fully masked row: zeros, not NaN; the row beside it is unaffected */
    const float rows[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 0, 0, 0};
    float y2[8];
    softmax_forward(y2, rows, 2, 4);
    for (int i = 0; i < 4; i++) ck_assert_msg(y2[i] == 0.0f, "masked row entry %d = %g", i, y2[i]);
    for (int i = 4; i < 8; i++) ck_assert_float_eq_tol(y2[i], 0.25f, 1e-7f);
    const float all[1] = {-INFINITY};
    softmax_forward(y, all, 1, 1);
    ck_assert(y[0] == 0.0f);

    /* huge and tiny together: no overflow, no NaN */
    const float wide[3] = {1e30f, 0.0f, -1e30f};
    softmax_forward(y, wide, 1, 3);
    ck_assert(y[0] == 1.0f && y[1] == 0.0f && y[2] == 0.0f);
}
END_TEST

/* L = sum(G * softmax(x)) in double, from float inputs. */
static double softmax_loss(const float *x, const float *G, int C) {
    double mx = x[0], s = 0, L = 0;
    for (int i = 1; i < C; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < C; i++) s += exp(x[i] - mx);
    for (int i = 0; i < C; i++) L += G[i] * exp(x[i] - mx) / s;
    return L;
}

typedef struct { const float *x, *G; int C; } SoftmaxLoss;
static double softmax_loss_of(void *ctx) {
    SoftmaxLoss *c = ctx;
    return softmax_loss(c->x, c->G, c->C);
}

START_TEST(test_softmax_gradient) {
    /* Central differences (fd_check) in double, step h = 1e-3: truncation error
     * ~h^2 * |third derivative| < 1e-6; tolerance 1e-4 covers float
     * rounding of the analytic gradient. Also checks that backward adds
     * (+=) onto what dinp held. */
    enum { C = 6 };
    Rng rng;
    rng_seed(&rng, 5);
    float x[C], G[C], y[C], dx[C], added[C];
    rng_fill_normal(&rng, x, C, 0, 2);
    rng_fill_normal(&rng, G, C, 0, 1);
    softmax_forward(y, x, 1, C);
    for (int i = 0; i < C; i++) dx[i] = 0.5f;
    softmax_backward(dx, G, y, 1, C);
    for (int i = 0; i < C; i++) added[i] = dx[i] - 0.5f;   /* what backward added onto the 0.5 */
    SoftmaxLoss c = {x, G, C};
    fd_check(softmax_loss_of, &c, x, added, C, 1e-3f, 1e-4, 0);

    /* the gradient of any function of softmax sums to 0 over a row
     * (shifting every score together changes nothing) */
    float g0[C] = {0};
    softmax_backward(g0, G, y, 1, C);
    double s = 0;
    for (int i = 0; i < C; i++) s += g0[i];
    ck_assert_double_eq_tol(s, 0.0, 1e-6);

    /* a fully masked row (y = 0) passes no gradient */
    float yz[3] = {0, 0, 0}, dz[3] = {0, 0, 0};
    const float gz[3] = {1, 2, 3};
    softmax_backward(dz, gz, yz, 1, 3);
    ck_assert(dz[0] == 0.0f && dz[1] == 0.0f && dz[2] == 0.0f);
}
END_TEST

START_TEST(test_elementwise) {
    const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    float out[3];
    add_forward(out, a, b, 3);
    const float want_add[3] = {11, 22, 33};
    ck_assert_close_arrays(out, want_add, 3, 0.0);
    scale_forward(out, a, -2.0f, 3);
    const float want_scale[3] = {-2, -4, -6};
    ck_assert_close_arrays(out, want_scale, 3, 0.0);
    fill(out, 7.0f, 3);
    const float want_fill[3] = {7, 7, 7};
    ck_assert_close_arrays(out, want_fill, 3, 0.0);
}
END_TEST

/* exp_array (the tuned twin, fast/ops_fast.c) and exp_array_ref (the plain
 * loop) must both give expf()'s bits for every input, so that softmax and
 * attention round as they did with the scalar loop. Every input was
 * checked once (all 2^32 bit patterns, 22 s: none differ); here a
 * stride through all of them (about 1M, every sign and exponent), the
 * edges of expf's special cases, and lengths that leave a ragged end. */
static void check_exp_bits_of(void (*exp_fn)(float *, const float *, int), const char *name,
                              const float *x, int n) {
    float y[64], z[64];
    ck_assert_int_le(n, 64);
    exp_fn(y, x, n);
    memcpy(z, x, sizeof(float) * n);
    exp_fn(z, z, n);   /* in place, as softmax calls it */
    for (int i = 0; i < n; i++) {
        float e = expf(x[i]);
        if (isnan(e) ? !isnan(y[i]) || !isnan(z[i]) : memcmp(&e, &y[i], sizeof e) || memcmp(&e, &z[i], sizeof e))
            ck_abort_msg("%s(%a) = %a (in place %a), expf = %a", name, x[i], y[i], z[i], e);
    }
}

static void check_exp_bits(const float *x, int n) {
    check_exp_bits_of(exp_array, "exp_array", x, n);
    check_exp_bits_of(exp_array_ref, "exp_array_ref", x, n);
}

START_TEST(test_exp_array_bits) {
    float x[64];
    int n = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {   /* 4093: prime, so every low bit pattern too */
        uint32_t b = (uint32_t)u;
        memcpy(&x[n++], &b, sizeof b);
        if (n == 64) check_exp_bits(x, n), n = 0;
    }
    const float edge[] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 88.0f, -88.0f, 0x1.62e42ep6f, 0x1.62e430p6f,
                          -0x1.9fe368p6f, -0x1.9fe36ap6f, -0x1.9d1d9ep6f, -0x1.9d1da0p6f, -87.99f, 1e-30f, -1e-30f,
                          0x1p-149f, -0x1p-149f, 0.5f, -0.5f, 1.0f, -1.0f, -10.0f, -103.0f, -104.0f, 87.9f, 89.0f};
    int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int len = 1; len <= ne; len++) check_exp_bits(edge, len);   /* every ragged end, 1..27 */
}
END_TEST

Suite *ops_suite(void) {
    Suite *s = suite_create("ops");
    suite_case(s, "Core", test_gemm_ref_hand, test_gemm_hand, test_matmul_hand, test_dot_golden,
               test_softmax_golden, test_elementwise, test_exp_array_bits);
    TCase *sweep = tcase_create("Sweep");
    tcase_add_loop_test(sweep, test_gemm_vs_ref_sweep, 0, (int)(sizeof SWEEP / sizeof SWEEP[0]));
    tcase_add_loop_test(sweep, test_softmax_properties, 0, (int)(sizeof LENS / sizeof LENS[0]));
    suite_add_tcase(s, sweep);
    suite_case(s, "Limits", test_softmax_limits);
    suite_case(s, "Gradient", test_matmul_gradient, test_softmax_gradient);
    return s;
}
