/* selftest.c - every CUDA kernel against the CPU function it mirrors.
 *
 * The CPU code in common/ is the reference. Each check below makes random
 * inputs from a fixed seed, runs the CPU function and every GPU version on
 * copies of them, downloads the GPU result and records the largest absolute
 * difference (diff_arrays: a NaN counts as infinitely different). A check
 * passes when that is within a float32 tolerance chosen for the op and its
 * sizes (a sum of K products carries about K rounding errors; the CPU often
 * sums in double, the GPU in float and in another order).
 *
 * Used by tests/check_cuda.c (size 0: small and quick) and by
 * cuda/tools/cuda_validate.c (size 1: closer to the model's shapes).
 * In a build without CUDA this file declares nothing more than kernels.h.
 */
#include "kernels.h"


#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/attention.h"
#include "fast/attention_fast.h"
#include "fast/rows_fast.h"
#include "decode_kernels.h"
#include "fast/nn_fast.h"
#include "layers/linear.h"
#include "ref/nn.h"
#include "fast/gemm.h"
#include "fast/nn_fast.h"
#include "layers/linear.h"
#include "ref/ops.h"
#include "ref/optim.h"
#include "core/rng.h"
#include "core/tensor.h"

/* ---- small helpers ------------------------------------------------------------ */

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory in the CUDA self-test (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static float *host_floats(size_t n) { return host_alloc(n * sizeof(float)); }

static float *dev_copy(const void *host, size_t bytes) {
    float *d = cuda_alloc(bytes ? bytes : 1);
    if (bytes) cuda_upload(d, host, bytes);
    return d;
}

/* max |dev - ref| over n floats; tmp (n) is host scratch */
static double dev_diff(const float *dev, const float *ref, float *tmp, size_t n) {
    cuda_download(tmp, dev, n * sizeof(float));
    return diff_arrays(tmp, ref, n).max_abs;
}

/* the worst difference seen so far for one result line, and where it was */
typedef struct {
    double diff;
    char where[96];
    int set;
} Worst;

static void worst_init(Worst *w) {
    w->diff = 0.0;
    w->set = 0;
    snprintf(w->where, sizeof w->where, "-");
}

static void worst_update(Worst *w, double diff, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void worst_update(Worst *w, double diff, const char *fmt, ...) {
    if (w->set && diff <= w->diff) return;   /* (diff_arrays turns NaN into inf) */
    w->diff = diff;
    w->set = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->where, sizeof w->where, fmt, ap);
    va_end(ap);
}

typedef struct {
    CudaCheck *res;
    int n, max;
} Sink;

static void emit(Sink *s, const char *name, const Worst *w, double tol) {
    if (s->n >= s->max) return;
    CudaCheck *c = &s->res[s->n++];
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->detail, sizeof c->detail, "%s", w->where);
    c->max_diff = w->diff;
    c->tol = tol;
    c->pass = w->diff <= tol;   /* false for NaN */
}

/* ---- gemm: every version, all four transposes, beta 0 and not ------------------ */

static void check_gemm(Sink *sink, int size) {
    static const int small[][3] = {{33, 47, 29}, {64, 64, 64}, {1, 70, 5}};
    static const int large[][3] = {{37, 45, 29}, {128, 512, 512}, {64, 2048, 512}, {64, 512, 2048}};
    const int (*shapes)[3] = size ? large : small;
    int nshapes = size ? 4 : 3;
    Worst w[CUDA_GEMM_VERSIONS];
    double tol[CUDA_GEMM_VERSIONS];
    for (int v = 0; v < CUDA_GEMM_VERSIONS; v++) worst_init(&w[v]), tol[v] = 0.0;
    Rng rng;
    rng_seed(&rng, 1);
    for (int s = 0; s < nshapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
        float *A = host_floats(na), *B = host_floats(nb), *C0 = host_floats(nc);
        float *ref = host_floats(nc), *tmp = host_floats(nc), *nans = host_floats(nc);
        rng_fill_uniform(&rng, A, na, -1.0f, 1.0f);
        rng_fill_uniform(&rng, B, nb, -1.0f, 1.0f);
        rng_fill_uniform(&rng, C0, nc, -1.0f, 1.0f);
        for (size_t i = 0; i < nc; i++) nans[i] = NAN;
        float *dA = dev_copy(A, na * 4), *dB = dev_copy(B, nb * 4), *dC = cuda_alloc(nc * 4);
        for (int t = 0; t < 4; t++) {
            int tA = t & 1, tB = (t >> 1) & 1;
            int lda = tA ? M : K, ldb = tB ? K : N;
            /* beta == 0 must ignore C: fill it with NaN to prove it. The
             * no-transpose case also checks alpha and beta != 0. */
            float alpha = t == 0 ? 0.5f : 1.0f, beta = t == 0 ? 0.25f : 0.0f;
            const float *c_in = beta == 0.0f ? nans : C0;
            memcpy(ref, c_in, nc * 4);
            gemm_ref(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, ref, N);
            for (int v = 0; v < CUDA_GEMM_VERSIONS; v++) {
                cuda_upload(dC, c_in, nc * 4);
                cuda_gemm_version(v, tA, tB, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, N);
                worst_update(&w[v], dev_diff(dC, ref, tmp, nc), "%s%s M=%d N=%d K=%d",
                             tA ? "T" : "N", tB ? "T" : "N", M, N, K);
                /* float sums of K products of numbers in [-1, 1] */
                double t_here = 2e-6 * K + 1e-6;
                if (t_here > tol[v]) tol[v] = t_here;
            }
        }
        cuda_free(dA), cuda_free(dB), cuda_free(dC);
        free(A), free(B), free(C0), free(ref), free(tmp), free(nans);
    }
    for (int v = 0; v < CUDA_GEMM_VERSIONS; v++) {
        char name[48];
        snprintf(name, sizeof name, "gemm %s", cuda_gemm_version_name(v));
        emit(sink, name, &w[v], tol[v]);
    }
}

