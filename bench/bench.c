/* bench.c - how fast is it? One table: the matrix multiply against the
 * machine's FMA peak and OpenBLAS, the whole model against PyTorch.
 *
 *   make bench                     (builds everything, then runs this)
 *   build/bench --help             every option
 *
 * What it measures, in this order (see bench/README.md for what it means):
 *   1. FMA peak: a loop of independent fused multiply-adds on every thread,
 *      the most floating-point work this CPU can do; every GFLOP/s figure
 *      below is also given as a percentage of it (the gemm table: of the
 *      peak measured again in the same process, around its figures).
 *   2. The steps from gemm_ref() to gemm() on one 512^3 product (1 thread
 *      except the last line), so each idea's speed-up is visible.
 *   3. gemm() vs OpenBLAS's cblas_sgemm at the model's shapes (Table 3 base
 *      layer sizes with the Annotated Transformer's batch of 80 x 10 tokens)
 *      and at attention's small per-head shapes. OpenBLAS runs twice: with
 *      the environment as it is, and in a child process with
 *      OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed (a forced core type
 *      can halve OpenBLAS's speed). Our gemm and the FMA peak are re-timed
 *      in that child too, and printed in its block: each ratio comes from
 *      one process, from the two figures printed beside it (figures.c).
 *   4. The Transformer: forward and training step (forward + label-smoothed
 *      loss + backward + Adam) for two configs, each in its own child
 *      process so the peak RSS belongs to that config alone; then the same
 *      model in PyTorch (bench/torch_ref.py) with the same thread count.
 *   5. A busy core: the training step on 1 and on 2 threads with a busy-loop
 *      process on one of two cores (the thread pool's goal: 2 threads never
 *      slower than 1.1x one thread). `build/bench busy` runs only this.
 *
 * Timing: every figure is the median of several runs; each run repeats the
 * operation until it takes at least ~20 ms. Other programs on the machine
 * add noise, so compare ratios taken in the same run.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef USE_OPENBLAS_REF
#define HAVE_BLAS 1
#include <cblas.h>
#else
#define HAVE_BLAS 0   /* built without OpenBLAS (no libopenblas-dev): its columns are left out */
#endif

#include "bench.h"
#include "core/clock.h"
#include "figures.h"
#include "io/cli.h"
#include "model/decode.h"
#include "model/model.h"
#include "ref/nn.h"
#include "fast/gemm.h"
#include "ref/ops.h"
#include "ref/optim.h"
#include "core/rng.h"
#include "model/train.h"
#include "fast/parallel.h"

#define PROG "bench"

static int g_reps = 5;
static const char *g_python = NULL;   /* interpreter with torch, or NULL */
static int g_avx512;                  /* this CPU runs AVX-512 (OpenBLAS's SkylakeX kernels) */
static int g_bad;                     /* figures printed above the FMA peak beside them */

/* ---- timing helpers ---------------------------------------------------------- */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}


static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* ---- 1. FMA peak -------------------------------------------------------------------
 * Independent accumulators per thread: an FMA takes 4 cycles and a core
 * starts up to 2 per cycle, so at least 8 must be in flight to keep both
 * units busy. Each FMA on a 16-float register is 32 flops (AVX2: 8 floats, 16).
 * AVX2 has 16 registers: 12 accumulators, x and y (with 16 accumulators two
 * of them lived in memory, and Zen 3 measured half its peak).
 *
 * What the compiler makes of the AVX-512 loop (objdump -d build/bench,
 * fma_loop; GCC 12, -O2 -march=native -ffp-contract=off: the flag only
 * stops a*b+c written in C from becoming an FMA, an intrinsic stays one):
 *     inc    %rdx
 *     vfmadd132ps %zmm1,%zmm0,%zmm2     x 16: zmm2..zmm17, x in zmm1, y in zmm0
 *     cmp    %rdx,%rdi
 *     jne    <loop>
 * all 16 accumulators in registers, no load or store in the loop: one
 * core's FMA units run flat out. So the loop is not why `make bench` once
 * printed 249.2 GFLOP/s on 2 threads and 252.5 on 1 (2026-12-03, issue 35):
 * 2 threads at the rate of 1 is what 2 threads on one core's worth of FMA
 * units give. A busy loop on one of the two CPUs reproduces it (2 threads
 * 96.6 GFLOP/s where they gave 225.2 alone), and so does a host that runs
 * both vCPUs on one physical core. The same run's gemm figures say the same:
 * ours 231.9 in the bench's process, about 430 in a child started after it.
 * Hence: the peak runs on the same kind of threads as the figures (plain
 * POSIX threads, so a build without OpenMP measures all of them too), each
 * run ~20 ms, best of many; the gemm table measures it again in each of its
 * processes, before and after its figures; the 2-thread figure is printed
 * beside the 1-thread one; and a figure above the peak measured beside it
 * is an ERROR (figures.c), which fails the bench. */
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define PEAK_ACC 12
#else
#define PEAK_ACC 16
#endif
#if defined(__AVX512F__)
#define PEAK_LANES 16
#elif defined(__AVX2__) && defined(__FMA__)
#define PEAK_LANES 8
#else
#define PEAK_LANES 1
#endif
#define PEAK_FLOPS_PER_ITER (PEAK_ACC * PEAK_LANES * 2.0)
#define PEAK_MAX_THREADS 256

/* iters x PEAK_ACC independent FMAs; returns their sum so none is dropped */
static float fma_loop(long iters) {
#if defined(__AVX512F__)
    __m512 acc[16], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int j = 0; j < 16; j++) acc[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
    float s = 0;
    for (int j = 0; j < 16; j++) s += _mm512_reduce_add_ps(acc[j]);
    return s;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[PEAK_ACC], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int j = 0; j < PEAK_ACC; j++) acc[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int j = 0; j < PEAK_ACC; j++) acc[j] = _mm256_fmadd_ps(acc[j], x, y);
    float tmp[8], s = 0;
    for (int j = 0; j < PEAK_ACC; j++) {
        _mm256_storeu_ps(tmp, acc[j]);
        for (int l = 0; l < 8; l++) s += tmp[l];
    }
    return s;
#else
    float acc[16], s = 0;
    for (int j = 0; j < 16; j++) acc[j] = (float)j;
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < 16; j++) acc[j] = fmaf(acc[j], 0.999999f, 1e-7f);
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
#endif
}

typedef struct {
    long iters;
    double t0, t1;   /* this thread's loop: start and end (now_s) */
    float sum;
} PeakThread;

static void *peak_thread(void *p) {
    PeakThread *a = p;
    a->t0 = clock_wall_s();
    a->sum = fma_loop(a->iters);
    a->t1 = clock_wall_s();
    return NULL;
}

/* One run: `threads` threads (this one and threads - 1 new ones) each run
 * the loop; GFLOP/s = all their FMAs / (last end - first start). */
