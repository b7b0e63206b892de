/* lm_ffn.c - the SwiGLU FFN and the mixture of experts, forward and backward
 * side by side, built from linear.h's products and the plain elementwise
 * ops (ref/lm_ops.c's SwiGLU gate, ref/ops.c's softmax). Nothing here
 * allocates; backward functions ACCUMULATE (+=) into gradients.
 */
#include "layers/lm_ffn.h"
#include "layers/linear.h"
#include "ref/lm_ops.h"
#include "ref/ops.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>

/* ========================================================================== */
/* the SwiGLU FFN (Shazeer 2020)                                              */
/* ========================================================================== */

void swiglu_ffn_forward(float *out, float *a, float *b, float *hidden, const float *x,
                        const float *W1, const float *W3, const float *W2, int N, int d_model, int d_ff) {
    linear_forward(a, x, W1, NULL, N, d_model, d_ff);            /* a = x W1            */
    linear_forward(b, x, W3, NULL, N, d_model, d_ff);            /* b = x W3            */
    swiglu_forward_ref(hidden, a, b, (size_t)N * d_ff);          /* silu(a) * b         */
    linear_forward(out, hidden, W2, NULL, N, d_ff, d_model);     /* (silu(a) * b) W2    */
}

void swiglu_ffn_backward(float *dx, float *dW1, float *dW3, float *dW2, float *scratch, const float *dout,
                         const float *a, const float *b, const float *hidden, const float *x,
                         const float *W1, const float *W3, const float *W2, int N, int d_model, int d_ff) {
    size_t nh = (size_t)N * d_ff;
    float *dhidden = scratch, *da = scratch + nh, *db = scratch + 2 * nh;
    fill(scratch, 0.0f, 3 * nh);
    /* forward: out = hidden W2  ->  dhidden = dout W2^T, dW2 += hidden^T dout */
    linear_backward(dhidden, dW2, NULL, dout, hidden, W2, N, d_ff, d_model);
    /* forward: hidden = silu(a) * b */
    swiglu_backward_ref(da, db, dhidden, a, b, nh);
    /* forward: a = x W1, b = x W3: x feeds both, so dx collects both */
    linear_backward(dx, dW1, NULL, da, x, W1, N, d_model, d_ff);
    linear_backward(dx, dW3, NULL, db, x, W3, N, d_model, d_ff);
}

int swiglu_d_ff(int d_ff, int multiple_of) {
    assert(d_ff > 0 && multiple_of > 0);
    int w = (int)floor(2.0 * d_ff / (3.0 * multiple_of) + 0.5) * multiple_of;
    return w > multiple_of ? w : multiple_of;
}

/* ========================================================================== */
/* mixture of experts (Switch Transformer; Mixtral)                           */
/* ========================================================================== */

int moe_check(const MoeConfig *c, char *err, size_t errlen) {
    const char *why = NULL;
    if (c->d_model <= 0 || c->d_ff <= 0) why = "the model and expert widths must be positive";
    else if (c->E < 1) why = "a mixture needs at least one expert";
    else if (c->k < 1 || c->k > c->E) why = "each token goes to k experts, 1 <= k <= the number of experts";
    else if (c->kind != EXPERT_RELU && c->kind != EXPERT_SWIGLU) why = "an expert is ReLU or SwiGLU";
    if (!why) return 0;
    if (err && errlen)
        snprintf(err, errlen, "mixture of experts: %s (experts %d, k %d, d_model %d, d_ff %d)", why, c->E, c->k,
                 c->d_model, c->d_ff);
    return 1;
}

size_t moe_acts_floats(const MoeConfig *c, int N) {
    size_t A = (size_t)N * c->k, D = c->d_model, F = c->d_ff;
    size_t hid = (c->kind == EXPERT_SWIGLU ? 3 : 1) * A * F;
    /* probs, gate, xg, the hidden layer(s), yg */
    return (size_t)N * c->E + A + A * D + hid + A * D;
}

size_t moe_acts_ints(const MoeConfig *c, int N) {
    size_t A = (size_t)N * c->k;
    return 3 * A + (size_t)c->E + 1;          /* choice, order, slot, offset */
}

void moe_acts_layout(MoeActs *a, float *fbuf, int *ibuf, const MoeConfig *c, int N) {
    size_t A = (size_t)N * c->k, D = c->d_model, F = c->d_ff;
    float *f = fbuf;
    a->probs = f;  f += (size_t)N * c->E;
    a->gate = f;   f += A;
    a->xg = f;     f += A * D;
    if (c->kind == EXPERT_SWIGLU) {
        a->a = f;  f += A * F;
        a->b = f;  f += A * F;
    } else {
        a->a = a->b = NULL;
    }
    a->hidden = f; f += A * F;
    a->yg = f;     f += A * D;
    assert((size_t)(f - fbuf) == moe_acts_floats(c, N));
    a->choice = ibuf;
    a->order = ibuf + A;
    a->slot = ibuf + 2 * A;
    a->offset = ibuf + 3 * A;
}