/* ---- softmax: masked entries, a fully masked row, huge logits ----------------------- */

static void check_softmax(Sink *sink, int size) {
    int N = size ? 1024 : 37, C = size ? 1000 : 70;
    size_t n = (size_t)N * C;
    float *x = host_floats(n), *ref = host_floats(n), *tmp = host_floats(n);
    float *dy = host_floats(n), *dref = host_floats(n);
    Rng rng;
    rng_seed(&rng, 2);
    rng_fill_uniform(&rng, x, n, -5.0f, 5.0f);
    rng_fill_uniform(&rng, dy, n, -1.0f, 1.0f);
    for (int j = 0; j < C; j++) x[j] = -INFINITY;               /* row 0: all masked */
    for (int j = 0; j < C; j += 3) x[(size_t)1 * C + j] = -INFINITY; /* row 1: some masked */
    for (int j = 0; j < C; j++) x[(size_t)2 * C + j] += 1000.0f; /* row 2: exp would overflow */
    softmax_forward(ref, x, N, C);
    float *dx = dev_copy(x, n * 4), *dout = cuda_alloc(n * 4);
    for (int v = CUDA_SOFTMAX_ROW; v < CUDA_SOFTMAX_VERSIONS; v++) {
        Worst w;
        worst_init(&w);
        cuda_zero(dout, n * 4);
        cuda_softmax_forward_version(v, dout, dx, N, C);
        worst_update(&w, dev_diff(dout, ref, tmp, n), "N=%d C=%d", N, C);
        emit(sink, v == CUDA_SOFTMAX_ROW ? "softmax v1 row" : "softmax v2 warp", &w, 1e-6);
    }
    /* backward: dinp += J^T dy, starting from a non-zero dinp to test the += */
    float *ddy = dev_copy(dy, n * 4), *dyref = dev_copy(ref, n * 4);
    rng_fill_uniform(&rng, dref, n, -1.0f, 1.0f);
    float *ddinp = dev_copy(dref, n * 4);
    softmax_backward(dref, dy, ref, N, C);
    cuda_softmax_backward(ddinp, ddy, dyref, N, C);
    Worst w;
    worst_init(&w);
    worst_update(&w, dev_diff(ddinp, dref, tmp, n), "N=%d C=%d", N, C);
    emit(sink, "softmax backward", &w, 1e-5);
    cuda_free(dx), cuda_free(dout), cuda_free(ddy), cuda_free(dyref), cuda_free(ddinp);
    free(x), free(ref), free(tmp), free(dy), free(dref);
}

/* ---- attention: plain forward/backward and the fused kernels ----------------------- */

typedef struct {
    int B, h, Tq, Tk, d_k, d_v;
    int causal, padded;      /* which masks */
} AttnCase;

/* mask (B,Tq,Tk) from key_len and causal, built with the CPU's functions;
 * returns NULL (no mask) when neither is on */
static uint8_t *build_mask(const AttnCase *c, const int *key_len) {
    if (!c->causal && !c->padded) return NULL;
    size_t n = (size_t)c->B * c->Tq * c->Tk;
    uint8_t *mask = host_alloc(n), *other = host_alloc(n);
    memset(mask, 1, n);
    if (c->padded) mask_padding(mask, key_len, c->B, c->Tq, c->Tk);
    if (c->causal) {
        mask_causal(other, c->B, c->Tq, c->Tk);
        mask_and(mask, other, (int)n);
    }
    free(other);
    return mask;
}

static void key_lengths(int *key_len, const AttnCase *c) {
    /* batch 0 sees every key; batch 1 (if any) none at all: every one of its
     * queries is fully masked and must come out as zeros; the rest vary */
    for (int b = 0; b < c->B; b++)
        key_len[b] = !c->padded ? c->Tk : b == 0 ? c->Tk : b == 1 ? 0 : 1 + (b * 7) % c->Tk;
}

