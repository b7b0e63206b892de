/* 10_why_self_attention - Table 1 measured, not just quoted.
 *
 * Paper: Section 4 ("Why Self-Attention") and Table 1, which compares four
 * layer types mapping n vectors of width d to n vectors of width d:
 *
 *   layer type              complexity/layer   sequential ops   max path length
 *   self-attention          O(n^2 d)           O(1)             O(1)
 *   recurrent               O(n d^2)           O(n)             O(n)
 *   convolutional           O(k n d^2)         O(1)             O(log_k n) dilated, O(n/k)
 *   restricted self-attn    O(r n d)           O(1)             O(n/r)
 *
 * This program builds the four (plus the separable convolution Sec. 4
 * mentions, O(k n d + n d^2)) in chapters/10_why_self_attention/table1.c, and measures all three
 * columns on this machine:
 *   1. the layers: shapes, and self-attention as the library computes it
 *      (full attention weights counted and plotted, restricted as a heatmap);
 *   2. connectivity: which outputs move when one input is perturbed, against
 *      the taps the path-length search uses;
 *   3. complexity over n: FLOPs counted as the layers run and time (median
 *      of repeats), with log-log exponents beside Table 1's;
 *   4. the same over d;
 *   5. the crossover n where self-attention becomes costlier than recurrent;
 *   6. sequential operations, from each layer's dependency structure;
 *   7. maximum path length, breadth-first through stacks of each layer;
 *   8. memory: the n x n score matrix against the recurrent state;
 *   9. Table 1 rebuilt with the measured figures beside the paper's.
 *
 * Run:  build/10_why_self_attention [--full] [--d N] [--n-max N] [--heads N] [--k K] [--r R]
 *       (default: n = 8..512 at d = 64 and d = 16..512 at n = 64, 3 timed runs a point, a
 *       second or two; --full: n = 8..4096 at d = 512 and d = 64..2048 at n = 64, about a
 *       minute or more)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "fast/parallel.h"

#include "layers/multihead.h"
#include "io/cli.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"
#include "table1.h"
#include "core/tensor.h"

#define PROG "10_why_self_attention"
#define MAXP 48            /* points per sweep */
#define SHARE 0.75         /* fit where Table 1's term is >= 75% of the FLOPs */
#define TOL 0.25           /* how close an exponent must be to Table 1's */
#define MIN_POINT_S 3e-3   /* a point's repeats take at least this long (s) */
#define NK T1_KINDS

typedef struct {
    int d_n, n_lo, n_hi;   /* the n sweep, at width d_n */
    int n_d, d_lo, d_hi;   /* the d sweep, at length n_d */
    int h, k, r, repeats, full, path_max, threads, wall;
    uint64_t seed;
    const char *out;
} Config;

typedef struct {
    int m, over_n;                    /* points; 1: x is n, 0: x is d */
    double x[MAXP];
    double ms[NK][MAXP];              /* median time, milliseconds (the clock now_s reads) */
    double wall_ms[NK][MAXP];         /* median wall-clock time, milliseconds */
    double flops[NK][MAXP];           /* counted FLOPs, all of them */
    double share[NK][MAXP];           /* Table 1's term / all */
    double score_floats[MAXP];        /* self-attention: floats of its (h, n, n) score tensor */
    double acts_floats[MAXP];         /* self-attention: all its activations (mha_acts_size) */
    double window_floats[MAXP];       /* restricted: its buffer of weights */
} Sweep;

typedef struct {
    int from, dominant;               /* fit over points from..m-1; Table 1's term >= SHARE there */
    double flops, time, wall;         /* fitted exponents: counted FLOPs, time, wall time */
} Fit;

/* Table 1's exponents for each layer (the separable convolution's O(k n d +
 * n d^2) is 1 in n and, at large d, 2 in d) */
static const double paper_n[NK] = {2, 1, 1, 1, 1}, paper_d[NK] = {1, 2, 2, 2, 1};
static const char *short_name[NK] = {"self-attn", "recurrent", "conv", "separable", "restricted"};

/* The clock the sweeps read. On a machine shared with other programs, wall
 * time includes the time spent waiting for a core; the CPU time of this one
 * thread does not, so it is the default when the layers run on one thread. */
