/* simd.h - vector helpers shared by the tuned twins in fast/ (gemm_kernel.c,
 * ops_fast.c, nn_fast.c, optim_fast.c, attention_fast.c).
 *
 *   transpose16(r)  16 rows of 16 floats -> 16 columns, in registers (AVX-512 F)
 *   exp16_ps(x)     expf() of 16 floats, with expf()'s bits (AVX-512 F and DQ)
 *   exp8_avx2(x)    expf() of 8 floats, with expf()'s bits (AVX2 and FMA)
 *   lanes8(n)       the mask of the first n of 8 lanes (AVX2 and FMA)
 *   vfloat, vf_*    one vector of VF_LANES floats (16 with AVX-512, 8 with
 *   vdouble, vd_*   AVX2), one of VD_LANES doubles: a loop that is the same
 *                   on both but for the width is written once over these
 *
 * The files that include it have plain-C loops for other CPUs. */
#ifndef SIMD_H
#define SIMD_H

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#endif

/* ---- one vector, whatever its width ------------------------------------------
 * VF_LANES is 0 where there is neither AVX-512 nor AVX2 (#if VF_LANES: the
 * vector loop, then the plain loop for the rest). Each macro is one
 * instruction, so a loop over them does the same operations in the same
 * order on either width: element-wise work gets the same bits. */
#if defined(__AVX512F__)
#define VF_LANES 16
#define VD_LANES 8
typedef __m512 vfloat;
typedef __m512d vdouble;
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_store(p, x) _mm512_storeu_ps(p, x)
#define vf_set1(x) _mm512_set1_ps(x)
#define vf_add(a, b) _mm512_add_ps(a, b)
#define vf_sub(a, b) _mm512_sub_ps(a, b)
#define vf_mul(a, b) _mm512_mul_ps(a, b)
#define vf_div(a, b) _mm512_div_ps(a, b)
#define vf_sqrt(a) _mm512_sqrt_ps(a)
#define vd_zero() _mm512_setzero_pd()
#define vd_widen(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))   /* VD_LANES floats at p, as doubles */
#define vd_add(a, b) _mm512_add_pd(a, b)
#define vd_mul(a, b) _mm512_mul_pd(a, b)
#define vd_store(p, x) _mm512_storeu_pd(p, x)
#elif defined(__AVX2__) && defined(__FMA__)
#define VF_LANES 8
#define VD_LANES 4
typedef __m256 vfloat;
typedef __m256d vdouble;
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_store(p, x) _mm256_storeu_ps(p, x)
#define vf_set1(x) _mm256_set1_ps(x)
#define vf_add(a, b) _mm256_add_ps(a, b)
#define vf_sub(a, b) _mm256_sub_ps(a, b)
#define vf_mul(a, b) _mm256_mul_ps(a, b)
#define vf_div(a, b) _mm256_div_ps(a, b)
#define vf_sqrt(a) _mm256_sqrt_ps(a)
#define vd_zero() _mm256_setzero_pd()
#define vd_widen(p) _mm256_cvtps_pd(_mm_loadu_ps(p))       /* VD_LANES floats at p, as doubles */
#define vd_add(a, b) _mm256_add_pd(a, b)
#define vd_mul(a, b) _mm256_mul_pd(a, b)
#define vd_store(p, x) _mm256_storeu_pd(p, x)
#else
#define VF_LANES 0
#endif

#if (defined(__AVX512F__) && defined(__AVX512DQ__)) || (defined(__AVX2__) && defined(__FMA__))
/* glibc's expf (since 2.27; ARM's optimized-routines algorithm), 8 (AVX2:
 * 4) lanes of double at a time, in the order of operations of its FMA build
 * (__expf_fma, what glibc runs on every CPU with FMA), so each lane
 * rounds exactly as expf() does:
 *   exp(x) = 2^(k/32) * 2^(r/32),  x * 32/ln2 = k + r,  |r| <= 1/2
 *   2^(k/32) = 2^(k div 32) * T[k mod 32]  (the table, with k's high bits
 *   added straight into the exponent field), 2^(r/32) ~ C0 r^3 + C1 r^2 + C2 r + 1.
 * tests/check_ops.c compares it with expf() bit for bit. */
static const uint64_t exp2f_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
#endif

#if defined(__AVX512F__)
/* r[0..16) rows of 16 floats -> r[j] = column j of the input (16 x 16
 * transpose in registers: 64 shuffles for 256 floats, against 16 gathers
 * that move one float at a time). Three stages, each pairing vectors and
 * doubling the size of the transposed blocks: 1x1 within pairs of rows
 * (unpack), 2x2 within groups of 4 rows (shuffle_ps), then 4x4 blocks of
 * 128-bit lanes (shuffle_f32x4, twice). */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);       /* lane l: a4l b4l a4l+1 b4l+1 */
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);   /* lane l: a4l+2 b4l+2 a4l+3 b4l+3 */
    }
    /* u[4q + c], lane l: rows 4q..4q+3 of column 4l + c */
    for (int q = 0; q < 16; q += 4) {
        u[q] = _mm512_shuffle_ps(t[q], t[q + 2], 0x44);
        u[q + 1] = _mm512_shuffle_ps(t[q], t[q + 2], 0xEE);
        u[q + 2] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        u[q + 3] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);   /* lanes 0, 2 of each */
        __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);   /* lanes 1, 3 of each */
        __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
        r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
    }
}

