/* check_table1.c - Table 1's four layer types (chapters/10_why_self_attention/table1.c), chapter 10.
 *
 * Test cases:
 *   Core      each forward pass against a plain double-precision reference;
 *             self-attention is the library's mha_forward bit for bit, and
 *             restricted attention is mha_forward with a band mask
 *   Flops     the counters against closed forms written out by hand
 *   Exponents the log-log exponents of the counted FLOPs, at chapter 10's
 *             default sweeps, within 0.25 of Table 1's (and the values its
 *             README quotes); the chapter's defaults are those sweeps; its
 *             time-vs-FLOPs sentence agrees with its own numbers
 *   Paths     maximum path length for n = 16 against hand-derived values;
 *             larger n against the closed forms
 *   Connect   the probed connectivity (perturb an input, watch the outputs)
 *             equals the taps the path search walks; sequential operations
 *   Limits    n = 1, dilations past n, the fit helpers
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "layers/multihead.h"
#include "core/rng.h"
#include "10_why_self_attention/table1.h"
#include "testutil.h"

static void build(T1Layer *L, T1Kind kind, int n, int d, int h, int k, int r, int dil, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    ck_assert_int_eq(t1_layer_build(L, kind, n, d, h, k, r, dil, &rng), 0);
}

static Flops run(T1Kind kind, int n, int d, int h, int k, int r, int dil) {
    T1Layer L;
    build(&L, kind, n, d, h, k, r, dil, 7);
    Rng rng;
    rng_seed(&rng, 8);
    float *x = randn(&rng, (size_t)n * d, 1.0f), *y = malloc(sizeof(float) * n * d);
    Flops f = {0, 0};
    t1_forward(&L, y, x, n, &f);
    free(x); free(y);
    t1_layer_free(&L);
    return f;
}

/* ---- Core ----------------------------------------------------------------------- */

START_TEST(test_self_attention_is_the_library) {
    int n = 12, d = 16, h = 4;
    T1Layer L;
    build(&L, T1_SELF_ATTENTION, 20, d, h, 3, 4, 1, 1);
    Rng rng;
    rng_seed(&rng, 2);
    float *x = randn(&rng, (size_t)n * d, 1.0f), *y = malloc(sizeof(float) * n * d), *ref = malloc(sizeof(float) * n * d);
    float *buf = malloc(sizeof(float) * mha_acts_size(1, n, n, h, d / h, d / h));
    MhaActs a;
    mha_acts_layout(&a, buf, 1, n, n, h, d / h, d / h);
    t1_forward(&L, y, x, n, NULL);            /* n < n_max: the front of the layout */
    mha_forward(ref, &a, &L.mha, x, x, NULL, 1, n, n, d, h, d / h, d / h);
    ck_assert_close_arrays(y, ref, (size_t)n * d, 0.0);
    ck_assert_close_arrays(L.acts.weights, a.weights, (size_t)h * n * n, 0.0);
    free(x); free(y); free(ref); free(buf);
    t1_layer_free(&L);
}
END_TEST

START_TEST(test_restricted_is_band_masked_attention) {
    int n = 17, d = 12, h = 3;
    for (int r = 2; r <= 40; r += r < 8 ? 2 : 16) {
        T1Layer L;
        build(&L, T1_RESTRICTED, n, d, h, 3, r, 1, 3);
        Rng rng;
        rng_seed(&rng, 4);
        float *x = randn(&rng, (size_t)n * d, 1.0f), *y = malloc(sizeof(float) * n * d), *ref = malloc(sizeof(float) * n * d);
        float *buf = malloc(sizeof(float) * mha_acts_size(1, n, n, h, d / h, d / h));
        uint8_t *band = malloc((size_t)n * n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) band[i * n + j] = abs(i - j) <= r / 2;
        MhaActs a;
        mha_acts_layout(&a, buf, 1, n, n, h, d / h, d / h);
        t1_forward(&L, y, x, n, NULL);
        mha_forward(ref, &a, &L.mha, x, x, band, 1, n, n, d, h, d / h, d / h);
        ck_assert_close_arrays(y, ref, (size_t)n * d, 1e-6);
        free(x); free(y); free(ref); free(buf); free(band);
        t1_layer_free(&L);
    }
}
END_TEST