static int g_wall = 0;
static const char *time_label(void) {
    return g_wall ? "ms per layer forward (wall clock)" : "ms per layer forward (CPU time)";
}
static double sweep_clock_s(void) { return g_wall ? clock_wall_s() : clock_thread_s(); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sizes 8, 12, 16, 24, 32, ...: each power of two and 1.5 times it (steps of
 * about sqrt 2), from lo to hi, keeping only multiples of `multiple`. */
static int sweep_sizes(double *x, int lo, int hi, int multiple) {
    int m = 0;
    for (long p = 1; p <= hi && m < MAXP - 1; p *= 2) {
        if (p >= lo && p % multiple == 0) x[m++] = (double)p;
        long q = 3 * p / 2;
        if (p >= 2 && q >= lo && q <= hi && q % multiple == 0) x[m++] = (double)q;
    }
    if (m == 0 || x[m - 1] != hi) {
        if (hi % multiple == 0 && (m == 0 || x[m - 1] < hi)) x[m++] = hi;
    }
    return m;
}

/* ---- 1. the layers ------------------------------------------------------------------ */

static void section_layers(const Config *c, Rng *rng) {
    show_section("1. Four layer types, n vectors of width d in, n out (Table 1, Sec. 4)");
    int n = 16, d = 16, h = 2, half = c->r / 2;
    T1Layer L[NK];
    float *x = malloc(sizeof(float) * n * d), *y = malloc(sizeof(float) * n * d);
    float *ref = malloc(sizeof(float) * n * d);
    float *abuf = malloc(sizeof(float) * mha_acts_size(1, n, n, h, d / h, d / h));
    uint8_t *band = malloc((size_t)n * n);
    if (!x || !y || !ref || !abuf || !band) cli_fail(PROG, "out of memory");
    rng_fill_normal(rng, x, (size_t)n * d, 0.0f, 1.0f);
    Tensor tx = tensor_wrap(x, "x", "seq d_model", n, d);
    show_shape(&tx, "the input of every layer; each maps it to out [seq, d_model]");
    for (int kd = 0; kd < NK; kd++) {
        if (t1_layer_build(&L[kd], (T1Kind)kd, n, d, h, c->k, c->r, 1, rng) != 0)
            cli_fail(PROG, "out of memory");
        Flops f = {0, 0};
        t1_forward(&L[kd], y, x, n, &f);
        printf("  %-16s %6zu weights  %7llu FLOPs counted (%5.1f%% in Table 1's term)\n",
               t1_kind_name((T1Kind)kd), L[kd].n_params, (unsigned long long)(f.table + f.other),
               100.0 * f.table / (double)(f.table + f.other));
    }
    /* the weights of each, with their shapes */
    Tensor w[6] = {
        tensor_wrap(L[T1_SELF_ATTENTION].mha.w_q, "attention W_Q (W_K, W_V, W_O)", "d_model h*d_k", d, d),
        tensor_wrap(L[T1_RECURRENT].w, "recurrent W and U", "d_in d_out", d, d),
        tensor_wrap(L[T1_CONVOLUTION].w, "convolution W", "tap d_in d_out", c->k, d, d),
        tensor_wrap(L[T1_SEPARABLE].w, "separable depthwise", "tap d_model", c->k, d),
        tensor_wrap(L[T1_SEPARABLE].u, "separable pointwise", "d_in d_out", d, d),
        tensor_wrap(L[T1_RECURRENT].b, "bias b (rnn, convs)", "d_model", d),
    };
    for (int i = 0; i < 6; i++) show_shape(&w[i], NULL);
    printf("  recurrent: h_t = tanh(x_t W + h_{t-1} U + b); convolution: kernel k = %d, zero padding;\n"
           "  restricted: query i attends to keys |i - j| <= r/2 = %d (r = %d).\n", c->k, half, c->r);

    /* self-attention here is the library's: same calls as mha_forward, same bits */
    MhaActs a;
    mha_acts_layout(&a, abuf, 1, n, n, h, d / h, d / h);
    t1_forward(&L[T1_SELF_ATTENTION], y, x, n, NULL);
    mha_forward(ref, &a, &L[T1_SELF_ATTENTION].mha, x, x, NULL, 1, n, n, d, h, d / h, d / h);
    Diff dsa = diff_arrays(y, ref, (size_t)n * d);
    Tensor ts = tensor_wrap(a.weights, "scores", "heads query key", h, n, n);
    show_shape(&ts, "softmax(q k^T / sqrt(d_k)): n x n per head");
    printf("  self-attention vs the library's mha_forward: max |difference| %.3g\n", dsa.max_abs);
    /* the full map goes to the PNG only (the screen holds one 16 x 16 map):
     * here, what it shows, counted on head 1's n x n weights */
    int pos = 0;
    float lo = a.weights[0], hi = a.weights[0];
    for (int i = 0; i < n * n; i++) {
        float v = a.weights[i];
        pos += v > 0, lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    }
    printf("  full self-attention, head 1: %d of %d weights > 0 (%.3f..%.3f): %s\n", pos, n * n, lo, hi,
           pos == n * n ? "every query reads every key" : "some keys get weight 0");
    plot_heatmap(c->out, "attn_full", "self-attention weights, head 1 (n=16)", a.weights, n, n,
                 NULL, NULL, "key", "query");
    /* restricted attention computes only the band; the library's attention
     * with a band mask computes all n^2 scores and blocks the rest */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) band[i * n + j] = abs(i - j) <= half;
    t1_forward(&L[T1_RESTRICTED], y, x, n, NULL);
    mha_forward(ref, &a, &L[T1_RESTRICTED].mha, x, x, band, 1, n, n, d, h, d / h, d / h);
    Diff dr = diff_arrays(y, ref, (size_t)n * d);
    printf("  restricted (windows only) vs mha_forward with a band mask: max |difference| %.3g\n",
           dr.max_abs);
    show_heatmap("restricted self-attention, head 1: a band of width r + 1", a.weights, n, n, NULL, NULL);
    plot_heatmap(c->out, "attn_band", "restricted self-attention weights, head 1 (n=16)",
                 a.weights, n, n, NULL, NULL, "key", "query");
    for (int kd = 0; kd < NK; kd++) t1_layer_free(&L[kd]);
    free(x); free(y); free(ref); free(abuf); free(band);
}

/* ---- 2. connectivity, probed --------------------------------------------------------- */

