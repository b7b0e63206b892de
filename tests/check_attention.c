/* check_attention.c - masks, scaled dot-product attention (Eq. 1) and
 * multi-head attention (Sec. 3.2.2), forward and backward.
 *
 * Test cases:
 *   Core      hand-computed attention, mask patterns, head split/merge
 *   Limits    fully masked rows, one key, huge scores, masked keys get no gradient
 *   Sweep     loop tests over batch/heads/lengths/widths against a per-element
 *             reference computed in double
 *   Twins     the fast sdpa_forward / sdpa_backward against their plain
 *             references (sdpa_*_ref); mha_forward's in-place heads against
 *             split copies, bit for bit
 *   Gradient  finite differences of a double-precision reference forward
 *             against sdpa_backward and mha_backward
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ref/attention.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "testutil.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- references in double ---------------------------------------------------- */

/* out (B,h,Tq,d_v), w (B,h,Tq,Tk) = Eq. (1) element by element, in double;
 * Q, K, V as in sdpa_forward (double); mask (B,Tq,Tk) or NULL. A fully masked
 * row gives zeros, as the library promises. */
static void ref_sdpa(double *out, double *w, const double *Q, const double *K, const double *V,
                     const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v) {
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < h; hh++)
            for (int i = 0; i < Tq; i++) {
                size_t bh = (size_t)b * h + hh;
                double *wi = w + (bh * Tq + i) * Tk;
                double max = -INFINITY;
                for (int j = 0; j < Tk; j++) {
                    double s = 0;
                    for (int c = 0; c < d_k; c++)
                        s += Q[(bh * Tq + i) * d_k + c] * K[(bh * Tk + j) * d_k + c];
                    s /= sqrt((double)d_k);
                    if (mask && !mask[((size_t)b * Tq + i) * Tk + j]) s = -INFINITY;
                    wi[j] = s;
                    if (s > max) max = s;
                }
                double sum = 0;
                for (int j = 0; j < Tk; j++) {
                    wi[j] = max == -INFINITY ? 0.0 : exp(wi[j] - max);
                    sum += wi[j];
                }
                for (int j = 0; j < Tk; j++) wi[j] = sum > 0 ? wi[j] / sum : 0.0;
                for (int c = 0; c < d_v; c++) {
                    double o = 0;
                    for (int j = 0; j < Tk; j++) o += wi[j] * V[(bh * Tk + j) * d_v + c];
                    out[(bh * Tq + i) * d_v + c] = o;
                }
            }
}

/* The sizes of one multi-head attention problem. */
typedef struct { int B, Tq, Tk, d_model, h, d_k, d_v; } MhaDims;

/* out (B,Tq,d_model) = MultiHead(x_q, x_kv, x_kv) in double, straight from
 * the paper: per head, per position, no split/merge buffers. */
