/* backend_cuda.c - the CUDA backend: backend.h's table filled with cuda/'s
 * kernels (kernels.h). Built into build/libaiyn_cuda.so with the .cu files;
 * a program opens it with dlopen() only when --device cuda asks
 * (common/model/backend.c), so the CPU path never loads cudart or cuBLAS.
 *
 * Each entry does what the CPU backend's entry of the same name does;
 * where the CPU has one function and the GPU several kernels (multi-head
 * attention, the FFN, Adam's step) the composition is here, quoting the
 * forward line each backward step undoes; where the CPU makes one gemm call
 * (the tied projection, the learned PE's gradient, a scaled copy) this file
 * makes the same call to cuBLAS. Nothing here knows about the Transformer: the model is
 * common/model/model.c, for both devices.
 *
 * Memory: every pointer the table takes or returns is device memory
 * (host_memory = 0). Multi-head attention needs the heads in (B,h,T,d)
 * order for the batched kernels; that copy lives in a workspace of this
 * file (grown on first use, like the cuBLAS handle and the 1.0f of
 * gpu_scale_forward; the process's exit frees them), so MhaActs keeps the
 * (B,T,h*d) layout the CPU uses.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/backend.h"
#include "decode_kernels.h"
#include "kernels.h"

/* ---- memory ------------------------------------------------------------------ */

static void *gpu_alloc(size_t bytes) {
    void *p = cuda_try_alloc(bytes);
    if (p) cuda_zero(p, bytes ? bytes : 1);
    return p;
}

static void *gpu_share(void *host, size_t bytes) {
    void *p = cuda_try_alloc(bytes);
    if (p) cuda_upload(p, host, bytes);
    return p;
}

static void gpu_unshare(void *view, void *host) { cuda_free(view); }

/* ---- the workspace: float buffers for one call, grown when too small -------- */
static float *ws;
static size_t ws_floats;

static float *workspace(size_t floats) {
    if (floats > ws_floats) {
        cuda_free(ws);
        ws = cuda_alloc(floats * sizeof(float));   /* out of GPU memory: says so, exits 1 */
        ws_floats = floats;
    }
    return ws;
}

/* ---- multi-head attention (layers/multihead.c's mha_forward / mha_backward) - */

static void gpu_mha_forward(float *out, MhaActs *a, const MhaParams *p, const float *x_q,
                            const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                            int D, int h, int dk, int dv) {
    size_t nq = (size_t)B * Tq * h * dk, nk = (size_t)B * Tk * h * dk;
    size_t nv = (size_t)B * Tk * h * dv, no = (size_t)B * Tq * h * dv;
    float *qh = workspace(nq + nk + nv + no), *kh = qh + nq, *vh = kh + nk, *oh = vh + nv;
    /* project: Q W^Q, K W^K, V W^V for all heads at once */
    cuda_linear_forward(a->q, x_q, p->w_q, NULL, B * Tq, D, h * dk);
    cuda_linear_forward(a->k, x_kv, p->w_k, NULL, B * Tk, D, h * dk);
    cuda_linear_forward(a->v, x_kv, p->w_v, NULL, B * Tk, D, h * dv);
    /* split: [batch, seq, h*d] -> [batch, heads, seq, d] */
    cuda_heads_split(qh, a->q, B, Tq, h, dk);
    cuda_heads_split(kh, a->k, B, Tk, h, dk);
    cuda_heads_split(vh, a->v, B, Tk, h, dv);
    /* Eq. (1) for every head; the weights are kept for backward */
    cuda_sdpa_forward(oh, a->weights, qh, kh, vh, mask, B, h, Tq, Tk, dk, dv);
    /* Concat(head_1..head_h) W^O */
    cuda_heads_merge(a->concat, oh, B, Tq, h, dv);
    cuda_linear_forward(out, a->concat, p->w_o, NULL, B * Tq, h * dv, D);
}

