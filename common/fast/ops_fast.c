/* ops_fast.c - expf of an array with the vector unit, expf()'s bits. */
#include "fast/ops_fast.h"
#include "ref/ops.h"

#include "fast/simd.h"

#ifdef HAVE_EXP16
void exp_array(float *y, const float *x, int n) {
    for (int i = 0; i < n; i += 16) {
        int left = n - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        _mm512_mask_storeu_ps(y + i, m, exp16_ps(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#elif defined(HAVE_EXP8)
void exp_array(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8_avx2(_mm256_loadu_ps(x + i)));
    if (i < n) {
        /* the ragged end (a row of 10 keys: 2) as one vector, through a
         * local array: a masked store is slow on AMD, and two calls of
         * expf() took longer than the 8 lanes before them */
        float t[8];
        _mm256_storeu_ps(t, exp8_avx2(_mm256_maskload_ps(x + i, lanes8(n - i))));
        for (int j = 0; i + j < n; j++) y[i + j] = t[j];
    }
}
#else
/* no vector exp on this CPU: the plain loop */
void exp_array(float *y, const float *x, int n) { exp_array_ref(y, x, n); }
#endif
