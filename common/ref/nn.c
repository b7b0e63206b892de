/* nn.c - the layers around attention, written plainly: ReLU, the bias of a
 * linear layer, layer normalisation and residuals (Sec. 3.1), dropout (Sec.
 * 5.4), embeddings and positional encoding (Sec. 3.4, 3.5), and the
 * label-smoothed cross-entropy the model is trained with (Sec. 5.4).
 *
 * Each layer is a forward/backward pair side by side. Backward functions
 * quote the forward line they differentiate and ACCUMULATE (+=) into
 * gradients the caller zeroed. Nothing here allocates.
 *
 * Every loop here is the formula as a student would write it, on one
 * thread, one element at a time: the reference. The ops a training step
 * calls have a tuned twin of the same name without _ref in fast/nn_fast.c
 * (rows or elements shared among threads, sums kept in several running
 * sums so the vector unit stays busy), tested equal to these
 * (tests/check_nn.c). The linear layer and the FFN (Eq. 2), matrix
 * multiplies, are in layers/linear.c.
 */
#include "ref/nn.h"
#include "core/dropout_mask.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ========================================================================== */
/* ReLU                                                                       */
/* ========================================================================== */

void relu_forward_ref(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

/* forward: out = max(0, inp). The slope is 1 where out > 0 and 0 elsewhere
 * (at exactly 0 we pick 0, the usual subgradient). */
void relu_backward_ref(float *dinp, const float *dout, const float *out, size_t n) {
    for (size_t i = 0; i < n; i++) dinp[i] += out[i] > 0.0f ? dout[i] : 0.0f;
}

/* the same slope, applied to a gradient in place: d = out > 0 ? d : 0 */
void relu_backward_inplace_ref(float *d, const float *out, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}

/* ========================================================================== */
/* the bias of a linear layer (Eq. 2: x W_1 + b_1)                            */
/* ========================================================================== */

/* out = inp W + bias: layers/linear.c does the product inp W with gemm(),
 * then adds the bias to every row here. */
void bias_forward_ref(float *out, const float *bias, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[(long)n * C + c] += bias[c];
}

/* forward: out[n] += bias for every row n, so the bias gradient is the sum
 * of dout over the rows (the sum over positions of Eq. 2), row by row */
void bias_backward_ref(float *dbias, const float *dout, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dbias[c] += dout[(long)n * C + c];
}

/* ========================================================================== */
/* layer normalisation (Sec. 3.1)                                             */
/* ========================================================================== */

/* The reference, as a student would write it on paper. Per row: mean,
 * biased variance (divide by C, as Ba et al. and PyTorch do),
 * rstd = 1/sqrt(var + eps), out = gamma * (x - mean) * rstd + beta.
 * The row statistics are summed in double: cheap, and the variance of a row
 * with a large mean loses nothing. layernorm_forward (fast/nn_fast.c)
 * computes the same with faster sums; a test checks that the two agree. */
void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C;
        float *y = out + (long)n * C;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += x[c];
        double m = sum / C;
        double sq = 0.0;                      /* two passes: no cancellation */
        for (int c = 0; c < C; c++) sq += (x[c] - m) * (x[c] - m);
        double v = sq / C;
        float s = (float)(1.0 / sqrt(v + LAYERNORM_EPS));
        float mf = (float)m;
        for (int c = 0; c < C; c++) y[c] = gamma[c] * ((x[c] - mf) * s) + beta[c];
        mean[n] = mf;
        rstd[n] = s;
    }
}

/* forward: norm = (x - mean) * rstd ;  out = gamma * norm + beta
 *   dbeta  += dout                  dgamma += dout * norm
 *   dnorm   = dout * gamma
 *   dx     += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
 * The last line is the chain rule through mean and rstd, which both depend
 * on every x of the row: moving x shifts the mean (the mean(dnorm) term) and
 * rescales the spread (the norm * mean(dnorm * norm) term).
 * This is the reference: one plain loop per line above, the two row means
 * summed in double. layernorm_backward (fast/nn_fast.c) is the tuned twin. */
void layernorm_backward_ref(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *mean, const float *rstd,
                            const float *gamma, int N, int C) {
    assert(N >= 0 && C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float m = mean[n], s = rstd[n];
        if (dinp) {
            float *dx = dinp + (long)n * C;
            double a = 0.0, b = 0.0;          /* sum of dnorm, sum of dnorm * norm */
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * s;
                float dnorm = gamma[c] * dy[c];
                a += dnorm;
                b += dnorm * norm;
            }
            float dnorm_mean = (float)(a / C), dnorm_norm_mean = (float)(b / C);
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * s;
                float dnorm = gamma[c] * dy[c];
                dx[c] += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
            }
        }
        for (int c = 0; c < C; c++) {
            if (dgamma) dgamma[c] += dy[c] * ((x[c] - m) * s);
            if (dbeta) dbeta[c] += dy[c];
        }
    }
}

