/* attention.c - scaled dot-product attention (Eq. 1) and multi-head
 * attention (Sec. 3.2.2), forward and backward side by side.
 *
 * Every matrix product goes through gemm() / matmul_forward() from ops.h,
 * so the fast kernel (or OpenBLAS) does the heavy lifting while the loops
 * here stay the shape of the math. Nothing in this file allocates: the
 * caller hands in every buffer (see mha_acts_size, mha_scratch_size).
 */
#include "attention.h"
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

/* ---- masks ---------------------------------------------------------------
 * A mask is one byte per (query, key) pair: 1 = may attend, 0 = blocked.
 * The same mask serves every head (Sec. 3.2.3 masks positions, not heads). */

void mask_causal(uint8_t *mask, int B, int Tq, int Tk) {
    /* mask (B,Tq,Tk). Sec. 3.2.3: "prevent leftward information flow" -
     * query i may look at keys 0..i (itself included), never at i+1.. . */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++)
                mask[((size_t)b * Tq + i) * Tk + j] = (uint8_t)(j <= i);
}

void mask_padding(uint8_t *mask, const int *key_len, int B, int Tq, int Tk) {
    /* mask (B,Tq,Tk); key_len (B): sequence b has key_len[b] real keys and
     * Tk - key_len[b] padding keys at the end, which nobody may attend to. */
    for (int b = 0; b < B; b++) {
        assert(key_len[b] >= 0 && key_len[b] <= Tk);
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++)
                mask[((size_t)b * Tq + i) * Tk + j] = (uint8_t)(j < key_len[b]);
    }
}

void mask_from_tokens(uint8_t *mask, const int *keys, int pad_id, int B, int Tq, int Tk) {
    /* mask (B,Tq,Tk); keys (B,Tk) token ids: a key is blocked where it is
     * the padding token, wherever the padding sits. */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++)
                mask[((size_t)b * Tq + i) * Tk + j] = (uint8_t)(keys[(size_t)b * Tk + j] != pad_id);
}

void mask_and(uint8_t *out, const uint8_t *other, int n) {
    /* out (n) &= other (n): a pair may attend only if both masks allow it
     * (the decoder's self-attention uses causal AND padding). */
    for (int i = 0; i < n; i++) out[i] = (uint8_t)(out[i] && other[i]);
}

/* ---- scaled dot-product attention (Eq. 1) --------------------------------- */

void sdpa_forward(float *out, float *weights,
                  const float *Q, const float *K, const float *V, const uint8_t *mask,
                  int B, int h, int Tq, int Tk, int d_k, int d_v) {
    /* out (B,h,Tq,d_v), weights (B,h,Tq,Tk),
     * Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v), mask (B,Tq,Tk) or NULL */
    assert(B > 0 && h > 0 && Tq > 0 && Tk > 0 && d_k > 0 && d_v > 0);
    /* Why 1/sqrt(d_k) (Sec. 3.2.1): with unit-variance q and k, q.k has
     * variance d_k; large scores push softmax into a corner where its
     * gradient vanishes. Dividing by sqrt(d_k) brings the variance back to 1. */
    const float scale = 1.0f / sqrtf((float)d_k);
    for (int b = 0; b < B; b++) {
        for (int hh = 0; hh < h; hh++) {
            size_t bh = (size_t)b * h + hh;
            const float *q = Q + bh * Tq * d_k;        /* q (Tq,d_k)  */
            const float *k = K + bh * Tk * d_k;        /* k (Tk,d_k)  */
            const float *v = V + bh * Tk * d_v;        /* v (Tk,d_v)  */
            float *w = weights + bh * Tq * Tk;         /* w (Tq,Tk)   */
            float *o = out + bh * Tq * d_v;            /* o (Tq,d_v)  */
            const uint8_t *m = mask ? mask + (size_t)b * Tq * Tk : NULL;   /* m (Tq,Tk) */

            /* scores = q k^T / sqrt(d_k), written straight into w */
            gemm(0, 1, Tq, Tk, d_k, scale, q, d_k, k, d_k, 0.0f, w, Tk);
            /* Sec. 3.2.3: blocked pairs get -inf, so exp() makes their weight
             * exactly 0 (not just small) */
            if (m)
                for (int i = 0; i < Tq * Tk; i++)
                    if (!m[i]) w[i] = -INFINITY;
            /* weights = softmax(scores) row by row, in place; a row with
             * every key blocked comes out all zeros (see ops.h) */
            softmax_forward(w, w, Tq, Tk);
            /* out = weights v: each output row is a weighted mix of v's rows */
            gemm(0, 0, Tq, d_v, Tk, 1.0f, w, Tk, v, d_v, 0.0f, o, d_v);
        }
    }
}

