/* attention_fast.c - scaled dot-product attention (Eq. 1), tuned.
 *
 * Plain twin: sdpa_forward_ref / sdpa_backward_ref (ref/attention.c), Eq. (1)
 * one step per loop; tests/check_attention.c (Twins: test_sdpa_twins, and
 * test_sdpa_few_keys_bits for the short-head kernels) checks them equal.
 *
 * What sdpa_forward_ref computes, arranged for speed. One head's products
 * are tiny in a small model: (10 x 16) @ (16 x 10) for the scores of
 * chapter 08's model. A general gemm() would spend most of its
 * time packing those 160 numbers into its 14x32 tile order and computing a
 * tile that is 80% padding. So each head is done here with loops that walk
 * contiguous rows with vector instructions (dot_n and mix_rows below), in
 * one pass per query row:
 *   scores (scaled, masked) -> row max -> exp and sum -> normalise -> w @ v
 * while the row of scores is still in L1, instead of one pass over the whole
 * (Tq,Tk) block per step.
 *
 * Heads are independent, so with a big enough batch they are shared among
 * threads (one head is always done start to finish by one thread, summing in
 * the same order, so the result does not depend on the thread count).
 *
 * The loops read each head where it lies in memory (HeadLayout,
 * attention_fast.h): that lets mha_forward and mha_backward
 * (layers/multihead.c) work on the (B,T,h*d) projections directly, without
 * copying them into per-head blocks and back.
 * Nothing in this file allocates: the caller hands in every buffer.
 */
#include "fast/attention_fast.h"
#include "fast/ops_fast.h"
#include "fast/parallel.h"
#include "fast/simd.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>

/* The heads are handed out in chunks of about this many multiply-adds
 * (~10-20 microseconds of one core): chapter 08's 512 (sequence, head)
 * pairs of 10 x 10 scores make ~10 chunks, so both cores share attention at
 * every size (parallel_run: a chunk costs well under a microsecond to hand
 * over; fewer pairs than one chunk stay on the calling thread). */
#define ATTN_CHUNK_WORK (1L << 17)

/* where head hh of sequence b starts */
static size_t head_at(HeadLayout l, int b, int hh) { return (size_t)b * l.bs + (size_t)hh * l.hs; }

/* The two inner loops every per-head product reduces to:
 *   dot_n:    sum_c a[c] b[c]                       (a score: q_i . k_j)
 *   mix_rows: y[c] (+)= sum_t coef[t*cs] x_t[c]     (a weighted sum of rows:
 *             weights @ v, and the backward's ds @ k, ds^T @ q, w^T @ dO)
 * With AVX-512 each is written with 16-float vectors (a masked load covers
 * a ragged end, e.g. d_k = 10), with AVX2 with 8-float ones. mix_rows keeps
 * y's columns in a register across all n rows instead of loading and
 * storing y once per row, and skips rows whose coefficient is exactly 0
 * (blocked pairs: half of the work under a causal mask). Both sum in a
 * fixed order, the same on every thread. (Each build rounds its own way:
 * the plain loops below, 8 lanes or 16 give different last bits.) */
#if defined(__AVX512F__)
static inline __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

static inline float dot_n(const float *a, const float *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < n; c += 16) {
        __mmask16 m = tail_mask(n - c);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + c), _mm512_maskz_loadu_ps(m, b + c), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static inline void mix_rows(float *y, const float *coef, size_t cs, const float *x, size_t rx,
                            int n, int d, int accumulate) {
    for (int c = 0; c < d; c += 16) {
        __mmask16 m = tail_mask(d - c);
        __m512 s = accumulate ? _mm512_maskz_loadu_ps(m, y + c) : _mm512_setzero_ps();
        for (int t = 0; t < n; t++) {
            float a = coef[t * cs];
            if (a != 0.0f) s = _mm512_fmadd_ps(_mm512_set1_ps(a), _mm512_maskz_loadu_ps(m, x + t * rx + c), s);
        }
        _mm512_mask_storeu_ps(y + c, m, s);
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* The same with 8-float vectors. Only a ragged end (d_k = 10: columns 8-9)
 * is masked: AMD's masked stores are slow, plain ones are not. */
static inline float dot_n(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= n; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc);
    if (c < n) {
        __m256i m = lanes8(n - c);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + c, m), _mm256_maskload_ps(b + c, m), acc);
    }
    /* the 8 lanes in a fixed tree: 4 + 4, 2 + 2, 1 + 1 */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* nv (<= 4) vectors of y at once: nv independent chains of FMAs, where one
 * vector at a time waits out each FMA's latency (the same sums, in t order).
 * The v loops are unrolled (#pragma GCC unroll): left to itself GCC kept
 * the loop for nv = 4 and s[] on the stack, each FMA's sum going through a
 * store and a load, and the weighted sums of d_k = 64 heads took about
 * twice as long */
static inline __attribute__((always_inline))
void mix_block(float *y, const float *coef, size_t cs, const float *x, size_t rx, int n, int nv, int accumulate) {
    __m256 s[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) s[v] = accumulate ? _mm256_loadu_ps(y + 8 * v) : _mm256_setzero_ps();
    for (int t = 0; t < n; t++) {
        float a = coef[t * cs];
        if (a == 0.0f) continue;
        __m256 va = _mm256_set1_ps(a);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) s[v] = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + t * rx + 8 * v), s[v]);
    }
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) _mm256_storeu_ps(y + 8 * v, s[v]);
}

