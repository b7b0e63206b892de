// backend_kernels.cu - the few kernels the CUDA backend needs beyond the
// per-op files (declared at the end of kernels.h).
//
//   heads split/merge   CPU: heads_split / heads_merge (ref/multihead_ref.c)   a permutation
//   dropout             CPU: dropout_forward/backward (fast/nn_fast.c) the same mask
//   residual            CPU: residual_forward (fast/nn_fast.c)
//   sum of squares      CPU: the CPU backend's sum_squares            two passes, fixed order
#include <assert.h>

#include "cuda_util.h"
#include "core/dropout_mask.h"
#include "kernels.h"

#define FOR_EACH(idx, n)                                                          \
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < (n); \
         idx += (size_t)gridDim.x * blockDim.x)

// ---- heads: [batch, seq, h*d] <-> [batch, heads, seq, d] ---------------------------------
// One thread per element of the (B,h,T,d) side; consecutive threads move
// consecutive i, so both reads and writes are coalesced runs of d floats.
__global__ void heads_permute_kernel(float *out, const float *inp, int T, int h, int d, size_t n,
                                     int split) {
    FOR_EACH(idx, n) {
        int i = (int)(idx % d);
        size_t r = idx / d;
        int t = (int)(r % T);
        size_t bh = r / T;
        int hh = (int)(bh % h);
        size_t b = bh / h;
        size_t flat = ((b * T + t) * h + hh) * d + i;   // (B,T,h*d) index
        if (split) out[idx] = inp[flat];
        else out[flat] = inp[idx];
    }
}

extern "C" void cuda_heads_split(float *out, const float *inp, int B, int T, int h, int d) {
    size_t n = (size_t)B * T * h * d;
    if (n == 0) return;
    heads_permute_kernel<<<grid_for(n, 256), 256>>>(out, inp, T, h, d, n, 1);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_heads_merge(float *out, const float *inp, int B, int T, int h, int d) {
    size_t n = (size_t)B * T * h * d;
    if (n == 0) return;
    heads_permute_kernel<<<grid_for(n, 256), 256>>>(out, inp, T, h, d, n, 0);
    CUDA_CHECK_LAUNCH();
}

// ---- dropout (Sec. 5.4) ----------------------------------------------------------------
// dropout_keep is common/core/dropout_mask.h's, compiled for the device: the
// same (key, tensor, index) gives the same keep as the CPU's dropout_forward.
__global__ void dropout_forward_kernel(float *out, float *keep, const float *inp, float p,
                                       size_t n, uint64_t key, uint32_t tensor) {
    FOR_EACH(i, n) {
        float k = dropout_keep(key, tensor, i, p);   // 0 or 1/(1-p): inverted dropout
        keep[i] = k;
        out[i] = inp[i] * k;
    }
}

__global__ void dropout_backward_kernel(float *dinp, const float *dout, const float *keep,
                                        size_t n) {
    FOR_EACH(i, n) dinp[i] += dout[i] * keep[i];
}

extern "C" void cuda_dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                                     uint64_t key, uint32_t tensor) {
    assert(p >= 0.0f && p < 1.0f);
    if (n == 0) return;
    dropout_forward_kernel<<<grid_for(n, 256), 256>>>(out, keep, inp, p, n, key, tensor);
    CUDA_CHECK_LAUNCH();
}

// ---- residual (Sec. 3.1): out = a + b ------------------------------------------------
__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n) {
    FOR_EACH(i, n) out[i] = a[i] + b[i];
}

extern "C" void cuda_residual_forward(float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    residual_forward_kernel<<<grid_for(n, 256), 256>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_dropout_backward(float *dinp, const float *dout, const float *keep,
                                      size_t n) {
    if (n == 0) return;
    dropout_backward_kernel<<<grid_for(n, 256), 256>>>(dinp, dout, keep, n);
    CUDA_CHECK_LAUNCH();
}

// ---- sum of squares (the gradient norm, and the finite check) -------------------------
// Pass 1: SUMSQ_BLOCKS blocks, each a grid-stride partial sum in double into
// its own slot; pass 2: one warp adds the slots in order. No atomics, so the
// result is the same on every run. NaN or inf in x makes the sum NaN or inf.
#define SUMSQ_BLOCKS 256
__device__ double sumsq_partial[SUMSQ_BLOCKS];
__device__ double sumsq_total;

__global__ void sumsq_partial_kernel(const float *x, size_t n) {
    __shared__ double part[256];
    double s = 0.0;
    FOR_EACH(i, n) s += (double)x[i] * x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {   // tree in shared memory
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) sumsq_partial[blockIdx.x] = part[0];
}

__global__ void sumsq_final_kernel(void) {
    if (threadIdx.x != 0) return;
    double s = 0.0;
    for (int b = 0; b < SUMSQ_BLOCKS; b++) s += sumsq_partial[b];
    sumsq_total = s;
}

extern "C" double cuda_sum_squares(const float *x, size_t n) {
    if (n == 0) return 0.0;
    sumsq_partial_kernel<<<SUMSQ_BLOCKS, 256>>>(x, n);
    CUDA_CHECK_LAUNCH();
    sumsq_final_kernel<<<1, 32>>>();
    CUDA_CHECK_LAUNCH();
    double s = 0.0;
    CUDA_CHECK(cudaMemcpyFromSymbol(&s, sumsq_total, sizeof s));   // waits for both kernels
    return s;
}
