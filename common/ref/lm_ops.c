/* lm_ops.c - RMSNorm, rotary position embedding, SwiGLU's gate and
 * grouped-query attention: what a 2026 decoder uses where the paper's has
 * LayerNorm, added sinusoids, ReLU and multi-head attention.
 *
 * Each is a forward/backward pair side by side, plain loops on one thread:
 * the reference. Backward functions quote the forward line they
 * differentiate and ACCUMULATE (+=) into gradients the caller zeroed.
 * Nothing here allocates. tests/check_lmops.c checks each against hand
 * values and finite differences; tools/parity/lm_ops.py against PyTorch.
 */
#include "ref/lm_ops.h"
#include "ref/attention.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>

/* ========================================================================== */
/* RMSNorm (Zhang & Sennrich 2019)                                            */
/* ========================================================================== */

/* y = x * rstd * g, rstd = 1/sqrt(mean(x^2) + eps). Zhang & Sennrich found
 * LayerNorm's re-centring (the mean) does little: dividing by the root mean
 * square alone keeps the row's scale fixed, costs one sum instead of two,
 * and drops beta. The sum of squares is taken in double, as layernorm's. */
void rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *gain, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C;
        float *y = out + (long)n * C;
        double sq = 0.0;
        for (int c = 0; c < C; c++) sq += (double)x[c] * x[c];
        float s = (float)(1.0 / sqrt(sq / C + RMSNORM_EPS));
        for (int c = 0; c < C; c++) y[c] = gain[c] * (x[c] * s);
        rstd[n] = s;
    }
}

/* forward: norm = x * rstd ;  y = gain * norm
 *   dgain += dy * norm
 *   dnorm  = dy * gain
 *   dx    += rstd * (dnorm - norm * mean(dnorm * norm))
 * The last line is LayerNorm's without its mean(dnorm) term: rstd depends on
 * every x of the row (d rstd / d x_c = -rstd^3 x_c / C), the mean does not
 * appear. */
void rmsnorm_backward_ref(float *dinp, float *dgain, const float *dout, const float *inp,
                          const float *rstd, const float *gain, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float s = rstd[n];
        if (dinp) {
            float *dx = dinp + (long)n * C;
            double b = 0.0;                   /* sum of dnorm * norm */
            for (int c = 0; c < C; c++) b += (double)(gain[c] * dy[c]) * (x[c] * s);
            float dnorm_norm_mean = (float)(b / C);
            for (int c = 0; c < C; c++) dx[c] += s * (gain[c] * dy[c] - (x[c] * s) * dnorm_norm_mean);
        }
        if (dgain)
            for (int c = 0; c < C; c++) dgain[c] += dy[c] * (x[c] * s);
    }
}

/* ========================================================================== */
/* rotary position embedding, RoPE (Su et al. 2021)                           */
/* ========================================================================== */

/* Pair i of a head, (x_2i, x_2i+1), turns by theta_i = pos * base^(-2i/d):
 *   out_2i   = x_2i cos(theta_i) - x_2i+1 sin(theta_i)
 *   out_2i+1 = x_2i sin(theta_i) + x_2i+1 cos(theta_i)
 * Why it works: with q at position m and k at n, (R_m q) . (R_n k) =
 * q . R_m^T R_n k = q . R_(n-m) k, so the score depends on the positions
 * only through n - m, and nothing is added to the token's vector.
 * How it relates to chapter 05: the frequencies base^(-2i/d) are Sec. 3.5's
 * w_i, and R_k is chapter 05's M_k (PE(pos+k) = M_k PE(pos)), the block-
 * diagonal 2x2 rotations by k*w_i, transposed (05 turns (sin, cos) pairs,
 * here (x, y) pairs turn counter-clockwise). The paper adds the sinusoids to
 * the input and hopes attention finds the rotation; RoPE applies it to q and
 * k in every layer.
 * Convention: the interleaved (even, odd) pairs of Su et al.'s Eq. (34) and
 * of chapter 05. GPT-NeoX and Hugging Face's LLaMA pair i with i + d/2
 * instead: the same rotation of a permuted head, equal in what the model
 * can learn, but weights do not move between the two without permuting the
 * columns of W_Q and W_K. tools/parity/lm_ops.py uses the interleaved pairs.
 * The angle is formed in double (pos * w in float loses 1e-4 rad at 2000):
 * rope_angle gives cos and sin of theta_i for one position. */