static void ref_mha(double *out, const double *x_q, const double *x_kv,
                    const double *wq, const double *wk, const double *wv, const double *wo,
                    const uint8_t *mask, MhaDims d) {
    int hdk = d.h * d.d_k, hdv = d.h * d.d_v;
    double *q = calloc((size_t)d.B * d.h * d.Tq * d.d_k, sizeof(double));
    double *k = calloc((size_t)d.B * d.h * d.Tk * d.d_k, sizeof(double));
    double *v = calloc((size_t)d.B * d.h * d.Tk * d.d_v, sizeof(double));
    double *o = calloc((size_t)d.B * d.h * d.Tq * d.d_v, sizeof(double));
    double *w = calloc((size_t)d.B * d.h * d.Tq * d.Tk, sizeof(double));
    /* head hh's projections are the column blocks hh*d_k.. of W_Q, W_K (and hh*d_v.. of W_V) */
    for (int b = 0; b < d.B; b++)
        for (int hh = 0; hh < d.h; hh++) {
            for (int t = 0; t < d.Tq; t++)
                for (int c = 0; c < d.d_k; c++) {
                    double s = 0;
                    for (int m = 0; m < d.d_model; m++)
                        s += x_q[(b * d.Tq + t) * d.d_model + m] * wq[m * hdk + hh * d.d_k + c];
                    q[((b * d.h + hh) * d.Tq + t) * d.d_k + c] = s;
                }
            for (int t = 0; t < d.Tk; t++) {
                for (int c = 0; c < d.d_k; c++) {
                    double s = 0;
                    for (int m = 0; m < d.d_model; m++)
                        s += x_kv[(b * d.Tk + t) * d.d_model + m] * wk[m * hdk + hh * d.d_k + c];
                    k[((b * d.h + hh) * d.Tk + t) * d.d_k + c] = s;
                }
                for (int c = 0; c < d.d_v; c++) {
                    double s = 0;
                    for (int m = 0; m < d.d_model; m++)
                        s += x_kv[(b * d.Tk + t) * d.d_model + m] * wv[m * hdv + hh * d.d_v + c];
                    v[((b * d.h + hh) * d.Tk + t) * d.d_v + c] = s;
                }
            }
        }
    ref_sdpa(o, w, q, k, v, mask, d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
    /* Concat(head_1..head_h) W^O: concat column hh*d_v + c is head hh's column c */
    for (int b = 0; b < d.B; b++)
        for (int t = 0; t < d.Tq; t++)
            for (int m = 0; m < d.d_model; m++) {
                double s = 0;
                for (int hh = 0; hh < d.h; hh++)
                    for (int c = 0; c < d.d_v; c++)
                        s += o[((b * d.h + hh) * d.Tq + t) * d.d_v + c] * wo[(hh * d.d_v + c) * d.d_model + m];
                out[(b * d.Tq + t) * d.d_model + m] = s;
            }
    free(q); free(k); free(v); free(o); free(w);
}

static void to_double(double *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

static void to_float(float *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* ---- Core: hand-computed attention ------------------------------------------------ */

/* 2 queries, 3 keys, d_k = 2, d_v = 2, chosen so the softmax is exact by hand:
 *   q0 = (sqrt 2, 0), q1 = (0, 0);  k0 = (0, 0), k1 = (ln 2, 0), k2 = (ln 3, 0)
 *   scores row 0 = q0.k_j / sqrt 2 = (0, ln 2, ln 3)  -> exp = (1, 2, 3)
 *                                                     -> weights (1/6, 2/6, 3/6)
 *   scores row 1 = (0, 0, 0)                          -> weights (1/3, 1/3, 1/3)
 *   V = [(6, 0), (0, 6), (6, 6)]
 *   out row 0 = 1/6 (6,0) + 2/6 (0,6) + 3/6 (6,6) = (1+3, 2+3) = (4, 5)
 *   out row 1 = ((6+0+6)/3, (0+6+6)/3)             = (4, 4)                    */
static void hand_inputs(float Q[4], float K[6], float V[6]) {
    const float q[4] = {sqrtf(2.0f), 0, 0, 0};
    const float k[6] = {0, 0, logf(2.0f), 0, logf(3.0f), 0};
    const float v[6] = {6, 0, 0, 6, 6, 6};
    memcpy(Q, q, sizeof q);
    memcpy(K, k, sizeof k);
    memcpy(V, v, sizeof v);
}

START_TEST(test_sdpa_by_hand) {
    float Q[4], K[6], V[6], out[4], w[6];
    hand_inputs(Q, K, V);
    sdpa_forward(out, w, Q, K, V, NULL, 1, 1, 2, 3, 2, 2);
    const float want_w[6] = {1 / 6.f, 2 / 6.f, 3 / 6.f, 1 / 3.f, 1 / 3.f, 1 / 3.f};
    const float want_out[4] = {4, 5, 4, 4};
    ck_assert_close_arrays(w, want_w, 6, 1e-6);
    ck_assert_close_arrays(out, want_out, 4, 1e-5);
}
END_TEST

START_TEST(test_sdpa_by_hand_masked) {
    /* same inputs; query 0 may not see key 2, query 1 sees nothing:
     *   row 0: exp = (1, 2, -)  -> weights (1/3, 2/3, 0) -> out (6/3, 12/3) = (2, 4)
     *   row 1: fully masked     -> weights (0, 0, 0)     -> out (0, 0)              */
    float Q[4], K[6], V[6], out[4], w[6];
    hand_inputs(Q, K, V);
    const uint8_t mask[6] = {1, 1, 0, 0, 0, 0};
    sdpa_forward(out, w, Q, K, V, mask, 1, 1, 2, 3, 2, 2);
    const float want_w[6] = {1 / 3.f, 2 / 3.f, 0, 0, 0, 0};
    const float want_out[4] = {2, 4, 0, 0};
    ck_assert_close_arrays(w, want_w, 6, 1e-6);
    ck_assert_close_arrays(out, want_out, 4, 1e-5);
    ck_assert(w[2] == 0.0f);                         /* exactly zero, not just small */
    for (int i = 3; i < 6; i++) ck_assert(w[i] == 0.0f);
}
END_TEST

START_TEST(test_masks_patterns) {
    /* causal, T = 3:   1 0 0 / 1 1 0 / 1 1 1  (query i sees keys 0..i, itself included) */
    uint8_t c[2 * 9], p[2 * 9], t[2 * 9];
    mask_causal(c, 2, 3, 3);
    const uint8_t causal[9] = {1, 0, 0, 1, 1, 0, 1, 1, 1};
    for (int b = 0; b < 2; b++) ck_assert_mem_eq(c + 9 * b, causal, 9);
    /* padding: sequence 0 has 2 real keys, sequence 1 has all 3 */
    const int len[2] = {2, 3};
    mask_padding(p, len, 2, 3, 3);
    const uint8_t pad[18] = {1, 1, 0, 1, 1, 0, 1, 1, 0,
                             1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_mem_eq(p, pad, 18);
    /* from tokens with pad id 0: the same keys blocked as by the lengths */
    const int keys[6] = {5, 7, 0, 4, 4, 9};
    mask_from_tokens(t, keys, 0, 2, 3, 3);
    ck_assert_mem_eq(t, pad, 18);
    /* causal AND padding */
    mask_and(c, p, 18);
    const uint8_t both[18] = {1, 0, 0, 1, 1, 0, 1, 1, 0,
                              1, 0, 0, 1, 1, 0, 1, 1, 1};
    ck_assert_mem_eq(c, both, 18);
    /* cross shapes: Tq = 2 queries over Tk = 4 keys, key_len 1 */
    uint8_t x[8];
    const int one[1] = {1};
    mask_padding(x, one, 1, 2, 4);
    const uint8_t want_x[8] = {1, 0, 0, 0, 1, 0, 0, 0};
    ck_assert_mem_eq(x, want_x, 8);
}
END_TEST

START_TEST(test_heads_split_merge) {
    /* x (B=2, T=3, h*d = 3*2): element (b,t,hh,i) lands at (b,hh,t,i) and back */
    enum { B = 2, T = 3, H = 3, D = 2, N = B * T * H * D };
    float x[N], s[N], m[N];
    for (int i = 0; i < N; i++) x[i] = (float)i;
    heads_split(s, x, B, T, H, D);
    /* (b=1, hh=2, t=1, i=1) = x[b=1, t=1, col 2*2+1] = 1*18 + 1*6 + 5 = 29 */
    ck_assert(s[((1 * H + 2) * T + 1) * D + 1] == 29.0f);
    heads_merge(m, s, B, T, H, D);
    ck_assert_close_arrays(m, x, N, 0.0);
}
END_TEST

START_TEST(test_softmax_in_place) {
    /* sdpa_forward runs softmax_forward in place (out == inp) on the scores;
     * this pins that ops.h's softmax allows it */
    float a[12], b[12], y[12];
    Rng r;
    rng_seed(&r, 3);
    rng_fill_normal(&r, a, 12, 0, 3);
    a[5] = -INFINITY;
    memcpy(b, a, sizeof a);
    softmax_forward(y, a, 3, 4);
    softmax_forward(b, b, 3, 4);
    ck_assert_close_arrays(b, y, 12, 0.0);
}
END_TEST

/* ---- Limits ------------------------------------------------------------------------ */

START_TEST(test_fully_masked_rows) {
    /* padding length 0: every query of sequence 1 has nothing to attend to.
     * Forward: weights and output all zero (no NaN). Backward: finite, and
     * no gradient at all for sequence 1. */
    enum { B = 2, H = 2, TQ = 3, TK = 4, DK = 3, DV = 2 };
    float Q[B * H * TQ * DK], K[B * H * TK * DK], V[B * H * TK * DV];
    float out[B * H * TQ * DV], w[B * H * TQ * TK], dout[B * H * TQ * DV], scratch[B * H * TQ * TK];
    float dQ[B * H * TQ * DK] = {0}, dK[B * H * TK * DK] = {0}, dV[B * H * TK * DV] = {0};
    uint8_t mask[B * TQ * TK];
    Rng r;
    rng_seed(&r, 11);
    rng_fill_normal(&r, Q, B * H * TQ * DK, 0, 1);
    rng_fill_normal(&r, K, B * H * TK * DK, 0, 1);
    rng_fill_normal(&r, V, B * H * TK * DV, 0, 1);
    rng_fill_normal(&r, dout, B * H * TQ * DV, 0, 1);
    const int len[B] = {4, 0};
    mask_padding(mask, len, B, TQ, TK);
    sdpa_forward(out, w, Q, K, V, mask, B, H, TQ, TK, DK, DV);
    sdpa_backward(dQ, dK, dV, scratch, dout, w, Q, K, V, B, H, TQ, TK, DK, DV);
    size_t half_w = H * TQ * TK, half_o = H * TQ * DV;
    for (size_t i = 0; i < half_w; i++) ck_assert(w[half_w + i] == 0.0f);
    for (size_t i = 0; i < half_o; i++) ck_assert(out[half_o + i] == 0.0f);
    for (size_t i = 0; i < (size_t)H * TQ * DK; i++) ck_assert(dQ[H * TQ * DK + i] == 0.0f);
    for (size_t i = 0; i < (size_t)H * TK * DK; i++) ck_assert(dK[H * TK * DK + i] == 0.0f);
    for (size_t i = 0; i < (size_t)H * TK * DV; i++) ck_assert(dV[H * TK * DV + i] == 0.0f);
    /* sequence 0 is unmasked: its rows sum to 1 and everything is finite */
    for (int i = 0; i < H * TQ; i++) {
        double s = 0;
        for (int j = 0; j < TK; j++) s += w[i * TK + j];
        ck_assert(fabs(s - 1.0) < 1e-6);
    }
    for (size_t i = 0; i < sizeof dQ / sizeof *dQ; i++) ck_assert(isfinite(dQ[i]));
}
END_TEST

START_TEST(test_one_key_and_huge_scores) {
    /* one key: the weight is exactly 1 and the output is that key's value */
    float q[2] = {3, -1}, k[2] = {0.5f, 2}, v[3] = {1, 2, 3}, out[3], w[1];
    sdpa_forward(out, w, q, k, v, NULL, 1, 1, 1, 1, 2, 3);
    ck_assert(w[0] == 1.0f);
    ck_assert_close_arrays(out, v, 3, 0.0);
    /* scores of +-1e6 would overflow a naive exp; the result is one-hot, finite */
    float Q[2] = {1e3f, 0}, K[6] = {1e3f, 0, -1e3f, 0, 0, 0}, V[6] = {1, 0, 0, 1, 0, 0}, o[2], W[3];
    sdpa_forward(o, W, Q, K, V, NULL, 1, 1, 1, 3, 2, 2);
    const float want_w[3] = {1, 0, 0}, want_o[2] = {1, 0};
    ck_assert_close_arrays(W, want_w, 3, 0.0);
    ck_assert_close_arrays(o, want_o, 2, 0.0);
}
END_TEST

START_TEST(test_masked_keys_get_no_gradient) {
    /* Padding keys 3 and 4 of sequence 0 are blocked for every query:
     * their weights are exactly 0, so dK, dV (sdpa) and dx_kv (mha) for those
     * positions must be exactly 0.0f, not merely small. Causal on top. */
    enum { B = 2, T = 5, DM = 6, H = 2, DK = 3, DV = 3 };
    Rng r;
    rng_seed(&r, 21);
    uint8_t mask[B * T * T], pad[B * T * T];
    const int len[B] = {3, 5};
    mask_causal(mask, B, T, T);
    mask_padding(pad, len, B, T, T);
    mask_and(mask, pad, B * T * T);

    float Q[B * H * T * DK], K[B * H * T * DK], V[B * H * T * DV], dout[B * H * T * DV];
    float out[B * H * T * DV], w[B * H * T * T], scratch[B * H * T * T];
    float dQ[B * H * T * DK] = {0}, dK[B * H * T * DK] = {0}, dV[B * H * T * DV] = {0};
    rng_fill_normal(&r, Q, sizeof Q / sizeof *Q, 0, 1);
    rng_fill_normal(&r, K, sizeof K / sizeof *K, 0, 1);
    rng_fill_normal(&r, V, sizeof V / sizeof *V, 0, 1);
    rng_fill_normal(&r, dout, sizeof dout / sizeof *dout, 0, 1);
    sdpa_forward(out, w, Q, K, V, mask, B, H, T, T, DK, DV);
    sdpa_backward(dQ, dK, dV, scratch, dout, w, Q, K, V, B, H, T, T, DK, DV);
    for (int hh = 0; hh < H; hh++)
        for (int j = len[0]; j < T; j++) {
            for (int c = 0; c < DK; c++) ck_assert(dK[(hh * T + j) * DK + c] == 0.0f);
            for (int c = 0; c < DV; c++) ck_assert(dV[(hh * T + j) * DV + c] == 0.0f);
        }
    /* and the unmasked keys do get gradient (the test can fail the other way) */
    ck_assert(dK[0] != 0.0f && dV[0] != 0.0f);

    /* the same through multi-head attention (self-attention, x_q == x_kv) */
    float x[B * T * DM], wq[DM * H * DK], wk[DM * H * DK], wv[DM * H * DV], wo[H * DV * DM];
    float gq[DM * H * DK] = {0}, gk[DM * H * DK] = {0}, gv[DM * H * DV] = {0}, go[H * DV * DM] = {0};
    float y[B * T * DM], dy[B * T * DM], dx[B * T * DM] = {0};
    rng_fill_normal(&r, x, sizeof x / sizeof *x, 0, 1);
    rng_fill_normal(&r, wq, sizeof wq / sizeof *wq, 0, 0.5f);
    rng_fill_normal(&r, wk, sizeof wk / sizeof *wk, 0, 0.5f);
    rng_fill_normal(&r, wv, sizeof wv / sizeof *wv, 0, 0.5f);
    rng_fill_normal(&r, wo, sizeof wo / sizeof *wo, 0, 0.5f);
    rng_fill_normal(&r, dy, sizeof dy / sizeof *dy, 0, 1);
    MhaParams p = {wq, wk, wv, wo}, g = {gq, gk, gv, go};
    float *acts = malloc(sizeof(float) * mha_acts_size(B, T, T, H, DK, DV));
    float *scr = malloc(sizeof(float) * mha_scratch_size(B, T, T, H, DK, DV));
    MhaActs a;
    mha_acts_layout(&a, acts, B, T, T, H, DK, DV);
    mha_forward(y, &a, &p, x, x, pad, B, T, T, DM, H, DK, DV);
    /* the padded positions are queries too (they attend to the real keys), so
     * with x_q == x_kv their dx is not zero; pass separate buffers and check
     * only the key/value side */
    float dxq[B * T * DM] = {0};
    mha_backward(dxq, dx, &g, scr, dy, &a, &p, x, x, B, T, T, DM, H, DK, DV);
    for (int j = len[0]; j < T; j++)
        for (int m = 0; m < DM; m++) ck_assert(dx[j * DM + m] == 0.0f);
    ck_assert(dx[0] != 0.0f);
    free(acts);
    free(scr);
}
END_TEST

/* ---- Sweep: sdpa_forward against the per-element reference -------------------------
 * _i picks one combination of (B, h, Tq, Tk, d_k, d_v); each runs with no mask,
 * causal, padding, and causal & padding. Tq != Tk is cross-attention. */
static const int sweep_B[] = {1, 2}, sweep_h[] = {1, 3}, sweep_Tq[] = {1, 2, 5},
                 sweep_Tk[] = {1, 3, 7}, sweep_dk[] = {1, 4, 16}, sweep_dv[] = {2, 3};
#define SWEEP_COUNT (2 * 2 * 3 * 3 * 3 * 2)

START_TEST(test_sdpa_sweep) {
    int i = _i;
    int dv = sweep_dv[i % 2]; i /= 2;
    int dk = sweep_dk[i % 3]; i /= 3;
    int Tk = sweep_Tk[i % 3]; i /= 3;
    int Tq = sweep_Tq[i % 3]; i /= 3;
    int h = sweep_h[i % 2]; i /= 2;
    int B = sweep_B[i % 2];
    size_t nq = (size_t)B * h * Tq * dk, nk = (size_t)B * h * Tk * dk, nv = (size_t)B * h * Tk * dv;
    size_t nw = (size_t)B * h * Tq * Tk, no = (size_t)B * h * Tq * dv;
    float *Q = malloc(nq * 4), *K = malloc(nk * 4), *V = malloc(nv * 4), *out = malloc(no * 4), *w = malloc(nw * 4);
    double *Qd = malloc(nq * 8), *Kd = malloc(nk * 8), *Vd = malloc(nv * 8), *outd = malloc(no * 8), *wd = malloc(nw * 8);
    float *outr = malloc(no * 4), *wr = malloc(nw * 4);
    uint8_t *causal = malloc((size_t)B * Tq * Tk), *pad = malloc((size_t)B * Tq * Tk);
    uint8_t *both = malloc((size_t)B * Tq * Tk);
    Rng r;
    rng_seed(&r, 1000 + (uint64_t)_i);
    rng_fill_normal(&r, Q, nq, 0, 1.5f);
    rng_fill_normal(&r, K, nk, 0, 1.5f);
    rng_fill_normal(&r, V, nv, 0, 1);
    to_double(Qd, Q, nq);
    to_double(Kd, K, nk);
    to_double(Vd, V, nv);
    int key_len[2] = {Tk > 1 ? Tk - 1 : 1, Tk};
    mask_causal(causal, B, Tq, Tk);
    mask_padding(pad, key_len, B, Tq, Tk);
    memcpy(both, causal, (size_t)B * Tq * Tk);
    mask_and(both, pad, B * Tq * Tk);
    const uint8_t *masks[4] = {NULL, causal, pad, both};

    for (int mk = 0; mk < 4; mk++) {
        const uint8_t *m = masks[mk];
        sdpa_forward(out, w, Q, K, V, m, B, h, Tq, Tk, dk, dv);
        ref_sdpa(outd, wd, Qd, Kd, Vd, m, B, h, Tq, Tk, dk, dv);
        to_float(outr, outd, no);
        to_float(wr, wd, nw);
        ck_assert_close_arrays(w, wr, nw, 2e-6);
        ck_assert_close_arrays(out, outr, no, 1e-5);
        /* blocked pairs are exactly zero */
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < h; hh++)
                for (int q = 0; q < Tq; q++)
                    for (int k = 0; k < Tk; k++)
                        if (m && !m[((size_t)b * Tq + q) * Tk + k])
                            ck_assert(w[(((size_t)b * h + hh) * Tq + q) * Tk + k] == 0.0f);
    }
    free(Q); free(K); free(V); free(out); free(w);
    free(Qd); free(Kd); free(Vd); free(outd); free(wd);
    free(outr); free(wr); free(causal); free(pad); free(both);
}
END_TEST

/* ---- Twins: the few-keys path (Tk <= 16; AVX-512: d <= 64) is the general one -------
 * sdpa_forward and sdpa_backward with Tk keys take the vector path; the
 * same problem with 17 keys, the extra ones blocked, takes the per-key
 * loop. A blocked key adds exactly 0 to every sum over the keys and is
 * skipped in the weighted sums, so both must give the same bits: weights,
 * outputs, dQ, dK, dV. _i picks
 * (Tk, d_k, d_v); every case runs without a mask and with causal & padding
 * (which blocks every key of some rows). */
static const int few_dims[][3] = {{1, 16, 16}, {7, 3, 5}, {10, 16, 16}, {10, 64, 64}, {16, 20, 33}, {16, 64, 7},
                                  {9, 100, 72}};

START_TEST(test_sdpa_few_keys_bits) {
    enum { B = 2, H = 3, TQ = 6, TK_GEN = 17 };
    int Tk = few_dims[_i][0], dk = few_dims[_i][1], dv = few_dims[_i][2];
    size_t nq = (size_t)B * H * TQ * dk, no = (size_t)B * H * TQ * dv;
    float *Q = malloc(nq * 4), *K = malloc((size_t)B * H * Tk * dk * 4), *V = malloc((size_t)B * H * Tk * dv * 4);
    float *K17 = malloc((size_t)B * H * TK_GEN * dk * 4), *V17 = malloc((size_t)B * H * TK_GEN * dv * 4);
    float *out = malloc(no * 4), *out17 = malloc(no * 4);
    float *w = malloc((size_t)B * H * TQ * Tk * 4), *w17 = malloc((size_t)B * H * TQ * TK_GEN * 4);
    uint8_t *m = malloc((size_t)B * TQ * Tk), *pad = malloc((size_t)B * TQ * Tk), *m17 = malloc((size_t)B * TQ * TK_GEN);
    size_t nk17 = (size_t)B * H * TK_GEN * dk, nv17 = (size_t)B * H * TK_GEN * dv;
    float *dout = malloc(no * 4), *dQ = malloc(nq * 4), *dQ17 = malloc(nq * 4);
    float *dK = malloc(nk17 * 4), *dK17 = malloc(nk17 * 4), *dV = malloc(nv17 * 4), *dV17 = malloc(nv17 * 4);
    float *scr = malloc((size_t)B * H * TQ * TK_GEN * 4), *scr17 = malloc((size_t)B * H * TQ * TK_GEN * 4);
    Rng r;
    rng_seed(&r, 77 + (uint64_t)_i);
    rng_fill_normal(&r, Q, nq, 0, 2.0f);
    rng_fill_normal(&r, K17, (size_t)B * H * TK_GEN * dk, 0, 2.0f);
    rng_fill_normal(&r, V17, (size_t)B * H * TK_GEN * dv, 0, 1.0f);
    for (int bh = 0; bh < B * H; bh++) {   /* the first Tk keys of each head */
        memcpy(K + (size_t)bh * Tk * dk, K17 + (size_t)bh * TK_GEN * dk, sizeof(float) * Tk * dk);
        memcpy(V + (size_t)bh * Tk * dv, V17 + (size_t)bh * TK_GEN * dv, sizeof(float) * Tk * dv);
    }
    int len[B] = {Tk > 2 ? Tk - 2 : 1, Tk};
    mask_causal(m, B, TQ, Tk);
    mask_padding(pad, len, B, TQ, Tk);
    mask_and(m, pad, B * TQ * Tk);
    if (Tk > 1) m[0] = 0;   /* query 0 of sequence 0: every key blocked */
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *mk = pass ? m : NULL;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < TQ; i++)
                for (int j = 0; j < TK_GEN; j++)
                    m17[((size_t)b * TQ + i) * TK_GEN + j] = j < Tk && (!mk || mk[((size_t)b * TQ + i) * Tk + j]);
        sdpa_forward(out, w, Q, K, V, mk, B, H, TQ, Tk, dk, dv);
        sdpa_forward(out17, w17, Q, K17, V17, m17, B, H, TQ, TK_GEN, dk, dv);
        ck_assert_msg(memcmp(out, out17, no * 4) == 0, "Tk=%d d_k=%d d_v=%d mask=%d: outputs differ", Tk, dk, dv, pass);
        for (size_t row = 0; row < (size_t)B * H * TQ; row++)
            ck_assert_msg(memcmp(w + row * Tk, w17 + row * TK_GEN, sizeof(float) * Tk) == 0,
                          "Tk=%d d_k=%d: weights of row %zu differ", Tk, dk, row);
        /* backward: dQ whole, dK and dV of the first Tk keys; the blocked
         * keys get exactly nothing */
        rng_fill_normal(&r, dout, no, 0, 1.0f);
        memset(dQ, 0, nq * 4), memset(dQ17, 0, nq * 4);
        memset(dK, 0, nk17 * 4), memset(dK17, 0, nk17 * 4), memset(dV, 0, nv17 * 4), memset(dV17, 0, nv17 * 4);
        sdpa_backward(dQ, dK, dV, scr, dout, w, Q, K, V, B, H, TQ, Tk, dk, dv);
        sdpa_backward(dQ17, dK17, dV17, scr17, dout, w17, Q, K17, V17, B, H, TQ, TK_GEN, dk, dv);
        ck_assert_msg(memcmp(dQ, dQ17, nq * 4) == 0, "Tk=%d d_k=%d d_v=%d mask=%d: dQ differs", Tk, dk, dv, pass);
        for (int bh = 0; bh < B * H; bh++) {
            ck_assert_msg(memcmp(dK + (size_t)bh * Tk * dk, dK17 + (size_t)bh * TK_GEN * dk, sizeof(float) * Tk * dk) == 0
                          && memcmp(dV + (size_t)bh * Tk * dv, dV17 + (size_t)bh * TK_GEN * dv,
                                    sizeof(float) * Tk * dv) == 0,
                          "Tk=%d d_k=%d d_v=%d mask=%d: dK or dV of head %d differs", Tk, dk, dv, pass, bh);
            for (int x = Tk * dk; x < TK_GEN * dk; x++) ck_assert(dK17[(size_t)bh * TK_GEN * dk + x] == 0.0f);
        }
    }
    free(Q); free(K); free(V); free(K17); free(V17); free(out); free(out17); free(w); free(w17);
    free(m); free(pad); free(m17);
    free(dout); free(dQ); free(dQ17); free(dK); free(dK17); free(dV); free(dV17); free(scr); free(scr17);
}
END_TEST

START_TEST(test_mha_cross_attention) {
    /* queries from a 2-token sequence, keys/values from a 5-token one, with
     * h*d_k != d_model and d_k != d_v so a mixed-up size would show */
    MhaDims d = {.B = 2, .Tq = 2, .Tk = 5, .d_model = 6, .h = 2, .d_k = 4, .d_v = 2};
    size_t nxq = (size_t)d.B * d.Tq * d.d_model, nxk = (size_t)d.B * d.Tk * d.d_model;
    size_t nwq = (size_t)d.d_model * d.h * d.d_k, nwv = (size_t)d.d_model * d.h * d.d_v;
    float xq[24], xk[60], wq[48], wk[48], wv[24], wo[24], y[24], yr[24];
    double xqd[24], xkd[60], wqd[48], wkd[48], wvd[24], wod[24], yd[24];
    Rng r;
    rng_seed(&r, 5);
    rng_fill_normal(&r, xq, nxq, 0, 1);
    rng_fill_normal(&r, xk, nxk, 0, 1);
    rng_fill_normal(&r, wq, nwq, 0, 0.5f);
    rng_fill_normal(&r, wk, nwq, 0, 0.5f);
    rng_fill_normal(&r, wv, nwv, 0, 0.5f);
    rng_fill_normal(&r, wo, nwv, 0, 0.5f);
    const int len[2] = {5, 3};
    uint8_t pad[2 * 2 * 5];
    mask_padding(pad, len, d.B, d.Tq, d.Tk);
    MhaParams p = {wq, wk, wv, wo};
    float *acts = malloc(sizeof(float) * mha_acts_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v));
    MhaActs a;
    mha_acts_layout(&a, acts, d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v);
    mha_forward(y, &a, &p, xq, xk, pad, d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k, d.d_v);
    to_double(xqd, xq, nxq); to_double(xkd, xk, nxk);
    to_double(wqd, wq, nwq); to_double(wkd, wk, nwq); to_double(wvd, wv, nwv); to_double(wod, wo, nwv);
    ref_mha(yd, xqd, xkd, wqd, wkd, wvd, wod, pad, d);
    to_float(yr, yd, nxq);
    ck_assert_close_arrays(y, yr, nxq, 1e-5);
    /* the saved weights (B,h,Tq,Tk) of sequence 1 give keys 3, 4 nothing */
    for (int hh = 0; hh < d.h; hh++)
        for (int q = 0; q < d.Tq; q++)
            for (int k = 3; k < 5; k++) ck_assert(a.weights[((1 * d.h + hh) * d.Tq + q) * d.Tk + k] == 0.0f);
    free(acts);
}
END_TEST

