/* gemm_kernel.c - one thread's share of gemm(): packing, the micro-kernels,
 * and the five blocked loops around them (steps 1-3 of gemm.c's account:
 * registers, packing, cache blocks). gemm.c hands each thread its part of C
 * and calls gemm_blocked here; everything below it is in this one file, so
 * that the compiler inlines the kernels into their loops (always_inline).
 */
#include "fast/gemm_kernel.h"

#include <math.h>
#include <string.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#include "fast/simd.h"

#ifndef USE_OPENBLAS

/* ---- packing ------------------------------------------------------------------
 * pack_a: op(A)[i0 .. i0+mc, p0 .. p0+kc] -> Ap, as ceil(mc/MR) panels; in a
 * panel, the MR values of one k are adjacent:  Ap[panel*MR*kc + k*MR + r].
 * Rows past mc are zero so the kernel can always do a full tile.
 * pack_b: op(B)[p0 .. p0+kc, j0 .. j0+nc] -> Bp as ceil(nc/NR) panels of
 * (kc, NR): Bp[panel*kc*NR + k*NR + c]; columns past nc are zero.
 *
 * Packing touches every element once per block, so it must not cost more
 * than a few percent of the kernel's time. The plain loops below move one
 * float per instruction (about 2 cycles each, 15-20% of a large multiply);
 * with AVX-512 a masked load moves a contiguous row piece in one go, and
 * values that sit one leading dimension apart (a column of a row-major
 * matrix) are read 16 rows x 16 columns at a time and transposed in
 * registers (a gather, one instruction for 16 of them, still moves one
 * float at a time). Rows far apart defeat the hardware prefetcher, so
 * packing asks for the next rows itself. */
#if defined(__AVX512F__)
/* rows ahead that packing asks the memory for (a prefetch never faults,
 * so asking past the block's end is harmless) */
#ifndef PACK_AHEAD
#define PACK_AHEAD 8
#endif
/* floats ahead along a row that pack_rows_transposed asks for: 4 cache
 * lines (16, one line, before: the Annotated step's transposed packing of
 * weights fresh from memory waited on them) */
#ifndef PACK_T_AHEAD
#define PACK_T_AHEAD 64
#endif

/* A block of `rows` (<= 16) rows of a row-major matrix, k along each row,
 * ld apart -> dst[k * dst_ld + row] for k < kc: one transpose per 16 k.
 * Rows past `rows` come out as zeros; store_mask says which of the 16 rows
 * to write (MR = 14 of them for A, all 16 for a half panel of B). */
static inline __attribute__((always_inline))
void pack_rows_transposed(float *dst, int dst_ld, __mmask16 store_mask, const float *src, size_t ld,
                          int rows, int kc) {
    for (int k = 0; k < kc; k += 16) {
        int n = kc - k < 16 ? kc - k : 16;
        __mmask16 m = (__mmask16)((1u << n) - 1);   /* n <= 16: no read past kc */
        __m512 r[16];
        for (int i = 0; i < 16; i++) {
            /* the next 16 k of this row, ahead of time: the rows are far
             * apart, and without the request each load here waits for memory */
            if (i < rows && k + PACK_T_AHEAD < kc) _mm_prefetch((const char *)(src + (size_t)i * ld + k + PACK_T_AHEAD), _MM_HINT_T0);
            r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + (size_t)i * ld + k) : _mm512_setzero_ps();
        }
        transpose16(r);
        for (int j = 0; j < n; j++) _mm512_mask_storeu_ps(dst + (size_t)(k + j) * dst_ld, store_mask, r[j]);
    }
}

