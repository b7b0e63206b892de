/* ops.h - the basic ops: matrix multiply, softmax, element-wise.
 *
 * Conventions (llm.c style): outputs first, then inputs, then sizes; every
 * pointer's shape is in a comment; row-major storage; ops never allocate;
 * *_backward functions ACCUMULATE (+=) into gradients the caller zeroed.
 */
#ifndef OPS_H
#define OPS_H

#include <stddef.h>

/* ---- matrix multiply ------------------------------------------------------
 * C = alpha * op(A) @ op(B) + beta * C, BLAS sgemm semantics, row-major:
 *   op(A) is (M, K): A itself (M, K) with lda >= K, or if transA A is (K, M).
 *   op(B) is (K, N): B itself (K, N) with ldb >= N, or if transB B is (N, K).
 *   C is (M, N) with ldc >= N. beta == 0 means C is not read (may be garbage).
 * gemm_ref is the readable triple loop, summed in double: what the chapters
 * show and what the tests compare against. Its tuned twin gemm() (fast/gemm.h)
 * is what the library calls. */
void gemm_ref(int transA, int transB, int M, int N, int K,
              float alpha, const float *A, int lda, const float *B, int ldb,
              float beta, float *C, int ldc);

float dot(const float *a, const float *b, int n);

/* y[i] = expf(x[i]) for i < n (y may be x): the plain loop. Its tuned twin
 * exp_array (fast/ops_fast.h) does 16 (AVX2: 8) at a time with the same bits. */
void exp_array_ref(float *y, const float *x, int n);

/* ---- softmax (Eq. 1's softmax, along the last axis) -----------------------
 * out (N,C) = softmax(inp (N,C)) row by row, computed stably: subtract the
 * row max before exp so nothing overflows. Entries of -INFINITY get weight
 * exactly 0. A row that is entirely -INFINITY (nothing to attend to) gets
 * all zeros, never NaN. out may equal inp (in place). */
void softmax_forward(float *out, const float *inp, int N, int C);
/* dinp (N,C) += J^T dout, where J is softmax's Jacobian:
 * dinp_j += y_j * (dout_j - sum_i dout_i y_i).  out is the forward output. */
void softmax_backward(float *dinp, const float *dout, const float *out, int N, int C);
/* The textbook version without the max subtraction: exp overflows to inf
 * for logits above ~88 and inf/inf gives NaN. Kept only to show that. */
void softmax_naive(float *out, const float *inp, int N, int C);

/* ---- element-wise -------------------------------------------------------- */
void add_forward(float *out, const float *a, const float *b, size_t n);   /* out = a + b */
void scale_forward(float *out, const float *inp, float s, size_t n);      /* out = s * inp */
void fill(float *x, float value, size_t n);

#endif
