/* cuda_validate.c - check every CUDA kernel against the CPU, then time them.
 *
 * What `make cuda-check` runs on a GPU machine (through cuda/cuda_check.sh):
 *
 *   1. Validation: every check of cuda/selftest.c at its larger size: random
 *      inputs, the CPU function from common/ as the reference, every GPU
 *      version of the op; prints the largest |gpu - cpu| and PASS/FAIL
 *      against a float32 tolerance.
 *   2. Benchmarks, each the median of --reps runs timed with CUDA events:
 *      - matmul v1 naive / v2 tiled / v3 register-blocked against cuBLAS at
 *        the base model's shapes (Table 3: d_model 512, d_ff 2048, vocab
 *        37000; 4096 tokens per batch), in TFLOP/s (2*M*N*K flops);
 *      - plain attention (scores in memory) against the fused kernels at
 *        lengths 64..1024 (B=4, h=8, d_k=d_v=64), in TFLOP/s (4*B*h*T*T*d);
 *      - the row and element-wise kernels in GB/s (bytes that must move at
 *        least once: inputs read + outputs written).
 *   It writes everything to one report file as well as the terminal.
 *
 * Not part of libaiyn.a (a library linked into every chapter must not hold
 * a main): cuda_check.sh builds it with gcc against the library.
 *
 *   build/cuda_validate [--out DIR] [--reps N]   validate + bench
 *   build/cuda_validate --probe                  exit 0 if a GPU is there, 1 if not
 *
 * Exit status: 0 when everything passed (or there is no GPU: nothing to do),
 * 1 when a kernel disagreed with the CPU, 2 for a bad flag.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cli.h"
#include "model/device.h"
#include "kernels.h"
#include "core/rng.h"
#include "io/show.h"
#include "io/plot.h"

/* ---- output: the terminal and the report file at once ---------------------------- */

static FILE *report = NULL;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (report) {
        va_start(ap, fmt);
        vfprintf(report, fmt, ap);
        va_end(ap);
    }
    fflush(stdout);
}

/* ---- device buffers of random numbers ------------------------------------------------ */

/* n floats uniform in [lo, hi): a 1M-float host block, uploaded as often as
 * needed (values repeating does not matter for timing) */
static float *dev_random(size_t n, float lo, float hi, Rng *rng) {
    float *d = cuda_alloc(n * sizeof(float));
    size_t block = n < ((size_t)1 << 20) ? n : (size_t)1 << 20;
    float *h = malloc(block * sizeof(float));
    if (!h) cli_fail("cuda_validate", "out of host memory");
    rng_fill_uniform(rng, h, block, lo, hi);
    for (size_t i = 0; i < n; i += block)
        cuda_upload(d + i, h, (n - i < block ? n - i : block) * sizeof(float));
    free(h);
    return d;
}

static int *dev_random_ids(size_t n, int vocab, Rng *rng) {
    int *h = malloc(n * sizeof(int));
    if (!h) cli_fail("cuda_validate", "out of host memory");
    for (size_t i = 0; i < n; i++) h[i] = rng_int(rng, vocab);
    int *d = cuda_alloc(n * sizeof(int));
    cuda_upload(d, h, n * sizeof(int));
    free(h);
    return d;
}

/* ---- 1. validation -------------------------------------------------------------------- */

static int validate_all(void) {
    say("\n== validation: GPU vs CPU reference (common/), max |gpu - cpu| ==\n");
    say("%-28s %-6s %10s %10s  %s\n", "kernel", "result", "max diff", "tolerance", "worst case");
    int failed = 0;
    for (int i = 0; i < cuda_selftest_count(); i++) {
        CudaCheck res[16];
        int n = cuda_selftest_run(i, 1, res, 16);
        for (int k = 0; k < n; k++) {
            say("%-28s %-6s %10.3g %10.3g  %s\n", res[k].name, res[k].pass ? "PASS" : "FAIL",
                res[k].max_diff, res[k].tol, res[k].detail);
            failed += !res[k].pass;
        }
    }
    say("%s\n", failed ? "SOME KERNELS DISAGREE WITH THE CPU (see FAIL above)"
                       : "every kernel agrees with the CPU within float32 tolerance");
    return failed;
}

/* ---- 2. benchmarks -------------------------------------------------------------------- */

typedef struct {
    int version, tA, tB, M, N, K;
    const float *A, *B;
    float *C;
} GemmCtx;

