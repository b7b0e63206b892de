/* backend_cpu.c - the CPU backend: the library's own functions in the table
 * of backend.h. Memory is host memory; share() hands the host pointer back
 * itself, so a model on the CPU has one copy of its weights.
 *
 * Most entries ARE the library function of the same name. The few written
 * out below are ops the model used to spell as a gemm call of its own (the
 * tied output projection, the learned PE's gradient, a scaled copy): they
 * make that very call, so the bits are the ones those steps always had. */
#include "model/backend_cpu.h"

#include <stdlib.h>
#include <string.h>
#include "core/tensor.h"
#include "fast/gemm.h"
#include "fast/nn_fast.h"
#include "fast/optim_fast.h"
#include "fast/rows_fast.h"
#include "layers/linear.h"
#include "layers/multihead.h"
#include "ref/nn.h"
#include "ref/rows.h"

/* ---- memory ------------------------------------------------------------------ */

/* touched now: activations are first written inside parallel jobs */
static void *cpu_alloc(size_t bytes) { return calloc_big(1, bytes ? bytes : 1, 1); }
static void cpu_free(void *p) { free(p); }
static void *cpu_share(void *host, size_t bytes) { return host; }
static void cpu_unshare(void *view, void *host) {}
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (dst != src) memcpy(dst, src, bytes);
}

/* ---- ops written out here ----------------------------------------------------- */

/* dpos (1, T*D) += ones (1,B) . demb (B, T*D): the batch's rows summed */
static void cpu_pos_embed_backward(float *dpos, const float *demb, const float *ones, int B, int T,
                                   int d_model) {
    int n = T * d_model;
    gemm(0, 0, 1, n, B, 1.0f, ones, B, demb, n, 1.0f, dpos, n);
}

/* out = s * inp as the (1x1) by (1xn) product with alpha = s: one multiply
 * per float, the same bits on every backend */
static void cpu_scale_forward(float *out, const float *inp, float s, size_t n) {
    static const float one = 1.0f;
    gemm(0, 0, 1, (int)n, 1, s, &one, 1, inp, (int)n, 0.0f, out, (int)n);
}

/* logits (N,V) = x (N,D) @ E^T */
static void cpu_logits_forward(float *logits, const float *x, const float *E, int N, int D, int V) {
    gemm(0, 1, N, V, D, 1.0f, x, D, E, D, 0.0f, logits, V);
}

/* forward: logits = x @ E^T
 *   dx (N,D)  = dlogits (N,V) @ E (V,D)      (beta 0: written)
 *   dE (V,D) += dlogits^T @ x                (beta 1: added)   */
static void cpu_logits_backward(float *dx, float *dE, const float *dlogits, const float *x, const float *E,
                                int N, int D, int V) {
    gemm(0, 0, N, D, V, 1.0f, dlogits, V, E, D, 0.0f, dx, D);
    gemm(1, 0, V, D, N, 1.0f, dlogits, V, x, D, 1.0f, dE, D);
}

/* the per-row losses are not needed on the CPU: smoothed_xent_forward sums as it goes */
static float cpu_xent_forward(float *row_loss, const float *logp, const int *targets, int N, int V,
                              float eps_ls, int pad_id, int *n_tokens) {
    return smoothed_xent_forward(logp, targets, N, V, eps_ls, pad_id, n_tokens);
}

/* in double and in index order, so the same gradients give the same norm */
static double cpu_sum_squares(const float *x, size_t n) {
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
    return sq;
}

static const Backend cpu = {
    .abi = BACKEND_ABI,
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .share = cpu_share,
    .unshare = cpu_unshare,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    /* the training pass */
    .embed_forward = embed_forward,
    .embed_backward = embed_backward,
    .pos_embed_backward = cpu_pos_embed_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .residual_forward = residual_forward,
    .scale_forward = cpu_scale_forward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .mha_forward = mha_forward,
    .mha_backward = mha_backward,
    .ffn_forward = ffn_forward,
    .ffn_backward = ffn_backward,
    .logits_forward = cpu_logits_forward,
    .logits_backward = cpu_logits_backward,
    .logsoftmax_forward = logsoftmax_forward,
    .smoothed_xent_forward = cpu_xent_forward,
    .smoothed_xent_backward = smoothed_xent_backward,
    /* the optimizer step, a rank's gradient norm */
    .adam_step = adam_step,
    .sum_squares = cpu_sum_squares,
    /* decoding (decode.h; the functions: fast/rows_fast.h) */
    .linear_rows_forward = linear_rows_forward,
    .logits_rows_forward = logits_rows_forward,
    .relu_forward = relu_forward,
    .attend_rows_forward = attend_rows_forward,
    .gather_rows = gather_rows,
};

const Backend *backend_cpu(void) { return &cpu; }
