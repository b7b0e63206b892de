/* attention.h - masks and scaled dot-product attention, the plain version.
 *
 *   Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V          Eq. (1), Sec. 3.2.1
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
 *
 * The tuned twins, sdpa_forward / sdpa_backward (same signatures, what the
 * library calls), are in fast/attention_fast.h; multi-head attention
 * (Sec. 3.2.2) is ref/multihead_ref.h (plain) and layers/multihead.h.
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

/* ---- scaled dot-product attention (Eq. 1), as plain loops -----------------
 * One step of Eq. (1) per loop (tests/check_attention.c checks the fast
 * sdpa_forward / sdpa_backward against these).
 * out (B,h,Tq,d_v); weights (B,h,Tq,Tk) saved for backward and heatmaps;
 * Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v); mask (B,Tq,Tk) or NULL. */
void sdpa_forward_ref(float *out, float *weights,
                      const float *Q, const float *K, const float *V, const uint8_t *mask,
                      int B, int h, int Tq, int Tk, int d_k, int d_v);
/* dQ, dK, dV += ... (any of them may be NULL: not wanted); scratch
 * (B,h,Tq,Tk) is work space (the gradient of the scores); weights are what
 * the forward saved. No mask is needed: blocked pairs have weight exactly 0,
 * so blocked keys and values get exactly zero gradient from them. */
void sdpa_backward_ref(float *dQ, float *dK, float *dV, float *scratch,
                       const float *dout, const float *weights,
                       const float *Q, const float *K, const float *V,
                       int B, int h, int Tq, int Tk, int d_k, int d_v);

#endif