static void check_attention(Sink *sink, int size) {
    static const AttnCase small[] = {
        {2, 2, 5, 5, 8, 8, 0, 0},  {3, 2, 7, 7, 16, 8, 1, 1}, {3, 1, 4, 9, 8, 16, 0, 1},
        {1, 2, 33, 33, 64, 64, 1, 0},
    };
    static const AttnCase large[] = {
        {2, 8, 64, 64, 64, 64, 0, 0},   {3, 8, 100, 100, 64, 64, 1, 1},
        {3, 4, 50, 77, 64, 64, 0, 1},   {2, 2, 130, 130, 128, 128, 1, 0},
        {2, 4, 40, 40, 96, 32, 1, 1},
    };
    const AttnCase *cases = size ? large : small;
    int ncases = size ? 5 : 4;
    Worst wf, wb, wflash[CUDA_FLASH_VERSIONS];
    worst_init(&wf), worst_init(&wb);
    for (int v = 0; v < CUDA_FLASH_VERSIONS; v++) worst_init(&wflash[v]);
    Rng rng;
    rng_seed(&rng, 3);
    for (int k = 0; k < ncases; k++) {
        const AttnCase *c = &cases[k];
        int B = c->B, h = c->h, Tq = c->Tq, Tk = c->Tk, d_k = c->d_k, d_v = c->d_v;
        size_t nq = (size_t)B * h * Tq * d_k, nk = (size_t)B * h * Tk * d_k;
        size_t nv = (size_t)B * h * Tk * d_v, no = (size_t)B * h * Tq * d_v;
        size_t nw = (size_t)B * h * Tq * Tk;
        float *Q = host_floats(nq), *K = host_floats(nk), *V = host_floats(nv);
        float *dout = host_floats(no), *out = host_floats(no), *w = host_floats(nw);
        float *scratch = host_floats(nw);
        float *dQ = host_floats(nq), *dK = host_floats(nk), *dV = host_floats(nv);
        size_t nmax = nw > nq ? nw : nq;
        nmax = nmax > nk ? nmax : nk, nmax = nmax > nv ? nmax : nv, nmax = nmax > no ? nmax : no;
        float *tmp = host_floats(nmax);
        int *key_len = host_alloc((size_t)B * sizeof(int));
        rng_fill_uniform(&rng, Q, nq, -1.0f, 1.0f);
        rng_fill_uniform(&rng, K, nk, -1.0f, 1.0f);
        rng_fill_uniform(&rng, V, nv, -1.0f, 1.0f);
        rng_fill_uniform(&rng, dout, no, -1.0f, 1.0f);
        key_lengths(key_len, c);
        uint8_t *mask = build_mask(c, key_len);
        char where[96];
        snprintf(where, sizeof where, "B=%d h=%d Tq=%d Tk=%d d_k=%d d_v=%d%s%s", B, h, Tq, Tk,
                 d_k, d_v, c->causal ? " causal" : "", c->padded ? " padded" : "");

        float *gQ = dev_copy(Q, nq * 4), *gK = dev_copy(K, nk * 4), *gV = dev_copy(V, nv * 4);
        float *gout = cuda_alloc(no * 4), *gw = cuda_alloc(nw * 4), *gscr = cuda_alloc(nw * 4);
        float *gdout = dev_copy(dout, no * 4);
        uint8_t *gmask = mask ? (uint8_t *)dev_copy(mask, (size_t)B * Tq * Tk) : NULL;
        int *gkey_len = c->padded ? (int *)dev_copy(key_len, (size_t)B * sizeof(int)) : NULL;

        /* plain forward: out and the saved weights */
        sdpa_forward(out, w, Q, K, V, mask, B, h, Tq, Tk, d_k, d_v);
        cuda_sdpa_forward(gout, gw, gQ, gK, gV, gmask, B, h, Tq, Tk, d_k, d_v);
        double d1 = dev_diff(gout, out, tmp, no), d2 = dev_diff(gw, w, tmp, nw);
        worst_update(&wf, d1 > d2 ? d1 : d2, "%s (%s)", where, d1 > d2 ? "out" : "weights");

        /* backward, accumulating onto non-zero gradients */
        rng_fill_uniform(&rng, dQ, nq, -1.0f, 1.0f);
        rng_fill_uniform(&rng, dK, nk, -1.0f, 1.0f);
        rng_fill_uniform(&rng, dV, nv, -1.0f, 1.0f);
        float *gdQ = dev_copy(dQ, nq * 4), *gdK = dev_copy(dK, nk * 4), *gdV = dev_copy(dV, nv * 4);
        sdpa_backward(dQ, dK, dV, scratch, dout, w, Q, K, V, B, h, Tq, Tk, d_k, d_v);
        cuda_sdpa_backward(gdQ, gdK, gdV, gscr, gdout, gw, gQ, gK, gV, B, h, Tq, Tk, d_k, d_v);
        double e[3] = {dev_diff(gdQ, dQ, tmp, nq), dev_diff(gdK, dK, tmp, nk),
                       dev_diff(gdV, dV, tmp, nv)};
        int worst = e[1] > e[0] ? 1 : 0;
        worst = e[2] > e[worst] ? 2 : worst;
        worst_update(&wb, e[worst], "%s (%s)", where, worst == 0 ? "dQ" : worst == 1 ? "dK" : "dV");

        /* fused: the same out, from key_len and the causal flag */
        for (int v = CUDA_FLASH_THREAD; v < CUDA_FLASH_VERSIONS; v++) {
            cuda_zero(gout, no * 4);
            cuda_flash_attention_forward_version(v, gout, gQ, gK, gV, gkey_len, c->causal,
                                                 B, h, Tq, Tk, d_k, d_v);
            worst_update(&wflash[v], dev_diff(gout, out, tmp, no), "%s", where);
        }
        cuda_free(gQ), cuda_free(gK), cuda_free(gV), cuda_free(gout), cuda_free(gw);
        cuda_free(gscr), cuda_free(gdout), cuda_free(gmask), cuda_free(gkey_len);
        cuda_free(gdQ), cuda_free(gdK), cuda_free(gdV);
        free(Q), free(K), free(V), free(dout), free(out), free(w), free(scratch);
        free(dQ), free(dK), free(dV), free(tmp), free(key_len), free(mask);
    }
    emit(sink, "sdpa forward (plain)", &wf, 1e-5);
    emit(sink, "sdpa backward (plain)", &wb, 1e-4);
    emit(sink, "flash attention v1 thread", &wflash[CUDA_FLASH_THREAD], 1e-5);
    emit(sink, "flash attention v2 tiled", &wflash[CUDA_FLASH_TILED], 1e-5);
}

