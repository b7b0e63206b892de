/* nn_fast.c - the tuned twins of ref/nn.c's layers: what a training step
 * calls (model/backend_cpu.c). Each computes what its plain twin in ref/nn.c
 * does (named at each function), faster:
 *
 *   threads   loops over independent rows or elements are cut into chunks
 *             that the threads take in turn (parallel_run), when the work is
 *             big enough to pay for handing chunks out;
 *   vectors   sums kept in several running sums (layer norm) and loops marked
 *             SIMD, so the vector unit stays busy; dropout's hash with AVX2.
 *
 * Each row (or element) is computed by one thread in a fixed order, so the
 * results are bit-identical run to run and for any number of threads. Sums
 * ACROSS rows (bias and gamma gradients) go row by row in order for the
 * same reason. Element-wise ops and row ops give their plain twin's bits;
 * layer norm adds in another order and agrees to rounding. The tests
 * (tests/check_nn.c, check_dropout.c) compare every pair.
 */
#include "fast/nn_fast.h"
#include "ref/nn.h"
#include "core/dropout_mask.h"
#include "fast/parallel.h"

#include <assert.h>
#include <math.h>
#include "fast/simd.h"

/* Row-wise loops hand out chunks of about this many floats (parallel_run):
 * one layer norm over chapter 08's 1280 x 64 activations takes about 30
 * microseconds, so it is cut in 3 chunks of ~10 microseconds, each far more
 * than the well-under-a-microsecond it costs to hand one to a spinning
 * worker. Smaller loops stay on the calling thread. */
#define NN_PARALLEL_MIN (1L << 15)

/* rows per chunk of a row-wise loop: about NN_PARALLEL_MIN floats each, so a
 * chunk is worth handing to another thread (parallel_run) */
static long rows_per_chunk(int C) {
    long r = NN_PARALLEL_MIN / (C > 0 ? C : 1);
    return r > 0 ? r : 1;
}

/* ---- element-wise loops over the threads -----------------------------------
 * Each element is its own output, so any cut of [0, n) gives the same bits.
 * One small job type for the few element-wise loops of a step. */
typedef enum { EW_ADD, EW_ADD2, EW_MUL_ACC, EW_RELU, EW_RELU_ACC, EW_RELU_MASK } EwOp;

typedef struct {
    EwOp op;
    float *y, *y2;
    const float *a, *b;
} EwJob;

static void ew_chunk(void *ctx, long lo, long hi) {
    const EwJob *j = ctx;
    float *y = j->y, *y2 = j->y2;
    const float *a = j->a, *b = j->b;
    switch (j->op) {
    case EW_ADD:       /* y = a + b */
        SIMD
        for (long i = lo; i < hi; i++) y[i] = a[i] + b[i];
        break;
    case EW_ADD2:      /* y += a, y2 += a */
        SIMD
        for (long i = lo; i < hi; i++) {
            y[i] += a[i];
            y2[i] += a[i];
        }
        break;
    case EW_MUL_ACC:   /* y += a * b */
        SIMD
        for (long i = lo; i < hi; i++) y[i] += a[i] * b[i];
        break;
    case EW_RELU:      /* y = max(0, a) */
        SIMD
        for (long i = lo; i < hi; i++) y[i] = a[i] > 0.0f ? a[i] : 0.0f;
        break;
    case EW_RELU_ACC:  /* y += b > 0 ? a : 0 */
        SIMD
        for (long i = lo; i < hi; i++) y[i] += b[i] > 0.0f ? a[i] : 0.0f;
        break;
    case EW_RELU_MASK: /* y = b > 0 ? y : 0 */
        SIMD
        for (long i = lo; i < hi; i++) y[i] = b[i] > 0.0f ? y[i] : 0.0f;
        break;
    }
}

static void ew_run(EwOp op, float *y, float *y2, const float *a, const float *b, size_t n) {
    parallel_run((long)n, NN_PARALLEL_MIN, ew_chunk, &(EwJob){op, y, y2, a, b});
}