static void section_probe(const Config *c, Rng *rng) {
    show_section("2. Which inputs each output depends on: perturb one, watch the outputs");
    int n = 16, d = 8;
    float *x = malloc(sizeof(float) * n * d), *xp = malloc(sizeof(float) * n * d);
    float *y0 = malloc(sizeof(float) * n * d), *y1 = malloc(sizeof(float) * n * d);
    uint8_t *dep = malloc((size_t)n * n);
    int *taps = malloc(sizeof(int) * n);
    if (!x || !xp || !y0 || !y1 || !dep || !taps) cli_fail(PROG, "out of memory");
    rng_fill_normal(rng, x, (size_t)n * d, 0.0f, 1.0f);
    printf("  n = %d: x[s] += 0.5 for each s in turn; an output 'depends' on s when any of its\n"
           "  bits change. Against the taps (what sections 6 and 7 search through):\n", n);
    for (int kd = 0; kd < NK; kd++) {
        T1Layer L;
        if (t1_layer_build(&L, (T1Kind)kd, n, d, 2, c->k, c->r, 1, rng) != 0) cli_fail(PROG, "out of memory");
        t1_probe(&L, dep, x, xp, y0, y1, n);
        int wrong = 0, links = 0;
        for (int i = 0; i < n; i++) {
            int cnt = t1_taps((T1Kind)kd, i, n, c->k, c->r, 1, taps, NULL);
            for (int s = 0; s < n; s++) {
                /* recurrent: x_s reaches h_t through the chain for every t >= s */
                int want = 0;
                if (kd == T1_RECURRENT) want = s <= i;
                else for (int e = 0; e < cnt; e++) want |= taps[e] == s;
                wrong += want != dep[i * n + s];
                links += dep[i * n + s];
            }
        }
        printf("  %-16s %3d of %d (output, input) pairs depend; %d differ from the taps\n",
               t1_kind_name((T1Kind)kd), links, n * n, wrong);
        if (kd == T1_RECURRENT) {
            float img[16 * 16];
            for (int i = 0; i < n * n; i++) img[i] = dep[i];
            show_heatmap("recurrent: output t (row) depends on input s (column) for s <= t", img, n, n,
                         NULL, NULL);
        }
        t1_layer_free(&L);
    }
    free(x); free(xp); free(y0); free(y1); free(dep); free(taps);
}

/* ---- 3, 4. complexity: FLOPs and time ----------------------------------------------- */

/* Times every layer at every size of s->x (n, or d when !s->over_n) */
static void run_sweep(Sweep *s, const Config *c, Rng *rng, int fixed) {
    int xmax = (int)s->x[s->m - 1];
    int nmax = s->over_n ? xmax : fixed, dmax = s->over_n ? fixed : xmax;
    size_t cap = cli_check_floats(PROG, "sweep input", 2, (size_t)nmax, (size_t)dmax);
    float *x = malloc(sizeof(float) * cap), *y = malloc(sizeof(float) * cap);
    if (!x || !y) cli_fail(PROG, "out of memory for the sweep (n %d, d %d)", nmax, dmax);
    rng_fill_normal(rng, x, cap, 0.0f, 1.0f);
    int tty = isatty(STDERR_FILENO), total = NK * s->m, done = 0;
    for (int kd = 0; kd < NK; kd++) {
        T1Layer L;
        int built = 0;
        for (int p = 0; p < s->m; p++, done++) {
            int n = s->over_n ? (int)s->x[p] : fixed, d = s->over_n ? fixed : (int)s->x[p];
            if (c->full)
                fprintf(stderr, "%s  timing %-16s %s = %-5d (%d of %d)%s", tty ? "\r" : "",
                        t1_kind_name((T1Kind)kd), s->over_n ? "n" : "d", (int)s->x[p], done + 1, total,
                        tty ? "   " : "\n");
            if (!built || !s->over_n) {
                if (built) t1_layer_free(&L);
                if (kd == T1_SELF_ATTENTION)
                    cli_check_floats(PROG, "the score matrix", 3, (size_t)c->h, (size_t)nmax, (size_t)nmax);
                if (t1_layer_build(&L, (T1Kind)kd, nmax, d, c->h, c->k, c->r, 1, rng) != 0)
                    cli_fail(PROG, "out of memory building the %s layer (n %d, d %d)",
                             t1_kind_name((T1Kind)kd), nmax, d);
                built = 1;
            }
            Flops f = {0, 0};
            double t0 = sweep_clock_s();
            t1_forward(&L, y, x, n, &f);                 /* warm-up run; counts the FLOPs */
            double first = sweep_clock_s() - t0;
            if (kd == T1_SELF_ATTENTION)     /* the score tensor the library laid out for n */
                s->score_floats[p] = (double)(L.acts.concat - L.acts.weights);
            if (kd == T1_SELF_ATTENTION)
                s->acts_floats[p] = (double)mha_acts_size(1, n, n, c->h, d / c->h, d / c->h);
            if (kd == T1_RESTRICTED)         /* one query's window of weights at a time */
                s->window_floats[p] = (double)(L.n_work - 8 * (size_t)L.n_max * L.d);
            /* median of repeats; tiny runs are repeated more (to ~MIN_POINT_S, at most 51) */
            int reps = c->repeats;
            if (first * reps < MIN_POINT_S) reps = (int)fmin(51, ceil(MIN_POINT_S / fmax(first, 1e-7)));
            double t[64], tw[64];
            for (int r = 0; r < reps; r++) {
                double w0 = clock_wall_s();
                t0 = sweep_clock_s();
                t1_forward(&L, y, x, n, NULL);
                t[r] = sweep_clock_s() - t0;
                tw[r] = clock_wall_s() - w0;
            }
            qsort(t, reps, sizeof(double), cmp_double);
            qsort(tw, reps, sizeof(double), cmp_double);
            s->ms[kd][p] = 1e3 * (reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]));
            s->wall_ms[kd][p] = 1e3 * (reps % 2 ? tw[reps / 2] : 0.5 * (tw[reps / 2 - 1] + tw[reps / 2]));
            s->flops[kd][p] = (double)(f.table + f.other);
            s->share[kd][p] = (double)f.table / (double)(f.table + f.other);
        }
        if (built) t1_layer_free(&L);
    }
    if (c->full && tty) fprintf(stderr, "\r%70s\r", "");
    free(x); free(y);
}