/* ---- layernorm, linear ------------------------------------------------------------ */

static void check_layernorm(Sink *sink, int size) {
    int N = size ? 2048 : 40, C = size ? 512 : 67;
    size_t n = (size_t)N * C;
    float *x = host_floats(n), *g = host_floats(C), *b = host_floats(C);
    float *out = host_floats(n), *mean = host_floats(N), *rstd = host_floats(N);
    float *dout = host_floats(n), *dx = host_floats(n), *dg = host_floats(C), *db = host_floats(C);
    float *tmp = host_floats(n);
    Rng rng;
    rng_seed(&rng, 4);
    rng_fill_uniform(&rng, x, n, -2.0f, 2.0f);
    for (size_t i = 0; i < (size_t)C; i++) x[i] += 10.0f;    /* a row with a large mean */
    rng_fill_uniform(&rng, g, C, 0.5f, 1.5f);
    rng_fill_uniform(&rng, b, C, -0.5f, 0.5f);
    rng_fill_uniform(&rng, dout, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dx, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dg, C, -1.0f, 1.0f);
    rng_fill_uniform(&rng, db, C, -1.0f, 1.0f);
    float *gx = dev_copy(x, n * 4), *gg = dev_copy(g, C * 4), *gb = dev_copy(b, C * 4);
    float *gout = cuda_alloc(n * 4), *gmean = cuda_alloc(N * 4), *grstd = cuda_alloc(N * 4);
    float *gdout = dev_copy(dout, n * 4), *gdx = dev_copy(dx, n * 4);
    float *gdg = dev_copy(dg, C * 4), *gdb = dev_copy(db, C * 4);
    layernorm_forward(out, mean, rstd, x, g, b, N, C);
    for (int v = CUDA_LAYERNORM_ROW; v < CUDA_LAYERNORM_VERSIONS; v++) {
        Worst w;
        worst_init(&w);
        cuda_layernorm_forward_version(v, gout, gmean, grstd, gx, gg, gb, N, C);
        worst_update(&w, dev_diff(gout, out, tmp, n), "N=%d C=%d (out)", N, C);
        worst_update(&w, dev_diff(gmean, mean, tmp, N), "N=%d C=%d (mean)", N, C);
        worst_update(&w, dev_diff(grstd, rstd, tmp, N), "N=%d C=%d (rstd)", N, C);
        emit(sink, v == CUDA_LAYERNORM_ROW ? "layernorm v1 row" : "layernorm v2 warp", &w, 1e-4);
    }
    /* backward from the CPU's saved statistics, so only backward is compared */
    cuda_upload(gmean, mean, N * 4);
    cuda_upload(grstd, rstd, N * 4);
    layernorm_backward(dx, dg, db, dout, x, mean, rstd, g, N, C);
    cuda_layernorm_backward(gdx, gdg, gdb, gdout, gx, gmean, grstd, gg, N, C);
    Worst w;
    worst_init(&w);
    worst_update(&w, dev_diff(gdx, dx, tmp, n), "N=%d C=%d (dinp)", N, C);
    worst_update(&w, dev_diff(gdg, dg, tmp, C), "N=%d C=%d (dgamma)", N, C);
    worst_update(&w, dev_diff(gdb, db, tmp, C), "N=%d C=%d (dbeta)", N, C);
    emit(sink, "layernorm backward", &w, 1e-4 + 2e-6 * N);   /* dgamma sums N rows */
    cuda_free(gx), cuda_free(gg), cuda_free(gb), cuda_free(gout), cuda_free(gmean);
    cuda_free(grstd), cuda_free(gdout), cuda_free(gdx), cuda_free(gdg), cuda_free(gdb);
    free(x), free(g), free(b), free(out), free(mean), free(rstd), free(dout), free(dx);
    free(dg), free(db), free(tmp);
}