static void run_gemm(void *p) {
    GemmCtx *g = p;
    int lda = g->tA ? g->M : g->K, ldb = g->tB ? g->K : g->N;
    cuda_gemm_version(g->version, g->tA, g->tB, g->M, g->N, g->K, 1.0f, g->A, lda, g->B, ldb,
                      0.0f, g->C, g->N);
}

static void bench_gemm(int reps, Rng *rng) {
    /* 4096 tokens through the base model (Table 3) */
    static const struct {
        const char *what;
        int tA, tB, M, N, K;
    } shapes[] = {
        {"Q/K/V/O projection  x W", 0, 0, 4096, 512, 512},
        {"FFN in   x W1 (Eq. 2)", 0, 0, 4096, 2048, 512},
        {"FFN out  h W2 (Eq. 2)", 0, 0, 4096, 512, 2048},
        {"weight grad  x^T dout", 1, 0, 512, 2048, 4096},
        {"logits  x E^T (Sec. 3.4)", 0, 1, 4096, 37000, 512},
    };
    say("\n== matmul: hand-written kernels vs cuBLAS (float32, median of %d) ==\n", reps);
    say("%-26s %-18s %-12s %9s %9s %9s\n", "shape", "M x N x K", "kernel", "ms", "TFLOP/s",
        "vs cuBLAS");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        float *A = dev_random((size_t)M * K, -1.0f, 1.0f, rng);
        float *B = dev_random((size_t)K * N, -1.0f, 1.0f, rng);
        float *C = cuda_alloc((size_t)M * N * sizeof(float));
        double flops = 2.0 * M * N * K, cublas_ms = 0.0;
        char dims[32];
        snprintf(dims, sizeof dims, "%dx%dx%d", M, N, K);
        for (int v = 0; v < CUDA_GEMM_VERSIONS; v++) {
            GemmCtx g = {v, shapes[s].tA, shapes[s].tB, M, N, K, A, B, C};
            double ms = cuda_time_ms(run_gemm, &g, reps);
            if (v == CUDA_GEMM_CUBLAS) cublas_ms = ms;
            say("%-26s %-18s %-12s %9.3f %9.2f %8.0f%%\n", v == 0 ? shapes[s].what : "",
                v == 0 ? dims : "", cuda_gemm_version_name(v), ms, flops / (ms * 1e9),
                100.0 * cublas_ms / ms);
        }
        cuda_free(A), cuda_free(B), cuda_free(C);
    }
}

typedef struct {
    int kind;            /* 0 plain, else the flash version */
    int causal;
    int B, h, T, d;
    const float *Q, *K, *V;
    float *out, *w;
} AttnCtx;

static void run_attn(void *p) {
    AttnCtx *a = p;
    if (a->kind == 0)
        cuda_sdpa_forward(a->out, a->w, a->Q, a->K, a->V, NULL, a->B, a->h, a->T, a->T, a->d, a->d);
    else
        cuda_flash_attention_forward_version(a->kind, a->out, a->Q, a->K, a->V, NULL, a->causal,
                                             a->B, a->h, a->T, a->T, a->d, a->d);
}

static void bench_attention(int reps, Rng *rng) {
    int B = 4, h = 8, d = 64;
    say("\n== attention forward, Eq. (1): plain (weights in memory) vs fused (B=%d h=%d d_k=d_v=%d) ==\n",
        B, h, d);
    say("%-6s %-24s %9s %9s %9s %12s\n", "T", "kernel", "ms", "TFLOP/s", "vs plain", "weights MiB");
    for (int T = 64; T <= 1024; T *= 2) {
        size_t n = (size_t)B * h * T * d;
        float *Q = dev_random(n, -1.0f, 1.0f, rng), *K = dev_random(n, -1.0f, 1.0f, rng);
        float *V = dev_random(n, -1.0f, 1.0f, rng), *out = cuda_alloc(n * sizeof(float));
        float *w = cuda_alloc((size_t)B * h * T * T * sizeof(float));
        double flops = 4.0 * B * h * (double)T * T * d, plain_ms = 0.0;
        static const struct {
            const char *name;
            int kind, causal;
        } kernels[] = {
            {"plain (cuBLAS+softmax)", 0, 0},
            {"fused v1 thread", CUDA_FLASH_THREAD, 0},
            {"fused v2 tiled", CUDA_FLASH_TILED, 0},
            {"fused v2 tiled, causal", CUDA_FLASH_TILED, 1},
        };
        for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
            AttnCtx a = {kernels[k].kind, kernels[k].causal, B, h, T, d, Q, K, V, out, w};
            double ms = cuda_time_ms(run_attn, &a, reps);
            if (k == 0) plain_ms = ms;
            char mib[16] = "0";
            if (k == 0) snprintf(mib, sizeof mib, "%.1f", B * h * (double)T * T * 4 / 1048576.0);
            say("%-6d %-24s %9.3f %9.2f %8.2fx %12s\n", T, kernels[k].name, ms,
                flops / (ms * 1e9), plain_ms / ms, mib);
        }
        cuda_free(Q), cuda_free(K), cuda_free(V), cuda_free(out), cuda_free(w);
    }
    say("(the causal row counts the full T*T flops although it skips the masked half)\n");
}