static inline void mix_rows(float *y, const float *coef, size_t cs, const float *x, size_t rx,
                            int n, int d, int accumulate) {
    int c = 0;
    for (; c + 32 <= d; c += 32) mix_block(y + c, coef, cs, x + c, rx, n, 4, accumulate);
    if (c + 16 <= d) mix_block(y + c, coef, cs, x + c, rx, n, 2, accumulate), c += 16;
    if (c + 8 <= d) mix_block(y + c, coef, cs, x + c, rx, n, 1, accumulate), c += 8;
    if (c < d) {
        __m256i m = lanes8(d - c);
        __m256 s = accumulate ? _mm256_maskload_ps(y + c, m) : _mm256_setzero_ps();
        for (int t = 0; t < n; t++) {
            float a = coef[t * cs];
            if (a != 0.0f) s = _mm256_fmadd_ps(_mm256_set1_ps(a), _mm256_maskload_ps(x + t * rx + c, m), s);
        }
        _mm256_maskstore_ps(y + c, m, s);
    }
}
#else
static inline float dot_n(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

static inline void mix_rows(float *y, const float *coef, size_t cs, const float *x, size_t rx,
                            int n, int d, int accumulate) {
    if (!accumulate)
        for (int c = 0; c < d; c++) y[c] = 0.0f;
    for (int t = 0; t < n; t++) {
        float a = coef[t * cs];
        if (a == 0.0f) continue;
        const float *xt = x + t * rx;
        for (int c = 0; c < d; c++) y[c] += a * xt[c];
    }
}
#endif

#ifdef HAVE_EXP16
/* ---- heads of up to 16 keys (AVX-512) -------------------------------------------
 * Chapter 08's and the Annotated configuration's heads are 10 x 10. For
 * them a query's scores are one vector, lane j for key j: the keys (or, in
 * the backward pass, the values) are transposed once per head, so that
 * kt[ch][c] holds column 16 ch + c of every key, and a . k_j for all j is
 * d FMAs on vectors instead of one dot_n per key, each ending in a
 * horizontal sum. Every step keeps the per-key loop's bits (tested):
 *   - dots16 adds the 16 lanes of dot_n's accumulator in the tree
 *     _mm512_reduce_add_ps uses (8 + 8, 4 + 4, then 0+2 and 1+3, then the two);
 *   - exp16_ps has expf's bits;
 *   - sums over the keys run in key order, lane by lane in a register;
 *   - the weighted sums are mix_rows, its coefficients from a local array
 *     written with full vector stores (a float read back from a masked
 *     store waits for the store to reach the cache; from a full one it is
 *     forwarded at once). */
#define FEW_KEYS 16
#define FEW_KEYS_MAX_D 64

/* kt[ch][c] lane j = x[j][16 ch + c] for j < n (else 0): x (n, d) rows rx apart */
static void transpose_keys(__m512 kt[FEW_KEYS_MAX_D / 16][16], const float *x, size_t rx, int n, int d) {
    for (int ch = 0; ch < (d + 15) / 16; ch++) {
        __mmask16 cols = tail_mask(d - 16 * ch);
        for (int j = 0; j < 16; j++) {
            if (j >= n) {
                kt[ch][j] = _mm512_setzero_ps();
                continue;
            }
            /* the next head's columns of this row (heads side by side in a
             * row, the usual layout): asked for now, they are in the cache
             * when that head starts, about a microsecond from now */
            _mm_prefetch((const char *)(x + j * rx + d + 16 * ch), _MM_HINT_T0);
            kt[ch][j] = _mm512_maskz_loadu_ps(cols, x + j * rx + 16 * ch);
        }
        transpose16(kt[ch]);
    }
}

/* lane j: dot_n(a, x_j, d), the same bits */
static inline __m512 dots16(const float *a, __m512 kt[FEW_KEYS_MAX_D / 16][16], int d) {
    int nch = (d + 15) / 16;
    __m512 t3[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();   /* accumulator lanes c, c + 8 */
        for (int ch = 0; ch < nch; ch++) {
            int cl = 16 * ch + c, ch8 = cl + 8;
            lo = _mm512_fmadd_ps(cl < d ? _mm512_set1_ps(a[cl]) : _mm512_setzero_ps(), kt[ch][c], lo);
            hi = _mm512_fmadd_ps(ch8 < d ? _mm512_set1_ps(a[ch8]) : _mm512_setzero_ps(), kt[ch][c + 8], hi);
        }
        t3[c] = _mm512_add_ps(hi, lo);
    }
    __m512 t6[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) t6[c] = _mm512_add_ps(t3[c + 4], t3[c]);
    return _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
}

/* x[0] + x[1] + ... + x[n-1], added in that order, from 0 */
static inline float sum_in_order(__m512 x, int n) {
    __m128 s = _mm_setzero_ps();
    for (int j = 0; j < n; j++)
        s = _mm_add_ss(s, _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set1_epi32(j), x)));
    return _mm_cvtss_f32(s);
}

