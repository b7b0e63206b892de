/* multihead.c - multi-head attention (Sec. 3.2.2), forward and backward,
 * as the model runs it.
 *
 * Plain twin: mha_forward_ref / mha_backward_ref (ref/multihead_ref.c);
 * tests/check_multihead.c checks the pairs agree. The projections
 * (x W_Q, ..., concat W_O) go through gemm() (fast/gemm.h), the fast kernel
 * (or OpenBLAS); the per-head products are sdpa_forward_laid /
 * sdpa_backward_laid (fast/attention_fast.c), which read each head where it
 * lies in the (B,T,h*d) projections, so there is no split into (B,h,T,d)
 * blocks and no merge back.
 * Nothing in this file allocates: the caller hands in every buffer (see
 * mha_acts_layout, mha_scratch_size).
 */
#include "layers/multihead.h"
#include "fast/attention_fast.h"
#include "fast/gemm.h"

#include <assert.h>
#include <stddef.h>

/* One product for gemm_many() (or gemm_one()), named for what it computes.
 * Row-major; C is (M,N) and K the dimension summed over:
 *   prod_ab(C, A, B)            C  = A B                A (M,K), B (K,N)
 *   prod_abt(C, A, B, beta)     C  = A B^T + beta C     A (M,K), B (N,K)
 *   prod_atb_add(C, A, B)       C += A^T B              A (K,M), B (K,N)   */