static void gpu_mha_backward(float *dx_q, float *dx_kv, MhaParams *g, float *scratch,
                             const float *dout, const MhaActs *a, const MhaParams *p,
                             const float *x_q, const float *x_kv, int B, int Tq, int Tk, int D,
                             int h, int dk, int dv) {
    size_t nq = (size_t)B * Tq * h * dk, nk = (size_t)B * Tk * h * dk, nv = (size_t)B * Tk * h * dv;
    size_t nw = (size_t)B * h * Tq * Tk, no = (size_t)B * h * Tq * dv;
    float *qh = workspace(2 * (nq + nk + nv) + 2 * no + nw + nq + nk + nv);
    float *kh = qh + nq, *vh = kh + nk;                 /* the forward's heads, again */
    float *dconcat = vh + nv, *doh = dconcat + no;      /* (B,Tq,h*d_v), (B,h,Tq,d_v) */
    float *dscores = doh + no;                          /* (B,h,Tq,Tk)                */
    float *dqh = dscores + nw, *dkh = dqh + nq, *dvh = dkh + nk;
    float *dq = dvh + nv, *dk_ = dq + nq, *dv_ = dk_ + nk;
    cuda_heads_split(qh, a->q, B, Tq, h, dk);
    cuda_heads_split(kh, a->k, B, Tk, h, dk);
    cuda_heads_split(vh, a->v, B, Tk, h, dv);
    /* forward: out = concat W_O */
    cuda_zero(dconcat, no * sizeof(float));
    cuda_linear_backward(dconcat, g->w_o, NULL, dout, a->concat, p->w_o, B * Tq, h * dv, D);
    /* forward: concat = merge(oh) */
    cuda_heads_split(doh, dconcat, B, Tq, h, dv);
    /* forward: oh = sdpa(qh, kh, vh) */
    cuda_zero(dqh, (nq + nk + nv) * sizeof(float));   /* dqh, dkh, dvh are adjacent */
    cuda_sdpa_backward(dqh, dkh, dvh, dscores, doh, a->weights, qh, kh, vh, B, h, Tq, Tk, dk, dv);
    /* forward: qh = split(q) etc. */
    cuda_heads_merge(dq, dqh, B, Tq, h, dk);
    cuda_heads_merge(dk_, dkh, B, Tk, h, dk);
    cuda_heads_merge(dv_, dvh, B, Tk, h, dv);
    /* forward: q = x_q W_Q, k = x_kv W_K, v = x_kv W_V */
    cuda_linear_backward(dx_q, g->w_q, NULL, dq, x_q, p->w_q, B * Tq, D, h * dk);
    cuda_linear_backward(dx_kv, g->w_k, NULL, dk_, x_kv, p->w_k, B * Tk, D, h * dk);
    cuda_linear_backward(dx_kv, g->w_v, NULL, dv_, x_kv, p->w_v, B * Tk, D, h * dv);
}

/* ---- the FFN (nn.c's ffn_forward / ffn_backward, Eq. 2) ---------------------- */

static void gpu_ffn_forward(float *out, float *hidden, const float *x, const float *W1,
                            const float *b1, const float *W2, const float *b2, int N, int D, int F) {
    cuda_linear_forward(hidden, x, W1, b1, N, D, F);
    cuda_relu_forward(hidden, hidden, (size_t)N * F);
    cuda_linear_forward(out, hidden, W2, b2, N, F, D);
}

static void gpu_ffn_backward(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                             float *dhidden, const float *dout, const float *hidden, const float *x,
                             const float *W1, const float *W2, int N, int D, int F) {
    size_t nh = (size_t)N * F;
    float *dpre = workspace(nh);
    /* forward: out = hidden W2 + b2 */
    cuda_zero(dhidden, nh * sizeof(float));
    cuda_linear_backward(dhidden, dW2, db2, dout, hidden, W2, N, F, D);
    /* forward: hidden = max(0, pre): the gradient passes where hidden > 0 */
    cuda_zero(dpre, nh * sizeof(float));
    cuda_relu_backward(dpre, dhidden, hidden, nh);
    /* forward: pre = x W1 + b1 */
    cuda_linear_backward(dx, dW1, db1, dpre, x, W1, N, D, F);
}

/* ---- ops the CPU does with one gemm call: the same call to cuBLAS ----------- */

/* dpos (1, T*D) += ones (1,B) . demb (B, T*D): the learned PE's gradient */
static void gpu_pos_embed_backward(float *dpos, const float *demb, const float *ones, int B, int T,
                                   int d_model) {
    int n = T * d_model;
    cuda_gemm(0, 0, 1, n, B, 1.0f, ones, B, demb, n, 1.0f, dpos, n);
}

/* out = s * inp as a (1x1) by (1xn) product with alpha = s; the 1.0f lives
 * in device memory of this file, made on first use like the workspace */
static float *one_dev;

static void gpu_scale_forward(float *out, const float *inp, float s, size_t n) {
    if (!one_dev) {
        one_dev = cuda_alloc(sizeof(float));   /* out of GPU memory: says so, exits 1 */
        cuda_upload(one_dev, &(float){1.0f}, sizeof(float));
    }
    cuda_gemm(0, 0, 1, (int)n, 1, s, one_dev, 1, inp, (int)n, 0.0f, out, (int)n);
}