/* head_forward, Tk <= FEW_KEYS and d_k <= FEW_KEYS_MAX_D. Up to 16 queries
 * at a time, in three passes (scores, softmax, weighted sums): each pass's
 * rows are independent, so the core overlaps their long dependency chains
 * (the exp, the sum in key order, the FMAs of mix_rows) instead of
 * waiting for one row at a time. */
static void head_forward_few(float *o, size_t ro, float *w, const float *q, size_t rq,
                             const float *k, size_t rk, const float *v, size_t rv, const uint8_t *m,
                             int Tq, int Tk, int d_k, int d_v, float scale) {
    const __mmask16 keys = tail_mask(Tk);
    __m512 kt[FEW_KEYS_MAX_D / 16][16], s[16];
    float wl[16][16] __attribute__((aligned(64)));   /* the weights, full stores: read back at once */
    transpose_keys(kt, k, rk, Tk, d_k);
    for (int i0 = 0; i0 < Tq; i0 += 16) {
        int rows = Tq - i0 < 16 ? Tq - i0 : 16;
        for (int r = 0; r < rows; r++) {
            int i = i0 + r;
            s[r] = _mm512_mul_ps(_mm512_set1_ps(scale), dots16(q + i * rq, kt, d_k));
            /* Sec. 3.2.3: a blocked pair gets -inf; lanes past Tk too */
            __mmask16 open = keys;
            if (m) open &= _mm_mask_cmpneq_epi8_mask(keys, _mm_maskz_loadu_epi8(keys, m + (size_t)i * Tk),
                                                     _mm_setzero_si128());
            s[r] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), open, s[r]);
        }
        for (int r = 0; r < rows; r++) {
            float max = _mm512_reduce_max_ps(s[r]);
            __m512 wv = _mm512_setzero_ps();   /* nothing to attend to: zeros, not NaN */
            if (max != -INFINITY) {
                __m512 e = exp16_ps(_mm512_sub_ps(s[r], _mm512_set1_ps(max)));
                wv = _mm512_mul_ps(e, _mm512_set1_ps(1.0f / sum_in_order(e, Tk)));
            }
            _mm512_mask_storeu_ps(w + (size_t)(i0 + r) * Tk, keys, wv);
            _mm512_store_ps(wl[r], wv);
        }
        for (int r = 0; r < rows; r++)   /* out_i = sum_j w_ij v_j */
            mix_rows(o + (i0 + r) * ro, wl[r], 1, v, rv, Tk, d_v, 0);
    }
}

/* head_backward, Tq and Tk <= FEW_KEYS, d_v <= FEW_KEYS_MAX_D: the rows of
 * ds from dots16, into a local array of 16 floats per query (ds is not
 * written to the scratch); dq, dk, dv as head_backward computes them. */
static void head_backward_few(float *dq, size_t rdq, float *dk, size_t rdk, float *dv, size_t rdv,
                              const float *dO, size_t rdo, const float *w,
                              const float *q, size_t rq, const float *k, size_t rk, const float *v, size_t rv,
                              int Tq, int Tk, int d_k, int d_v, float scale, int accumulate) {
    const __mmask16 keys = tail_mask(Tk);
    const __m512 zero = _mm512_setzero_ps();
    __m512 vt[FEW_KEYS_MAX_D / 16][16];
    transpose_keys(vt, v, rv, Tk, d_v);
    float dsl[FEW_KEYS * 16] __attribute__((aligned(64)));   /* (Tq, 16): ds_ij at [i*16 + j] */
    __m512 dw[FEW_KEYS], wv[FEW_KEYS];
    for (int i = 0; i < Tq; i++) {   /* two passes, as in head_forward_few */
        wv[i] = _mm512_maskz_loadu_ps(keys, w + (size_t)i * Tk);
        /* dw_ij = dO_i . v_j, 0 where w_ij = 0 (a blocked pair) */
        dw[i] = _mm512_mask_mov_ps(dots16(dO + i * rdo, vt, d_v), _mm512_cmpeq_ps_mask(wv[i], zero), zero);
    }
    for (int i = 0; i < Tq; i++) {
        float s = sum_in_order(_mm512_mul_ps(dw[i], wv[i]), Tk);
        _mm512_store_ps(dsl + i * 16, _mm512_mul_ps(_mm512_set1_ps(scale),
                                                    _mm512_mul_ps(wv[i], _mm512_sub_ps(dw[i], _mm512_set1_ps(s)))));
    }
    if (dq)
        for (int i = 0; i < Tq; i++) mix_rows(dq + i * rdq, dsl + i * 16, 1, k, rk, Tk, d_k, accumulate);
    if (dk)
        for (int j = 0; j < Tk; j++) mix_rows(dk + j * rdk, dsl + j, 16, q, rq, Tq, d_k, accumulate);
    if (dv)
        for (int j = 0; j < Tk; j++) mix_rows(dv + j * rdv, w + j, (size_t)Tk, dO, rdo, Tq, d_v, accumulate);
}
#elif defined(HAVE_EXP8)
/* ---- heads of up to 16 keys (AVX2) ----------------------------------------------
 * The same three passes with 8-float vectors: a query's scores are one
 * vector per 8 keys (keys 0-7, then 8-15 when Tk > 8), lane j for key
 * 8g + j. No transpose here: a score of d_k = 16 is 2 FMAs, and dot_n then
 * spends 6 shuffles and adds on its horizontal sum. dots8 runs 8 keys'
 * accumulators side by side and does their 8 horizontal sums together, in
 * 19 instructions instead of 48. Every step keeps the per-key loop's bits
 * (tested):
 *   - dots8 adds each key's 8 lanes in dot_n's tree, ((0 + 4) + (2 + 6))
 *     + ((1 + 5) + (3 + 7));
 *   - exp8_avx2 has expf's bits;
 *   - sums over the keys run in key order, from a local array written
 *     with full vector stores;
 *   - the weighted sums are mix_rows', two rows at a time (mix_pairs). */
