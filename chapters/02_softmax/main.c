/* 02_softmax - softmax: computed stably, masked safely, and kept out of
 * saturation by Eq. (1)'s 1/sqrt(d_k).
 *
 * Paper: Eq. (1), softmax(Q K^T / sqrt(d_k)) V; Section 3.2.1, which says
 * that for large d_k the dot products grow large, "pushing the softmax
 * function into regions where it has extremely small gradients"; and
 * Section 3.2.3, masking with -inf in the decoder.
 *
 * What it prints:
 *   1. why subtract the max: the textbook formula on [1000, 1001, 1002] gives
 *      NaN (exp(1000) = inf, inf/inf = NaN); the stable one gives
 *      [0.090, 0.245, 0.665];
 *   2. softmax([10, 2, 1]) with its true values;
 *   3. masking: -inf scores get weight exactly 0, a fully masked row gives
 *      zeros, not NaN (terminal heatmap + PNG);
 *   4. saturation: over growing d_k, softmax of unscaled vs scaled random
 *      scores - largest weight, entropy, and the size of softmax's Jacobian
 *      (the gradient signal) - as a table and plots.
 *
 * Run:  build/02_softmax [--seed N] [--keys N] [--samples N] [--max-dk N] [--out DIR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "02_softmax"
#define MAX_DRAWS 2e9 /* random numbers: about ten seconds of work */

/* One row's statistics. y (n) is a softmax output; J_row and dout (n) are
 * scratch. Returns the Frobenius norm of the Jacobian J = diag(y) - y y^T,
 * built one row at a time with the library's softmax_backward: with
 * dout = e_j (one-hot), softmax_backward adds J^T e_j, which is row j of the
 * symmetric J. Closed form, for checking: ||J||_F^2 = sum y^2 - 2 sum y^3
 * + (sum y^2)^2. */
static double jacobian_norm(const float *y, float *J_row, float *dout, int n) {
    double sq = 0;
    for (int j = 0; j < n; j++) {
        memset(dout, 0, sizeof(float) * n);
        memset(J_row, 0, sizeof(float) * n);
        dout[j] = 1.0f;
        softmax_backward(J_row, dout, y, 1, n);
        for (int i = 0; i < n; i++) sq += (double)J_row[i] * J_row[i];
    }
    return sqrt(sq);
}

/* Entropy in nats, -sum y log y (0 log 0 = 0): ln(n) for uniform weights,
 * 0 when one key takes everything. */
static double entropy(const float *y, int n) {
    double h = 0;
    for (int i = 0; i < n; i++)
        if (y[i] > 0) h -= (double)y[i] * log((double)y[i]);
    return h;
}

