/* rows.c - the decoder step's ops as plain loops (rows.h). Their tuned
 * twins, in fast/rows_fast.c, give the same results up to rounding. */
#include "ref/rows.h"
#include "ref/attention.h"

#include <string.h>

/* out[r,:] = bias + sum_i inp[r,i] * W[i,:], one row of W at a time: W is
 * read once, the R output rows stay in cache. */
void linear_rows_forward_ref(float *out, const float *inp, const float *W, const float *bias,
                             int R, int IN, int OUT) {
    for (int r = 0; r < R; r++)
        for (int j = 0; j < OUT; j++) out[(size_t)r * OUT + j] = bias ? bias[j] : 0.0f;
    for (int i = 0; i < IN; i++) {
        const float *w = W + (size_t)i * OUT;
        for (int r = 0; r < R; r++) {
            float a = inp[(size_t)r * IN + i];
            float *o = out + (size_t)r * OUT;
            for (int j = 0; j < OUT; j++) o[j] += a * w[j];
        }
    }
}

/* logit[r,v] = x[r] . E[v]: each embedding row is read once for all R rows */
void logits_rows_forward_ref(float *out, const float *x, const float *E, int R, int D, int V) {
    for (int v = 0; v < V; v++) {
        const float *e = E + (size_t)v * D;
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * D;
            float s = 0.0f;
            for (int c = 0; c < D; c++) s += xr[c] * e[c];
            out[(size_t)r * V + v] = s;
        }
    }
}

/* Each (row, head) is the reference Eq. (1), sdpa_forward_ref, with one
 * batch, one head and one query: its keys and values are rows 0..n-1 of
 * that head's stretch of the cache, d_k (d_v) floats apart, and its mask
 * (1, 1, n) is the sentence's row of keep. */
void attend_rows_forward_ref(float *out, float *weights, const float *q, const float *K, const float *V,
                             const uint8_t *keep, int R, int group, int h, int n, int stride, int d_k, int d_v) {
    for (int r = 0; r < R; r++) {
        int b = r / group;   /* rows b*group .. b*group+group-1 read the same keys */
        for (int i = 0; i < h; i++)
            sdpa_forward_ref(out + ((size_t)r * h + i) * d_v, weights + ((size_t)r * h + i) * n,
                             q + ((size_t)r * h + i) * d_k, K + ((size_t)b * h + i) * stride * d_k,
                             V + ((size_t)b * h + i) * stride * d_v, keep ? keep + (size_t)b * n : NULL,
                             1, 1, 1, n, d_k, d_v);
    }
}

void gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, const int *idx, int n,
                 size_t width) {
    for (int j = 0; j < n; j++)
        memcpy(dst + (size_t)j * dst_pitch, src + (size_t)(idx ? idx[j] : j) * src_pitch, width * sizeof(float));
}