static void rope_angle(float *c, float *s, int pos, int i, int d, double base) {
    double theta = (double)pos * pow(base, -2.0 * i / d);
    *c = (float)cos(theta);
    *s = (float)sin(theta);
}

void rope_forward_ref(float *out, const float *inp, const int *pos, int N, int H, int d, double base) {
    assert(N >= 0 && H > 0 && d > 0 && d % 2 == 0 && "RoPE turns pairs: the head width must be even");
    for (int n = 0; n < N; n++)
        for (int i = 0; i < d / 2; i++) {
            float c, s;
            rope_angle(&c, &s, pos[n], i, d, base);
            for (int hh = 0; hh < H; hh++) {
                size_t at = ((size_t)n * H + hh) * d + 2 * i;
                float x0 = inp[at], x1 = inp[at + 1];        /* read both first: out may be inp */
                out[at] = x0 * c - x1 * s;
                out[at + 1] = x0 * s + x1 * c;
            }
        }
}

/* forward: out = R(theta) x, R = [[c, -s], [s, c]] per pair, so
 *   dx += R^T dout = R(-theta) dout:   dx_2i   +=  dy_2i c + dy_2i+1 s
 *                                      dx_2i+1 += -dy_2i s + dy_2i+1 c */
void rope_backward_ref(float *dinp, const float *dout, const int *pos, int N, int H, int d, double base) {
    assert(N >= 0 && H > 0 && d > 0 && d % 2 == 0);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < d / 2; i++) {
            float c, s;
            rope_angle(&c, &s, pos[n], i, d, base);
            for (int hh = 0; hh < H; hh++) {
                size_t at = ((size_t)n * H + hh) * d + 2 * i;
                float dy0 = dout[at], dy1 = dout[at + 1];
                dinp[at] += dy0 * c + dy1 * s;
                dinp[at + 1] += -dy0 * s + dy1 * c;
            }
        }
}

/* ========================================================================== */
/* SwiGLU's gate (Shazeer 2020)                                               */
/* ========================================================================== */

/* sigmoid, without overflow: exp of a non-positive number only */
static float sigmoid(float a) {
    if (a >= 0.0f) return 1.0f / (1.0f + expf(-a));
    float e = expf(a);
    return e / (1.0f + e);
}

/* out = silu(a) * b: one half of the hidden layer (b = x W3) scales the
 * other (silu(x W1)) elementwise, a gate learned per unit, where Eq. 2's
 * ReLU can only pass or block. */
void swiglu_forward_ref(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] * sigmoid(a[i]) * b[i];
}

/* forward: out = silu(a) * b
 *   db += dout * silu(a)
 *   da += dout * b * silu'(a),  silu'(a) = sig(a) * (1 + a * (1 - sig(a))) */
void swiglu_backward_ref(float *da, float *db, const float *dout, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float sg = sigmoid(a[i]);
        if (db) db[i] += dout[i] * (a[i] * sg);
        if (da) da[i] += dout[i] * b[i] * (sg * (1.0f + a[i] * (1.0f - sg)));
    }
}

/* ========================================================================== */
/* grouped-query attention (Ainslie et al. 2023) and multi-query (Shazeer 2019) */
/* ========================================================================== */

