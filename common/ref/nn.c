/* nn.c - the layers around attention: linear, ReLU, the feed-forward network
 * (Eq. 2), layer normalisation and residuals (Sec. 3.1), dropout (Sec. 5.4),
 * embeddings and positional encoding (Sec. 3.4, 3.5), and the label-smoothed
 * cross-entropy the model is trained with (Sec. 5.4).
 *
 * Each layer is a forward/backward pair side by side. Backward functions
 * quote the forward line they differentiate and ACCUMULATE (+=) into
 * gradients the caller zeroed. Nothing here allocates.
 *
 * Layer norm comes twice: layernorm_forward_ref / layernorm_backward_ref are
 * the formula as plain loops, to read first; layernorm_forward /
 * layernorm_backward (what the model calls) sum each row in several running
 * sums so the vector unit stays busy. tests/check_nn.c checks they agree.
 *
 * Threads: loops over independent rows may run in parallel (OpenMP) when the
 * work is big enough to pay for starting threads. Each row is computed by
 * one thread in a fixed order, so results are bit-identical run to run and
 * for any number of threads. Sums ACROSS rows (bias and gamma gradients,
 * embedding scatter, the mean loss) stay serial for the same reason.
 */
#include "ref/nn.h"
#include "fast/gemm.h"
#include "core/dropout_mask.h"
#include "ref/ops.h"
#include "fast/parallel.h"

#include <assert.h>
#include <math.h>
#include <string.h>
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
/* linear                                                                      */
/* ========================================================================== */

/* out (N,OUT) = inp (N,IN) @ W (IN,OUT) + bias (OUT): the x W_1 + b_1 of Eq. 2.
 * The matrix multiply is gemm() (the fast kernel); only the bias is a loop. */
typedef struct {
    float *out;
    const float *bias;
    int OUT;
} BiasJob;

static void bias_rows(void *ctx, long lo, long hi) {
    const BiasJob *j = ctx;
    for (long n = lo; n < hi; n++) {
        float *o = j->out + n * j->OUT;
        SIMD
        for (int c = 0; c < j->OUT; c++) o[c] += j->bias[c];
    }
}

void linear_forward(float *out, const float *inp, const float *W, const float *bias,
                    int N, int IN, int OUT) {
    assert(N >= 0 && IN > 0 && OUT > 0);
    gemm(0, 0, N, OUT, IN, 1.0f, inp, IN, W, OUT, 0.0f, out, OUT);
    if (!bias) return;
    parallel_run(N, rows_per_chunk(OUT), bias_rows, &(BiasJob){out, bias, OUT});
}

/* forward: out = inp @ W + bias
 *   dinp  (N,IN)  += dout (N,OUT) @ W^T
 *   dW    (IN,OUT) += inp^T @ dout
 *   dbias (OUT)   += sum over rows of dout      (bias was added to every row) */
void linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                     const float *inp, const float *W, int N, int IN, int OUT) {
    assert(N >= 0 && IN > 0 && OUT > 0);
    /* the two products are independent: one job (gemm_many), each with gemm()'s bits */
    GemmArgs g[2];
    int n = 0;
    if (dinp) g[n++] = (GemmArgs){0, 1, N, IN, OUT, 1.0f, dout, OUT, W, OUT, 1.0f, dinp, IN};
    if (dW) g[n++] = (GemmArgs){1, 0, IN, OUT, N, 1.0f, inp, IN, dout, OUT, 1.0f, dW, OUT};
    gemm_many(n, g);
    if (dbias) colsum_run(NULL, dbias, dout, NULL, NULL, NULL, N, OUT);   /* rows in order */
}

/* ========================================================================== */
/* ReLU                                                                        */
/* ========================================================================== */

void relu_forward(float *out, const float *inp, size_t n) {
    ew_run(EW_RELU, out, NULL, inp, NULL, n);   /* out = inp > 0 ? inp : 0 */
}