static Fit fit_sweep(const Sweep *s, int kd) {
    Fit f;
    f.from = t1_fit_from(s->share[kd], s->m, SHARE);
    f.dominant = s->m - f.from >= 2;
    if (!f.dominant) f.from = s->m >= 3 ? s->m - 3 : 0;
    f.flops = t1_loglog_slope(s->x, s->flops[kd], f.from, s->m);
    f.time = t1_loglog_slope(s->x, s->ms[kd], f.from, s->m);
    f.wall = t1_loglog_slope(s->x, s->wall_ms[kd], f.from, s->m);
    return f;
}

static void print_sweep(const Sweep *s, const char *what, int fixed) {
    const char *v = s->over_n ? "n" : "d";
    printf("\n  %s sweep at %s = %d. Median time in ms (left), counted MFLOP (right):\n", v,
           s->over_n ? "d" : "n", fixed);
    printf("  %5s", v);
    for (int kd = 0; kd < NK; kd++) printf(" %8.8s", short_name[kd]);
    printf("  |");
    for (int kd = 0; kd < NK; kd++) printf(" %8.8s", short_name[kd]);
    printf("\n");
    for (int p = 0; p < s->m; p++) {
        printf("  %5d", (int)s->x[p]);
        for (int kd = 0; kd < NK; kd++) printf(" %8.3f", s->ms[kd][p]);
        printf("  |");
        for (int kd = 0; kd < NK; kd++) printf(" %8.2f", 1e-6 * s->flops[kd][p]);
        printf("\n");
    }
    (void)what;
}

/* Prints the fitted exponents beside Table 1's; fills fits[NK] */
static void print_fits(const Sweep *s, const double *paper, Fit *fits) {
    const char *v = s->over_n ? "n" : "d";
    printf("\n  Exponent p in cost ~ %s^p, least squares on log-log axes, over the upper half of the\n"
           "  sweep where Table 1's term is >= %.0f%% of the counted FLOPs (else the last 3 points, *):\n",
           v, 100 * SHARE);
    printf("  %-16s %6s %14s %7s %7s %7s  %s\n", "layer", "paper", "fit over", "FLOPs", g_wall ? "-" : "CPU",
           "wall", "FLOPs vs paper");
    for (int kd = 0; kd < NK; kd++) {
        Fit f = fits[kd] = fit_sweep(s, kd);
        char range[32];
        snprintf(range, sizeof range, "%s=%d..%d%s", v, (int)s->x[f.from], (int)s->x[s->m - 1],
                 f.dominant ? "" : "*");
        double gap = fabs(f.flops - paper[kd]);
        char cpu[16];
        snprintf(cpu, sizeof cpu, g_wall ? "-" : "%.2f", f.time);
        printf("  %-16s %6.0f %14s %7.2f %7s %7.2f  %s by %.2f%s\n", t1_kind_name((T1Kind)kd), paper[kd],
               range, f.flops, cpu, f.wall, gap <= TOL ? "within" : "off", gap, f.dominant ? "" : " (*)");
    }
    for (int kd = 0; kd < NK; kd++)
        if (!fits[kd].dominant)
            printf("  * %s: Table 1's term is only %.0f%% of the FLOPs at %s = %d; the rest (the\n"
                   "    O(n d^2) projections) sets the exponent there.\n", t1_kind_name((T1Kind)kd),
                   100 * s->share[kd][s->m - 1], v, (int)s->x[s->m - 1]);
}

/* Self-attention's time exponent against its FLOP exponent over the same
 * points, and what the gap means: the FLOP rate (FLOPs / time) at both ends
 * of the fit fell (time grew faster than the count) or rose. This run's
 * numbers; the README explains why the rate falls as n grows. */
static void say_time_vs_flops(const Sweep *s, const Fit *f) {
    int a = f->from, b = s->m - 1, kd = T1_SELF_ATTENTION;
    double ra = 1e-6 * s->flops[kd][a] / s->ms[kd][a], rb = 1e-6 * s->flops[kd][b] / s->ms[kd][b];  /* GFLOP/s */
    double t = g_wall ? f->wall : f->time, gap = t - f->flops;
    printf("  Self-attention over n = %d..%d: %s grew as n^%.2f, its FLOPs as n^%.2f,\n"
           "  %s: %.2f GFLOP/s at n = %d, %.2f at n = %d.\n", (int)s->x[a], (int)s->x[b],
           g_wall ? "wall-clock time" : "CPU time", t, f->flops,
           gap > 0.005 ? "so its FLOP rate fell" : gap < -0.005 ? "so its FLOP rate rose" : "at a steady FLOP rate",
           ra, (int)s->x[a], rb, (int)s->x[b]);
}

