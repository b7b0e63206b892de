/* lm_ops.h - the operations a 2026 language model swaps in for the paper's,
 * each a plain forward/backward pair: RMSNorm for LayerNorm, rotary position
 * embedding (RoPE) for the added sinusoids, SwiGLU's gate for ReLU, and
 * grouped-query attention (GQA, MQA) for multi-head attention.
 *
 * Conventions as in ops.h and nn.h: outputs first, then inputs, then sizes;
 * every pointer's shape in a comment; nothing allocates; backward functions
 * ACCUMULATE (+=) into gradients the caller zeroed. N is a count of rows
 * (B*T). The FFNs built from these (the SwiGLU FFN, the mixture of experts)
 * are matrix multiplies and live in layers/lm_ffn.h.
 */
#ifndef LM_OPS_H
#define LM_OPS_H

#include <stddef.h>
#include <stdint.h>

/* ---- RMSNorm (Zhang & Sennrich 2019, Eq. 4) --------------------------------
 *   y = x / RMS(x) * g,   RMS(x) = sqrt(mean_c(x_c^2) + eps)
 * LayerNorm without the mean and without beta: one statistic per row.
 * out (N,C), rstd (N) = 1/RMS(x) saved for backward, inp (N,C), gain (C).
 * out may equal inp. */
#define RMSNORM_EPS 1e-5f
void rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *gain, int N, int C);
/* dinp (N,C) +=, dgain (C) += ; either may be NULL. */
void rmsnorm_backward_ref(float *dinp, float *dgain, const float *dout, const float *inp,
                          const float *rstd, const float *gain, int N, int C);

/* ---- rotary position embedding, RoPE (Su et al. 2021, Sec. 3.4.2) -----------
 * Each (even, odd) pair (x_2i, x_2i+1) of every head is rotated by the angle
 *   theta = pos * base^(-2i/d)        (i = 0 .. d/2-1, base 10000)
 * the interleaved convention of the paper and of chapter 05's sinusoids.
 * out (N,H*d), inp (N,H*d): N rows (tokens), each H heads of width d (the
 * layout x W_Q gives, before any head split); pos (N) each row's position
 * (t for a full sequence; offset + t for a KV-cached step). d must be even.
 * out may equal inp. Queries and keys both go through it; values do not. */
#define ROPE_BASE 10000.0
void rope_forward_ref(float *out, const float *inp, const int *pos, int N, int H, int d, double base);
/* dinp (N,H*d) += R(pos)^T dout: the rotation by -theta (its inverse). */
void rope_backward_ref(float *dinp, const float *dout, const int *pos, int N, int H, int d, double base);

/* ---- SwiGLU's gate (Shazeer 2020, Sec. 2) -----------------------------------
 *   out = silu(a) * b,   silu(a) = a * sigmoid(a)
 * the elementwise part of FFN_SwiGLU(x) = (silu(x W1) * (x W3)) W2.
 * out (n), a (n) = x W1, b (n) = x W3. */
void swiglu_forward_ref(float *out, const float *a, const float *b, size_t n);
/* da (n) +=, db (n) += ; either may be NULL. */
void swiglu_backward_ref(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);

/* ---- grouped-query attention (Ainslie et al. 2023; MQA: Shazeer 2019) -------
 * h query heads share kv_heads key/value heads: query head i reads kv head
 * i / (h / kv_heads). kv_heads = h is the paper's multi-head attention,
 * kv_heads = 1 multi-query attention. Each head is Eq. (1), computed by
 * sdpa_forward_ref (ref/attention.h), the one definition of attention.
 * out (B,h,Tq,d_v), weights (B,h,Tq,Tk) saved for backward and heatmaps,
 * Q (B,h,Tq,d_k), K (B,kv_heads,Tk,d_k), V (B,kv_heads,Tk,d_v),
 * mask (B,Tq,Tk) or NULL (lm_mask_causal makes the causal one). A fully
 * masked query row gets zero weights and a zero output (attention.h).
 * h % kv_heads must be 0: gqa_check says so in words, this asserts. */
void gqa_forward_ref(float *out, float *weights, const float *Q, const float *K, const float *V,
                     const uint8_t *mask, int B, int h, int kv_heads, int Tq, int Tk, int d_k, int d_v);
/* dQ (B,h,Tq,d_k) +=, dK (B,kv_heads,Tk,d_k) +=, dV (B,kv_heads,Tk,d_v) +=
 * (dK and dV summed over the h/kv_heads query heads that share them; any
 * may be NULL); scratch (Tq,Tk) is work space. */
void gqa_backward_ref(float *dQ, float *dK, float *dV, float *scratch, const float *dout,
                      const float *weights, const float *Q, const float *K, const float *V,
                      int B, int h, int kv_heads, int Tq, int Tk, int d_k, int d_v);
/* 0 when h query heads can share kv_heads key/value heads; otherwise 1 and
 * a sentence for the user in err (errlen bytes). */
int gqa_check(int h, int kv_heads, char *err, size_t errlen);
/* Bytes the KV cache holds per token of context, float32: a key (d_k) and a
 * value (d_v) per kv head per layer, N layers: with d_v = d_k that is
 * 2 * N * kv_heads * d_k * 4. GQA shrinks it h/kv_heads-fold. */
size_t gqa_kv_cache_bytes_per_token(int N, int kv_heads, int d_k, int d_v);
/* mask (B,Tq,Tk): the causal mask for Tq new queries after Tk - Tq cached
 * positions, so query i sits at position Tk - Tq + i and sees keys
 * 0 .. Tk - Tq + i (Tq = Tk: mask_causal; Tq = 1: every key). Tq <= Tk. */
void lm_mask_causal(uint8_t *mask, int B, int Tq, int Tk);

#endif