/* recurrent, convolution and separable against loops in double */
START_TEST(test_plain_layers_against_double) {
    int n = 9, d = 6, k = 5, dil = 2;
    Rng rng;
    rng_seed(&rng, 5);
    float *x = randn(&rng, (size_t)n * d, 1.0f), *y = malloc(sizeof(float) * n * d), *ref = malloc(sizeof(float) * n * d);
    T1Layer L;
    /* h_t = tanh(x_t W + h_{t-1} U + b) */
    build(&L, T1_RECURRENT, n, d, 1, 1, 0, 1, 6);
    t1_forward(&L, y, x, n, NULL);
    double hprev[16] = {0}, hnew[16];
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < d; j++) {
            double z = L.b[j];
            for (int i = 0; i < d; i++) z += (double)x[t * d + i] * L.w[i * d + j] + hprev[i] * L.u[i * d + j];
            hnew[j] = tanh(z);
        }
        for (int j = 0; j < d; j++) { hprev[j] = hnew[j]; ref[t * d + j] = (float)hnew[j]; }
    }
    ck_assert_close_arrays(y, ref, (size_t)n * d, 1e-5);
    t1_layer_free(&L);
    /* out_i = b + sum_m x_{i + (m - (k-1)/2) dil} W_m, zero outside the sequence */
    for (int sep = 0; sep < 2; sep++) {
        build(&L, sep ? T1_SEPARABLE : T1_CONVOLUTION, n, d, 1, k, 0, dil, 7);
        t1_forward(&L, y, x, n, NULL);
        for (int i = 0; i < n; i++) {
            double mid[16] = {0};
            for (int j = 0; j < d; j++) {
                double z = L.b[j];
                for (int m = 0; m < k; m++) {
                    int s = i + (m - (k - 1) / 2) * dil;
                    if (s < 0 || s >= n) continue;
                    if (sep) mid[j] += (double)L.w[m * d + j] * x[s * d + j];
                    else for (int c = 0; c < d; c++) z += (double)x[s * d + c] * L.w[((size_t)m * d + c) * d + j];
                }
                ref[i * d + j] = (float)z;
            }
            if (sep)
                for (int j = 0; j < d; j++) {
                    double z = L.b[j];
                    for (int c = 0; c < d; c++) z += mid[c] * L.u[c * d + j];
                    ref[i * d + j] = (float)z;
                }
        }
        ck_assert_close_arrays(y, ref, (size_t)n * d, 1e-5);
        t1_layer_free(&L);
    }
    free(x); free(y); free(ref);
}
END_TEST

/* ---- Flops ----------------------------------------------------------------------
 * Convention (table1.h): multiply-add = 2, other arithmetic 1; a query row of
 * attention over w keys = w (2 d_k + 6 + 2 d_v) + 1. */

START_TEST(test_flops_self_attention) {
    /* four projections (n,d)x(d,d): 4 * 2 n d^2 = 8 n d^2, not in Table 1;
     * h heads * n queries * (n (2 d_k + 6 + 2 d_k) + 1) = n^2 (4 d + 6 h) + h n
     * (h d_k = d): Table 1's n^2 d. n = 16, d = 8, h = 2: 8*16*64 = 8192 and
     * 256 * 44 + 32 = 11296. */
    Flops f = run(T1_SELF_ATTENTION, 16, 8, 2, 3, 4, 1);
    ck_assert_uint_eq(f.other, 8192);
    ck_assert_uint_eq(f.table, 11296);
    int sizes[][3] = {{1, 4, 1}, {7, 12, 3}, {33, 16, 8}, {64, 64, 8}};
    for (int i = 0; i < 4; i++) {
        uint64_t n = sizes[i][0], d = sizes[i][1], h = sizes[i][2];
        f = run(T1_SELF_ATTENTION, (int)n, (int)d, (int)h, 3, 4, 1);
        ck_assert_uint_eq(f.other, 8 * n * d * d);
        ck_assert_uint_eq(f.table, n * n * (4 * d + 6 * h) + h * n);
    }
}
END_TEST

