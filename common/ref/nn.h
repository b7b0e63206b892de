/* nn.h - the other layers of the Transformer, each a forward/backward pair,
 * written plainly: the reference a reader reads first.
 *
 * Conventions as in ops.h: outputs first, shapes in comments, no allocation,
 * backward ACCUMULATES (+=) into gradients. N is a count of rows (B*T).
 *
 * An op named *_ref has a tuned twin of the same name without the suffix in
 * fast/nn_fast.h (threads, vector-friendly sums): that is what the model
 * calls, and the tests check that the two agree. The linear layer and the
 * FFN (Eq. 2), which are matrix multiplies, are in layers/linear.h.
 */
#ifndef NN_H
#define NN_H

#include <stddef.h>
#include <stdint.h>

/* ---- ReLU: max(0, x) (Eq. 2) ---------------------------------------------- */
void relu_forward_ref(float *out, const float *inp, size_t n);
/* dinp += dout where the forward OUTPUT was > 0 */
void relu_backward_ref(float *dinp, const float *dout, const float *out, size_t n);
/* d = out > 0 ? d : 0, in place: relu_backward for a gradient that is
 * written, not accumulated (the FFN's dhidden, which gemm just wrote) */
void relu_backward_inplace_ref(float *d, const float *out, size_t n);

/* ---- the bias of a linear layer (Eq. 2's + b_1) ---------------------------
 * out (N,C) += bias (C) on every row. */
void bias_forward_ref(float *out, const float *bias, int N, int C);
/* dbias (C) += the sum of dout's (N,C) rows, the rows in order */
void bias_backward_ref(float *dbias, const float *dout, int N, int C);

/* ---- layer normalisation (Sec. 3.1, Ba et al. 2016) ------------------------
 * out = gamma * (x - mean) / sqrt(var + eps) + beta, per row of C.
 * out (N,C), mean (N), rstd (N) saved for backward, inp (N,C), gamma/beta (C).
 * One loop per line of the formula, the row sums in double. The tuned twins
 * layernorm_forward / _backward sum in another order: equal to rounding. */
#define LAYERNORM_EPS 1e-5f
void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int C);
/* dinp (N,C) +=, dgamma (C) +=, dbeta (C) += ; any may be NULL. */
void layernorm_backward_ref(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *gamma, int N, int C);

/* ---- residual: out = a + b (the x + Sublayer(x) of Sec. 3.1) --------------- */
void residual_forward_ref(float *out, const float *a, const float *b, size_t n);
/* da += dout, db += dout */
void residual_backward_ref(float *da, float *db, const float *dout, size_t n);

/* ---- dropout (Sec. 5.4) ----------------------------------------------------
 * Inverted dropout: keep each element with probability 1-p and scale it by
 * 1/(1-p), so inference needs no change. keep (n) records the scale used
 * (0 or 1/(1-p)) for backward. Element i is kept when
 * dropout_keep(key, tensor, i, p) says so (dropout_mask.h: a counter-based
 * hash the CUDA kernel shares, so both devices draw the same mask).
 * p == 0 copies inp and fills keep with 1. out may equal inp.
 * The plain loop, one dropout_keep per element. */
void dropout_forward_ref(float *out, float *keep, const float *inp, float p, size_t n,
                         uint64_t key, uint32_t tensor);
/* dinp += dout * keep */
void dropout_backward_ref(float *dinp, const float *dout, const float *keep, size_t n);

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
void logsoftmax_forward_ref(float *logp, const float *logits, int N, int V);
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
void smoothed_xent_backward_ref(float *dlogits, const float *logp, const int *targets,
                                int N, int V, float eps_ls, int pad_id);
/* The positions that count among targets (N): those whose target is not
 * pad_id (each asserted to be in [0, V)), the n_tokens of the mean loss. */
int smoothed_xent_tokens(const int *targets, int N, int V, int pad_id);
/* smoothed_xent_backward_ref's work on rows [0, N) of a batch whose mean is
 * over n_tokens counted positions in all (n_tokens > 0): the _ref runs it on
 * the whole batch, its tuned twin on each thread's rows. */
void smoothed_xent_backward_rows(float *dlogits, const float *logp, const int *targets,
                                 int N, int V, float eps_ls, int pad_id, int n_tokens);

#endif