static void section_complexity_n(const Config *c, Rng *rng, Sweep *sn, Fit *fn) {
    show_section("3. Complexity per layer over n: FLOPs counted as the layers run, and time");
    printf("  Every layer counts the FLOPs of each library call it makes (multiply-add = 2).\n"
           "  Times: medians of %d+ repeats of %s, %d thread(s). Read them as rough;\n"
           "  the exponents the tests check are the FLOP ones, which do not depend on the load.\n",
           c->repeats, g_wall ? "wall-clock time" : "this thread's CPU time", parallel_threads());
    double dsizes[MAXP];   /* both sweeps are checked before either runs */
    sn->over_n = 1;
    sn->m = sweep_sizes(sn->x, c->n_lo, c->n_hi, 1);
    if (sn->m < 3 || sweep_sizes(dsizes, c->d_lo, c->d_hi, c->h) < 3)
        cli_fail(PROG, "the sweeps need at least 3 sizes each; widen --n-max / --d-max");
    run_sweep(sn, c, rng, c->d_n);
    print_sweep(sn, "n", c->d_n);
    print_fits(sn, paper_n, fn);
    say_time_vs_flops(sn, &fn[T1_SELF_ATTENTION]);
}

static void section_complexity_d(const Config *c, Rng *rng, Sweep *sd, Fit *fd) {
    show_section("4. Complexity per layer over d: the same counts and clock, width d grows");
    sd->over_n = 0;
    sd->m = sweep_sizes(sd->x, c->d_lo, c->d_hi, c->h);   /* >= 3: checked in section 3 */
    run_sweep(sd, c, rng, c->n_d);
    print_sweep(sd, "d", c->n_d);
    print_fits(sd, paper_d, fd);
    float xs[MAXP], ser[NK][MAXP];
    const float *sp[NK];
    for (int p = 0; p < sd->m; p++) xs[p] = (float)sd->x[p];
    for (int kd = 0; kd < NK; kd++) {
        for (int p = 0; p < sd->m; p++) ser[kd][p] = (float)sd->ms[kd][p];
        sp[kd] = ser[kd];
    }
    char title[128];
    snprintf(title, sizeof title, "time vs d at n = %d (median)", c->n_d);
    plot_lines(c->out, "time_vs_d", title, "d (d_model)", time_label(), xs, sd->m, sp,
               short_name, NK, 1, 1);
}

/* ---- 5. crossover -------------------------------------------------------------------- */

static void say_crossover(const char *what, double cx, int always, const Sweep *s, int d) {
    if (cx < 0) printf("  %s: self-attention is not costlier than recurrent at n = %d yet.\n", what,
                       (int)s->x[s->m - 1]);
    else if (always) printf("  %s: self-attention is costlier at every n measured (from n = %d).\n", what,
                            (int)s->x[0]);
    else printf("  %s: self-attention becomes costlier at n = %.0f, n/d = %.2f.\n", what, cx, cx / d);
}

static double section_crossover(const Config *c, const Sweep *s, double *flop_cross) {
    show_section("5. Where self-attention becomes costlier than the recurrent layer");
    printf("  Sec. 4: \"self-attention layers are faster than recurrent layers when the sequence\n"
           "  length n is smaller than the representation dimensionality d\". At d = %d:\n", c->d_n);
    int always;
    double cx = t1_crossover(s->x, s->ms[T1_SELF_ATTENTION], s->ms[T1_RECURRENT], s->m, &always);
    say_crossover("time", cx, always, s, c->d_n);
    /* Table 1's terms only: n^2 d of attention against the recurrent n d^2 */
    double sa_t1[MAXP];
    for (int p = 0; p < s->m; p++) sa_t1[p] = s->flops[T1_SELF_ATTENTION][p] * s->share[T1_SELF_ATTENTION][p];
    int always2, always3;
    *flop_cross = t1_crossover(s->x, sa_t1, s->flops[T1_RECURRENT], s->m, &always2);
    say_crossover("FLOPs, Table 1's terms", *flop_cross, always2, s, c->d_n);
    double fx = t1_crossover(s->x, s->flops[T1_SELF_ATTENTION], s->flops[T1_RECURRENT], s->m, &always3);
    say_crossover("FLOPs, the whole layers", fx, always3, s, c->d_n);
    if (always3) {
        int p = s->m - 1, faster = 0;
        double proj = s->flops[T1_SELF_ATTENTION][p] * (1 - s->share[T1_SELF_ATTENTION][p]);
        for (int q = 0; q < s->m; q++) faster += s->ms[T1_SELF_ATTENTION][q] < s->ms[T1_RECURRENT][q];
        printf("  Counted at n = %d: self-attention's four d x d projections alone are %.2f MFLOP, the\n"
               "  whole recurrent layer %.2f MFLOP (%.2fx): Table 1 leaves the projections out.\n",
               (int)s->x[p], 1e-6 * proj, 1e-6 * s->flops[T1_RECURRENT][p], proj / s->flops[T1_RECURRENT][p]);
        if (faster)
            printf("  Yet in time self-attention was the faster one at %d of %d sizes: its work is a few\n"
                   "  large matrix products; the recurrent layer's is n small ones, each waiting for\n"
                   "  the one before.\n", faster, s->m);
        else
            printf("  In time too it was the slower one at all %d sizes.\n", s->m);
    }
    /* the time plot, with the crossover marked */
    float xs[MAXP], ser[NK][MAXP];
    const float *sp[NK];
    for (int p = 0; p < s->m; p++) xs[p] = (float)s->x[p];
    for (int kd = 0; kd < NK; kd++) {
        for (int p = 0; p < s->m; p++) ser[kd][p] = (float)s->ms[kd][p];
        sp[kd] = ser[kd];
    }
    char title[160], mark[48];
    if (cx > 0)
        snprintf(title, sizeof title, "time vs n at d = %d; self-attention costlier than recurrent "
                 "from n = %.0f (marked)", c->d_n, cx);
    else
        snprintf(title, sizeof title, "time vs n at d = %d (no crossover in this range)", c->d_n);
    snprintf(mark, sizeof mark, "crossover n = %.0f", cx);
    plot_lines_marked(c->out, "time_vs_n", title, "n (sequence length)", time_label(), xs, s->m, sp,
                      short_name, NK, 1, 1, cx > 0 ? cx : NAN, mark);
    return cx;
}