static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    const __mmask16 tile_rows = (__mmask16)((1u << MR) - 1);
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        __mmask16 m = (__mmask16)((1u << mr) - 1);
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous */
            const float *src = A + (size_t)p0 * lda + i0 + ir;
            for (int k = 0; k < kc; k++) {
                _mm_prefetch((const char *)(src + (size_t)(k + PACK_AHEAD) * lda), _MM_HINT_T0);
                _mm512_mask_storeu_ps(dst + k * MR, tile_rows, _mm512_maskz_loadu_ps(m, src + (size_t)k * lda));
            }
        } else {
            /* op(A)[i][p] = A[i][p]: the MR values of one k are lda apart,
             * so 16 k of MR rows are read along the rows and transposed */
            pack_rows_transposed(dst, MR, tile_rows, A + (size_t)(i0 + ir) * lda + p0, (size_t)lda, mr, kc);
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    if (!transB) {
        /* op(B)[p][j] = B[p][j]: NR contiguous floats per k. Row by row:
         * each row's nc floats are read as one stream, which the hardware
         * prefetcher follows, and scattered to the NR-wide panels (B fresh
         * from memory, as a layer's weights are in a training step: panel
         * by panel, 32 floats of 512 rows at a time, defeated it; the
         * Annotated step 170.5 -> 164.2 ms in alternating runs, with the
         * transposed case's look-ahead below). Row k + PACK_AHEAD is asked
         * for meanwhile. */
        for (int k = 0; k < kc; k++) {
            const float *src = B + (size_t)(p0 + k) * ldb + j0, *ahead = src + (size_t)PACK_AHEAD * ldb;
            for (int jr = 0; jr < nc; jr += 16) _mm_prefetch((const char *)(ahead + jr), _MM_HINT_T0);
            for (int jr = 0; jr < nc; jr += NR) {
                int nr = nc - jr < NR ? nc - jr : NR;
                __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
                __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
                float *dst = Bp + (size_t)jr * kc + (size_t)k * NR;
                _mm512_store_ps(dst, _mm512_maskz_loadu_ps(m0, src + jr));
                _mm512_store_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + jr + 16));
            }
        }
        return;
    }
    for (int jr = 0; jr < nc; jr += NR) {
        /* op(B)[p][j] = B[j][p]: the NR values of one k are ldb apart;
         * each half of the panel (16 rows of B) is read along the rows
         * and transposed, 16 k at a time */
        int nr = nc - jr < NR ? nc - jr : NR;
        const float *src = B + (size_t)(j0 + jr) * ldb + p0;
        float *dst = Bp + (size_t)jr * kc;
        pack_rows_transposed(dst, NR, 0xFFFF, src, (size_t)ldb, nr < 16 ? nr : 16, kc);
        pack_rows_transposed(dst + 16, NR, 0xFFFF, src + (size_t)16 * ldb, (size_t)ldb, nr > 16 ? nr - 16 : 0, kc);
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* The same packing with 8-float vectors: masked loads (maskload zeroes the
 * lanes it does not read) for row pieces, 8 x 8 register transposes for
 * values one leading dimension apart. */
#ifndef PACK_AHEAD
#define PACK_AHEAD 8
#endif
#ifndef PACK_T_AHEAD
#define PACK_T_AHEAD 32
#endif

/* r[0..8) rows of 8 floats -> r[j] = column j (unpack pairs of rows,
 * shuffle 2x2 blocks, swap 128-bit halves: 24 shuffles for 64 floats) */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);       /* half h: a4h b4h a4h+1 b4h+1 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);   /* half h: a4h+2 b4h+2 a4h+3 b4h+3 */
    }
    for (int q = 0; q < 8; q += 4) {                     /* u[q + c], half h: rows q..q+3 of column 4h + c */
        u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
        u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
        u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* `rows` (<= 8) rows of a row-major matrix, k along each row, ld apart ->
 * dst[k * dst_ld + row] for k < kc; rows past `rows` are zeros. Each k is
 * stored as a whole vector of 8, in increasing k: with dst_ld = MR = 6 (A)
 * its last 2 lanes fall on the next k's first two, which the next store
 * writes (a masked store is slow on AMD); the last k's fall past the block,
 * on the next panel (packed after this one) or the workspace's slack
 * (gemm.c's ws_get). dst_ld = 16 (a half panel of B) stores 8 of 16. */
static inline __attribute__((always_inline))
void pack_rows_transposed(float *dst, int dst_ld, const float *src, size_t ld, int rows, int kc) {
    for (int k = 0; k < kc; k += 8) {
        int n = kc - k < 8 ? kc - k : 8;
        __m256i m = lanes8(n);
        __m256 r[8];
        for (int i = 0; i < 8; i++) {
            if (i < rows && k + PACK_T_AHEAD < kc) _mm_prefetch((const char *)(src + (size_t)i * ld + k + PACK_T_AHEAD), _MM_HINT_T0);
            r[i] = i < rows ? _mm256_maskload_ps(src + (size_t)i * ld + k, m) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int j = 0; j < n; j++) _mm256_storeu_ps(dst + (size_t)(k + j) * dst_ld, r[j]);
    }
}

static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous;
             * stored 8 at a time, overlapping as in pack_rows_transposed
             * (with a masked store this loop was 28% of a product A^T B) */
            const __m256i m = lanes8(mr);
            const float *src = A + (size_t)p0 * lda + i0 + ir;
            for (int k = 0; k < kc; k++) {
                _mm_prefetch((const char *)(src + (size_t)(k + PACK_AHEAD) * lda), _MM_HINT_T0);
                _mm256_storeu_ps(dst + k * MR, _mm256_maskload_ps(src + (size_t)k * lda, m));
            }
        } else {
            /* op(A)[i][p] = A[i][p]: 8 k of the MR rows at a time, transposed */
            pack_rows_transposed(dst, MR, A + (size_t)(i0 + ir) * lda + p0, (size_t)lda, mr, kc);
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    if (!transB) {
        /* op(B)[p][j] = B[p][j]: row by row, each row one stream scattered
         * to the NR-wide panels (see the AVX-512 version) */
        for (int k = 0; k < kc; k++) {
            const float *src = B + (size_t)(p0 + k) * ldb + j0, *ahead = src + (size_t)PACK_AHEAD * ldb;
            for (int jr = 0; jr < nc; jr += 16) _mm_prefetch((const char *)(ahead + jr), _MM_HINT_T0);
            for (int jr = 0; jr < nc; jr += NR) {
                float *dst = Bp + (size_t)jr * kc + (size_t)k * NR;
                if (nc - jr >= NR) {
                    _mm256_store_ps(dst, _mm256_loadu_ps(src + jr));
                    _mm256_store_ps(dst + 8, _mm256_loadu_ps(src + jr + 8));
                } else {
                    _mm256_store_ps(dst, _mm256_maskload_ps(src + jr, lanes8(nc - jr)));
                    _mm256_store_ps(dst + 8, _mm256_maskload_ps(src + jr + 8, lanes8(nc - jr - 8)));
                }
            }
        }
        return;
    }
    for (int jr = 0; jr < nc; jr += NR) {
        /* op(B)[p][j] = B[j][p]: each half of the panel (8 rows of B) read
         * along the rows and transposed, 8 k at a time */
        int nr = nc - jr < NR ? nc - jr : NR;
        const float *src = B + (size_t)(j0 + jr) * ldb + p0;
        float *dst = Bp + (size_t)jr * kc;
        pack_rows_transposed(dst, NR, src, (size_t)ldb, nr < 8 ? nr : 8, kc);
        pack_rows_transposed(dst + 8, NR, src + (size_t)8 * ldb, (size_t)ldb, nr > 8 ? nr - 8 : 0, kc);
    }
}
#else
static void pack_a(float *Ap, const float *A, int lda, int transA, int i0, int p0, int mc, int kc) {
    for (int ir = 0; ir < mc; ir += MR) {
        int mr = mc - ir < MR ? mc - ir : MR;
        float *dst = Ap + (size_t)ir * kc;
        if (transA) {
            /* op(A)[i][p] = A[p][i]: the MR values of one k are contiguous */
            for (int k = 0; k < kc; k++) {
                const float *src = A + (size_t)(p0 + k) * lda + i0 + ir;
                int r = 0;
                for (; r < mr; r++) dst[k * MR + r] = src[r];
                for (; r < MR; r++) dst[k * MR + r] = 0.0f;
            }
        } else {
            /* op(A)[i][p] = A[i][p]: read each row along k, write with stride MR */
            for (int r = 0; r < MR; r++) {
                if (r < mr) {
                    const float *src = A + (size_t)(i0 + ir + r) * lda + p0;
                    for (int k = 0; k < kc; k++) dst[k * MR + r] = src[k];
                } else {
                    for (int k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
                }
            }
        }
    }
}

static void pack_b(float *Bp, const float *B, int ldb, int transB, int p0, int j0, int kc, int nc) {
    for (int jr = 0; jr < nc; jr += NR) {
        int nr = nc - jr < NR ? nc - jr : NR;
        float *dst = Bp + (size_t)jr * kc;
        if (transB) {
            /* op(B)[p][j] = B[j][p]: read each row of B along k */
            for (int c = 0; c < NR; c++) {
                if (c < nr) {
                    const float *src = B + (size_t)(j0 + jr + c) * ldb + p0;
                    for (int k = 0; k < kc; k++) dst[k * NR + c] = src[k];
                } else {
                    for (int k = 0; k < kc; k++) dst[k * NR + c] = 0.0f;
                }
            }
        } else {
            /* op(B)[p][j] = B[p][j]: NR contiguous floats per k, a plain copy */
            for (int k = 0; k < kc; k++) {
                const float *src = B + (size_t)(p0 + k) * ldb + j0 + jr;
                memcpy(dst + k * NR, src, sizeof(float) * nr);
                for (int c = nr; c < NR; c++) dst[k * NR + c] = 0.0f;
            }
        }
    }
}
#endif

/* ---- writing a finished tile back ---------------------------------------------
 * acc holds sum_k op(A)[i][k] op(B)[k][j] over one KC block. The first block
 * applies beta (and never reads C when beta == 0, so garbage or NaN there
 * cannot leak in); later blocks add on. One fmaf per element, the same
 * operation the vector paths do, so edge tiles round exactly like full ones. */
#if !defined(__AVX512F__) && !(defined(__AVX2__) && defined(__FMA__))
static inline float update_one(float acc, float c_old, float alpha, float beta, int first) {
    if (!first) return fmaf(alpha, acc, c_old);
    if (beta == 0.0f) return alpha * acc;
    return fmaf(alpha, acc, beta * c_old);
}

/* tile (MR, NR) row-major -> the mr x nr corner of C (the portable kernel). */
static void update_tile(float *C, int ldc, const float *tile, int mr, int nr,
                        float alpha, float beta, int first) {
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) {
            float *cp = &C[(size_t)r * ldc + c];
            *cp = update_one(tile[r * NR + c], first && beta == 0.0f ? 0.0f : *cp, alpha, beta, first);
        }
}
#endif

/* ---- micro-kernels --------------------------------------------------------------
 * kernel(kc, Ap, Bp, C, ldc, ...): C[0..mr, 0..nr] (+)= alpha * Ap-panel @ Bp-panel,
 * Ap (kc, MR) and Bp (kc, NR) packed; the tile is MR x NR, of which the
 * top-left mr x nr is real (the rest was zero-padded by packing). */
#if defined(__AVX512F__)
/* 14 x 32: 28 accumulators (14 rows x 2 vectors of 16 floats) + 2 registers
 * for the row of B + 1 for the broadcast A value = 31 of the 32 zmm
 * registers. Edges use AVX-512 masks for the columns and skip rows >= mr.
 * The A value of row r, step k is A[r*rsa + k*csa]: packed panels have
 * (rsa, csa) = (1, MR); kernel_direct reads A where it lies (see
 * gemm_blocked). Both are this one body, inlined with their own strides. */
static inline __attribute__((always_inline))
void kernel_body(int rows, int kc, const float *restrict A, size_t rsa, size_t csa, const float *restrict Bp,
                 float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    /* Ask for the C tile now; it is needed only after the k loop, by which
     * time it has arrived. Without this the tile (14 rows, often 8 KiB
     * apart, not in L2 for big C) is fetched row by row at the end of every
     * call, a stall of hundreds of cycles per call. */
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + (size_t)r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + (size_t)r * ldc + NR - 1), _MM_HINT_T0);
    }
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * NR);
        __m512 b1 = _mm512_load_ps(Bp + k * NR + 16);