START_TEST(test_flops_recurrent) {
    /* x W for all t: 2 n d^2; n steps of h_{t-1} U: 2 n d^2 (Table 1's n d^2,
     * twice); per step a bias add and a tanh per unit: 2 n d */
    int sizes[][2] = {{1, 3}, {16, 8}, {50, 32}};
    for (int i = 0; i < 3; i++) {
        uint64_t n = sizes[i][0], d = sizes[i][1];
        Flops f = run(T1_RECURRENT, (int)n, (int)d, 1, 1, 0, 1);
        ck_assert_uint_eq(f.table, 4 * n * d * d);
        ck_assert_uint_eq(f.other, 2 * n * d);
    }
}
END_TEST

START_TEST(test_flops_convolution) {
    /* tap m at offset o covers the n - |o| rows whose input is inside the
     * sequence; each row is a (1,d)x(d,d) product, 2 d^2. Bias: n d.
     * k = 3, dil = 1, n = 16: rows 15 + 16 + 15 = 46 -> 2*64*46 = 5888 at d = 8. */
    Flops f = run(T1_CONVOLUTION, 16, 8, 1, 3, 0, 1);
    ck_assert_uint_eq(f.table, 5888);
    ck_assert_uint_eq(f.other, 128);
    /* k = 5, dil = 2: offsets -4 -2 0 2 4, rows 12 + 14 + 16 + 14 + 12 = 68 */
    f = run(T1_CONVOLUTION, 16, 8, 1, 5, 0, 2);
    ck_assert_uint_eq(f.table, 2 * 64 * 68);
    /* k = 3, dil = 20 > n: only the centre tap lands inside: 16 rows */
    f = run(T1_CONVOLUTION, 16, 8, 1, 3, 0, 20);
    ck_assert_uint_eq(f.table, 2 * 64 * 16);
    /* general, dil = 1 and n > (k-1)/2: each end loses 1 + 2 + ... + (k-1)/2 rows,
     * 2 d^2 (k n - 2 (1 + ... + (k-1)/2)): Table 1's k n d^2, less the edges */
    uint64_t n = 100, d = 16, k = 7, half = 3;
    f = run(T1_CONVOLUTION, (int)n, (int)d, 1, (int)k, 0, 1);
    ck_assert_uint_eq(f.table, 2 * d * d * (k * n - 2 * half * (half + 1) / 2));
}
END_TEST

START_TEST(test_flops_separable) {
    /* depthwise: 2 d per covered row and tap (46 rows at k = 3, n = 16), then
     * pointwise 2 n d^2: Sec. 4's O(k n d + n d^2). Bias n d. */
    Flops f = run(T1_SEPARABLE, 16, 8, 1, 3, 0, 1);
    ck_assert_uint_eq(f.table, 2 * 8 * 46 + 2 * 16 * 64);
    ck_assert_uint_eq(f.other, 128);
}
END_TEST

START_TEST(test_flops_restricted) {
    /* query i sees keys |i - j| <= q = r/2 inside the sequence: sum of the
     * window sizes W = n (2q + 1) - q (q + 1) (each end loses 1 + 2 + ... + q).
     * n = 16, r = 4: W = 80 - 6 = 74 (the probe in chapter 10 counts 74
     * dependent pairs too). Table 1's r n d: W (4 d + 6 h) + h n; projections
     * 8 n d^2 as for full attention. */
    Flops f = run(T1_RESTRICTED, 16, 8, 2, 3, 4, 1);
    ck_assert_uint_eq(f.table, 74 * (4 * 8 + 6 * 2) + 2 * 16);
    ck_assert_uint_eq(f.other, 8 * 16 * 64);
    uint64_t n = 200, d = 32, h = 4, r = 10, q = 5;
    f = run(T1_RESTRICTED, (int)n, (int)d, (int)h, 3, (int)r, 1);
    ck_assert_uint_eq(f.table, (n * (2 * q + 1) - q * (q + 1)) * (4 * d + 6 * h) + h * n);
    /* a window wider than the sequence: every key, as full self-attention */
    Flops a = run(T1_RESTRICTED, 10, 8, 2, 3, 64, 1), b = run(T1_SELF_ATTENTION, 10, 8, 2, 3, 4, 1);
    ck_assert_uint_eq(a.table, b.table);
}
END_TEST

