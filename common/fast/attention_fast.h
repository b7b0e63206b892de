/* attention_fast.h - scaled dot-product attention (Eq. 1), tuned: one pass
 * per query row, vector instructions, heads shared among threads.
 *
 * Plain twin: sdpa_forward_ref / sdpa_backward_ref (ref/attention.c), with
 * the same signatures and results up to rounding; the Twins case of
 * tests/check_attention.c (test_sdpa_twins) checks that the pairs agree.
 * Sizes, masks and the fully-masked-row rule are as ref/attention.h says.
 * Nothing here allocates; backward functions ACCUMULATE into gradients.
 */
#ifndef ATTENTION_FAST_H
#define ATTENTION_FAST_H

#include <stddef.h>
#include <stdint.h>

/* out (B,h,Tq,d_v); weights (B,h,Tq,Tk) saved for backward and heatmaps;
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

/* ---- heads where they lie ----------------------------------------------------
 * The same two functions for heads laid out in memory any regular way:
 * element (t, c) of head hh of sequence b is at base[b*bs + hh*hs + t*rs + c].
 * Multi-head attention (layers/multihead.c) reads its heads straight from
 * the (B,T,h*d) projections with these, with no copy into (B,h,T,d) blocks. */
typedef struct {
    size_t bs, hs, rs;   /* strides of sequence, head and row, in floats */
} HeadLayout;

/* (B,h,T,d): each head's (T,d) block is contiguous */
static inline HeadLayout head_layout_split(int h, int T, int d) {
    HeadLayout l = {(size_t)h * T * d, (size_t)T * d, (size_t)d};
    return l;
}
/* (B,T,h*d): head hh is columns hh*d .. hh*d+d-1 of every row */
static inline HeadLayout head_layout_merged(int h, int T, int d) {
    HeadLayout l = {(size_t)T * h * d, (size_t)d, (size_t)h * d};
    return l;
}

/* sdpa_forward with each tensor in its own layout; weights (B,h,Tq,Tk) and
 * mask (B,Tq,Tk) as there. */
void sdpa_forward_laid(float *out, HeadLayout lo, float *weights,
                       const float *Q, HeadLayout lq, const float *K, HeadLayout lk,
                       const float *V, HeadLayout lv, const uint8_t *mask,
                       int B, int h, int Tq, int Tk, int d_k, int d_v);
/* sdpa_backward likewise; accumulate = 1: dQ, dK, dV +=, as sdpa_backward;
 * 0: overwritten (every element belongs to exactly one head, which writes it
 * whole, so the caller need not zero them first). */
void sdpa_backward_laid(float *dQ, HeadLayout ldq, float *dK, HeadLayout ldk,
                        float *dV, HeadLayout ldv, float *scratch,
                        const float *dout, HeadLayout ldo, const float *weights,
                        const float *Q, HeadLayout lq, const float *K, HeadLayout lk,
                        const float *V, HeadLayout lv,
                        int B, int h, int Tq, int Tk, int d_k, int d_v, int accumulate);

#endif