void sdpa_backward(float *dQ, float *dK, float *dV, float *scratch,
                   const float *dout, const float *weights,
                   const float *Q, const float *K, const float *V,
                   int B, int h, int Tq, int Tk, int d_k, int d_v) {
    /* dQ (B,h,Tq,d_k) +=, dK (B,h,Tk,d_k) +=, dV (B,h,Tk,d_v) += (any may be NULL);
     * scratch (B,h,Tq,Tk); dout (B,h,Tq,d_v); weights (B,h,Tq,Tk) from forward;
     * Q, K, V as in sdpa_forward.
     * The mask is not needed: it lives on in weights, which are exactly 0 on
     * every blocked pair, so no gradient reaches a blocked key or value. */
    const float scale = 1.0f / sqrtf((float)d_k);
    for (int b = 0; b < B; b++) {
        for (int hh = 0; hh < h; hh++) {
            size_t bh = (size_t)b * h + hh;
            const float *q = Q + bh * Tq * d_k;        /* q (Tq,d_k)   */
            const float *k = K + bh * Tk * d_k;        /* k (Tk,d_k)   */
            const float *v = V + bh * Tk * d_v;        /* v (Tk,d_v)   */
            const float *w = weights + bh * Tq * Tk;   /* w (Tq,Tk)    */
            const float *dO = dout + bh * Tq * d_v;    /* dO (Tq,d_v)  */
            float *ds = scratch + bh * Tq * Tk;        /* ds (Tq,Tk)   */

            /* forward: o = w v
             *   dw = dO v^T  (into ds),   dv += w^T dO */
            gemm(0, 1, Tq, Tk, d_v, 1.0f, dO, d_v, v, d_v, 0.0f, ds, Tk);
            if (dV) gemm(1, 0, Tk, d_v, Tq, 1.0f, w, Tk, dO, d_v, 1.0f, dV + bh * Tk * d_v, d_v);

            /* forward: w = softmax(scores), row by row
             *   ds_ij = w_ij (dw_ij - sum_l dw_il w_il)
             * done in place over dw; where w_ij = 0 (blocked) ds_ij = 0. */
            for (int i = 0; i < Tq; i++) {
                const float *wi = w + (size_t)i * Tk;
                float *dsi = ds + (size_t)i * Tk;
                float s = 0.0f;
                for (int j = 0; j < Tk; j++) s += dsi[j] * wi[j];
                for (int j = 0; j < Tk; j++) dsi[j] = wi[j] * (dsi[j] - s);
            }

            /* forward: scores = scale * q k^T   (masking only replaced some
             * scores by -inf constants, whose ds is already 0)
             *   dq += scale * ds k,   dk += scale * ds^T q */
            if (dQ) gemm(0, 0, Tq, d_k, Tk, scale, ds, Tk, k, d_k, 1.0f, dQ + bh * Tq * d_k, d_k);
            if (dK) gemm(1, 0, Tk, d_k, Tq, scale, ds, Tk, q, d_k, 1.0f, dK + bh * Tk * d_k, d_k);
        }
    }
}

/* ---- heads: split and merge ------------------------------------------------
 * The projection gives one row of h*d numbers per position; head hh owns the
 * columns hh*d .. hh*d+d-1. Splitting moves the head axis in front of the
 * position axis so each head's (T,d) block is contiguous for gemm. */

void heads_split(float *out, const float *inp, int B, int T, int h, int d) {
    /* out (B,h,T,d) <- inp (B,T,h*d) */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < h; hh++)
                for (int i = 0; i < d; i++)
                    out[(((size_t)b * h + hh) * T + t) * d + i] = inp[(((size_t)b * T + t) * h + hh) * d + i];
}

void heads_merge(float *out, const float *inp, int B, int T, int h, int d) {
    /* out (B,T,h*d) <- inp (B,h,T,d): Concat(head_1, ..., head_h) per position */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < h; hh++)
                for (int i = 0; i < d; i++)
                    out[(((size_t)b * T + t) * h + hh) * d + i] = inp[(((size_t)b * h + hh) * T + t) * d + i];
}

/* ---- multi-head attention (Sec. 3.2.2) ------------------------------------ */

size_t mha_acts_size(int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t q = (size_t)B * Tq * h * d_k, k = (size_t)B * Tk * h * d_k, v = (size_t)B * Tk * h * d_v;
    size_t w = (size_t)B * h * Tq * Tk, o = (size_t)B * h * Tq * d_v;
    /* q, k, v, then their split copies qh, kh, vh, then weights, oh, concat */
    return 2 * (q + k + v) + w + 2 * o;
}

void mha_acts_layout(MhaActs *a, float *buf, int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t q = (size_t)B * Tq * h * d_k, k = (size_t)B * Tk * h * d_k, v = (size_t)B * Tk * h * d_v;
    size_t w = (size_t)B * h * Tq * Tk, o = (size_t)B * h * Tq * d_v;
    float *p = buf;
    a->q = p;       p += q;
    a->k = p;       p += k;
    a->v = p;       p += v;
    a->qh = p;      p += q;
    a->kh = p;      p += k;
    a->vh = p;      p += v;
    a->weights = p; p += w;
    a->oh = p;      p += o;
    a->concat = p;  p += o;
    assert((size_t)(p - buf) == mha_acts_size(B, Tq, Tk, h, d_k, d_v));
}