/* ---- Exponents -------------------------------------------------------------------
 * Chapter 10's default sweeps: n = 8, 12, 16, ..., 512 at d = 64 and
 * d = 16, 24, ..., 512 at n = 64, h = 8, k = 3, r = 4 (test_defaults_are_these
 * holds the chapter to them); the fit is over t1_fit_from's range, as the
 * chapter does it. sweep_n goes on to 1024, where --n-max 1024 takes it. */

static const double sweep_n[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
static const double sweep_d[] = {16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};
enum { N_DEFAULT = 13, N_TO_1024 = 15 };   /* points of sweep_n: to 512 (the default), to 1024 */

static double flop_exponent_m(T1Kind kind, int over_n, int m_n, int *from_out) {
    const double *x = over_n ? sweep_n : sweep_d;
    int m = over_n ? m_n : 11;
    double fl[16], share[16];
    for (int p = 0; p < m; p++) {
        int n = over_n ? (int)x[p] : 64, d = over_n ? 64 : (int)x[p];
        Flops f = run(kind, n, d, 8, 3, 4, 1);
        fl[p] = (double)(f.table + f.other);
        share[p] = (double)f.table / fl[p];
    }
    int from = t1_fit_from(share, m, 0.75);
    if (from_out) *from_out = from;
    ck_assert_msg(m - from >= 2, "Table 1's term does not dominate at the end of the sweep");
    return t1_loglog_slope(x, fl, from, m);
}

static double flop_exponent(T1Kind kind, int over_n, int *from_out) {
    return flop_exponent_m(kind, over_n, N_DEFAULT, from_out);
}

START_TEST(test_exponents_within_table1) {
    int from;
    double sa = flop_exponent(T1_SELF_ATTENTION, 1, &from);
    /* Table 1's n^2 d reaches 75% of self-attention's FLOPs at n >= 3 * 8 n d^2 / (4 d + 6 h)
     * ~ 323: the fit starts at n = 384 */
    ck_assert_int_eq((int)sweep_n[from], 384);
    double rn = flop_exponent(T1_RECURRENT, 1, NULL);
    double rd = flop_exponent(T1_RECURRENT, 0, NULL);
    double cd = flop_exponent(T1_CONVOLUTION, 0, NULL);
    ck_assert_msg(fabs(sa - 2) <= 0.25, "self-attention in n: %.3f", sa);
    ck_assert_msg(fabs(rn - 1) <= 0.25, "recurrent in n: %.3f", rn);
    ck_assert_msg(fabs(rd - 2) <= 0.25, "recurrent in d: %.3f", rd);
    ck_assert_msg(fabs(cd - 2) <= 0.25, "convolution in d: %.3f", cd);
    /* the values chapter 10's README quotes from its default run, and from --n-max 1024 */
    ck_assert_msg(fabs(sa - 1.80) < 0.005, "self-attention in n: %.3f, README says 1.80", sa);
    double sa1024 = flop_exponent_m(T1_SELF_ATTENTION, 1, N_TO_1024, &from);
    ck_assert_int_eq((int)sweep_n[from], 384);
    ck_assert_msg(fabs(sa1024 - 1.85) < 0.005, "self-attention in n to 1024: %.3f, README says 1.85", sa1024);
    ck_assert_msg(fabs(rn - 1.00) < 0.005, "recurrent in n: %.3f, README says 1.00", rn);
    ck_assert_msg(fabs(rd - 2.00) < 0.005, "recurrent in d: %.3f, README says 2.00", rd);
    ck_assert_msg(fabs(cd - 2.00) < 0.005, "convolution in d: %.3f, README says 2.00", cd);
}
END_TEST

/* Table 1's terms of self-attention (n^2 (4d + 6h) + hn) against the whole
 * recurrent layer (4 n d^2 + 2 n d) at d = 64, h = 8: equal where
 * n (4d + 6h) + h = 4 d^2 + 2d, n = (16384 + 128 - 8) / 304 = 54.3; on the
 * sweep's points 48 and 64 the log-log interpolation gives 54 too. */
START_TEST(test_flop_crossover) {
    double fa[9], fr[9];
    for (int p = 0; p < 9; p++) {
        int n = (int)sweep_n[p];
        Flops a = run(T1_SELF_ATTENTION, n, 64, 8, 3, 4, 1), r = run(T1_RECURRENT, n, 64, 8, 3, 4, 1);
        fa[p] = (double)a.table;
        fr[p] = (double)(r.table + r.other);
        ck_assert_uint_eq(r.table + r.other, 4ull * n * 64 * 64 + 2ull * n * 64);
    }
    int always;
    double cx = t1_crossover(sweep_n, fa, fr, 9, &always);
    ck_assert_int_eq(always, 0);
    ck_assert_msg(fabs(cx - 54.3) < 1.0, "crossover at n = %.2f", cx);
    ck_assert_int_eq((int)lround(cx), 54);   /* what the chapter prints, and its README quotes */
    /* whole layers: the projections (8 n d^2) alone outweigh the recurrent layer */
    for (int p = 0; p < 9; p++) {
        Flops a = run(T1_SELF_ATTENTION, (int)sweep_n[p], 64, 8, 3, 4, 1);
        fa[p] = (double)(a.table + a.other);
    }
    ck_assert_double_eq(t1_crossover(sweep_n, fa, fr, 9, &always), 0);
    ck_assert_int_eq(always, 1);
    /* never crossing: -1 */
    ck_assert_double_eq(t1_crossover(sweep_n, fr, fa, 9, &always), -1);
    /* --full's n sweep is at d = 512: n = (4 d^2 + 2d - h) / (4d + 6h) = 500.8, which the
     * README gives as the chapter prints it (n = 501, n/d = 0.98); its points up to 512 */
    double ga[N_DEFAULT], gr[N_DEFAULT];
    for (int p = 0; p < N_DEFAULT; p++) {
        int n = (int)sweep_n[p];
        Flops a = run(T1_SELF_ATTENTION, n, 512, 8, 3, 4, 1), r = run(T1_RECURRENT, n, 512, 8, 3, 4, 1);
        ga[p] = (double)a.table;
        gr[p] = (double)(r.table + r.other);
    }
    cx = t1_crossover(sweep_n, ga, gr, N_DEFAULT, &always);
    ck_assert_int_eq(always, 0);
    ck_assert_int_eq((int)lround(cx), 501);
    ck_assert_msg(fabs(cx / 512 - 0.98) < 0.005, "n/d = %.4f", cx / 512);
}
END_TEST

/* Issue 35 item 5: chapter 10 took about 5 s at its defaults; they are now
 * the sweeps above (n to 512) and 3 timed runs a point. Its --help lists
 * each default: they must be the sweeps this file computes the README's
 * exponents from. */
START_TEST(test_defaults_are_these) {
    char bin[1024], *help;
    if (!chapter_binary(bin, sizeof bin, "check_table1", "10_why_self_attention")) return;
    ck_assert_int_eq(sh_captured(&help, NULL, "'%s' --help", bin), 0);
    static const char *const want[][2] = {{"--d N", "[64]"}, {"--n-max N", "[512]"}, {"--n N", "[64]"},
                                          {"--d-max N", "[512]"}, {"--heads N", "[8]"}, {"--k N", "[3]"},
                                          {"--r N", "[4]"}, {"--repeats N", "[3]"}, {"--path-max N", "[1024]"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char flag[32];
        snprintf(flag, sizeof flag, "\n  %s ", want[i][0]);
        const char *line = strstr(help, flag), *end = line ? strchr(line + 1, '\n') : NULL;
        ck_assert_msg(line && end, "--help lacks %s:\n%s", want[i][0], help);
        const char *def = strstr(line, want[i][1]);
        ck_assert_msg(def && def < end, "%s: default is not %s:\n%.*s", want[i][0], want[i][1], (int)(end - line), line);
    }
    free(help);
}
END_TEST

/* Section 3's sentence on self-attention's time against its FLOPs says what
 * its own two exponents say: "fell" when time grew faster than the FLOPs,
 * "rose" when slower. A short run (make smoke's flags). */
START_TEST(test_time_vs_flops_sentence) {
    char bin[1024], dir[256], *out;
    if (!chapter_binary(bin, sizeof bin, "check_table1", "10_why_self_attention")) return;
    fresh_dir(dir, sizeof dir, "check_table1");
    ck_assert_int_eq(sh_captured(&out, NULL, "'%s' --n-max 128 --d-max 64 --path-max 64 --repeats 1 --no-color "
                                 "--out '%s' --section 3", bin, dir), 0);
    const char *p = strstr(out, "Self-attention over n = ");
    ck_assert_msg(p != NULL, "no time-vs-FLOPs sentence:\n%s", out);
    int a, b;
    double t, f, ra, rb;
    char clock[16], verdict[32];
    ck_assert_msg(sscanf(p, "Self-attention over n = %d..%d: %15s time grew as n^%lf, its FLOPs as n^%lf,\n"
                         "  so its FLOP rate %31[a-z]: %lf GFLOP/s at n = %*d, %lf", &a, &b, clock, &t, &f,
                         verdict, &ra, &rb) == 8, "sentence not as expected:\n%s", p);
    ck_assert_str_eq(clock, "CPU");
    ck_assert_int_eq(b, 128);
    if (t > f + 0.005) ck_assert_str_eq(verdict, "fell");
    else if (t < f - 0.005) ck_assert_str_eq(verdict, "rose");
    ck_assert_msg(ra > 0 && rb > 0, "rates %g, %g", ra, rb);
    free(out);
    remove_dir(dir);
}
END_TEST

/* ---- Paths ------------------------------------------------------------------------
 * Hand-derived maximum path lengths for n = 16, k = 3, r = 4.
 *
 * self-attention: 1. One layer: every output reads every input.
 *
 * recurrent: 16. The only edges into h_t are from x_t and h_{t-1}, so the
 *   only path from x_0 to h_15 is x_0 -> h_0 -> h_1 -> ... -> h_15: 1 + 15 =
 *   16 edges; any other pair s <= t needs t - s + 1 <= 16. The 16 * 15 / 2 =
 *   120 pairs with s > t are never connected (the layer reads left to right).
 *
 * contiguous convolution, k = 3: 15. A layer moves a signal by -1, 0 or +1
 *   (taps i-1, i, i+1). From input 0 to output 15 is a move of 15, so 14
 *   layers (at most 14) are too few; 15 layers connect every pair by a path
 *   of +1 (or -1) and 0 steps that never leaves the sequence.
 *
 * dilated convolution, k = 3: 5. Dilations are the powers of 3 below 16,
 *   repeated: layers 1..5 have dilation 1, 3, 9, 1, 3, and each moves a
 *   signal by -dil, 0 or +dil. After 4 layers the largest move is 1+3+9+1 =
 *   14 < 15: input 0 cannot reach output 15. After 5 layers, any move D in
 *   0..15 is a + 3b + 9c + e + 3f with every digit in {0, 1}: (a+e) + 3(b+f)
 *   + 9c with a+e, b+f in {0,1,2} and c in {0,1} gives every D in 0..17.
 *   All steps go the same way, so every intermediate position lies between
 *   the two ends, inside the sequence, where the zero padding cannot cut the
 *   path. Negative D by symmetry. So 5.
 *
 * restricted self-attention, r = 4 (keys |i - j| <= 2): 8. A layer moves at
 *   most 2: 7 layers reach at most 14 < 15; 8 layers connect every pair
 *   (moves of 2 and one 1, all in one direction, inside the sequence).
 */
START_TEST(test_paths_n16_by_hand) {
    long u = -1;
    ck_assert_int_eq(t1_path_length(T1_SELF_ATTENTION, 16, 3, 4, 0, 100, &u), 1);
    ck_assert_int_eq(u, 0);
    ck_assert_int_eq(t1_path_length(T1_RECURRENT, 16, 3, 4, 0, 100, &u), 16);
    ck_assert_int_eq(u, 120);
    ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, 16, 3, 4, 0, 100, &u), 15);
    ck_assert_int_eq(u, 0);
    ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, 16, 3, 4, 1, 100, &u), 5);
    ck_assert_int_eq(u, 0);
    ck_assert_int_eq(t1_path_length(T1_RESTRICTED, 16, 3, 4, 0, 100, &u), 8);
    ck_assert_int_eq(u, 0);
    /* the dilation schedule the derivation uses */
    int want[6] = {1, 3, 9, 1, 3, 9};
    for (int l = 0; l < 6; l++) ck_assert_int_eq(t1_dilation(l, 16, 3), want[l]);
    /* too few layers allowed: the search says so */
    ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, 16, 3, 4, 0, 14, NULL), -1);
    ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, 16, 3, 4, 1, 4, NULL), -1);
}
END_TEST