/* ---- 6. sequential operations -------------------------------------------------------- */

static void section_sequential(const Config *c, int *seq, int n_big) {
    show_section("6. Sequential operations: the longest chain of dependent steps");
    printf("  Each output position is one operation, ready one step after the latest thing it\n"
           "  reads; run through the layer's dependencies in the order the forward pass goes:\n");
    printf("  %-16s %8s %8s %8s\n", "layer", "n = 16", "n = 256", "");
    for (int kd = 0; kd < NK; kd++) {
        int a = t1_sequential_ops((T1Kind)kd, 16, c->k, c->r);
        int b = t1_sequential_ops((T1Kind)kd, 256, c->k, c->r);
        seq[kd] = t1_sequential_ops((T1Kind)kd, n_big, c->k, c->r);
        if (a < 0 || b < 0 || seq[kd] < 0) cli_fail(PROG, "out of memory");
        printf("  %-16s %8d %8d %8d at n = %d  (%s)\n", t1_kind_name((T1Kind)kd), a, b, seq[kd], n_big,
               seq[kd] == 1 ? "O(1): every position at once" :
               seq[kd] == n_big ? "O(n): one step per position" : "neither 1 nor n");
    }
}

/* ---- 7. maximum path length ---------------------------------------------------------- */

enum { P_ATTN, P_RNN, P_CONV, P_DIL, P_RESTR, NPATH };
static const char *path_name[NPATH] = {"self-attn", "recurrent", "conv contig", "conv dilated", "restricted"};

static int section_paths(const Config *c, int path[][NPATH], double *pn) {
    show_section("7. Maximum path length: breadth-first through stacks of each layer");
    printf("  Layers are stacked until every output position is reached from every input\n"
           "  position (the recurrent layer: edges x_s -> h_s -> ... -> h_t inside one layer).\n"
           "  Dilated: dilations 1, %d, %d^2, ... below n, repeated. k = %d, r = %d (window |i-j| <= %d).\n",
           c->k, c->k, c->k, c->r, c->r / 2);
    printf("  %6s %10s %10s %12s %12s %10s   %s\n", "n", path_name[0], path_name[1], path_name[2],
           path_name[3], path_name[4], "log_k n");
    int m = 0;
    long unreach = 0;
    for (int n = 16; n <= c->path_max && m < 16; n *= 2, m++) {
        T1Kind kind[NPATH] = {T1_SELF_ATTENTION, T1_RECURRENT, T1_CONVOLUTION, T1_CONVOLUTION, T1_RESTRICTED};
        for (int q = 0; q < NPATH; q++) {
            long u = 0;
            path[m][q] = t1_path_length(kind[q], n, c->k, c->r, q == P_DIL, 4 * n + 8, &u);
            if (path[m][q] < 0) cli_fail(PROG, "path length search failed at n = %d (out of memory?)", n);
            if (q == P_RNN) unreach = u;
        }
        pn[m] = n;
        printf("  %6d %10d %10d %12d %12d %10d   %.2f\n", n, path[m][0], path[m][1], path[m][2], path[m][3],
               path[m][4], log((double)n) / log((double)c->k));
    }
    printf("  The recurrent layer reads left to right: at n = %d, %ld (output, input) pairs with the\n"
           "  input later than the output are never connected (a second, right-to-left layer\n"
           "  would connect them over the same O(n) chain).\n", (int)pn[m - 1], unreach);
    float xs[16], ser[NPATH][16];
    const float *sp[NPATH];
    for (int i = 0; i < m; i++) xs[i] = (float)pn[i];
    for (int q = 0; q < NPATH; q++) {
        for (int i = 0; i < m; i++) ser[q][i] = (float)path[i][q];
        sp[q] = ser[q];
    }
    plot_lines(c->out, "path_length", "maximum path length vs n (Table 1, last column)", "n",
               "layers (recurrent: steps) from any input to any output", xs, m, sp, path_name, NPATH, 1, 1);
    return m;
}

/* ---- 8. memory ------------------------------------------------------------------------- */