static void check_linear(Sink *sink, int size) {
    int N = size ? 256 : 19, IN = size ? 512 : 24, OUT = size ? 2048 : 33;
    size_t ni = (size_t)N * IN, nw = (size_t)IN * OUT, no = (size_t)N * OUT;
    float *x = host_floats(ni), *W = host_floats(nw), *bias = host_floats(OUT);
    float *out = host_floats(no), *dout = host_floats(no), *dx = host_floats(ni);
    float *dW = host_floats(nw), *db = host_floats(OUT);
    size_t nmax = ni > nw ? ni : nw;
    float *tmp = host_floats(nmax > no ? nmax : no);
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_uniform(&rng, x, ni, -1.0f, 1.0f);
    rng_fill_uniform(&rng, W, nw, -1.0f, 1.0f);
    rng_fill_uniform(&rng, bias, OUT, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dout, no, -1.0f, 1.0f);
    memset(dx, 0, ni * 4), memset(dW, 0, nw * 4), memset(db, 0, OUT * 4);
    float *gx = dev_copy(x, ni * 4), *gW = dev_copy(W, nw * 4), *gb = dev_copy(bias, OUT * 4);
    float *gout = cuda_alloc(no * 4), *gdout = dev_copy(dout, no * 4);
    float *gdx = dev_copy(dx, ni * 4), *gdW = dev_copy(dW, nw * 4), *gdb = dev_copy(db, OUT * 4);
    linear_forward(out, x, W, bias, N, IN, OUT);
    cuda_linear_forward(gout, gx, gW, gb, N, IN, OUT);
    linear_backward(dx, dW, db, dout, x, W, N, IN, OUT);
    cuda_linear_backward(gdx, gdW, gdb, gdout, gx, gW, N, IN, OUT);
    Worst wf, wb;
    worst_init(&wf), worst_init(&wb);
    worst_update(&wf, dev_diff(gout, out, tmp, no), "N=%d IN=%d OUT=%d", N, IN, OUT);
    worst_update(&wb, dev_diff(gdx, dx, tmp, ni), "N=%d IN=%d OUT=%d (dinp)", N, IN, OUT);
    worst_update(&wb, dev_diff(gdW, dW, tmp, nw), "N=%d IN=%d OUT=%d (dW)", N, IN, OUT);
    worst_update(&wb, dev_diff(gdb, db, tmp, OUT), "N=%d IN=%d OUT=%d (dbias)", N, IN, OUT);
    int kmax = IN > OUT ? IN : OUT;
    kmax = kmax > N ? kmax : N;
    emit(sink, "linear forward", &wf, 2e-6 * IN + 1e-6);
    emit(sink, "linear backward", &wb, 2e-6 * kmax + 1e-6);
    cuda_free(gx), cuda_free(gW), cuda_free(gb), cuda_free(gout), cuda_free(gdout);
    cuda_free(gdx), cuda_free(gdW), cuda_free(gdb);
    free(x), free(W), free(bias), free(out), free(dout), free(dx), free(dW), free(db), free(tmp);
}

/* ---- element-wise: relu, residual + dropout, adam -------------------------------------- */

