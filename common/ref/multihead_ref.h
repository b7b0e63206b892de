/* multihead_ref.h - multi-head attention (Sec. 3.2.2), the plain version,
 * and the types its tuned twin shares.
 *
 *   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O
 *       head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)          (Eq. 1 per head)
 *
 * Sizes use the paper's letters: B batch, Tq query length, Tk key length,
 * d_model the model width, h heads, d_k and d_v the widths of one head.
 * mha_forward_ref / mha_backward_ref do the section's steps one call each:
 * project, split into heads, Eq. (1) per head (sdpa_forward_ref), concat,
 * W^O. Their tuned twins mha_forward / mha_backward (layers/multihead.h)
 * take the same parameters and save the same five tensors (there gathered in
 * the layer's MhaActs, here passed one by one); tests/check_multihead.c
 * checks that the pairs agree.
 * Nothing here allocates; backward functions ACCUMULATE into gradients.
 */
#ifndef MULTIHEAD_REF_H
#define MULTIHEAD_REF_H

#include <stddef.h>
#include <stdint.h>

/* Parameters, as in the paper (no biases): W_Q (d_model, h*d_k),
 * W_K (d_model, h*d_k), W_V (d_model, h*d_v), W_O (h*d_v, d_model).
 * The paper's W_i^Q is column block i (columns i*d_k .. i*d_k+d_k-1) of W_Q,
 * so x W_Q projects for all h heads at once; likewise W_K, W_V. */
typedef struct {
    float *w_q, *w_k, *w_v, *w_o;
} MhaParams;

/* ---- heads: split and merge -----------------------------------------------
 * split: out (B,h,T,d) <- inp (B,T,h*d)   ("[batch, seq, d_model] -> [batch, heads, seq, d_head]")
 * merge: out (B,T,h*d) <- inp (B,h,T,d)   (Concat(head_1, ..., head_h))
 * Each is the other's backward. */
void heads_split(float *out, const float *inp, int B, int T, int h, int d);
void heads_merge(float *out, const float *inp, int B, int T, int h, int d);

/* ---- multi-head attention, one step per call ------------------------------- */
/* Floats of scratch mha_forward_ref and mha_backward_ref need: the heads
 * split into (B,h,T,d) blocks and their gradients. */
size_t mha_ref_scratch_size(int B, int Tq, int Tk, int h, int d_k, int d_v);

/* out (B,Tq,d_model) = MultiHead(x_q, x_kv, x_kv), saving for backward
 *   q (B,Tq,h*d_k) = x_q W_Q, k (B,Tk,h*d_k) = x_kv W_K, v (B,Tk,h*d_v) = x_kv W_V,
 *   weights (B,h,Tq,Tk) = softmax(q k^T / sqrt d_k) per head,
 *   concat (B,Tq,h*d_v) = Concat(head_1..head_h)
 * (head hh: columns hh*d .. hh*d+d-1 of a row, as the projections give it).
 * x_q (B,Tq,d_model) gives the queries; x_kv (B,Tk,d_model) the keys and
 * values (x_kv == x_q for self-attention; the encoder's output for the
 * decoder's cross-attention). mask (B,Tq,Tk) or NULL. scratch:
 * mha_ref_scratch_size() floats (contents on entry do not matter). */
void mha_forward_ref(float *out, float *q, float *k, float *v, float *weights, float *concat, float *scratch,
                     const MhaParams *p, const float *x_q, const float *x_kv, const uint8_t *mask,
                     int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v);
/* dx_q (B,Tq,d_model) +=, dx_kv (B,Tk,d_model) +=, and the weight gradients
 * in g +=, from dout (B,Tq,d_model) and the five tensors the forward saved.
 * For self-attention pass the same pointer for dx_q and dx_kv (both
 * contributions add up); either may be NULL. scratch as for the forward. */
void mha_backward_ref(float *dx_q, float *dx_kv, MhaParams *g, float *scratch, const float *dout,
                      const float *q, const float *k, const float *v, const float *weights, const float *concat,
                      const MhaParams *p, const float *x_q, const float *x_kv,
                      int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v);

#endif
