/* check_attention.c - masks and scaled dot-product attention (Eq. 1),
 * forward and backward: the plain pair (ref/attention.c) and the fast one
 * (fast/attention_fast.c). Multi-head attention is check_multihead.c.
 *
 * Test cases:
 *   Core      hand-computed attention (both twins), mask patterns
 *   Limits    fully masked rows, one key, huge scores, masked keys get no gradient
 *   Sweep     loop tests over batch/heads/lengths/widths against a per-element
 *             reference computed in double (attention_double.h)
 *   Twins     the fast sdpa_forward / sdpa_backward against their plain
 *             twins (sdpa_*_ref); the short-head kernels against the general loop
 *   Gradient  finite differences of the double-precision reference against
 *             sdpa_backward
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ref/attention.h"
#include "fast/attention_fast.h"
#include "ref/ops.h"
#include "core/rng.h"
#include "testutil.h"
#include "attention_double.h"

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
/* the twins, for the loop tests that run both: _i 0 the fast one, 1 the plain one */
typedef void (*SdpaForwardFn)(float *out, float *weights, const float *Q, const float *K, const float *V,
                              const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v);
static const SdpaForwardFn sdpa_twin[2] = {sdpa_forward, sdpa_forward_ref};

START_TEST(test_sdpa_by_hand) {
    float Q[4], K[6], V[6], out[4], w[6];
    hand_inputs(Q, K, V);
    sdpa_twin[_i](out, w, Q, K, V, NULL, 1, 1, 2, 3, 2, 2);
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
    sdpa_twin[_i](out, w, Q, K, V, mask, 1, 1, 2, 3, 2, 2);
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

START_TEST(test_softmax_in_place) {
    /* ops.h's softmax may run in place (out == inp) on a row of scores,
     * as the plain attention loops do their own: this pins that it may */
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
     * their weights are exactly 0, so dK, dV for those positions must be
     * exactly 0.0f, not merely small. Causal on top. (The same through
     * multi-head attention: check_multihead.c.) */
    enum { B = 2, T = 5, H = 2, DK = 3, DV = 3 };
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

/* ---- Twins: the fast sdpa pair against the plain reference pair -------------------
 * Each _i is one set of sizes, chosen around the fast loops' 16-float vectors
 * (1, 7, 17, 63, 65 wide) and lengths; each runs with no mask, causal, and
 * causal & padding where sequence 1 (when B = 2) has no real key at all. */
typedef struct { int B, h, Tq, Tk, d_k, d_v; } SdpaDims;
static const SdpaDims twin_dims[] = {
    {1, 1, 1, 1, 1, 1},   {1, 2, 7, 7, 7, 17},  {2, 1, 17, 7, 63, 1},
    {1, 3, 5, 17, 65, 7}, {2, 2, 7, 17, 17, 65}, {2, 1, 63, 65, 16, 16},
};

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
    float *Q = randn(&r, nq, 1.0f), *K = randn(&r, nk, 1.0f), *V = randn(&r, nv, 1.0f), *dO = randn(&r, no, 1.0f);
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
        float *dQ = randn(&r, nq, 1.0f), *dK = randn(&r, nk, 1.0f), *dV = randn(&r, nv, 1.0f);
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

/* ---- Gradient: finite differences in double (attention_double.h) ------------------- */

/* L = sum(out * R) of the double reference at the double inputs Q, K, V */
typedef struct {
    const double *Q, *K, *V;
    double *out, *w;
    const float *R;
    const uint8_t *mask;
    int B, H, Tq, Tk, d_k, d_v;
} SdpaLoss;

static double sdpa_loss(void *ctx) {
    SdpaLoss *c = ctx;
    ref_sdpa(c->out, c->w, c->Q, c->K, c->V, c->mask, c->B, c->H, c->Tq, c->Tk, c->d_k, c->d_v);
    return dot_d(c->out, c->R, (size_t)c->B * c->H * c->Tq * c->d_v);
}

START_TEST(test_sdpa_gradient) {
    /* causal & padding mask, cross sizes Tq=3, Tk=4, d_k != d_v */
    enum { B = 2, H = 2, TQ = 3, TK = 4, DK = 3, DV = 2 };
    enum { NQ = B * H * TQ * DK, NK = B * H * TK * DK, NV = B * H * TK * DV, NO = B * H * TQ * DV, NW = B * H * TQ * TK };
    float Q[NQ], K[NK], V[NV], R[NO], out[NO], w[NW], scratch[NW];
    float dQ[NQ] = {0}, dK[NK] = {0}, dV[NV] = {0};
    double Qd[NQ], Kd[NK], Vd[NV], od[NO], wd[NW];
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
    SdpaLoss c = {Qd, Kd, Vd, od, wd, R, mask, B, H, TQ, TK, DK, DV};
    fd_check_double(sdpa_loss, &c, Qd, dQ, NQ, FD_EPS, FD_TOL, FD_TOL, "Q");
    fd_check_double(sdpa_loss, &c, Kd, dK, NK, FD_EPS, FD_TOL, FD_TOL, "K");
    fd_check_double(sdpa_loss, &c, Vd, dV, NV, FD_EPS, FD_TOL, FD_TOL, "V");
}
END_TEST

Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *core = suite_case(s, "Core", test_masks_patterns, test_softmax_in_place);
    tcase_add_loop_test(core, test_sdpa_by_hand, 0, 2);
    tcase_add_loop_test(core, test_sdpa_by_hand_masked, 0, 2);

    suite_case(s, "Limits", test_fully_masked_rows, test_one_key_and_huge_scores,
               test_masked_keys_get_no_gradient);

    TCase *sweep = tcase_create("Sweep");
    tcase_add_loop_test(sweep, test_sdpa_sweep, 0, SWEEP_COUNT);
    suite_add_tcase(s, sweep);

    TCase *twins = tcase_create("Twins");
    tcase_add_loop_test(twins, test_sdpa_twins, 0, (int)(sizeof twin_dims / sizeof twin_dims[0]));
    tcase_add_loop_test(twins, test_sdpa_few_keys_bits, 0, (int)(sizeof few_dims / sizeof few_dims[0]));
    suite_add_tcase(s, twins);

    suite_case(s, "Gradient", test_sdpa_gradient);
    return s;
}
