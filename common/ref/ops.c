/* ops.c - the reference matrix multiply, softmax, and element-wise ops. */
#include "ref/ops.h"

#include <math.h>

/* ---- matrix multiply ------------------------------------------------------ */

/* The readable version: for every output element, a dot product of a row of
 * op(A) with a column of op(B). Summed in double, so it is a good reference. */
void gemm_ref(int transA, int transB, int M, int N, int K,
              float alpha, const float *A, int lda, const float *B, int ldb,
              float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int p = 0; p < K; p++) {
                float a = transA ? A[(long)p * lda + i] : A[(long)i * lda + p];
                float b = transB ? B[(long)j * ldb + p] : B[(long)p * ldb + j];
                sum += (double)a * b;
            }
            float *c = &C[(long)i * ldc + j];
            *c = (float)(alpha * sum + (beta == 0.0f ? 0.0 : (double)beta * *c));
        }
    }
}

float dot(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* ---- exp of an array ------------------------------------------------------- */

void exp_array_ref(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}

/* ---- softmax -------------------------------------------------------------- */

void softmax_forward(float *out, const float *inp, int N, int C) {
    for (int r = 0; r < N; r++) {
        const float *x = inp + (long)r * C;
        float *y = out + (long)r * C;
        /* softmax(x) = softmax(x - c) for any c; c = max(x) makes every
         * exponent <= 0, so exp() is at most 1 and cannot overflow. */
        float max = -INFINITY;
        for (int i = 0; i < C; i++) max = x[i] > max ? x[i] : max;
        if (max == -INFINITY) {
            /* every entry masked: nothing to attend to. 0/0 would be NaN;
             * we return all zeros instead, so the row contributes nothing. */
            for (int i = 0; i < C; i++) y[i] = 0.0f;
            continue;
        }
        for (int i = 0; i < C; i++) y[i] = x[i] - max;
        exp_array_ref(y, y, C);        /* exp(-inf) = 0: masked entries vanish */
        float sum = 0.0f;
        for (int i = 0; i < C; i++) sum += y[i];
        float inv = 1.0f / sum;        /* sum >= 1: the max entry gave exp(0) */
        for (int i = 0; i < C; i++) y[i] *= inv;
    }
}

void softmax_backward(float *dinp, const float *dout, const float *out, int N, int C) {
    for (int r = 0; r < N; r++) {
        const float *y = out + (long)r * C, *dy = dout + (long)r * C;
        float *dx = dinp + (long)r * C;
        /* dy/dx = diag(y) - y y^T, so dx = y * (dy - <dy, y>) */
        float s = 0.0f;
        for (int i = 0; i < C; i++) s += dy[i] * y[i];
        for (int i = 0; i < C; i++) dx[i] += y[i] * (dy[i] - s);
    }
}

void softmax_naive(float *out, const float *inp, int N, int C) {
    for (int r = 0; r < N; r++) {
        float sum = 0.0f;
        for (int i = 0; i < C; i++) sum += expf(inp[(long)r * C + i]);
        for (int i = 0; i < C; i++) out[(long)r * C + i] = expf(inp[(long)r * C + i]) / sum;
    }
}

/* ---- element-wise ---------------------------------------------------------- */

void add_forward(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void scale_forward(float *out, const float *inp, float s, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = s * inp[i];
}

void fill(float *x, float value, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = value;
}