/* the tied output projection (Sec. 3.4): logits (N,V) = x (N,D) E^T */
static void gpu_logits_forward(float *logits, const float *x, const float *E, int N, int D, int V) {
    cuda_gemm(0, 1, N, V, D, 1.0f, x, D, E, D, 0.0f, logits, V);
}

/* forward: logits = x E^T;  dx = dlogits E (written),  dE += dlogits^T x */
static void gpu_logits_backward(float *dx, float *dE, const float *dlogits, const float *x, const float *E,
                                int N, int D, int V) {
    cuda_gemm(0, 0, N, D, V, 1.0f, dlogits, V, E, D, 0.0f, dx, D);
    cuda_gemm(1, 0, V, D, N, 1.0f, dlogits, V, x, D, 1.0f, dE, D);
}

/* ---- decoding one position at a time (common/model/decode.h) ---------------------- */

/* few rows or many, cuBLAS does the product (fast/rows_fast.c streams W on the CPU) */
static void gpu_linear_rows_forward(float *out, const float *inp, const float *W, const float *bias,
                                    int R, int IN, int OUT) {
    cuda_linear_forward(out, inp, W, bias, R, IN, OUT);
}

/* logits (R,V) = x (R,D) E^T: on the GPU the same product as logits_forward */
static void gpu_logits_rows_forward(float *out, const float *x, const float *E, int R, int D, int V) {
    gpu_logits_forward(out, x, E, R, D, V);
}

/* the indices are the host's (the beam search chose them there): one
 * upload into a buffer of this file, grown like the workspace */
static int *gather_idx;
static size_t gather_cap;

static void gpu_gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                            const int *idx, int n, size_t width) {
    if (n <= 0 || width == 0) return;
    if (idx && (size_t)n > gather_cap) {
        cuda_free(gather_idx);
        gather_idx = cuda_alloc((size_t)n * sizeof(int));   /* out of GPU memory: says so, exits 1 */
        gather_cap = (size_t)n;
    }
    if (idx) cuda_upload(gather_idx, idx, (size_t)n * sizeof(int));
    cuda_gather_rows(dst, dst_pitch, src, src_pitch, idx ? gather_idx : NULL, n, width);
}

/* optim.h's adam_step from two kernels: the sum of squares (its one double
 * comes back to the host), then Adam only when it is finite */
static double gpu_adam_step(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                            float beta1, float beta2, float eps, int step) {
    double sq = cuda_sum_squares(grad, n);
    if (sq - sq == 0.0) cuda_adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, step);
    return sq;
}

static const Backend cuda_table = {
    .abi = BACKEND_ABI,
    .name = "cuda",
    .host_memory = 0,
    .alloc = gpu_alloc,
    .free = cuda_free,
    .share = gpu_share,
    .unshare = gpu_unshare,
    .zero = cuda_zero,
    .copy = cuda_copy,
    .upload = cuda_upload,
    .download = cuda_download,
    /* the training pass */
    .embed_forward = cuda_embed_forward,
    .embed_backward = cuda_embed_backward,
    .pos_embed_backward = gpu_pos_embed_backward,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .residual_forward = cuda_residual_forward,
    .scale_forward = gpu_scale_forward,
    .layernorm_forward = cuda_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .mha_forward = gpu_mha_forward,
    .mha_backward = gpu_mha_backward,
    .ffn_forward = gpu_ffn_forward,
    .ffn_backward = gpu_ffn_backward,
    .logits_forward = gpu_logits_forward,
    .logits_backward = gpu_logits_backward,
    .logsoftmax_forward = cuda_logsoftmax_forward,
    .smoothed_xent_forward = cuda_smoothed_xent_forward,
    .smoothed_xent_backward = cuda_smoothed_xent_backward,
    /* the optimizer step, a rank's gradient norm */
    .adam_step = gpu_adam_step,
    .sum_squares = cuda_sum_squares,
    /* decoding (decode.h) */
    .linear_rows_forward = gpu_linear_rows_forward,
    .logits_rows_forward = gpu_logits_rows_forward,
    .relu_forward = cuda_relu_forward,
    .attend_rows_forward = cuda_attend_rows_forward,
    .gather_rows = gpu_gather_rows,
};

/* The .so's one entry point (common/model/backend.c looks it up with dlsym). */
const Backend *aiyn_backend_cuda(char *err, size_t errlen) {
    if (cuda_device_count() < 1) {
        snprintf(err, errlen, "no CUDA GPU is visible");
        return NULL;
    }
    return &cuda_table;
}
