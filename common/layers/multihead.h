/* multihead.h - multi-head attention (Sec. 3.2.2), the tuned, batched
 * version the model uses.
 *
 *   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O
 *       head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
 *
 * Plain twin: mha_forward_ref / mha_backward_ref (ref/multihead_ref.c), the
 * section's steps one call each; tests/check_multihead.c checks the pairs
 * agree. The parameters (MhaParams) and heads_split / heads_merge are the
 * plain version's, declared in ref/multihead_ref.h (included here); what the
 * layer saves for backward (MhaActs) and its layout are this layer's own.
 * Here the projections are gemm() calls and every head is read and written
 * where the projections put it, with no split or merge copies.
 * Nothing here allocates; mha_backward ACCUMULATES into gradients.
 */
#ifndef MULTIHEAD_H
#define MULTIHEAD_H

#include <stddef.h>
#include <stdint.h>
#include "ref/multihead_ref.h"

/* Activations saved by the forward pass for the backward pass. All point
 * into one caller-owned buffer laid out by mha_acts_layout(). Head hh of q,
 * k, v and concat is columns hh*d .. hh*d+d-1 of each row (the layout the
 * projections give). */
typedef struct {
    float *q;        /* (B,Tq,h*d_k)  x_q W_Q                           */
    float *k;        /* (B,Tk,h*d_k)  x_kv W_K                          */
    float *v;        /* (B,Tk,h*d_v)  x_kv W_V                          */
    float *weights;  /* (B,h,Tq,Tk)   softmax(q k^T / sqrt d_k), per head */
    float *concat;   /* (B,Tq,h*d_v)  Concat(head_1..head_h) = weights @ v */
} MhaActs;

/* Points every field of a into buf, one after the other in the order
 * above, and returns the floats they take; buf NULL only counts (the
 * fields are left NULL). The one place this layout is written. */
size_t mha_acts_layout(MhaActs *a, float *buf, int B, int Tq, int Tk, int h, int d_k, int d_v);
/* Floats mha_acts_layout takes for these sizes. */
size_t mha_acts_size(int B, int Tq, int Tk, int h, int d_k, int d_v);

/* Floats of scratch mha_backward needs. */
size_t mha_scratch_size(int B, int Tq, int Tk, int h, int d_k, int d_v);

/* out (B,Tq,d_model) = MultiHead(x_q, x_kv, x_kv).
 * x_q (B,Tq,d_model) gives the queries; x_kv (B,Tk,d_model) the keys and
 * values (x_kv == x_q for self-attention; the encoder's output for the
 * decoder's cross-attention). mask (B,Tq,Tk) or NULL. */
void mha_forward(float *out, MhaActs *a, const MhaParams *p,
                 const float *x_q, const float *x_kv, const uint8_t *mask,
                 int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v);
/* dx_q (B,Tq,d_model) +=, dx_kv (B,Tk,d_model) +=, and the weight gradients
 * in g +=. For self-attention pass the same pointer for dx_q and dx_kv (both
 * contributions add up); either may be NULL when that input needs no
 * gradient. scratch holds mha_scratch_size() floats (its contents on entry
 * do not matter). */
void mha_backward(float *dx_q, float *dx_kv, MhaParams *g, float *scratch,
                  const float *dout, const MhaActs *a, const MhaParams *p,
                  const float *x_q, const float *x_kv,
                  int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v);

#endif
