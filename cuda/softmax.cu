// softmax.cu - row softmax, the softmax of Eq. (1), on the GPU.
//
//   CPU reference : softmax_forward / softmax_backward in common/ref/ops.c
//   v1 row        : one thread per row, three passes (max, sum of exp, scale)
//   v2 warp       : one warp per row; each lane keeps an online (max, sum) over
//                   its share of the row, the 32 partial results are merged
//                   with shuffles, then one pass writes exp(x - max) / sum
//
// Both are stable (subtract the row max, so exp never overflows) and give an
// all-zero row when every entry is -inf (a query with nothing to attend to).
#include "cuda_util.h"
#include "kernels.h"

// ---- v1: one thread per row ---------------------------------------------------------
// Simple, but neighbouring threads read addresses C floats apart (uncoalesced),
// and with N rows there are only N threads: fine for N in the thousands.
__global__ void softmax_row_kernel(float *out, const float *inp, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float *x = inp + (long)r * C;
    float *y = out + (long)r * C;
    float max = -INFINITY;
    for (int i = 0; i < C; i++) max = fmaxf(max, x[i]);
    if (max == -INFINITY) {                       // fully masked: zeros, not 0/0 = NaN
        for (int i = 0; i < C; i++) y[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int i = 0; i < C; i++) {
        y[i] = expf(x[i] - max);
        sum += y[i];
    }
    float inv = 1.0f / sum;                      // sum >= 1: the max entry gave exp(0)
    for (int i = 0; i < C; i++) y[i] *= inv;
}

// ---- v2: one warp per row, online max and sum -------------------------------------------
// Lane l reads x[l], x[l+32], ...: the warp reads 32 consecutive floats at a
// time (one 128-byte transaction). The online update folds max and sum into
// one pass over the row (the second pass writes the output).
__global__ void softmax_warp_kernel(float *out, const float *inp, int N, int C) {
    int warps_per_block = blockDim.x / 32;
    int r = blockIdx.x * warps_per_block + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= N) return;                          // the whole warp leaves together
    const float *x = inp + (long)r * C;
    float *y = out + (long)r * C;
    float m = -INFINITY, s = 0.0f;
    for (int i = lane; i < C; i += 32) online_merge(&m, &s, x[i], 1.0f);
    warp_online_merge(&m, &s);
    if (m == -INFINITY) {
        for (int i = lane; i < C; i += 32) y[i] = 0.0f;
        return;
    }
    float inv = 1.0f / s;
    for (int i = lane; i < C; i += 32) y[i] = expf(x[i] - m) * inv;
}

// dinp += y * (dout - <dout, y>): the softmax Jacobian diag(y) - y y^T applied
// to dout. One warp per row: a warp sum gives the dot product.
__global__ void softmax_backward_kernel(float *dinp, const float *dout, const float *out,
                                        int N, int C) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *y = out + (long)r * C, *dy = dout + (long)r * C;
    float *dx = dinp + (long)r * C;
    float dot = 0.0f;
    for (int i = lane; i < C; i += 32) dot += dy[i] * y[i];
    dot = warp_sum(dot);
    for (int i = lane; i < C; i += 32) dx[i] += y[i] * (dy[i] - dot);
}

extern "C" void cuda_softmax_forward_version(int version, float *out, const float *inp,
                                             int N, int C) {
    if (N == 0) return;
    if (version == CUDA_SOFTMAX_ROW) {
        softmax_row_kernel<<<ceil_div(N, 128), 128>>>(out, inp, N, C);
    } else {
        softmax_warp_kernel<<<ceil_div(N, 8), 256>>>(out, inp, N, C);   // 8 rows per block
    }
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_softmax_forward(float *out, const float *inp, int N, int C) {
    cuda_softmax_forward_version(CUDA_SOFTMAX_WARP, out, inp, N, C);
}

extern "C" void cuda_softmax_backward(float *dinp, const float *dout, const float *out,
                                      int N, int C) {
    if (N == 0) return;
    softmax_backward_kernel<<<ceil_div(N, 8), 256>>>(dinp, dout, out, N, C);
    CUDA_CHECK_LAUNCH();
}