/* forward: out = max(0, inp). The slope is 1 where out > 0 and 0 elsewhere
 * (at exactly 0 we pick 0, the usual subgradient). */
void relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    ew_run(EW_RELU_ACC, dinp, NULL, dout, out, n);   /* dinp += out > 0 ? dout : 0 */
}

/* ========================================================================== */
/* position-wise feed-forward network (Eq. 2, Sec. 3.3)                        */
/* ========================================================================== */

/* FFN(x) = max(0, x W1 + b1) W2 + b2, the same two layers at every position
 * (the N rows never mix: "position-wise"). */
void ffn_forward(float *out, float *hidden, const float *x,
                 const float *W1, const float *b1, const float *W2, const float *b2,
                 int N, int d_model, int d_ff) {
    linear_forward(hidden, x, W1, b1, N, d_model, d_ff);         /* x W1 + b1         */
    relu_forward(hidden, hidden, (size_t)N * d_ff);              /* max(0, .)         */
    linear_forward(out, hidden, W2, b2, N, d_ff, d_model);       /* hidden W2 + b2    */
}

void ffn_backward(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                  float *dhidden, const float *dout, const float *hidden, const float *x,
                  const float *W1, const float *W2, int N, int d_model, int d_ff) {
    size_t nh = (size_t)N * d_ff;
    /* forward: out = hidden W2 + b2
     *   dhidden = dout W2^T (written, beta = 0: dhidden is scratch and
     *   needs no zeroing), dW2 += hidden^T dout, db2 += sum of dout's rows */
    gemm(0, 1, N, d_ff, d_model, 1.0f, dout, d_model, W2, d_model, 0.0f, dhidden, d_ff);
    linear_backward(NULL, dW2, db2, dout, hidden, W2, N, d_ff, d_model);
    /* forward: hidden = max(0, pre). Zero the gradient where ReLU was off;
     * done in place, so dhidden now holds d(pre). A select, not a branch:
     * whether a unit is on is a coin flip the branch predictor cannot learn. */
    ew_run(EW_RELU_MASK, dhidden, NULL, NULL, hidden, nh);   /* hidden > 0 ? dhidden : 0 */
    /* forward: pre = x W1 + b1 */
    linear_backward(dx, dW1, db1, dhidden, x, W1, N, d_model, d_ff);
}

/* ========================================================================== */
/* layer normalisation (Sec. 3.1)                                              */
/* ========================================================================== */

/* The reference, as a student would write it on paper. Per row: mean,
 * biased variance (divide by C, as Ba et al. and PyTorch do),
 * rstd = 1/sqrt(var + eps), out = gamma * (x - mean) * rstd + beta.
 * The row statistics are summed in double: cheap, and the variance of a row
 * with a large mean loses nothing. layernorm_forward below computes the same
 * with faster sums; a test checks that the two agree. */
void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C;
        float *y = out + (long)n * C;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += x[c];
        double m = sum / C;
        double sq = 0.0;                      /* two passes: no cancellation */
        for (int c = 0; c < C; c++) sq += (x[c] - m) * (x[c] - m);
        double v = sq / C;
        float s = (float)(1.0 / sqrt(v + LAYERNORM_EPS));
        float mf = (float)m;
        for (int c = 0; c < C; c++) y[c] = gamma[c] * ((x[c] - mf) * s) + beta[c];
        mean[n] = mf;
        rstd[n] = s;
    }
}

/* forward: norm = (x - mean) * rstd ;  out = gamma * norm + beta
 *   dbeta  += dout                  dgamma += dout * norm
 *   dnorm   = dout * gamma
 *   dx     += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
 * The last line is the chain rule through mean and rstd, which both depend
 * on every x of the row: moving x shifts the mean (the mean(dnorm) term) and
 * rescales the spread (the norm * mean(dnorm * norm) term).
 * This is the reference: one plain loop per line above, the two row means
 * summed in double. layernorm_backward is the fast twin. */
