// nn.cu - the Transformer's other layers on the GPU (see nn.h for the math).
//
//   layernorm     CPU: layernorm_forward/backward   v1 one thread per row,
//                                                   v2 one warp per row
//   relu          CPU: relu_forward/backward        element-wise
//   residual +    CPU: residual_* + dropout_*       fused: one pass instead of two
//   dropout
//   embedding     CPU: embed_forward/backward       backward v1 column-owner
//                                                   (deterministic), v2 atomicAdd
//   log-softmax + CPU: logsoftmax_forward,          one block per row (V is the
//   smoothed xent      smoothed_xent_*              vocabulary: tens of thousands)
#include <assert.h>

#include "cuda_util.h"
#include "core/dropout_mask.h"
#include "kernels.h"

#define LN_EPS 1e-5f   // LAYERNORM_EPS in nn.h

// ---- layer normalisation (Sec. 3.1) ----------------------------------------------------
// Two passes over the row (mean, then the variance about it), as the CPU does:
// the one-pass E[x^2] - E[x]^2 loses digits when the mean is large.

// v1: thread r normalises row r alone.
__global__ void layernorm_row_kernel(float *out, float *mean, float *rstd, const float *inp,
                                     const float *gamma, const float *beta, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float *x = inp + (long)r * C;
    float *y = out + (long)r * C;
    float mu = 0.0f;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    float var = 0.0f;
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    float rs = 1.0f / sqrtf(var / C + LN_EPS);
    for (int i = 0; i < C; i++) y[i] = (x[i] - mu) * rs * gamma[i] + beta[i];
    mean[r] = mu;
    rstd[r] = rs;
}

// v2: a warp per row; lanes stride through the row (coalesced) and shuffle-sum.
__global__ void layernorm_warp_kernel(float *out, float *mean, float *rstd, const float *inp,
                                      const float *gamma, const float *beta, int N, int C) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *x = inp + (long)r * C;
    float *y = out + (long)r * C;
    float mu = 0.0f;
    for (int i = lane; i < C; i += 32) mu += x[i];
    mu = warp_sum(mu) / C;
    float var = 0.0f;
    for (int i = lane; i < C; i += 32) var += (x[i] - mu) * (x[i] - mu);
    float rs = 1.0f / sqrtf(warp_sum(var) / C + LN_EPS);
    for (int i = lane; i < C; i += 32) y[i] = (x[i] - mu) * rs * gamma[i] + beta[i];
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

// dinp += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),
// with norm = (x - mean) * rstd and dnorm = dout * gamma: the gradient
// through the normalisation, whose mean and variance depend on every x.
__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                               const float *mean, const float *rstd,
                                               const float *gamma, int N, int C) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *x = inp + (long)r * C, *dy = dout + (long)r * C;
    float *dx = dinp + (long)r * C;
    float mu = mean[r], rs = rstd[r];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float dnorm = dy[i] * gamma[i];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (x[i] - mu) * rs;
    }
    dnorm_mean = warp_sum(dnorm_mean) / C;
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
    for (int i = lane; i < C; i += 32) {
        float norm = (x[i] - mu) * rs;
        float dnorm = dy[i] * gamma[i];
        dx[i] += rs * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    }
}

// dgamma += sum over rows of dout * norm, dbeta += sum over rows of dout.
// A thread per column walking down the rows: no atomics, a fixed order.
__global__ void layernorm_backward_params_kernel(float *dgamma, float *dbeta, const float *dout,
                                                 const float *inp, const float *mean,
                                                 const float *rstd, int N, int C) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= C) return;
    float dg = 0.0f, db = 0.0f;
    for (int r = 0; r < N; r++) {
        float dy = dout[(long)r * C + j];
        dg += dy * (inp[(long)r * C + j] - mean[r]) * rstd[r];
        db += dy;
    }
    dgamma[j] += dg;
    dbeta[j] += db;
}

extern "C" void cuda_layernorm_forward_version(int version, float *out, float *mean, float *rstd,
                                               const float *inp, const float *gamma,
                                               const float *beta, int N, int C) {
    if (N == 0) return;
    if (version == CUDA_LAYERNORM_ROW)
        layernorm_row_kernel<<<ceil_div(N, 128), 128>>>(out, mean, rstd, inp, gamma, beta, N, C);
    else
        layernorm_warp_kernel<<<ceil_div(N, 8), 256>>>(out, mean, rstd, inp, gamma, beta, N, C);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                       const float *gamma, const float *beta, int N, int C) {
    cuda_layernorm_forward_version(CUDA_LAYERNORM_WARP, out, mean, rstd, inp, gamma, beta, N, C);
}