size_t moe_scratch_floats(const MoeConfig *c, int N) {
    size_t A = (size_t)N * c->k;
    /* dyg, dxg (A,D); the experts' hidden gradients (3*A*F); dgate (A);
     * dp, dlogits (N,E) */
    return 2 * A * c->d_model + 3 * A * c->d_ff + A + 2 * (size_t)N * c->E;
}

/* expert e's matrices inside the parameters (or their gradients) */
static const float *w_of(const float *w, int e, int D, int F) { return w ? w + (size_t)e * D * F : NULL; }
static float *dw_of(float *w, int e, int D, int F) { return w ? w + (size_t)e * D * F : NULL; }

float moe_forward(float *out, MoeActs *a, const MoeParams *p, const float *x, const MoeConfig *c, int N) {
    assert(N > 0 && !moe_check(c, NULL, 0) && "call moe_check first");
    int D = c->d_model, F = c->d_ff, E = c->E, k = c->k;
    /* p = softmax(x W_r): the logits are written where the probabilities go */
    linear_forward(a->probs, x, p->w_r, NULL, N, D, E);
    softmax_forward(a->probs, a->probs, N, E);
    /* chosen = the k largest p, largest first; a tie goes to the lower index */
    for (int t = 0; t < N; t++) {
        const float *pt = a->probs + (size_t)t * E;
        int *ch = a->choice + (size_t)t * k;
        double sum = 0.0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int l = 0; l < j; l++) taken |= ch[l] == e;
                if (!taken && (best < 0 || pt[e] > pt[best])) best = e;
            }
            ch[j] = best;
            sum += pt[best];
        }
        /* gate_j = p_j / sum of the chosen p (renorm), else p_j */
        for (int j = 0; j < k; j++)
            a->gate[(size_t)t * k + j] = c->renorm ? (float)(pt[ch[j]] / sum) : pt[ch[j]];
    }
    /* group the N*k assignments by expert, tokens in order within each:
     * count, prefix sums, then place (a counting sort) */
    for (int e = 0; e <= E; e++) a->offset[e] = 0;
    for (size_t s = 0; s < (size_t)N * k; s++) a->offset[a->choice[s] + 1]++;
    for (int e = 0; e < E; e++) a->offset[e + 1] += a->offset[e];
    for (int e = 0; e < E; e++) {
        int s = a->offset[e];
        for (size_t as = 0; as < (size_t)N * k; as++)
            if (a->choice[as] == e) {
                a->order[s] = (int)as;
                a->slot[as] = s++;
            }
    }
    /* each expert runs on its own tokens, gathered into contiguous rows */
    for (size_t s = 0; s < (size_t)N * k; s++) {
        const float *xt = x + (size_t)(a->order[s] / k) * D;
        for (int i = 0; i < D; i++) a->xg[s * D + i] = xt[i];
    }
    for (int e = 0; e < E; e++) {
        int at = a->offset[e], n = a->offset[e + 1] - at;
        if (n == 0) continue;                 /* an expert no token chose */
        float *xg = a->xg + (size_t)at * D, *yg = a->yg + (size_t)at * D, *h = a->hidden + (size_t)at * F;
        if (c->kind == EXPERT_RELU)
            ffn_forward(yg, h, xg, w_of(p->w1, e, D, F), NULL, w_of(p->w2, e, F, D), NULL, n, D, F);
        else
            swiglu_ffn_forward(yg, a->a + (size_t)at * F, a->b + (size_t)at * F, h, xg, w_of(p->w1, e, D, F),
                               w_of(p->w3, e, D, F), w_of(p->w2, e, F, D), n, D, F);
    }
    /* out_t = sum_j gate_j * Expert_chosen_j(x_t) */
    fill(out, 0.0f, (size_t)N * D);
    for (size_t as = 0; as < (size_t)N * k; as++) {
        float g = a->gate[as], *o = out + (as / k) * D;
        const float *y = a->yg + (size_t)a->slot[as] * D;
        for (int i = 0; i < D; i++) o[i] += g * y[i];
    }
    /* aux = E * sum_e f_e * P_e */
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        double f = (double)(a->offset[e + 1] - a->offset[e]) / ((double)N * k), P = 0.0;
        for (int t = 0; t < N; t++) P += a->probs[(size_t)t * E + e];
        aux += f * (P / N);
    }
    return (float)(E * aux);
}

