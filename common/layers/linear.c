/* linear.c - the layers that are a matrix multiply: matmul, the linear layer
 * (x W + b) and the position-wise feed-forward network of Eq. 2.
 *
 * Each product is one call of gemm() (fast/gemm.c); the backward pass's two
 * independent products go to the threads as one job (gemm_many), each with
 * gemm()'s bits. The bias and ReLU around them are fast/nn_fast.c's. */
#include "layers/linear.h"
#include "fast/gemm.h"
#include "fast/nn_fast.h"

#include <assert.h>
#include <stddef.h>

/* ========================================================================== */
/* matrix multiply                                                            */
/* ========================================================================== */

void matmul_forward(float *out, const float *a, const float *b, int M, int K, int N) {
    gemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, out, N);
}

void matmul_backward(float *da, float *db, const float *dout,
                     const float *a, const float *b, int M, int K, int N) {
    /* forward: out = a @ b, so d a = dout @ b^T and d b = a^T @ dout */
    GemmArgs g[2];   /* independent: one job (gemm_many), each with gemm()'s bits */
    int n = 0;
    if (da) g[n++] = (GemmArgs){0, 1, M, K, N, 1.0f, dout, N, b, N, 1.0f, da, K};
    if (db) g[n++] = (GemmArgs){1, 0, K, N, M, 1.0f, a, K, dout, N, 1.0f, db, N};
    gemm_many(n, g);
}

/* ========================================================================== */
/* linear                                                                     */
/* ========================================================================== */

/* out (N,OUT) = inp (N,IN) @ W (IN,OUT) + bias (OUT): the x W_1 + b_1 of Eq. 2.
 * The matrix multiply is gemm() (the fast kernel), then the bias on every row. */
void linear_forward(float *out, const float *inp, const float *W, const float *bias,
                    int N, int IN, int OUT) {
    assert(N >= 0 && IN > 0 && OUT > 0);
    gemm(0, 0, N, OUT, IN, 1.0f, inp, IN, W, OUT, 0.0f, out, OUT);
    if (bias) bias_forward(out, bias, N, OUT);
}

/* forward: out = inp @ W + bias
 *   dinp  (N,IN)  += dout (N,OUT) @ W^T
 *   dW    (IN,OUT) += inp^T @ dout
 *   dbias (OUT)   += sum over rows of dout      (bias was added to every row) */
void linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                     const float *inp, const float *W, int N, int IN, int OUT) {
    assert(N >= 0 && IN > 0 && OUT > 0);
    /* the two products are independent: one job (gemm_many), each with gemm()'s bits */
    GemmArgs g[2];
    int n = 0;
    if (dinp) g[n++] = (GemmArgs){0, 1, N, IN, OUT, 1.0f, dout, OUT, W, OUT, 1.0f, dinp, IN};
    if (dW) g[n++] = (GemmArgs){1, 0, IN, OUT, N, 1.0f, inp, IN, dout, OUT, 1.0f, dW, OUT};
    gemm_many(n, g);
    if (dbias) bias_backward(dbias, dout, N, OUT);   /* rows in order */
}

/* ========================================================================== */
/* position-wise feed-forward network (Eq. 2, Sec. 3.3)                       */
/* ========================================================================== */

/* FFN(x) = max(0, x W1 + b1) W2 + b2, the same two layers at every position
 * (the N rows never mix: "position-wise"). */
void ffn_forward(float *out, float *hidden, const float *x,
                 const float *W1, const float *b1, const float *W2, const float *b2,
                 int N, int d_model, int d_ff) {
    linear_forward(hidden, x, W1, b1, N, d_model, d_ff);         /* x W1 + b1         */
    relu_forward(hidden, hidden, (size_t)N * d_ff);              /* max(0, .)         */
    linear_forward(out, hidden, W2, b2, N, d_ff, d_model);       /* hidden W2 + b2    */
}

void ffn_backward(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                  float *dhidden, const float *dout, const float *hidden, const float *x,
                  const float *W1, const float *W2, int N, int d_model, int d_ff) {
    size_t nh = (size_t)N * d_ff;
    /* forward: out = hidden W2 + b2
     *   dhidden = dout W2^T (written, beta = 0: dhidden is scratch and
     *   needs no zeroing), dW2 += hidden^T dout, db2 += sum of dout's rows */
    gemm(0, 1, N, d_ff, d_model, 1.0f, dout, d_model, W2, d_model, 0.0f, dhidden, d_ff);
    linear_backward(NULL, dW2, db2, dout, hidden, W2, N, d_ff, d_model);
    /* forward: hidden = max(0, pre). Zero the gradient where ReLU was off;
     * done in place, so dhidden now holds d(pre). */
    relu_backward_inplace(dhidden, hidden, nh);   /* hidden > 0 ? dhidden : 0 */
    /* forward: pre = x W1 + b1 */
    linear_backward(dx, dW1, db1, dhidden, x, W1, N, d_model, d_ff);
}
