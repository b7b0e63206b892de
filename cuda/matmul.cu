// matmul.cu - C = alpha * op(A) @ op(B) + beta * C on the GPU, three ways
// plus cuBLAS (the library uses cuBLAS; the others are here to learn from,
// and cuda_validate times them against it at the model's shapes).
//
//   CPU reference : gemm_ref() in common/ref/ops.c (the triple loop, in double)
//   v1 naive      : one thread per C element, every operand from global memory
//   v2 tiled      : a block computes a 32x32 tile of C; the 32x32 tiles of A and
//                   B it needs are staged in shared memory, so each element is
//                   read from global memory 32 times less often
//   v3 regblock   : a block computes a 64x64 tile; each thread keeps a 4x4 patch
//                   of C in registers, so every value read from shared memory
//                   feeds 4 multiply-adds instead of 1
//   cuBLAS        : NVIDIA's tuned kernels
//
// Row-major with BLAS semantics exactly as ops.h: op(A) is (M,K), op(B) is
// (K,N), C is (M,N); transA means A is stored (K,M), transB means B is (N,K).
#include "cuda_util.h"
#include "kernels.h"

// element (i, p) of op(A) and (p, j) of op(B), honouring the transposes
__device__ __forceinline__ float op_a(const float *A, int lda, int transA, int i, int p) {
    return transA ? A[(long)p * lda + i] : A[(long)i * lda + p];
}
__device__ __forceinline__ float op_b(const float *B, int ldb, int transB, int p, int j) {
    return transB ? B[(long)j * ldb + p] : B[(long)p * ldb + j];
}
// beta == 0 must not read C: BLAS lets C hold garbage (even NaN) then
__device__ __forceinline__ void store_c(float *C, int ldc, int i, int j, float alpha, float acc,
                                        float beta) {
    float *c = &C[(long)i * ldc + j];
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// ---- v1: naive ------------------------------------------------------------------
// Thread (x, y) of the grid computes C[i][j] with i = y, j = x: x runs along a
// row of C so that the 32 threads of a warp touch 32 neighbouring columns of
// B and C (coalesced); each of them reads the same A element (a broadcast).
__global__ void gemm_naive_kernel(int transA, int transB, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb,
                                  float beta, float *C, int ldc) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int p = 0; p < K; p++) acc += op_a(A, lda, transA, i, p) * op_b(B, ldb, transB, p, j);
    store_c(C, ldc, i, j, alpha, acc, beta);
}

// ---- v2: shared-memory tiles ------------------------------------------------------
// The naive kernel reads each A element N times and each B element M times
// from global memory. Here a 32x32 block of threads walks along K in steps
// of 32: together they copy one 32x32 tile of op(A) and one of op(B) into
// shared memory (on-chip, ~100x faster), wait, and each thread does 32
// multiply-adds from the tiles. Global traffic drops by the tile size, 32.
#define TILE 32
__global__ void gemm_tiled_kernel(int transA, int transB, int M, int N, int K, float alpha,
                                  const float *A, int lda, const float *B, int ldb,
                                  float beta, float *C, int ldc) {
    __shared__ float As[TILE][TILE];        // As[r][p] = op(A)[row0 + r][k0 + p]
    __shared__ float Bs[TILE][TILE];        // Bs[p][c] = op(B)[k0 + p][col0 + c]
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // out-of-range elements load as 0, which adds nothing to the sums
        As[ty][tx] = (i < M && k0 + tx < K) ? op_a(A, lda, transA, i, k0 + tx) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && j < N) ? op_b(B, ldb, transB, k0 + ty, j) : 0.0f;
        __syncthreads();                    // the tiles are complete before anyone reads
        for (int p = 0; p < TILE; p++) acc += As[ty][p] * Bs[p][tx];
        __syncthreads();                    // everyone is done before they are overwritten
    }
    if (i < M && j < N) store_c(C, ldc, i, j, alpha, acc, beta);
}

