/* backend_cpu.c - the CPU backend: the library's own functions in the table
 * of backend.h. Memory is host memory; share() hands the host pointer back
 * itself, so a model on the CPU has one copy of its weights. */
#include "model/backend.h"

#include <stdlib.h>
#include <string.h>
#include "model/decode.h"
#include "fast/gemm.h"
#include "ref/nn.h"
#include "ref/ops.h"
#include "ref/optim.h"
#include "core/tensor.h"

/* touched now: activations are first written inside parallel jobs */
static void *cpu_alloc(size_t bytes) { return calloc_big(1, bytes ? bytes : 1, 1); }
static void cpu_free(void *p) { free(p); }
static void *cpu_share(void *host, size_t bytes) { return host; }
static void cpu_unshare(void *view, void *host) {}
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (dst != src) memcpy(dst, src, bytes);
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
    .alloc = cpu_alloc,
    .free = cpu_free,
    .share = cpu_share,
    .unshare = cpu_unshare,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .gemm = gemm,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .sdpa_forward = sdpa_forward,
    .mha_forward = mha_forward,
    .mha_backward = mha_backward,
    .ffn_forward = ffn_forward,
    .ffn_backward = ffn_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .residual_forward = residual_forward,
    .embed_forward = embed_forward,
    .embed_backward = embed_backward,
    .logsoftmax_forward = logsoftmax_forward,
    .smoothed_xent_forward = cpu_xent_forward,
    .smoothed_xent_backward = smoothed_xent_backward,
    .adam_update = adam_update,
    .sum_squares = cpu_sum_squares,
    /* decoding (decode.h) */
    .linear_rows_forward = linear_rows_forward,
    .logits_rows_forward = logits_rows_forward,
    .relu_forward = relu_forward,
    .attend_rows_forward = attend_rows_forward,
    .gather_rows = gather_rows,
    .adam_step = adam_step,
};

const Backend *backend_cpu(void) { return &cpu; }
