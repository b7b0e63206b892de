/* linear.h - the layers that are a matrix multiply: matmul, the linear layer
 * and the position-wise feed-forward network (Eq. 2).
 *
 * Conventions as in ref/ops.h: outputs first, shapes in comments, no
 * allocation, backward ACCUMULATES (+=) into gradients. N is a count of
 * rows (B*T). The products are gemm() (fast/gemm.h), the bias and ReLU
 * the tuned ops of fast/nn_fast.h; each of those has its plain twin in ref/
 * (gemm_ref, bias_forward_ref, relu_forward_ref, ...). */
#ifndef LINEAR_H
#define LINEAR_H

/* ---- matrix multiply --------------------------------------------------------
 * out (M,N) = a (M,K) @ b (K,N): the plainest form of gemm(). */
void matmul_forward(float *out, const float *a, const float *b, int M, int K, int N);
/* da (M,K) += dout (M,N) @ b^T ;  db (K,N) += a^T @ dout. Either may be NULL. */
void matmul_backward(float *da, float *db, const float *dout,
                     const float *a, const float *b, int M, int K, int N);

/* ---- linear: out = inp W + b (Eq. 2's xW_1 + b_1) -------------------------
 * out (N,OUT), inp (N,IN), W (IN,OUT), bias (OUT) or NULL. */
void linear_forward(float *out, const float *inp, const float *W, const float *bias,
                    int N, int IN, int OUT);
/* dinp (N,IN) +=, dW (IN,OUT) +=, dbias (OUT) += ; any may be NULL. */
void linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                     const float *inp, const float *W, int N, int IN, int OUT);

/* ---- position-wise feed-forward network (Eq. 2) ----------------------------
 * FFN(x) = max(0, x W1 + b1) W2 + b2
 * out (N,d_model), hidden (N,d_ff) saved post-ReLU, x (N,d_model),
 * W1 (d_model,d_ff), b1 (d_ff), W2 (d_ff,d_model), b2 (d_model). */
void ffn_forward(float *out, float *hidden, const float *x,
                 const float *W1, const float *b1, const float *W2, const float *b2,
                 int N, int d_model, int d_ff);
/* dx +=, dW1 +=, db1 +=, dW2 +=, db2 += ; dhidden (N,d_ff) is scratch. */
void ffn_backward(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                  float *dhidden, const float *dout, const float *hidden, const float *x,
                  const float *W1, const float *W2, int N, int d_model, int d_ff);

#endif