static double fma_peak_run(int threads, long iters) {
    PeakThread a[PEAK_MAX_THREADS];
    pthread_t tid[PEAK_MAX_THREADS];
    if (threads > PEAK_MAX_THREADS) threads = PEAK_MAX_THREADS;
    int started = 1;
    for (int t = 0; t < threads; t++) a[t].iters = iters;
    for (int t = 1; t < threads; t++, started++)
        if (pthread_create(&tid[t], NULL, peak_thread, &a[t]) != 0) break;
    peak_thread(&a[0]);
    for (int t = 1; t < started; t++) pthread_join(tid[t], NULL);
    double first = a[0].t0, last = a[0].t1;
    volatile float sink = 0;
    for (int t = 0; t < started; t++) {
        if (a[t].t0 < first) first = a[t].t0;
        if (a[t].t1 > last) last = a[t].t1;
        sink += a[t].sum;
    }
    (void)sink;
    return started * (double)iters * PEAK_FLOPS_PER_ITER / (last - first) / 1e9;
}

/* The best of `runs` runs of ~20 ms each, after ~0.1 s of warm-up (wakes
 * the threads, raises the clock, and sizes the runs). The best, not the
 * median: the peak is what the hardware can do, and other jobs on the
 * machine only ever slow a run down. */
static double fma_peak(int threads, int runs) {
    long iters = 1 << 18;
    double t0 = clock_wall_s(), rate = 0;
    while (clock_wall_s() - t0 < 0.1) rate = fma_peak_run(threads, iters);
    iters = (long)(0.02 * rate * 1e9 / threads / PEAK_FLOPS_PER_ITER) + 1;
    double best = 0;
    for (int i = 0; i < runs; i++) {
        double r = fma_peak_run(threads, iters);
        if (r > best) best = r;
    }
    return best;
}
#define PEAK_RUNS (g_reps * 3 > 15 ? 15 : g_reps * 3)

/* ---- 3. gemm shapes -------------------------------------------------------------- */
typedef struct {
    const char *name;
    int tA, tB, M, N, K;
    int calls;        /* gemm calls per timing (the B*h heads of attention) */
} Shape;

/* Annotated Transformer copy task: batch 80 x 10 source tokens = 800 rows;
 * Table 3 base layer widths d_model = 512, d_ff = 2048, h = 8, d_k = 64. */
static const Shape shapes[] = {
    {"FFN  x W1    800x512 . 512x2048", 0, 0, 800, 2048, 512, 1},
    {"FFN  h W2    800x2048 . 2048x512", 0, 0, 800, 512, 2048, 1},
    {"proj x W_Q   800x512 . 512x512", 0, 0, 800, 512, 512, 1},
    {"bwd dX=dY W1^T 800x2048 . (512x2048)^T", 0, 1, 800, 512, 2048, 1},
    {"bwd dW1=X^T dY (800x512)^T . 800x2048", 1, 0, 512, 2048, 800, 1},
    {"logits x E^T 720x512 . (11x512)^T", 0, 1, 720, 11, 512, 1},
    {"attn QK^T 640 x (10x64 . 64x10)", 0, 1, 10, 10, 64, 640},
    {"attn PV   640 x (10x10 . 10x64)", 0, 0, 10, 64, 10, 640},
    {"attn QK^T 32 x (128x64 . 64x128)", 0, 1, 128, 128, 64, 32},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))
_Static_assert(sizeof shapes / sizeof shapes[0] <= GEMM_MAX_SHAPES, "GEMM_MAX_SHAPES (figures.h) too small");

typedef struct {
    float *A, *B, *C;
    size_t a_stride, b_stride, c_stride;   /* per call (heads are separate) */
} ShapeData;

static ShapeData shape_alloc(const Shape *s, Rng *rng) {
    ShapeData d;
    d.a_stride = (size_t)s->M * s->K;
    d.b_stride = (size_t)s->K * s->N;
    d.c_stride = (size_t)s->M * s->N;
    d.A = malloc(sizeof(float) * d.a_stride * s->calls);
    d.B = malloc(sizeof(float) * d.b_stride * s->calls);
    d.C = malloc(sizeof(float) * d.c_stride * s->calls);
    if (!d.A || !d.B || !d.C) cli_fail(PROG, "out of memory for shape %s", s->name);
    rng_fill_uniform(rng, d.A, d.a_stride * s->calls, -1, 1);
    rng_fill_uniform(rng, d.B, d.b_stride * s->calls, -1, 1);
    /* C's pages touched now, as a model's buffers are before its steps: a
     * first write inside the timed product faults each page in while the
     * other thread waits for that chunk */
    memset(d.C, 0, sizeof(float) * d.c_stride * s->calls);
    return d;
}

static void shape_free(ShapeData *d) {
    free(d->A);
    free(d->B);
    free(d->C);
}

