// decode_kernels.cu - the decoder's step on the GPU (common/model/decode.h).
//
//   attend_rows_forward   CPU: attend_rows_forward (fast/rows_fast.c)   one block per (row, head)
//   gather_rows           CPU: gather_rows (ref/rows.c)                 one thread per float moved
//
// A decoding step has few query rows (one per beam) and keys that sit in
// the cache with a stride of max_T positions, so the batched sdpa kernels
// (which want (B,h,T,d) contiguous) do not fit; this is Eq. (1) written for
// that case. The projections around it are cuBLAS (backend_cuda.c).
#include "cuda_util.h"
#include "decode_kernels.h"

#define FOR_EACH(idx, n)                                                          \
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < (n); \
         idx += (size_t)gridDim.x * blockDim.x)

// Block (r, i): scores s_j = q . k_j / sqrt(d_k) for j < n (-inf where keep
// is 0) into weights, their softmax in place (all blocked: zeros), then
// out[c] = sum_j w_j v_j[c]. The weights row doubles as the scratch: it is
// the op's output anyway.
__global__ void attend_rows_kernel(float *out, float *weights, const float *q, const float *K,
                                   const float *V, const uint8_t *keep, int group, int h, int n,
                                   int stride, int d_k, int d_v, float scale) {
    int r = blockIdx.x / h, i = blockIdx.x % h, b = r / group;
    const float *qr = q + ((size_t)r * h + i) * d_k;
    const float *Kb = K + ((size_t)b * h + i) * stride * d_k;
    const float *Vb = V + ((size_t)b * h + i) * stride * d_v;
    const uint8_t *kb = keep ? keep + (size_t)b * n : NULL;
    float *w = weights + ((size_t)r * h + i) * n;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float s = -INFINITY;
        if (!kb || kb[j]) {
            float acc = 0.0f;
            for (int c = 0; c < d_k; c++) acc += qr[c] * Kb[(size_t)j * d_k + c];
            s = acc * scale;
        }
        w[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_max(mx);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float e = mx == -INFINITY ? 0.0f : expf(w[j] - mx);   // exp(-inf) = 0 for blocked keys
        w[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) w[j] *= inv;
    __syncthreads();   // every w[j] written before any thread reads them all
    for (int c = threadIdx.x; c < d_v; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc += w[j] * Vb[(size_t)j * d_v + c];
        out[((size_t)r * h + i) * d_v + c] = acc;
    }
}

extern "C" void cuda_attend_rows_forward(float *out, float *weights, const float *q, const float *K,
                                         const float *V, const uint8_t *keep, int R, int group, int h,
                                         int n, int stride, int d_k, int d_v) {
    if (R <= 0 || h <= 0 || n <= 0) return;
    attend_rows_kernel<<<R * h, 128>>>(out, weights, q, K, V, keep, group, h, n, stride, d_k, d_v,
                                       1.0f / sqrtf((float)d_k));
    CUDA_CHECK_LAUNCH();
}

// dst[j*dst_pitch + c] = src[idx[j]*src_pitch + c] for c < width
__global__ void gather_rows_kernel(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                                   const int *idx, size_t width, size_t total) {
    FOR_EACH(e, total) {
        size_t j = e / width, c = e % width;
        size_t from = idx ? (size_t)idx[j] : j;
        dst[j * dst_pitch + c] = src[from * src_pitch + c];
    }
}

extern "C" void cuda_gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                                 const int *idx, int n, size_t width) {
    size_t total = (size_t)n * width;
    if (total == 0) return;
    gather_rows_kernel<<<grid_for(total, 256), 256>>>(dst, dst_pitch, src, src_pitch, idx, width, total);
    CUDA_CHECK_LAUNCH();
}
