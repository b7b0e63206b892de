/* check_lmops.c - the operations of a 2026 language model: RMSNorm, RoPE,
 * SwiGLU (ref/lm_ops.h), the SwiGLU FFN and the mixture of experts
 * (layers/lm_ffn.h), and grouped-query attention.
 *
 * Test cases:
 *   Core       hand-checked values: RMSNorm of (3, 4); RoPE at position 0 is
 *              the identity, keeps norms, q.k depends on the offset alone,
 *              turns (1, 0) into chapter 05's sinusoids; SwiGLU at 0, 1, +-100;
 *              GQA with kv_heads = h is multi-head attention, GQA and MQA
 *              equal attention over repeated keys and values; a KV-cached step
 *              with RoPE equals the full sequence's last row; the mixture with
 *              one expert is the FFN, with k = E the p-weighted sum; the
 *              balance loss at perfect and at no balance; the width helpers
 *   Limits     length 1, huge and tiny inputs, fully masked rows, far positions,
 *              the checking functions' messages
 *   Gradient   finite differences (testutil.h's fd_check) of every backward:
 *              L = sum(out * R) for a fixed random R, summed in double
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "layers/linear.h"
#include "layers/multihead.h"
#include "layers/lm_ffn.h"
#include "ref/attention.h"
#include "ref/lm_ops.h"
#include "ref/multihead_ref.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------- */

static double dotd(const float *a, const float *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void assert_finite(const float *x, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) ck_assert_msg(isfinite(x[i]), "%s[%zu] = %g is not finite", what, i, x[i]);
}

/* ========================================================================== */
/* Core: hand-checked values                                                  */
/* ========================================================================== */

START_TEST(test_rmsnorm_values) {
    /* (3, 4): mean of squares 12.5, RMS sqrt(12.5 + 1e-5); gain (1, 2) */
    float x[2] = {3, 4}, g[2] = {1, 2}, y[2], rstd[1];
    rmsnorm_forward_ref(y, rstd, x, g, 1, 2);
    double r = 1.0 / sqrt(12.5 + 1e-5);
    float want[2] = {(float)(3 * r), (float)(8 * r)};
    ck_assert_close_arrays(y, want, 2, 1e-6);
    ck_assert_float_eq_tol(rstd[0], (float)r, 1e-7f);
    /* backward accumulates: dgain of dout = 1 is the normalised row, twice */
    float dy[2] = {1, 1}, dg[2] = {0, 0};
    rmsnorm_backward_ref(NULL, dg, dy, x, rstd, g, 1, 2);
    rmsnorm_backward_ref(NULL, dg, dy, x, rstd, g, 1, 2);
    /* unlike LayerNorm, the mean stays: a constant row keeps its sign */
    float c[4] = {-2, -2, -2, -2}, g1[4] = {1, 1, 1, 1}, yc[4], rc[1];
    rmsnorm_forward_ref(yc, rc, c, g1, 1, 4);
    for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(yc[i], -1.0f, 1e-5f);
    ck_assert_float_eq_tol(dg[0], (float)(3 * r) + (float)(3 * r), 1e-6f);
}
END_TEST

START_TEST(test_rope_values) {
    enum { H = 2, D = 6 };
    Rng r;
    rng_seed(&r, 21);
    float *x = randn(&r, H * D, 1), y[H * D];
    /* position 0: every angle is 0, the identity */
    int p0 = 0;
    rope_forward_ref(y, x, &p0, 1, H, D, ROPE_BASE);
    ck_assert_close_arrays(y, x, H * D, 0);
    /* d = 2, position 1: (1, 0) turns by 1 radian to (cos 1, sin 1) */
    float e[2] = {1, 0}, t[2];
    int p1 = 1;
    rope_forward_ref(t, e, &p1, 1, 1, 2, ROPE_BASE);
    float want[2] = {(float)cos(1.0), (float)sin(1.0)};
    ck_assert_close_arrays(t, want, 2, 1e-7);
    /* d = 4: pair 1 turns at base^(-2/4) = 1/100 per position: by 1 radian at 100 */
    float e4[4] = {0, 0, 0, 1}, t4[4];
    int p100 = 100;
    rope_forward_ref(t4, e4, &p100, 1, 1, 4, ROPE_BASE);
    float want4[4] = {0, 0, (float)-sin(1.0), (float)cos(1.0)};
    ck_assert_close_arrays(t4, want4, 4, 1e-6);
    /* a rotation keeps each pair's length, so each head's norm */
    int p7 = 7;
    rope_forward_ref(y, x, &p7, 1, H, D, ROPE_BASE);
    for (int hh = 0; hh < H; hh++)
        ck_assert_double_eq_tol(sqrt(dotd(y + hh * D, y + hh * D, D)), sqrt(dotd(x + hh * D, x + hh * D, D)), 1e-5);
    /* in place gives the same; the backward of the rotation undoes it */
    float z[H * D], back[H * D] = {0};
    memcpy(z, x, sizeof z);
    rope_forward_ref(z, z, &p7, 1, H, D, ROPE_BASE);
    ck_assert_close_arrays(z, y, H * D, 0);
    rope_backward_ref(back, y, &p7, 1, H, D, ROPE_BASE);
    ck_assert_close_arrays(back, x, H * D, 1e-6);
    free(x);
}
END_TEST