/* One "operation" = s->calls gemms. which: 0 ours, 1 OpenBLAS. */
static void shape_run(const Shape *s, const ShapeData *d, int which) {
    int lda = s->tA ? s->M : s->K, ldb = s->tB ? s->K : s->N;
    for (int c = 0; c < s->calls; c++) {
        const float *A = d->A + c * d->a_stride, *B = d->B + c * d->b_stride;
        float *C = d->C + c * d->c_stride;
        if (which == 0) {
            gemm(s->tA, s->tB, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
        } else {
#ifdef USE_OPENBLAS_REF
            cblas_sgemm(CblasRowMajor, s->tA ? CblasTrans : CblasNoTrans, s->tB ? CblasTrans : CblasNoTrans,
                        s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
#endif
        }
    }
}

/* Seconds per operation: repeat until >= 20 ms, divide. */
static double time_op(void (*fn)(const void *), const void *arg) {
    fn(arg);
    int n = 1;
    for (;;) {
        double t0 = clock_wall_s();
        for (int i = 0; i < n; i++) fn(arg);
        double t = clock_wall_s() - t0;
        if (t >= 0.02 || n >= (1 << 20)) return t / n;
        n = t > 0.002 ? (int)(n * 0.025 / t) + 1 : n * 8;
    }
}

typedef struct {
    const Shape *s;
    const ShapeData *d;
    int which;
} ShapeArg;

static void shape_fn(const void *p) {
    const ShapeArg *a = p;
    shape_run(a->s, a->d, a->which);
}

/* Times ours, then OpenBLAS, per shape, and returns GFLOP/s; and the FMA
 * peak of this process before the first shape and after the last (into
 * r->peak_before, r->peak_after), so each block of the table carries a peak
 * measured beside its figures. Not interleaved call by call: after each
 * call OpenBLAS's worker threads keep spinning on a core for up to ~0.1 s
 * (its THREAD_TIMEOUT) before they sleep, which would steal a core from
 * whatever runs next. So: all of ours first, then all of OpenBLAS's, then a
 * pause before the next shape (and before the last peak). */
static void gemm_table_measure(BlasRun *r, int threads) {
    double *ours = r->ours, *blas = r->blas;
    r->peak_before = fma_peak(threads, PEAK_RUNS);
    Rng rng;
    rng_seed(&rng, 1);
#ifdef USE_OPENBLAS_REF
    openblas_set_num_threads(parallel_threads());
#endif
    for (int i = 0; i < NSHAPES; i++) {
        const Shape *s = &shapes[i];
        ShapeData d = shape_alloc(s, &rng);
        double t[2][16];
        int reps = g_reps > 16 ? 16 : g_reps;
        for (int w = 0; w < 1 + HAVE_BLAS; w++) {
            ShapeArg a = {s, &d, w};
            for (int r = 0; r < reps; r++) t[w][r] = time_op(shape_fn, &a);
        }
        usleep(200000);
        double flops = 2.0 * s->M * s->N * s->K * s->calls;
        ours[i] = flops / median(t[0], reps) / 1e9;
        blas[i] = HAVE_BLAS ? flops / median(t[1], reps) / 1e9 : 0;
        shape_free(&d);
    }
    r->peak_after = fma_peak(threads, PEAK_RUNS);
    r->ok = 1;
}

/* ---- child processes ---------------------------------------------------------------- */
static char self_path[4096];

/* Runs cmd with popen and calls on_line for every output line. Returns the
 * exit status (or -1 if it could not run). */
static int run_child(const char *cmd, void (*on_line)(const char *, void *), void *ctx) {
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[1024];
    while (fgets(line, sizeof line, f)) on_line(line, ctx);
    int st = pclose(f);
    return st == -1 ? -1 : WEXITSTATUS(st);
}

/* One OpenBLAS setting (BlasRun, figures.h) from its child's lines: the
 * kernels OpenBLAS picked, the peaks, ours / OpenBLAS GFLOP/s per shape. */
static void parse_gemm_line(const char *line, void *ctx) {
    BlasRun *r = ctx;
    int i;
    double o, b;
    if (sscanf(line, "GEMM %d %lf %lf", &i, &o, &b) == 3 && i >= 0 && i < NSHAPES) {
        r->ours[i] = o;
        r->blas[i] = b;
        r->ok = 1;
    } else if (sscanf(line, "PEAK %lf %lf", &o, &b) == 2) {
        r->peak_before = o;
        r->peak_after = b;
    } else if (sscanf(line, "CORE %63s", r->core) == 1) {
    }
}

static const char *blas_core(void) {
#ifdef USE_OPENBLAS_REF
    return openblas_get_corename();
#else
    return "(not linked)";
#endif
}

/* ---- 4. the model ------------------------------------------------------------------- */
typedef struct {
    const char *key, *title;
    Config cfg;
    int B, Ts, Tt;
    int steps;        /* timed steps (median) */
    int fwd_only;     /* 1: time the inference forward pass only */
} ModelCase;

static Config config_of(int N, int d_model, int d_ff, int h, int vocab, int max_len) {
    Config c = {0};
    c.N = N;
    c.d_model = d_model;
    c.d_ff = d_ff;
    c.h = h;
    c.d_k = c.d_v = d_model / h;
    c.vocab = vocab;
    c.max_len = max_len;
    c.dropout = 0.1f;
    c.pre_ln = 0;
    c.pad_id = 0;
    return c;
}

/* "ch08": the small model chapter 08 trains by default on the copy task;
 * "annotated": The Annotated Transformer's copy-task model (N=2,
 * d_model=512, d_ff=2048, h=8, batch 80 of 10 source / 9 target tokens,
 * vocabulary 11). Both use the copy task's tokens (train.h). */
static ModelCase model_cases[3];
enum { N_MODEL_CASES = 3 };

static void model_cases_init(void) {
    /* chapter 08's defaults: --layers 2 --d-model 64 --d-ff 128 --heads 4 --batch 128 */
    model_cases[0] = (ModelCase){"ch08", "ch08 default: N=2 d_model=64 d_ff=128 h=4, B=128",
                                 config_of(2, 64, 128, 4, 11, 10), 128, 10, 9, 21, 0};
    model_cases[1] = (ModelCase){"annotated", "Annotated: N=2 d_model=512 d_ff=2048 h=8, B=80",
                                 config_of(2, 512, 2048, 8, 11, 10), 80, 10, 9, 7, 0};
    /* Table 3's base model, vocabulary 37000, a batch of 8 x 32 tokens: forward only (issue: "seconds, not minutes") */
    model_cases[2] = (ModelCase){"base", "Table 3 base: N=6 d_model=512 d_ff=2048 h=8 V=37000, B=8 T=32",
                                 config_of(6, 512, 2048, 8, 37000, 64), 8, 32, 32, 3, 1};
}

static long vm_hwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* The child: build, time forward and training steps, print one MODEL line.
 * The step is train_step_batch, what chapter 08 runs: forward with dropout,
 * label-smoothed loss, backward, then the gradient check (every gradient
 * finite?), the global norm and Adam (one op, adam_step). */
static int model_child(const char *key) {
    const ModelCase *mc = NULL;
    for (int i = 0; i < N_MODEL_CASES; i++)
        if (strcmp(model_cases[i].key, key) == 0) mc = &model_cases[i];
    if (!mc) cli_fail(PROG, "unknown model config '%s'", key);
    Model m = {0};
    Trainer tr = {0};
    char err[256];
    if (model_build(&m, &mc->cfg, mc->B, mc->Ts, mc->Tt, 1234, err, sizeof err)) {
        printf("MODEL_ERROR %s\n", err);
        return 2;
    }
    TrainHyper hp = train_hyper_paper();
    hp.warmup = 400;
    if (!mc->fwd_only && trainer_init(&tr, &m, &hp, mc->B, mc->Ts, 7, err, sizeof err)) {
        printf("MODEL_ERROR %s\n", err);
        return 2;
    }
    int B = mc->B, Ts = mc->Ts, Tt = mc->Tt, V = mc->cfg.vocab;
    int *src = malloc(sizeof(int) * B * Ts), *tgt_in = malloc(sizeof(int) * B * Tt);
    int *tgt_out = malloc(sizeof(int) * B * Tt);
    if (!src || !tgt_in || !tgt_out) cli_fail(PROG, "out of memory");
    /* copy task: [start, x1..x9] -> predict x1..x9 from [start, x1..x8] */
    Rng rng;
    rng_seed(&rng, 7);
    for (int b = 0; b < B; b++) {
        src[b * Ts] = 1;
        for (int t = 1; t < Ts; t++) src[b * Ts + t] = 2 + rng_int(&rng, V - 2);
        for (int t = 0; t < Tt; t++) {
            tgt_in[b * Tt + t] = src[b * Ts + t];
            tgt_out[b * Tt + t] = t + 1 < Ts ? src[b * Ts + t + 1] : 0;
        }
    }
    int reps = mc->steps;
    double fwd[32], step[32];
    if (reps > 32) reps = 32;
    StepStats st = {0};
    double trip0 = core_trip_ns();   /* where the host put the cores, before and after */
    for (int r = -2; r < reps; r++) {   /* 2 warm-up rounds */
        double t0 = clock_wall_s();
        model_forward(&m, src, tgt_in, B, Ts, Tt, 0);
        double t1 = clock_wall_s();
        if (mc->fwd_only) {
            if (r >= 0) fwd[r] = t1 - t0, step[r] = 0;
            continue;
        }
        TrainStatus ts = train_step_batch(&tr, src, tgt_in, tgt_out, B, Ts, Tt, &st);
        double t2 = clock_wall_s();
        if (ts != TRAIN_OK) {
            printf("MODEL_ERROR step %d: %s\n", r, train_status_str(ts));
            return 1;
        }
        if (r >= 0) {
            fwd[r] = t1 - t0;
            step[r] = t2 - t1;
        }
    }
    double trip1 = core_trip_ns();
    printf("MODEL fwd_ms=%.4f step_ms=%.4f rss_kb=%ld params=%zu loss=%.4f trip_ns=%.0f-%.0f\n",
           1e3 * median(fwd, reps), 1e3 * median(step, reps), vm_hwm_kb(), m.params.n, st.loss, trip0, trip1);
    free(src); free(tgt_in); free(tgt_out);
    trainer_free(&tr);
    model_free(&m);
    return 0;
}

typedef struct {
    double fwd_ms, step_ms;
    long rss_kb;
    int ok;
    char err[256];
    char core[64];        /* PyTorch: the OpenBLAS core its library picked */
    double load0, load1;  /* 1-minute load average before and after */
    double trip0, trip1;  /* ours: core-to-core round trip (ns) before and after */
    int runs;             /* > 1: medians of that many runs (model_runs_merge),  */
    double step_lo, step_hi;  /* the steps' range over them                     */
} ModelResult;

static void parse_model_line(const char *line, void *ctx) {
    ModelResult *r = ctx;
    if (sscanf(line, "MODEL fwd_ms=%lf step_ms=%lf rss_kb=%ld", &r->fwd_ms, &r->step_ms, &r->rss_kb) == 3) {
        r->ok = 1;
        const char *t = strstr(line, "trip_ns=");
        if (t) sscanf(t, "trip_ns=%lf-%lf", &r->trip0, &r->trip1);
    }
    else if (sscanf(line, "TORCH fwd_ms=%lf step_ms=%lf rss_kb=%ld", &r->fwd_ms, &r->step_ms, &r->rss_kb) == 3)
        r->ok = 1;
    else if (sscanf(line, "TORCH_CORE %63s", r->core) == 1) {
    } else if (!strncmp(line, "MODEL_ERROR ", 12) || !strncmp(line, "TORCH_ERROR ", 12))
        snprintf(r->err, sizeof r->err, "%.255s", line + 12);
}

static void ignore_line(const char *line, void *ctx) {
    (void)line;
    (void)ctx;
}

/* Finds a python3 that can import torch: the one on PATH, then Debian's. */
static void find_python(const char *script) {
    static const char *cands[] = {"python3", "/usr/bin/python3"};
    char cmd[1024];
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --check >/dev/null 2>&1", cands[i], script);
        if (run_child(cmd, ignore_line, NULL) == 0) {
            g_python = cands[i];
            return;
        }
    }
}

/* ---- 2. the steps from gemm_ref to gemm -------------------------------------------- */
/* peak, peak1: the FMA peak on all threads and on one (section 1, as
 * printed there); % peak and speed-up are made of the printed figures */
static void steps_table(double peak, double peak1) {
    /* B (K x N) is 4 MiB: bigger than a core's L2 (1-2 MiB), as a layer's weights
     * are, so that blocking has something to do */
    const int M = 256, K = 1024, N = 1024;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    float *pa = malloc(sizeof(float) * 4 * 256), *pb = malloc(sizeof(float) * 256 * N);
    if (!A || !B || !C || !R || !pa || !pb) cli_fail(PROG, "out of memory");
    Rng rng;
    rng_seed(&rng, 2);
    rng_fill_uniform(&rng, A, (size_t)M * K, -1, 1);
    rng_fill_uniform(&rng, B, (size_t)K * N, -1, 1);
    double flops = 2.0 * M * N * K;
    int threads = parallel_threads();
    printf("\nFrom the triple loop to gemm(): C = A B, %dx%d . %dx%d (1 thread unless said)\n", M, K, K, N);
    printf("  %-44s %9s %9s %8s %8s\n", "step", "ms", "GFLOP/s", "% peak", "speed-up");
    double base = 0;
    for (int v = 0; v < 6; v++) {
        const char *name[] = {"0 gemm_ref: i,j,k loop, double sum",
                              "1 loop order i,k,j (unit stride)",
                              "2 + cache blocking (128x128 blocks of B)",
                              "3 + packing, 4x16 register tile (plain C)",
                              "4 + SIMD micro-kernel = gemm(), 1 thread",
                              "5 + threads = gemm()"};
        int reps = v == 0 ? 1 : (g_reps < 3 ? g_reps : 3);
        double t[8];
        for (int r = 0; r < reps; r++) {
            parallel_set_threads(v == 5 ? threads : 1);
            double t0 = clock_wall_s();
            switch (v) {
            case 0: gemm_ref(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); break;
            case 1: gemm_step_reorder(C, A, B, M, N, K); break;
            case 2: gemm_step_blocked(C, A, B, M, N, K); break;
            case 3: gemm_step_packed(C, A, B, M, N, K, pa, pb); break;
            default:
                for (int k = 0; k < 10; k++) gemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            }
            t[r] = (clock_wall_s() - t0) / (v >= 4 ? 10 : 1);
        }
        parallel_set_threads(threads);
        if (v == 0) memcpy(R, C, sizeof(float) * M * N);
        double maxd = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) maxd = fmax(maxd, fabs(C[i] - R[i]));
        if (maxd > 1e-3) printf("  (step %d differs from gemm_ref by %.3g!)\n", v, maxd);
        double tm = median(t, reps), gf = flops / tm / 1e9, pk = v == 5 ? peak : peak1;
        if (v == 0) base = tm;
        printf("  %-44s %9.2f %9.1f %7.1f%% %7.1fx\n", name[v], tm * 1e3, gf, 100 * fig_ratio(gf, pk, 1),
               fig_ratio(base * 1e3, tm * 1e3, 2));
        if (fig_shown(gf, 1) > fig_shown(pk, 1)) {
            printf("  ERROR: step %d's %.1f GFLOP/s is above the FMA peak printed above (%.1f)\n", v, gf, pk);
            g_bad++;
        }
    }
    printf("  (%% peak: of the FMA peak on 1 thread, %.1f; for step 5, of the peak on %d threads, %.1f;\n"
           "  speed-up: step 0's ms / this step's ms)\n", peak1, threads, peak);
    free(A); free(B); free(C); free(R); free(pa); free(pb);
}