#pragma GCC unroll 14
        for (int r = 0; r < rows; r++) {
            __m512 a = _mm512_set1_ps(A[r * rsa + k * csa]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
    for (int r = 0; r < rows; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * ldc;
        for (int h = 0; h < 2; h++) {
            __mmask16 m = h ? m1 : m0;
            __m512 out;
            if (first && beta == 0.0f) {
                out = _mm512_mul_ps(va, acc[r][h]);
            } else {
                __m512 old = _mm512_maskz_loadu_ps(m, cp + 16 * h);
                if (first) old = _mm512_mul_ps(vb, old);
                out = _mm512_fmadd_ps(va, acc[r][h], old);
            }
            _mm512_mask_storeu_ps(cp + 16 * h, m, out);
        }
    }
}

#define HAVE_KERNEL_DIRECT 1
#elif defined(__AVX2__) && defined(__FMA__)
/* 6 x 16: 12 accumulators (6 rows x 2 vectors of 8 floats) + 2 registers
 * for the row of B + 1 for the broadcast A value = 15 of the 16 ymm
 * registers; per k 12 FMAs for 2 loads of B and 6 broadcasts of A. The
 * same body as the AVX-512 kernel above (A read packed or in place, the C
 * tile asked for ahead), with lane masks for a ragged edge. */
static inline __attribute__((always_inline))
void kernel_body(int rows, int kc, const float *restrict A, size_t rsa, size_t csa, const float *restrict Bp,
                 float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(C + (size_t)r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + (size_t)r * ldc + NR - 1), _MM_HINT_T0);
    }
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(Bp + k * NR);
        __m256 b1 = _mm256_load_ps(Bp + k * NR + 8);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(A + r * rsa + k * csa);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const __m256i m0 = lanes8(nr), m1 = lanes8(nr - 8);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        if (r >= mr) break;
        float *cp = C + (size_t)r * ldc;
        for (int h = 0; h < 2; h++) {
            __m256 out;
            if (first && beta == 0.0f) {
                out = _mm256_mul_ps(va, acc[r][h]);
            } else {
                __m256 old = nr == NR ? _mm256_loadu_ps(cp + 8 * h) : _mm256_maskload_ps(cp + 8 * h, h ? m1 : m0);
                if (first) old = _mm256_mul_ps(vb, old);
                out = _mm256_fmadd_ps(va, acc[r][h], old);
            }
            if (nr == NR) _mm256_storeu_ps(cp + 8 * h, out);
            else _mm256_maskstore_ps(cp + 8 * h, h ? m1 : m0, out);
        }
    }
}
#define HAVE_KERNEL_DIRECT 1
#else
/* Portable C: the same tile idea with plain arrays; the compiler keeps what
 * it can in registers and may vectorise the c loop. A plain multiply and add
 * (not fmaf, which is a slow library call on CPUs without FMA); ISO C mode
 * (-std=c11) keeps the compiler from fusing them, so the rounding is fixed. */
