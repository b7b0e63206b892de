/* gemm_steps.c - the road from the triple loop to common/fast/gemm.c, one step
 * per function, so the bench can time what each idea buys (bench/README.md).
 *
 * All compute C (M,N) = A (M,K) @ B (K,N), row-major, no transposes: the
 * steps only differ in the ORDER in which they touch memory and in what they
 * keep in registers. The finished kernel (packing + AVX-512 micro-kernel +
 * threads) is gemm() itself; these are the stops along the way.
 */
#include <string.h>
#include "bench.h"

/* -O2's "very cheap" vectoriser skips loops whose length is not known at
 * compile time; steps 1 and 2 are about what unit-stride loops let the
 * compiler do, so let it vectorise them as -O3 would. */
#pragma GCC optimize("vect-cost-model=dynamic")

/* Step 1: loop reorder i,k,j. gemm_ref's i,j,k loop walks B down a column
 * (stride N: a cache miss per element for large N). With k in the middle,
 * the inner loop runs along a row of B and a row of C, both unit stride, and
 * the compiler can use vector instructions on it (restrict promises c and b
 * do not overlap, so it needs no run-time check before vectorising). */
void gemm_step_reorder(float *C, const float *A, const float *B, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        float *restrict c = C + (size_t)i * N;
        memset(c, 0, sizeof(float) * N);
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)i * K + k];
            const float *restrict b = B + (size_t)k * N;
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* Step 2: cache blocking. Step 1 streams all of B (K x N) through the cache
 * once per row of A. Cutting k and j into blocks of KB x NB (64 KiB, fits
 * L2 comfortably) and doing all rows of A against one block before moving on
 * reuses each block of B M times while it is still cached. */
#define KB 128
#define NB 128
void gemm_step_blocked(float *C, const float *A, const float *B, int M, int N, int K) {
    memset(C, 0, sizeof(float) * (size_t)M * N);
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = k0 + KB < K ? k0 + KB : K;
        for (int j0 = 0; j0 < N; j0 += NB) {
            int j1 = j0 + NB < N ? j0 + NB : N;
            for (int i = 0; i < M; i++) {
                float *restrict c = C + (size_t)i * N;
                for (int k = k0; k < k1; k++) {
                    float a = A[(size_t)i * K + k];
                    const float *restrict b = B + (size_t)k * N;
                    for (int j = j0; j < j1; j++) c[j] += a * b[j];
                }
            }
        }
    }
}

/* Step 3: packing + a register tile in plain C. Step 2 still loads and
 * stores C[i][j] for every k. A 4 x 16 tile of C kept in local variables
 * (registers) is loaded and stored once per block of K; A and B are copied
 * ("packed") so the tile's inputs are adjacent in memory. Written in plain
 * C: whether it becomes vector code is up to the compiler. */
#define TM 4
#define TN 16
#define PK 256
void gemm_step_packed(float *C, const float *A, const float *B, int M, int N, int K,
                      float *packA, float *packB) {
    /* packA: (TM * PK) floats, packB: (PK * N rounded up to TN) floats */
    memset(C, 0, sizeof(float) * (size_t)M * N);
    int Np = (N + TN - 1) / TN * TN;
    for (int k0 = 0; k0 < K; k0 += PK) {
        int kc = K - k0 < PK ? K - k0 : PK;
        for (int j0 = 0; j0 < Np; j0 += TN)          /* pack B: (kc, TN) panels */
            for (int k = 0; k < kc; k++)
                for (int c = 0; c < TN; c++)
                    packB[(size_t)j0 * kc + k * TN + c] = j0 + c < N ? B[(size_t)(k0 + k) * N + j0 + c] : 0.0f;
        for (int i0 = 0; i0 < M; i0 += TM) {
            int mr = M - i0 < TM ? M - i0 : TM;
            for (int k = 0; k < kc; k++)               /* pack A: (kc, TM) */
                for (int r = 0; r < TM; r++)
                    packA[k * TM + r] = r < mr ? A[(size_t)(i0 + r) * K + k0 + k] : 0.0f;
            for (int j0 = 0; j0 < Np; j0 += TN) {
                float t[TM][TN] = {{0}};
                const float *pb = packB + (size_t)j0 * kc;
                for (int k = 0; k < kc; k++)
                    for (int r = 0; r < TM; r++)
                        for (int c = 0; c < TN; c++) t[r][c] += packA[k * TM + r] * pb[k * TN + c];
                int nr = N - j0 < TN ? N - j0 : TN;
                for (int r = 0; r < mr; r++)
                    for (int c = 0; c < nr; c++) C[(size_t)(i0 + r) * N + j0 + c] += t[r][c];
            }
        }
    }
}