START_TEST(test_rope_relative) {
    /* (R_m q) . (R_n k) depends on n - m only: offset 2 at (0,2), (5,7), (40,42) */
    enum { D = 8 };
    Rng r;
    rng_seed(&r, 22);
    float *q = randn(&r, D, 1), *k = randn(&r, D, 1), rq[D], rk[D];
    int ms[3] = {0, 5, 40};
    double first = 0.0;
    for (int i = 0; i < 3; i++) {
        int m = ms[i], n = ms[i] + 2;
        rope_forward_ref(rq, q, &m, 1, 1, D, ROPE_BASE);
        rope_forward_ref(rk, k, &n, 1, 1, D, ROPE_BASE);
        double s = dotd(rq, rk, D);
        if (i == 0) first = s;
        ck_assert_double_eq_tol(s, first, 1e-5);
    }
    /* and it does depend on the offset */
    int m = 0, n = 3;
    rope_forward_ref(rq, q, &m, 1, 1, D, ROPE_BASE);
    rope_forward_ref(rk, k, &n, 1, 1, D, ROPE_BASE);
    ck_assert(fabs(dotd(rq, rk, D) - first) > 1e-3);
    free(q); free(k);
}
END_TEST

START_TEST(test_rope_is_chapter05) {
    /* (1, 0) in every pair turns into (cos pos*w_i, sin pos*w_i): chapter 05's
     * PE(pos, 2i+1) and PE(pos, 2i), the same frequencies w_i */
    enum { D = 16, L = 30 };
    float pe[L * D], ones[D], y[D];
    posenc_fill(pe, L, D);
    for (int i = 0; i < D; i++) ones[i] = i % 2 == 0 ? 1.0f : 0.0f;
    for (int pos = 0; pos < L; pos++) {
        rope_forward_ref(y, ones, &pos, 1, 1, D, ROPE_BASE);
        for (int i = 0; i < D / 2; i++) {
            ck_assert_float_eq_tol(y[2 * i], pe[pos * D + 2 * i + 1], 1e-6f);
            ck_assert_float_eq_tol(y[2 * i + 1], pe[pos * D + 2 * i], 1e-6f);
        }
    }
}
END_TEST

START_TEST(test_swiglu_values) {
    float a[5] = {0, 1, 100, -100, -1}, b[5] = {3, 2, 0.5f, 7, 1}, y[5];
    swiglu_forward_ref(y, a, b, 5);
    double s1 = 1.0 / (1.0 + exp(-1.0));
    float want[5] = {0, (float)(2 * s1), 50, 0, (float)(-(1 - s1))};
    ck_assert_close_arrays(y, want, 5, 1e-6);
    /* silu'(0) = 1/2: da = dout * b / 2; db = silu(0) = 0 */
    float dy[5] = {1, 1, 1, 1, 1}, da[5] = {0}, db[5] = {0};
    swiglu_backward_ref(da, db, dy, a, b, 5);
    ck_assert_float_eq_tol(da[0], 1.5f, 1e-7f);
    ck_assert_float_eq(db[0], 0.0f);
    ck_assert_float_eq_tol(da[2], 0.5f, 1e-6f);      /* far right: silu' -> 1 */
    ck_assert_float_eq_tol(db[2], 100.0f, 1e-4f);
}
END_TEST

START_TEST(test_widths) {
    /* SwiGLU at equal parameters: 2/3 of the ReLU FFN's width */
    ck_assert_int_eq(swiglu_d_ff(512, 1), 341);      /* 8/3 * 128 = 341.33 */
    ck_assert_int_eq(swiglu_d_ff(512, 8), 344);
    ck_assert_int_eq(swiglu_d_ff(12, 1), 8);
    ck_assert_int_eq(swiglu_d_ff(1, 4), 4);
    for (int d_ff = 3; d_ff < 600; d_ff += 7) {     /* 3w within 1 of 2 d_ff */
        long diff = 3L * swiglu_d_ff(d_ff, 1) - 2L * d_ff;
        ck_assert_int_le(labs(diff), 1);
    }
    /* MoE at equal active parameters: 8 experts, top 2, ReLU: 512/2 - 8/4 */
    ck_assert_int_eq(moe_expert_width(128, 512, 8, 2, EXPERT_RELU), 254);
    ck_assert_int_eq(moe_expert_width(128, 341, 8, 2, EXPERT_SWIGLU), 169);
    ck_assert_int_eq(moe_expert_width(128, 512, 1, 1, EXPERT_RELU), 512);   /* minus the 1-column router: 511.5 -> 512 */
    ck_assert_int_eq(moe_expert_width(4, 2, 64, 2, EXPERT_RELU), 1);        /* at least 1 */
    int w = moe_expert_width(96, 384, 4, 1, EXPERT_RELU);
    long active = 2L * 96 * w * 1 + 96L * 4, dense = 2L * 96 * 384;
    ck_assert_int_le(labs(active - dense), 96);
    /* KV cache: 2 * N * kv_heads * d_k * 4 bytes a token; MQA is h-fold smaller */
    ck_assert_uint_eq(gqa_kv_cache_bytes_per_token(6, 8, 64, 64), 24576);
    ck_assert_uint_eq(gqa_kv_cache_bytes_per_token(6, 1, 64, 64) * 8, 24576);
    ck_assert_uint_eq(gqa_kv_cache_bytes_per_token(2, 3, 4, 5), 2 * 3 * 9 * 4);
}
END_TEST

/* x (B,T,d_model) through W_Q, W_K, W_V, the heads, GQA and W_O, as
 * mha_forward_ref does it with kv_heads = h */