#if defined(__AVX512DQ__)
#define HAVE_EXP16 1

static inline __m256 exp8_ps(__m256 xf) {
    const __m512d inv_ln2_n = _mm512_set1_pd(0x1.71547652b82fep+5);   /* 32 / ln 2 */
    const __m512d shift = _mm512_set1_pd(0x1.8p+52);                  /* rounds to an integer */
    const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-20), c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm512_set1_pd(1.0);
    __m512d x = _mm512_cvtps_pd(xf);
    __m512d kd = _mm512_fmadd_pd(inv_ln2_n, x, shift);   /* k + shift; k in its low bits */
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fmsub_pd(inv_ln2_n, x, kd);
    /* T[k mod 32]: two 16-entry register lookups, bit 4 picks one (a
     * gather is several times slower on some CPUs) */
    __m512i idx = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    __m512i lo = _mm512_permutex2var_epi64(_mm512_loadu_si512(exp2f_tab), idx, _mm512_loadu_si512(exp2f_tab + 8));
    __m512i hi = _mm512_permutex2var_epi64(_mm512_loadu_si512(exp2f_tab + 16), idx,
                                           _mm512_loadu_si512(exp2f_tab + 24));
    __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(idx, _mm512_set1_epi64(16)), lo, hi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    __m512d z = _mm512_fmadd_pd(r, c0, c1);
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, c2, one);
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* expf of 16 lanes. exp(-inf) = 0 (masked scores) in the vector path;
 * |x| >= 88, +inf and NaN go through expf() itself, which handles
 * overflow, underflow and errno. */
static inline __m512 exp16_ps(__m512 x) {
    __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(exp8_ps(_mm512_castps512_ps256(x))),
                                  exp8_ps(_mm512_extractf32x8_ps(x, 1)), 1);
    __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20), _mm512_set1_epi32(0x7ff));
    __mmask16 neg_inf = _mm512_cmpeq_ps_mask(x, _mm512_set1_ps(-INFINITY));
    __mmask16 other = _mm512_cmpge_epi32_mask(top, _mm512_set1_epi32(0x42b)) & ~neg_inf;
    e = _mm512_mask_mov_ps(e, neg_inf, _mm512_setzero_ps());
    if (other) {
        float in[16], out[16];
        _mm512_storeu_ps(in, x);
        _mm512_storeu_ps(out, e);
        for (; other; other &= other - 1) {
            int j = __builtin_ctz(other);
            out[j] = expf(in[j]);
        }
        e = _mm512_loadu_ps(out);
    }
    return e;
}

#endif /* __AVX512DQ__ */

#elif defined(__AVX2__) && defined(__FMA__)
/* lanes [0, n) of 8 (all for n >= 8, none for n <= 0): the mask of
 * _mm256_maskload_ps / _mm256_maskstore_ps for a ragged end */
static inline __m256i lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define HAVE_EXP8 1
/* exp8_ps above with AVX2's 4 lanes of double: the same operations in the
 * same order, the table read with a gather (no 32-entry permute here) */
static inline __m128 exp4_avx2(__m128 xf) {
    const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5);   /* 32 / ln 2 */
    const __m256d shift = _mm256_set1_pd(0x1.8p+52);
    const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20), c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm256_set1_pd(1.0);
    __m256d x = _mm256_cvtps_pd(xf);
    __m256d kd = _mm256_fmadd_pd(inv_ln2_n, x, shift);
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fmsub_pd(inv_ln2_n, x, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)exp2f_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    __m256d z = _mm256_fmadd_pd(r, c0, c1);
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, c2, one);
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/* expf of 8 lanes, as exp16_ps: exp(-inf) = 0 here, |x| >= 88, +inf and
 * NaN through expf() itself */
static inline __m256 exp8_avx2(__m256 x) {
    __m256 e = _mm256_set_m128(exp4_avx2(_mm256_extractf128_ps(x, 1)), exp4_avx2(_mm256_castps256_ps128(x)));
    __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
    __m256 neg_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
    __m256 big = _mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a)));
    int other = _mm256_movemask_ps(_mm256_andnot_ps(neg_inf, big));
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), neg_inf);
    if (other) {
        float in[8], out[8];
        _mm256_storeu_ps(in, x);
        _mm256_storeu_ps(out, e);
        for (; other; other &= other - 1) {
            int j = __builtin_ctz(other);
            out[j] = expf(in[j]);
        }
        e = _mm256_loadu_ps(out);
    }
    return e;
}
#endif /* __AVX512F__, AVX2 */
#endif