#define FEW_KEYS 16
#define FEW_KEYS_MAX_D INT_MAX   /* dots8 reads the rows where they lie: any width */

/* The rows of one group of up to 8 keys: rows[j] = x + (8g + j) rx (past
 * the last key: the last key again, never read) */
typedef struct {
    const float *rows[8];
    int n;   /* keys in the group (1..8) */
} KeyGroup;

static inline KeyGroup key_group(const float *x, size_t rx, int Tk, int g) {
    KeyGroup kg;
    kg.n = Tk - 8 * g < 8 ? Tk - 8 * g : 8;
    for (int j = 0; j < 8; j++) kg.rows[j] = x + (size_t)(8 * g + (j < kg.n ? j : kg.n - 1)) * rx;
    return kg;
}

/* lane j: dot_n(a, row j, d), the same bits (0 past the group's last key):
 * dot_n's accumulator for each row, then dot_n's tree for all 8 at once */
static inline __attribute__((always_inline)) __m256 dots8(const float *a, const KeyGroup *kg, int d) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= d; c += 8) {
        __m256 va = _mm256_loadu_ps(a + c);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            if (j < kg->n) acc[j] = _mm256_fmadd_ps(va, _mm256_loadu_ps(kg->rows[j] + c), acc[j]);
    }
    if (c < d) {
        __m256i m = lanes8(d - c);
        __m256 va = _mm256_maskload_ps(a + c, m);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            if (j < kg->n) acc[j] = _mm256_fmadd_ps(va, _mm256_maskload_ps(kg->rows[j] + c, m), acc[j]);
    }
    /* lane l + lane l+4: rows j and j+4 in the two halves of one vector */
    __m256 b[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        b[j] = _mm256_add_ps(_mm256_permute2f128_ps(acc[j], acc[j + 4], 0x20),
                             _mm256_permute2f128_ps(acc[j], acc[j + 4], 0x31));
    /* then 0 + 2 and 1 + 3, for two rows side by side */
    __m256 c01 = _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x44), _mm256_shuffle_ps(b[0], b[1], 0xEE));
    __m256 c23 = _mm256_add_ps(_mm256_shuffle_ps(b[2], b[3], 0x44), _mm256_shuffle_ps(b[2], b[3], 0xEE));
    /* then the two: the rows come out in order, 0-3 | 4-7 */
    return _mm256_hadd_ps(c01, c23);
}

/* mix_rows for two rows of y at once (y0 from c0, y1 from c1, the same x;
 * nv <= 2 vectors of each):
 * each vector of x is read once for both, and twice the chains of FMAs are
 * in flight; each row's sums are mix_rows' own, in the same order */
static inline __attribute__((always_inline))
void mix_block2(float *y0, float *y1, const float *c0, const float *c1, size_t cs, const float *x, size_t rx, int n,
                int nv, int accumulate) {
    __m256 s0[2], s1[2];
    for (int v = 0; v < nv; v++) {
        s0[v] = accumulate ? _mm256_loadu_ps(y0 + 8 * v) : _mm256_setzero_ps();
        s1[v] = accumulate ? _mm256_loadu_ps(y1 + 8 * v) : _mm256_setzero_ps();
    }
    for (int t = 0; t < n; t++) {
        float a0 = c0[t * cs], a1 = c1[t * cs];
        __m256 xv[2];
        for (int v = 0; v < nv; v++) xv[v] = _mm256_loadu_ps(x + t * rx + 8 * v);
        if (a0 != 0.0f)
            for (int v = 0; v < nv; v++) s0[v] = _mm256_fmadd_ps(_mm256_set1_ps(a0), xv[v], s0[v]);
        if (a1 != 0.0f)
            for (int v = 0; v < nv; v++) s1[v] = _mm256_fmadd_ps(_mm256_set1_ps(a1), xv[v], s1[v]);
    }
    for (int v = 0; v < nv; v++) {
        _mm256_storeu_ps(y0 + 8 * v, s0[v]);
        _mm256_storeu_ps(y1 + 8 * v, s1[v]);
    }
}

/* y_i (+)= sum_t coef_i[t cs] x_t for the m rows i, y_i = y + i ry and
 * coef_i = coef + i ci: mix_rows two rows at a time when a row is under 32
 * columns (from 32 on, one row already keeps 4 chains in flight, and two
 * were slower: the d_k = 64 backward by 7-10%) */