/* ---- sums over rows -------------------------------------------------------------
 * acc[c] += sum_n w(n, c) for c in [0, C), every column summed over the rows
 * in order. Used for the bias and LayerNorm gradients (the sums over
 * positions of Sec. 3.1 / Eq. 2). The order leaves no room for two threads
 * at once, but it leaves room to follow the data: the rows were written
 * mostly by the thread that computed them (the caller the first ones, a
 * worker the last: parallel.c), so the caller sums the first half and a
 * worker goes on from there with the second (parallel_in_turn). Split by
 * columns instead, each thread read half of its rows from the other core,
 * one cache line per row (chapter 08 on 2 threads, cores far apart: 7.02
 * ms a step; one thread for it all: 6.44; in turn: 3.5% less again). */
typedef struct {
    float *dgamma, *dbeta;
    const float *dy, *x, *mean, *rstd;
    int C;
} ColSumJob;

/* rows [n0, n1), in order */
static void colsum_rows(void *ctx, long n0, long n1) {
    const ColSumJob *j = ctx;
    float *restrict dgamma = j->dgamma, *restrict dbeta = j->dbeta;
    int C = j->C;
    for (long n = n0; n < n1; n++) {
        const float *dy = j->dy + n * C;
        if (dgamma) {   /* LayerNorm: dgamma += dy * norm (x given) */
            const float *x = j->x + n * C;
            float m = j->mean[n], s = j->rstd[n];
            SIMD
            for (int c = 0; c < C; c++) dgamma[c] += dy[c] * ((x[c] - m) * s);
        }
        if (dbeta) {    /* bias / beta: += dy */
            SIMD
            for (int c = 0; c < C; c++) dbeta[c] += dy[c];
        }
    }
}

static void colsum_run(float *dgamma, float *dbeta, const float *dy, const float *x,
                       const float *mean, const float *rstd, int N, int C) {
    ColSumJob j = {dgamma, dbeta, dy, x, mean, rstd, C};
    if ((long)N * C < NN_PARALLEL_MIN) colsum_rows(&j, 0, N);
    else parallel_in_turn(N, N / 2, colsum_rows, &j);
}

/* ========================================================================== */
/* the bias of a linear layer (Eq. 2)                                         */
/* ========================================================================== */

/* out (N,C) += bias (C) on every row, the rows shared among the threads.
 * Plain twin: bias_forward_ref, ref/nn.c. */
typedef struct {
    float *out;
    const float *bias;
    int C;
} BiasJob;

static void bias_rows(void *ctx, long lo, long hi) {
    const BiasJob *j = ctx;
    for (long n = lo; n < hi; n++) {
        float *o = j->out + n * j->C;
        SIMD
        for (int c = 0; c < j->C; c++) o[c] += j->bias[c];
    }
}

void bias_forward(float *out, const float *bias, int N, int C) {
    assert(N >= 0 && C > 0);
    parallel_run(N, rows_per_chunk(C), bias_rows, &(BiasJob){out, bias, C});
}

/* dbias (C) += the sum of dout's rows, in order (colsum_run).
 * Plain twin: bias_backward_ref, ref/nn.c. */
void bias_backward(float *dbias, const float *dout, int N, int C) {
    assert(N >= 0 && C > 0);
    colsum_run(NULL, dbias, dout, NULL, NULL, NULL, N, C);
}

/* ========================================================================== */
/* ReLU                                                                       */
/* ========================================================================== */

/* plain twins: relu_forward_ref, relu_backward_ref, relu_backward_inplace_ref
 * (ref/nn.c) */
void relu_forward(float *out, const float *inp, size_t n) {
    ew_run(EW_RELU, out, NULL, inp, NULL, n);   /* out = inp > 0 ? inp : 0 */
}

void relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    ew_run(EW_RELU_ACC, dinp, NULL, dout, out, n);   /* dinp += out > 0 ? dout : 0 */
}

/* A select, not a branch: whether a unit is on is a coin flip the branch
 * predictor cannot learn. */
