/* attention_double.h - Eq. (1) and multi-head attention in double
 * precision, element by element, with the finite-difference helpers: the
 * references that tests/check_attention.c and tests/check_multihead.c
 * compare against and differentiate numerically. Independent of the
 * library's code (its plain twins are float, one call per step; these are
 * the paper's formulas, in double, per element).
 */
#ifndef ATTENTION_DOUBLE_H
#define ATTENTION_DOUBLE_H

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- references in double ---------------------------------------------------- */

/* out (B,h,Tq,d_v), w (B,h,Tq,Tk) = Eq. (1) element by element, in double;
 * Q, K, V as in sdpa_forward (double); mask (B,Tq,Tk) or NULL. A fully masked
 * row gives zeros, as the library promises. */
static inline void ref_sdpa(double *out, double *w, const double *Q, const double *K, const double *V,
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
static inline void ref_mha(double *out, const double *x_q, const double *x_kv,
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

static inline void to_double(double *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

static inline void to_float(float *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* ---- finite differences in double --------------------------------------------------------
 * The analytic gradients come from the float32 backward passes with dout = R
 * (a fixed random tensor), i.e. of the loss L = sum(out * R). The numeric
 * gradients differentiate the same L computed by the double-precision
 * references above, with central differences (testutil.h's fd_check_double):
 *     dL/dx ~ (L(x + eps) - L(x - eps)) / (2 eps),  eps = 1e-5.
 * In double the truncation error is ~eps^2 = 1e-10 and rounding ~1e-16/eps =
 * 1e-11, so what is left is float32 error in the analytic side: tolerance
 * 1e-4 + 1e-4 * max(|numeric|, |analytic|). */
#define FD_EPS 1e-5
#define FD_TOL 1e-4

static inline double dot_d(const double *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