static void mix_pairs(float *y, size_t ry, const float *coef, size_t ci, size_t cs, const float *x, size_t rx, int m,
                      int n, int d, int accumulate) {
    int i = 0;
    for (; d < 32 && i + 1 < m; i += 2) {
        float *y0 = y + i * ry, *y1 = y0 + ry;
        const float *c0 = coef + i * ci, *c1 = c0 + ci;
        int c = 0;
        if (d >= 16) mix_block2(y0, y1, c0, c1, cs, x, rx, n, 2, accumulate), c = 16;
        if (c + 8 <= d) mix_block2(y0 + c, y1 + c, c0, c1, cs, x + c, rx, n, 1, accumulate), c += 8;
        if (c < d) {   /* the ragged end, one row at a time */
            mix_rows(y0 + c, c0, cs, x + c, rx, n, d - c, accumulate);
            mix_rows(y1 + c, c1, cs, x + c, rx, n, d - c, accumulate);
        }
    }
    for (; i < m; i++) mix_rows(y + i * ry, coef + i * ci, cs, x, rx, n, d, accumulate);
}

/* lane j all ones where bit j of `bits` is set */
static inline __m256 bit_lanes(unsigned bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), bit), bit));
}

/* bit j set where m[j] != 0, for j < n <= 8 */
static inline unsigned open_bits(const uint8_t *m, int n) {
    if (n == 8)
        return ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadl_epi64((const __m128i *)m), _mm_setzero_si128()))
               & 0xFF;
    unsigned bits = 0;
    for (int j = 0; j < n; j++) bits |= (unsigned)(m[j] != 0) << j;
    return bits;
}

/* y[0..n) = x[0..n), n <= 16: whole vectors, then the ragged end */
static inline void copy_row(float *y, const float *x, int n) {
    int j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_load_ps(x + j));
    for (; j < n; j++) y[j] = x[j];
}

/* head_forward, Tk <= FEW_KEYS: up to 16 queries at a time in three passes
 * (scores, softmax, weighted sums), as above */
static void head_forward_few(float *o, size_t ro, float *w, const float *q, size_t rq,
                             const float *k, size_t rk, const float *v, size_t rv, const uint8_t *m,
                             int Tq, int Tk, int d_k, int d_v, float scale) {
    const int groups = (Tk + 7) / 8;
    const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
    KeyGroup kg[FEW_KEYS / 8];
    for (int g = 0; g < groups; g++) kg[g] = key_group(k, rk, Tk, g);
    float s[16][FEW_KEYS] __attribute__((aligned(32)));   /* scores, then weights: lane j for key j */
    for (int i0 = 0; i0 < Tq; i0 += 16) {
        int rows = Tq - i0 < 16 ? Tq - i0 : 16;
        for (int r = 0; r < rows; r++) {
            int i = i0 + r;
            for (int g = 0; g < groups; g++) {
                int n = kg[g].n;
                /* Sec. 3.2.3: a blocked pair gets -inf; lanes past Tk too */
                unsigned open = m ? open_bits(m + (size_t)i * Tk + 8 * g, n) : (1u << n) - 1;
                __m256 sc = _mm256_mul_ps(_mm256_set1_ps(scale), dots8(q + i * rq, &kg[g], d_k));
                _mm256_store_ps(s[r] + 8 * g, _mm256_blendv_ps(neg_inf, sc, bit_lanes(open)));
            }
        }
        for (int r = 0; r < rows; r++) {
            __m256 x0 = _mm256_load_ps(s[r]), x1 = groups > 1 ? _mm256_load_ps(s[r] + 8) : neg_inf;
            __m256 mx = _mm256_max_ps(x0, x1);
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            float max = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
            __m256 w0 = _mm256_setzero_ps(), w1 = w0;   /* nothing to attend to: zeros, not NaN */
            if (max != -INFINITY) {
                __m256 e0 = exp8_avx2(_mm256_sub_ps(x0, _mm256_set1_ps(max)));
                __m256 e1 = groups > 1 ? exp8_avx2(_mm256_sub_ps(x1, _mm256_set1_ps(max))) : _mm256_setzero_ps();
                _mm256_store_ps(s[r], e0);
                _mm256_store_ps(s[r] + 8, e1);
                float sum = 0.0f;
                for (int j = 0; j < Tk; j++) sum += s[r][j];
                __m256 inv = _mm256_set1_ps(1.0f / sum);
                w0 = _mm256_mul_ps(e0, inv), w1 = _mm256_mul_ps(e1, inv);
            }
            _mm256_store_ps(s[r], w0);
            _mm256_store_ps(s[r] + 8, w1);
            copy_row(w + (size_t)(i0 + r) * Tk, s[r], Tk);
        }
        /* out_i = sum_j w_ij v_j */
        mix_pairs(o + i0 * ro, ro, s[0], FEW_KEYS, 1, v, rv, rows, Tk, d_v, 0);
    }
}

/* head_backward, Tq and Tk <= FEW_KEYS: the rows of ds from dots8, into a
 * local array of 16 floats per query; dq, dk, dv as head_backward computes
 * them. */
