/* 05_positional_encoding - where a token is, written into the vector itself.
 *
 * Self-attention compares every token with every other token, and nothing in
 * Eq. (1) says which one came first: shuffle the input and the output rows
 * are shuffled the same way. Section 3.5 fixes that by adding a positional
 * encoding to each embedding:
 *
 *     PE(pos, 2i)   = sin(pos / 10000^(2i/d_model))
 *     PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))
 *
 * This program
 *   1. builds the PE matrix (positions x dimensions) and shows it as a
 *      terminal heatmap and PNGs, with a few dimensions as waves;
 *   2. checks the paper's reason for sinusoids: "for any fixed offset k,
 *      PE(pos+k) can be represented as a linear function of PE(pos)" - the
 *      function is a rotation by k*w_i in each (sin, cos) pair;
 *   3. shows PE(pos) . PE(pos+k) depends on k alone;
 *   4. runs self-attention (Sec. 3.2.2) on "the cat eats the fish" and a
 *      shuffled copy: without PE the output rows are merely shuffled (the
 *      model cannot tell "cat eats fish" from "fish eats cat"); with PE they
 *      change;
 *   5. goes past a pretend training length: a learned position table has no
 *      row there, the formula keeps its structure.
 *
 * Part 4's self-attention runs on the backend --device picks (backend.h:
 * the CPU's functions, or the CUDA kernels); every run is checked against
 * the CPU's mha_forward, the reference, and the program prints
 * "cuda vs CPU: max |diff| = ..." for outputs and weights; on the CPU (the
 * default, or no GPU found) there is nothing to compare, and it says so.
 *
 * Run:  make && ./build/05_positional_encoding [--d-model 32] [--max-len 128] [--device cuda]
 * Output: tables and heatmaps on the terminal; PNGs (with gnuplot) in --out.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/linear.h"
#include "layers/multihead.h"
#include "io/cli.h"
#include "model/device.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "core/tensor.h"

#define PROG "05_positional_encoding"
#define N_TOKENS 5
#define PLOT_MAX_POS 512     /* rows of the PE heatmap PNG (a .dat beyond this is huge) */
#define ROT_MAX_POS 1024     /* positions checked in part 2 (a matmul of d_model^2 per row) */

/* ---- small helpers ------------------------------------------------------- */

static float *xalloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) cli_fail(PROG, "out of memory allocating %zu floats; use smaller sizes", n);
    return p;
}