extern "C" void cuda_layernorm_backward(float *dinp, float *dgamma, float *dbeta,
                                        const float *dout, const float *inp, const float *mean,
                                        const float *rstd, const float *gamma, int N, int C) {
    if (N == 0) return;
    layernorm_backward_dinp_kernel<<<ceil_div(N, 8), 256>>>(dinp, dout, inp, mean, rstd, gamma,
                                                            N, C);
    CUDA_CHECK_LAUNCH();
    layernorm_backward_params_kernel<<<ceil_div(C, 128), 128>>>(dgamma, dbeta, dout, inp, mean,
                                                                rstd, N, C);
    CUDA_CHECK_LAUNCH();
}

// ---- ReLU (Eq. 2) --------------------------------------------------------------------
// Element-wise kernels use a grid-stride loop: any n, a grid sized to the GPU.
#define FOR_EACH(idx, n)                                                          \
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < (n); \
         idx += (size_t)gridDim.x * blockDim.x)

__global__ void relu_forward_kernel(float *out, const float *inp, size_t n) {
    FOR_EACH(i, n) out[i] = fmaxf(inp[i], 0.0f);
}
__global__ void relu_backward_kernel(float *dinp, const float *dout, const float *out, size_t n) {
    FOR_EACH(i, n) if (out[i] > 0.0f) dinp[i] += dout[i];
}

extern "C" void cuda_relu_forward(float *out, const float *inp, size_t n) {
    if (n == 0) return;
    relu_forward_kernel<<<grid_for(n, 256), 256>>>(out, inp, n);
    CUDA_CHECK_LAUNCH();
}
extern "C" void cuda_relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    if (n == 0) return;
    relu_backward_kernel<<<grid_for(n, 256), 256>>>(dinp, dout, out, n);
    CUDA_CHECK_LAUNCH();
}

// ---- residual + dropout (Sec. 5.4: "we apply dropout to the output of each
// sub-layer, before it is added to the sub-layer input") ------------------------------------
// The mask comes from common/core/dropout_mask.h, the counter-based generator the
// CPU uses too: each element's random number depends only on (seed, site,
// index), so threads need no shared state and the mask does not depend on
// how the work is split. This fused kernel uses site 0.
__global__ void residual_dropout_forward_kernel(float *out, float *keep, const float *x,
                                                const float *sub, float p, float scale,
                                                size_t n, uint64_t seed) {
    FOR_EACH(i, n) {
        // inverted dropout: survivors are scaled by 1/(1-p) now, so inference
        // (p = 0) needs no rescaling later
        float k = dropout_uniform(seed, 0, i) >= p ? scale : 0.0f;
        keep[i] = k;
        out[i] = x[i] + sub[i] * k;
    }
}
__global__ void residual_dropout_backward_kernel(float *dx, float *dsub, const float *dout,
                                                 const float *keep, size_t n) {
    FOR_EACH(i, n) {
        dx[i] += dout[i];
        dsub[i] += dout[i] * keep[i];
    }
}

extern "C" void cuda_residual_dropout_forward(float *out, float *keep, const float *x,
                                              const float *sub, float p, size_t n,
                                              uint64_t seed) {
    assert(p >= 0.0f && p < 1.0f);
    if (n == 0) return;
    residual_dropout_forward_kernel<<<grid_for(n, 256), 256>>>(out, keep, x, sub, p,
                                                               1.0f / (1.0f - p), n, seed);
    CUDA_CHECK_LAUNCH();
}
extern "C" void cuda_residual_dropout_backward(float *dx, float *dsub, const float *dout,
                                               const float *keep, size_t n) {
    if (n == 0) return;
    residual_dropout_backward_kernel<<<grid_for(n, 256), 256>>>(dx, dsub, dout, keep, n);
    CUDA_CHECK_LAUNCH();
}