/* ---- Gradient: finite differences in double -------------------------------------------
 * The analytic gradients come from the float32 backward passes with dout = R
 * (a fixed random tensor), i.e. of the loss L = sum(out * R). The numeric
 * gradients differentiate the same L computed by the double-precision
 * reference forward above, with central differences:
 *     dL/dx ~ (L(x + eps) - L(x - eps)) / (2 eps),  eps = 1e-5.
 * In double the truncation error is ~eps^2 = 1e-10 and rounding ~1e-16/eps =
 * 1e-11, so what is left is float32 error in the analytic side: tolerance
 * 1e-4 * (1 + |numeric|). */
#define FD_EPS 1e-5
#define FD_TOL 1e-4

static void assert_grad_close(const float *analytic, const double *numeric, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        double tol = FD_TOL * (1.0 + fabs(numeric[i]));
        ck_assert_msg(fabs(analytic[i] - numeric[i]) <= tol,
                      "%s[%zu]: backward %.8g, finite difference %.8g (tolerance %.2g)",
                      what, i, analytic[i], numeric[i], tol);
    }
}

static double dot_d(const double *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

START_TEST(test_sdpa_gradient) {
    /* causal & padding mask, cross sizes Tq=3, Tk=4, d_k != d_v */
    enum { B = 2, H = 2, TQ = 3, TK = 4, DK = 3, DV = 2 };
    enum { NQ = B * H * TQ * DK, NK = B * H * TK * DK, NV = B * H * TK * DV, NO = B * H * TQ * DV, NW = B * H * TQ * TK };
    float Q[NQ], K[NK], V[NV], R[NO], out[NO], w[NW], scratch[NW];
    float dQ[NQ] = {0}, dK[NK] = {0}, dV[NV] = {0};
    double Qd[NQ], Kd[NK], Vd[NV], od[NO], wd[NW], nQ[NQ], nK[NK], nV[NV];
    uint8_t mask[B * TQ * TK], pad[B * TQ * TK];
    Rng r;
    rng_seed(&r, 99);
    rng_fill_normal(&r, Q, NQ, 0, 1);
    rng_fill_normal(&r, K, NK, 0, 1);
    rng_fill_normal(&r, V, NV, 0, 1);
    rng_fill_normal(&r, R, NO, 0, 1);
    const int len[B] = {4, 2};
    mask_causal(mask, B, TQ, TK);
    mask_padding(pad, len, B, TQ, TK);
    mask_and(mask, pad, B * TQ * TK);

    sdpa_forward(out, w, Q, K, V, mask, B, H, TQ, TK, DK, DV);
    sdpa_backward(dQ, dK, dV, scratch, R, w, Q, K, V, B, H, TQ, TK, DK, DV);

    to_double(Qd, Q, NQ);
    to_double(Kd, K, NK);
    to_double(Vd, V, NV);
    double *ins[3] = {Qd, Kd, Vd}, *num[3] = {nQ, nK, nV};
    const int sizes[3] = {NQ, NK, NV};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < sizes[t]; i++) {
            double keep = ins[t][i];
            ins[t][i] = keep + FD_EPS;
            ref_sdpa(od, wd, Qd, Kd, Vd, mask, B, H, TQ, TK, DK, DV);
            double lp = dot_d(od, R, NO);
            ins[t][i] = keep - FD_EPS;
            ref_sdpa(od, wd, Qd, Kd, Vd, mask, B, H, TQ, TK, DK, DV);
            double lm = dot_d(od, R, NO);
            ins[t][i] = keep;
            num[t][i] = (lp - lm) / (2 * FD_EPS);
        }
    assert_grad_close(dQ, nQ, NQ, "dQ");
    assert_grad_close(dK, nK, NK, "dK");
    assert_grad_close(dV, nV, NV, "dV");
}
END_TEST