void relu_backward_inplace(float *d, const float *out, size_t n) {
    ew_run(EW_RELU_MASK, d, NULL, NULL, out, n);   /* d = out > 0 ? d : 0 */
}

/* ========================================================================== */
/* layer normalisation (Sec. 3.1)                                             */
/* ========================================================================== */

/* Sums of one row in double, with 8 running sums instead of one: a chain of
 * dependent additions waits 4 cycles per element, 8 independent chains keep
 * the adder busy (and the compiler can put them in one vector). The order is
 * fixed, so the result is too. */
static double row_sum(const float *x, int C) {
    double s[8] = {0};
    int c = 0;
    for (; c + 8 <= C; c += 8)
        for (int l = 0; l < 8; l++) s[l] += x[c + l];
    for (int l = 0; c < C; c++, l++) s[l] += x[c];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* sum_c (x_c - m)^2, the same way */
static double row_sqdev(const float *x, double m, int C) {
    double s[8] = {0};
    int c = 0;
    for (; c + 8 <= C; c += 8)
        for (int l = 0; l < 8; l++) s[l] += (x[c + l] - m) * (x[c + l] - m);
    for (int l = 0; c < C; c++, l++) s[l] += (x[c] - m) * (x[c] - m);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* layernorm_forward_ref (ref/nn.c) with the row sums of row_sum / row_sqdev
 * (8 running sums) and rows shared among threads when the work is large. Same math in
 * a different order of additions: the two agree to float rounding. */
typedef struct {
    float *out, *mean, *rstd;
    const float *inp, *gamma, *beta;
    int C;
} LnJob;

static void ln_forward_rows(void *ctx, long lo, long hi) {
    const LnJob *j = ctx;
    float *out = j->out, *mean = j->mean, *rstd = j->rstd;
    const float *inp = j->inp, *gamma = j->gamma, *beta = j->beta;
    int C = j->C;
    for (long n = lo; n < hi; n++) {
        const float *x = inp + (long)n * C;
        float *y = out + (long)n * C;
        double m = row_sum(x, C) / C;
        double v = row_sqdev(x, m, C) / C;    /* two passes: no cancellation */
        float s = (float)(1.0 / sqrt(v + LAYERNORM_EPS));
        float mf = (float)m;
        SIMD
        for (int c = 0; c < C; c++) y[c] = gamma[c] * ((x[c] - mf) * s) + beta[c];
        mean[n] = mf;
        rstd[n] = s;
    }
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *gamma, const float *beta, int N, int C) {
    assert(N >= 0 && C > 0);
    parallel_run(N, rows_per_chunk(C), ln_forward_rows, &(LnJob){out, mean, rstd, inp, gamma, beta, C});
}

/* layernorm_backward_ref (ref/nn.c) with the two row means kept as 16
 * running sums (one AVX-512 vector) in float, and rows shared among threads. */
typedef struct {
    float *dinp;
    const float *dout, *inp, *mean, *rstd, *gamma;
    int C;
} LnBackJob;

static void ln_backward_rows(void *ctx, long lo, long hi) {
    const LnBackJob *j = ctx;
    float *dinp = j->dinp;
    const float *dout = j->dout, *inp = j->inp, *mean = j->mean, *rstd = j->rstd, *gamma = j->gamma;
    int C = j->C;
    for (long n = lo; n < hi; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float *dx = dinp + (long)n * C;
        float m = mean[n], s = rstd[n];
        /* the two row means, each kept as 16 running sums (one vector)
         * added up in a fixed order at the end */
        float a[16] = {0}, b[16] = {0};
        int c = 0;
        for (; c + 16 <= C; c += 16) {
            SIMD
            for (int l = 0; l < 16; l++) {
                float norm = (x[c + l] - m) * s;
                float dnorm = gamma[c + l] * dy[c + l];
                a[l] += dnorm;
                b[l] += dnorm * norm;
            }
        }
        for (int l = 0; c < C; c++, l++) {
            float norm = (x[c] - m) * s;
            float dnorm = gamma[c] * dy[c];
            a[l] += dnorm;
            b[l] += dnorm * norm;
        }
        for (int w = 8; w >= 1; w /= 2)
            for (int l = 0; l < w; l++) {
                a[l] += a[l + w];
                b[l] += b[l + w];
            }
        float dnorm_mean = a[0] / C, dnorm_norm_mean = b[0] / C;
        SIMD
        for (c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = gamma[c] * dy[c];
            dx[c] += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
        }
    }
}

void layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                        const float *inp, const float *mean, const float *rstd,
                        const float *gamma, int N, int C) {
    assert(N >= 0 && C > 0);
    if (dinp)
        parallel_run(N, rows_per_chunk(C), ln_backward_rows,
                     &(LnBackJob){dinp, dout, inp, mean, rstd, gamma, C});
    /* Sums over rows, rows in order for every column, so the same bits for
     * any thread count. */
    if (dgamma || dbeta) colsum_run(dgamma, dbeta, dout, inp, mean, rstd, N, C);
}

/* ========================================================================== */
/* residual connection (Sec. 3.1)                                             */
/* ========================================================================== */

/* plain twins: residual_forward_ref, residual_backward_ref (ref/nn.c) */
void residual_forward(float *out, const float *a, const float *b, size_t n) {
    ew_run(EW_ADD, out, NULL, a, b, n);   /* out = a + b */
}

void residual_backward(float *da, float *db, const float *dout, size_t n) {
    ew_run(EW_ADD2, da, db, dout, NULL, n);   /* da += dout, db += dout */
}

/* ========================================================================== */
/* dropout (Sec. 5.4)                                                         */
/* ========================================================================== */

/* dropout_forward_ref's mask, 16 elements at a time and in chunks over the
 * threads. The element's number is the counter, so any cut of [0, n) draws
 * the same mask: the same bits as the plain loop. The tensor's half of the
 * hash, mix64(key ^ tensor * c), is the same for every element: computed
 * once here (dropout_uniform recomputes it per call). */
typedef struct {
    float *out, *keep;
    const float *inp;
    float p, scale;
    uint64_t base;
} DropJob;

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512DQ__)
#define DROPOUT_AVX2 1
/* AVX2 has no 64-bit multiply (AVX-512 DQ's vpmullq, which the loop below
 * compiles to there): the compiler leaves that loop scalar. Here 4 lanes of
 * 64 bits, each product from three 32 x 32 -> 64 ones:
 *   x c mod 2^64 = lo(x) lo(c) + ((hi(x) lo(c) + lo(x) hi(c)) << 32) */