static void kernel(int kc, const float *restrict Ap, const float *restrict Bp,
                   float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    float tile[MR * NR] = {0};
    for (int k = 0; k < kc; k++)
        for (int r = 0; r < MR; r++) {
            float a = Ap[k * MR + r];
            for (int c = 0; c < NR; c++) tile[r * NR + c] += a * Bp[k * NR + c];
        }
    update_tile(C, ldc, tile, mr, nr, alpha, beta, first);
}
#endif

#ifdef HAVE_KERNEL_DIRECT
static void kernel(int kc, const float *restrict Ap, const float *restrict Bp,
                   float *C, int ldc, float alpha, float beta, int first, int mr, int nr) {
    /* a ragged last tile (800 rows = 57 x 14 + 2 with AVX-512) does only
     * the rows it has, rounded up: the same sums, a seventh of the work
     * for 2 rows */
    if (mr <= 2) kernel_body(2, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
    else if (mr <= 4) kernel_body(4, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
#if MR > 8
    else if (mr <= 8) kernel_body(8, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
#endif
    else kernel_body(MR, kc, Ap, 1, MR, Bp, C, ldc, alpha, beta, first, mr, nr);
}

/* A read in place: op(A) = A^T, so the MR values of one k are adjacent
 * (A[k*lda + r]) - no copy needed. */
static void kernel_direct_t(int kc, const float *restrict A, int lda, const float *restrict Bp,
                            float *C, int ldc, float alpha, float beta, int first, int nr) {
    kernel_body(MR, kc, A, 1, (size_t)lda, Bp, C, ldc, alpha, beta, first, MR, nr);
}

/* A read in place: op(A) = A, row r of the tile is A[r*lda + k]. */
static void kernel_direct_n(int kc, const float *restrict A, int lda, const float *restrict Bp,
                            float *C, int ldc, float alpha, float beta, int first, int nr) {
    kernel_body(MR, kc, A, (size_t)lda, 1, Bp, C, ldc, alpha, beta, first, MR, nr);
}
#endif

/* One MR x NR tile of C over one block of the sum (kc deep): kernel_direct_*
 * for a full tile of A read in place, kernel on the packed ragged rows
 * otherwise. */
static inline __attribute__((always_inline))
void micro_tile(Workspace *ws, int transA, const float *A, int lda, float *C, int ldc, float alpha, float beta,
                int pc, int kc, int ic, int mc, int jc, int nc, int ir, int jr, int full) {
    int nr = nc - jr < NR ? nc - jr : NR, mr = mc - ir < MR ? mc - ir : MR;
    float *c = C + (size_t)(ic + ir) * ldc + jc + jr;
    const float *bp = ws->b + (size_t)jr * kc;
#ifdef HAVE_KERNEL_DIRECT
    if (ir < full) {
        if (transA)
            kernel_direct_t(kc, A + (size_t)pc * lda + ic + ir, lda, bp, c, ldc, alpha, beta, pc == 0, nr);
        else
            kernel_direct_n(kc, A + (size_t)(ic + ir) * lda + pc, lda, bp, c, ldc, alpha, beta, pc == 0, nr);
        return;
    }
#endif
    kernel(kc, ws->a + (size_t)ir * kc, bp, c, ldc, alpha, beta, pc == 0, mr, nr);
}

/* ---- the blocked loops (one thread) ----------------------------------------------
 * The five loops around the micro-kernel, outermost first:
 *   jc: NC-wide column panels of B and C
 *   pc: kc-deep slices of the sum      -> pack B panel (kc x NC) once
 *   ic: MC-tall row blocks of A and C   -> pack A block (MC x kc) once
 *   ir: MR-tall tiles of A (stay in L1/L2 across jr)
 *   jr: NR-wide micro-panels of the packed B panel (in L2) -> one
 *       micro-kernel call
 * BLIS runs jr outside ir, so that a micro-panel of B stays in L1 while
 * every tile of A passes. Here ir is outside: each tile of A, read in place
 * from memory the first time, is reused at once for the whole row of C
 * tiles, and C is written along its rows. Inside a training step, where A
 * and C are fresh from memory, that was faster: the Annotated step
 * 174.5 -> 167.2 and 180.3 -> 174.9 ms (medians of 12 and 10 alternating
 * runs), the same bits. It needs the B panel in L2, hence NC 256. */

void gemm_blocked(Workspace *ws, int depth, int transA, int transB, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc) {
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC;
        /* Full MR-row tiles read A where it lies (kernel_direct_*: same
         * products, same order, the same result); only a ragged last tile
         * is packed, zero-padded. Packing A was meant to pay for itself by
         * being read by many NR-wide micro-panels of B, but it waits on
         * memory (A's rows are far apart) and the kernel's own reads of A
         * hide that better: in place, the Annotated training step took 6%
         * less time on an AVX-512 machine, and a narrow C (d_model = 64: 2
         * micro-panels) gains more (bench/README.md). Not when A's rows
         * collide in L1, nor for AVX2's A^T (a_in_place): then all of A
         * is packed. */
        int direct = 0;
#ifdef HAVE_KERNEL_DIRECT
        direct = a_in_place(transA, lda);
#endif
        for (int pc = 0; pc < K; pc += depth) {
            int kc = K - pc < depth ? K - pc : depth;
            pack_b(ws->b, B, ldb, transB, pc, jc, kc, nc);
            for (int ic = 0; ic < M; ic += MC) {
                int mc = M - ic < MC ? M - ic : MC;
                int full = direct ? mc / MR * MR : 0;   /* rows done in place */
                if (full < mc) pack_a(ws->a + (size_t)full * kc, A, lda, transA, ic + full, pc, mc - full, kc);
                for (int ir = 0; ir < mc; ir += MR)
                    for (int jr = 0; jr < nc; jr += NR)
                        micro_tile(ws, transA, A, lda, C, ldc, alpha, beta, pc, kc, ic, mc, jc, nc, ir, jr, full);
            }
        }
    }
}

#endif /* !USE_OPENBLAS */