START_TEST(test_gqa_is_multihead) {
    enum { B = 2, T = 4, DM = 6, H = 3, DK = 2, DV = 3 };
    Rng r;
    rng_seed(&r, 31);
    float *x = randn(&r, B * T * DM, 1);
    MhaParams p = {randn(&r, DM * H * DK, 0.5f), randn(&r, DM * H * DK, 0.5f), randn(&r, DM * H * DV, 0.5f),
                   randn(&r, H * DV * DM, 0.5f)};
    uint8_t mask[B * T * T];
    mask_causal(mask, B, T, T);
    float *acts = zeros(mha_acts_size(B, T, T, H, DK, DV)), *scr = zeros(mha_ref_scratch_size(B, T, T, H, DK, DV));
    float want[B * T * DM];
    MhaActs a;
    mha_acts_layout(&a, acts, B, T, T, H, DK, DV);
    mha_forward_ref(want, a.q, a.k, a.v, a.weights, a.concat, scr, &p, x, x, mask, B, T, T, DM, H, DK, DV);

    float q[B * T * H * DK], k[B * T * H * DK], v[B * T * H * DV], qh[B * T * H * DK], kh[B * T * H * DK],
        vh[B * T * H * DV], oh[B * T * H * DV], w[B * H * T * T], cat[B * T * H * DV], out[B * T * DM];
    gemm_ref(0, 0, B * T, H * DK, DM, 1, x, DM, p.w_q, H * DK, 0, q, H * DK);
    gemm_ref(0, 0, B * T, H * DK, DM, 1, x, DM, p.w_k, H * DK, 0, k, H * DK);
    gemm_ref(0, 0, B * T, H * DV, DM, 1, x, DM, p.w_v, H * DV, 0, v, H * DV);
    heads_split(qh, q, B, T, H, DK);
    heads_split(kh, k, B, T, H, DK);
    heads_split(vh, v, B, T, H, DV);
    gqa_forward_ref(oh, w, qh, kh, vh, mask, B, H, H, T, T, DK, DV);
    heads_merge(cat, oh, B, T, H, DV);
    gemm_ref(0, 0, B * T, DM, H * DV, 1, cat, H * DV, p.w_o, DM, 0, out, DM);
    ck_assert_close_arrays(out, want, B * T * DM, 0);
    ck_assert_close_arrays(w, a.weights, B * H * T * T, 0);
    free(x); free(p.w_q); free(p.w_k); free(p.w_v); free(p.w_o); free(acts); free(scr);
}
END_TEST

/* GQA (kv = 2 of h = 4) and MQA (kv = 1): equal to ordinary attention over K
 * and V repeated for each query head, and dK, dV to the repeats' gradients
 * summed over each group */
START_TEST(test_gqa_repeats_kv) {
    enum { B = 2, H = 4, TQ = 3, TK = 5, DK = 3, DV = 2 };
    int kvs[2] = {2, 1};
    for (int c = 0; c < 2; c++) {
        int KV = kvs[c], rep = H / KV;
        Rng r;
        rng_seed(&r, 40 + (uint64_t)c);
        float *Q = randn(&r, B * H * TQ * DK, 1), *K = randn(&r, B * KV * TK * DK, 1),
              *V = randn(&r, B * KV * TK * DV, 1), *dO = randn(&r, B * H * TQ * DV, 1);
        float Kr[B * H * TK * DK], Vr[B * H * TK * DV];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < H; i++) {
                memcpy(Kr + (b * H + i) * TK * DK, K + (b * KV + i / rep) * TK * DK, sizeof(float) * TK * DK);
                memcpy(Vr + (b * H + i) * TK * DV, V + (b * KV + i / rep) * TK * DV, sizeof(float) * TK * DV);
            }
        uint8_t mask[B * TQ * TK];
        lm_mask_causal(mask, B, TQ, TK);
        float o1[B * H * TQ * DV], o2[B * H * TQ * DV], w1[B * H * TQ * TK], w2[B * H * TQ * TK];
        gqa_forward_ref(o1, w1, Q, K, V, mask, B, H, KV, TQ, TK, DK, DV);
        sdpa_forward_ref(o2, w2, Q, Kr, Vr, mask, B, H, TQ, TK, DK, DV);
        ck_assert_close_arrays(o1, o2, B * H * TQ * DV, 0);
        ck_assert_close_arrays(w1, w2, B * H * TQ * TK, 0);

        float dQ1[B * H * TQ * DK] = {0}, dQ2[B * H * TQ * DK] = {0}, dK1[B * H * TK * DK] = {0},
              dV1[B * H * TK * DV] = {0}, dKr[B * H * TK * DK] = {0}, dVr[B * H * TK * DV] = {0};
        float dK2[B * H * TK * DK] = {0}, dV2[B * H * TK * DV] = {0}, scr[TQ * TK], scr2[B * H * TQ * TK];
        gqa_backward_ref(dQ1, dK1, dV1, scr, dO, w1, Q, K, V, B, H, KV, TQ, TK, DK, DV);
        sdpa_backward_ref(dQ2, dKr, dVr, scr2, dO, w2, Q, Kr, Vr, B, H, TQ, TK, DK, DV);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < H; i++) {
                for (int e = 0; e < TK * DK; e++) dK2[(b * KV + i / rep) * TK * DK + e] += dKr[(b * H + i) * TK * DK + e];
                for (int e = 0; e < TK * DV; e++) dV2[(b * KV + i / rep) * TK * DV + e] += dVr[(b * H + i) * TK * DV + e];
            }
        ck_assert_close_arrays(dQ1, dQ2, B * H * TQ * DK, 0);
        ck_assert_close_arrays(dK1, dK2, B * KV * TK * DK, 1e-6);
        ck_assert_close_arrays(dV1, dV2, B * KV * TK * DV, 1e-6);
        free(Q); free(K); free(V); free(dO);
    }
}
END_TEST