/* ---- the main table ------------------------------------------------------------------- */
/* ---- 5. decoding: the KV cache (chapter 09) ------------------------------------------
 * Greedy decoding of 256 tokens with the paper's layer sizes (N=6, d_model=512,
 * d_ff=2048, h=8), from a 16-token source, with the KV cache (common/model/decode.c)
 * and without it (every step reruns model_decode over the whole prefix).
 * Vocabulary 1000, not 37000: the uncached path computes every position's
 * logits each step, so a large vocabulary would only widen the gap. Cached:
 * median of --reps runs (at least 5); uncached: one run (it takes 15-25 s).
 * The cached step is one row per sentence, bound by reading 84 MB of
 * weights per token; its row ops share the work among the threads
 * (decode.c), as the uncached path's large products do; so the table is
 * timed with all threads and with one. Neither path calls OpenBLAS. The
 * 1-minute load average before and after each line says whether another
 * program held a core meanwhile. `build/bench decode` runs this part alone.
 * Returns 0, or 1 if the two decoders disagree. */
static int bench_decode_run(Decoder *d, const Config *c, const int *src, int TS, int threads) {
    char err[256];
    parallel_set_threads(threads);
    DecodeOpts o = decode_opts_paper(1, -1);
    o.beam = 1, o.offset = d->max_T - TS;      /* exactly max_T tokens: no end symbol */
    enum { MAXR = 15 };
    int reps = g_reps < 5 ? 5 : g_reps > MAXR ? MAXR : g_reps;
    double cached[MAXR];
    int toks[1024];
    double l0 = load_1min();
    for (int r = 0; r < reps; r++) {
        double t0 = clock_wall_s();
        if (decode_greedy(d, &o, src, 1, TS, err, sizeof err)) cli_fail(PROG, "decode bench: %s", err);
        cached[r] = clock_wall_s() - t0;
    }
    double l1 = load_1min();
    int n = d->out_len[0];
    memcpy(toks, d->out, sizeof(int) * n);
    o.cached = 0;
    double t0 = clock_wall_s();
    if (decode_greedy(d, &o, src, 1, TS, err, sizeof err)) cli_fail(PROG, "decode bench: %s", err);
    double uncached = clock_wall_s() - t0, tc = median(cached, reps), l2 = load_1min();
    int same = n == d->out_len[0] && !memcmp(toks, d->out, sizeof(int) * n);
    double fc = 0, fu = 0;
    for (int t = 0; t < n; t++) fc += decode_flops_cached(c, t, TS), fu += decode_flops_uncached(c, t, TS);
    printf("  %d thread%s:\n", threads, threads > 1 ? "s" : " ");
    printf("    %-32s %10.3f %10.1f %10.1f %8.1f   median of %d, load %.1f-%.1f\n", "KV cache (common/model/decode.c)", tc,
           n / tc, fc / 1e9, fc / 1e9 / tc, reps, l0, l1);
    printf("    %-32s %10.3f %10.1f %10.1f %8.1f   one run,      load %.1f-%.1f\n",
           "no cache: whole prefix every step", uncached, n / uncached, fu / 1e9, fu / 1e9 / uncached, l1, l2);
    printf("    ratio %d thread%s: the cache is %.1fx faster (target >= 10x: %s); tokens %s\n", threads,
           threads > 1 ? "s" : "", fig_ratio(uncached, tc, 3), fig_ratio(uncached, tc, 3) >= 10 ? "met" : "MISSED",
           same ? "identical" : "DIFFERENT (a bug)");
    return same ? 0 : 1;
}