/* ========================================================================== */
/* residual connection (Sec. 3.1: LayerNorm(x + Sublayer(x)))                 */
/* ========================================================================== */

void residual_forward_ref(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* forward: out = a + b, so both inputs receive dout unchanged: this is why a
 * residual path carries gradient straight through a deep stack. */
void residual_backward_ref(float *da, float *db, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* ========================================================================== */
/* dropout (Sec. 5.4, P_drop = 0.1)                                           */
/* ========================================================================== */

/* Inverted dropout: drop with probability p, scale the survivors by 1/(1-p)
 * so the expected value of every element is unchanged; at inference (p = 0)
 * the layer is the identity. Element i's fate is dropout_keep(key, tensor, i)
 * (dropout_mask.h): a hash of its coordinates, not a draw from a stream, so
 * the GPU computes the very same mask and the same key gives the same mask. */
void dropout_forward_ref(float *out, float *keep, const float *inp, float p, size_t n,
                         uint64_t key, uint32_t tensor) {
    assert(p >= 0.0f && p < 1.0f);
    if (p == 0.0f) {
        if (out != inp) memcpy(out, inp, n * sizeof(float));
        for (size_t i = 0; i < n; i++) keep[i] = 1.0f;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* u in [0, 1): P(u >= p) = 1 - p, the keep probability */
        keep[i] = dropout_keep(key, tensor, i, p);
        out[i] = inp[i] * keep[i];
    }
}

/* forward: out = inp * keep, with the very mask the forward pass drew */
void dropout_backward_ref(float *dinp, const float *dout, const float *keep, size_t n) {
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * keep[i];
}

/* ========================================================================== */
/* embeddings (Sec. 3.4) and positional encoding (Sec. 3.5)                   */
/* ========================================================================== */

/* Sec. 3.4: "In the embedding layers, we multiply those weights by
 * sqrt(d_model)". The table is initialised small, so the scale brings the
 * token vectors to the size of the PE (entries in [-1, 1]) they are added to. */
void embed_forward(float *out, const int *ids, const float *table, const float *pe,
                   int B, int T, int d_model, int vocab) {
    assert(B >= 0 && T >= 0 && d_model > 0 && vocab > 0);
    float scale = sqrtf((float)d_model);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int id = ids[b * T + t];
            assert(id >= 0 && id < vocab && "token id outside [0, vocab): validate input first");
            const float *e = table + (long)id * d_model;
            const float *p = pe + (long)t * d_model;
            float *o = out + ((long)b * T + t) * d_model;
            for (int c = 0; c < d_model; c++) o[c] = e[c] * scale + p[c];
        }
    }
}

/* forward: out[b,t] = table[ids[b,t]] * sqrt(d_model) + pe[t]
 * Each use of a token adds its gradient into that token's row: a token that
 * appears twice gets both contributions (scatter-add). PE is a fixed
 * formula, so nothing flows into it. Serial: two positions with the same id
 * write the same row. */
void embed_backward(float *dtable, const float *dout, const int *ids,
                    int B, int T, int d_model, int vocab) {
    assert(B >= 0 && T >= 0 && d_model > 0 && vocab > 0);
    float scale = sqrtf((float)d_model);
    for (long i = 0; i < (long)B * T; i++) {
        int id = ids[i];
        assert(id >= 0 && id < vocab && "token id outside [0, vocab)");
        const float *d = dout + i * d_model;
        float *g = dtable + (long)id * d_model;
        for (int c = 0; c < d_model; c++) g[c] += d[c] * scale;
    }
}

/* PE(pos, 2i)   = sin(pos * w_i),  PE(pos, 2i+1) = cos(pos * w_i),
 * w_i = 1 / 10000^(2i/d_model): wavelengths 2*pi .. 10000*2*pi, a geometric
 * progression (Sec. 3.5). The angle pos * w_i is formed in double: in float,
 * pos = 10000 would carry an angle error of ~5e-4 radians. */
void posenc_fill(float *pe, int max_len, int d_model) {
    assert(max_len >= 0 && d_model > 0);
    for (int pos = 0; pos < max_len; pos++) {
        float *row = pe + (long)pos * d_model;
        for (int j = 0; j < d_model; j++) {
            int two_i = j - (j % 2);          /* columns 2i and 2i+1 share w_i */
            double w = pow(10000.0, -(double)two_i / d_model);
            double angle = (double)pos * w;
            row[j] = (float)(j % 2 == 0 ? sin(angle) : cos(angle));
        }
    }
}

/* ========================================================================== */
/* output: log-softmax and label-smoothed cross-entropy (Sec. 5.4)            */
/* ========================================================================== */

/* log softmax(x)_v = x_v - log sum_u exp(x_u)
 *                  = (x_v - max) - log sum_u exp(x_u - max)
 * The second form never overflows (every exponent <= 0) and never takes the
 * log of 0 (the max term contributes exp(0) = 1). Logits must be finite. */
