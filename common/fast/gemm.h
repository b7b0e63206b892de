/* gemm.h - the matrix multiply every layer calls.
 *
 * C = alpha * op(A) @ op(B) + beta * C, BLAS sgemm semantics, row-major:
 *   op(A) is (M, K): A itself (M, K) with lda >= K, or if transA A is (K, M).
 *   op(B) is (K, N): B itself (K, N) with ldb >= N, or if transB B is (N, K).
 *   C is (M, N) with ldc >= N. beta == 0 means C is not read (may be garbage).
 * gemm() is what the library calls: the fast blocked SIMD kernel of gemm.c
 * and gemm_kernel.c (or OpenBLAS in a BLAS=openblas build). Plain twin:
 * gemm_ref (ref/ops.h), the readable triple loop that the chapters show and
 * the tests compare against.
 * gemm() neither allocates per call nor fails: it keeps one packing
 * workspace per thread, and a thread that cannot get one (out of memory)
 * computes its part with gemm_ref() instead: slower, never an exit. */
#ifndef GEMM_H
#define GEMM_H

void gemm(int transA, int transB, int M, int N, int K,
          float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc);

/* Several independent products as one job: the three projections of
 * multi-head attention (x W_Q, x W_K, x W_V) or the weight gradients of a
 * layer. Each is gemm() with these arguments and gets gemm()'s bits; the
 * threads take chunks of all of them from one queue, so there is one wait
 * at the end instead of one per product, and small products that would
 * each run on one thread are shared out. No product's C may overlap
 * another's A, B or C. At most GEMM_MANY_MAX. */
#define GEMM_MANY_MAX 4
typedef struct {
    int transA, transB, M, N, K;
    float alpha;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
} GemmArgs;
void gemm_many(int count, const GemmArgs *g);

/* How many KC blocks of products cut along K (a small model's weight
 * gradients; gemm.c) were kept aside by one thread and added in by the
 * caller so far: the tests check that the path they test ran. */
long gemm_blocks_kept_aside(void);

#endif
