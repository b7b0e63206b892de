/* table1.c - Table 1's four layer types, forward only, counting their FLOPs;
 * their connectivity, breadth-first path lengths and sequential steps.
 * See table1.h for the table and the counting convention. */
#include "table1.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fast/attention_fast.h"
#include "fast/gemm.h"
#include "layers/linear.h"
#include "ref/ops.h"

const char *t1_kind_name(T1Kind kind) {
    static const char *names[T1_KINDS] = {"self-attention", "recurrent", "convolution",
                                          "separable conv", "restricted attn"};
    return kind >= 0 && kind < T1_KINDS ? names[kind] : "?";
}

/* ---- building -------------------------------------------------------------- */

int t1_layer_build(T1Layer *L, T1Kind kind, int n_max, int d, int h, int k, int r, int dil, Rng *rng) {
    assert(n_max >= 1 && d >= 1 && h >= 1 && k >= 1 && k % 2 == 1 && r >= 0 && dil >= 1);
    memset(L, 0, sizeof *L);
    L->kind = kind; L->n_max = n_max; L->d = d; L->h = h; L->k = k; L->r = r; L->dil = dil;
    size_t nd = (size_t)n_max * d, dd = (size_t)d * d;
    int attention = kind == T1_SELF_ATTENTION || kind == T1_RESTRICTED;
    int d_k = d / h;
    if (attention) assert(d % h == 0);
    int win = 2 * (r / 2) + 1 < n_max ? 2 * (r / 2) + 1 : n_max;   /* widest window */
    switch (kind) {
    case T1_SELF_ATTENTION: L->n_params = 4 * dd; L->n_work = mha_acts_size(1, n_max, n_max, h, d_k, d_k) + 4 * nd; break;
    case T1_RESTRICTED:     L->n_params = 4 * dd; L->n_work = 8 * nd + (size_t)win; break;
    case T1_RECURRENT:      L->n_params = 2 * dd + d; L->n_work = nd + d; break;
    case T1_CONVOLUTION:    L->n_params = (size_t)k * dd + d; L->n_work = 0; break;
    case T1_SEPARABLE:      L->n_params = (size_t)k * d + dd + d; L->n_work = nd; break;
    default: assert(!"unknown layer kind");
    }
    L->params = malloc(L->n_params * sizeof(float));
    L->work = L->n_work ? calloc(L->n_work, sizeof(float)) : NULL;
    if (!L->params || (L->n_work && !L->work)) { t1_layer_free(L); return -1; }
    /* N(0, 1/d): each output is a sum of d products, so its variance stays
     * about that of the input (and tanh stays out of its flat ends) */
    float std = 1.0f / sqrtf((float)d), *p = L->params;
    rng_fill_normal(rng, p, L->n_params, 0.0f, std);
    if (attention) {
        L->mha.w_q = p; L->mha.w_k = p + dd; L->mha.w_v = p + 2 * dd; L->mha.w_o = p + 3 * dd;
    } else if (kind == T1_RECURRENT) {
        L->w = p; L->u = p + dd; L->b = p + 2 * dd;
    } else if (kind == T1_CONVOLUTION) {
        L->w = p; L->b = p + (size_t)k * dd;
    } else {
        L->w = p; L->u = p + (size_t)k * d; L->b = L->u + dd;
    }
    if (L->b) fill(L->b, 0.1f, (size_t)d);
    /* activations: laid out once for n_max; a shorter sequence uses the
     * front of each array, which is laid out exactly as for n */
    if (kind == T1_SELF_ATTENTION) {
        size_t na = mha_acts_size(1, n_max, n_max, h, d_k, d_k);
        mha_acts_layout(&L->acts, L->work, 1, n_max, n_max, h, d_k, d_k);
        L->qh = L->work + na; L->kh = L->qh + nd; L->vh = L->kh + nd; L->oh = L->vh + nd;
    } else if (kind == T1_RESTRICTED) {
        float *w = L->work;
        L->acts.q = w;       L->acts.k = w + nd;      L->acts.v = w + 2 * nd;
        L->qh = w + 3 * nd; L->kh = w + 4 * nd; L->vh = w + 5 * nd;
        L->oh = w + 6 * nd; L->acts.concat = w + 7 * nd;
        L->acts.weights = w + 8 * nd;   /* one query's window of weights at a time */
    } else if (kind == T1_RECURRENT) {
        L->tmp = L->work; L->zeros = L->work + nd;
    } else if (kind == T1_SEPARABLE) {
        L->tmp = L->work;
    }
    return 0;
}