void layernorm_backward_ref(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *gamma, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float m = mean[n], s = rstd[n];
        if (dinp) {
            float *dx = dinp + (long)n * C;
            double a = 0.0, b = 0.0;          /* sum of dnorm, sum of dnorm * norm */
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * s;
                float dnorm = gamma[c] * dy[c];
                a += dnorm;
                b += dnorm * norm;
            }
            float dnorm_mean = (float)(a / C), dnorm_norm_mean = (float)(b / C);
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * s;
                float dnorm = gamma[c] * dy[c];
                dx[c] += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
            }
        }
        for (int c = 0; c < C; c++) {
            if (dgamma) dgamma[c] += dy[c] * ((x[c] - m) * s);
            if (dbeta) dbeta[c] += dy[c];
        }
    }
}

/* ---- the fast twins: same results, summed so the vector unit stays busy ---- */

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

/* layernorm_forward_ref with the row sums of row_sum / row_sqdev (8 running
 * sums) and rows shared among threads when the work is large. Same math in
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

/* layernorm_backward_ref with the two row means kept as 16 running sums (one
 * AVX-512 vector) in float, and rows shared among threads. */
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
/* residual connection (Sec. 3.1: LayerNorm(x + Sublayer(x)))                  */
/* ========================================================================== */

void residual_forward(float *out, const float *a, const float *b, size_t n) {
    ew_run(EW_ADD, out, NULL, a, b, n);   /* out = a + b */
}

/* forward: out = a + b, so both inputs receive dout unchanged: this is why a
 * residual path carries gradient straight through a deep stack. */
void residual_backward(float *da, float *db, const float *dout, size_t n) {
    ew_run(EW_ADD2, da, db, dout, NULL, n);   /* da += dout, db += dout */
}

/* ========================================================================== */
/* dropout (Sec. 5.4, P_drop = 0.1)                                            */
/* ========================================================================== */

/* Inverted dropout: drop with probability p, scale the survivors by 1/(1-p)
 * so the expected value of every element is unchanged; at inference (p = 0)
 * the layer is the identity. Element i's fate is dropout_keep(key, tensor, i)
 * (dropout_mask.h): a hash of its coordinates, not a draw from a stream, so
 * the GPU computes the very same mask and the same key gives the same mask. */
void dropout_forward_ref(float *out, float *keep, const float *inp, float p, size_t n,
                     uint64_t key, uint32_t tensor) {
    assert(p >= 0.0f && p < 1.0f);
    if (p == 0.0f) {
        if (out != inp) memcpy(out, inp, n * sizeof(float));
        for (size_t i = 0; i < n; i++) keep[i] = 1.0f;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* u in [0, 1): P(u >= p) = 1 - p, the keep probability */
        keep[i] = dropout_keep(key, tensor, i, p);
        out[i] = inp[i] * keep[i];
    }
}

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

/* forward: out = inp * keep, with the very mask the forward pass drew */
void dropout_backward(float *dinp, const float *dout, const float *keep, size_t n) {
    ew_run(EW_MUL_ACC, dinp, NULL, dout, keep, n);   /* dinp += dout * keep */
}

/* ========================================================================== */
/* embeddings (Sec. 3.4) and positional encoding (Sec. 3.5)                    */
/* ========================================================================== */

/* Sec. 3.4: "In the embedding layers, we multiply those weights by
 * sqrt(d_model)". The table is initialised small, so the scale brings the
 * token vectors to the size of the PE (entries in [-1, 1]) they are added to. */
void embed_forward(float *out, const int *ids, const float *table, const float *pe,
                   int B, int T, int d_model, int vocab) {
    assert(B >= 0 && T >= 0 && d_model > 0 && vocab > 0);
    float scale = sqrtf((float)d_model);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int id = ids[b * T + t];
            assert(id >= 0 && id < vocab && "token id outside [0, vocab): validate input first");
            const float *e = table + (long)id * d_model;
            const float *p = pe + (long)t * d_model;
            float *o = out + ((long)b * T + t) * d_model;
            for (int c = 0; c < d_model; c++) o[c] = e[c] * scale + p[c];
        }
    }
}

