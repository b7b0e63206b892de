/* multihead_ref.c - multi-head attention (Sec. 3.2.2), the plain version:
 * the section's steps one call each, forward and backward side by side.
 *
 * The tuned twin, mha_forward / mha_backward (layers/multihead.c), computes
 * the same with gemm() and reads each head where the projection put it;
 * tests/check_multihead.c checks the pairs agree. Nothing here allocates.
 */
#include "ref/multihead_ref.h"
#include "ref/attention.h"
#include "ref/ops.h"

#include <stddef.h>
#include <string.h>

/* ---- heads: split and merge ------------------------------------------------
 * The projection gives one row of h*d numbers per position; head hh owns the
 * columns hh*d .. hh*d+d-1. Splitting moves the head axis in front of the
 * position axis so each head's (T,d) block is contiguous. */

void heads_split(float *out, const float *inp, int B, int T, int h, int d) {
    /* out (B,h,T,d) <- inp (B,T,h*d): one contiguous run of d floats per
     * (b, t, head), moved whole */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < h; hh++)
                memcpy(out + (((size_t)b * h + hh) * T + t) * d, inp + (((size_t)b * T + t) * h + hh) * d,
                       (size_t)d * sizeof(float));
}

void heads_merge(float *out, const float *inp, int B, int T, int h, int d) {
    /* out (B,T,h*d) <- inp (B,h,T,d): Concat(head_1, ..., head_h) per position */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < h; hh++)
                memcpy(out + (((size_t)b * T + t) * h + hh) * d, inp + (((size_t)b * h + hh) * T + t) * d,
                       (size_t)d * sizeof(float));
}

/* ---- multi-head attention, one step per call ------------------------------- */

/* out (M,N) = a (M,K) @ b (K,N), the plain triple loop */
static void matmul_ref(float *out, const float *a, const float *b, int M, int K, int N) {
    gemm_ref(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, out, N);
}

/* the chain rule through out = a @ b: da (M,K) += dout (M,N) @ b^T and
 * db (K,N) += a^T @ dout; either may be NULL (not wanted) */
static void matmul_backward_ref(float *da, float *db, const float *dout, const float *a, const float *b,
                                int M, int K, int N) {
    if (da) gemm_ref(0, 1, M, K, N, 1.0f, dout, N, b, N, 1.0f, da, K);
    if (db) gemm_ref(1, 0, K, N, M, 1.0f, a, K, dout, N, 1.0f, db, N);
}

/* The scratch, carved into the heads as (B,h,T,d) blocks and the gradients.
 * The forward uses qh, kh, vh, oh; the backward all of them, with the
 * gradient of the heads' outputs in oh. */
typedef struct {
    float *qh, *kh, *vh, *oh;       /* (B,h,Tq,d_k), (B,h,Tk,d_k), (B,h,Tk,d_v), (B,h,Tq,d_v) */
    float *dqh, *dkh, *dvh, *ds;    /* the gradients of qh, kh, vh; ds (B,h,Tq,Tk)           */
    float *dq, *dk, *dv, *dconcat;  /* (B,Tq,h*d_k), (B,Tk,h*d_k), (B,Tk,h*d_v), (B,Tq,h*d_v) */
} RefScratch;

/* Points s's fields into buf (when buf is not NULL); returns the floats used. */
static size_t ref_scratch(RefScratch *s, float *buf, int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t nq = (size_t)B * Tq * h * d_k, nk = (size_t)B * Tk * h * d_k, nv = (size_t)B * Tk * h * d_v;
    size_t no = (size_t)B * Tq * h * d_v, nw = (size_t)B * h * Tq * Tk;
    float **field[] = {&s->qh, &s->kh, &s->vh, &s->oh, &s->dqh, &s->dkh, &s->dvh, &s->ds,
                       &s->dq, &s->dk, &s->dv, &s->dconcat};
    const size_t size[] = {nq, nk, nv, no, nq, nk, nv, nw, nq, nk, nv, no};
    size_t at = 0;
    for (size_t i = 0; i < sizeof size / sizeof size[0]; i++) {
        if (buf) *field[i] = buf + at;
        at += size[i];
    }
    return at;
}

size_t mha_ref_scratch_size(int B, int Tq, int Tk, int h, int d_k, int d_v) {
    RefScratch s;
    return ref_scratch(&s, NULL, B, Tq, Tk, h, d_k, d_v);
}