static int bench_decode(int threads) {
    enum { TS = 16, OUT = 256 };
    Config c = config_of(6, 512, 2048, 8, 1000, OUT);
    c.dropout = 0;
    Model m = {0};
    Decoder d;
    char err[256];
    if (model_build(&m, &c, 1, TS, OUT, 1234, err, sizeof err) ||
        decoder_new(&d, &m, 1, 1, TS, OUT, err, sizeof err))
        cli_fail(PROG, "decode bench: %s", err);
    int src[TS];
    Rng rng;
    rng_seed(&rng, 9);
    src[0] = 1;
    for (int t = 1; t < TS; t++) src[t] = 2 + rng_int(&rng, c.vocab - 2);
    printf("\nGreedy decoding, N=6 d_model=512 d_ff=2048 h=8 V=1000, source %d, output %d tokens\n", TS, OUT);
    printf("  threads: %d, then 1; both decoders run this project's gemm() and row ops (fast/rows_fast.c); OpenBLAS\n"
           "  (core %s, OPENBLAS_CORETYPE=%s) is not called by either\n", threads, blas_core(),
           env_or("OPENBLAS_CORETYPE", "(unset)"));
    printf("    %-32s %10s %10s %10s %8s\n", "decoder", "total s", "tokens/s", "GFLOP", "GFLOP/s");
    int rc = bench_decode_run(&d, &c, src, TS, threads);
    if (threads > 1) rc |= bench_decode_run(&d, &c, src, TS, 1);
    parallel_set_threads(threads);
    printf("  A shared machine is noisy: a load above ~1 means another program held a core, and then\n"
           "  a worker gets fewer turns and the calling thread does more of each job (parallel.c).\n");
    decoder_free(&d);
    model_free(&m);
    return rc;
}

/* One run of a model child (ours: cmd; the load around it). */
static ModelResult model_run(const char *cmd) {
    ModelResult r = {0};
    r.load0 = load_1min();
    run_child(cmd, parse_model_line, &r);
    r.load1 = load_1min();
    return r;
}

/* Runs of our child for one config are repeated in rounds, the 2-thread
 * and 1-thread runs taking turns in each (the host's speed drifts by
 * several percent within minutes: runs minutes apart would compare the
 * host's moods, taking turns compares the runs). */
#define MODEL_ROUNDS 5

/* n runs as one result: median forward and step times, the largest RSS,
 * the loads of the first and last run, the trips' extremes, the steps'
 * range; failed if any run failed (its error) */
static ModelResult model_runs_merge(ModelResult *r, int n) {
    ModelResult m = r[0];
    double fwd[MODEL_ROUNDS], step[MODEL_ROUNDS];
    m.step_lo = m.step_hi = r[0].step_ms;
    for (int i = 0; i < n; i++) {
        if (!r[i].ok) return r[i];
        fwd[i] = r[i].fwd_ms;
        step[i] = r[i].step_ms;
        if (r[i].rss_kb > m.rss_kb) m.rss_kb = r[i].rss_kb;
        if (r[i].step_ms < m.step_lo) m.step_lo = r[i].step_ms;
        if (r[i].step_ms > m.step_hi) m.step_hi = r[i].step_ms;
        /* trips: -1 = not measured (floor.c) */
        if (r[i].trip0 >= 0 && (m.trip0 < 0 || r[i].trip0 < m.trip0)) m.trip0 = r[i].trip0;
        if (r[i].trip1 > m.trip1) m.trip1 = r[i].trip1;
    }
    m.fwd_ms = median(fwd, n);
    m.step_ms = median(step, n);
    m.load1 = r[n - 1].load1;
    m.runs = n;
    return m;
}