/* the row-wise and element-wise kernels: one context, a switch on `op` */
typedef struct {
    int op, version;
    int N, C;
    float *a, *b, *c, *d, *e;
    int *ids;
} RowCtx;

enum { OP_SOFTMAX, OP_LAYERNORM, OP_LOGSOFTMAX, OP_XENT_BWD, OP_EMBED_BWD, OP_RELU,
       OP_RESID_DROPOUT, OP_ADAM };

static void run_row(void *p) {
    RowCtx *r = p;
    size_t n = (size_t)r->N * r->C;
    switch (r->op) {
    case OP_SOFTMAX: cuda_softmax_forward_version(r->version, r->b, r->a, r->N, r->C); break;
    case OP_LAYERNORM:
        cuda_layernorm_forward_version(r->version, r->b, r->c, r->d, r->a, r->e, r->e, r->N, r->C);
        break;
    case OP_LOGSOFTMAX: cuda_logsoftmax_forward(r->b, r->a, r->N, r->C); break;
    case OP_XENT_BWD: cuda_smoothed_xent_backward(r->b, r->a, r->ids, r->N, r->C, 0.1f, 0); break;
    case OP_EMBED_BWD:
        cuda_embed_backward_version(r->version, r->b, r->a, r->ids, 1, r->N, 512, 37000);
        break;
    case OP_RELU: cuda_relu_forward(r->b, r->a, n); break;
    case OP_RESID_DROPOUT: cuda_residual_dropout_forward(r->c, r->d, r->a, r->b, 0.1f, n, 1); break;
    case OP_ADAM: cuda_adam_update(r->a, r->b, r->c, r->d, n, 1e-4f, 0.9f, 0.98f, 1e-9f, 10); break;
    }
}

static void bench_line(const char *name, const char *shape, RowCtx *r, double bytes, int reps) {
    double ms = cuda_time_ms(run_row, r, reps);
    say("%-30s %-20s %9.3f %9.1f\n", name, shape, ms, bytes / (ms * 1e6));
}