static void check_elementwise(Sink *sink, int size) {
    size_t n = size ? (size_t)1 << 22 : 10007;
    float *x = host_floats(n), *s = host_floats(n), *ref = host_floats(n), *tmp = host_floats(n);
    float *dout = host_floats(n), *dx = host_floats(n), *ds = host_floats(n), *keep = host_floats(n);
    Rng rng;
    rng_seed(&rng, 6);
    rng_fill_uniform(&rng, x, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, s, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dout, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dx, n, -1.0f, 1.0f);
    rng_fill_uniform(&rng, ds, n, -1.0f, 1.0f);
    float *gx = dev_copy(x, n * 4), *gs = dev_copy(s, n * 4), *gout = cuda_alloc(n * 4);
    float *gdout = dev_copy(dout, n * 4), *gdx = dev_copy(dx, n * 4), *gds = dev_copy(ds, n * 4);
    float *gkeep = cuda_alloc(n * 4);

    /* relu: exact (a comparison and a copy) */
    Worst w;
    worst_init(&w);
    relu_forward(ref, x, n);
    cuda_relu_forward(gout, gx, n);
    worst_update(&w, dev_diff(gout, ref, tmp, n), "n=%zu (forward)", n);
    relu_backward(dx, dout, ref, n);
    cuda_relu_backward(gdx, gdout, gout, n);
    worst_update(&w, dev_diff(gdx, dx, tmp, n), "n=%zu (backward)", n);
    emit(sink, "relu forward+backward", &w, 0.0);

    /* residual + dropout. The GPU draws its own mask (a hash of the index,
     * not the CPU's Rng), so: the mask must hold only 0 and 1/(1-p), keep
     * about 1-p of the elements, and out must equal the CPU's residual of x
     * and sub * keep for that very mask. */
    float p = 0.1f, scale = 1.0f / (1.0f - p);
    worst_init(&w);
    cuda_residual_dropout_forward(gout, gkeep, gx, gs, p, n, 42);
    cuda_download(keep, gkeep, n * 4);
    size_t kept = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        kept += keep[i] != 0.0f;
        bad += !(keep[i] == 0.0f || keep[i] == scale);
        tmp[i] = s[i] * keep[i];
    }
    residual_forward(ref, x, tmp, n);
    worst_update(&w, dev_diff(gout, ref, tmp, n), "n=%zu p=%.2f (out)", n, p);
    /* kept ~ Binomial(n, 1-p): 6 standard deviations is a fair test, never a fluke */
    double expect = (1.0 - p) * n, sd = sqrt(n * p * (1.0 - p));
    double off = fabs((double)kept - expect) / sd;
    if (bad || off > 6.0) worst_update(&w, INFINITY, "mask: %zu bad values, kept %zu of %zu (%.1f sd off)",
                                       bad, kept, n, off);
    /* backward: dx += dout, dsub += dout * keep (the CPU's residual then dropout backward) */
    memset(tmp, 0, n * 4);
    residual_backward(dx, tmp, dout, n);   /* dx += dout; tmp = dout */
    dropout_backward(ds, tmp, keep, n);    /* ds += dout * keep */
    cuda_residual_dropout_backward(gdx, gds, gdout, gkeep, n);
    worst_update(&w, dev_diff(gdx, dx, tmp, n), "n=%zu (dx)", n);
    worst_update(&w, dev_diff(gds, ds, tmp, n), "n=%zu (dsub)", n);
    /* p = 0 keeps everything */
    cuda_residual_dropout_forward(gout, gkeep, gx, gs, 0.0f, n, 42);
    residual_forward(ref, x, s, n);
    worst_update(&w, dev_diff(gout, ref, tmp, n), "n=%zu p=0 (out)", n);
    emit(sink, "residual+dropout", &w, 1e-6);

    /* Adam: three steps from zero moments, as a training loop would */
    float *m = host_floats(n), *v = host_floats(n);
    memset(m, 0, n * 4), memset(v, 0, n * 4);
    float *gp = dev_copy(x, n * 4), *gm = dev_copy(m, n * 4), *gv = dev_copy(v, n * 4);
    float *gg = cuda_alloc(n * 4);
    memcpy(ref, x, n * 4);
    worst_init(&w);
    for (int step = 1; step <= 3; step++) {
        rng_fill_uniform(&rng, tmp, n, -1.0f, 1.0f);
        cuda_upload(gg, tmp, n * 4);
        adam_update(ref, tmp, m, v, n, 1e-3f, 0.9f, 0.98f, 1e-9f, step);
        cuda_adam_update(gp, gg, gm, gv, n, 1e-3f, 0.9f, 0.98f, 1e-9f, step);
    }
    worst_update(&w, dev_diff(gp, ref, tmp, n), "n=%zu 3 steps (param)", n);
    worst_update(&w, dev_diff(gm, m, tmp, n), "n=%zu 3 steps (m)", n);
    worst_update(&w, dev_diff(gv, v, tmp, n), "n=%zu 3 steps (v)", n);
    emit(sink, "adam", &w, 1e-6);

    cuda_free(gx), cuda_free(gs), cuda_free(gout), cuda_free(gdout), cuda_free(gdx);
    cuda_free(gds), cuda_free(gkeep), cuda_free(gp), cuda_free(gm), cuda_free(gv), cuda_free(gg);
    free(x), free(s), free(ref), free(tmp), free(dout), free(dx), free(ds), free(keep);
    free(m), free(v);
}

/* ---- embedding + PE ---------------------------------------------------------------- */