static void section_memory(const Config *c, const Sweep *s) {
    show_section("8. Memory: the n x n score matrix against the recurrent state");
    printf("  Bytes of the score tensor [heads=%d, query=n, key=n] as the library lays it out\n"
           "  (mha_acts_layout), of all self-attention activations, of the restricted layer's\n"
           "  window of weights, and of the recurrent state h_{t-1} (d = %d floats, whatever n):\n",
           c->h, c->d_n);
    printf("  %6s %14s %14s %12s %12s %12s\n", "n", "score bytes", "all acts", "restricted", "rnn state",
           "scores/state");
    float xs[MAXP], sb[MAXP], rb[MAXP], wb[MAXP];
    double state = 4.0 * c->d_n;
    for (int p = 0; p < s->m; p++) {
        double bytes = 4 * s->score_floats[p];
        printf("  %6d %14.0f %14.0f %12.0f %12.0f %12.0f\n", (int)s->x[p], bytes, 4 * s->acts_floats[p],
               4 * s->window_floats[p], state, bytes / state);
        xs[p] = (float)s->x[p]; sb[p] = (float)bytes; rb[p] = (float)state;
        wb[p] = (float)(4 * s->window_floats[p]);
    }
    int p = s->m - 1;
    double ratio = s->score_floats[p] / s->score_floats[p - 1];
    printf("  From n = %d to %d the scores grew %.2fx = (n ratio)^%.2f, and made up %.0f%% of all\n"
           "  self-attention activations at n = %d; the recurrent state stayed %.0f bytes.\n",
           (int)s->x[p - 1], (int)s->x[p], ratio, log(ratio) / log(s->x[p] / s->x[p - 1]),
           100 * s->score_floats[p] / s->acts_floats[p], (int)s->x[p], state);
    const float *sp[3] = {sb, wb, rb};
    const char *nm[3] = {"self-attention scores (h n^2 floats)", "restricted: one window",
                         "recurrent state (d floats)"};
    plot_lines(c->out, "memory", "bytes held: attention scores vs recurrent state", "n", "bytes", xs, s->m,
               sp, nm, 3, 1, 1);
}

/* ---- 9. Table 1 rebuilt -------------------------------------------------------------- */

static void section_table1(const Config *c, const Fit *fn, const Fit *fd, const int *seq, int n_big,
                           int path[][NPATH], const double *pn, int mp) {
    show_section("9. Table 1, rebuilt: the paper's entries and what this run measured");
    printf("  Complexity: fitted exponents of the counted FLOPs in n (d = %d) and in d (n = %d),\n"
           "  %s time's in brackets. Sequential operations at n = %d. Path: max path length\n"
           "  at n = %d and %d, and how it grows (exponent of n, or multiple of log_k n).\n",
           c->d_n, c->n_d, g_wall ? "wall-clock" : "CPU", n_big, (int)pn[0], (int)pn[mp - 1]);
    printf("  %-12s %-8s %-12s %-12s %-5s %-5s %-9s %-9s %s\n", "layer", "paper", "n: FLOPs", "d: FLOPs",
           "paper", "seq", "paper", "path", "growth");
    struct { int kind, path; const char *cx, *seq, *path_o; } row[6] = {
        {T1_SELF_ATTENTION, P_ATTN, "n^2 d", "1", "1"},
        {T1_RECURRENT, P_RNN, "n d^2", "n", "n"},
        {T1_CONVOLUTION, P_CONV, "k n d^2", "1", "n/k"},
        {T1_CONVOLUTION, P_DIL, "k n d^2", "1", "log_k n"},
        {T1_RESTRICTED, P_RESTR, "r n d", "1", "n/r"},
        {T1_SEPARABLE, P_CONV, "kdn+nd^2", "1", "n/k"},
    };
    const char *label[6] = {"self-attn", "recurrent", "conv", "conv dilated", "restricted", "separable"};
    for (int i = 0; i < 6; i++) {
        int kd = row[i].kind, q = row[i].path;
        char en[32], ed[32], pth[32], growth[32];
        snprintf(en, sizeof en, "%.2f (%.2f)", fn[kd].flops, fn[kd].time);
        snprintf(ed, sizeof ed, "%.2f (%.2f)", fd[kd].flops, fd[kd].time);
        snprintf(pth, sizeof pth, "%d, %d", path[0][q], path[mp - 1][q]);
        double e = log((double)path[mp - 1][q] / path[0][q]) / log(pn[mp - 1] / pn[0]);
        if (q == P_DIL)
            snprintf(growth, sizeof growth, "%.2f log_k n", path[mp - 1][q] / (log(pn[mp - 1]) / log(c->k)));
        else if (path[0][q] == path[mp - 1][q]) snprintf(growth, sizeof growth, "constant");
        else snprintf(growth, sizeof growth, "n^%.2f", e);
        printf("  %-12s %-8s %-12s %-12s %-5s %-5d %-9s %-9s %s\n", label[i], row[i].cx, en, ed, row[i].seq,
               seq[kd], row[i].path_o, pth, growth);
    }
    /* the four exponents held against Table 1 */
    struct { const char *what; double got, want; } chk[4] = {
        {"self-attention in n", fn[T1_SELF_ATTENTION].flops, 2}, {"recurrent in n", fn[T1_RECURRENT].flops, 1},
        {"recurrent in d", fd[T1_RECURRENT].flops, 2}, {"convolution in d", fd[T1_CONVOLUTION].flops, 2}};
    int ok = 0, tok = 0;
    for (int i = 0; i < 4; i++) {
        ok += fabs(chk[i].got - chk[i].want) <= TOL;
        tok += fabs((i == 0 ? fn[0].time : i == 1 ? fn[1].time : i == 2 ? fd[1].time : fd[2].time)
                    - chk[i].want) <= TOL;
    }
    printf("  %d of 4 FLOP exponents are within %.2f of Table 1's:\n   ", ok, TOL);
    for (int i = 0; i < 4; i++) printf(" %s %.2f%s", chk[i].what, chk[i].got, i < 3 ? "," : ";\n");
    printf("  %d of 4 %s exponents are within %.2f too (timings are noisy on a shared machine).\n", tok,
           g_wall ? "wall-clock" : "CPU-time", TOL);
    int seq_ok = seq[T1_RECURRENT] == n_big && seq[T1_SELF_ATTENTION] == 1 && seq[T1_CONVOLUTION] == 1 &&
                 seq[T1_RESTRICTED] == 1;
    printf("  Sequential operations %s Table 1: %d for recurrent at n = %d, 1 for the others.\n",
           seq_ok ? "match" : "do NOT match", seq[T1_RECURRENT], n_big);
    printf("  Path: self-attention %s; recurrent %d at n = %d.\n",
           path[mp - 1][P_ATTN] == 1 && path[0][P_ATTN] == 1 ? "1 layer at every n" : "NOT 1 layer",
           path[mp - 1][P_RNN], (int)pn[mp - 1]);
}