// ---- v3: register blocking ----------------------------------------------------------
// v2 does one multiply-add per two shared-memory reads; shared memory, not
// arithmetic, is then the limit. Here 256 threads (16x16) compute a 64x64
// tile: thread (tx, ty) owns the 4x4 outputs at rows ty + 16r and columns
// tx + 16c (r, c = 0..3). For each p it reads 4 values of A and 4 of B into
// registers and does 16 multiply-adds: four times the work per read.
#define BM 64
#define BN 64
#define BK 16
#define RB 4                                 // each thread: RB x RB outputs
__global__ void gemm_regblock_kernel(int transA, int transB, int M, int N, int K, float alpha,
                                     const float *A, int lda, const float *B, int ldb,
                                     float beta, float *C, int ldc) {
    // As is stored k-major (As[p][r]) so the inner loop reads a column of the
    // A tile as a row; +1 column of padding spreads the stores over the
    // 32 shared-memory banks instead of hitting one bank 16 times.
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[RB][RB] = {{0.0f}};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 256 threads copy the 64x16 A tile and the 16x64 B tile, 4 elements each
        for (int s = 0; s < (BM * BK) / 256; s++) {
            int l = tid + 256 * s;
            int r = l / BK, p = l % BK;      // consecutive threads: consecutive k (row-major A)
            int gi = row0 + r, gp = k0 + p;
            As[p][r] = (gi < M && gp < K) ? op_a(A, lda, transA, gi, gp) : 0.0f;
        }
        for (int s = 0; s < (BK * BN) / 256; s++) {
            int l = tid + 256 * s;
            int p = l / BN, c = l % BN;      // consecutive threads: consecutive columns of B
            int gp = k0 + p, gj = col0 + c;
            Bs[p][c] = (gp < K && gj < N) ? op_b(B, ldb, transB, gp, gj) : 0.0f;
        }
        __syncthreads();
        for (int p = 0; p < BK; p++) {
            float a[RB], b[RB];
            for (int r = 0; r < RB; r++) a[r] = As[p][ty + 16 * r];
            for (int c = 0; c < RB; c++) b[c] = Bs[p][tx + 16 * c];
            for (int r = 0; r < RB; r++)
                for (int c = 0; c < RB; c++) acc[r][c] += a[r] * b[c];
        }
        __syncthreads();
    }
    for (int r = 0; r < RB; r++) {
        for (int c = 0; c < RB; c++) {
            int i = row0 + ty + 16 * r, j = col0 + tx + 16 * c;
            if (i < M && j < N) store_c(C, ldc, i, j, alpha, acc[r][c], beta);
        }
    }
}

// ---- cuBLAS -----------------------------------------------------------------------
// cuBLAS is column-major. A row-major (M,N) matrix read as column-major is its
// transpose (N,M), so instead of C = op(A) op(B) we ask cuBLAS for
// C^T = op(B)^T op(A)^T: swap the operands (and M with N), keep the flags.
static cublasOperation_t blas_op(int trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

extern "C" void cuda_gemm(int transA, int transB, int M, int N, int K,
                          float alpha, const float *A, int lda, const float *B, int ldb,
                          float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    CUBLAS_CHECK(cublasSgemm(cuda_blas_handle(), blas_op(transB), blas_op(transA), N, M, K,
                             &alpha, B, ldb, A, lda, &beta, C, ldc));
}

extern "C" void cuda_gemm_batched(int transA, int transB, int M, int N, int K,
                                  float alpha, const float *A, int lda, long strideA,
                                  const float *B, int ldb, long strideB,
                                  float beta, float *C, int ldc, long strideC, int batch) {
    if (M == 0 || N == 0 || batch == 0) return;
    CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_blas_handle(), blas_op(transB), blas_op(transA),
                                           N, M, K, &alpha, B, ldb, strideB, A, lda, strideA,
                                           &beta, C, ldc, strideC, batch));
}