/* One finite-difference check of mha_backward. self: x_kv is x_q (one
 * buffer, one gradient, both contributions added). */
static void check_mha_gradient(MhaDims d, int self, int masked, uint64_t seed) {
    if (self) ck_assert_int_eq(d.Tq, d.Tk);
    size_t nxq = (size_t)d.B * d.Tq * d.d_model, nxk = (size_t)d.B * d.Tk * d.d_model;
    size_t nwq = (size_t)d.d_model * d.h * d.d_k, nwv = (size_t)d.d_model * d.h * d.d_v;
    float *xq = malloc(nxq * 4), *xk = self ? xq : malloc(nxk * 4);
    float *wq = malloc(nwq * 4), *wk = malloc(nwq * 4), *wv = malloc(nwv * 4), *wo = malloc(nwv * 4);
    float *R = malloc(nxq * 4), *y = malloc(nxq * 4);
    float *dxq = calloc(nxq, 4), *dxk = self ? dxq : calloc(nxk, 4);
    float *gq = calloc(nwq, 4), *gk = calloc(nwq, 4), *gv = calloc(nwv, 4), *go = calloc(nwv, 4);
    uint8_t *mask = NULL;
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, xq, nxq, 0, 1);
    if (!self) rng_fill_normal(&r, xk, nxk, 0, 1);
    rng_fill_normal(&r, wq, nwq, 0, 0.5f);
    rng_fill_normal(&r, wk, nwq, 0, 0.5f);
    rng_fill_normal(&r, wv, nwv, 0, 0.5f);
    rng_fill_normal(&r, wo, nwv, 0, 0.5f);
    rng_fill_normal(&r, R, nxq, 0, 1);
    if (masked) {
        /* causal for self-attention, plus the last key of sequence 0 padded */
        mask = malloc((size_t)d.B * d.Tq * d.Tk);
        uint8_t *pad = malloc((size_t)d.B * d.Tq * d.Tk);
        int *len = malloc(sizeof(int) * d.B);
        for (int b = 0; b < d.B; b++) len[b] = b == 0 ? d.Tk - 1 : d.Tk;
        mask_padding(mask, len, d.B, d.Tq, d.Tk);
        if (self) {
            mask_causal(pad, d.B, d.Tq, d.Tk);
            mask_and(mask, pad, d.B * d.Tq * d.Tk);
        }
        free(pad);
        free(len);
    }

    MhaParams p = {wq, wk, wv, wo}, g = {gq, gk, gv, go};
    float *acts = malloc(sizeof(float) * mha_acts_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v));
    float *scr = malloc(sizeof(float) * mha_scratch_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v));
    MhaActs a;
    mha_acts_layout(&a, acts, d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v);
    mha_forward(y, &a, &p, xq, xk, mask, d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k, d.d_v);
    mha_backward(dxq, dxk, &g, scr, R, &a, &p, xq, xk, d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k, d.d_v);

    /* double copies; for self-attention x_kv is the same double buffer */
    double *Xq = malloc(nxq * 8), *Xk = self ? Xq : malloc(nxk * 8);
    double *Wq = malloc(nwq * 8), *Wk = malloc(nwq * 8), *Wv = malloc(nwv * 8), *Wo = malloc(nwv * 8);
    double *yd = malloc(nxq * 8);
    to_double(Xq, xq, nxq);
    if (!self) to_double(Xk, xk, nxk);
    to_double(Wq, wq, nwq); to_double(Wk, wk, nwq); to_double(Wv, wv, nwv); to_double(Wo, wo, nwv);

    /* forward check first: the double reference is the same function */
    ref_mha(yd, Xq, Xk, Wq, Wk, Wv, Wo, mask, d);
    float *yr = malloc(nxq * 4);
    to_float(yr, yd, nxq);
    ck_assert_close_arrays(y, yr, nxq, 1e-5);

    double *ins[6] = {Xq, Xk, Wq, Wk, Wv, Wo};
    const float *an[6] = {dxq, dxk, gq, gk, gv, go};
    const size_t sizes[6] = {nxq, nxk, nwq, nwq, nwv, nwv};
    const char *names[6] = {"dx_q", "dx_kv", "dW_Q", "dW_K", "dW_V", "dW_O"};
    for (int t = self ? 1 : 0; t < 6; t++) {
        double *num = malloc(sizes[t] * 8);
        for (size_t i = 0; i < sizes[t]; i++) {
            double keep = ins[t][i];
            ins[t][i] = keep + FD_EPS;
            ref_mha(yd, Xq, Xk, Wq, Wk, Wv, Wo, mask, d);
            double lp = dot_d(yd, R, nxq);
            ins[t][i] = keep - FD_EPS;
            ref_mha(yd, Xq, Xk, Wq, Wk, Wv, Wo, mask, d);
            double lm = dot_d(yd, R, nxq);
            ins[t][i] = keep;
            num[i] = (lp - lm) / (2 * FD_EPS);
        }
        assert_grad_close(an[t], num, sizes[t], names[t]);
        free(num);
    }

    free(yr); free(yd); free(Wq); free(Wk); free(Wv); free(Wo);
    if (!self) { free(Xk); free(xk); free(dxk); }
    free(Xq); free(xq); free(dxq);
    free(wq); free(wk); free(wv); free(wo); free(R); free(y);
    free(gq); free(gk); free(gv); free(go);
    free(mask); free(acts); free(scr);
}