void t1_layer_free(T1Layer *L) {
    if (!L) return;
    free(L->params);
    free(L->work);
    L->params = L->work = NULL;
}

/* ---- counted building blocks ----------------------------------------------
 * Each does one library call and adds what it computed to a counter. */

/* out (M,N) = a (M,K) @ b (K,N) */
static void mm(float *out, const float *a, const float *b, int M, int K, int N, uint64_t *count) {
    matmul_forward(out, a, b, M, K, N);
    *count += 2ull * M * K * N;
}

/* out (M,N) += a (M,K) @ b (K,N); a rows lda apart */
static void mm_acc(float *out, const float *a, int lda, const float *b, int M, int K, int N,
                   uint64_t *count) {
    gemm(0, 0, M, N, K, 1.0f, a, lda, b, N, 1.0f, out, N);
    *count += 2ull * M * K * N;
}

/* Eq. (1) for h heads, Tq queries against Tk keys; see table1.h for the
 * per-row count (2 d_k dot, 6 softmax, 2 d_v mix per score, 1 per row). */
static void attend(float *o, float *w, const float *q, const float *k, const float *v,
                   int h, int Tq, int Tk, int d_k, uint64_t *count) {
    sdpa_forward(o, w, q, k, v, NULL, 1, h, Tq, Tk, d_k, d_k);
    *count += (uint64_t)h * Tq * ((uint64_t)Tk * (2 * d_k + 6 + 2 * d_k) + 1);
}

/* out (n,d) = bias b (d) in every row */
static void bias_rows(float *out, const float *b, int n, int d) {
    for (int i = 0; i < n; i++) memcpy(out + (size_t)i * d, b, sizeof(float) * d);
}

int t1_conv_offset(int m, int k, int dil) { return (m - (k - 1) / 2) * dil; }

/* rows i of a length-n sequence whose tap at offset o lands inside it:
 * i0 <= i < i1 (empty when i1 <= i0) */
static void tap_rows(int o, int n, int *i0, int *i1) {
    *i0 = o < 0 ? -o : 0;
    *i1 = o > 0 ? n - o : n;
}

/* ---- the forward passes ------------------------------------------------------ */

/* Sec. 3.2.2 with the library's calls, in mha_forward's order:
 * out = Concat(head_1..head_h) W^O, head_i = Attention(x W_i^Q, x W_i^K, x W_i^V).
 * The steps are called one by one, not through mha_forward, so that each
 * adds its own FLOPs to its own count (Table 1's n^2 d apart from the
 * projections); the attention itself is the library's sdpa_forward. */
static void self_attention(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    int d = L->d, h = L->h, d_k = d / h;
    MhaActs *a = &L->acts;
    mha_acts_layout(a, L->work, 1, n, n, h, d_k, d_k);    /* the front of the n_max layout */
    mm(a->q, x, L->mha.w_q, n, d, d, &f->other);          /* q (n, h*d_k) */
    mm(a->k, x, L->mha.w_k, n, d, d, &f->other);
    mm(a->v, x, L->mha.w_v, n, d, d, &f->other);
    heads_split(L->qh, a->q, 1, n, h, d_k);                /* qh (h, n, d_k) */
    heads_split(L->kh, a->k, 1, n, h, d_k);
    heads_split(L->vh, a->v, 1, n, h, d_k);
    /* every query against every key: the (h, n, n) scores, Table 1's n^2 d */
    attend(L->oh, a->weights, L->qh, L->kh, L->vh, h, n, n, d_k, &f->table);
    heads_merge(a->concat, L->oh, 1, n, h, d_k);           /* concat (n, h*d_k) */
    mm(out, a->concat, L->mha.w_o, n, d, d, &f->other);
}

/* Sec. 4: "self-attention could be restricted to considering only a
 * neighborhood of size r in the input sequence centered around the
 * respective output position": query i attends to keys |i - j| <= r/2. */