extern "C" const char *cuda_gemm_version_name(int version) {
    switch (version) {
    case CUDA_GEMM_CUBLAS: return "cublas";
    case CUDA_GEMM_NAIVE: return "v1 naive";
    case CUDA_GEMM_TILED: return "v2 tiled";
    case CUDA_GEMM_REGBLOCK: return "v3 regblock";
    default: return "?";
    }
}

extern "C" void cuda_gemm_version(int version, int transA, int transB, int M, int N, int K,
                                  float alpha, const float *A, int lda, const float *B, int ldb,
                                  float beta, float *C, int ldc) {
    if (M == 0 || N == 0) return;
    switch (version) {
    case CUDA_GEMM_NAIVE: {
        dim3 block(32, 8);
        dim3 grid(ceil_div(N, 32), ceil_div(M, 8));
        gemm_naive_kernel<<<grid, block>>>(transA, transB, M, N, K, alpha, A, lda, B, ldb,
                                           beta, C, ldc);
        break;
    }
    case CUDA_GEMM_TILED: {
        dim3 block(TILE, TILE);
        dim3 grid(ceil_div(N, TILE), ceil_div(M, TILE));
        gemm_tiled_kernel<<<grid, block>>>(transA, transB, M, N, K, alpha, A, lda, B, ldb,
                                           beta, C, ldc);
        break;
    }
    case CUDA_GEMM_REGBLOCK: {
        dim3 block(16, 16);
        dim3 grid(ceil_div(N, BN), ceil_div(M, BM));
        gemm_regblock_kernel<<<grid, block>>>(transA, transB, M, N, K, alpha, A, lda, B, ldb,
                                              beta, C, ldc);
        break;
    }
    default:
        cuda_gemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    CUDA_CHECK_LAUNCH();
}

// ---- linear (nn.h) -------------------------------------------------------------------

// out (N,OUT) += bias (OUT) broadcast over rows
__global__ void add_bias_kernel(float *out, const float *bias, size_t N, int OUT) {
    size_t n = N * (size_t)OUT;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
         idx += (size_t)gridDim.x * blockDim.x)
        out[idx] += bias[idx % OUT];
}

// dbias (OUT) += column sums of dout (N,OUT). One thread per column walks down
// the rows: neighbouring threads read neighbouring columns (coalesced), and
// each sum is taken in row order, so the result is the same on every run.
__global__ void column_sum_kernel(float *dbias, const float *dout, int N, int OUT) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= OUT) return;
    float s = 0.0f;
    for (int i = 0; i < N; i++) s += dout[(long)i * OUT + j];
    dbias[j] += s;
}

extern "C" void cuda_linear_forward(float *out, const float *inp, const float *W,
                                    const float *bias, int N, int IN, int OUT) {
    cuda_gemm(0, 0, N, OUT, IN, 1.0f, inp, IN, W, OUT, 0.0f, out, OUT);
    if (bias) {
        add_bias_kernel<<<grid_for((size_t)N * OUT, 256), 256>>>(out, bias, (size_t)N, OUT);
        CUDA_CHECK_LAUNCH();
    }
}

extern "C" void cuda_linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                                     const float *inp, const float *W, int N, int IN, int OUT) {
    // forward: out = inp W + b, so dinp = dout W^T, dW = inp^T dout, dbias = sum_rows dout
    if (dinp) cuda_gemm(0, 1, N, IN, OUT, 1.0f, dout, OUT, W, OUT, 1.0f, dinp, IN);
    if (dW) cuda_gemm(1, 0, IN, OUT, N, 1.0f, inp, IN, dout, OUT, 1.0f, dW, OUT);
    if (dbias) {
        column_sum_kernel<<<ceil_div(OUT, 256), 256>>>(dbias, dout, N, OUT);
        CUDA_CHECK_LAUNCH();
    }
}
