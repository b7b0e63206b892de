/* attention.h - scaled dot-product attention and multi-head attention.
 *
 *   Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V          Eq. (1), Sec. 3.2.1
 *   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O            Sec. 3.2.2
 *       head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
 *
 * Sizes use the paper's letters: B batch, h heads, Tq query length, Tk key
 * length, d_k query/key width per head, d_v value width per head.
 * Masks are bytes (B, Tq, Tk), shared by all heads: 1 = may attend, 0 = blocked
 * (Sec. 3.2.3: blocked scores are set to -inf before the softmax). NULL = no mask.
 * A query row with every key blocked gets all-zero weights (and so a zero
 * output): there is nothing to attend to, and zeros keep NaN out of the model.
 *
 * Forward functions save what backward needs in caller-provided buffers;
 * nothing here allocates. Backward functions ACCUMULATE into gradients.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stddef.h>
#include <stdint.h>

/* ---- masks --------------------------------------------------------------- */
/* mask (B,Tq,Tk): 1 where key j <= query i (a decoder position cannot see later ones) */
void mask_causal(uint8_t *mask, int B, int Tq, int Tk);
/* mask (B,Tq,Tk): 1 where key j < key_len[b] (padding keys are blocked) */
void mask_padding(uint8_t *mask, const int *key_len, int B, int Tq, int Tk);
/* mask (B,Tq,Tk): 1 where key token != pad_id; keys (B,Tk) are token ids */
void mask_from_tokens(uint8_t *mask, const int *keys, int pad_id, int B, int Tq, int Tk);
/* out &= other, element-wise (combine causal and padding) */
void mask_and(uint8_t *out, const uint8_t *other, int n);

/* ---- scaled dot-product attention (Eq. 1) ---------------------------------
 * out (B,h,Tq,d_v); weights (B,h,Tq,Tk) saved for backward and heatmaps;
 * Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v); mask (B,Tq,Tk) or NULL. */
void sdpa_forward(float *out, float *weights,
                  const float *Q, const float *K, const float *V, const uint8_t *mask,
                  int B, int h, int Tq, int Tk, int d_k, int d_v);
/* dQ, dK, dV += ... (any of them may be NULL: not wanted); scratch
 * (B,h,Tq,Tk) is work space (the gradient of the scores); weights are what
 * sdpa_forward saved. No mask is needed: blocked pairs have weight exactly 0,
 * so blocked keys and values get exactly zero gradient from them. */
void sdpa_backward(float *dQ, float *dK, float *dV, float *scratch,
                   const float *dout, const float *weights,
                   const float *Q, const float *K, const float *V,
                   int B, int h, int Tq, int Tk, int d_k, int d_v);
/* The references: the same signatures and results, as plain loops, one per
 * step of Eq. (1) (tests/check_attention.c checks the two pairs agree).
 * sdpa_forward / sdpa_backward are what the library calls: one pass per
 * query row, vector instructions, heads shared among threads. */
void sdpa_forward_ref(float *out, float *weights,
                      const float *Q, const float *K, const float *V, const uint8_t *mask,
                      int B, int h, int Tq, int Tk, int d_k, int d_v);
void sdpa_backward_ref(float *dQ, float *dK, float *dV, float *scratch,
                       const float *dout, const float *weights,
                       const float *Q, const float *K, const float *V,
                       int B, int h, int Tq, int Tk, int d_k, int d_v);

/* ---- heads: split and merge -----------------------------------------------
 * split: out (B,h,T,d) <- inp (B,T,h*d)   ("[batch, seq, d_model] -> [batch, heads, seq, d_head]")
 * merge: out (B,T,h*d) <- inp (B,h,T,d)   (Concat(head_1, ..., head_h))
 * Each is the other's backward. */
void heads_split(float *out, const float *inp, int B, int T, int h, int d);
void heads_merge(float *out, const float *inp, int B, int T, int h, int d);

/* ---- multi-head attention (Sec. 3.2.2) ------------------------------------
 * Parameters, as in the paper (no biases): W_Q (d_model, h*d_k),
 * W_K (d_model, h*d_k), W_V (d_model, h*d_v), W_O (h*d_v, d_model). */
typedef struct {
    float *w_q, *w_k, *w_v, *w_o;
} MhaParams;

/* Activations saved by the forward pass for the backward pass. All point
 * into one caller-owned buffer laid out by mha_acts_layout(). Head hh of q,
 * k, v and concat is columns hh*d .. hh*d+d-1 of each row: the heads are
 * read where the projections put them, never copied into (B,h,T,d) blocks. */
typedef struct {
    float *q;        /* (B,Tq,h*d_k)  x_q W_Q                           */
    float *k;        /* (B,Tk,h*d_k)  x_kv W_K                          */
    float *v;        /* (B,Tk,h*d_v)  x_kv W_V                          */
    float *weights;  /* (B,h,Tq,Tk)   softmax(q k^T / sqrt d_k), per head */
    float *concat;   /* (B,Tq,h*d_v)  Concat(head_1..head_h) = weights @ v */
} MhaActs;

/* Number of floats MhaActs needs for these sizes. */
size_t mha_acts_size(int B, int Tq, int Tk, int h, int d_k, int d_v);
/* Points every field of a into buf (which holds mha_acts_size() floats). */
void mha_acts_layout(MhaActs *a, float *buf, int B, int Tq, int Tk, int h, int d_k, int d_v);
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