static double max_of(const float *y, int n) {
    float m = y[0];
    for (int i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
    return m;
}

typedef struct {
    double max_w, ent, jac;      /* means over samples */
} RowStats;

/* Saturation experiment for one d_k: `samples` times draw a query q (d_k)
 * and n keys K (n, d_k) with N(0,1) entries; scores s_j = q . k_j; softmax of
 * s (raw) and of s / sqrt(d_k) (Eq. 1). Means land in raw and scaled.
 * q (d_k), K (n*d_k), s, y, t1, t2 (n) are scratch buffers. */
static void saturation(RowStats *raw, RowStats *scaled, Rng *rng, int d_k, int n, int samples,
                       float *q, float *K, float *s, float *y, float *t1, float *t2) {
    memset(raw, 0, sizeof *raw);
    memset(scaled, 0, sizeof *scaled);
    float c = 1.0f / sqrtf((float)d_k);
    for (int it = 0; it < samples; it++) {
        rng_fill_normal(rng, q, (size_t)d_k, 0.0f, 1.0f);
        rng_fill_normal(rng, K, (size_t)n * d_k, 0.0f, 1.0f);
        for (int j = 0; j < n; j++) s[j] = dot(q, K + (long)j * d_k, d_k);
        for (int pass = 0; pass < 2; pass++) {
            RowStats *st = pass ? scaled : raw;
            if (pass) scale_forward(s, s, c, (size_t)n);
            softmax_forward(y, s, 1, n);
            st->max_w += max_of(y, n);
            st->ent += entropy(y, n);
            st->jac += jacobian_norm(y, t1, t2, n);
        }
    }
    raw->max_w /= samples; raw->ent /= samples; raw->jac /= samples;
    scaled->max_w /= samples; scaled->ent /= samples; scaled->jac /= samples;
}

/* ---- 1. why subtract the max ----------------------------------------- */

static void section_stable(void) {
    show_section("1. Softmax, and why the library subtracts the max (Eq. 1)");
    printf("softmax(x)_i = exp(x_i) / sum_j exp(x_j): positive weights that sum to 1.\n"
           "float32 exp() overflows to inf above x = 88.7, so the textbook formula\n"
           "breaks on large scores:\n");
    float big[3] = {1000, 1001, 1002}, y3[3];
    show_vector("  x", big, 3);
    printf("  exp(1000) in float32 = %g\n", (double)expf(big[0]));
    softmax_naive(y3, big, 1, 3);
    show_vector("  naive  exp(x)/sum exp(x)", y3, 3);
    printf("  ... inf / inf = NaN. But softmax(x) = softmax(x - c) for any c (the\n"
           "  factor exp(-c) cancels), and c = max(x) makes every exponent <= 0:\n");
    float shifted[3], ex[3];
    for (int i = 0; i < 3; i++) { shifted[i] = big[i] - 1002; ex[i] = expf(shifted[i]); }
    show_vector("  x - max", shifted, 3);
    show_vector("  exp(x - max)", ex, 3);
    printf("  sum = %.4f\n", (double)(ex[0] + ex[1] + ex[2]));
    softmax_forward(y3, big, 1, 3);
    show_vector("  stable softmax", y3, 3);
    printf("  to 8 digits: [%.8f, %.8f, %.8f]\n", (double)y3[0], (double)y3[1], (double)y3[2]);
}

/* ---- 2. softmax([10, 2, 1]) ------------------------------------------ */

static void section_winner(void) {
    show_section("2. A clear winner: softmax([10, 2, 1])");
    float s10[3] = {10, 2, 1}, y10[3];
    softmax_forward(y10, s10, 1, 3);
    printf("  softmax([10, 2, 1]) = [%.5f, %.5f, %.5f]\n", (double)y10[0], (double)y10[1], (double)y10[2]);
    printf("                      = [%.4e, %.4e, %.4e]\n", (double)y10[0], (double)y10[1], (double)y10[2]);
    printf("  Check by hand: the weights are 1 : e^-8 : e^-9 = 1 : %.3e : %.3e.\n",
           exp(-8.0), exp(-9.0));
    printf("  A guess such as [0.99, 0.007, 0.003] makes the last two %.0fx and %.0fx\n"
           "  too big: a gap of 8 in score is a factor e^8 = %.0f in weight. The top\n"
           "  score takes %.2f%% of the attention.\n", 0.007 / (double)y10[1], 0.003 / (double)y10[2], exp(8.0),
           100.0 * (double)y10[0]);
}

/* ---- 3. masking -------------------------------------------------------- */

static void section_masking(const char *out) {
    show_section("3. Masking with -inf (Section 3.2.3)");
    printf("A masked score is set to -inf before softmax: exp(-inf - max) = 0, so\n"
           "that key gets weight exactly 0 and the others share the rest.\n");
    enum { R = 4, C = 4 };
    const char *keys[C] = {"I", "like", "tea", "<pad>"};
    const char *rows[R] = {"I", "like", "tea", "<none>"};
    /* causal mask (a query sees itself and earlier keys), <pad> masked for
     * everyone, and a last query allowed to see nothing at all */
    float scores[R * C] = {
        2.0f,      -INFINITY, -INFINITY, -INFINITY,
        1.0f,      3.0f,      -INFINITY, -INFINITY,
        0.5f,      2.0f,      1.0f,      -INFINITY,
        -INFINITY, -INFINITY, -INFINITY, -INFINITY,
    };
    float w[R * C], wn[R * C];
    softmax_forward(w, scores, R, C);
    softmax_naive(wn, scores, R, C);
    show_matrix("scores (-inf = masked)", scores, R, C, rows, keys);
    show_heatmap("weights = softmax(scores), row by row", w, R, C, rows, keys);
    printf("The last row is masked everywhere: nothing to attend to. The textbook\n"
           "formula gives 0/0:\n");
    show_vector("  naive, last row", wn + 3 * C, C);
    show_vector("  library, last row", w + 3 * C, C);
    printf("The library returns zeros for such a row (its output is then the zero\n"
           "vector and its gradient is zero) because one NaN would spread through\n"
           "every later matrix multiply and ruin the whole batch.\n");
    plot_heatmap(out, "masked_weights", "softmax of masked scores (last row: fully masked -> zeros)",
                 w, R, C, rows, keys, "key", "query");
}

/* ---- 4. saturation ----------------------------------------------------- */

/* For d_k = 1, 2, 4, .. (ndk sizes up to max_dk): softmax of samples rows of
 * n random scores, raw and scaled by 1/sqrt(d_k); largest weight, entropy
 * and the Jacobian's norm, printed and plotted. */
static void section_saturation(Rng *rng, int n, int samples, int ndk, int max_dk, uint64_t seed,
                               const char *out) {
    show_section("4. Saturation: why Eq. (1) divides by sqrt(d_k) (Section 3.2.1)");
    printf("For each d_k: %d rows, each a query against %d keys, all entries\n"
           "N(0,1) (seed %llu). Scores q.k have variance d_k (chapter 01). Softmax of\n"
           "the raw scores vs the scaled ones (q.k / sqrt(d_k)). Means over rows:\n"
           "  max w  - the largest weight (1/%d = uniform, 1 = one-hot)\n"
           "  H      - entropy in nats (ln %d = %.2f uniform, 0 one-hot)\n"
           "  |J|    - Frobenius norm of softmax's Jacobian diag(y) - y y^T: how much\n"
           "           gradient flows back through softmax to the scores\n\n",
           samples, n, (unsigned long long)seed, n, n, log((double)n));
    float *q = malloc(sizeof(float) * max_dk);
    float *K = malloc(sizeof(float) * (size_t)n * max_dk);
    float *s = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    float *t1 = malloc(sizeof(float) * n), *t2 = malloc(sizeof(float) * n);
    float *dks = malloc(sizeof(float) * ndk);
    float *ser[6];
    for (int i = 0; i < 6; i++) ser[i] = malloc(sizeof(float) * ndk);
    if (!q || !K || !s || !y || !t1 || !t2 || !dks) cli_fail(PROG, "out of memory");
    for (int i = 0; i < 6; i++) if (!ser[i]) cli_fail(PROG, "out of memory");

    printf("  %6s | %7s %7s | %6s %6s | %8s %8s\n", "", "max w", "", "H", "", "|J|", "");
    printf("  %6s | %7s %7s | %6s %6s | %8s %8s\n", "d_k", "raw", "scaled", "raw", "scaled", "raw", "scaled");
    for (int i = 0, dk = 1; i < ndk; i++, dk *= 2) {
        RowStats r, c;
        saturation(&r, &c, rng, dk, n, samples, q, K, s, y, t1, t2);
        dks[i] = (float)dk;
        ser[0][i] = (float)r.max_w; ser[1][i] = (float)c.max_w;
        ser[2][i] = (float)r.ent;   ser[3][i] = (float)c.ent;
        ser[4][i] = (float)r.jac;   ser[5][i] = (float)c.jac;
        printf("  %6d | %7.3f %7.3f | %6.3f %6.3f | %8.2e %8.2e\n",
               dk, r.max_w, c.max_w, r.ent, c.ent, r.jac, c.jac);
    }
    printf("\nWhat to see: without scaling, as d_k grows the largest weight goes to 1,\n"
           "the entropy to 0, and |J| - the gradient signal - shrinks toward 0: the\n"
           "softmax is saturated and learning through it stalls. With 1/sqrt(d_k)\n"
           "every column stays the same for every d_k (d_k = 64 in the base model).\n");

    const char *nm_w[2] = {"unscaled: softmax(q.k)", "scaled: softmax(q.k / sqrt(d_k))  (Eq. 1)"};
    const float *p_w[2] = {ser[0], ser[1]}, *p_h[2] = {ser[2], ser[3]}, *p_j[2] = {ser[4], ser[5]};
    plot_lines(out, "max_weight", "Largest softmax weight vs d_k", "d_k", "mean largest weight",
               dks, ndk, p_w, nm_w, 2, 1, 0);
    plot_lines(out, "entropy", "Entropy of the softmax weights vs d_k", "d_k", "mean entropy (nats)",
               dks, ndk, p_h, nm_w, 2, 1, 0);
    plot_lines(out, "jacobian_norm", "Gradient signal: |diag(y) - y y^T|_F vs d_k", "d_k",
               "mean Frobenius norm of the Jacobian", dks, ndk, p_j, nm_w, 2, 1, 1);

    free(q); free(K); free(s); free(y); free(t1); free(t2); free(dks);
    for (int i = 0; i < 6; i++) free(ser[i]);
}

int main(int argc, char **argv) {
    uint64_t seed = 42;
    int n = 16, samples = 300, max_dk = 1024;
    const char *out = "out/02_softmax";
    CliOption opts[] = {
        {"--seed",    CLI_U64,    &seed,    "random seed", 0, 0},
        {"--keys",    CLI_INT,    &n,       "keys per softmax row in the saturation experiment", 2, 4096},
        {"--samples", CLI_INT,    &samples, "random rows per d_k in the saturation experiment", 1, 10000000},
        {"--max-dk",  CLI_INT,    &max_dk,  "largest d_k in the experiment (powers of 2 up to it)", 1, 1 << 20},
        CLI_OPT_OUT(out),
    };
    cli_parse(argc, argv, PROG, "softmax: stable, masked, and why Eq. (1) scales the scores",
              opts, CLI_COUNT(opts));
    show_lecture_sections(4);   /* its banners: "1." .. "4." */
    cli_check_floats(PROG, "--keys x --max-dk", 2, (size_t)n, (size_t)max_dk);
    int ndk = 0;
    double draws = 0;
    for (long dk = 1; dk <= max_dk; dk *= 2, ndk++) draws += (double)(n + 1) * dk * samples;
    if (draws > MAX_DRAWS)
        cli_fail(PROG, "--samples %d, --keys %d, --max-dk %d need %.2g random numbers (minutes of work); "
                 "lower one of them", samples, n, max_dk, draws);
    if (plot_mkdir(out) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", out);
    Rng rng;
    rng_seed(&rng, seed);

    section_stable();                                               /* 1. subtract the max       */
    section_winner();                                               /* 2. softmax([10, 2, 1])    */
    section_masking(out);                                           /* 3. -inf, fully masked row */
    section_saturation(&rng, n, samples, ndk, max_dk, seed, out);   /* 4. why / sqrt(d_k)        */
    return 0;
}