/* Larger n: contiguous k moves (k-1)/2 per layer, restricted r/2, so the
 * paths are ceil((n-1) / ((k-1)/2)) and ceil((n-1) / (r/2)): O(n/k), O(n/r).
 * Dilated k = 3: L layers move at most (3^L - 1)/2 in the first cycle, so
 * L >= log_3(2n - 1); the search must land between that and 3 log_3 n. */
START_TEST(test_paths_large_n) {
    for (int n = 16; n <= 1024; n *= 4) {
        ck_assert_int_eq(t1_path_length(T1_SELF_ATTENTION, n, 3, 4, 0, 8, NULL), 1);
        ck_assert_int_eq(t1_path_length(T1_RECURRENT, n, 3, 4, 0, 8, NULL), n);
        ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, n, 3, 4, 0, 2 * n, NULL), n - 1);
        ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, n, 5, 4, 0, 2 * n, NULL), (n - 1 + 1) / 2);
        ck_assert_int_eq(t1_path_length(T1_RESTRICTED, n, 3, 4, 0, 2 * n, NULL), (n - 1 + 1) / 2);
        ck_assert_int_eq(t1_path_length(T1_RESTRICTED, n, 3, 16, 0, 2 * n, NULL), (n - 1 + 7) / 8);
        int dl = t1_path_length(T1_CONVOLUTION, n, 3, 4, 1, 2 * n, NULL);
        double lg = log((double)n) / log(3.0);
        ck_assert_msg(dl >= ceil(log(2.0 * n - 1) / log(3.0)) && dl <= 3 * lg, "dilated n=%d: %d", n, dl);
    }
    /* chapter 10's table at n = 1024 */
    ck_assert_int_eq(t1_path_length(T1_CONVOLUTION, 1024, 3, 4, 1, 4096, NULL), 13);
}
END_TEST