// ---- embeddings (Sec. 3.4) and positional encoding (Sec. 3.5) ------------------------------
__global__ void embed_forward_kernel(float *out, const int *ids, const float *table,
                                     const float *pe, int T, int C, int vocab, size_t n,
                                     float sqrt_c) {
    FOR_EACH(idx, n) {
        size_t pos = idx / C;
        int c = (int)(idx % C), t = (int)(pos % T);
        int id = ids[pos];
        assert(id >= 0 && id < vocab);       // the caller validates input tokens
        // "we multiply those weights by sqrt(d_model)" (Sec. 3.4), then add PE
        out[idx] = table[(long)id * C + c] * sqrt_c + pe[(long)t * C + c];
    }
}

// v1: thread c owns column c of the table and adds the positions in order:
// two positions with the same token never race, and the sum's order is fixed,
// so the gradient is the same bit for bit on every run.
__global__ void embed_backward_column_kernel(float *dtable, const float *dout, const int *ids,
                                             int BT, int C, float sqrt_c) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int pos = 0; pos < BT; pos++)
        dtable[(long)ids[pos] * C + c] += dout[(long)pos * C + c] * sqrt_c;
}

// v2: a thread per element and atomicAdd, because two positions may hold the
// same token. Much more parallel, but the additions land in whatever order
// the hardware runs them: float sums then differ in the last bits run to run.
__global__ void embed_backward_atomic_kernel(float *dtable, const float *dout, const int *ids,
                                             int C, size_t n, float sqrt_c) {
    FOR_EACH(idx, n) {
        size_t pos = idx / C;
        int c = (int)(idx % C);
        atomicAdd(&dtable[(long)ids[pos] * C + c], dout[idx] * sqrt_c);
    }
}

