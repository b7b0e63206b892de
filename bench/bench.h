/* bench.h - the teaching steps of bench/gemm_steps.c (see bench/README.md).
 * Each computes C (M,N) = A (M,K) @ B (K,N), row-major, C overwritten. */
#ifndef BENCH_H
#define BENCH_H

void gemm_step_reorder(float *C, const float *A, const float *B, int M, int N, int K);
void gemm_step_blocked(float *C, const float *A, const float *B, int M, int N, int K);
/* packA (4*256) and packB (256 * N rounded up to 16) floats of scratch */
void gemm_step_packed(float *C, const float *A, const float *B, int M, int N, int K,
                      float *packA, float *packB);

#endif