/* ---- Connect ---------------------------------------------------------------------- */

START_TEST(test_probe_matches_taps) {
    int n = 16, d = 8, taps[16];
    Rng rng;
    rng_seed(&rng, 11);
    float *x = randn(&rng, (size_t)n * d, 1.0f), *xp = malloc(sizeof(float) * n * d);
    float *y0 = malloc(sizeof(float) * n * d), *y1 = malloc(sizeof(float) * n * d);
    uint8_t dep[16 * 16];
    for (int kd = 0; kd < T1_KINDS; kd++)
        for (int dil = 1; dil <= 3; dil += 2) {
            T1Layer L;
            build(&L, (T1Kind)kd, n, d, 2, 3, 4, dil, 12 + kd);
            t1_probe(&L, dep, x, xp, y0, y1, n);
            for (int i = 0; i < n; i++) {
                int c = t1_taps((T1Kind)kd, i, n, 3, 4, dil, taps, NULL);
                for (int s = 0; s < n; s++) {
                    int want = 0;
                    if (kd == T1_RECURRENT) want = s <= i;   /* through h_{t-1}: every earlier input */
                    else for (int e = 0; e < c; e++) want |= taps[e] == s;
                    ck_assert_msg(dep[i * n + s] == want, "%s dil %d: output %d, input %d: probe %d, taps %d",
                                  t1_kind_name((T1Kind)kd), dil, i, s, dep[i * n + s], want);
                }
            }
            t1_layer_free(&L);
        }
    free(x); free(xp); free(y0); free(y1);
}
END_TEST