static void restricted(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    int d = L->d, h = L->h, d_k = d / h, half = L->r / 2;
    MhaActs *a = &L->acts;
    mm(a->q, x, L->mha.w_q, n, d, d, &f->other);
    mm(a->k, x, L->mha.w_k, n, d, d, &f->other);
    mm(a->v, x, L->mha.w_v, n, d, d, &f->other);
    heads_split(L->qh, a->q, 1, n, h, d_k);                /* (h, n, d_k): a head's rows are contiguous, */
    heads_split(L->kh, a->k, 1, n, h, d_k);                /* so a window of keys is a (w, d_k) block   */
    heads_split(L->vh, a->v, 1, n, h, d_k);
    for (int hh = 0; hh < h; hh++)
        for (int i = 0; i < n; i++) {
            int lo = i - half < 0 ? 0 : i - half, hi = i + half > n - 1 ? n - 1 : i + half;
            size_t qi = ((size_t)hh * n + i) * d_k, kj = ((size_t)hh * n + lo) * d_k;
            attend(L->oh + qi, a->weights, L->qh + qi, L->kh + kj, L->vh + kj,
                   1, 1, hi - lo + 1, d_k, &f->table);
        }
    heads_merge(a->concat, L->oh, 1, n, h, d_k);
    mm(out, a->concat, L->mha.w_o, n, d, d, &f->other);
}

/* h_t = tanh(x_t W + h_{t-1} U + b) (row vectors), h_{-1} = 0. x W has no
 * dependence between steps, so it is one gemm; h_{t-1} U must wait for the
 * previous step: n matrix-vector products, one after another. */
static void recurrent(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    int d = L->d;
    mm(L->tmp, x, L->w, n, d, d, &f->table);               /* tmp (n, d) = x W */
    for (int t = 0; t < n; t++) {
        float *ht = out + (size_t)t * d;
        const float *prev = t ? ht - d : L->zeros;
        add_forward(ht, L->tmp + (size_t)t * d, L->b, (size_t)d);   /* x_t W + b */
        f->other += d;
        mm_acc(ht, prev, d, L->u, 1, d, d, &f->table);              /* += h_{t-1} U */
        for (int j = 0; j < d; j++) ht[j] = tanhf(ht[j]);
        f->other += d;
    }
}

/* out_i = b + sum_m x_{i + o_m} W_m, o_m = t1_conv_offset(m): for each tap,
 * one gemm over the rows whose input lies inside the sequence (zero padding
 * contributes nothing, so it is not computed). */
static void convolution(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    int d = L->d;
    bias_rows(out, L->b, n, d);                             f->other += (uint64_t)n * d;
    for (int m = 0; m < L->k; m++) {
        int o = t1_conv_offset(m, L->k, L->dil), i0, i1;
        tap_rows(o, n, &i0, &i1);
        if (i1 <= i0) continue;
        mm_acc(out + (size_t)i0 * d, x + (size_t)(i0 + o) * d, d, L->w + (size_t)m * d * d,
               i1 - i0, d, d, &f->table);
    }
}

/* Sec. 4: "Separable convolutions [6] decrease the complexity considerably,
 * to O(k n d + n d^2)": a kernel of k per channel (depthwise), then one d x d
 * matrix (pointwise) mixing the channels. */
static void separable(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    int d = L->d;
    fill(L->tmp, 0.0f, (size_t)n * d);
    for (int m = 0; m < L->k; m++) {
        int o = t1_conv_offset(m, L->k, L->dil), i0, i1;
        tap_rows(o, n, &i0, &i1);
        const float *wm = L->w + (size_t)m * d;
        for (int i = i0; i < i1; i++) {
            float *ti = L->tmp + (size_t)i * d;
            const float *xi = x + (size_t)(i + o) * d;
            for (int c = 0; c < d; c++) ti[c] += wm[c] * xi[c];
        }
        if (i1 > i0) f->table += 2ull * (i1 - i0) * d;
    }
    bias_rows(out, L->b, n, d);                             f->other += (uint64_t)n * d;
    mm_acc(out, L->tmp, d, L->u, n, d, d, &f->table);
}

void t1_forward(T1Layer *L, float *out, const float *x, int n, Flops *f) {
    assert(n >= 1 && n <= L->n_max);
    Flops sink = {0, 0};
    if (!f) f = &sink;
    switch (L->kind) {
    case T1_SELF_ATTENTION: self_attention(L, out, x, n, f); break;
    case T1_RESTRICTED:     restricted(L, out, x, n, f); break;
    case T1_RECURRENT:      recurrent(L, out, x, n, f); break;
    case T1_CONVOLUTION:    convolution(L, out, x, n, f); break;
    case T1_SEPARABLE:      separable(L, out, x, n, f); break;
    default: assert(!"unknown layer kind");
    }
}

