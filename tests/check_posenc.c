/* check_posenc.c - the sinusoidal positional encoding of Sec. 3.5: values
 * against the formula (also at large positions, where a float32 angle would
 * be visibly wrong), the rotation property PE(pos+k) = M_k PE(pos), the dot
 * product that depends on k alone, and what PE does to self-attention's
 * indifference to word order. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fast/attention_fast.h"
#include "layers/multihead.h"
#include "ref/nn.h"
#include "core/rng.h"
#include "testutil.h"

/* the formula exactly as printed in the paper, in double */
static double pe_formula(int pos, int j, int d_model) {
    int i = j / 2;
    double angle = pos / pow(10000.0, (2.0 * i) / d_model);
    return j % 2 == 0 ? sin(angle) : cos(angle);
}

static float *pe_new(int max_len, int d_model) {
    float *pe = malloc(sizeof(float) * max_len * d_model);
    ck_assert_ptr_nonnull(pe);
    posenc_fill(pe, max_len, d_model);
    return pe;
}

/* ---- Core ------------------------------------------------------------------ */

START_TEST(test_pe_hand_values) {
    float *pe = pe_new(2, 4);
    /* pos 0: sin(0) = 0 in even columns, cos(0) = 1 in odd ones */
    float row0[4] = {0, 1, 0, 1};
    ck_assert_close_arrays(pe, row0, 4, 0.0);
    /* pos 1, d_model 4: w_0 = 1, w_1 = 10000^(-2/4) = 0.01 */
    float row1[4] = {0.84147098f, 0.54030231f, 0.0099998333f, 0.99995000f};
    ck_assert_close_arrays(pe + 4, row1, 4, 1e-7);
    free(pe);
}
END_TEST

START_TEST(test_pe_formula_large_pos) {
    /* At pos 10000 the angle pos*w_0 = 10000 rad; forming it in float would
     * be off by up to ~5e-4 rad (float spacing near 10000 is ~1e-3), so
     * tolerance 1e-6 checks that posenc_fill works in double. */
    enum { L = 10001, D = 16 };
    float *pe = pe_new(L, D);
    int pos[] = {0, 1, 2, 7, 100, 999, 5000, 9999, 10000};
    int cols[] = {0, 1, 2, 3, 8, 9, D - 2, D - 1};
    for (size_t a = 0; a < sizeof pos / sizeof pos[0]; a++)
        for (size_t b = 0; b < sizeof cols / sizeof cols[0]; b++) {
            double want = pe_formula(pos[a], cols[b], D);
            double got = pe[(long)pos[a] * D + cols[b]];
            ck_assert_msg(fabs(got - want) <= 1e-6, "PE(%d, %d) = %.9g, formula %.9g",
                          pos[a], cols[b], got, want);
        }
    /* every value is a sine or cosine: inside [-1, 1] */
    for (long i = 0; i < (long)L * D; i++) ck_assert(pe[i] >= -1.0f && pe[i] <= 1.0f);
    free(pe);
}
END_TEST

START_TEST(test_pe_odd_d_model) {
    /* odd d_model: the last column (even index d-1) is a sine with no cosine
     * partner, at frequency 10000^(-(d-1)/d) */
    enum { D = 5 };
    float *pe = pe_new(50, D);
    for (int pos = 0; pos < 50; pos++)
        for (int j = 0; j < D; j++)
            ck_assert(fabs(pe[pos * D + j] - pe_formula(pos, j, D)) <= 1e-6);
    free(pe);
}
END_TEST

/* ---- the rotation property ------------------------------------------------- */

/* PE(pos+k) = M_k PE(pos), M_k block-diagonal 2x2 rotations by k*w_i:
 * [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] [sin a, cos a] */
static const int rot_d[] = {2, 8, 64, 512};

START_TEST(test_pe_rotation) {
    int D = rot_d[_i], L = 300;
    float *pe = pe_new(L, D);
    int ks[] = {1, 3, 17, 150};
    for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
        int k = ks[q];
        double worst = 0.0;
        for (int pos = 0; pos + k < L; pos++) {
            const float *a = pe + (long)pos * D, *b = pe + (long)(pos + k) * D;
            for (int i = 0; i < D / 2; i++) {
                double w = pow(10000.0, -2.0 * i / D), c = cos(k * w), s = sin(k * w);
                double ps = c * a[2 * i] + s * a[2 * i + 1];      /* predicted sin((pos+k) w) */
                double pc = -s * a[2 * i] + c * a[2 * i + 1];     /* predicted cos((pos+k) w) */
                worst = fmax(worst, fmax(fabs(ps - b[2 * i]), fabs(pc - b[2 * i + 1])));
            }
        }
        /* only float32 storage rounding of PE (~6e-8 per entry) remains */
        ck_assert_msg(worst < 1e-6, "d_model %d, k %d: max |PE(pos+k) - M_k PE(pos)| = %.3g", D, k, worst);
    }
    free(pe);
}
END_TEST

START_TEST(test_pe_dot_depends_on_k_only) {
    /* sum_i sin(a)sin(b) + cos(a)cos(b) = sum_i cos(k w_i), whatever pos is;
     * and |PE(pos)|^2 = d_model / 2 (k = 0) */
    enum { D = 64, L = 400 };
    float *pe = pe_new(L, D);
    int ks[] = {0, 1, 5, 20, 100};
    for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
        int k = ks[q];
        double want = 0.0;
        for (int i = 0; i < D / 2; i++) want += cos(k * pow(10000.0, -2.0 * i / D));
        for (int pos = 0; pos + k < L; pos += 7) {
            double d = 0.0;
            for (int c = 0; c < D; c++) d += (double)pe[pos * D + c] * pe[(pos + k) * D + c];
            ck_assert_msg(fabs(d - want) < 1e-5, "k %d pos %d: dot %.8g, want %.8g", k, pos, d, want);
        }
        if (k == 0) ck_assert(fabs(want - D / 2) < 1e-12);
    }
    free(pe);
}
END_TEST