START_TEST(test_sequential_ops) {
    int ns[3] = {1, 16, 1024};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(t1_sequential_ops(T1_RECURRENT, ns[i], 3, 4), ns[i]);
        ck_assert_int_eq(t1_sequential_ops(T1_SELF_ATTENTION, ns[i], 3, 4), 1);
        ck_assert_int_eq(t1_sequential_ops(T1_CONVOLUTION, ns[i], 3, 4), 1);
        ck_assert_int_eq(t1_sequential_ops(T1_SEPARABLE, ns[i], 3, 4), 1);
        ck_assert_int_eq(t1_sequential_ops(T1_RESTRICTED, ns[i], 3, 4), 1);
    }
}
END_TEST

/* ---- Limits ------------------------------------------------------------------------ */

START_TEST(test_length_one) {
    for (int kd = 0; kd < T1_KINDS; kd++) {
        T1Layer L;
        build(&L, (T1Kind)kd, 1, 8, 2, 3, 4, 1, 20);
        float x[8] = {1, -1, 0.5f, 2, 0, 0, 1, 1}, y[8];
        Flops f = {0, 0};
        t1_forward(&L, y, x, 1, &f);
        for (int j = 0; j < 8; j++) ck_assert_msg(isfinite(y[j]), "%s: y[%d] = %g", t1_kind_name((T1Kind)kd), j, y[j]);
        ck_assert_uint_gt(f.table + f.other, 0);
        t1_layer_free(&L);
        ck_assert_int_eq(t1_path_length((T1Kind)kd, 1, 3, 4, 0, 4, NULL), 1);
    }
    t1_layer_free(NULL);
}
END_TEST