/* ---- connectivity -------------------------------------------------------------- */

int t1_taps(T1Kind kind, int i, int n, int k, int r, int dil, int *taps, int *reads_prev) {
    int c = 0;
    if (reads_prev) *reads_prev = 0;
    switch (kind) {
    case T1_SELF_ATTENTION:
        for (int j = 0; j < n; j++) taps[c++] = j;
        break;
    case T1_RESTRICTED:
        for (int j = i - r / 2; j <= i + r / 2; j++)
            if (j >= 0 && j < n) taps[c++] = j;
        break;
    case T1_RECURRENT:
        taps[c++] = i;
        if (reads_prev) *reads_prev = i > 0;
        break;
    case T1_CONVOLUTION:
    case T1_SEPARABLE:
        for (int m = 0; m < k; m++) {
            int j = i + t1_conv_offset(m, k, dil);
            if (j >= 0 && j < n) taps[c++] = j;
        }
        break;
    default: assert(!"unknown layer kind");
    }
    return c;
}

void t1_probe(T1Layer *L, uint8_t *dep, const float *x, float *xp, float *y0, float *y1, int n) {
    size_t nd = (size_t)n * L->d;
    t1_forward(L, y0, x, n, NULL);
    for (int s = 0; s < n; s++) {
        memcpy(xp, x, nd * sizeof(float));
        for (int c = 0; c < L->d; c++) xp[(size_t)s * L->d + c] += 0.5f;
        t1_forward(L, y1, xp, n, NULL);
        for (int i = 0; i < n; i++) {
            int moved = 0;
            for (int c = 0; c < L->d; c++) moved |= y1[(size_t)i * L->d + c] != y0[(size_t)i * L->d + c];
            dep[(size_t)i * n + s] = (uint8_t)moved;
        }
    }
}

int t1_dilation(int l, int n, int k) {
    int powers = 0;                      /* how many of 1, k, k^2, ... are below n */
    for (long p = 1; p < n; p *= k) powers++;
    if (powers == 0) powers = 1;
    int dil = 1;
    for (int j = 0; j < l % powers; j++) dil *= k;
    return dil;
}

/* Recurrent: breadth-first from each x_s over the unrolled layer, nodes
 * x_0..x_{n-1} (ids 0..n-1) and h_0..h_{n-1} (ids n..2n-1), edges from
 * t1_taps: x_tap -> h_t, and h_{t-1} -> h_t when the step reads it. */
static int recurrent_path_length(int n, long *unreachable) {
    int *taps = malloc(sizeof(int) * n), *next = malloc(sizeof(int) * 2 * n * 2);
    int *head = malloc(sizeof(int) * 2 * n), *to = malloc(sizeof(int) * 2 * n * 2);
    int *dist = malloc(sizeof(int) * 2 * n), *queue = malloc(sizeof(int) * 2 * n);
    int longest = -1;
    if (!taps || !next || !head || !to || !dist || !queue) goto done;
    /* adjacency as linked lists in arrays: head[node] -> edge -> next[edge] */
    int edges = 0;
    for (int v = 0; v < 2 * n; v++) head[v] = -1;
    for (int t = 0; t < n; t++) {
        int prev, c = t1_taps(T1_RECURRENT, t, n, 1, 0, 1, taps, &prev);
        for (int e = 0; e < c + prev; e++) {
            int from = e < c ? taps[e] : n + t - 1;
            to[edges] = n + t; next[edges] = head[from]; head[from] = edges++;
        }
    }
    long missed = 0;
    longest = 0;
    for (int s = 0; s < n; s++) {
        for (int v = 0; v < 2 * n; v++) dist[v] = -1;
        int qh = 0, qt = 0;
        dist[s] = 0; queue[qt++] = s;
        while (qh < qt) {
            int v = queue[qh++];
            for (int e = head[v]; e >= 0; e = next[e])
                if (dist[to[e]] < 0) { dist[to[e]] = dist[v] + 1; queue[qt++] = to[e]; }
        }
        for (int t = 0; t < n; t++) {
            if (dist[n + t] < 0) missed++;
            else if (dist[n + t] > longest) longest = dist[n + t];
        }
    }
    if (unreachable) *unreachable = missed;
done:
    free(taps); free(next); free(head); free(to); free(dist); free(queue);
    return longest;
}