extern "C" void cuda_embed_forward(float *out, const int *ids, const float *table,
                                   const float *pe, int B, int T, int d_model, int vocab) {
    size_t n = (size_t)B * T * d_model;
    if (n == 0) return;
    embed_forward_kernel<<<grid_for(n, 256), 256>>>(out, ids, table, pe, T, d_model, vocab, n,
                                                    sqrtf((float)d_model));
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_embed_backward_version(int version, float *dtable, const float *dout,
                                            const int *ids, int B, int T, int d_model,
                                            int vocab) {
    size_t n = (size_t)B * T * d_model;
    if (n == 0) return;
    float sqrt_c = sqrtf((float)d_model);
    if (version == CUDA_EMBED_BWD_ATOMIC)
        embed_backward_atomic_kernel<<<grid_for(n, 256), 256>>>(dtable, dout, ids, d_model, n,
                                                                sqrt_c);
    else
        embed_backward_column_kernel<<<ceil_div(d_model, 128), 128>>>(dtable, dout, ids, B * T,
                                                                      d_model, sqrt_c);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_embed_backward(float *dtable, const float *dout, const int *ids,
                                    int B, int T, int d_model, int vocab) {
    cuda_embed_backward_version(CUDA_EMBED_BWD_COLUMN, dtable, dout, ids, B, T, d_model, vocab);
}

// ---- log-softmax and label-smoothed cross-entropy (Sec. 5.4) ------------------------------
// A row is a whole vocabulary (37000 in Table 3's base model), so a block of
// 256 threads shares each row, with block-wide reductions.
#define ROW_BLOCK 256

// logp = x - max - log(sum exp(x - max)): the log-sum-exp, stable for any logits
__global__ void logsoftmax_kernel(float *logp, const float *logits, int V) {
    const float *x = logits + (long)blockIdx.x * V;
    float *y = logp + (long)blockIdx.x * V;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, x[v]);
    m = block_max(m);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(x[v] - m);
    float lse = m + logf(block_sum(s));
    for (int v = threadIdx.x; v < V; v += blockDim.x) y[v] = x[v] - lse;
}

// The smoothed target distribution of one position (smoothed_targets in nn.h):
// `on` = 1 - eps on the target, 0 on padding, `share` = eps / (the number of
// other classes) on each of the rest. With no other class (V = 2 with a pad)
// the target keeps everything, as on the CPU.
typedef struct {
    float on, share;
} Smoothing;
__device__ __forceinline__ Smoothing smoothing(int V, float eps, int pad_id) {
    int others = V - 1 - (pad_id >= 0 ? 1 : 0);
    Smoothing sm;
    sm.on = others > 0 ? 1.0f - eps : 1.0f;
    sm.share = others > 0 ? eps / others : 0.0f;
    return sm;
}
__device__ __forceinline__ float smoothed_dist(int v, int target, int pad_id, Smoothing sm) {
    if (v == target) return sm.on;
    if (v == pad_id) return 0.0f;
    return sm.share;
}

// row_loss[r] = -sum_v dist_v * logp_v, or 0 on a padding position
__global__ void xent_forward_kernel(float *row_loss, const float *logp, const int *targets,
                                    int V, float eps, int pad_id) {
    int r = blockIdx.x, t = targets[r];
    if (pad_id >= 0 && t == pad_id) {          // the whole block returns together
        if (threadIdx.x == 0) row_loss[r] = 0.0f;
        return;
    }
    const float *lp = logp + (long)r * V;
    Smoothing sm = smoothing(V, eps, pad_id);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += smoothed_dist(v, t, pad_id, sm) * lp[v];
    s = block_sum(s);
    if (threadIdx.x == 0) row_loss[r] = -s;
}

// The number of counted (non-padding) positions, for the mean. Kept in a
// device variable so that neither pass needs a buffer or a trip to the host.
__device__ int xent_n_tokens;

__global__ void count_tokens_kernel(const int *targets, int N, int pad_id) {
    __shared__ int total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    int mine = 0;
    for (int r = threadIdx.x; r < N; r += blockDim.x) mine += !(pad_id >= 0 && targets[r] == pad_id);
    atomicAdd(&total, mine);                    // integer adds: the order does not matter
    __syncthreads();
    if (threadIdx.x == 0) xent_n_tokens = total;
}

// The total of row_loss in one block, in a fixed order (deterministic).
__device__ float xent_loss_sum;

__global__ void sum_losses_kernel(const float *row_loss, int N) {
    float s = 0.0f;
    for (int r = threadIdx.x; r < N; r += blockDim.x) s += row_loss[r];
    s = block_sum(s);
    if (threadIdx.x == 0) xent_loss_sum = s;
}

// dlogits += (softmax - dist) / n_tokens; softmax = exp(logp)
__global__ void xent_backward_kernel(float *dlogits, const float *logp, const int *targets,
                                     int V, float eps, int pad_id) {
    int r = blockIdx.x, t = targets[r], n = xent_n_tokens;
    if (n == 0 || (pad_id >= 0 && t == pad_id)) return;
    const float *lp = logp + (long)r * V;
    float *dl = dlogits + (long)r * V;
    Smoothing sm = smoothing(V, eps, pad_id);
    float inv_n = 1.0f / n;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        dl[v] += (expf(lp[v]) - smoothed_dist(v, t, pad_id, sm)) * inv_n;
}

extern "C" void cuda_logsoftmax_forward(float *logp, const float *logits, int N, int V) {
    if (N == 0) return;
    logsoftmax_kernel<<<N, ROW_BLOCK>>>(logp, logits, V);
    CUDA_CHECK_LAUNCH();
}

extern "C" float cuda_smoothed_xent_forward(float *row_loss, const float *logp,
                                            const int *targets, int N, int V, float eps_ls,
                                            int pad_id, int *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (N == 0) return 0.0f;
    xent_forward_kernel<<<N, ROW_BLOCK>>>(row_loss, logp, targets, V, eps_ls, pad_id);
    CUDA_CHECK_LAUNCH();
    count_tokens_kernel<<<1, 256>>>(targets, N, pad_id);
    CUDA_CHECK_LAUNCH();
    sum_losses_kernel<<<1, 256>>>(row_loss, N);
    CUDA_CHECK_LAUNCH();
    float sum = 0.0f;
    int count = 0;
    CUDA_CHECK(cudaMemcpyFromSymbol(&sum, xent_loss_sum, sizeof sum));   // waits for the kernels
    CUDA_CHECK(cudaMemcpyFromSymbol(&count, xent_n_tokens, sizeof count));
    if (n_tokens) *n_tokens = count;
    return count ? sum / count : 0.0f;   // the mean over counted positions; padding rows are 0
}

extern "C" void cuda_smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                                            int N, int V, float eps_ls, int pad_id) {
    if (N == 0) return;
    count_tokens_kernel<<<1, 256>>>(targets, N, pad_id);
    CUDA_CHECK_LAUNCH();
    xent_backward_kernel<<<N, ROW_BLOCK>>>(dlogits, logp, targets, V, eps_ls, pad_id);
    CUDA_CHECK_LAUNCH();
}