int gqa_check(int h, int kv_heads, char *err, size_t errlen) {
    if (h > 0 && kv_heads > 0 && kv_heads <= h && h % kv_heads == 0) return 0;
    if (err && errlen) {
        /* the sentence, then the divisors of h: the counts that would work */
        int at = snprintf(err, errlen,
                          "%d key/value heads cannot be shared by %d query heads: each key/value head "
                          "serves an equal group of query heads, so their number must divide %d (one of",
                          kv_heads, h, h);
        for (int k = 1; k <= h && at > 0 && (size_t)at < errlen; k++)
            if (h % k == 0) at += snprintf(err + at, errlen - at, " %d", k);
        if (at > 0 && (size_t)at < errlen) snprintf(err + at, errlen - at, ")");
    }
    return 1;
}

/* A KV cache keeps, for every token already seen, each layer's key and value
 * of every kv head: what GQA and MQA shrink, h/kv_heads-fold. */
size_t gqa_kv_cache_bytes_per_token(int N, int kv_heads, int d_k, int d_v) {
    assert(N >= 0 && kv_heads > 0 && d_k > 0 && d_v > 0);
    return (size_t)N * kv_heads * ((size_t)d_k + d_v) * sizeof(float);
}

void lm_mask_causal(uint8_t *mask, int B, int Tq, int Tk) {
    assert(B >= 0 && Tq > 0 && Tq <= Tk);
    int past = Tk - Tq;                       /* positions already in the cache */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) mask[((size_t)b * Tq + i) * Tk + j] = (uint8_t)(j <= past + i);
}

/* Attention(Q_i, K_g, V_g) for query head i and its group's head g = i / r,
 * r = h / kv_heads: one call of Eq. (1) per query head, so the only new
 * thing here is which K and V a head reads. The K and V of a group are
 * read r times and stored once: the cache is kv_heads/h the size. */
void gqa_forward_ref(float *out, float *weights, const float *Q, const float *K, const float *V,
                     const uint8_t *mask, int B, int h, int kv_heads, int Tq, int Tk, int d_k, int d_v) {
    assert(B > 0 && h > 0 && kv_heads > 0 && h % kv_heads == 0 && "kv_heads must divide h: call gqa_check");
    int r = h / kv_heads;                     /* query heads per kv head */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < h; i++) {
            size_t bi = (size_t)b * h + i, bg = (size_t)b * kv_heads + i / r;
            sdpa_forward_ref(out + bi * Tq * d_v, weights + bi * Tq * Tk, Q + bi * Tq * d_k,
                             K + bg * Tk * d_k, V + bg * Tk * d_v, mask ? mask + (size_t)b * Tq * Tk : NULL,
                             1, 1, Tq, Tk, d_k, d_v);
        }
}

/* forward: head i = Attention(Q_i, K_g, V_g), g = i / r. Eq. (1)'s backward
 * per head (sdpa_backward_ref), each adding into its group's dK_g and dV_g:
 * a key read by r query heads collects the gradient of all r reads. */
void gqa_backward_ref(float *dQ, float *dK, float *dV, float *scratch, const float *dout,
                      const float *weights, const float *Q, const float *K, const float *V,
                      int B, int h, int kv_heads, int Tq, int Tk, int d_k, int d_v) {
    assert(B > 0 && h > 0 && kv_heads > 0 && h % kv_heads == 0 && "kv_heads must divide h: call gqa_check");
    int r = h / kv_heads;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < h; i++) {
            size_t bi = (size_t)b * h + i, bg = (size_t)b * kv_heads + i / r;
            sdpa_backward_ref(dQ ? dQ + bi * Tq * d_k : NULL, dK ? dK + bg * Tk * d_k : NULL,
                              dV ? dV + bg * Tk * d_v : NULL, scratch, dout + bi * Tq * d_v,
                              weights + bi * Tq * Tk, Q + bi * Tq * d_k, K + bg * Tk * d_k, V + bg * Tk * d_v,
                              1, 1, Tq, Tk, d_k, d_v);
        }
}