/* The 2-thread and the 1-thread run (cmd2, cmd1), the 1-thread one first
 * when one_first. */
static void model_run_both(const char *cmd2, const char *cmd1, int one_first, ModelResult *r2,
                           ModelResult *r1) {
    if (one_first) *r1 = model_run(cmd1);
    *r2 = model_run(cmd2);
    if (!one_first) *r1 = model_run(cmd1);
}

static void print_ours(const char *title, const char *who, const ModelCase *mc, const ModelResult *r,
                       double floor_ms) {
    int ntok = mc->B * mc->Tt;
    if (!r->ok)
        printf("  %-52s %-14s failed: %s\n", title, who, *r->err ? r->err : "(no output)\n");
    else if (mc->fwd_only)
        printf("  %-52s %-14s %8.2f %9s %9.0f %6.1f MiB %8s %6s  load %.1f-%.1f (forward only)\n", title, who,
               r->fwd_ms, "-", mc->B * (mc->Ts + mc->Tt) / (r->fwd_ms / 1e3), r->rss_kb / 1024.0, "-", "-",
               r->load0, r->load1);
    else {
        printf("  %-52s %-14s %8.2f %9.2f %9.0f %6.1f MiB ", title, who, r->fwd_ms, r->step_ms,
               ntok / (r->step_ms / 1e3), r->rss_kb / 1024.0);
        if (floor_ms > 0) printf("%8.2f %5.2fx", floor_ms, fig_ratio(r->step_ms, floor_ms, 2));
        else printf("%8s %6s", "-", "-");   /* no floor: no gemm table in this run */
        printf("  load %.1f-%.1f", r->load0, r->load1);
        if (r->trip0 >= 0 && r->trip1 >= 0) printf("  trip %.0f-%.0f ns", r->trip0, r->trip1);
        else printf("  trip n/a");
        if (r->runs > 1) printf("  runs %.2f-%.2f", r->step_lo, r->step_hi);
        printf("\n");
    }
}

/* the goals of the training-step work, each computed from this run */
typedef struct {
    double step2, step1, torch_tuned, floor_ms;
} CaseFigures;

static void verdict(const char *what, double got, const char *op, double goal) {
    int met = strcmp(op, "<=") == 0 ? got <= goal : got >= goal;
    printf("  %-66s %7.2f  goal %s %.2f: %s", what, got, op, goal, met ? "met" : "MISSED");
    if (!met) printf(" (by %.1f%%)", 100.0 * (strcmp(op, "<=") == 0 ? got / goal - 1 : 1 - got / goal));
    printf("\n");
}

static void model_section(int threads, int no_torch, const char *script, const BlasRun *runs, int env_forced) {
    char cmd[8192];
    /* the best sgemm rate of this run's gemm table, ours or OpenBLAS's */
    double best = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; runs[k].ok && i < NSHAPES; i++) {
            if (runs[k].ours[i] > best) best = runs[k].ours[i];
            if (runs[k].blas[i] > best) best = runs[k].blas[i];
        }
    if (!no_torch) {
        find_python(script);
        if (!g_python)
            printf("\nPyTorch not found (no python3 that can import torch): apt-get install -y python3-torch\n"
                   "(the PyTorch columns stay empty)\n");
    }
    printf("\nTransformer (post-LN encoder-decoder, Figure 1), copy task (vocab 11, Ts=10, Tt=9); medians\n"
           "  forward = inference forward; step = train_step_batch as chapter 08 runs it: forward with dropout\n"
           "    + label-smoothed loss + backward + gradient check + global norm + Adam\n"
           "  tokens/s: target tokens (B x Tt) per training step; RSS = peak resident memory of the process\n"
           "  floor = the step's matrix-product FLOPs / the best sgemm rate of the gemm table (%.1f GFLOP/s)\n"
           "  load = 1-minute load average before-after the figure (2 cores: above ~2 the cores are shared)\n"
           "  trip = a cache line's round trip between two threads (floor.c), lowest-highest over the\n"
           "    runs: on a VM it moves with where the host puts the cores, and the 2-thread step of\n"
           "    small models with it\n"
           "  ours: each figure the median of %d runs (each the median of its steps), the runs of one\n"
           "    config taking turns (2T, 1T; every other round 1T first); runs = their steps' range;\n"
           "    load = before the first run - after the last (with a busy core: the next table)\n",
           best, MODEL_ROUNDS);
    printf("  %-52s %-14s %8s %9s %9s %9s %8s %6s\n", "config", "who", "fwd ms", "step ms", "tokens/s",
           "peak RSS", "floor ms", "/floor");
    CaseFigures fig[N_MODEL_CASES] = {{0}};
    for (int i = 0; i < N_MODEL_CASES; i++) {
        const ModelCase *mc = &model_cases[i];
        const Config *c = &mc->cfg;
        CaseFigures *f = &fig[i];
        f->floor_ms = 1e3 * step_matmul_flops(c->N, c->d_model, c->d_ff, c->vocab, mc->B, mc->Ts, mc->Tt) /
                      (best * 1e9);
        char who[64], cmd2[sizeof cmd], cmd1[sizeof cmd];
        /* OPENBLAS_NUM_THREADS=1: OpenBLAS is linked into the bench for its
         * comparisons, not used by our model, but its idle server thread
         * would spin in sched_yield all through our child's run (6% of a
         * 2-thread child's samples, on a core our threads need) */
        snprintf(cmd2, sizeof cmd2, "OPENBLAS_NUM_THREADS=1 '%s' --child %s --threads %d", self_path, mc->key,
                 threads);
        snprintf(cmd1, sizeof cmd1, "OPENBLAS_NUM_THREADS=1 '%s' --child %s --threads 1", self_path, mc->key);
        /* each round: both threads and one thread, every other round one
         * thread first (the forward-only config: one run) */
        int rounds = mc->fwd_only ? 1 : MODEL_ROUNDS, multi = threads > 1 && !mc->fwd_only;
        ModelResult r2[MODEL_ROUNDS], r1[MODEL_ROUNDS];
        for (int k = 0; k < rounds; k++) {
            if (!multi) {
                r2[k] = model_run(cmd2);
                continue;
            }
            model_run_both(cmd2, cmd1, k % 2, &r2[k], &r1[k]);
        }
        ModelResult ours = model_runs_merge(r2, rounds);
        snprintf(who, sizeof who, "ours %dT", threads);
        print_ours(mc->title, who, mc, &ours, f->floor_ms);
        f->step2 = ours.ok ? ours.step_ms : 0;
        if (mc->fwd_only) continue;
        if (multi) {
            ModelResult one = model_runs_merge(r1, rounds);
            print_ours("", "ours 1T", mc, &one, f->floor_ms);
            f->step1 = one.ok ? one.step_ms : 0;
        }
        /* PyTorch multiplies matrices with OpenBLAS (Debian's build): as the
         * environment leaves it [A], tuned with OPENBLAS_CORETYPE and
         * OPENBLAS_L2_SIZE removed in that command alone [B], and with
         * SkylakeX forced [C]. The core is what the library says it picked. */
        for (int v = 0; g_python && v < 3; v++) {
            if ((v == 1 && !env_forced) || (v == 2 && !g_avx512)) continue;
            snprintf(cmd, sizeof cmd,
                     "%s OMP_NUM_THREADS=%d %s %s --N %d --d_model %d --d_ff %d --h %d --vocab %d "
                     "--max_len %d --dropout %g --B %d --Ts %d --Tt %d --steps %d --threads %d",
                     v ? runs[v].env : "env", threads, g_python, script, c->N, c->d_model, c->d_ff, c->h,
                     c->vocab, c->max_len, c->dropout, mc->B, mc->Ts, mc->Tt, mc->steps, threads);
            ModelResult t = model_run(cmd);
            const char *label = v == 0 ? "PyTorch[A]" : v == 1 ? "PyTorch[B]" : "PyTorch[C]";
            int ntok = mc->B * mc->Tt;
            if (!t.ok) {
                printf("  %-52s %-14s failed: %s\n", "", label, *t.err ? t.err : "(no output)\n");
                continue;
            }
            char note[128];
            snprintf(note, sizeof note, "  %s, OpenBLAS core %s", v == 0 ? "env as set" : v == 1 ? "tuned" : "SkylakeX",
                     *t.core ? t.core : "?");
            printf("  %-52s %-14s %8.2f %9.2f %9.0f %6.1f MiB %8.2f %5.2fx  load %.1f-%.1f\n", note, label,
                   t.fwd_ms, t.step_ms, ntok / (t.step_ms / 1e3), t.rss_kb / 1024.0, f->floor_ms,
                   fig_ratio(t.step_ms, f->floor_ms, 2), t.load0, t.load1);
            if (ours.ok)
                printf("  %-52s %-14s %7.2fx %8.2fx   (ours / PyTorch time: < 1 means ours is faster)\n", "",
                       "ratio", fig_ratio(ours.fwd_ms, t.fwd_ms, 2), fig_ratio(ours.step_ms, t.step_ms, 2));
            /* "tuned": the faster of [B] (or [A] when the env forces nothing) and [C] */
            if ((v == 1 || (v == 0 && !env_forced) || v == 2) && (!f->torch_tuned || t.step_ms < f->torch_tuned))
                f->torch_tuned = t.step_ms;
        }
    }
    printf("  [A]/[B]/[C]: the OpenBLAS settings of the gemm table; PyTorch's step also takes the global\n"
           "  gradient norm and checks it is finite before Adam, as ours does\n");

    /* the goals, from the figures above */
    printf("\nGoals (issue 12), from this run's figures (%d threads):\n", threads);
    const char *name[2] = {"ch08 default", "Annotated"};
    for (int i = 0; i < 2; i++) {
        const CaseFigures *f = &fig[i];
        char what[96];
        if (!f->step2) continue;
        snprintf(what, sizeof what, "%s: step / GEMM floor", name[i]);
        verdict(what, fig_ratio(f->step2, f->floor_ms, 2), "<=", i == 0 ? 2.5 : 1.25);
        if (f->torch_tuned) {
            snprintf(what, sizeof what, "%s: step / tuned PyTorch step (faster of [B], [C])", name[i]);
            verdict(what, fig_ratio(f->step2, f->torch_tuned, 2), "<=", i == 0 ? 0.2 : 0.6);
        }
        if (f->step1 && i == 0) {
            snprintf(what, sizeof what, "%s: %d-thread speed-up over 1 thread", name[i], threads);
            verdict(what, fig_ratio(f->step1, f->step2, 2), ">=", 1.6);
        }
    }
}