START_TEST(test_mha_gradient_cross) {
    MhaDims d = {.B = 2, .Tq = 3, .Tk = 4, .d_model = 4, .h = 2, .d_k = 3, .d_v = 2};
    check_mha_gradient(d, 0, 1, 31);
    check_mha_gradient(d, 0, 0, 32);
}
END_TEST

START_TEST(test_mha_gradient_self) {
    MhaDims d = {.B = 2, .Tq = 4, .Tk = 4, .d_model = 6, .h = 3, .d_k = 2, .d_v = 2};
    check_mha_gradient(d, 1, 1, 41);
    check_mha_gradient(d, 1, 0, 42);
}
END_TEST

/* ---- Determinism -------------------------------------------------------------------
 * Heads are shared among threads when the batch is big enough; each head is
 * done start to finish by one thread, so 1 thread and all threads must give
 * the same bits, forward and backward (with a padding mask, so the skipped
 * blocked pairs are covered too). Sizes: B*h*Tq*Tk*(d_k+d_v) = 32*8*16*16*64,
 * about 4.2M multiply-adds, at the threshold where attention.c goes parallel. */
enum { DB = 32, DT = 16, DH = 8, DD = 32, DM_DET = DH * DD };

static void mha_run(float *y, float *grads, float *dx, const float *x, const float *w, const float *dy,
                    const uint8_t *mask, float *acts, float *scr) {
    size_t nw = (size_t)DM_DET * DM_DET;
    MhaParams p = {(float *)w, (float *)w + nw, (float *)w + 2 * nw, (float *)w + 3 * nw};
    MhaParams g = {grads, grads + nw, grads + 2 * nw, grads + 3 * nw};
    MhaActs a;
    memset(grads, 0, sizeof(float) * 4 * nw);
    memset(dx, 0, sizeof(float) * DB * DT * DM_DET);
    mha_acts_layout(&a, acts, DB, DT, DT, DH, DD, DD);
    mha_forward(y, &a, &p, x, x, mask, DB, DT, DT, DM_DET, DH, DD, DD);
    mha_backward(dx, dx, &g, scr, dy, &a, &p, x, x, DB, DT, DT, DM_DET, DH, DD, DD);
}