static double dot_d(const float *a, const float *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* w_i = 1 / 10000^(2i/d_model), the angular frequency of pair i */
static double omega(int i, int d_model) {
    return pow(10000.0, -2.0 * i / d_model);
}

/* ---- 1. the PE matrix ---------------------------------------------------- */

static void show_pe(const float *pe, int max_len, int d_model, int seq, const char *out) {
    show_section("1. The positional encoding matrix (Sec. 3.5)");
    Tensor t = tensor_wrap((float *)pe, "PE", "position d_model", max_len, d_model);
    show_shape(&t, "one row per position, added to the token there");
    printf("  PE(pos, 2i) = sin(pos w_i), PE(pos, 2i+1) = cos(pos w_i), w_i = 10000^(-2i/d)\n");
    printf("  e.g. PE(1, 0) = sin(1) = %.4f and PE(1, 1) = cos(1) = %.4f\n", pe[d_model], pe[d_model + 1]);

    /* The wavelengths 2*pi/w_i form a geometric progression from 2*pi to
     * 10000*2*pi: fast columns tell neighbours apart, slow ones tell the
     * beginning of a long text from its end (Sec. 3.5). */
    printf("\n  pair i  columns   w_i          wavelength 2*pi/w_i (positions)\n");
    int pairs = d_model / 2;
    int show_i[5] = {0, 1, pairs / 4, pairs / 2, pairs - 1};
    for (int j = 0; j < 5; j++) {
        int i = show_i[j];
        if (j > 0 && i <= show_i[j - 1]) continue;
        printf("  %6d  %3d,%-4d  %-11.6g  %.1f\n", i, 2 * i, 2 * i + 1, omega(i, d_model),
               2.0 * M_PI / omega(i, d_model));
    }

    char title[96];
    snprintf(title, sizeof title, "PE for positions 0..%d (rows) x dimensions (columns):", seq - 1);
    printf("\n");
    char **rl = malloc(sizeof(char *) * seq);
    for (int p = 0; p < seq; p++) {
        rl[p] = malloc(16);
        snprintf(rl[p], 16, "pos %d", p);
    }
    show_heatmap(title, pe, seq, d_model, (const char *const *)rl, NULL);
    printf("  Left columns flip sign every few positions; right columns barely move.\n");
    for (int p = 0; p < seq; p++) free(rl[p]);
    free(rl);

    int rows = max_len < PLOT_MAX_POS ? max_len : PLOT_MAX_POS;
    plot_heatmap(out, "pe_heatmap", "Sinusoidal positional encoding (Sec. 3.5)", pe, rows, d_model,
                 NULL, NULL, "dimension", "position");
    if (rows < max_len) printf("  (pe_heatmap.png shows positions 0..%d of %d; pe_dims.png has them all)\n", rows - 1, max_len);

    /* a few columns as waves across positions: a sin/cos pair, then two
     * slower sines. Column c has wavelength 2*pi*10000^(c/d_model), so taking
     * c in proportion to d_model gives the same curves for any d_model. */
    int c0 = 2 * (d_model / 16);
    int cols[4] = {c0, c0 + 1, 2 * (d_model / 8), 2 * (3 * d_model / 16)};
    float *xs = xalloc((size_t)max_len), *series[4];
    char names[4][48];
    const char *name_ptr[4];
    int ns = 0;
    for (int p = 0; p < max_len; p++) xs[p] = (float)p;
    for (int j = 0; j < 4; j++) {
        int c = cols[j], dup = 0;
        for (int k = 0; k < ns; k++) dup |= c == cols[k];
        if (c >= d_model || dup) continue;
        cols[ns] = c;
        series[ns] = xalloc((size_t)max_len);
        for (int p = 0; p < max_len; p++) series[ns][p] = pe[(long)p * d_model + c];
        snprintf(names[ns], sizeof names[ns], "dim %d (%s, wavelength %.1f)", c, c % 2 ? "cos" : "sin",
                 2.0 * M_PI / omega(c / 2, d_model));
        name_ptr[ns] = names[ns];
        ns++;
    }
    plot_lines(out, "pe_dims", "PE columns across positions: each is a sinusoid of its own wavelength",
               "position", "PE value", xs, max_len, (const float *const *)series, name_ptr, ns, 0, 0);
    for (int j = 0; j < ns; j++) free(series[j]);
    free(xs);
}

/* ---- 2. PE(pos + k) is a linear function of PE(pos) ----------------------- */

/* M (d_model, d_model) with PE(pos + k) = M PE(pos) for column vectors.
 * Angle addition, for each pair (sin, cos) at frequency w and a = pos*w, b = k*w:
 *     sin(a + b) =  cos(b) sin(a) + sin(b) cos(a)
 *     cos(a + b) = -sin(b) sin(a) + cos(b) cos(a)
 * so M is block diagonal with 2x2 rotations [[cos kw, sin kw], [-sin kw, cos kw]].
 * Nothing in M depends on pos: that is the paper's claim. */
static void build_shift(float *M, int k, int d_model) {
    memset(M, 0, sizeof(float) * d_model * d_model);
    for (int i = 0; i < d_model / 2; i++) {
        double b = k * omega(i, d_model);
        int r = 2 * i;
        M[(long)r * d_model + r] = (float)cos(b);
        M[(long)r * d_model + r + 1] = (float)sin(b);
        M[(long)(r + 1) * d_model + r] = (float)-sin(b);
        M[(long)(r + 1) * d_model + r + 1] = (float)cos(b);
    }
}

/* max over pos in [from, to) of |PE(pos + k) - M_k PE(pos)|. The rows are
 * row vectors, so M PE(pos) is computed as PE(pos) M^T, all rows at once. */
static double shift_error(const float *pe, const float *M, int from, int to, int k, int d_model,
                          float *scratch) {
    int n = to - from;
    if (n <= 0) return 0.0;
    float *Mt = scratch, *pred = scratch + (long)d_model * d_model;
    for (int r = 0; r < d_model; r++)
        for (int c = 0; c < d_model; c++) Mt[(long)c * d_model + r] = M[(long)r * d_model + c];
    matmul_forward(pred, pe + (long)from * d_model, Mt, n, d_model, d_model);
    Diff d = diff_arrays(pred, pe + (long)(from + k) * d_model, (size_t)n * d_model);
    return d.max_abs;
}

static void show_rotation(const float *pe, int max_len, int d_model) {
    show_section("2. PE(pos+k) is a linear function of PE(pos) (Sec. 3.5)");
    printf("  The paper: \"for any fixed offset k, PE(pos+k) can be represented as a\n"
           "  linear function of PE(pos)\". The function is a matrix M_k, block diagonal,\n"
           "  one 2x2 rotation by the angle k*w_i for each (sin, cos) pair:\n");
    float *M = xalloc((size_t)d_model * d_model);
    float *scratch = xalloc((size_t)d_model * d_model + (size_t)ROT_MAX_POS * d_model);
    build_shift(M, 1, d_model);
    Tensor tm = tensor_wrap(M, "M_1", "d_model d_model", d_model, d_model);
    show_shape(&tm, "PE(pos+1) = M_1 PE(pos), one M_1 for every pos");
    int sub = d_model < 4 ? d_model : 4;
    float corner[16];
    for (int r = 0; r < sub; r++)
        for (int c = 0; c < sub; c++) corner[r * sub + c] = M[(long)r * d_model + c];
    show_matrix("  top-left corner of M_1 (the first two 2x2 rotation blocks):", corner, sub, sub,
                NULL, NULL);
    printf("  block i = 0: [[cos 1, sin 1], [-sin 1, cos 1]]\n"
           "             = [[%.4f, %.4f], [%.4f, %.4f]]\n",
           cos(1.0), sin(1.0), -sin(1.0), cos(1.0));

    int npos = max_len < ROT_MAX_POS ? max_len : ROT_MAX_POS;
    printf("\n  k      max over pos of |PE(pos+k) - M_k PE(pos)|   (pos = 0..%d-k)\n", npos - 1);
    int ks[5] = {1, 2, 5, 10, 50};
    for (int j = 0; j < 5; j++) {
        int k = ks[j];
        if (k >= npos) continue;
        build_shift(M, k, d_model);
        printf("  %-5d  %.2e\n", k, shift_error(pe, M, 0, npos - k, k, d_model, scratch));
    }
    printf("  Errors of ~1e-7 are float32 rounding of the stored PE: the identity is exact.\n");
    free(M);
    free(scratch);
}

/* ---- 3. PE(pos) . PE(pos+k) depends only on k ------------------------------ */

static void show_dot_products(const float *pe, int max_len, int d_model, int seq, const char *out) {
    show_section("3. PE(pos) . PE(pos+k) depends only on the offset k");
    /* sin(a) sin(b) + cos(a) cos(b) = cos(a - b): each pair contributes
     * cos(k*w_i), whatever pos is. */
    printf("  Each (sin, cos) pair contributes sin(a)sin(b) + cos(a)cos(b) = cos(k*w_i),\n"
           "  so the sum is  sum_i cos(k*w_i)  for every pos.  |PE(pos)|^2 = d_model/2 = %d.\n\n",
           d_model / 2);
    int ks[6] = {0, 1, 2, 4, 8, 16};
    int pos_list[6] = {0, 1, 2, seq / 2, seq - 1, max_len / 2};
    printf("  %-14s", "pos \\ k");
    for (int j = 0; j < 6; j++) printf(" %8d", ks[j]);
    printf("\n");
    for (int r = 0; r < 6; r++) {
        int pos = pos_list[r];
        if (r > 0 && pos <= pos_list[r - 1]) continue;
        printf("  %-14d", pos);
        for (int j = 0; j < 6; j++) {
            if (pos + ks[j] < max_len)
                printf(" %8.4f", dot_d(pe + (long)pos * d_model, pe + (long)(pos + ks[j]) * d_model, d_model));
            else
                printf(" %8s", "-");
        }
        printf("\n");
    }
    printf("  %-14s", "sum cos(k w_i)");
    for (int j = 0; j < 6; j++) {
        double s = 0.0;
        for (int i = 0; i < d_model / 2; i++) s += cos(ks[j] * omega(i, d_model));
        printf(" %8.4f", s);
    }
    printf("\n  Every column is constant down the rows: similarity sees distance, not place.\n");

    /* PE PE^T: constant along every diagonal (a Toeplitz matrix) */
    int P = max_len < 256 ? max_len : 256;
    float *G = xalloc((size_t)P * P);
    for (int a = 0; a < P; a++)
        for (int b = 0; b < P; b++)
            G[(long)a * P + b] = (float)dot_d(pe + (long)a * d_model, pe + (long)b * d_model, d_model);
    plot_heatmap(out, "pe_dot", "PE(a) . PE(b): constant along every diagonal (depends on a - b)",
                 G, P, P, NULL, NULL, "position b", "position a");
    free(G);
}

/* ---- 4. the permutation experiment ----------------------------------------- */

typedef struct {
    int d_model, h, d_k;
    MhaParams p;       /* w_q, w_k, w_v (d_model, d_model), w_o (d_model, d_model) */
    float *params;     /* the one allocation the four point into */
    float *acts_buf;   /* mha_acts_size() floats: the CPU reference's */
    MhaActs acts;
    float *ref_out;    /* (1,T,d_model) the CPU reference's output          */
    /* the same layer on the chosen backend, in its memory */
    const Backend *be;
    MhaParams dp;      /* the weights as the backend sees them              */
    float *dparams, *dacts_buf, *dx, *dout;
    MhaActs dacts;
    float *weights;    /* (1,h,T,T) the backend's weights, on the host       */
    int runs;          /* how many runs were compared                        */
    double out_diff, w_diff;   /* worst |backend - CPU| over those runs     */
} SelfAttn;

/* n bytes of the backend's memory, or exit 1 saying so */
static void *be_alloc(const Backend *be, size_t bytes) {
    void *p = be->alloc(bytes);
    if (!p) cli_fail(PROG, "out of %s memory", be->name);
    return p;
}

static void selfattn_build(SelfAttn *s, int d_model, int h, const Backend *be, Rng *rng) {
    memset(s, 0, sizeof *s);
    s->be = be;
    s->d_model = d_model;
    s->h = h;
    s->d_k = d_model / h;
    size_t n = (size_t)d_model * d_model;
    s->params = xalloc(4 * n);
    /* std 1/sqrt(d_model) keeps projections the size of their inputs */
    rng_fill_normal(rng, s->params, 4 * n, 0.0f, 1.0f / sqrtf((float)d_model));
    s->p.w_q = s->params;
    s->p.w_k = s->params + n;
    s->p.w_v = s->params + 2 * n;
    s->p.w_o = s->params + 3 * n;
    size_t na = mha_acts_size(1, N_TOKENS, N_TOKENS, h, s->d_k, s->d_k), nx = (size_t)N_TOKENS * d_model;
    s->acts_buf = xalloc(na);
    mha_acts_layout(&s->acts, s->acts_buf, 1, N_TOKENS, N_TOKENS, h, s->d_k, s->d_k);
    s->ref_out = xalloc(nx);
    s->weights = xalloc((size_t)h * N_TOKENS * N_TOKENS);
    /* the backend's copies: the weights shared (on the CPU: the same memory) */
    if (!(s->dparams = be->share(s->params, 4 * n * sizeof(float)))) cli_fail(PROG, "out of %s memory", be->name);
    s->dp = (MhaParams){s->dparams, s->dparams + n, s->dparams + 2 * n, s->dparams + 3 * n};
    s->dacts_buf = be_alloc(be, na * sizeof(float));
    mha_acts_layout(&s->dacts, s->dacts_buf, 1, N_TOKENS, N_TOKENS, h, s->d_k, s->d_k);
    s->dx = be_alloc(be, nx * sizeof(float));
    s->dout = be_alloc(be, nx * sizeof(float));
}

static void selfattn_free(SelfAttn *s) {
    s->be->unshare(s->dparams, s->params);
    s->be->free(s->dacts_buf), s->be->free(s->dx), s->be->free(s->dout);
    free(s->params);
    free(s->acts_buf);
    free(s->ref_out);
    free(s->weights);
}

/* out (1,T,d_model) = MultiHead(x, x, x) with no mask: pure self-attention,
 * on the backend (upload x, be->mha_forward, download out and the weights
 * into s->weights); then the CPU's mha_forward on the same x, the
 * reference, and the worst difference so far is kept. */
static void selfattn_run(SelfAttn *s, float *out, const float *x) {
    const Backend *be = s->be;
    size_t n_out = (size_t)N_TOKENS * s->d_model, n_w = (size_t)s->h * N_TOKENS * N_TOKENS;
    be->upload(s->dx, x, n_out * sizeof(float));
    be->mha_forward(s->dout, &s->dacts, &s->dp, s->dx, s->dx, NULL, 1, N_TOKENS, N_TOKENS, s->d_model, s->h,
                    s->d_k, s->d_k);
    be->download(out, s->dout, n_out * sizeof(float));
    be->download(s->weights, s->dacts.weights, n_w * sizeof(float));
    mha_forward(s->ref_out, &s->acts, &s->p, x, x, NULL, 1, N_TOKENS, N_TOKENS, s->d_model, s->h, s->d_k, s->d_k);
    Diff d_out = diff_arrays(out, s->ref_out, n_out), d_w = diff_arrays(s->weights, s->acts.weights, n_w);
    if (d_out.max_abs > s->out_diff) s->out_diff = d_out.max_abs;   /* NaN counts as inf */
    if (d_w.max_abs > s->w_diff) s->w_diff = d_w.max_abs;
    s->runs++;
}

/* max over rows i of |out_perm[i] - out[perm[i]]|: 0 when attention only
 * carried the rows along with the shuffle */
static double perm_diff(const float *out, const float *out_perm, const int *perm, int d_model) {
    double m = 0.0;
    for (int i = 0; i < N_TOKENS; i++) {
        Diff d = diff_arrays(out_perm + (long)i * d_model, out + (long)perm[i] * d_model, d_model);
        if (d.max_abs > m) m = d.max_abs;
    }
    return m;
}

static void show_permutation(const float *pe, int d_model, int h, uint64_t seed, const Backend *be, int gpu_asked,
                             const char *out) {
    show_section("4. Without PE, self-attention cannot see word order (Sec. 3.5)");
    const char *vocab[4] = {"the", "cat", "eats", "fish"};
    int ids[N_TOKENS] = {0, 1, 2, 0, 3};               /* the cat eats the fish */
    Rng rng;
    rng_seed(&rng, seed);

    /* a random embedding table (Sec. 3.4) and random attention weights: no
     * training is needed to see what order does or does not change */
    float *table = xalloc((size_t)4 * d_model);
    rng_fill_normal(&rng, table, (size_t)4 * d_model, 0.0f, 1.0f / sqrtf((float)d_model));
    SelfAttn sa;
    selfattn_build(&sa, d_model, h, be, &rng);
    float *zero_pe = xalloc((size_t)N_TOKENS * d_model);

    /* two reorderings: the note's "cat eats fish" -> "fish eats cat" (swap
     * positions 1 and 4), and a random shuffle drawn from --seed */
    int swap[N_TOKENS] = {0, 4, 2, 3, 1};
    int shuf[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) shuf[i] = i;
    for (int i = N_TOKENS - 1; i > 0; i--) {
        int j = rng_int(&rng, i + 1), t = shuf[i];
        shuf[i] = shuf[j];
        shuf[j] = t;
    }
    int identity = 1;
    for (int i = 0; i < N_TOKENS; i++) identity &= shuf[i] == i;
    if (identity) {                                    /* a shuffle that moves nothing shows nothing */
        for (int i = 0; i < N_TOKENS; i++) shuf[i] = (i + 1) % N_TOKENS;
    }

    size_t n = (size_t)N_TOKENS * d_model;
    float *x = xalloc(n), *y = xalloc(n), *xp = xalloc(n), *yp = xalloc(n);
    float *w0 = xalloc((size_t)h * N_TOKENS * N_TOKENS), *w1 = xalloc((size_t)h * N_TOKENS * N_TOKENS);
    const char *labels[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) labels[i] = vocab[ids[i]];

    Tensor tx = tensor_wrap(x, "x", "batch seq d_model", 1, N_TOKENS, d_model);
    Tensor tw = tensor_wrap(w0, "attention weights", "batch heads query key", 1, h, N_TOKENS, N_TOKENS);
    Tensor ty = tensor_wrap(y, "out", "batch seq d_model", 1, N_TOKENS, d_model);
    printf("  sentence: \"the cat eats the fish\", %d heads of d_k = %d (Sec. 3.2.2)\n", h, d_model / h);
    show_shape(&tx, "embedding * sqrt(d_model) (Sec. 3.4), [+ PE]");
    show_shape(&tw, "Eq. (1)");
    show_shape(&ty, "MultiHead(x, x, x)");

    const int *perms[2] = {swap, shuf};
    double diff_nope[2], diff_pe[2];
    for (int use_pe = 0; use_pe <= 1; use_pe++) {
        const float *posenc = use_pe ? pe : zero_pe;
        embed_forward(x, ids, table, posenc, 1, N_TOKENS, d_model, 4);
        selfattn_run(&sa, y, x);
        memcpy(use_pe ? w1 : w0, sa.weights, sizeof(float) * h * N_TOKENS * N_TOKENS);
        for (int q = 0; q < 2; q++) {
            int pid[N_TOKENS];
            for (int i = 0; i < N_TOKENS; i++) pid[i] = ids[perms[q][i]];
            embed_forward(xp, pid, table, posenc, 1, N_TOKENS, d_model, 4);
            selfattn_run(&sa, yp, xp);
            (use_pe ? diff_pe : diff_nope)[q] = perm_diff(y, yp, perms[q], d_model);
        }
        if (!use_pe) {
            /* the two "the" rows: same token, different places */
            Diff d = diff_arrays(y, y + 3 * d_model, d_model);
            printf("\n  without PE: output(\"the\" at 0) vs output(\"the\" at 3): max diff %.2e\n", d.max_abs);
        } else {
            Diff d = diff_arrays(y, y + 3 * d_model, d_model);
            printf("  with PE:    output(\"the\" at 0) vs output(\"the\" at 3): max diff %.2e\n", d.max_abs);
        }
    }

    printf("\n  perm[i] is where the token now at position i used to stand.\n");
    for (int q = 0; q < 2; q++) {
        printf("\n  reordered: \"");
        for (int i = 0; i < N_TOKENS; i++) printf("%s%s", i ? " " : "", vocab[ids[perms[q][i]]]);
        printf("\"   perm = [");
        for (int i = 0; i < N_TOKENS; i++) printf("%s%d", i ? " " : "", perms[q][i]);
        printf("]\n");
        printf("    max |out_new[i] - out[perm[i]]|  without PE: %.2e   with PE: %.2e\n",
               diff_nope[q], diff_pe[q]);
    }
    printf("\n  Without PE the reordered output is the old output, rows reordered (up to\n"
           "  float rounding): \"cat\" gets the same vector whether it eats or is eaten.\n"
           "  Adding PE makes the result depend on where each word stands.\n");
    if (be != backend_cpu())
        printf("\n  %s vs CPU: max |diff| = %.3g (output), %.3g (weights)  [all %d self-attention runs above on the\n"
               "  %s backend, each against the CPU's mha_forward]\n", be->name, sa.out_diff, sa.w_diff, sa.runs,
               be->name);
    else if (gpu_asked)
        printf("\n  no GPU was found (the note at the top says why): these runs were the CPU's, the reference,\n"
               "  so there is no GPU result to compare with.\n");
    else
        printf("\n  these runs were on the CPU, the reference: nothing to compare with here\n"
               "  (--device cuda runs them on a GPU and compares each with the CPU).\n");

    printf("\n");
    show_heatmap("  head 1 weights, no PE (rows: queries, columns: keys; both \"the\" rows match):",
                 w0, N_TOKENS, N_TOKENS, labels, labels);
    printf("\n");
    show_heatmap("  head 1 weights, with PE (the two \"the\" rows now differ):",
                 w1, N_TOKENS, N_TOKENS, labels, labels);
    plot_heatmap(out, "weights_no_pe", "Self-attention weights without PE (head 1)", w0, N_TOKENS,
                 N_TOKENS, labels, labels, "key", "query");
    plot_heatmap(out, "weights_with_pe", "Self-attention weights with PE (head 1)", w1, N_TOKENS,
                 N_TOKENS, labels, labels, "key", "query");

    free(table); free(zero_pe); free(x); free(y); free(xp); free(yp); free(w0); free(w1);
    selfattn_free(&sa);
}

/* ---- 5. beyond the training length ------------------------------------------ */

static void show_extrapolation(const float *pe, int max_len, int d_model, int train_len, const char *out) {
    show_section("5. Positions past the training length (Sec. 3.5, Table 3 row (E))");
    printf("  Pretend training only ever saw positions 0..%d (--train-len %d).\n", train_len - 1, train_len);
    printf("  A learned position table (Table 3 row (E): about as good as sinusoids) has\n"
           "  %d rows: position %d has no row and no value at all. The sinusoid is a\n"
           "  formula, so it has one, with the same structure as inside:\n\n", train_len, train_len);

    float *M1 = xalloc((size_t)d_model * d_model);
    float *scratch = xalloc((size_t)d_model * d_model + (size_t)d_model);
    build_shift(M1, 1, d_model);
    int K = 4;
    printf("  %-8s %-8s %14s %14s %16s\n", "pos", "", "PE.PE(pos+1)", "|PE-PE(pos+4)|", "rotation error");
    int pos_list[6] = {0, train_len / 2, train_len - 1, train_len, (train_len + max_len) / 2, max_len - 1 - K};
    for (int r = 0; r < 6; r++) {
        int pos = pos_list[r];
        if (pos < 0 || pos + K >= max_len || (r > 0 && pos <= pos_list[r - 1])) continue;
        const float *a = pe + (long)pos * d_model;
        double d1 = dot_d(a, a + d_model, d_model);
        double dist = 0.0;
        for (int c = 0; c < d_model; c++) {
            double e = (double)a[c] - a[(long)K * d_model + c];
            dist += e * e;
        }
        printf("  %-8d %-8s %14.5f %14.5f %16.2e\n", pos, pos < train_len ? "seen" : "unseen", d1, sqrt(dist),
               shift_error(pe, M1, pos, pos + 1, 1, d_model, scratch));
    }
    printf("  The same numbers on both sides of %d: a model that learned to use\n"
           "  \"k positions apart\" inside the training range can use it beyond.\n", train_len);

    /* PE(pos) . PE(pos+k) over every pos: flat lines, straight through the
     * training boundary */
    int ks[3] = {1, 4, 16};
    int n = max_len - 16;
    if (n > 0) {
        float *xs = xalloc((size_t)n), *series[3];
        char names[3][40];
        const char *np[3];
        for (int i = 0; i < n; i++) xs[i] = (float)i;
        for (int j = 0; j < 3; j++) {
            series[j] = xalloc((size_t)n);
            for (int i = 0; i < n; i++)
                series[j][i] = (float)dot_d(pe + (long)i * d_model, pe + (long)(i + ks[j]) * d_model, d_model);
            snprintf(names[j], sizeof names[j], "PE(pos).PE(pos+%d)", ks[j]);
            np[j] = names[j];
        }
        char title[128];
        snprintf(title, sizeof title, "Dot products stay flat past the training length %d", train_len);
        plot_lines_marked(out, "pe_extrapolation", title, "position pos", "dot product", xs, n,
                          (const float *const *)series, np, 3, 0, 0, train_len, "training length");
        for (int j = 0; j < 3; j++) free(series[j]);
        free(xs);
    }
    free(M1);
    free(scratch);
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv) {
    int seq = 20, d_model = 32, max_len = 128, train_len = 64, h = 2;
    uint64_t seed = 42;
    const char *out = "out/05_positional_encoding", *device = "cpu";
    CliOption opts[] = {
        {"--seq", CLI_INT, &seq, "positions shown in the terminal heatmap", 1, 10000},
        {"--d-model", CLI_INT, &d_model, "model width (even: sin/cos come in pairs)", 2, 1024},
        {"--max-len", CLI_INT, &max_len, "positions in the PE table and PNGs", 8, 10000},
        {"--train-len", CLI_INT, &train_len, "pretend training length (part 5)", 1, 10000},
        {"--heads", CLI_INT, &h, "attention heads h (part 4)", 1, 64},
        {"--seed", CLI_U64, &seed, "random seed (embeddings, weights, shuffle)", 0, 0},
        {"--out", CLI_STRING, &out, "output folder for .dat/.gp/.png", 0, 0},
        {"--device", CLI_STRING, &device, "cpu or cuda (cuda: part 4's attention runs on the GPU)", 0, 0},
    };
    cli_parse(argc, argv, PROG, "sinusoidal positional encoding (Sec. 3.5) and why attention needs it",
              opts, CLI_COUNT(opts));
    show_lecture_sections(5);   /* its banners: "1." .. "5." */

    if (d_model % 2)
        cli_fail(PROG, "--d-model must be even, got %d: PE pairs each sin column with a cos column "
                 "(Sec. 3.5), and the rotation in part 2 needs both. Try %d.", d_model, d_model + 1);
    if (d_model % h)
        cli_fail(PROG, "--d-model %d is not divisible by --heads %d (d_k = d_model / h, Sec. 3.2.2)", d_model, h);
    if (seq > max_len) cli_fail(PROG, "--seq %d must not exceed --max-len %d", seq, max_len);
    if (train_len >= max_len)
        cli_fail(PROG, "--train-len %d must be below --max-len %d (part 5 looks past it)", train_len, max_len);
    const Backend *be = backend_select(device);
    if (!be) cli_fail(PROG, "--device must be cpu or cuda, got '%s'", device);
    cli_check_floats(PROG, "the PE table (--max-len x --d-model)", 2, (size_t)max_len, (size_t)d_model);
    if (plot_mkdir(out) != 0) cli_fail(PROG, "cannot create the output folder --out %s", out);
    printf("%s: d_model = %d, max_len = %d, device = %s\n", PROG, d_model, max_len, be->name);

    float *pe = xalloc((size_t)max_len * d_model);
    posenc_fill(pe, max_len, d_model);

    show_pe(pe, max_len, d_model, seq, out);
    show_rotation(pe, max_len, d_model);
    show_dot_products(pe, max_len, d_model, seq, out);
    show_permutation(pe, d_model, h, seed, be, strcmp(device, "cpu") != 0, out);
    show_extrapolation(pe, max_len, d_model, train_len, out);

    free(pe);
    return 0;
}
