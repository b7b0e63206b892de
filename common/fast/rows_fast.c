/* rows_fast.c - the decoder step's ops, tuned (rows_fast.h); their plain
 * twins are in ref/rows.c.
 *
 * ---- how they use every core -------------------------------------------------
 * A greedy step is one row per sentence: each product reads its whole
 * weight matrix (d_model x d_model, or x d_ff) to make one row. At the
 * paper's sizes that is 84 MB of weights per token, more than the L3 cache,
 * so the step is bound by memory, not arithmetic: here one core streams
 * about 40 GB/s, two about 60 (bench/README.md). Two things decide how fast:
 *   - Read memory in long contiguous runs. Cutting a product's output
 *     columns among the threads makes each thread read a piece of every
 *     row of W: measured, two threads that way were slower than one. So a
 *     product is cut along its *input*: slice s is rows [s S, s S + S) of W
 *     (S = ROWS_SLICE), a contiguous block, and makes a partial sum of
 *     every output; the partials are added in slice order at the end.
 *     The slices depend only on the shapes, never on the thread count, so
 *     the result is the same bits on 1 or 2 threads (not the plain loop's:
 *     another order of the same sums, equal up to rounding; tests).
 *   - The logits (rows of E) and attention ((row, head) pairs, each a
 *     contiguous run of the cache) are cut by their outputs, and each sum
 *     is kept in vector lanes (SIMD_SUM, parallel.h), equal to the plain
 *     chain up to rounding. Either way no output depends on the thread count.
 * Work under ROWS_PARALLEL_MIN multiply-adds stays on the calling thread
 * (parallel_run, parallel.h): handing it out would cost more than it saves.
 */
#include "fast/rows_fast.h"
#include "fast/gemm.h"
#include "fast/nn_fast.h"
#include "fast/ops_fast.h"
#include "fast/parallel.h"

#include <math.h>
#include <stddef.h>

#define ROWS_PARALLEL_MIN (64 * 1024)
#define ROWS_SLICE 128          /* rows of W per slice (a multiple of 4)        */
#define ROWS_SCRATCH 32768      /* floats of partial sums, on the caller's stack */

/* chunks of about a quarter of each thread's share, at least `least` long */
static long rows_grain(long n, long least) {
    int th = parallel_threads();
    long g = (n + 4L * th - 1) / (4L * th);
    return g < least ? least : g;
}

/* ============================================================================
 * attention: one query per (row, head)
 * ========================================================================== */

/* One query against n keys of one head: out (d_v) = softmax(q K^T /
 * sqrt(d_k)) V, keys with keep[j] == 0 at -inf (keep NULL: none). w (n)
 * keeps the weights. K (n,d_k) and V (n,d_v) are rows of stride d_k, d_v.
 * Each score is summed in vector lanes (SIMD_SUM), then the lanes added:
 * d_k = 64 multiply-adds in a few cycles instead of a chain of 64 dependent
 * additions (about 250 cycles) per key; the softmax is softmax_forward's
 * steps (ref/ops.c) with exp_array's vector expf (the same bits).
 * Why not the training pass's sdpa_forward (fast/attention_fast.c): its
 * kernels are built for blocks of queries against a (B,h,T,d) tensor and
 * sum in their own order, where a step has one query per (row, head) over
 * a strided cache, and the decoder's numbers (chapter 09 quotes them) are
 * these sums' bits. */