START_TEST(test_mha_threads_bit_identical) {
    size_t nx = (size_t)DB * DT * DM_DET, nw = 4 * (size_t)DM_DET * DM_DET;
    float *x = malloc(sizeof(float) * nx), *dy = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw);
    float *y[2], *g[2], *dx[2];
    for (int r = 0; r < 2; r++) {
        y[r] = malloc(sizeof(float) * nx);
        dx[r] = malloc(sizeof(float) * nx);
        g[r] = malloc(sizeof(float) * nw);
    }
    float *acts = malloc(sizeof(float) * mha_acts_size(DB, DT, DT, DH, DD, DD));
    float *scr = malloc(sizeof(float) * mha_scratch_size(DB, DT, DT, DH, DD, DD));
    uint8_t *mask = malloc((size_t)DB * DT * DT);
    int len[DB];
    for (int b = 0; b < DB; b++) len[b] = 1 + b % DT;
    mask_padding(mask, len, DB, DT, DT);
    Rng r;
    rng_seed(&r, 77);
    rng_fill_normal(&r, x, nx, 0, 1);
    rng_fill_normal(&r, dy, nx, 0, 1);
    rng_fill_normal(&r, w, nw, 0, 0.1f);

    mha_run(y[0], g[0], dx[0], x, w, dy, mask, acts, scr);
    int threads = 1;