size_t mha_scratch_size(int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t q = (size_t)B * Tq * h * d_k, k = (size_t)B * Tk * h * d_k, v = (size_t)B * Tk * h * d_v;
    size_t w = (size_t)B * h * Tq * Tk, o = (size_t)B * h * Tq * d_v;
    /* dconcat, doh, dscores, dqh, dkh, dvh, dq, dk, dv (see mha_backward) */
    return 2 * o + w + 2 * (q + k + v);
}

void mha_forward(float *out, MhaActs *a, const MhaParams *p,
                 const float *x_q, const float *x_kv, const uint8_t *mask,
                 int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v) {
    /* out (B,Tq,d_model); x_q (B,Tq,d_model); x_kv (B,Tk,d_model); mask (B,Tq,Tk) or NULL;
     * p->w_q (d_model,h*d_k), w_k (d_model,h*d_k), w_v (d_model,h*d_v), w_o (h*d_v,d_model) */
    /* project: Q W_i^Q for all heads at once (the h matrices W_i^Q sit side
     * by side as the column blocks of W_Q) */
    matmul_forward(a->q, x_q, p->w_q, B * Tq, d_model, h * d_k);    /* q (B,Tq,h*d_k) */
    matmul_forward(a->k, x_kv, p->w_k, B * Tk, d_model, h * d_k);   /* k (B,Tk,h*d_k) */
    matmul_forward(a->v, x_kv, p->w_v, B * Tk, d_model, h * d_v);   /* v (B,Tk,h*d_v) */
    /* split: [batch, seq, h*d] -> [batch, heads, seq, d] */
    heads_split(a->qh, a->q, B, Tq, h, d_k);
    heads_split(a->kh, a->k, B, Tk, h, d_k);
    heads_split(a->vh, a->v, B, Tk, h, d_v);
    /* head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), every head in one call */
    sdpa_forward(a->oh, a->weights, a->qh, a->kh, a->vh, mask, B, h, Tq, Tk, d_k, d_v);
    /* Concat(head_1, ..., head_h) */
    heads_merge(a->concat, a->oh, B, Tq, h, d_v);                   /* concat (B,Tq,h*d_v) */
    /* ... W^O */
    matmul_forward(out, a->concat, p->w_o, B * Tq, h * d_v, d_model);
}

void mha_backward(float *dx_q, float *dx_kv, MhaParams *g, float *scratch,
                  const float *dout, const MhaActs *a, const MhaParams *p,
                  const float *x_q, const float *x_kv,
                  int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v) {
    /* dx_q (B,Tq,d_model) +=, dx_kv (B,Tk,d_model) += (either may be NULL);
     * g: weight gradients +=, shapes as p; scratch: mha_scratch_size() floats;
     * dout (B,Tq,d_model); a: what mha_forward saved. */
    size_t nq = (size_t)B * Tq * h * d_k, nk = (size_t)B * Tk * h * d_k, nv = (size_t)B * Tk * h * d_v;
    size_t nw = (size_t)B * h * Tq * Tk, no = (size_t)B * h * Tq * d_v;
    float *dconcat = scratch;          /* (B,Tq,h*d_v) */
    float *doh = dconcat + no;         /* (B,h,Tq,d_v) */
    float *dscores = doh + no;         /* (B,h,Tq,Tk)  */
    float *dqh = dscores + nw;         /* (B,h,Tq,d_k) */
    float *dkh = dqh + nq;             /* (B,h,Tk,d_k) */
    float *dvh = dkh + nk;             /* (B,h,Tk,d_v) */
    float *dq = dvh + nv;              /* (B,Tq,h*d_k) */
    float *dk = dq + nq;               /* (B,Tk,h*d_k) */
    float *dv = dk + nk;               /* (B,Tk,h*d_v) */

    /* forward: out = concat W_O */
    fill(dconcat, 0.0f, no);
    matmul_backward(dconcat, g->w_o, dout, a->concat, p->w_o, B * Tq, h * d_v, d_model);
    /* forward: concat = merge(oh); the backward of a merge is a split */
    heads_split(doh, dconcat, B, Tq, h, d_v);
    /* forward: oh = sdpa(qh, kh, vh) */
    fill(dqh, 0.0f, nq);
    fill(dkh, 0.0f, nk);
    fill(dvh, 0.0f, nv);
    sdpa_backward(dqh, dkh, dvh, dscores, doh, a->weights, a->qh, a->kh, a->vh,
                  B, h, Tq, Tk, d_k, d_v);
    /* forward: qh = split(q) etc.; the backward of a split is a merge */
    heads_merge(dq, dqh, B, Tq, h, d_k);
    heads_merge(dk, dkh, B, Tk, h, d_k);
    heads_merge(dv, dvh, B, Tk, h, d_v);
    /* forward: q = x_q W_Q, k = x_kv W_K, v = x_kv W_V. For self-attention
     * dx_q == dx_kv and all three contributions add up in one buffer. */
    matmul_backward(dx_q, g->w_q, dq, x_q, p->w_q, B * Tq, d_model, h * d_k);
    matmul_backward(dx_kv, g->w_k, dk, x_kv, p->w_k, B * Tk, d_model, h * d_k);
    matmul_backward(dx_kv, g->w_v, dv, x_kv, p->w_v, B * Tk, d_model, h * d_v);
}
