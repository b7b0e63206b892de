/* check_multihead.c - multi-head attention (Sec. 3.2.2), forward and
 * backward: the tuned mha_forward / mha_backward (layers/multihead.c) and
 * their plain twins mha_forward_ref / mha_backward_ref (ref/multihead_ref.c).
 *
 * Test cases:
 *   Core         heads split/merge, the size of the saved activations
 *   Limits       masked keys get exactly no gradient
 *   Sweep        cross-attention against the per-element double reference
 *   Twins        mha_forward / mha_backward against the plain twins on
 *                several shapes (self and cross, Tq != Tk, masks), printing
 *                the max differences; the in-place heads against split copies
 *   Gradient     finite differences of the double reference against mha_backward
 *   Determinism  1 thread and all threads give the same bits
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref/attention.h"
#include "ref/multihead_ref.h"
#include "fast/attention_fast.h"
#include "fast/parallel.h"
#include "layers/multihead.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "testutil.h"
#include "attention_double.h"

/* ---- Core ---------------------------------------------------------------------------- */

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

/* ---- Limits ---------------------------------------------------------------------------- */

START_TEST(test_masked_keys_get_no_gradient) {
    /* Padding keys 3 and 4 of sequence 0 are blocked for every query: their
     * weights are exactly 0, so dx_kv for those positions must be exactly
     * 0.0f, not merely small (self-attention, x_q == x_kv). */
    enum { B = 2, T = 5, DM = 6, H = 2, DK = 3, DV = 3 };
    Rng r;
    rng_seed(&r, 21);
    uint8_t pad[B * T * T];
    const int len[B] = {3, 5};
    mask_padding(pad, len, B, T, T);
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

/* ---- Sweep ------------------------------------------------------------------------------ */

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
/* ---- Twins: the tuned pair against the plain pair -----------------------------------
 * Each _i is one shape: self-attention (x_kv = x_q, one dx buffer for both
 * contributions) or cross-attention with Tq != Tk, d_k != d_v or
 * h*d_k != d_model, short heads (the vector kernels for up to 16 keys) and
 * long ones (the general loop). Each runs without a mask and with one
 * (padding; causal too for self-attention; one sequence with no real key
 * when B = 2). The forward pairs must fill the same activations; the
 * backward pairs start from the same saved activations and from gradients
 * that are not zero (both accumulate). Inputs and weights are scaled so
 * every tensor is of order 1: the tolerances are a few float roundings of
 * sums of up to 64 terms. */
static const struct { MhaDims d; int self; } mha_twins[] = {
    {{.B = 1, .Tq = 1, .Tk = 1, .d_model = 4, .h = 1, .d_k = 4, .d_v = 4}, 1},
    {{.B = 1, .Tq = 5, .Tk = 5, .d_model = 16, .h = 4, .d_k = 4, .d_v = 4}, 1},     /* chapter 04 */
    {{.B = 2, .Tq = 4, .Tk = 7, .d_model = 12, .h = 3, .d_k = 5, .d_v = 7}, 0},
    {{.B = 2, .Tq = 17, .Tk = 9, .d_model = 32, .h = 2, .d_k = 20, .d_v = 16}, 0},
    {{.B = 2, .Tq = 20, .Tk = 20, .d_model = 64, .h = 4, .d_k = 16, .d_v = 16}, 1},
};

/* y = a copy of x (n floats) */
static float *copy_of(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* max |a - b| over n floats */
static double max_diff(const float *a, const float *b, size_t n) { return diff_arrays(a, b, n).max_abs; }

START_TEST(test_mha_twins) {
    MhaDims d = mha_twins[_i].d;
    int self = mha_twins[_i].self;
    size_t nxq = (size_t)d.B * d.Tq * d.d_model, nxk = (size_t)d.B * d.Tk * d.d_model;
    size_t nwq = (size_t)d.d_model * d.h * d.d_k, nwv = (size_t)d.d_model * d.h * d.d_v;
    size_t nw = 2 * nwq + 2 * nwv, nm = (size_t)d.B * d.Tq * d.Tk;
    size_t nacts = mha_acts_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v);
    Rng r;
    rng_seed(&r, 500 + (uint64_t)_i);
    float *xq = randn(&r, nxq, 1.0f), *xkv = self ? xq : randn(&r, nxk, 1.0f);
    float *w = randn(&r, nw, 1.0f / sqrtf((float)d.d_model)), *dy = randn(&r, nxq, 1.0f);
    MhaParams p = {w, w + nwq, w + 2 * nwq, w + 2 * nwq + nwv};
    float *y = malloc(nxq * 4), *yr = malloc(nxq * 4), *acts = malloc(nacts * 4), *actsr = malloc(nacts * 4);
    float *scr = malloc(mha_scratch_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v) * 4);
    float *scrr = malloc(mha_ref_scratch_size(d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v) * 4);
    uint8_t *mask = malloc(nm), *causal = malloc(nm);
    int len[2] = {d.Tk, 0};
    mask_padding(mask, len, d.B, d.Tq, d.Tk);
    if (self) mask_causal(causal, d.B, d.Tq, d.Tk), mask_and(mask, causal, (int)nm);
    MhaActs a, ar;
    mha_acts_layout(&a, acts, d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v);
    mha_acts_layout(&ar, actsr, d.B, d.Tq, d.Tk, d.h, d.d_k, d.d_v);
    double fwd = 0, bwd = 0;   /* the largest differences seen, for the printout */
    for (int masked = 0; masked < 2; masked++) {
        const uint8_t *m = masked ? mask : NULL;
        mha_forward(y, &a, &p, xq, xkv, m, d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k, d.d_v);
        mha_forward_ref(yr, ar.q, ar.k, ar.v, ar.weights, ar.concat, scrr, &p, xq, xkv, m, d.B, d.Tq, d.Tk,
                        d.d_model, d.h, d.d_k, d.d_v);
        ck_assert_close_arrays(a.q, ar.q, (size_t)(a.weights - a.q), 1e-5);   /* q, k, v */
        ck_assert_close_arrays(a.weights, ar.weights, (size_t)(a.concat - a.weights), 1e-5);
        ck_assert_close_arrays(a.concat, ar.concat, (size_t)(acts + nacts - a.concat), 1e-5);
        ck_assert_close_arrays(y, yr, nxq, 1e-5);
        fwd = fmax(fwd, fmax(max_diff(y, yr, nxq), max_diff(acts, actsr, nacts)));

        float *g = randn(&r, nw, 1.0f), *dxq = randn(&r, nxq, 1.0f), *dxk = self ? dxq : randn(&r, nxk, 1.0f);
        float *gr = copy_of(g, nw), *dxqr = copy_of(dxq, nxq), *dxkr = self ? dxqr : copy_of(dxk, nxk);
        MhaParams dp = {g, g + nwq, g + 2 * nwq, g + 2 * nwq + nwv};
        MhaParams dpr = {gr, gr + nwq, gr + 2 * nwq, gr + 2 * nwq + nwv};
        mha_backward(dxq, dxk, &dp, scr, dy, &a, &p, xq, xkv, d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k, d.d_v);
        mha_backward_ref(dxqr, dxkr, &dpr, scrr, dy, a.q, a.k, a.v, a.weights, a.concat, &p, xq, xkv, d.B, d.Tq,
                         d.Tk, d.d_model, d.h, d.d_k, d.d_v);
        ck_assert_close_arrays(dxq, dxqr, nxq, 2e-5);
        ck_assert_close_arrays(dxk, dxkr, nxk, 2e-5);
        ck_assert_close_arrays(g, gr, nw, 2e-5);
        bwd = fmax(bwd, fmax(max_diff(g, gr, nw), fmax(max_diff(dxq, dxqr, nxq), max_diff(dxk, dxkr, nxk))));
        free(g); free(gr); free(dxq); free(dxqr);
        if (!self) free(dxk), free(dxkr);
    }
    printf("check_multihead: %s B=%d Tq=%d Tk=%d d_model=%d h=%d d_k=%d d_v=%d: max |tuned - plain| "
           "forward %.2g, backward %.2g\n", self ? "self " : "cross", d.B, d.Tq, d.Tk, d.d_model, d.h, d.d_k,
           d.d_v, fwd, bwd);
    free(xq); if (!self) free(xkv);
    free(w); free(dy); free(y); free(yr); free(acts); free(actsr); free(scr); free(scrr); free(mask); free(causal);
}
END_TEST