#ifdef _OPENMP
    /* 1 thread versus all (under valgrind the suite runs with one thread:
     * then this compares two identical runs, which must agree too) */
    threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    mha_run(y[1], g[1], dx[1], x, w, dy, mask, acts, scr);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    ck_assert_msg(memcmp(y[0], y[1], sizeof(float) * nx) == 0, "output: 1 thread differs from %d", threads);
    ck_assert_msg(memcmp(dx[0], dx[1], sizeof(float) * nx) == 0, "dx: 1 thread differs from %d", threads);
    ck_assert_msg(memcmp(g[0], g[1], sizeof(float) * nw) == 0, "weight gradients: 1 thread differs from %d",
                  threads);
    for (int i = 0; i < 2; i++) {
        free(y[i]);
        free(dx[i]);
        free(g[i]);
    }
    free(x); free(dy); free(w); free(acts); free(scr); free(mask);
}
END_TEST

/* ---- Twins: the fast sdpa pair against the plain reference pair -------------------
 * Each _i is one set of sizes, chosen around the fast loops' 16-float vectors
 * (1, 7, 17, 63, 65 wide) and lengths; each runs with no mask, causal, and
 * causal & padding where sequence 1 (when B = 2) has no real key at all. */
typedef struct { int B, h, Tq, Tk, d_k, d_v; } SdpaDims;
static const SdpaDims twin_dims[] = {
    {1, 1, 1, 1, 1, 1},   {1, 2, 7, 7, 7, 17},  {2, 1, 17, 7, 63, 1},
    {1, 3, 5, 17, 65, 7}, {2, 2, 7, 17, 17, 65}, {2, 1, 63, 65, 16, 16},
};

static float *twin_randn(Rng *r, size_t n) {
    float *x = malloc(n * sizeof(float));
    rng_fill_normal(r, x, n, 0, 1);
    return x;
}