static void head_backward_few(float *dq, size_t rdq, float *dk, size_t rdk, float *dv, size_t rdv,
                              const float *dO, size_t rdo, const float *w,
                              const float *q, size_t rq, const float *k, size_t rk, const float *v, size_t rv,
                              int Tq, int Tk, int d_k, int d_v, float scale, int accumulate) {
    const int groups = (Tk + 7) / 8;
    const __m256 zero = _mm256_setzero_ps();
    KeyGroup vg[FEW_KEYS / 8];
    for (int g = 0; g < groups; g++) vg[g] = key_group(v, rv, Tk, g);
    float dsl[FEW_KEYS * 16] __attribute__((aligned(32)));   /* (Tq, 16): ds_ij at [i*16 + j], dw first */
    for (int i = 0; i < Tq; i++)   /* two passes, as in head_forward_few */
        for (int g = 0; g < groups; g++) {
            __m256 wv = _mm256_maskload_ps(w + (size_t)i * Tk + 8 * g, lanes8(Tk - 8 * g));
            /* dw_ij = dO_i . v_j, 0 where w_ij = 0 (a blocked pair) */
            __m256 dw = _mm256_andnot_ps(_mm256_cmp_ps(wv, zero, _CMP_EQ_OQ), dots8(dO + i * rdo, &vg[g], d_v));
            _mm256_store_ps(dsl + i * 16 + 8 * g, dw);
        }
    for (int i = 0; i < Tq; i++) {
        float s = 0.0f;   /* sum_j dw_ij w_ij, in key order */
        for (int j = 0; j < Tk; j++) s += dsl[i * 16 + j] * w[(size_t)i * Tk + j];
        for (int g = 0; g < groups; g++) {
            __m256 wv = _mm256_maskload_ps(w + (size_t)i * Tk + 8 * g, lanes8(Tk - 8 * g));
            __m256 dw = _mm256_load_ps(dsl + i * 16 + 8 * g);
            _mm256_store_ps(dsl + i * 16 + 8 * g, _mm256_mul_ps(_mm256_set1_ps(scale),
                                                                _mm256_mul_ps(wv, _mm256_sub_ps(dw, _mm256_set1_ps(s)))));
        }
    }
    if (dq) mix_pairs(dq, rdq, dsl, 16, 1, k, rk, Tq, Tk, d_k, accumulate);             /* rows of ds   */
    if (dk) mix_pairs(dk, rdk, dsl, 1, 16, q, rq, Tk, Tq, d_k, accumulate);             /* columns of ds */
    if (dv) mix_pairs(dv, rdv, w, 1, (size_t)Tk, dO, rdo, Tk, Tq, d_v, accumulate);     /* columns of w  */
}
#endif

/* One head, forward. o (Tq,d_v) rows ro apart; w (Tq,Tk) contiguous;
 * q (Tq,d_k), k (Tk,d_k), v (Tk,d_v) rows rq/rk/rv apart; m (Tq,Tk) or NULL.
 * One pass per query row: its scores stay in L1 from the dot products to
 * the weighted sum of v. */
static void head_forward(float *o, size_t ro, float *w, const float *q, size_t rq,
                         const float *k, size_t rk, const float *v, size_t rv, const uint8_t *m,
                         int Tq, int Tk, int d_k, int d_v, float scale) {
#ifdef FEW_KEYS
    if (Tk <= FEW_KEYS && d_k <= FEW_KEYS_MAX_D) {
        head_forward_few(o, ro, w, q, rq, k, rk, v, rv, m, Tq, Tk, d_k, d_v, scale);
        return;
    }
#endif
    for (int i = 0; i < Tq; i++) {
        const float *qi = q + i * rq;
        const uint8_t *mi = m ? m + (size_t)i * Tk : NULL;
        float *wi = w + (size_t)i * Tk;
        /* scores = q k^T / sqrt(d_k); Sec. 3.2.3: a blocked pair gets -inf,
         * so exp() makes its weight exactly 0 (not just small) */
        float max = -INFINITY;
        for (int j = 0; j < Tk; j++) {
            float s = (mi && !mi[j]) ? -INFINITY : scale * dot_n(qi, k + j * rk, d_k);
            wi[j] = s;
            max = s > max ? s : max;
        }
        if (max == -INFINITY) {
            /* every key blocked: nothing to attend to. All-zero weights (and
             * so a zero output) rather than 0/0 = NaN */
            for (int j = 0; j < Tk; j++) wi[j] = 0.0f;
        } else {
            /* stable softmax (as softmax_forward): subtract the row max, so
             * every exponent is <= 0 and the sum is >= 1 */
            for (int j = 0; j < Tk; j++) wi[j] -= max;
            exp_array(wi, wi, Tk);             /* expf's bits, 16 at a time */
            float sum = 0.0f;
            for (int j = 0; j < Tk; j++) sum += wi[j];
            float inv = 1.0f / sum;
            for (int j = 0; j < Tk; j++) wi[j] *= inv;
        }
        /* out_i = sum_j w_ij v_j: a weighted mix of v's rows */
        mix_rows(o + i * ro, wi, 1, v, rv, Tk, d_v, 0);
    }
}