/* ---- 5. a busy core -----------------------------------------------------------
 * The thread pool's goal (issue 33): with another program busy on one of
 * two cores, 2 threads are never slower than 1.1x one thread. The bench
 * confines itself and its children to two CPUs (busy_cpus_take, where the
 * system lets it) and starts a busy loop on the second; then the training
 * step of the ch08 and Annotated configs runs with 1 and with 2 threads,
 * taking turns (every other round 1 thread first), MODEL_ROUNDS rounds,
 * the busy loop restarted for each; medians. */
static void busy_section(void) {
    int cpu[2];
    int pinned = busy_cpus_take(cpu);
    printf("\nA busy core: the training step with a busy-loop process on one of two cores; medians of %d runs\n",
           MODEL_ROUNDS);
    if (pinned)
        printf("  this bench and its children on CPUs %d and %d, the busy loop on CPU %d\n", cpu[0], cpu[1], cpu[1]);
    else
        printf("  (this system gives the bench no say over its CPUs: all of them used, the busy loop where\n"
               "  the scheduler puts it; on more than 2 cores the loop then takes a core nobody needs)\n");
    printf("  %-52s %-14s %8s %9s %9s %9s %8s %6s\n", "config", "who", "fwd ms", "step ms", "tokens/s",
           "peak RSS", "floor ms", "/floor");
    for (int i = 0; i < 2; i++) {                 /* ch08, Annotated */
        const ModelCase *mc = &model_cases[i];
        char cmd2[8192], cmd1[8192], what[96];
        snprintf(cmd2, sizeof cmd2, "OPENBLAS_NUM_THREADS=1 '%s' --child %s --threads 2", self_path, mc->key);
        snprintf(cmd1, sizeof cmd1, "OPENBLAS_NUM_THREADS=1 '%s' --child %s --threads 1", self_path, mc->key);
        ModelResult r2[MODEL_ROUNDS], r1[MODEL_ROUNDS];
        for (int k = 0; k < MODEL_ROUNDS; k++) {
            pid_t hog = hog_start(pinned ? cpu[1] : -1);
            model_run_both(cmd2, cmd1, k % 2, &r2[k], &r1[k]);
            hog_stop(hog);
        }
        ModelResult two = model_runs_merge(r2, MODEL_ROUNDS), one = model_runs_merge(r1, MODEL_ROUNDS);
        print_ours(mc->title, "ours 2T+busy", mc, &two, 0);
        print_ours("", "ours 1T+busy", mc, &one, 0);
        if (two.ok && one.ok) {
            snprintf(what, sizeof what, "%s, busy core: 2T step / 1T step", i == 0 ? "ch08 default" : "Annotated");
            verdict(what, fig_ratio(two.step_ms, one.step_ms, 2), "<=", 1.1);
        }
    }
    busy_cpus_give_back();
}