START_TEST(test_fit_helpers) {
    double x[6] = {1, 2, 4, 8, 16, 32}, y[6], share[6] = {0.1, 0.5, 0.8, 0.7, 0.9, 0.95};
    for (int i = 0; i < 6; i++) y[i] = 3 * pow(x[i], 1.5);
    ck_assert_double_eq_tol(t1_loglog_slope(x, y, 0, 6), 1.5, 1e-12);
    ck_assert_double_eq_tol(t1_loglog_slope(x, y, 3, 6), 1.5, 1e-12);
    ck_assert(isnan(t1_loglog_slope(x, y, 2, 3)));
    ck_assert_int_eq(t1_fit_from(share, 6, 0.75), 4);   /* 0.7 at index 3 breaks the run */
    double all[6] = {1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(t1_fit_from(all, 6, 0.75), 3);     /* never below the upper half */
    ck_assert_int_eq(t1_fit_from(share, 6, 0.99), 6);   /* the last point fails: empty */
    ck_assert_int_eq(t1_dilation(5, 2, 3), 1);          /* n = 2: only dilation 1 is below n */
}
END_TEST

Suite *table1_suite(void) {
    Suite *s = suite_create("table1");
    suite_case(s, "Core", test_self_attention_is_the_library,
               test_restricted_is_band_masked_attention, test_plain_layers_against_double);
    suite_case(s, "Flops", test_flops_self_attention, test_flops_recurrent, test_flops_convolution,
               test_flops_separable, test_flops_restricted);
    tcase_set_timeout(suite_case(s, "Exponents", test_exponents_within_table1, test_flop_crossover,
                                 test_defaults_are_these, test_time_vs_flops_sentence),
                      120);
    tcase_set_timeout(suite_case(s, "Paths", test_paths_n16_by_hand, test_paths_large_n), 60);
    suite_case(s, "Connect", test_probe_matches_taps, test_sequential_ops);
    suite_case(s, "Limits", test_length_one, test_fit_helpers);
    return s;
}