static void check_embed(Sink *sink, int size) {
    int B = size ? 32 : 3, T = size ? 128 : 7, C = size ? 512 : 20, vocab = size ? 1000 : 11;
    size_t nt = (size_t)vocab * C, no = (size_t)B * T * C;
    float *table = host_floats(nt), *pe = host_floats((size_t)T * C), *out = host_floats(no);
    float *dout = host_floats(no), *dtable = host_floats(nt), *dtable0 = host_floats(nt);
    float *tmp = host_floats(nt > no ? nt : no);
    int *ids = host_alloc((size_t)B * T * sizeof(int));
    Rng rng;
    rng_seed(&rng, 7);
    rng_fill_uniform(&rng, table, nt, -0.1f, 0.1f);
    rng_fill_uniform(&rng, dout, no, -1.0f, 1.0f);
    rng_fill_uniform(&rng, dtable0, nt, -1.0f, 1.0f);
    /* a small vocabulary for the positions: tokens repeat, as in real text,
     * which is what makes the backward a scatter-ADD */
    for (int i = 0; i < B * T; i++) ids[i] = rng_int(&rng, vocab < 50 ? vocab : 50);
    posenc_fill(pe, T, C);
    float *gtable = dev_copy(table, nt * 4), *gpe = dev_copy(pe, (size_t)T * C * 4);
    float *gout = cuda_alloc(no * 4), *gdout = dev_copy(dout, no * 4);
    float *gdtable = cuda_alloc(nt * 4);
    int *gids = (int *)dev_copy(ids, (size_t)B * T * sizeof(int));
    Worst w;
    worst_init(&w);
    embed_forward(out, ids, table, pe, B, T, C, vocab);
    cuda_embed_forward(gout, gids, gtable, gpe, B, T, C, vocab);
    worst_update(&w, dev_diff(gout, out, tmp, no), "B=%d T=%d d_model=%d vocab=%d", B, T, C, vocab);
    emit(sink, "embed forward (+PE)", &w, 1e-5);
    memcpy(dtable, dtable0, nt * 4);
    embed_backward(dtable, dout, ids, B, T, C, vocab);
    for (int v = CUDA_EMBED_BWD_COLUMN; v < CUDA_EMBED_BWD_VERSIONS; v++) {
        worst_init(&w);
        cuda_upload(gdtable, dtable0, nt * 4);
        cuda_embed_backward_version(v, gdtable, gdout, gids, B, T, C, vocab);
        worst_update(&w, dev_diff(gdtable, dtable, tmp, nt), "B=%d T=%d d_model=%d", B, T, C);
        /* a token used k times sums k terms of size up to sqrt(d_model) */
        emit(sink, v == CUDA_EMBED_BWD_COLUMN ? "embed backward v1 column" : "embed backward v2 atomic",
             &w, 1e-6 * sqrtf((float)C) * (B * T / 50 + 1) + 1e-5);
    }
    cuda_free(gtable), cuda_free(gpe), cuda_free(gout), cuda_free(gdout), cuda_free(gdtable);
    cuda_free(gids);
    free(table), free(pe), free(out), free(dout), free(dtable), free(dtable0), free(tmp), free(ids);
}

/* ---- log-softmax and label-smoothed cross-entropy ------------------------------------ */

static void check_xent(Sink *sink, int size) {
    int N = size ? 512 : 23, V = size ? 37000 : 301, pad = 0;
    float eps = 0.1f;
    size_t n = (size_t)N * V;
    float *logits = host_floats(n), *logp = host_floats(n), *dl = host_floats(n);
    float *tmp = host_floats(n);
    int *targets = host_alloc((size_t)N * sizeof(int));
    Rng rng;
    rng_seed(&rng, 8);
    rng_fill_uniform(&rng, logits, n, -8.0f, 8.0f);
    rng_fill_uniform(&rng, dl, n, -1e-3f, 1e-3f);
    for (int r = 0; r < N; r++) targets[r] = r % 5 == 4 ? pad : 1 + rng_int(&rng, V - 1);
    float *glogits = dev_copy(logits, n * 4), *glogp = cuda_alloc(n * 4);
    float *gdl = dev_copy(dl, n * 4), *grow = cuda_alloc((size_t)N * 4);
    int *gtargets = (int *)dev_copy(targets, (size_t)N * sizeof(int));
    Worst w;
    worst_init(&w);
    logsoftmax_forward(logp, logits, N, V);
    cuda_logsoftmax_forward(glogp, glogits, N, V);
    worst_update(&w, dev_diff(glogp, logp, tmp, n), "N=%d V=%d", N, V);
    emit(sink, "logsoftmax", &w, 2e-5);
    /* loss and backward both from the CPU's logp, so each is compared alone */
    cuda_upload(glogp, logp, n * 4);
    int count = 0, gcount = -1;
    float loss = smoothed_xent_forward(logp, targets, N, V, eps, pad, &count);
    float gloss = cuda_smoothed_xent_forward(grow, glogp, gtargets, N, V, eps, pad, &gcount);
    worst_init(&w);
    worst_update(&w, fabs((double)gloss - loss), "N=%d V=%d loss %.6f vs %.6f", N, V, gloss, loss);
    if (gcount != count) worst_update(&w, INFINITY, "n_tokens %d vs %d", gcount, count);
    emit(sink, "smoothed xent forward", &w, 1e-4);
    smoothed_xent_backward(dl, logp, targets, N, V, eps, pad);
    cuda_smoothed_xent_backward(gdl, glogp, gtargets, N, V, eps, pad);
    worst_init(&w);
    worst_update(&w, dev_diff(gdl, dl, tmp, n), "N=%d V=%d", N, V);
    emit(sink, "smoothed xent backward", &w, 1e-6);
    cuda_free(glogits), cuda_free(glogp), cuda_free(gdl), cuda_free(grow), cuda_free(gtargets);
    free(logits), free(logp), free(dl), free(tmp), free(targets);
}

/* ---- decoding (common/model/decode.h): attention of one query per row against a
 * strided cache, and the rows gather ------------------------------------------------ */