void logsoftmax_forward_ref(float *logp, const float *logits, int N, int V) {
    assert(N >= 0 && V > 0);
    for (int n = 0; n < N; n++) {
        const float *x = logits + (long)n * V;
        float *y = logp + (long)n * V;
        float max = x[0];
        for (int v = 1; v < V; v++) max = x[v] > max ? x[v] : max;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((double)x[v] - max);
        float lse = (float)log(sum);
        for (int v = 0; v < V; v++) y[v] = (x[v] - max) - lse;
    }
}

/* Sec. 5.4, "label smoothing of value eps_ls = 0.1": the target keeps 1-eps_ls
 * and the rest is shared evenly by every class that could be a wrong answer.
 * Padding is never an answer, so (as in The Annotated Transformer) it gets 0
 * and the share is eps_ls/(V-2). A padding target (a position that does not
 * count) gets an all-zero distribution. */
void smoothed_targets(float *dist, int target, int V, float eps_ls, int pad_id) {
    assert(V > 0 && target >= 0 && target < V && pad_id < V);
    assert(eps_ls >= 0.0f && eps_ls < 1.0f);
    if (target == pad_id) {
        for (int v = 0; v < V; v++) dist[v] = 0.0f;
        return;
    }
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    /* With no other class to share eps_ls with (V = 2 with a pad, or V = 1),
     * there is nothing to smooth towards: plain one-hot. */
    float share = others > 0 ? eps_ls / others : 0.0f;
    float on = others > 0 ? 1.0f - eps_ls : 1.0f;
    for (int v = 0; v < V; v++) dist[v] = share;
    if (pad_id >= 0) dist[pad_id] = 0.0f;
    dist[target] = on;
}

/* The loss of one counted row, -sum_v dist_v logp_v, without building dist:
 * on * logp[target] + share * (sum of logp over the other classes). Skipping
 * the pad class (instead of multiplying it by 0) keeps a -inf there harmless. */
static double row_xent(const float *logp, int target, int V, float eps_ls, int pad_id) {
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    double share = others > 0 ? (double)eps_ls / others : 0.0;
    double on = others > 0 ? 1.0 - eps_ls : 1.0;
    double rest = 0.0;
    if (share > 0.0)
        for (int v = 0; v < V; v++)
            if (v != target && v != pad_id) rest += logp[v];
    return -(on * logp[target] + share * rest);
}

float smoothed_xent_forward(const float *logp, const int *targets, int N, int V,
                            float eps_ls, int pad_id, int *n_tokens) {
    assert(N >= 0 && V > 0 && pad_id < V);
    double total = 0.0;
    int count = 0;
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        assert(t >= 0 && t < V && "target id outside [0, V): validate input first");
        if (t == pad_id) continue;            /* padding: not a prediction */
        total += row_xent(logp + (long)n * V, t, V, eps_ls, pad_id);
        count++;
    }
    if (n_tokens) *n_tokens = count;
    return count > 0 ? (float)(total / count) : 0.0f;   /* all padding: 0, not 0/0 */
}

/* forward: loss = (1/n_tokens) * sum over counted rows of -sum_v dist_v logp_v,
 *          logp = logits - logsumexp(logits).
 * d(-sum_v dist_v logp_v)/d logits_u = softmax_u * sum_v dist_v - dist_u
 *                                    = softmax_u - dist_u   (dist sums to 1)
 * and softmax = exp(logp). Padding rows get nothing. */
void smoothed_xent_backward_rows(float *dlogits, const float *logp, const int *targets,
                                 int N, int V, float eps_ls, int pad_id, int n_tokens) {
    assert(N >= 0 && V > 0 && pad_id < V && n_tokens > 0);
    float inv = 1.0f / n_tokens;
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    float share = others > 0 ? eps_ls / others : 0.0f;
    float on = others > 0 ? 1.0f - eps_ls : 1.0f;
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        if (t == pad_id) continue;
        const float *lp = logp + (long)n * V;
        float *d = dlogits + (long)n * V;
        for (int v = 0; v < V; v++) {
            float dist = v == t ? on : v == pad_id ? 0.0f : share;
            d[v] += (expf(lp[v]) - dist) * inv;
        }
    }
}

int smoothed_xent_tokens(const int *targets, int N, int V, int pad_id) {
    assert(N >= 0 && V > 0 && pad_id < V);
    int count = 0;
    for (int n = 0; n < N; n++) {
        assert(targets[n] >= 0 && targets[n] < V);
        count += targets[n] != pad_id;
    }
    return count;
}

void smoothed_xent_backward_ref(float *dlogits, const float *logp, const int *targets,
                                int N, int V, float eps_ls, int pad_id) {
    int count = smoothed_xent_tokens(targets, N, V, pad_id);
    if (count > 0) smoothed_xent_backward_rows(dlogits, logp, targets, N, V, eps_ls, pad_id, count);
}