int main(int argc, char **argv) {
    int reps = 5, no_torch = 0, no_model = 0, no_steps = 0, no_decode = 0, nthreads = parallel_threads();
    int decode_only = argc >= 2 && !strcmp(argv[1], "decode");   /* build/bench decode */
    int busy_only = argc >= 2 && !strcmp(argv[1], "busy");       /* build/bench busy */
    if (decode_only || busy_only) argv[1] = argv[0], argc--, argv++;
    const char *child = "";
    const char *script = "bench/torch_ref.py";
    CliOption opts[] = {
        {"--reps", CLI_INT, &reps, "timed runs per figure (the median is shown)", 1, 15},
        {"--threads", CLI_INT, &nthreads, "threads for ours, OpenBLAS and PyTorch (default: OpenMP's)", 1, 256},
        {"--no-steps", CLI_FLAG, &no_steps, "skip the gemm_ref -> gemm steps table", 0, 0},
        {"--no-model", CLI_FLAG, &no_model, "skip the model timings (ours and PyTorch)", 0, 0},
        {"--no-torch", CLI_FLAG, &no_torch, "skip PyTorch", 0, 0},
        {"--no-decode", CLI_FLAG, &no_decode, "skip decoding speed (`bench decode`: only that)", 0, 0},
        {"--torch-script", CLI_STRING, &script, "the PyTorch reference script", 0, 0},
        {"--child", CLI_STRING, &child, "internal: gemm | ch08 | annotated | base (one part, machine-readable)", 0, 0},
    };
    cli_parse(argc, argv, PROG,
              "Speed table: gemm vs FMA peak and OpenBLAS, model steps vs PyTorch.", opts, CLI_COUNT(opts));
    g_reps = reps;
    g_avx512 = __builtin_cpu_supports("avx512f");
    setvbuf(stdout, NULL, _IOLBF, 0);   /* show each table as it is done */
    model_cases_init();
    parallel_set_threads(nthreads);
    int threads = parallel_threads();
    if (decode_only) return bench_decode(threads);

    if (*child) {
        if (!strcmp(child, "gemm")) {
            static BlasRun r;
            gemm_table_measure(&r, threads);
            printf("CORE %s\n", blas_core());
            printf("PEAK %.3f %.3f\n", r.peak_before, r.peak_after);
            for (int i = 0; i < NSHAPES; i++) printf("GEMM %d %.3f %.3f\n", i, r.ours[i], r.blas[i]);
            return 0;
        }
        return model_child(child);
    }

    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0) cli_fail(PROG, "cannot find my own executable (/proc/self/exe)");
    self_path[len] = '\0';
    if (busy_only) {
        busy_section();
        return 0;
    }

    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
#if defined(__AVX512F__)
    const char *isa = "AVX-512 (14x32 micro-kernel)";
#elif defined(__AVX2__) && defined(__FMA__)
    const char *isa = "AVX2 (6x16 micro-kernel)";
#else
    const char *isa = "portable C";
#endif
    printf("attention-in-c bench, %s; %d threads; gemm path %s\n", date, threads, isa);
    printf("env: OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s OMP_NUM_THREADS=%s\n",
           env_or("OPENBLAS_CORETYPE", "(unset)"), env_or("OPENBLAS_L2_SIZE", "(unset)"),
           env_or("OMP_NUM_THREADS", "(unset)"));
    printf("medians of %d runs; other jobs on this machine add noise: compare ratios.\n", g_reps);

    /* 1. peak */
    double peak = fma_peak(threads, PEAK_RUNS), peak1 = threads > 1 ? fma_peak(1, PEAK_RUNS) : peak;
    printf("\nFMA peak (best of %d runs of ~20 ms): %.1f GFLOP/s with %d thread%s", PEAK_RUNS, peak, threads,
           threads > 1 ? "s" : "");
    if (threads > 1) {
        double x = fig_ratio(peak, peak1, 1);
        printf(", %.1f with 1 thread: %.2fx\n", peak1, x);
        if (x < 0.75 * threads)
            printf("  (%d threads ran only %.2fx as fast as one: they did not each have a core of their own;\n"
                   "  another program was running, or the VM's host put the vCPUs on one physical core.\n"
                   "  Figures taken in that state are low; the gemm table measures the peak again)\n",
                   threads, x);
    } else {
        printf("\n");
    }

    /* 2. steps */
    if (!no_steps) steps_table(peak, peak1);

    /* 3. gemm vs OpenBLAS, env as set (here) and unset (child) */
    /* [A] this process, environment as it is; [B] a child without the
     * variables (only when they are set: otherwise it is [A] again);
     * [C] a child with OPENBLAS_CORETYPE=SkylakeX, OpenBLAS's AVX-512
     * kernels, the strongest setting it has for a CPU with AVX-512 (on
     * one without, such as AMD's Zen 3, they would stop on an illegal
     * instruction: [C] is not run, and [B] is the tuned figure). */
    int env_forced = getenv("OPENBLAS_CORETYPE") || getenv("OPENBLAS_L2_SIZE");
    static BlasRun runs[GEMM_SETTINGS] = {
        {.label = "[A] env as set"},
        {.label = "[B] CORETYPE/L2_SIZE unset", .env = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"},
        {.label = "[C] CORETYPE=SkylakeX", .env = "env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX"},
    };
    if (!env_forced)
        runs[1].not_run = "[B] = [A]: the environment sets neither OPENBLAS_CORETYPE nor OPENBLAS_L2_SIZE";
    if (!g_avx512)
        runs[2].not_run = "[C] not run: this CPU has no AVX-512, so OpenBLAS's SkylakeX kernels cannot run on it";
    char cmd[8192];
    gemm_table_measure(&runs[0], threads);
    snprintf(runs[0].core, sizeof runs[0].core, "%s", blas_core());
    for (int k = 1; k < GEMM_SETTINGS && HAVE_BLAS; k++) {
        if (runs[k].not_run) continue;
        snprintf(cmd, sizeof cmd, "%s '%s' --child gemm --reps %d --threads %d", runs[k].env, self_path, g_reps,
                 threads);
        if (run_child(cmd, parse_gemm_line, &runs[k]) != 0) runs[k].ok = 0;
    }
    const char *names[NSHAPES];
    for (int i = 0; i < NSHAPES; i++) names[i] = shapes[i].name;
    g_bad += gemm_table_write(stdout, threads, names, NSHAPES, runs, HAVE_BLAS);

    /* 4. the model */
    if (!no_model) model_section(threads, no_torch, script, runs, env_forced);
    if (!no_model) busy_section();
    int rc = !no_decode && bench_decode(threads);
    if (g_bad) {
        printf("\nbench: %d figure%s above the FMA peak measured beside %s (the ERROR lines above): the\n"
               "peak's runs were slowed, so its %% of peak mean nothing; rerun on a quiet machine\n",
               g_bad, g_bad > 1 ? "s" : "", g_bad > 1 ? "them" : "it");
        rc = 1;
    }
    return rc;
}
