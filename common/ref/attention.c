/* attention.c - masks and scaled dot-product attention (Eq. 1), forward
 * and backward side by side, as plain loops: one step of the equation per
 * loop, no intrinsics, no threads.
 *
 * sdpa_forward / sdpa_backward (fast/attention_fast.c) compute the same,
 * arranged for speed; tests/check_attention.c checks the two pairs agree.
 * Nothing in this file allocates: the caller hands in every buffer.
 */
#include "ref/attention.h"

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

/* ---- scaled dot-product attention (Eq. 1), the reference -------------------
 *
 * Eq. (1) the way it reads, one head at a time and one step per loop:
 *   1. scores_ij = q_i . k_j / sqrt(d_k)       (-inf where the mask blocks j)
 *   2. w_i = softmax(scores_i)                  (stable: subtract the row max)
 *   3. out_i = sum_j w_ij v_j
 * sdpa_forward (fast/attention_fast.c) computes exactly this, faster; a test
 * checks that the two agree. Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v),
 * mask (B,Tq,Tk) or NULL; out (B,h,Tq,d_v), weights (B,h,Tq,Tk). */
void sdpa_forward_ref(float *out, float *weights,
                      const float *Q, const float *K, const float *V, const uint8_t *mask,
                      int B, int h, int Tq, int Tk, int d_k, int d_v) {
    assert(B > 0 && h > 0 && Tq > 0 && Tk > 0 && d_k > 0 && d_v > 0);
    /* Why 1/sqrt(d_k) (Sec. 3.2.1): with unit-variance q and k, q.k has
     * variance d_k; large scores push softmax into a corner where its
     * gradient vanishes. Dividing by sqrt(d_k) brings the variance back to 1. */
    const float scale = 1.0f / sqrtf((float)d_k);
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < h; hh++) {
            size_t bh = (size_t)b * h + hh;
            const float *q = Q + bh * Tq * d_k, *k = K + bh * Tk * d_k, *v = V + bh * Tk * d_v;
            float *w = weights + bh * Tq * Tk, *o = out + bh * Tq * d_v;
            for (int i = 0; i < Tq; i++) {
                float *wi = w + (size_t)i * Tk;
                /* 1. scores; Sec. 3.2.3: a blocked pair gets -inf, so exp()
                 * makes its weight exactly 0 */
                for (int j = 0; j < Tk; j++) {
                    float s = 0.0f;
                    for (int c = 0; c < d_k; c++) s += q[(size_t)i * d_k + c] * k[(size_t)j * d_k + c];
                    int blocked = mask && !mask[((size_t)b * Tq + i) * Tk + j];
                    wi[j] = blocked ? -INFINITY : s * scale;
                }
                /* 2. softmax over the keys */
                float max = -INFINITY;
                for (int j = 0; j < Tk; j++) max = wi[j] > max ? wi[j] : max;
                if (max == -INFINITY) {
                    /* every key blocked: all-zero weights, not 0/0 = NaN */
                    for (int j = 0; j < Tk; j++) wi[j] = 0.0f;
                } else {
                    float sum = 0.0f;
                    for (int j = 0; j < Tk; j++) {
                        wi[j] = expf(wi[j] - max);
                        sum += wi[j];
                    }
                    for (int j = 0; j < Tk; j++) wi[j] /= sum;
                }
                /* 3. a weighted mix of the values */
                for (int c = 0; c < d_v; c++) {
                    float acc = 0.0f;
                    for (int j = 0; j < Tk; j++) acc += wi[j] * v[(size_t)j * d_v + c];
                    o[(size_t)i * d_v + c] = acc;
                }
            }
        }
}

/* The reference backward, each line the derivative of one forward step
 * (dQ, dK, dV +=, any may be NULL; scratch (B,h,Tq,Tk) holds ds):
 *   3. out_i = sum_j w_ij v_j        ->  dw_ij = dO_i . v_j,   dv_j += sum_i w_ij dO_i
 *   2. w_i = softmax(scores_i)       ->  ds_ij = w_ij (dw_ij - sum_l w_il dw_il)
 *   1. scores_ij = scale q_i . k_j   ->  dq_i += scale sum_j ds_ij k_j,
 *                                        dk_j += scale sum_i ds_ij q_i
 * A blocked pair has w_ij = 0, so ds_ij = 0: no gradient reaches it, and no
 * mask is needed. */
void sdpa_backward_ref(float *dQ, float *dK, float *dV, float *scratch,
                       const float *dout, const float *weights,
                       const float *Q, const float *K, const float *V,
                       int B, int h, int Tq, int Tk, int d_k, int d_v) {
    const float scale = 1.0f / sqrtf((float)d_k);
    for (size_t bh = 0; bh < (size_t)B * h; bh++) {
        const float *q = Q + bh * Tq * d_k, *k = K + bh * Tk * d_k, *v = V + bh * Tk * d_v;
        const float *w = weights + bh * Tq * Tk, *dO = dout + bh * Tq * d_v;
        float *ds = scratch + bh * Tq * Tk;
        for (int i = 0; i < Tq; i++) {
            const float *wi = w + (size_t)i * Tk;
            float *dsi = ds + (size_t)i * Tk;
            float s = 0.0f;                       /* sum_l w_il dw_il */
            for (int j = 0; j < Tk; j++) {
                float dw = 0.0f;
                for (int c = 0; c < d_v; c++) dw += dO[(size_t)i * d_v + c] * v[(size_t)j * d_v + c];
                dsi[j] = dw;
                s += wi[j] * dw;
            }
            for (int j = 0; j < Tk; j++) dsi[j] = wi[j] * (dsi[j] - s);
        }
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) {
                float dsij = scale * ds[(size_t)i * Tk + j], wij = w[(size_t)i * Tk + j];
                if (dQ)
                    for (int c = 0; c < d_k; c++) dQ[bh * Tq * d_k + (size_t)i * d_k + c] += dsij * k[(size_t)j * d_k + c];
                if (dK)
                    for (int c = 0; c < d_k; c++) dK[bh * Tk * d_k + (size_t)j * d_k + c] += dsij * q[(size_t)i * d_k + c];
                if (dV)
                    for (int c = 0; c < d_v; c++) dV[bh * Tk * d_v + (size_t)j * d_v + c] += wij * dO[(size_t)i * d_v + c];
            }
    }
}