/* ---- permutation: what PE is for --------------------------------------------- */

enum { T = 5, DM = 16, H = 2, DK = DM / H };

/* x (T, DM) -> out (T, DM) = MultiHead(x, x, x) with fixed random weights */
static void self_attention(float *out, const float *x, const float *w) {
    MhaParams p = {(float *)w, (float *)w + DM * DM, (float *)w + 2 * DM * DM, (float *)w + 3 * DM * DM};
    size_t na = mha_acts_size(1, T, T, H, DK, DK);
    float *buf = malloc(na * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    MhaActs a;
    mha_acts_layout(&a, buf, 1, T, T, H, DK, DK);
    mha_forward(out, &a, &p, x, x, NULL, 1, T, T, DM, H, DK, DK);
    free(buf);
}

/* max over i of |out_p[i] - out[perm[i]]| */
static double perm_gap(const float *out, const float *out_p, const int *perm, int d) {
    double m = 0.0;
    for (int i = 0; i < T; i++)
        for (int c = 0; c < d; c++) {
            double g = fabs(out_p[i * d + c] - out[perm[i] * d + c]);
            if (g > m) m = g;   /* not fmax(): Debian's aarch64 gcc 12.2 crashes vectorizing it */
        }
    return m;
}

START_TEST(test_permutation_mha) {
    /* "the cat eats the fish" with random embeddings; "the fish eats the cat"
     * is the permutation [0 4 2 3 1]. Without PE the outputs are the same
     * rows reordered (equal up to summation-order rounding); with PE they
     * are not. */
    Rng r;
    rng_seed(&r, 2024);
    float table[4 * DM], w[4 * DM * DM];
    rng_fill_normal(&r, table, 4 * DM, 0.0f, 0.25f);
    rng_fill_normal(&r, w, 4 * DM * DM, 0.0f, 0.25f);
    int ids[T] = {0, 1, 2, 0, 3}, perm[T] = {0, 4, 2, 3, 1}, pids[T];
    for (int i = 0; i < T; i++) pids[i] = ids[perm[i]];
    float zero_pe[T * DM] = {0}, pe[T * DM];
    posenc_fill(pe, T, DM);
    float x[T * DM], xp[T * DM], y[T * DM], yp[T * DM];

    embed_forward(x, ids, table, zero_pe, 1, T, DM, 4);
    embed_forward(xp, pids, table, zero_pe, 1, T, DM, 4);
    self_attention(y, x, w);
    self_attention(yp, xp, w);
    double no_pe = perm_gap(y, yp, perm, DM);
    ck_assert_msg(no_pe < 1e-5, "without PE the reordered output should be the rows reordered: gap %.3g", no_pe);
    /* the two "the" tokens get identical outputs without PE */
    ck_assert(perm_gap(y, y, (int[T]){3, 1, 2, 0, 4}, DM) < 1e-6);

    embed_forward(x, ids, table, pe, 1, T, DM, 4);
    embed_forward(xp, pids, table, pe, 1, T, DM, 4);
    self_attention(y, x, w);
    self_attention(yp, xp, w);
    double with_pe = perm_gap(y, yp, perm, DM);
    ck_assert_msg(with_pe > 1e-2, "with PE the order should matter: gap only %.3g", with_pe);
}
END_TEST

START_TEST(test_permutation_sdpa) {
    /* Eq. (1) alone, Q = K = V = x, over a cyclic shift of 5 random token
     * vectors; then again with PE(i) added to whatever token sits at i */
    Rng r;
    rng_seed(&r, 7);
    float tok[T * DM], x[T * DM], xp[T * DM], y[T * DM], yp[T * DM], wts[T * T], pe[T * DM];
    int perm[T] = {2, 3, 4, 0, 1};
    rng_fill_normal(&r, tok, T * DM, 0.0f, 1.0f);
    posenc_fill(pe, T, DM);
    for (int use_pe = 0; use_pe <= 1; use_pe++) {
        for (int i = 0; i < T; i++)
            for (int c = 0; c < DM; c++) {
                x[i * DM + c] = tok[i * DM + c] + (use_pe ? pe[i * DM + c] : 0.0f);
                xp[i * DM + c] = tok[perm[i] * DM + c] + (use_pe ? pe[i * DM + c] : 0.0f);
            }
        sdpa_forward(y, wts, x, x, x, NULL, 1, 1, T, T, DM, DM);
        sdpa_forward(yp, wts, xp, xp, xp, NULL, 1, 1, T, T, DM, DM);
        double gap = perm_gap(y, yp, perm, DM);
        if (use_pe) ck_assert_msg(gap > 1e-2, "sdpa with PE: gap only %.3g", gap);
        else ck_assert_msg(gap < 1e-5, "sdpa without PE: gap %.3g", gap);
    }
}
END_TEST

Suite *posenc_suite(void) {
    Suite *s = suite_create("posenc");
    TCase *core = suite_case(s, "Core", test_pe_hand_values, test_pe_formula_large_pos,
                             test_pe_odd_d_model, test_pe_dot_depends_on_k_only);
    tcase_add_loop_test(core, test_pe_rotation, 0, (int)(sizeof rot_d / sizeof rot_d[0]));
    suite_case(s, "Permutation", test_permutation_mha, test_permutation_sdpa);
    return s;
}