/* The KV-cached step: the newest query alone, at position T-1 (RoPE given its
 * offset), against every cached key gives the full causal run's last row */
START_TEST(test_cached_step_rope_gqa) {
    enum { T = 6, H = 4, KV = 2, D = 4 };
    Rng r;
    rng_seed(&r, 50);
    /* q, k, v as the projections give them: (T, heads*D) */
    float *q = randn(&r, T * H * D, 1), *k = randn(&r, T * KV * D, 1), *v = randn(&r, T * KV * D, 1);
    int pos[T];
    for (int t = 0; t < T; t++) pos[t] = t;
    float rq[T * H * D], rk[T * KV * D], qh[H * T * D], kh[KV * T * D], vh[KV * T * D];
    rope_forward_ref(rq, q, pos, T, H, D, ROPE_BASE);
    rope_forward_ref(rk, k, pos, T, KV, D, ROPE_BASE);
    heads_split(qh, rq, 1, T, H, D);
    heads_split(kh, rk, 1, T, KV, D);
    heads_split(vh, v, 1, T, KV, D);
    uint8_t mask[T * T], m1[T];
    lm_mask_causal(mask, 1, T, T);
    uint8_t want_mask[T * T];
    mask_causal(want_mask, 1, T, T);
    ck_assert_mem_eq(mask, want_mask, sizeof mask);
    float full[H * T * D], w[H * T * T];
    gqa_forward_ref(full, w, qh, kh, vh, mask, 1, H, KV, T, T, D, D);

    float q1[H * D], w1[H * T], step[H * D];
    int last = T - 1;
    rope_forward_ref(q1, q + last * H * D, &last, 1, H, D, ROPE_BASE);   /* (1, H*D) = (H,1,D) */
    lm_mask_causal(m1, 1, 1, T);
    for (int j = 0; j < T; j++) ck_assert_int_eq(m1[j], 1);
    gqa_forward_ref(step, w1, q1, kh, vh, m1, 1, H, KV, 1, T, D, D);
    for (int i = 0; i < H; i++)
        ck_assert_close_arrays(step + i * D, full + (i * T + last) * D, D, 1e-6);
    free(q); free(k); free(v);
}
END_TEST

/* parameters of a small mixture, filled from r */
typedef struct {
    MoeConfig c;
    MoeParams p, g;
    MoeActs a;
    float *fbuf, *scratch, *x, *out, *R, *dx;
    int *ibuf, N;
    float d_aux;
} Moe;

static void moe_new(Moe *m, MoeConfig c, int N, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->c = c;
    m->N = N;
    Rng r;
    rng_seed(&r, seed);
    size_t D = c.d_model, F = c.d_ff, E = c.E;
    m->p.w_r = randn(&r, D * E, 1.0f);
    m->p.w1 = randn(&r, E * D * F, 0.6f);
    m->p.w2 = randn(&r, E * F * D, 0.6f);
    m->p.w3 = c.kind == EXPERT_SWIGLU ? randn(&r, E * D * F, 0.6f) : NULL;
    m->g.w_r = zeros(D * E);
    m->g.w1 = zeros(E * D * F);
    m->g.w2 = zeros(E * F * D);
    m->g.w3 = c.kind == EXPERT_SWIGLU ? zeros(E * D * F) : NULL;
    m->x = randn(&r, (size_t)N * D, 1.0f);
    m->R = randn(&r, (size_t)N * D, 1.0f);
    m->out = zeros((size_t)N * D);
    m->dx = zeros((size_t)N * D);
    m->fbuf = zeros(moe_acts_floats(&c, N));
    m->ibuf = calloc(moe_acts_ints(&c, N), sizeof(int));
    m->scratch = zeros(moe_scratch_floats(&c, N));
    moe_acts_layout(&m->a, m->fbuf, m->ibuf, &c, N);
}

static void moe_free(Moe *m) {
    float *f[] = {m->p.w_r, m->p.w1, m->p.w2, m->p.w3, m->g.w_r, m->g.w1, m->g.w2, m->g.w3,
                  m->x, m->R, m->out, m->dx, m->fbuf, m->scratch};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(m->ibuf);
}

START_TEST(test_moe_one_expert_is_ffn) {
    /* E = 1, k = 1: the gate is 1, every token goes to the one expert */
    Moe m;
    moe_new(&m, (MoeConfig){4, 6, 1, 1, EXPERT_RELU, 1}, 5, 60);
    float aux = moe_forward(m.out, &m.a, &m.p, m.x, &m.c, m.N);
    float want[5 * 4], hid[5 * 6];
    ffn_forward(want, hid, m.x, m.p.w1, NULL, m.p.w2, NULL, 5, 4, 6);
    ck_assert_close_arrays(m.out, want, 20, 0);
    ck_assert_float_eq_tol(aux, 1.0f, 1e-6f);        /* one expert: perfectly balanced */
    moe_free(&m);
}
END_TEST