static void attend_one(float *out, float *w, const float *q, const float *K, const float *V,
                       const uint8_t *keep, int n, int d_k, int d_v) {
    float scale = 1.0f / sqrtf((float)d_k);
    for (int j = 0; j < n; j++) {
        const float *kj = K + (size_t)j * d_k;
        float s = 0.0f;
        if (keep && !keep[j]) {
            w[j] = -INFINITY;
            continue;
        }
        SIMD_SUM(s)
        for (int c = 0; c < d_k; c++) s += q[c] * kj[c];
        w[j] = s * scale;
    }
    /* the stable softmax; a fully masked row gives zeros, never NaN */
    float max = -INFINITY;
    for (int j = 0; j < n; j++) max = w[j] > max ? w[j] : max;
    if (max == -INFINITY) {
        for (int j = 0; j < n; j++) w[j] = 0.0f;
    } else {
        for (int j = 0; j < n; j++) w[j] = w[j] - max;
        exp_array(w, w, n);
        float sum = 0.0f;
        for (int j = 0; j < n; j++) sum += w[j];
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++) w[j] *= inv;
    }
    for (int c = 0; c < d_v; c++) out[c] = 0.0f;
    for (int j = 0; j < n; j++) {
        if (w[j] == 0.0f) continue;
        const float *vj = V + (size_t)j * d_v;
        float wj = w[j];
        SIMD
        for (int c = 0; c < d_v; c++) out[c] += wj * vj[c];
    }
}

typedef struct {
    float *out, *weights;
    const float *q, *K, *V;
    const uint8_t *keep;
    int group, h, n, stride, d_k, d_v;
} AttendJob;

/* (row, head) pairs lo..hi-1: pair p is row p / h, head p % h */
static void attend_chunk(void *ctx, long lo, long hi) {
    const AttendJob *a = ctx;
    int h = a->h, n = a->n;
    for (long p = lo; p < hi; p++) {
        int r = (int)(p / h), i = (int)(p % h), b = r / a->group;
        attend_one(a->out + (size_t)p * a->d_v, a->weights + (size_t)p * n, a->q + (size_t)p * a->d_k,
                   a->K + ((size_t)b * h + i) * a->stride * a->d_k, a->V + ((size_t)b * h + i) * a->stride * a->d_v,
                   a->keep ? a->keep + (size_t)b * n : NULL, n, a->d_k, a->d_v);
    }
}

void attend_rows_forward(float *out, float *weights, const float *q, const float *K, const float *V,
                         const uint8_t *keep, int R, int group, int h, int n, int stride, int d_k, int d_v) {
    long pairs = (long)R * h, work = pairs * n * (d_k + d_v);
    AttendJob a = {out, weights, q, K, V, keep, group, h, n, stride, d_k, d_v};
    if (work < ROWS_PARALLEL_MIN) attend_chunk(&a, 0, pairs);
    else parallel_run(pairs, rows_grain(pairs, 1), attend_chunk, &a);
}

/* ============================================================================
 * products with few rows
 * ========================================================================== */

typedef struct {
    float *out, *part;          /* (R,OUT); (slices-1, R, OUT) partial sums */
    const float *inp, *W, *bias;
    int R, IN, OUT, slice;
} RowsJob;

/* Slices lo..hi-1. Slice s: rows i0..i1-1 of W into its own (R,OUT) sums
 * (slice 0: out, started at the bias; the others: part, started at 0),
 * four rows of W per pass: o + a0 w0 + a1 w1 + a2 w2 + a3 w3, left to
 * right, the same roundings as four passes of the plain loop but each
 * output loaded and stored once per four rows of W (on one core that alone
 * made the step about 25% faster). */
static void rows_chunk(void *ctx, long lo, long hi) {
    const RowsJob *a = ctx;
    int R = a->R, IN = a->IN, OUT = a->OUT;
    for (long sl = lo; sl < hi; sl++) {
        int i0 = (int)sl * a->slice, i1 = i0 + a->slice < IN ? i0 + a->slice : IN;
        float *dst = sl == 0 ? a->out : a->part + (size_t)(sl - 1) * R * OUT;
        for (int r = 0; r < R; r++)
            for (int j = 0; j < OUT; j++) dst[(size_t)r * OUT + j] = sl == 0 && a->bias ? a->bias[j] : 0.0f;
        int i = i0;
        for (; i + 4 <= i1; i += 4) {
            const float *w0 = a->W + (size_t)i * OUT, *w1 = w0 + OUT, *w2 = w1 + OUT, *w3 = w2 + OUT;
            /* ask for the next pass's four rows now (one request per 64-byte
             * line): the loads of this pass then overlap their trip from
             * memory; measured 5-10% faster on one core */
            if (i + 8 <= i1)
                for (int j = 0; j < 4 * OUT; j += 16) __builtin_prefetch(w0 + 4 * (size_t)OUT + j);
            for (int r = 0; r < R; r++) {
                const float *x = a->inp + (size_t)r * IN + i;
                float a0 = x[0], a1 = x[1], a2 = x[2], a3 = x[3];
                float *o = dst + (size_t)r * OUT;
                SIMD
                for (int j = 0; j < OUT; j++) o[j] = o[j] + a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j];
            }
        }
        for (; i < i1; i++) {             /* the last rows when IN is not a multiple of 4 */
            const float *w = a->W + (size_t)i * OUT;
            for (int r = 0; r < R; r++) {
                float x = a->inp[(size_t)r * IN + i], *o = dst + (size_t)r * OUT;
                SIMD
                for (int j = 0; j < OUT; j++) o[j] += x * w[j];
            }
        }
    }
}