void moe_backward(float *dx, MoeParams *g, float *scratch, const float *dout, float d_aux,
                  const MoeActs *a, const MoeParams *p, const float *x, const MoeConfig *c, int N) {
    int D = c->d_model, F = c->d_ff, E = c->E, k = c->k;
    size_t A = (size_t)N * k;
    float *dyg = scratch, *dxg = dyg + A * D, *dh = dxg + A * D, *dgate = dh + 3 * A * F;
    float *dp = dgate + A, *dlogits = dp + (size_t)N * E;
    /* forward: out_t = sum_j gate_j * y_j   (y_j = the chosen expert's output)
     *   dgate_j = dout_t . y_j,   dy_j = gate_j * dout_t */
    for (size_t as = 0; as < A; as++) {
        const float *dy = dout + (as / k) * D, *y = a->yg + (size_t)a->slot[as] * D;
        float *d = dyg + (size_t)a->slot[as] * D, gt = a->gate[as];
        double s = 0.0;
        for (int i = 0; i < D; i++) {
            s += (double)dy[i] * y[i];
            d[i] = gt * dy[i];
        }
        dgate[as] = (float)s;
    }
    /* forward: y = Expert_e(x), each expert on its gathered rows */
    fill(dxg, 0.0f, A * D);
    for (int e = 0; e < E; e++) {
        int at = a->offset[e], n = a->offset[e + 1] - at;
        if (n == 0) continue;
        const float *xg = a->xg + (size_t)at * D, *h = a->hidden + (size_t)at * F;
        float *dxe = dxg + (size_t)at * D, *dye = dyg + (size_t)at * D;
        if (c->kind == EXPERT_RELU)
            ffn_backward(dxe, dw_of(g->w1, e, D, F), NULL, dw_of(g->w2, e, F, D), NULL, dh, dye, h, xg,
                         w_of(p->w1, e, D, F), w_of(p->w2, e, F, D), n, D, F);
        else
            swiglu_ffn_backward(dxe, dw_of(g->w1, e, D, F), dw_of(g->w3, e, D, F), dw_of(g->w2, e, F, D), dh, dye,
                                a->a + (size_t)at * F, a->b + (size_t)at * F, h, xg, w_of(p->w1, e, D, F),
                                w_of(p->w3, e, D, F), w_of(p->w2, e, F, D), n, D, F);
    }
    /* forward: xg_s = x_t (gathered)  ->  dx_t += dxg_s over its k slots */
    if (dx)
        for (size_t as = 0; as < A; as++) {
            const float *d = dxg + (size_t)a->slot[as] * D;
            float *o = dx + (as / k) * D;
            for (int i = 0; i < D; i++) o[i] += d[i];
        }
    /* forward: gate_j = p_j / S, S = sum_l p_l over the chosen l
     *   dp_m += (dgate_m - sum_j dgate_j gate_j) / S    for each chosen m
     * (renorm = 0: gate_j = p_j, dp_m += dgate_m). Unchosen p get nothing
     * from the gates: the choice is a step, flat almost everywhere. */
    fill(dp, 0.0f, (size_t)N * E);
    for (int t = 0; t < N; t++) {
        const int *ch = a->choice + (size_t)t * k;
        const float *gt = a->gate + (size_t)t * k, *dg = dgate + (size_t)t * k, *pt = a->probs + (size_t)t * E;
        float *dpt = dp + (size_t)t * E;
        if (!c->renorm) {
            for (int j = 0; j < k; j++) dpt[ch[j]] += dg[j];
            continue;
        }
        double S = 0.0, dot = 0.0;
        for (int j = 0; j < k; j++) {
            S += pt[ch[j]];
            dot += (double)dg[j] * gt[j];
        }
        for (int j = 0; j < k; j++) dpt[ch[j]] += (float)((dg[j] - dot) / S);
    }
    /* forward: aux = E * sum_e f_e * P_e, P_e = (1/N) sum_t p_te
     *   dp_te += d_aux * E * f_e / N      (f_e is a count: no gradient) */
    for (int e = 0; e < E; e++) {
        float f = (float)(a->offset[e + 1] - a->offset[e]) / ((float)N * k);
        float d = d_aux * E * f / N;
        for (int t = 0; t < N; t++) dp[(size_t)t * E + e] += d;
    }
    /* forward: p = softmax(logits), logits = x W_r */
    fill(dlogits, 0.0f, (size_t)N * E);
    softmax_backward(dlogits, dp, a->probs, N, E);
    linear_backward(dx, g->w_r, NULL, dlogits, x, p->w_r, N, D, E);
}

int moe_expert_width(int d_model, int d_ff, int E, int k, ExpertKind kind) {
    assert(d_model > 0 && d_ff > 0 && E >= 1 && k >= 1 && k <= E);
    double m = kind == EXPERT_SWIGLU ? 3.0 : 2.0;
    /* k * m * d_model * w + d_model * E = m * d_model * d_ff, solved for w */
    double w = (m * d_model * d_ff - (double)d_model * E) / (k * m * d_model);
    int wi = (int)floor(w + 0.5);
    return wi > 1 ? wi : 1;
}