static GemmArgs prod_ab(float *C, const float *A, const float *B, int M, int K, int N) {
    return (GemmArgs){0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N};
}
static GemmArgs prod_abt(float *C, const float *A, const float *B, int M, int K, int N, float beta) {
    return (GemmArgs){0, 1, M, N, K, 1.0f, A, K, B, K, beta, C, N};
}
static GemmArgs prod_atb_add(float *C, const float *A, const float *B, int M, int K, int N) {
    return (GemmArgs){1, 0, M, N, K, 1.0f, A, M, B, N, 1.0f, C, N};
}
/* one product on its own: gemm() with g's arguments */
static void gemm_one(GemmArgs g) {
    gemm(g.transA, g.transB, g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
}

size_t mha_acts_layout(MhaActs *a, float *buf, int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t q = (size_t)B * Tq * h * d_k, k = (size_t)B * Tk * h * d_k, v = (size_t)B * Tk * h * d_v;
    size_t w = (size_t)B * h * Tq * Tk, o = (size_t)B * Tq * h * d_v;
    /* q, k, v, weights, concat: each once, in the layout the backward reads */
    float **field[] = {&a->q, &a->k, &a->v, &a->weights, &a->concat};
    const size_t size[] = {q, k, v, w, o};
    size_t at = 0;
    for (size_t i = 0; i < sizeof size / sizeof size[0]; i++) {
        *field[i] = buf ? buf + at : NULL;
        at += size[i];
    }
    return at;
}

size_t mha_acts_size(int B, int Tq, int Tk, int h, int d_k, int d_v) {
    MhaActs count;
    return mha_acts_layout(&count, NULL, B, Tq, Tk, h, d_k, d_v);
}

size_t mha_scratch_size(int B, int Tq, int Tk, int h, int d_k, int d_v) {
    size_t q = (size_t)B * Tq * h * d_k, k = (size_t)B * Tk * h * d_k, v = (size_t)B * Tk * h * d_v;
    size_t w = (size_t)B * h * Tq * Tk, o = (size_t)B * h * Tq * d_v;
    /* dconcat, dscores, dq, dk, dv (see mha_backward) */
    return o + w + q + k + v;
}

void mha_forward(float *out, MhaActs *a, const MhaParams *p,
                 const float *x_q, const float *x_kv, const uint8_t *mask,
                 int B, int Tq, int Tk, int d_model, int h, int d_k, int d_v) {
    /* out (B,Tq,d_model); x_q (B,Tq,d_model); x_kv (B,Tk,d_model); mask (B,Tq,Tk) or NULL;
     * p->w_q (d_model,h*d_k), w_k (d_model,h*d_k), w_v (d_model,h*d_v), w_o (h*d_v,d_model) */
    /* project: Q W_i^Q for all heads at once (the h matrices W_i^Q sit side
     * by side as the column blocks of W_Q); the three products in one job */
    int D = d_model, nk = h * d_k, nv = h * d_v;
    gemm_many(3, (GemmArgs[3]){
        prod_ab(a->q, x_q, p->w_q, B * Tq, D, nk),    /* q (B,Tq,h*d_k) = x_q W_Q  */
        prod_ab(a->k, x_kv, p->w_k, B * Tk, D, nk),   /* k (B,Tk,h*d_k) = x_kv W_K */
        prod_ab(a->v, x_kv, p->w_v, B * Tk, D, nv),   /* v (B,Tk,h*d_v) = x_kv W_V */
    });
    /* head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), every head in one call.
     * Head hh is columns hh*d .. hh*d+d-1 of q, k and v, and its output
     * goes to the same columns of concat: that IS Concat(head_1, ..., head_h),
     * so no split into (B,h,T,d) blocks and no merge back are needed. */
    HeadLayout lq = head_layout_merged(h, Tq, d_k), lk = head_layout_merged(h, Tk, d_k);
    HeadLayout lv = head_layout_merged(h, Tk, d_v), lo = head_layout_merged(h, Tq, d_v);
    sdpa_forward_laid(a->concat, lo, a->weights, a->q, lq, a->k, lk, a->v, lv, mask,
                      B, h, Tq, Tk, d_k, d_v);                      /* concat (B,Tq,h*d_v) */
    /* ... W^O */
    gemm_one(prod_ab(out, a->concat, p->w_o, B * Tq, nv, D));
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
    float *dscores = dconcat + no;     /* (B,h,Tq,Tk)  */
    float *dq = dscores + nw;          /* (B,Tq,h*d_k) */
    float *dk = dq + nq;               /* (B,Tk,h*d_k) */
    float *dv = dk + nk;               /* (B,Tk,h*d_v) */
    assert((size_t)(dv + nv - scratch) <= mha_scratch_size(B, Tq, Tk, h, d_k, d_v));

    /* forward: out = concat W_O
     *   dconcat = dout W_O^T (written, beta = 0: no need to zero it first),
     *   dW_O += concat^T dout */
    int D = d_model, wk = h * d_k, wv = h * d_v;   /* widths of q|k and v */
    gemm_many(2, (GemmArgs[2]){
        prod_abt(dconcat, dout, p->w_o, B * Tq, D, wv, 0.0f),
        prod_atb_add(g->w_o, a->concat, dout, wv, B * Tq, D),
    });
    /* forward: concat = the heads of sdpa(q, k, v), each read and written
     * where it lies in the (B,T,h*d) arrays. The backward does the same:
     * dq, dk, dv are written in that layout too, no copies. Every element
     * of dq, dk, dv belongs to exactly one head, which writes it whole
     * (accumulate = 0), so they need no zeroing first. */
    HeadLayout lq = head_layout_merged(h, Tq, d_k), lk = head_layout_merged(h, Tk, d_k);
    HeadLayout lv = head_layout_merged(h, Tk, d_v), lo = head_layout_merged(h, Tq, d_v);
    sdpa_backward_laid(dq, lq, dk, lk, dv, lv, dscores, dconcat, lo, a->weights,
                       a->q, lq, a->k, lk, a->v, lv, B, h, Tq, Tk, d_k, d_v, 0);
    /* forward: q = x_q W_Q, k = x_kv W_K, v = x_kv W_V. For self-attention
     * dx_q == dx_kv and all three contributions add up in one buffer. */
    /* The three weight gradients dW = x^T d(q|k|v) are independent: one
     * job. The input gradients dx += d(q|k|v) W^T add into the same buffer
     * for self-attention, so they stay one after the other, in the order
     * q, k, v (as matmul_backward did them: the same bits). */
    gemm_many(3, (GemmArgs[3]){
        prod_atb_add(g->w_q, x_q, dq, D, B * Tq, wk),
        prod_atb_add(g->w_k, x_kv, dk, D, B * Tk, wk),
        prod_atb_add(g->w_v, x_kv, dv, D, B * Tk, wv),
    });
    if (dx_q) gemm_one(prod_abt(dx_q, dq, p->w_q, B * Tq, wk, D, 1.0f));
    if (dx_kv) {
        gemm_one(prod_abt(dx_kv, dk, p->w_k, B * Tk, wk, D, 1.0f));
        gemm_one(prod_abt(dx_kv, dv, p->w_v, B * Tk, wv, D, 1.0f));
    }
}