void mha_forward_ref(float *out, float *q, float *k, float *v, float *weights, float *concat, float *scratch,
                     const MhaParams *p, const float *x_q, const float *x_kv, const uint8_t *mask,
                     int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v) {
    /* out (B,Tq,d_model); x_q (B,Tq,d_model); x_kv (B,Tk,d_model); mask (B,Tq,Tk) or NULL */
    RefScratch s;
    ref_scratch(&s, scratch, B, Tq, Tk, h, d_k, d_v);
    /* Q W_i^Q, K W_i^K, V W_i^V for every head i at once (W_i^Q is column
     * block i of W_Q) */
    matmul_ref(q, x_q, p->w_q, B * Tq, d_model, h * d_k);     /* q (B,Tq,h*d_k) */
    matmul_ref(k, x_kv, p->w_k, B * Tk, d_model, h * d_k);    /* k (B,Tk,h*d_k) */
    matmul_ref(v, x_kv, p->w_v, B * Tk, d_model, h * d_v);    /* v (B,Tk,h*d_v) */
    /* split into h heads, each a contiguous (T,d) block */
    heads_split(s.qh, q, B, Tq, h, d_k);                      /* qh (B,h,Tq,d_k) */
    heads_split(s.kh, k, B, Tk, h, d_k);                      /* kh (B,h,Tk,d_k) */
    heads_split(s.vh, v, B, Tk, h, d_v);                      /* vh (B,h,Tk,d_v) */
    /* head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V): Eq. (1), head by head */
    sdpa_forward_ref(s.oh, weights, s.qh, s.kh, s.vh, mask, B, h, Tq, Tk, d_k, d_v);
    /* Concat(head_1, ..., head_h) */
    heads_merge(concat, s.oh, B, Tq, h, d_v);                 /* concat (B,Tq,h*d_v) */
    /* ... W^O */
    matmul_ref(out, concat, p->w_o, B * Tq, h * d_v, d_model);
}

void mha_backward_ref(float *dx_q, float *dx_kv, MhaParams *g, float *scratch, const float *dout,
                      const float *q, const float *k, const float *v, const float *weights, const float *concat,
                      const MhaParams *p, const float *x_q, const float *x_kv,
                      int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v) {
    /* the forward's steps in reverse, each the chain rule through one line */
    RefScratch s;
    ref_scratch(&s, scratch, B, Tq, Tk, h, d_k, d_v);
    size_t nq = (size_t)B * Tq * h * d_k, nk = (size_t)B * Tk * h * d_k, nv = (size_t)B * Tk * h * d_v;
    /* out = concat W_O  ->  dconcat = dout W_O^T,  dW_O += concat^T dout */
    fill(s.dconcat, 0.0f, (size_t)B * Tq * h * d_v);
    matmul_backward_ref(s.dconcat, g->w_o, dout, concat, p->w_o, B * Tq, h * d_v, d_model);
    /* concat = Concat(heads)  ->  d(head_i) = head i's columns of dconcat */
    heads_split(s.oh, s.dconcat, B, Tq, h, d_v);                 /* d(head) (B,h,Tq,d_v) */
    /* head_i = Attention(q_i, k_i, v_i)  ->  Eq. (1)'s backward, head by head */
    heads_split(s.qh, q, B, Tq, h, d_k);
    heads_split(s.kh, k, B, Tk, h, d_k);
    heads_split(s.vh, v, B, Tk, h, d_v);
    fill(s.dqh, 0.0f, nq);
    fill(s.dkh, 0.0f, nk);
    fill(s.dvh, 0.0f, nv);
    sdpa_backward_ref(s.dqh, s.dkh, s.dvh, s.ds, s.oh, weights, s.qh, s.kh, s.vh, B, h, Tq, Tk, d_k, d_v);
    /* qh = split(q)  ->  dq = merge(dqh); likewise k, v */
    heads_merge(s.dq, s.dqh, B, Tq, h, d_k);
    heads_merge(s.dk, s.dkh, B, Tk, h, d_k);
    heads_merge(s.dv, s.dvh, B, Tk, h, d_v);
    /* q = x_q W_Q, k = x_kv W_K, v = x_kv W_V  ->  dx += d(q|k|v) W^T,
     * dW += x^T d(q|k|v); k and v both add into dx_kv */
    matmul_backward_ref(dx_q, g->w_q, s.dq, x_q, p->w_q, B * Tq, d_model, h * d_k);
    matmul_backward_ref(dx_kv, g->w_k, s.dk, x_kv, p->w_k, B * Tk, d_model, h * d_k);
    matmul_backward_ref(dx_kv, g->w_v, s.dv, x_kv, p->w_v, B * Tk, d_model, h * d_v);
}