START_TEST(test_moe_all_experts) {
    /* k = E, renormalised: the gates are the router's probabilities and out
     * the p-weighted sum of every expert (SwiGLU experts) */
    enum { N = 4, D = 3, F = 5, E = 3 };
    Moe m;
    moe_new(&m, (MoeConfig){D, F, E, E, EXPERT_SWIGLU, 1}, N, 61);
    moe_forward(m.out, &m.a, &m.p, m.x, &m.c, N);
    float logits[N * E], p[N * E], want[N * D] = {0}, y[N * D], a[N * F], b[N * F], h[N * F];
    gemm_ref(0, 0, N, E, D, 1, m.x, D, m.p.w_r, E, 0, logits, E);
    softmax_forward(p, logits, N, E);
    for (int e = 0; e < E; e++) {
        swiglu_ffn_forward(y, a, b, h, m.x, m.p.w1 + e * D * F, m.p.w3 + e * D * F, m.p.w2 + e * F * D, N, D, F);
        for (int t = 0; t < N; t++)
            for (int i = 0; i < D; i++) want[t * D + i] += p[t * E + e] * y[t * D + i];
    }
    ck_assert_close_arrays(m.out, want, N * D, 1e-5);
    /* the choices are in order of probability */
    for (int t = 0; t < N; t++)
        for (int j = 1; j < E; j++)
            ck_assert(p[t * E + m.a.choice[t * E + j - 1]] >= p[t * E + m.a.choice[t * E + j]]);
    moe_free(&m);
}
END_TEST

START_TEST(test_moe_balance_loss) {
    /* d_model 1, 2 experts, k = 1, W_r = (1, -1): x = 1 picks expert 0 with
     * p = sigmoid(2), x = -1 expert 1. Two tokens +1, -1: f = (1/2, 1/2),
     * P = (1/2, 1/2), aux = 2 * (1/4 + 1/4) = 1. Both +1: f = (1, 0),
     * aux = 2 * P_0 = 2 sigmoid(2). */
    Moe m;
    moe_new(&m, (MoeConfig){1, 2, 2, 1, EXPERT_RELU, 0}, 2, 62);
    m.p.w_r[0] = 1.0f;
    m.p.w_r[1] = -1.0f;
    m.x[0] = 1.0f;
    m.x[1] = -1.0f;
    ck_assert_float_eq_tol(moe_forward(m.out, &m.a, &m.p, m.x, &m.c, 2), 1.0f, 1e-6f);
    ck_assert_int_eq(m.a.choice[0], 0);
    ck_assert_int_eq(m.a.choice[1], 1);
    float s2 = (float)(1.0 / (1.0 + exp(-2.0)));
    ck_assert_float_eq_tol(m.a.gate[0], s2, 1e-6f);  /* renorm = 0: the gate is p */
    m.x[1] = 1.0f;
    ck_assert_float_eq_tol(moe_forward(m.out, &m.a, &m.p, m.x, &m.c, 2), 2 * s2, 1e-6f);
    ck_assert_int_eq(m.a.offset[1] - m.a.offset[0], 2);
    ck_assert_int_eq(m.a.offset[2] - m.a.offset[1], 0);   /* expert 1 idle: skipped, no crash */
    moe_free(&m);
}
END_TEST

/* ========================================================================== */
/* Limits                                                                     */
/* ========================================================================== */

START_TEST(test_length_one) {
    /* one query, one key: weight 1, the output is the value */
    float q[3] = {1, 2, 3}, k[3] = {-1, 0, 5}, v[2] = {7, -8}, o[2], w[1];
    gqa_forward_ref(o, w, q, k, v, NULL, 1, 1, 1, 1, 1, 3, 2);
    ck_assert_float_eq(w[0], 1.0f);
    ck_assert_close_arrays(o, v, 2, 0);
    /* RMSNorm of one number is its sign (times the gain) */
    float x = -4, g = 3, y, rs;
    rmsnorm_forward_ref(&y, &rs, &x, &g, 1, 1);
    ck_assert_float_eq_tol(y, -3.0f, 1e-5f);
    /* a mixture of one token */
    Moe m;
    moe_new(&m, (MoeConfig){3, 4, 4, 2, EXPERT_SWIGLU, 1}, 1, 63);
    float aux = moe_forward(m.out, &m.a, &m.p, m.x, &m.c, 1);
    ck_assert(isfinite(aux));
    ck_assert_float_eq_tol(m.a.gate[0] + m.a.gate[1], 1.0f, 1e-6f);
    moe_backward(m.dx, &m.g, m.scratch, m.R, 0.1f, &m.a, &m.p, m.x, &m.c, 1);
    assert_finite(m.dx, 3, "dx");
    moe_free(&m);
}
END_TEST