/* One head, backward. dq (Tq,d_k), dk (Tk,d_k), dv (Tk,d_v): += when
 * accumulate, else overwritten; any may be NULL. ds (Tq,Tk) work space;
 * dO (Tq,d_v); w (Tq,Tk) from forward; q, k, v as in head_forward. r* are
 * row strides. */
static void head_backward(float *dq, size_t rdq, float *dk, size_t rdk, float *dv, size_t rdv,
                          float *ds, const float *dO, size_t rdo, const float *w,
                          const float *q, size_t rq, const float *k, size_t rk, const float *v, size_t rv,
                          int Tq, int Tk, int d_k, int d_v, float scale, int accumulate) {
#ifdef FEW_KEYS
    if (Tq <= FEW_KEYS && Tk <= FEW_KEYS && d_v <= FEW_KEYS_MAX_D) {
        head_backward_few(dq, rdq, dk, rdk, dv, rdv, dO, rdo, w, q, rq, k, rk, v, rv, Tq, Tk, d_k, d_v, scale,
                          accumulate);
        return;
    }
#endif
    for (int i = 0; i < Tq; i++) {
        const float *wi = w + (size_t)i * Tk, *dOi = dO + i * rdo;
        float *dsi = ds + (size_t)i * Tk;
        /* forward: o_i = sum_j w_ij v_j   ->   dw_ij = dO_i . v_j
         * A blocked pair has w_ij = 0 exactly: it gets no gradient (its ds
         * below is 0 whatever dw is), so its dot product is skipped. */
        float s = 0.0f;
        for (int j = 0; j < Tk; j++) {
            dsi[j] = wi[j] == 0.0f ? 0.0f : dot_n(dOi, v + j * rv, d_v);
            s += dsi[j] * wi[j];
        }
        /* forward: w_i = softmax(scores_i)
         *   ds_ij = w_ij (dw_ij - sum_l dw_il w_il)
         * and the 1/sqrt(d_k) of the scores, folded in here once */
        for (int j = 0; j < Tk; j++) dsi[j] = scale * (wi[j] * (dsi[j] - s));
    }
    /* forward: scores_ij = scale * q_i . k_j   (the scale is already in ds;
     * masking only replaced some scores by -inf constants, whose ds is 0)
     *   dq_i += sum_j ds_ij k_j,   dk_j += sum_i ds_ij q_i
     * forward: o_i = sum_j w_ij v_j
     *   dv_j += sum_i w_ij dO_i */
    if (dq)
        for (int i = 0; i < Tq; i++) mix_rows(dq + i * rdq, ds + (size_t)i * Tk, 1, k, rk, Tk, d_k, accumulate);
    if (dk)
        for (int j = 0; j < Tk; j++) mix_rows(dk + j * rdk, ds + j, (size_t)Tk, q, rq, Tq, d_k, accumulate);
    if (dv)
        for (int j = 0; j < Tk; j++) mix_rows(dv + j * rdv, w + j, (size_t)Tk, dO, rdo, Tq, d_v, accumulate);
}

/* The (sequence, head) pairs are independent: each writes its own rows of
 * out / weights (forward) or of dQ, dK, dV and its scratch (backward), so
 * they are shared among the threads in chunks of whole pairs. */
typedef struct {
    float *out;
    HeadLayout lo;
    float *weights;
    const float *Q;
    HeadLayout lq;
    const float *K;
    HeadLayout lk;
    const float *V;
    HeadLayout lv;
    const uint8_t *mask;
    int h, Tq, Tk, d_k, d_v;
    float scale;
} SdpaJob;

static void sdpa_forward_heads(void *ctx, long bh0, long bh1) {
    const SdpaJob *j = ctx;
    int h = j->h, Tq = j->Tq, Tk = j->Tk;
    for (long bh = bh0; bh < bh1; bh++) {
        int b = (int)(bh / h), hh = (int)(bh % h);
        const uint8_t *m = j->mask ? j->mask + (size_t)b * Tq * Tk : NULL;   /* m (Tq,Tk) */
        head_forward(j->out + head_at(j->lo, b, hh), j->lo.rs, j->weights + (size_t)bh * Tq * Tk,
                     j->Q + head_at(j->lq, b, hh), j->lq.rs, j->K + head_at(j->lk, b, hh), j->lk.rs,
                     j->V + head_at(j->lv, b, hh), j->lv.rs, m, Tq, Tk, j->d_k, j->d_v, j->scale);
    }
}

typedef struct {
    float *dQ;
    HeadLayout ldq;
    float *dK;
    HeadLayout ldk;
    float *dV;
    HeadLayout ldv;
    float *scratch;
    const float *dout;
    HeadLayout ldo;
    const float *weights, *Q;
    HeadLayout lq;
    const float *K;
    HeadLayout lk;
    const float *V;
    HeadLayout lv;
    int h, Tq, Tk, d_k, d_v;
    float scale;
    int accumulate;
} SdpaBackJob;