/* forward: out[b,t] = table[ids[b,t]] * sqrt(d_model) + pe[t]
 * Each use of a token adds its gradient into that token's row: a token that
 * appears twice gets both contributions (scatter-add). PE is a fixed
 * formula, so nothing flows into it. Serial: two positions with the same id
 * write the same row. */
void embed_backward(float *dtable, const float *dout, const int *ids,
                    int B, int T, int d_model, int vocab) {
    assert(B >= 0 && T >= 0 && d_model > 0 && vocab > 0);
    float scale = sqrtf((float)d_model);
    for (long i = 0; i < (long)B * T; i++) {
        int id = ids[i];
        assert(id >= 0 && id < vocab && "token id outside [0, vocab)");
        const float *d = dout + i * d_model;
        float *g = dtable + (long)id * d_model;
        for (int c = 0; c < d_model; c++) g[c] += d[c] * scale;
    }
}

/* PE(pos, 2i)   = sin(pos * w_i),  PE(pos, 2i+1) = cos(pos * w_i),
 * w_i = 1 / 10000^(2i/d_model): wavelengths 2*pi .. 10000*2*pi, a geometric
 * progression (Sec. 3.5). The angle pos * w_i is formed in double: in float,
 * pos = 10000 would carry an angle error of ~5e-4 radians. */
void posenc_fill(float *pe, int max_len, int d_model) {
    assert(max_len >= 0 && d_model > 0);
    for (int pos = 0; pos < max_len; pos++) {
        float *row = pe + (long)pos * d_model;
        for (int j = 0; j < d_model; j++) {
            int two_i = j - (j % 2);          /* columns 2i and 2i+1 share w_i */
            double w = pow(10000.0, -(double)two_i / d_model);
            double angle = (double)pos * w;
            row[j] = (float)(j % 2 == 0 ? sin(angle) : cos(angle));
        }
    }
}

/* ========================================================================== */
/* output: log-softmax and label-smoothed cross-entropy (Sec. 5.4)             */
/* ========================================================================== */

/* log softmax(x)_v = x_v - log sum_u exp(x_u)
 *                  = (x_v - max) - log sum_u exp(x_u - max)
 * The second form never overflows (every exponent <= 0) and never takes the
 * log of 0 (the max term contributes exp(0) = 1). Logits must be finite. */
typedef struct {
    float *logp;
    const float *logits;
    int V;
} LsmJob;

static void logsoftmax_rows(void *ctx, long lo, long hi) {
    const LsmJob *j = ctx;
    float *logp = j->logp;
    const float *logits = j->logits;
    int V = j->V;
    for (long n = lo; n < hi; n++) {
        const float *x = logits + (long)n * V;
        float *y = logp + (long)n * V;
        float max = x[0];
        for (int v = 1; v < V; v++) max = x[v] > max ? x[v] : max;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((double)x[v] - max);
        float lse = (float)log(sum);
        for (int v = 0; v < V; v++) y[v] = (x[v] - max) - lse;
    }
}

void logsoftmax_forward(float *logp, const float *logits, int N, int V) {
    assert(N >= 0 && V > 0);
    parallel_run(N, rows_per_chunk(V), logsoftmax_rows, &(LsmJob){logp, logits, V});
}

/* Sec. 5.4, "label smoothing of value eps_ls = 0.1": the target keeps 1-eps_ls
 * and the rest is shared evenly by every class that could be a wrong answer.
 * Padding is never an answer, so (as in The Annotated Transformer) it gets 0
 * and the share is eps_ls/(V-2). A padding target (a position that does not
 * count) gets an all-zero distribution. */