START_TEST(test_huge_and_tiny) {
    /* RMSNorm: squares of 1e30 overflow float, not the double sum */
    float x[3] = {1e30f, -1e30f, 1e30f}, g[3] = {1, 1, 1}, y[3], rs, dx[3] = {0}, dg[3] = {0}, dy[3] = {1, 2, 3};
    rmsnorm_forward_ref(y, &rs, x, g, 1, 3);
    ck_assert_float_eq_tol(y[0], 1.0f, 1e-5f);
    ck_assert_float_eq_tol(y[1], -1.0f, 1e-5f);
    rmsnorm_backward_ref(dx, dg, dy, x, &rs, g, 1, 3);
    assert_finite(dx, 3, "dx");
    /* tiny rows: eps keeps the division finite */
    float t[3] = {1e-30f, 0, -1e-30f};
    rmsnorm_forward_ref(y, &rs, t, g, 1, 3);
    assert_finite(y, 3, "y");
    /* SwiGLU at +-1e4: sigmoid without overflow */
    float a[2] = {1e4f, -1e4f}, b[2] = {2, 2}, s[2], da[2] = {0}, db[2] = {0}, d1[2] = {1, 1};
    swiglu_forward_ref(s, a, b, 2);
    ck_assert_float_eq(s[0], 2e4f);
    ck_assert_float_eq(s[1], 0.0f);
    swiglu_backward_ref(da, db, d1, a, b, 2);
    assert_finite(da, 2, "da");
    /* RoPE far away (position 10^6): still a rotation */
    float q[4] = {3, 4, -1, 2}, rq[4];
    int far = 1000000;
    rope_forward_ref(rq, q, &far, 1, 1, 4, ROPE_BASE);
    ck_assert_double_eq_tol(dotd(rq, rq, 4), 30.0, 1e-4);
    /* the router at huge logits: a stable softmax, gates of exactly 1 */
    Moe m;
    moe_new(&m, (MoeConfig){2, 3, 3, 1, EXPERT_RELU, 0}, 3, 64);
    for (int i = 0; i < 6; i++) m.p.w_r[i] *= 1e6f;
    float aux = moe_forward(m.out, &m.a, &m.p, m.x, &m.c, 3);
    ck_assert(isfinite(aux));
    assert_finite(m.out, 6, "out");
    moe_backward(m.dx, &m.g, m.scratch, m.R, 1.0f, &m.a, &m.p, m.x, &m.c, 3);
    assert_finite(m.dx, 6, "dx");
    assert_finite(m.g.w_r, 6, "dW_r");
    moe_free(&m);
}
END_TEST

START_TEST(test_fully_masked_row) {
    /* query 1 of 3 sees no key: zero weights, zero output, finite gradients */
    enum { H = 2, KV = 1, T = 3, D = 2 };
    Rng r;
    rng_seed(&r, 70);
    float *Q = randn(&r, H * T * D, 1), *K = randn(&r, KV * T * D, 1), *V = randn(&r, KV * T * D, 1),
          *dO = randn(&r, H * T * D, 1);
    uint8_t mask[T * T];
    lm_mask_causal(mask, 1, T, T);
    for (int j = 0; j < T; j++) mask[1 * T + j] = 0;
    float o[H * T * D], w[H * T * T], dQ[H * T * D] = {0}, dK[KV * T * D] = {0}, dV[KV * T * D] = {0}, scr[T * T];
    gqa_forward_ref(o, w, Q, K, V, mask, 1, H, KV, T, T, D, D);
    for (int i = 0; i < H; i++)
        for (int c = 0; c < D; c++) ck_assert_float_eq(o[(i * T + 1) * D + c], 0.0f);
    gqa_backward_ref(dQ, dK, dV, scr, dO, w, Q, K, V, 1, H, KV, T, T, D, D);
    assert_finite(dQ, H * T * D, "dQ");
    assert_finite(dK, KV * T * D, "dK");
    for (int i = 0; i < H; i++)
        for (int c = 0; c < D; c++) ck_assert_float_eq(dQ[(i * T + 1) * D + c], 0.0f);
    free(Q); free(K); free(V); free(dO);
}
END_TEST

START_TEST(test_checks) {
    char err[256];
    ck_assert_int_eq(gqa_check(8, 2, err, sizeof err), 0);
    ck_assert_int_eq(gqa_check(8, 8, err, sizeof err), 0);
    ck_assert_int_eq(gqa_check(8, 1, err, sizeof err), 0);
    ck_assert_int_eq(gqa_check(8, 3, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "3 key/value heads") && strstr(err, "8 query heads") && strstr(err, " 1 2 4 8)"),
                  "message: %s", err);
    ck_assert_int_eq(gqa_check(4, 8, err, sizeof err), 1);
    ck_assert_int_eq(gqa_check(4, 0, err, sizeof err), 1);
    ck_assert_int_eq(gqa_check(6, 4, err, 20), 1);   /* a short buffer is cut, not overrun */
    ck_assert_uint_eq(strlen(err), 19);

    MoeConfig ok = {8, 16, 4, 2, EXPERT_SWIGLU, 1};
    ck_assert_int_eq(moe_check(&ok, err, sizeof err), 0);
    MoeConfig bad_k = ok;
    bad_k.k = 5;
    ck_assert_int_eq(moe_check(&bad_k, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "1 <= k") && strstr(err, "experts 4, k 5"), "message: %s", err);
    MoeConfig no_e = ok;
    no_e.E = 0;
    ck_assert_int_eq(moe_check(&no_e, err, sizeof err), 1);
}
END_TEST

/* ========================================================================== */
/* Gradient: finite differences                                               */
/* ========================================================================== */

typedef struct {
    float *x, *g, *out, *save, *R, *a, *b, *W1, *W3, *W2, *h;
    int *pos;
    int N, C, H, d, F;
} Ctx;

static double loss_rmsnorm(void *v) {
    Ctx *c = v;
    rmsnorm_forward_ref(c->out, c->save, c->x, c->g, c->N, c->C);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->C);
}