/* ---- Twins: the heads read in place ---------------------------------------------------
 * mha_forward reads each head where the projection put it, (B,T,h*d), and
 * writes its output straight into concat. That must be the very same
 * computation as copying the heads out into (B,h,T,d) blocks, running
 * sdpa_forward there and merging back: the same bits, not just close. */
START_TEST(test_mha_heads_in_place) {
    enum { B = 2, Tq = 7, Tk = 17, DM = 12, H = 3, DK = 5, DV = 7 };
    Rng r;
    rng_seed(&r, 31);
    float *xq = randn(&r, (size_t)B * Tq * DM, 1.0f), *xkv = randn(&r, (size_t)B * Tk * DM, 1.0f);
    float *wq = randn(&r, DM * H * DK, 1.0f), *wk = randn(&r, DM * H * DK, 1.0f);
    float *wv = randn(&r, DM * H * DV, 1.0f), *wo = randn(&r, H * DV * DM, 1.0f);
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

/* ---- Gradient: finite differences in double (attention_double.h) ------------------- */

/* L = sum(y * R) of the double reference at the double weights and inputs */
typedef struct {
    const double *Xq, *Xk, *Wq, *Wk, *Wv, *Wo;
    double *y;
    const float *R;
    const uint8_t *mask;
    MhaDims d;
} MhaLoss;

static double mha_loss(void *ctx) {
    MhaLoss *c = ctx;
    ref_mha(c->y, c->Xq, c->Xk, c->Wq, c->Wk, c->Wv, c->Wo, c->mask, c->d);
    return dot_d(c->y, c->R, (size_t)c->d.B * c->d.Tq * c->d.d_model);
}

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
    MhaLoss c = {Xq, Xk, Wq, Wk, Wv, Wo, yd, R, mask, d};
    for (int t = self ? 1 : 0; t < 6; t++)
        fd_check_double(mha_loss, &c, ins[t], an[t], sizes[t], FD_EPS, FD_TOL, FD_TOL, names[t]);

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
 * about 4.2M multiply-adds, at the threshold where attention_fast.c goes parallel. */
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
    /* 1 thread versus all (under valgrind the suite runs with one thread:
     * then this compares two identical runs, which must agree too) */
    int threads = parallel_threads();
    parallel_set_threads(1);
    mha_run(y[1], g[1], dx[1], x, w, dy, mask, acts, scr);
    parallel_set_threads(threads);
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

Suite *multihead_suite(void) {
    Suite *s = suite_create("multihead");
    suite_case(s, "Core", test_heads_split_merge);

    suite_case(s, "Limits", test_masked_keys_get_no_gradient);

    suite_case(s, "Sweep", test_mha_cross_attention);

    TCase *twins = suite_case(s, "Twins", test_mha_heads_in_place);
    tcase_add_loop_test(twins, test_mha_twins, 0, (int)(sizeof mha_twins / sizeof mha_twins[0]));

    suite_case(s, "Gradient", test_mha_gradient_cross, test_mha_gradient_self);

    suite_case(s, "Determinism", test_mha_threads_bit_identical);
    return s;
}