int main(int argc, char **argv) {
    Config c = {.d_n = 64, .n_lo = 8, .n_hi = 512, .n_d = 64, .d_lo = 16, .d_hi = 512, .h = 8, .k = 3,
                .r = 4, .repeats = 3, .full = 0, .path_max = 1024, .threads = 1, .seed = 42,
                .out = "out/10_why_self_attention"};
    int quick = 0;
    if (cli_given(argc, argv, "--quick")) c.n_hi = 128, c.d_hi = 64, c.path_max = 64, c.repeats = 1;
    CliOption opts[] = {
        {"--full",     CLI_FLAG,   &c.full,     "the complete sweep: n 8..4096 at d 512, d 64..2048 at n 64", 0, 0},
        {"--d",        CLI_INT,    &c.d_n,      "width d of the n sweep", 1, 8192},
        {"--n-max",    CLI_INT,    &c.n_hi,     "longest sequence of the n sweep (from 8)", 8, 16384},
        {"--n",        CLI_INT,    &c.n_d,      "length n of the d sweep", 1, 16384},
        {"--d-max",    CLI_INT,    &c.d_hi,     "widest d of the d sweep (from 16)", 16, 8192},
        {"--heads",    CLI_INT,    &c.h,        "heads h of the attention layers (must divide every d)", 1, 64},
        {"--k",        CLI_INT,    &c.k,        "convolution kernel size k (odd)", 3, 63},
        {"--r",        CLI_INT,    &c.r,        "restricted attention: keys within r/2 of the query", 2, 1024},
        {"--repeats",  CLI_INT,    &c.repeats,  "timed runs per point (the median is kept)", 1, 51},
        {"--path-max", CLI_INT,    &c.path_max, "longest n of the path-length search (from 16)", 16, 4096},
        {"--threads",  CLI_INT,    &c.threads,  "threads for the timed layers (1: work, not cores)", 1, 256},
        {"--wall",     CLI_FLAG,   &c.wall,     "time with the wall clock (default with --threads 1: CPU time)", 0, 0},
        {"--seed",     CLI_U64,    &c.seed,     "random seed for weights and inputs", 0, 0},
        {"--out",      CLI_STRING, &c.out,      "output folder for data, scripts and PNGs", 0, 0},
        {"--quick",    CLI_FLAG,   &quick,      "a short run: --n-max 128 --d-max 64 --path-max 64 --repeats 1", 0, 0},
    };
    cli_parse(argc, argv, PROG, "Table 1 measured: complexity, sequential operations, path length",
              opts, CLI_COUNT(opts));
    show_lecture_sections(9);   /* its banners: "1." .. "9." */
    if (c.full) { c.d_n = 512; c.n_hi = 4096; c.n_d = 64; c.d_lo = 64; c.d_hi = 2048; c.repeats = 3; }
    if (c.k % 2 == 0) cli_fail(PROG, "--k %d: the kernel must be odd so it can be centred", c.k);
    if (c.d_n % c.h) cli_fail(PROG, "--heads %d must divide --d %d", c.h, c.d_n);
    if (c.d_lo < c.h) c.d_lo = c.h;
    if (plot_mkdir(c.out) != 0) cli_fail(PROG, "--out: cannot use folder '%s'", c.out);
    parallel_set_threads(c.threads);
    g_wall = c.wall || c.threads > 1;
    Rng rng;
    rng_seed(&rng, c.seed);

    static Sweep sn, sd;
    Fit fn[NK], fd[NK];
    int seq[NK], path[16][NPATH];
    double pn[16], flop_cross;
    section_layers(&c, &rng);
    section_probe(&c, &rng);
    section_complexity_n(&c, &rng, &sn, fn);
    section_complexity_d(&c, &rng, &sd, fd);
    section_crossover(&c, &sn, &flop_cross);
    section_sequential(&c, seq, c.n_hi);
    int mp = section_paths(&c, path, pn);
    section_memory(&c, &sn);
    section_table1(&c, fn, fd, seq, c.n_hi, path, pn, mp);
    return 0;
}