static float *twin_copy(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

START_TEST(test_sdpa_twins) {
    SdpaDims d = twin_dims[_i];
    size_t nq = (size_t)d.B * d.h * d.Tq * d.d_k, nk = (size_t)d.B * d.h * d.Tk * d.d_k;
    size_t nv = (size_t)d.B * d.h * d.Tk * d.d_v, no = (size_t)d.B * d.h * d.Tq * d.d_v;
    size_t nw = (size_t)d.B * d.h * d.Tq * d.Tk, nm = (size_t)d.B * d.Tq * d.Tk;
    Rng r;
    rng_seed(&r, 900 + (uint64_t)_i);
    float *Q = twin_randn(&r, nq), *K = twin_randn(&r, nk), *V = twin_randn(&r, nv), *dO = twin_randn(&r, no);
    float *out = malloc(no * 4), *w = malloc(nw * 4), *outr = malloc(no * 4), *wr = malloc(nw * 4);
    float *scr = malloc(nw * 4);
    uint8_t *causal = malloc(nm), *both = malloc(nm), *pad = malloc(nm);
    int key_len[2] = {d.Tk / 2 + 1, 0};
    mask_causal(causal, d.B, d.Tq, d.Tk);
    mask_causal(both, d.B, d.Tq, d.Tk);
    mask_padding(pad, key_len, d.B, d.Tq, d.Tk);
    mask_and(both, pad, (int)nm);
    const uint8_t *masks[3] = {NULL, causal, both};
    for (int mk = 0; mk < 3; mk++) {
        sdpa_forward(out, w, Q, K, V, masks[mk], d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        sdpa_forward_ref(outr, wr, Q, K, V, masks[mk], d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        ck_assert_close_arrays(w, wr, nw, 1e-6);
        ck_assert_close_arrays(out, outr, no, 2e-6);
        /* backward from the same weights, into gradients that start non-zero
         * (both accumulate) */
        float *dQ = twin_randn(&r, nq), *dK = twin_randn(&r, nk), *dV = twin_randn(&r, nv);
        float *dQr = twin_copy(dQ, nq), *dKr = twin_copy(dK, nk), *dVr = twin_copy(dV, nv);
        sdpa_backward(dQ, dK, dV, scr, dO, w, Q, K, V, d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        sdpa_backward_ref(dQr, dKr, dVr, scr, dO, w, Q, K, V, d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        ck_assert_close_arrays(dQ, dQr, nq, 1e-5);
        ck_assert_close_arrays(dK, dKr, nk, 1e-5);
        ck_assert_close_arrays(dV, dVr, nv, 1e-5);
        /* NULL means "not wanted" in both */
        sdpa_backward(NULL, dK, NULL, scr, dO, w, Q, K, V, d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        sdpa_backward_ref(NULL, dKr, NULL, scr, dO, w, Q, K, V, d.B, d.h, d.Tq, d.Tk, d.d_k, d.d_v);
        ck_assert_close_arrays(dK, dKr, nk, 1e-5);
        free(dQ); free(dK); free(dV); free(dQr); free(dKr); free(dVr);
    }
    free(Q); free(K); free(V); free(dO); free(out); free(w); free(outr); free(wr); free(scr);
    free(causal); free(both); free(pad);
}
END_TEST

/* mha_forward reads each head where the projection put it, (B,T,h*d), and
 * writes its output straight into concat. That must be the very same
 * computation as copying the heads out into (B,h,T,d) blocks, running
 * sdpa_forward there and merging back: the same bits, not just close. */
START_TEST(test_mha_heads_in_place) {
    enum { B = 2, Tq = 7, Tk = 17, DM = 12, H = 3, DK = 5, DV = 7 };
    Rng r;
    rng_seed(&r, 31);
    float *xq = twin_randn(&r, (size_t)B * Tq * DM), *xkv = twin_randn(&r, (size_t)B * Tk * DM);
    float *wq = twin_randn(&r, DM * H * DK), *wk = twin_randn(&r, DM * H * DK);
    float *wv = twin_randn(&r, DM * H * DV), *wo = twin_randn(&r, H * DV * DM);
    MhaParams p = {wq, wk, wv, wo};
    uint8_t mask[B * Tq * Tk];
    int len[B] = {Tk, 4};
    mask_padding(mask, len, B, Tq, Tk);
    float *acts = malloc(sizeof(float) * mha_acts_size(B, Tq, Tk, H, DK, DV));
    MhaActs a;
    mha_acts_layout(&a, acts, B, Tq, Tk, H, DK, DV);
    float out[B * Tq * DM];
    mha_forward(out, &a, &p, xq, xkv, mask, B, Tq, Tk, DM, H, DK, DV);

    /* the same with split copies */
    float qh[B * H * Tq * DK], kh[B * H * Tk * DK], vh[B * H * Tk * DV], oh[B * H * Tq * DV];
    float w[B * H * Tq * Tk], concat[B * Tq * H * DV];
    heads_split(qh, a.q, B, Tq, H, DK);
    heads_split(kh, a.k, B, Tk, H, DK);
    heads_split(vh, a.v, B, Tk, H, DV);
    sdpa_forward(oh, w, qh, kh, vh, mask, B, H, Tq, Tk, DK, DV);
    heads_merge(concat, oh, B, Tq, H, DV);
    ck_assert(memcmp(a.weights, w, sizeof w) == 0);
    ck_assert(memcmp(a.concat, concat, sizeof concat) == 0);
    /* and close to the plain reference (entries reach ~10 here: unit-normal
     * weights, so 1e-5 is a few float roundings) */
    float wr[B * H * Tq * Tk];
    sdpa_forward_ref(oh, wr, qh, kh, vh, mask, B, H, Tq, Tk, DK, DV);
    heads_merge(concat, oh, B, Tq, H, DV);
    ck_assert_close_arrays(a.concat, concat, sizeof concat / sizeof *concat, 1e-5);
    /* q, k, v, weights and concat, each once */
    ck_assert_uint_eq(mha_acts_size(B, Tq, Tk, H, DK, DV),
                      (size_t)B * (Tq * H * DK + Tk * H * DK + Tk * H * DV + H * Tq * Tk + Tq * H * DV));
    free(xq); free(xkv); free(wq); free(wk); free(wv); free(wo); free(acts);
}
END_TEST

Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_sdpa_by_hand);
    tcase_add_test(core, test_sdpa_by_hand_masked);
    tcase_add_test(core, test_masks_patterns);
    tcase_add_test(core, test_heads_split_merge);
    tcase_add_test(core, test_softmax_in_place);
    suite_add_tcase(s, core);

    TCase *limits = tcase_create("Limits");
    tcase_add_test(limits, test_fully_masked_rows);
    tcase_add_test(limits, test_one_key_and_huge_scores);
    tcase_add_test(limits, test_masked_keys_get_no_gradient);
    suite_add_tcase(s, limits);

    TCase *sweep = tcase_create("Sweep");
    tcase_add_loop_test(sweep, test_sdpa_sweep, 0, SWEEP_COUNT);
    tcase_add_test(sweep, test_mha_cross_attention);
    suite_add_tcase(s, sweep);

    TCase *twins = tcase_create("Twins");
    tcase_add_loop_test(twins, test_sdpa_twins, 0, (int)(sizeof twin_dims / sizeof twin_dims[0]));
    tcase_add_test(twins, test_mha_heads_in_place);
    tcase_add_loop_test(twins, test_sdpa_few_keys_bits, 0, (int)(sizeof few_dims / sizeof few_dims[0]));
    suite_add_tcase(s, twins);

    TCase *grad = tcase_create("Gradient");
    tcase_add_test(grad, test_sdpa_gradient);
    tcase_add_test(grad, test_mha_gradient_cross);
    tcase_add_test(grad, test_mha_gradient_self);
    suite_add_tcase(s, grad);

    TCase *det = tcase_create("Determinism");
    tcase_add_test(det, test_mha_threads_bit_identical);
    suite_add_tcase(s, det);
    return s;
}
