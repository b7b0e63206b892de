/* host_shim.c - every kernels.h function the CUDA backend calls, done by the
 * CPU function it mirrors: a stand-in GPU for machines without one.
 *
 * Linked with backend_cuda.c into build/libaiyn_cuda_shim.so (every build,
 * no nvcc needed), it lets the tests run the CUDA backend's host code (the
 * table, the workspace, multi-head attention and FFN composed from kernels,
 * the buffer sizes the model's counting pass gives, uploads and downloads)
 * through the very dlopen() path --device cuda takes. What it cannot check
 * is the kernels themselves: that is selftest.c's job on a real GPU.
 *
 * "Device memory" is malloc'ed and filled with 0xff bytes, so a read of
 * anything the code never wrote is a NaN that shows up in the comparison.
 * The table keeps the GPU's contract (host_memory = 0): shared code reaches
 * this memory only through upload and download, as it must on a GPU.
 * cuda_sdpa_forward is here for device.c too, which takes it by name for
 * its one-op helper (Eq. (1) alone is no op of the table).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast/attention_fast.h"
#include "ref/multihead_ref.h"
#include "fast/rows_fast.h"
#include "decode_kernels.h"
#include "fast/gemm.h"
#include "fast/nn_fast.h"
#include "kernels.h"
#include "layers/linear.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "ref/optim.h"

int cuda_device_count(void) { return 1; }
void cuda_release(void) {}
void cuda_sync(void) {}

void *cuda_try_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p) memset(p, 0xff, bytes);
    return p;
}
void *cuda_alloc(size_t bytes) {
    void *p = cuda_try_alloc(bytes);
    if (!p) {
        fprintf(stderr, "host shim: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}
void cuda_free(void *dev) { free(dev); }
void cuda_upload(void *dst, const void *src, size_t bytes) { if (dst != src) memcpy(dst, src, bytes); }
void cuda_download(void *dst, const void *src, size_t bytes) { if (dst != src) memcpy(dst, src, bytes); }
void cuda_copy(void *dst, const void *src, size_t bytes) { if (dst != src) memcpy(dst, src, bytes); }
void cuda_zero(void *dev, size_t bytes) { memset(dev, 0, bytes); }

void cuda_gemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    gemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void cuda_linear_forward(float *out, const float *inp, const float *W, const float *bias, int N,
                         int IN, int OUT) {
    linear_forward(out, inp, W, bias, N, IN, OUT);
}
void cuda_linear_backward(float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                          const float *W, int N, int IN, int OUT) {
    linear_backward(dinp, dW, dbias, dout, inp, W, N, IN, OUT);
}
void cuda_sdpa_forward(float *out, float *weights, const float *Q, const float *K, const float *V,
                       const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v) {
    sdpa_forward(out, weights, Q, K, V, mask, B, h, Tq, Tk, d_k, d_v);
}
void cuda_sdpa_backward(float *dQ, float *dK, float *dV, float *scratch, const float *dout,
                        const float *weights, const float *Q, const float *K, const float *V,
                        int B, int h, int Tq, int Tk, int d_k, int d_v) {
    sdpa_backward(dQ, dK, dV, scratch, dout, weights, Q, K, V, B, h, Tq, Tk, d_k, d_v);
}
void cuda_heads_split(float *out, const float *inp, int B, int T, int h, int d) {
    heads_split(out, inp, B, T, h, d);
}
void cuda_heads_merge(float *out, const float *inp, int B, int T, int h, int d) {
    heads_merge(out, inp, B, T, h, d);
}
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                            const float *gamma, const float *beta, int N, int C) {
    layernorm_forward(out, mean, rstd, inp, gamma, beta, N, C);
}
void cuda_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                             const float *inp, const float *mean, const float *rstd,
                             const float *gamma, int N, int C) {
    layernorm_backward(dinp, dgamma, dbeta, dout, inp, mean, rstd, gamma, N, C);
}
void cuda_relu_forward(float *out, const float *inp, size_t n) { relu_forward(out, inp, n); }
void cuda_relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    relu_backward(dinp, dout, out, n);
}
void cuda_dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                          uint64_t key, uint32_t tensor) {
    dropout_forward(out, keep, inp, p, n, key, tensor);
}
void cuda_dropout_backward(float *dinp, const float *dout, const float *keep, size_t n) {
    dropout_backward(dinp, dout, keep, n);
}
void cuda_residual_forward(float *out, const float *a, const float *b, size_t n) {
    residual_forward(out, a, b, n);
}
void cuda_embed_forward(float *out, const int *ids, const float *table, const float *pe, int B,
                        int T, int d_model, int vocab) {
    embed_forward(out, ids, table, pe, B, T, d_model, vocab);
}
void cuda_embed_backward(float *dtable, const float *dout, const int *ids, int B, int T,
                         int d_model, int vocab) {
    embed_backward(dtable, dout, ids, B, T, d_model, vocab);
}
void cuda_logsoftmax_forward(float *logp, const float *logits, int N, int V) {
    logsoftmax_forward(logp, logits, N, V);
}
float cuda_smoothed_xent_forward(float *row_loss, const float *logp, const int *targets, int N,
                                 int V, float eps_ls, int pad_id, int *n_tokens) {
    return smoothed_xent_forward(logp, targets, N, V, eps_ls, pad_id, n_tokens);
}
void cuda_smoothed_xent_backward(float *dlogits, const float *logp, const int *targets, int N,
                                 int V, float eps_ls, int pad_id) {
    smoothed_xent_backward(dlogits, logp, targets, N, V, eps_ls, pad_id);
}
void cuda_adam_update(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, int step) {
    adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, step);
}
double cuda_sum_squares(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* decoding (decode_kernels.h): the CPU's functions; idx is host memory here too */
void cuda_attend_rows_forward(float *out, float *weights, const float *q, const float *K, const float *V,
                              const uint8_t *keep, int R, int group, int h, int n, int stride, int d_k,
                              int d_v) {
    attend_rows_forward(out, weights, q, K, V, keep, R, group, h, n, stride, d_k, d_v);
}
void cuda_gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch, const int *idx,
                      int n, size_t width) {
    gather_rows(dst, dst_pitch, src, src_pitch, idx, n, width);
}