void linear_rows_forward(float *out, const float *inp, const float *W, const float *bias,
                         int R, int IN, int OUT) {
    if (R > DECODE_FEW_ROWS) {
        /* enough rows for gemm's packing to pay: the training pass's linear
         * layer (linear_forward, layers/linear.c, a layer above this one),
         * x W then + b, step for step and so bit for bit */
        gemm(0, 0, R, OUT, IN, 1.0f, inp, IN, W, OUT, 0.0f, out, OUT);
        if (bias) bias_forward(out, bias, R, OUT);
        return;
    }
    /* slices of ROWS_SLICE rows; fewer, longer ones when their partial sums
     * would not fit the scratch; one (the whole product) when not even two do */
    long ro = (long)R * OUT, most = 1 + ROWS_SCRATCH / (ro > 0 ? ro : 1);
    int slice = ROWS_SLICE;
    if ((IN + slice - 1) / slice > most) slice = (int)(((IN + most - 1) / most + 3) / 4 * 4);
    long slices = most > 1 ? (IN + slice - 1) / slice : 1;
    if (slices <= 1) slices = 1, slice = IN > 0 ? IN : 1;
    float part[ROWS_SCRATCH];
    RowsJob a = {out, part, inp, W, bias, R, IN, OUT, slice};
    if ((long)R * IN * OUT < ROWS_PARALLEL_MIN) rows_chunk(&a, 0, slices);
    else parallel_run(slices, 1, rows_chunk, &a);
    /* out = slice 0 + slice 1 + ... in slice order, whoever computed them */
    for (long sl = 1; sl < slices; sl++) {
        const float *p = part + (size_t)(sl - 1) * ro;
        SIMD
        for (long j = 0; j < ro; j++) out[j] += p[j];
    }
}

typedef struct {
    float *out;
    const float *x, *E;
    int R, D, V;
} LogitsJob;

/* vocabulary entries lo..hi-1 of logits_rows_forward_ref's loops, each dot
 * product summed in vector lanes */
static void logits_chunk(void *ctx, long lo, long hi) {
    const LogitsJob *a = ctx;
    int R = a->R, D = a->D, V = a->V;
    for (long v = lo; v < hi; v++) {
        const float *e = a->E + (size_t)v * D;
        for (int r = 0; r < R; r++) {
            const float *xr = a->x + (size_t)r * D;
            float s = 0.0f;
            SIMD_SUM(s)
            for (int c = 0; c < D; c++) s += xr[c] * e[c];
            a->out[(size_t)r * V + v] = s;
        }
    }
}

void logits_rows_forward(float *out, const float *x, const float *E, int R, int D, int V) {
    if (R > DECODE_FEW_ROWS) {
        gemm(0, 1, R, V, D, 1.0f, x, D, E, D, 0.0f, out, V);
        return;
    }
    LogitsJob a = {out, x, E, R, D, V};
    if ((long)R * D * V < ROWS_PARALLEL_MIN) logits_chunk(&a, 0, V);
    else parallel_run(V, rows_grain(V, 16), logits_chunk, &a);
}