START_TEST(test_grad_rmsnorm) {
    /* smooth: h 1e-2 (inputs ~1), rounding ~1e-7 |L| / 2h: tol 5e-4 + 1e-3 rel */
    enum { N = 3, C = 7 };
    Rng r;
    rng_seed(&r, 80);
    Ctx c = {.N = N, .C = C, .x = randn(&r, N * C, 1), .g = randn(&r, C, 1), .R = randn(&r, N * C, 1),
             .out = zeros(N * C), .save = zeros(N)};
    float *dx = zeros(N * C), *dg = zeros(C);
    loss_rmsnorm(&c);
    rmsnorm_backward_ref(dx, dg, c.R, c.x, c.save, c.g, N, C);
    fd_check(loss_rmsnorm, &c, c.x, dx, N * C, 1e-2f, 5e-4, 1e-3);
    fd_check(loss_rmsnorm, &c, c.g, dg, C, 1e-2f, 5e-4, 1e-3);
    free(c.x); free(c.g); free(c.R); free(c.out); free(c.save); free(dx); free(dg);
}
END_TEST

static double loss_rope(void *v) {
    Ctx *c = v;
    rope_forward_ref(c->out, c->x, c->pos, c->N, c->H, c->d, ROPE_BASE);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->H * c->d);
}

START_TEST(test_grad_rope) {
    /* linear in x: only rounding matters */
    enum { N = 4, H = 2, D = 6 };
    int pos[N] = {0, 3, 17, 250};
    Rng r;
    rng_seed(&r, 81);
    Ctx c = {.N = N, .H = H, .d = D, .pos = pos, .x = randn(&r, N * H * D, 1), .R = randn(&r, N * H * D, 1),
             .out = zeros(N * H * D)};
    float *dx = zeros(N * H * D);
    rope_backward_ref(dx, c.R, pos, N, H, D, ROPE_BASE);
    fd_check(loss_rope, &c, c.x, dx, N * H * D, 1e-2f, 5e-4, 1e-3);
    free(c.x); free(c.R); free(c.out); free(dx);
}
END_TEST

static double loss_swiglu(void *v) {
    Ctx *c = v;
    swiglu_forward_ref(c->out, c->a, c->b, (size_t)c->N);
    return weighted_sum(c->out, c->R, (size_t)c->N);
}

START_TEST(test_grad_swiglu) {
    enum { N = 12 };
    Rng r;
    rng_seed(&r, 82);
    Ctx c = {.N = N, .a = randn(&r, N, 2), .b = randn(&r, N, 1), .R = randn(&r, N, 1), .out = zeros(N)};
    float *da = zeros(N), *db = zeros(N);
    swiglu_backward_ref(da, db, c.R, c.a, c.b, N);
    fd_check(loss_swiglu, &c, c.a, da, N, 1e-2f, 5e-4, 1e-3);
    fd_check(loss_swiglu, &c, c.b, db, N, 1e-2f, 5e-4, 1e-3);
    free(c.a); free(c.b); free(c.R); free(c.out); free(da); free(db);
}
END_TEST

static double loss_swiglu_ffn(void *v) {
    Ctx *c = v;
    swiglu_ffn_forward(c->out, c->a, c->b, c->h, c->x, c->W1, c->W3, c->W2, c->N, c->C, c->F);
    return weighted_sum(c->out, c->R, (size_t)c->N * c->C);
}

START_TEST(test_grad_swiglu_ffn) {
    enum { N = 3, C = 4, F = 5 };
    Rng r;
    rng_seed(&r, 83);
    Ctx c = {.N = N, .C = C, .F = F, .x = randn(&r, N * C, 1), .W1 = randn(&r, C * F, 0.7f),
             .W3 = randn(&r, C * F, 0.7f), .W2 = randn(&r, F * C, 0.7f), .R = randn(&r, N * C, 1),
             .out = zeros(N * C), .a = zeros(N * F), .b = zeros(N * F), .h = zeros(N * F)};
    float *dx = zeros(N * C), *dW1 = zeros(C * F), *dW3 = zeros(C * F), *dW2 = zeros(F * C), *scr = zeros(3 * N * F);
    loss_swiglu_ffn(&c);
    swiglu_ffn_backward(dx, dW1, dW3, dW2, scr, c.R, c.a, c.b, c.h, c.x, c.W1, c.W3, c.W2, N, C, F);
    fd_check(loss_swiglu_ffn, &c, c.x, dx, N * C, 1e-2f, 1e-3, 2e-3);
    fd_check(loss_swiglu_ffn, &c, c.W1, dW1, C * F, 1e-2f, 1e-3, 2e-3);
    fd_check(loss_swiglu_ffn, &c, c.W3, dW3, C * F, 1e-2f, 1e-3, 2e-3);
    fd_check(loss_swiglu_ffn, &c, c.W2, dW2, F * C, 1e-2f, 1e-3, 2e-3);
    free(c.x); free(c.W1); free(c.W3); free(c.W2); free(c.R); free(c.out); free(c.a); free(c.b); free(c.h);
    free(dx); free(dW1); free(dW3); free(dW2); free(scr);
}
END_TEST

typedef struct {
    float *Q, *K, *V, *out, *w, *R;
    const uint8_t *mask;
    int B, H, KV, TQ, TK, D;
} AttCtx;

static double loss_gqa(void *v) {
    AttCtx *c = v;
    gqa_forward_ref(c->out, c->w, c->Q, c->K, c->V, c->mask, c->B, c->H, c->KV, c->TQ, c->TK, c->D, c->D);
    return weighted_sum(c->out, c->R, (size_t)c->B * c->H * c->TQ * c->D);
}