static void sdpa_backward_heads(void *ctx, long bh0, long bh1) {
    const SdpaBackJob *j = ctx;
    int h = j->h, Tq = j->Tq, Tk = j->Tk;
    for (long bh = bh0; bh < bh1; bh++) {
        int b = (int)(bh / h), hh = (int)(bh % h);
        size_t wo = (size_t)bh * Tq * Tk;
        head_backward(j->dQ ? j->dQ + head_at(j->ldq, b, hh) : NULL, j->ldq.rs,
                      j->dK ? j->dK + head_at(j->ldk, b, hh) : NULL, j->ldk.rs,
                      j->dV ? j->dV + head_at(j->ldv, b, hh) : NULL, j->ldv.rs,
                      j->scratch + wo, j->dout + head_at(j->ldo, b, hh), j->ldo.rs, j->weights + wo,
                      j->Q + head_at(j->lq, b, hh), j->lq.rs, j->K + head_at(j->lk, b, hh), j->lk.rs,
                      j->V + head_at(j->lv, b, hh), j->lv.rs, Tq, Tk, j->d_k, j->d_v, j->scale,
                      j->accumulate);
    }
}

/* (sequence, head) pairs per chunk: about ATTN_CHUNK_WORK multiply-adds */
static long heads_per_chunk(long per_head) {
    long n = ATTN_CHUNK_WORK / (per_head > 0 ? per_head : 1);
    return n > 0 ? n : 1;
}

/* Every (sequence, head) pair through head_forward; each layout says where
 * the heads of one tensor lie. */
void sdpa_forward_laid(float *out, HeadLayout lo, float *weights,
                       const float *Q, HeadLayout lq, const float *K, HeadLayout lk,
                       const float *V, HeadLayout lv, const uint8_t *mask,
                       int B, int h, int Tq, int Tk, int d_k, int d_v) {
    assert(B > 0 && h > 0 && Tq > 0 && Tk > 0 && d_k > 0 && d_v > 0);
    /* Why 1/sqrt(d_k) (Sec. 3.2.1): with unit-variance q and k, q.k has
     * variance d_k; large scores push softmax into a corner where its
     * gradient vanishes. Dividing by sqrt(d_k) brings the variance back to 1. */
    const float scale = 1.0f / sqrtf((float)d_k);
    long per_head = (long)Tq * Tk * (d_k + d_v);
    SdpaJob j = {out, lo, weights, Q, lq, K, lk, V, lv, mask, h, Tq, Tk, d_k, d_v, scale};
    parallel_run((long)B * h, heads_per_chunk(per_head), sdpa_forward_heads, &j);
}

void sdpa_backward_laid(float *dQ, HeadLayout ldq, float *dK, HeadLayout ldk,
                        float *dV, HeadLayout ldv, float *scratch,
                        const float *dout, HeadLayout ldo, const float *weights,
                        const float *Q, HeadLayout lq, const float *K, HeadLayout lk,
                        const float *V, HeadLayout lv,
                        int B, int h, int Tq, int Tk, int d_k, int d_v, int accumulate) {
    const float scale = 1.0f / sqrtf((float)d_k);
    long per_head = 2L * Tq * Tk * (d_k + d_v);
    SdpaBackJob j = {dQ, ldq, dK, ldk, dV, ldv, scratch, dout, ldo, weights, Q, lq, K, lk, V, lv,
                     h, Tq, Tk, d_k, d_v, scale, accumulate};
    parallel_run((long)B * h, heads_per_chunk(per_head), sdpa_backward_heads, &j);
}

void sdpa_forward(float *out, float *weights,
                  const float *Q, const float *K, const float *V, const uint8_t *mask,
                  int B, int h, int Tq, int Tk, int d_k, int d_v) {
    /* out (B,h,Tq,d_v), weights (B,h,Tq,Tk),
     * Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v), mask (B,Tq,Tk) or NULL */
    HeadLayout lq = head_layout_split(h, Tq, d_k), lk = head_layout_split(h, Tk, d_k);
    HeadLayout lv = head_layout_split(h, Tk, d_v), lo = head_layout_split(h, Tq, d_v);
    sdpa_forward_laid(out, lo, weights, Q, lq, K, lk, V, lv, mask, B, h, Tq, Tk, d_k, d_v);
}

void sdpa_backward(float *dQ, float *dK, float *dV, float *scratch,
                   const float *dout, const float *weights,
                   const float *Q, const float *K, const float *V,
                   int B, int h, int Tq, int Tk, int d_k, int d_v) {
    /* dQ (B,h,Tq,d_k) +=, dK (B,h,Tk,d_k) +=, dV (B,h,Tk,d_v) += (any may be NULL);
     * scratch (B,h,Tq,Tk); dout (B,h,Tq,d_v); weights (B,h,Tq,Tk) from forward;
     * Q, K, V as in sdpa_forward.
     * The mask is not needed: it lives on in weights, which are exactly 0 on
     * every blocked pair, so no gradient reaches a blocked key or value. */
    HeadLayout lq = head_layout_split(h, Tq, d_k), lk = head_layout_split(h, Tk, d_k);
    HeadLayout lv = head_layout_split(h, Tk, d_v), lo = head_layout_split(h, Tq, d_v);
    sdpa_backward_laid(dQ, lq, dK, lk, dV, lv, scratch, dout, lo, weights, Q, lq, K, lk, V, lv,
                       B, h, Tq, Tk, d_k, d_v, 1);
}
