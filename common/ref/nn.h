/* nn.h - the other layers of the Transformer, each a forward/backward pair.
 *
 * Conventions as in ops.h: outputs first, shapes in comments, no allocation,
 * backward ACCUMULATES (+=) into gradients. N is a count of rows (B*T).
 */
#ifndef NN_H
#define NN_H

#include <stdint.h>
#include "core/rng.h"

/* ---- linear: out = inp W + b (Eq. 2's xW_1 + b_1) -------------------------
 * out (N,OUT), inp (N,IN), W (IN,OUT), bias (OUT) or NULL. */
void linear_forward(float *out, const float *inp, const float *W, const float *bias,
                    int N, int IN, int OUT);
/* dinp (N,IN) +=, dW (IN,OUT) +=, dbias (OUT) += ; any may be NULL. */
void linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                     const float *inp, const float *W, int N, int IN, int OUT);

/* ---- ReLU: max(0, x) (Eq. 2) ---------------------------------------------- */
void relu_forward(float *out, const float *inp, size_t n);
/* dinp += dout where the forward OUTPUT was > 0 */
void relu_backward(float *dinp, const float *dout, const float *out, size_t n);

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

/* ---- layer normalisation (Sec. 3.1, Ba et al. 2016) ------------------------
 * out = gamma * (x - mean) / sqrt(var + eps) + beta, per row of C.
 * out (N,C), mean (N), rstd (N) saved for backward, inp (N,C), gamma/beta (C). */
#define LAYERNORM_EPS 1e-5f
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *gamma, const float *beta, int N, int C);
void layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                        const float *inp, const float *mean, const float *rstd,
                        const float *gamma, int N, int C);
/* The plain references the two above are tested against (tests/check_nn.c):
 * the same signatures and the same math, written as one loop per line of the
 * formula. layernorm_forward / _backward are what the model calls; they sum
 * the rows in several running sums (vector-friendly) and use threads. */
void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int C);
void layernorm_backward_ref(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *gamma, int N, int C);

/* ---- residual: out = a + b (the x + Sublayer(x) of Sec. 3.1) --------------- */
void residual_forward(float *out, const float *a, const float *b, size_t n);
/* da += dout, db += dout */
void residual_backward(float *da, float *db, const float *dout, size_t n);

/* ---- dropout (Sec. 5.4) ----------------------------------------------------
 * Inverted dropout: keep each element with probability 1-p and scale it by
 * 1/(1-p), so inference needs no change. keep (n) records the scale used
 * (0 or 1/(1-p)) for backward. Element i is kept when
 * dropout_keep(key, tensor, i, p) says so (dropout_mask.h: a counter-based
 * hash the CUDA kernel shares, so both devices draw the same mask).
 * p == 0 copies inp and fills keep with 1. out may equal inp. */
/* the plain loop, one dropout_keep per element (dropout_forward is the
 * same mask, vectorised and over the threads; tested equal) */
void dropout_forward_ref(float *out, float *keep, const float *inp, float p, size_t n,
                         uint64_t key, uint32_t tensor);
void dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                     uint64_t key, uint32_t tensor);
void dropout_backward(float *dinp, const float *dout, const float *keep, size_t n);

/* ---- embeddings (Sec. 3.4) and positional encoding (Sec. 3.5) -------------
 * out (B,T,d_model) = table[ids] * sqrt(d_model) + PE[t]
 * ids (B,T) must each be in [0, vocab) (the caller validates input; this
 * asserts). table (vocab,d_model), pe (>=T, d_model). */
void embed_forward(float *out, const int *ids, const float *table, const float *pe,
                   int B, int T, int d_model, int vocab);
/* dtable += scatter of dout * sqrt(d_model) by id (PE has no parameters) */
void embed_backward(float *dtable, const float *dout, const int *ids,
                    int B, int T, int d_model, int vocab);
/* pe (max_len, d_model):  PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),
 *                         PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
 * Computed in double, stored as float. d_model may be odd (last column sin). */
void posenc_fill(float *pe, int max_len, int d_model);

/* ---- output: log-softmax and label-smoothed cross-entropy (Sec. 5.4) ------
 * logp (N,V) = log softmax(logits (N,V)), stable (log-sum-exp with max). */
void logsoftmax_forward(float *logp, const float *logits, int N, int V);
/* The label-smoothed target distribution for one position: eps_ls spread
 * evenly over the V-2 classes that are neither the target nor padding
 * (padding gets 0), 1-eps_ls on the target. dist (V). pad_id < 0: no pad
 * class (spread over V-1). target == pad_id (a position that does not
 * count) gives all zeros; with no other class to spread over (V-2 == 0)
 * the target gets 1. */
void smoothed_targets(float *dist, int target, int V, float eps_ls, int pad_id);
/* Mean over non-padding positions of KL-free cross-entropy
 * -sum_v dist_v * logp_v.  targets (N); positions whose target == pad_id
 * count for nothing. Returns the mean loss (0 if every position is padding)
 * and writes the number of counted positions to *n_tokens (may be NULL). */
float smoothed_xent_forward(const float *logp, const int *targets, int N, int V,
                            float eps_ls, int pad_id, int *n_tokens);
/* dlogits (N,V) += d(mean loss)/d(logits), through the log-softmax:
 * (softmax(logits) - dist) / n_tokens on counted rows, 0 on padding rows. */
void smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                            int N, int V, float eps_ls, int pad_id);

#endif