/* GQA (kv 2 of 4) and MQA (kv 1), causal: softmax is smooth, h 1e-2 */
START_TEST(test_grad_gqa) {
    enum { B = 2, H = 4, T = 4, D = 3 };
    int KV = _i == 0 ? 2 : 1;
    Rng r;
    rng_seed(&r, 84 + (uint64_t)_i);
    uint8_t mask[B * T * T];
    lm_mask_causal(mask, B, T, T);
    AttCtx c = {.B = B, .H = H, .KV = KV, .TQ = T, .TK = T, .D = D, .mask = mask,
                .Q = randn(&r, B * H * T * D, 1), .K = randn(&r, B * KV * T * D, 1), .V = randn(&r, B * KV * T * D, 1),
                .R = randn(&r, B * H * T * D, 1), .out = zeros(B * H * T * D), .w = zeros(B * H * T * T)};
    float *dQ = zeros(B * H * T * D), *dK = zeros(B * KV * T * D), *dV = zeros(B * KV * T * D), *scr = zeros(T * T);
    loss_gqa(&c);
    gqa_backward_ref(dQ, dK, dV, scr, c.R, c.w, c.Q, c.K, c.V, B, H, KV, T, T, D, D);
    fd_check(loss_gqa, &c, c.Q, dQ, B * H * T * D, 1e-2f, 1e-3, 1e-2);
    fd_check(loss_gqa, &c, c.K, dK, B * KV * T * D, 1e-2f, 1e-3, 1e-2);
    fd_check(loss_gqa, &c, c.V, dV, B * KV * T * D, 1e-2f, 1e-3, 1e-2);
    free(c.Q); free(c.K); free(c.V); free(c.R); free(c.out); free(c.w); free(dQ); free(dK); free(dV); free(scr);
}
END_TEST

static double loss_moe(void *v) {
    Moe *m = v;
    float aux = moe_forward(m->out, &m->a, &m->p, m->x, &m->c, m->N);
    return weighted_sum(m->out, m->R, (size_t)m->N * m->c.d_model) + (double)m->d_aux * aux;
}

/* The mixture: L = sum(out * R) + d_aux * aux, every parameter. A step that
 * changes a token's choice of expert is a jump in L, and ReLU has kinks:
 * fd_check tries those at 2h and counts them; a handful may be skipped,
 * never most. The loop runs: ReLU k 2 renormalised, SwiGLU k 2
 * renormalised, ReLU k 1 Switch-style (gate = p), and the balance loss
 * alone (R = 0): its gradient reaches W_r and x only through P_e. */
static const struct { ExpertKind kind; int k, renorm; float d_aux, rscale; } moe_cases[] = {
    {EXPERT_RELU, 2, 1, 0.3f, 1}, {EXPERT_SWIGLU, 2, 1, 0.3f, 1}, {EXPERT_RELU, 1, 0, 0.5f, 1},
    {EXPERT_SWIGLU, 3, 1, 1.0f, 0}};

START_TEST(test_grad_moe) {
    enum { N = 6, D = 4, F = 5, E = 4 };
    Moe m;
    moe_new(&m, (MoeConfig){D, F, E, moe_cases[_i].k, moe_cases[_i].kind, moe_cases[_i].renorm}, N,
            90 + (uint64_t)_i);
    m.d_aux = moe_cases[_i].d_aux;
    for (int i = 0; i < N * D; i++) m.R[i] *= moe_cases[_i].rscale;
    loss_moe(&m);
    moe_backward(m.dx, &m.g, m.scratch, m.R, m.d_aux, &m.a, &m.p, m.x, &m.c, N);
    int kinks = 0;
    size_t n = 0;
    struct { float *p, *g; size_t n; const char *what; } t[] = {
        {m.x, m.dx, N * D, "x"}, {m.p.w_r, m.g.w_r, D * E, "w_r"}, {m.p.w1, m.g.w1, E * D * F, "w1"},
        {m.p.w2, m.g.w2, E * F * D, "w2"}, {m.p.w3, m.g.w3, m.p.w3 ? E * D * F : 0, "w3"}};
    for (int i = 0; i < 5; i++)
        if (t[i].n)
            n += fd_check_at(loss_moe, &m, t[i].p, t[i].g, t[i].n, NULL, 0, 1e-2f, 1e-3, 1e-2, &kinks, t[i].what,
                             __FILE__, __LINE__);
    ck_assert_msg(kinks * 20 <= (int)n, "%d of %zu entries were kinks: more than 5%%", kinks, n);
    if (moe_cases[_i].rscale == 0) {
        /* the balance loss alone teaches the router, not the experts */
        for (int i = 0; i < E * D * F; i++) ck_assert_float_eq(m.g.w1[i], 0.0f);
        double s = 0.0;
        for (int i = 0; i < D * E; i++) s += fabs(m.g.w_r[i]);
        ck_assert(s > 1e-4);
    }
    moe_free(&m);
}
END_TEST

Suite *lmops_suite(void) {
    Suite *s = suite_create("lmops");
    suite_case(s, "Core", test_rmsnorm_values, test_rope_values, test_rope_relative, test_rope_is_chapter05,
               test_swiglu_values, test_widths, test_gqa_is_multihead, test_gqa_repeats_kv,
               test_cached_step_rope_gqa, test_moe_one_expert_is_ffn, test_moe_all_experts, test_moe_balance_loss);
    suite_case(s, "Limits", test_length_one, test_huge_and_tiny, test_fully_masked_row, test_checks);
    TCase *grad = suite_case(s, "Gradient", test_grad_rmsnorm, test_grad_rope, test_grad_swiglu, test_grad_swiglu_ffn);
    tcase_add_loop_test(grad, test_grad_gqa, 0, 2);
    tcase_add_loop_test(grad, test_grad_moe, 0, (int)(sizeof moe_cases / sizeof moe_cases[0]));
    return s;
}