static void bench_rows(int reps, Rng *rng) {
    say("\n== row and element-wise kernels (GB/s = minimum bytes moved / time) ==\n");
    say("%-30s %-20s %9s %9s\n", "kernel", "shape", "ms", "GB/s");
    /* softmax over attention weights: B*h*T rows of T (B=4, h=8, T=512) */
    {
        int N = 4 * 8 * 512, C = 512;
        size_t n = (size_t)N * C;
        RowCtx r = {OP_SOFTMAX, 0, N, C, dev_random(n, -5, 5, rng), cuda_alloc(n * 4), 0, 0, 0, 0};
        r.version = CUDA_SOFTMAX_ROW;
        bench_line("softmax v1 row", "16384 x 512", &r, 2.0 * n * 4, reps);
        r.version = CUDA_SOFTMAX_WARP;
        bench_line("softmax v2 warp", "16384 x 512", &r, 2.0 * n * 4, reps);
        cuda_free(r.a), cuda_free(r.b);
    }
    /* layernorm over 4096 tokens of d_model 512 */
    {
        int N = 4096, C = 512;
        size_t n = (size_t)N * C;
        RowCtx r = {OP_LAYERNORM, 0, N, C, dev_random(n, -1, 1, rng), cuda_alloc(n * 4),
                    cuda_alloc(N * 4), cuda_alloc(N * 4), dev_random(C, 0.5f, 1.5f, rng), 0};
        r.version = CUDA_LAYERNORM_ROW;
        bench_line("layernorm v1 row", "4096 x 512", &r, 2.0 * n * 4, reps);
        r.version = CUDA_LAYERNORM_WARP;
        bench_line("layernorm v2 warp", "4096 x 512", &r, 2.0 * n * 4, reps);
        cuda_free(r.a), cuda_free(r.b), cuda_free(r.c), cuda_free(r.d), cuda_free(r.e);
    }
    /* the output layer: 4096 positions x 37000 words (0.6 GB per buffer) */
    {
        int N = 4096, C = 37000;
        size_t n = (size_t)N * C;
        float *logits = dev_random(n, -8, 8, rng), *logp = cuda_alloc(n * 4);
        float *dlogits = cuda_alloc(n * 4);
        int *targets = dev_random_ids(N, C, rng);
        cuda_zero(dlogits, n * 4);
        RowCtx r = {OP_LOGSOFTMAX, 0, N, C, logits, logp, 0, 0, 0, targets};
        bench_line("logsoftmax", "4096 x 37000", &r, 2.0 * n * 4, reps);
        RowCtx x = {OP_XENT_BWD, 0, N, C, logp, dlogits, 0, 0, 0, targets};
        bench_line("smoothed xent backward", "4096 x 37000", &x, 3.0 * n * 4, reps);
        cuda_free(logits), cuda_free(logp), cuda_free(dlogits), cuda_free(targets);
    }
    /* embedding backward: 4096 positions into a 37000 x 512 table */
    {
        int N = 4096, C = 512;
        size_t n = (size_t)N * C;
        RowCtx r = {OP_EMBED_BWD, 0, N, C, dev_random(n, -1, 1, rng),
                    cuda_alloc((size_t)37000 * C * 4), 0, 0, 0, dev_random_ids(N, 37000, rng)};
        cuda_zero(r.b, (size_t)37000 * C * 4);
        r.version = CUDA_EMBED_BWD_COLUMN;
        bench_line("embed backward v1 column", "4096 x 512", &r, 3.0 * n * 4, reps);
        r.version = CUDA_EMBED_BWD_ATOMIC;
        bench_line("embed backward v2 atomic", "4096 x 512", &r, 3.0 * n * 4, reps);
        cuda_free(r.a), cuda_free(r.b), cuda_free(r.ids);
    }
    /* element-wise over 16M floats (about the FFN activations of a big batch) */
    {
        int N = 1 << 14, C = 1 << 10;
        size_t n = (size_t)N * C;
        RowCtx r = {OP_RELU, 0, N, C, dev_random(n, -1, 1, rng), dev_random(n, -1, 1, rng),
                    cuda_alloc(n * 4), cuda_alloc(n * 4), 0, 0};
        bench_line("relu forward", "16M", &r, 2.0 * n * 4, reps);
        r.op = OP_RESID_DROPOUT;
        bench_line("residual+dropout forward", "16M", &r, 4.0 * n * 4, reps);
        cuda_zero(r.c, n * 4), cuda_zero(r.d, n * 4);
        r.op = OP_ADAM;
        bench_line("adam update", "16M", &r, 7.0 * n * 4, reps);
        cuda_free(r.a), cuda_free(r.b), cuda_free(r.c), cuda_free(r.d);
    }
}

int main(int argc, char **argv) {
    const char *out = "out/cuda-check";
    int reps = 10, probe = 0, no_bench = 0;
    CliOption opts[] = {
        {"--out", CLI_STRING, &out, "folder for the report (validate.txt)", 0, 0},
        {"--reps", CLI_INT, &reps, "timed runs per benchmark (the median is shown)", 1, 1000},
        {"--no-bench", CLI_FLAG, &no_bench, "validate only", 0, 0},
        {"--probe", CLI_FLAG, &probe, "only say whether a CUDA GPU is there (exit 0 yes, 1 no)", 0, 0},
    };
    cli_parse(argc, argv, "cuda_validate",
              "every CUDA kernel against the CPU reference, then timed", opts, CLI_COUNT(opts));

    if (!device_cuda_available()) {
        printf("no CUDA GPU found: skipping\n");
        return probe ? 1 : 0;
    }
    if (probe) return 0;

    if (plot_mkdir(out) != 0) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/validate.txt", out);
    report = fopen(path, "w");
    if (!report) cli_fail("cuda_validate", "cannot write the report '%s'", path);

    char dev[256];
    say("cuda-validate: %s\n", cuda_describe(dev, sizeof dev));
    int failed = validate_all();
    if (!no_bench) {
        Rng rng;
        rng_seed(&rng, 2017);
        bench_gemm(reps, &rng);
        bench_attention(reps, &rng);
        bench_rows(reps, &rng);
    }
    cuda_release();
    fclose(report);
    report = NULL;
    printf("\nreport written to %s\n", path);
    return failed ? 1 : 0;
}
