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
 * gemm() and gemm_ref() (C = alpha op(A) op(B) + beta C) are in gemm.h. */
/* out (M,N) = a (M,K) @ b (K,N): the plainest form, via gemm(). */
void matmul_forward(float *out, const float *a, const float *b, int M, int K, int N);
/* da (M,K) += dout (M,N) @ b^T ;  db (K,N) += a^T @ dout. Either may be NULL. */
void matmul_backward(float *da, float *db, const float *dout,
                     const float *a, const float *b, int M, int K, int N);

float dot(const float *a, const float *b, int n);

/* y[i] = expf(x[i]) for i < n, the same bits as expf() (y may be x). With
 * AVX-512, 16 at a time (ops.c); otherwise the plain loop. */
void exp_array(float *y, const float *x, int n);

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