/* Attention and convolution stacks: breadth-first from every input position
 * at once, one layer per step. reach[i] is a bit set over the input
 * positions: those with a path to position i of the current layer. One
 * layer further, position i is reached from whatever reaches any of its taps. */
int t1_path_length(T1Kind kind, int n, int k, int r, int dilated, int max_layers, long *unreachable) {
    assert(n >= 1 && max_layers >= 1);
    if (kind == T1_RECURRENT) return recurrent_path_length(n, unreachable);
    size_t words = ((size_t)n + 63) / 64;
    uint64_t *reach = calloc((size_t)n * words, sizeof(uint64_t));
    uint64_t *next = calloc((size_t)n * words, sizeof(uint64_t));
    int *taps = malloc(sizeof(int) * n);
    int layers = -1;
    if (!reach || !next || !taps) goto done;
    for (int i = 0; i < n; i++) reach[(size_t)i * words + i / 64] |= 1ull << (i % 64);
    uint64_t last = n % 64 ? (1ull << (n % 64)) - 1 : ~0ull;   /* valid bits of the last word */
    for (int l = 0; l < max_layers; l++) {
        int dil = dilated ? t1_dilation(l, n, k) : 1, full = 1;
        for (int i = 0; i < n; i++) {
            uint64_t *ni = next + (size_t)i * words;
            memset(ni, 0, words * sizeof(uint64_t));
            int c = t1_taps(kind, i, n, k, r, dil, taps, NULL);
            for (int e = 0; e < c; e++) {
                const uint64_t *rj = reach + (size_t)taps[e] * words;
                for (size_t w = 0; w < words; w++) ni[w] |= rj[w];
            }
            for (size_t w = 0; w + 1 < words && full; w++) full = ni[w] == ~0ull;
            full = full && ni[words - 1] == last;
        }
        uint64_t *t = reach; reach = next; next = t;
        if (full) { layers = l + 1; break; }
    }
    if (unreachable) {
        long missed = 0;
        for (int i = 0; i < n; i++)
            for (int s = 0; s < n; s++) missed += !((reach[(size_t)i * words + s / 64] >> (s % 64)) & 1);
        *unreachable = missed;
    }
done:
    free(reach); free(next); free(taps);
    return layers;
}

int t1_sequential_ops(T1Kind kind, int n, int k, int r) {
    int *taps = malloc(sizeof(int) * n), *ready = malloc(sizeof(int) * n), longest = -1;
    if (taps && ready) {
        longest = 0;
        /* in the order the forward pass computes the outputs */
        for (int i = 0; i < n; i++) {
            int prev, c = t1_taps(kind, i, n, k, r, 1, taps, &prev), step = 0;
            (void)c;                     /* the inputs are all ready at step 0 */
            if (prev && ready[i - 1] > step) step = ready[i - 1];
            ready[i] = step + 1;
            if (ready[i] > longest) longest = ready[i];
        }
    }
    free(taps); free(ready);
    return longest;
}

int t1_fit_from(const double *table_share, int m, double share) {
    int lo = m;
    while (lo > 0 && table_share[lo - 1] >= share) lo--;
    return lo < m / 2 ? m / 2 : lo;     /* large sizes only: the upper half of the sweep */
}

double t1_crossover(const double *x, const double *a, const double *b, int m, int *always) {
    *always = 0;
    if (m < 1 || a[m - 1] <= b[m - 1]) return -1;
    int p = m - 1;
    while (p > 0 && a[p - 1] > b[p - 1]) p--;
    if (p == 0) { *always = 1; return 0; }
    double l0 = log(a[p - 1] / b[p - 1]), l1 = log(a[p] / b[p]);   /* l0 <= 0 < l1 */
    double t = l0 / (l0 - l1);
    return exp(log(x[p - 1]) + t * (log(x[p]) - log(x[p - 1])));
}

double t1_loglog_slope(const double *x, const double *y, int lo, int hi) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = hi - lo;
    if (m < 2) return NAN;
    for (int i = lo; i < hi; i++) {
        double a = log(x[i]), b = log(y[i]);
        sx += a; sy += b; sxx += a * a; sxy += a * b;
    }
    return (m * sxy - sx * sy) / (m * sxx - sx * sx);
}