void smoothed_targets(float *dist, int target, int V, float eps_ls, int pad_id) {
    assert(V > 0 && target >= 0 && target < V && pad_id < V);
    assert(eps_ls >= 0.0f && eps_ls < 1.0f);
    if (target == pad_id) {
        for (int v = 0; v < V; v++) dist[v] = 0.0f;
        return;
    }
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    /* With no other class to share eps_ls with (V = 2 with a pad, or V = 1),
     * there is nothing to smooth towards: plain one-hot. */
    float share = others > 0 ? eps_ls / others : 0.0f;
    float on = others > 0 ? 1.0f - eps_ls : 1.0f;
    for (int v = 0; v < V; v++) dist[v] = share;
    if (pad_id >= 0) dist[pad_id] = 0.0f;
    dist[target] = on;
}

/* The loss of one counted row, -sum_v dist_v logp_v, without building dist:
 * on * logp[target] + share * (sum of logp over the other classes). Skipping
 * the pad class (instead of multiplying it by 0) keeps a -inf there harmless. */
static double row_xent(const float *logp, int target, int V, float eps_ls, int pad_id) {
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    double share = others > 0 ? (double)eps_ls / others : 0.0;
    double on = others > 0 ? 1.0 - eps_ls : 1.0;
    double rest = 0.0;
    if (share > 0.0)
        for (int v = 0; v < V; v++)
            if (v != target && v != pad_id) rest += logp[v];
    return -(on * logp[target] + share * rest);
}

float smoothed_xent_forward(const float *logp, const int *targets, int N, int V,
                            float eps_ls, int pad_id, int *n_tokens) {
    assert(N >= 0 && V > 0 && pad_id < V);
    double total = 0.0;
    int count = 0;
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        assert(t >= 0 && t < V && "target id outside [0, V): validate input first");
        if (t == pad_id) continue;            /* padding: not a prediction */
        total += row_xent(logp + (long)n * V, t, V, eps_ls, pad_id);
        count++;
    }
    if (n_tokens) *n_tokens = count;
    return count > 0 ? (float)(total / count) : 0.0f;   /* all padding: 0, not 0/0 */
}

/* forward: loss = (1/n_tokens) * sum over counted rows of -sum_v dist_v logp_v,
 *          logp = logits - logsumexp(logits).
 * d(-sum_v dist_v logp_v)/d logits_u = softmax_u * sum_v dist_v - dist_u
 *                                    = softmax_u - dist_u   (dist sums to 1)
 * and softmax = exp(logp). Padding rows get nothing. */
typedef struct {
    float *dlogits;
    const float *logp;
    const int *targets;
    int V, pad_id;
    float on, share, inv;
} XentBackJob;

static void xent_backward_rows(void *ctx, long lo, long hi) {
    const XentBackJob *j = ctx;
    float *dlogits = j->dlogits;
    const float *logp = j->logp;
    const int *targets = j->targets;
    int V = j->V, pad_id = j->pad_id;
    float on = j->on, share = j->share, inv = j->inv;
    for (long n = lo; n < hi; n++) {
        int t = targets[n];
        if (t == pad_id) continue;
        const float *lp = logp + (long)n * V;
        float *d = dlogits + (long)n * V;
        for (int v = 0; v < V; v++) {
            float dist = v == t ? on : v == pad_id ? 0.0f : share;
            d[v] += (expf(lp[v]) - dist) * inv;
        }
    }
}

void smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                            int N, int V, float eps_ls, int pad_id) {
    assert(N >= 0 && V > 0 && pad_id < V);
    int count = 0;
    for (int n = 0; n < N; n++) {
        assert(targets[n] >= 0 && targets[n] < V);
        count += targets[n] != pad_id;
    }
    if (count == 0) return;
    float inv = 1.0f / count;
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    float share = others > 0 ? eps_ls / others : 0.0f;
    float on = others > 0 ? 1.0f - eps_ls : 1.0f;
    parallel_run(N, rows_per_chunk(V), xent_backward_rows,
                 &(XentBackJob){dlogits, logp, targets, V, pad_id, on, share, inv});
}