static void check_decode(Sink *sink, int size) {
    /* self-attention shape: R rows, keys n of a cache with stride T; cross:
     * group rows share keys, with a key mask (one sentence fully blocked) */
    int R = size ? 32 : 6, h = size ? 8 : 2, dk = size ? 64 : 8, dv = size ? 64 : 4;
    int T = size ? 300 : 11, n = size ? 257 : 7, group = 3;
    size_t nq = (size_t)R * h * dk, nk = (size_t)R * h * T * dk, nv = (size_t)R * h * T * dv;
    size_t no = (size_t)R * h * dv, nw = (size_t)R * h * T;
    float *q = host_floats(nq), *K = host_floats(nk), *V = host_floats(nv), *out = host_floats(no);
    float *w = host_floats(nw), *tmp = host_floats(nk > nw ? nk : nw);
    uint8_t *keep = host_alloc((size_t)R * T);
    Rng rng;
    rng_seed(&rng, 17);
    rng_fill_uniform(&rng, q, nq, -1.0f, 1.0f);
    rng_fill_uniform(&rng, K, nk, -1.0f, 1.0f);
    rng_fill_uniform(&rng, V, nv, -1.0f, 1.0f);
    for (int i = 0; i < R * T; i++) keep[i] = (i * 7) % 5 != 0;
    for (int j = 0; j < T; j++) keep[j] = 0;   /* sentence 0: every key blocked -> zeros */
    float *gq = dev_copy(q, nq * 4), *gK = dev_copy(K, nk * 4), *gV = dev_copy(V, nv * 4);
    float *gout = cuda_alloc(no * 4), *gw = cuda_alloc(nw * 4);
    uint8_t *gkeep = (uint8_t *)dev_copy(keep, (size_t)R * T);
    Worst wa;
    worst_init(&wa);
    for (int cross = 0; cross <= 1; cross++) {
        int g = cross ? group : 1, nn = cross ? T : n;
        attend_rows_forward(out, w, q, K, V, cross ? keep : NULL, R, g, h, nn, T, dk, dv);
        cuda_attend_rows_forward(gout, gw, gq, gK, gV, cross ? gkeep : NULL, R, g, h, nn, T, dk, dv);
        worst_update(&wa, dev_diff(gout, out, tmp, no), "%s R=%d h=%d n=%d (out)", cross ? "cross" : "self", R, h, nn);
        worst_update(&wa, dev_diff(gw, w, tmp, (size_t)R * h * nn), "%s R=%d h=%d n=%d (weights)",
                     cross ? "cross" : "self", R, h, nn);
    }
    emit(sink, "decode attention (one query per row)", &wa, 1e-5 * (dk > n ? dk : n) + 1e-6);
    /* gather: rows of width dk*n with pitch T*dk, reversed, and a strided copy (idx NULL) */
    int rows = R * h;
    int *idx = host_alloc((size_t)rows * sizeof(int));
    for (int j = 0; j < rows; j++) idx[j] = rows - 1 - j;
    float *dst = host_floats(nk), *gdst = dev_copy(K, nk * 4);
    memcpy(dst, K, nk * 4);
    Worst wg;
    worst_init(&wg);
    gather_rows(dst, (size_t)T * dk, K, (size_t)T * dk, idx, rows, (size_t)n * dk);
    int *gidx = (int *)dev_copy(idx, (size_t)rows * sizeof(int));
    float *gsrc = dev_copy(K, nk * 4);
    cuda_gather_rows(gdst, (size_t)T * dk, gsrc, (size_t)T * dk, gidx, rows, (size_t)n * dk);
    worst_update(&wg, dev_diff(gdst, dst, tmp, nk), "rows=%d width=%d (reorder)", rows, n * dk);
    gather_rows(dst, (size_t)T * dk, q, dk, NULL, rows, dk);
    cuda_gather_rows(gdst, (size_t)T * dk, gq, dk, NULL, rows, dk);
    worst_update(&wg, dev_diff(gdst, dst, tmp, nk), "rows=%d width=%d (append)", rows, dk);
    emit(sink, "decode gather_rows (exact)", &wg, 0.0);
    cuda_free(gq), cuda_free(gK), cuda_free(gV), cuda_free(gout), cuda_free(gw), cuda_free(gkeep);
    cuda_free(gidx), cuda_free(gsrc), cuda_free(gdst);
    free(q), free(K), free(V), free(out), free(w), free(tmp), free(keep), free(idx), free(dst);
}

/* ---- the table ------------------------------------------------------------------- */

typedef void (*CheckFn)(Sink *sink, int size);
static const CheckFn checks[] = {
    check_gemm, check_softmax, check_attention, check_layernorm, check_linear,
    check_elementwise, check_embed, check_xent,
    check_decode,
};

int cuda_selftest_count(void) { return (int)(sizeof checks / sizeof checks[0]); }

int cuda_selftest_run(int i, int size, CudaCheck *results, int max) {
    if (i < 0 || i >= cuda_selftest_count()) return 0;
    Sink sink = {results, 0, max};
    checks[i](&sink, size);
    return sink.n;
}

