/* cuda_util.h - what every .cu file in cuda/ shares: error checks, launch
 * arithmetic, warp reductions. CUDA C++ only (included by the .cu files;
 * C code talks to the GPU through kernels.h).
 *
 * Every CUDA and cuBLAS call goes through CUDA_CHECK / CUBLAS_CHECK: on an
 * error it prints file:line, the call and the runtime's explanation, and
 * exits. A kernel launch is checked with CUDA_CHECK(cudaGetLastError())
 * right after it (launch errors are only reported that way).
 */
#ifndef CUDA_UTIL_H
#define CUDA_UTIL_H

#ifndef __CUDACC__
#error "cuda_util.h is for .cu files compiled by nvcc; C code includes kernels.h"
#endif

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call)                                                           \
    do {                                                                           \
        cudaError_t err_ = (call);                                                 \
        if (err_ != cudaSuccess) {                                                 \
            fprintf(stderr, "%s:%d: CUDA error in %s: %s\n", __FILE__, __LINE__,  \
                    #call, cudaGetErrorString(err_));                              \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

#define CUBLAS_CHECK(call)                                                         \
    do {                                                                           \
        cublasStatus_t st_ = (call);                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d: cuBLAS error in %s: %s\n", __FILE__, __LINE__, \
                    #call, cublasGetStatusString(st_));                            \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* after every <<<...>>> launch */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* the one cuBLAS handle of this process (runtime.cu), created on first use */
cublasHandle_t cuda_blas_handle(void);

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

/* grid size for a grid-stride loop over n elements: enough blocks to fill
 * the GPU, never more than there is work for */
static inline int grid_for(size_t n, int block) {
    size_t blocks = (n + (size_t)block - 1) / (size_t)block;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u;
    return blocks == 0 ? 1 : (int)blocks;
}

/* ---- warp reductions --------------------------------------------------------
 * A warp is 32 threads that execute together; __shfl_xor_sync lets each
 * thread read a register of another thread of its warp. Five butterfly steps
 * (16, 8, 4, 2, 1) leave every lane holding the reduction of all 32. */
__device__ __forceinline__ float warp_sum(float x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}

/* Online softmax (Milakov & Gimelshein 2018): a running (max m, sum s of
 * exp(x - m)) for part of a row. Two parts merge by rescaling each sum to
 * the larger max. m = -inf means "nothing seen yet / everything masked";
 * such a part contributes nothing (and exp(-inf - -inf) = NaN is avoided). */
__device__ __forceinline__ void online_merge(float *m, float *s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (*m == -INFINITY) { *m = m2; *s = s2; return; }
    float mn = fmaxf(*m, m2);
    *s = *s * expf(*m - mn) + s2 * expf(m2 - mn);
    *m = mn;
}
/* every lane ends with the (max, sum) of the whole warp */
__device__ __forceinline__ void warp_online_merge(float *m, float *s) {
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, *m, off);
        float s2 = __shfl_xor_sync(0xffffffffu, *s, off);
        online_merge(m, s, m2, s2);
    }
}

/* Sum over a whole block (blockDim.x a multiple of 32, at most 1024): each
 * warp reduces, warp leaders meet in shared memory, warp 0 finishes. The
 * result is returned to every thread. Deterministic: the order is fixed. */
__device__ __forceinline__ float block_sum(float x) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = warp_sum(x);
    __syncthreads();                       /* partial[] may still be read by a previous call */
    if (lane == 0) partial[warp] = x;
    __syncthreads();
    x = lane < nwarps ? partial[lane] : 0.0f;
    return warp_sum(x);
}
__device__ __forceinline__ float block_max(float x) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0) partial[warp] = x;
    __syncthreads();
    x = lane < nwarps ? partial[lane] : -INFINITY;
    return warp_max(x);
}

#endif