static inline __m256i mul64_avx2(__m256i x, uint64_t c) {
    const __m256i clo = _mm256_set1_epi64x((long long)(c & 0xFFFFFFFFu)), chi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), clo), _mm256_mul_epu32(x, chi));
    return _mm256_add_epi64(_mm256_mul_epu32(x, clo), _mm256_slli_epi64(cross, 32));
}

/* dropout_mix64 of 4 lanes: the same steps */
static inline __m256i mix64_avx2(__m256i z) {
    z = _mm256_add_epi64(z, _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ull));
    z = mul64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
    z = mul64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94D049BB133111EBull);
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* elements [i, i + 8): u = (z >> 40) / 2^24 of 8 counters, as floats */
static inline __m256 dropout_u8(uint64_t base, long i) {
    __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
    __m256i a = mix64_avx2(_mm256_add_epi64(_mm256_set1_epi64x((long long)(base + (uint64_t)i)), idx));
    __m256i b = mix64_avx2(_mm256_add_epi64(_mm256_set1_epi64x((long long)(base + (uint64_t)i + 4)), idx));
    /* the 24 bits of each lane (< 2^24: exact as a float) into 8 x 32 bits, in order */
    __m256i ab = _mm256_permutevar8x32_epi32(
        _mm256_blend_epi32(_mm256_srli_epi64(a, 40), _mm256_slli_epi64(_mm256_srli_epi64(b, 40), 32), 0xAA),
        _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(ab), _mm256_set1_ps(1.0f / 16777216.0f));
}
#endif

