/* nn_fast.h - the tuned twins of ref/nn.h's layers, what the model calls.
 *
 * Each has the signature of its plain twin in ref/nn.h (the name without
 * _ref) and computes the same, with threads and vector-friendly sums: the
 * bits of the plain twin, except layer norm (another order of additions,
 * equal to rounding). Shapes and meaning are documented at the plain twin;
 * conventions as there: outputs first, no allocation, backward ACCUMULATES
 * (+=) into gradients. */
#ifndef NN_FAST_H
#define NN_FAST_H

#include <stddef.h>
#include <stdint.h>

/* ReLU (Eq. 2). Plain twins: relu_forward_ref, relu_backward_ref,
 * relu_backward_inplace_ref (ref/nn.c). */
void relu_forward(float *out, const float *inp, size_t n);
void relu_backward(float *dinp, const float *dout, const float *out, size_t n);
void relu_backward_inplace(float *d, const float *out, size_t n);

/* The bias of a linear layer: out (N,C) += bias (C); dbias (C) += the sum
 * of dout's (N,C) rows. Plain twins: bias_forward_ref, bias_backward_ref. */
void bias_forward(float *out, const float *bias, int N, int C);
void bias_backward(float *dbias, const float *dout, int N, int C);

/* Layer normalisation (Sec. 3.1). Plain twins: layernorm_forward_ref,
 * layernorm_backward_ref (ref/nn.c), which sum in double, in index order. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *gamma, const float *beta, int N, int C);
void layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                        const float *inp, const float *mean, const float *rstd,
                        const float *gamma, int N, int C);

/* Residual: out = a + b; da += dout, db += dout. Plain twins:
 * residual_forward_ref, residual_backward_ref. */
void residual_forward(float *out, const float *a, const float *b, size_t n);
void residual_backward(float *da, float *db, const float *dout, size_t n);

/* Dropout (Sec. 5.4): dropout_forward_ref's mask, vectorised and over the
 * threads; dinp += dout * keep. Plain twins: dropout_forward_ref,
 * dropout_backward_ref. */
void dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                     uint64_t key, uint32_t tensor);
void dropout_backward(float *dinp, const float *dout, const float *keep, size_t n);

/* The output (Sec. 5.4): log-softmax and the label-smoothed cross-entropy's
 * gradient, rows over the threads. Plain twins: logsoftmax_forward_ref,
 * smoothed_xent_backward_ref (ref/nn.c; smoothed_xent_forward, a sum over
 * rows, has no twin). */
void logsoftmax_forward(float *logp, const float *logits, int N, int V);
void smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                            int N, int V, float eps_ls, int pad_id);

#endif