static void dropout_chunk(void *ctx, long lo, long hi) {
    const DropJob *j = ctx;
    float *out = j->out, *keep = j->keep;    /* out may be inp (in place) */
    const float *inp = j->inp;
    const float p = j->p, scale = j->scale;
    const uint64_t base = j->base;
#ifdef DROPOUT_AVX2
    const __m256 vp = _mm256_set1_ps(p), vscale = _mm256_set1_ps(scale);
    for (; lo + 8 <= hi; lo += 8) {
        __m256 k = _mm256_and_ps(_mm256_cmp_ps(dropout_u8(base, lo), vp, _CMP_GE_OQ), vscale);
        _mm256_storeu_ps(keep + lo, k);
        _mm256_storeu_ps(out + lo, _mm256_mul_ps(_mm256_loadu_ps(inp + lo), k));
    }
#endif
    SIMD
    for (long i = lo; i < hi; i++) {
        uint64_t z = dropout_mix64(base + (uint64_t)i);
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);   /* dropout_uniform */
        keep[i] = u >= p ? scale : 0.0f;                      /* dropout_keep    */
        out[i] = inp[i] * keep[i];
    }
}

void dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                     uint64_t key, uint32_t tensor) {
    assert(p >= 0.0f && p < 1.0f);
    if (p == 0.0f) {
        dropout_forward_ref(out, keep, inp, p, n, key, tensor);
        return;
    }
    DropJob j = {out, keep, inp, p, 1.0f / (1.0f - p),
                 dropout_mix64(key ^ ((uint64_t)tensor * 0xD1B54A32D192ED03ull))};
    parallel_run((long)n, NN_PARALLEL_MIN, dropout_chunk, &j);
}

/* plain twin: dropout_backward_ref, ref/nn.c */
void dropout_backward(float *dinp, const float *dout, const float *keep, size_t n) {
    ew_run(EW_MUL_ACC, dinp, NULL, dout, keep, n);   /* dinp += dout * keep */
}

/* ========================================================================== */
/* output: log-softmax and label-smoothed cross-entropy (Sec. 5.4)            */
/* ========================================================================== */

/* logsoftmax_forward_ref (ref/nn.c) on each thread's rows: the rows are
 * independent, so the same bits */
typedef struct {
    float *logp;
    const float *logits;
    int V;
} LsmJob;

static void logsoftmax_rows(void *ctx, long lo, long hi) {
    const LsmJob *j = ctx;
    logsoftmax_forward_ref(j->logp + lo * j->V, j->logits + lo * j->V, (int)(hi - lo), j->V);
}

void logsoftmax_forward(float *logp, const float *logits, int N, int V) {
    assert(N >= 0 && V > 0);
    parallel_run(N, rows_per_chunk(V), logsoftmax_rows, &(LsmJob){logp, logits, V});
}

/* smoothed_xent_backward_ref (ref/nn.c): the positions counted over the
 * whole batch, then smoothed_xent_backward_rows on each thread's rows */
typedef struct {
    float *dlogits;
    const float *logp;
    const int *targets;
    int V, pad_id, n_tokens;
    float eps_ls;
} XentBackJob;

static void xent_backward_rows(void *ctx, long lo, long hi) {
    const XentBackJob *j = ctx;
    smoothed_xent_backward_rows(j->dlogits + lo * j->V, j->logp + lo * j->V, j->targets + lo, (int)(hi - lo),
                                j->V, j->eps_ls, j->pad_id, j->n_tokens);
}

void smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                            int N, int V, float eps_ls, int pad_id) {
    int count = smoothed_xent_tokens(targets, N, V, pad_id);
    if (count == 0) return;
    parallel_run(N, rows_per_chunk(V), xent_backward_rows,
                 &(XentBackJob){dlogits, logp, targets, V, pad_id, count, eps_ls});
}
