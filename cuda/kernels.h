/* kernels.h - the GPU versions of the library's ops, callable from C.
 *
 * Every function here mirrors a CPU function in common/ (same name with a
 * cuda_ prefix, same argument order: outputs first, then inputs, then
 * sizes) and takes DEVICE pointers: memory from cuda_alloc(), filled with
 * cuda_upload(). The CPU function is the reference; cuda/selftest.c checks
 * each kernel against it and cuda/tools/cuda_validate.c times them.
 *
 * Where an op has several kernels, they are numbered from the plainest to
 * the fastest (llm.c dev/cuda style) and `cuda_X_version(v, ...)` runs
 * version v; the plain `cuda_X(...)` is the one the library uses.
 *
 * All work goes on the default stream, in order; cuda_download() waits for
 * it. Backward functions ACCUMULATE (+=) into gradients, as on the CPU.
 * Nothing here allocates, except the cuBLAS handle made on first use and
 * freed by cuda_release().
 *
 * Compiled into build/libaiyn_cuda.so (with nvcc) and reached through the
 * backend table (backend_cuda.c); the tools in cuda/tools link the .so.
 * cuda/host_shim.c implements every function here with the CPU's, for
 * checking the host code without a GPU.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device memory, synchronisation, timing (runtime.cu) ------------------ */

/* cudaMalloc of bytes; out of GPU memory prints how much was asked and exits 1.
 * The caller owns the result and frees it with cuda_free (NULL: no-op). */
void *cuda_alloc(size_t bytes);
void cuda_free(void *dev);
/* cudaMalloc of bytes, or NULL when the GPU is full (what the backend uses) */
void *cuda_try_alloc(size_t bytes);
/* device to device */
void cuda_copy(void *dev_dst, const void *dev_src, size_t bytes);
/* number of CUDA GPUs (0 without the driver's device files), asked once */
int cuda_device_count(void);
void cuda_upload(void *dev_dst, const void *host_src, size_t bytes);
void cuda_download(void *host_dst, const void *dev_src, size_t bytes);
void cuda_zero(void *dev, size_t bytes);
void cuda_sync(void);
/* frees the cuBLAS handle (if one was made); safe to call more than once */
void cuda_release(void);
/* "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" into buf; returns buf */
char *cuda_describe(char *buf, size_t len);

/* Runs fn(ctx) once to warm up, then reps times, each timed with CUDA
 * events; returns the median in milliseconds (robust to one slow run). */
typedef void (*CudaBenchFn)(void *ctx);
float cuda_time_ms(CudaBenchFn fn, void *ctx, int reps);

/* ---- matrix multiply (matmul.cu) --------------------------------------------
 * C = alpha * op(A) @ op(B) + beta * C, exactly gemm()'s row-major BLAS
 * semantics (ops.h); beta == 0 never reads C. */
enum {
    CUDA_GEMM_CUBLAS = 0,    /* cublasSgemm with the row-major trick          */
    CUDA_GEMM_NAIVE = 1,     /* one thread per element of C                   */
    CUDA_GEMM_TILED = 2,     /* 32x32 tiles of A and B staged in shared memory */
    CUDA_GEMM_REGBLOCK = 3,  /* 64x64 tiles, each thread 4x4 outputs in registers */
    CUDA_GEMM_VERSIONS = 4
};
const char *cuda_gemm_version_name(int version);
void cuda_gemm(int transA, int transB, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);
void cuda_gemm_version(int version, int transA, int transB, int M, int N, int K,
                       float alpha, const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc);
/* batch independent gemms, matrix i at A + i*strideA etc. (cuBLAS) */
void cuda_gemm_batched(int transA, int transB, int M, int N, int K,
                       float alpha, const float *A, int lda, long strideA,
                       const float *B, int ldb, long strideB,
                       float beta, float *C, int ldc, long strideC, int batch);

/* linear (nn.h): out (N,OUT) = inp (N,IN) @ W (IN,OUT) + bias (OUT, or NULL) */
void cuda_linear_forward(float *out, const float *inp, const float *W, const float *bias,
                         int N, int IN, int OUT);
/* dinp (N,IN) +=, dW (IN,OUT) +=, dbias (OUT) += ; any may be NULL */
void cuda_linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                          const float *inp, const float *W, int N, int IN, int OUT);

/* ---- softmax (softmax.cu) ----------------------------------------------------
 * out (N,C) = softmax(inp (N,C)) per row, stable; -inf entries get 0 and an
 * all -inf row gets all zeros (ops.h). */
enum {
    CUDA_SOFTMAX_ROW = 1,    /* one thread per row, three passes             */
    CUDA_SOFTMAX_WARP = 2,   /* one warp per row, online max+sum, shuffles   */
    CUDA_SOFTMAX_VERSIONS = 3
};
void cuda_softmax_forward(float *out, const float *inp, int N, int C);
void cuda_softmax_forward_version(int version, float *out, const float *inp, int N, int C);
/* dinp (N,C) += y * (dout - <dout, y>), y = out */
void cuda_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C);

/* ---- attention (attention.cu) -------------------------------------------------
 * Plain scaled dot-product attention, Eq. (1), as ref/attention.h:
 * scores = Q K^T / sqrt(d_k) (batched cuBLAS), mask -> -inf and softmax
 * (one warp per row), out = weights V (batched cuBLAS).
 * out (B,h,Tq,d_v), weights (B,h,Tq,Tk), Q (B,h,Tq,d_k), K (B,h,Tk,d_k),
 * V (B,h,Tk,d_v), mask (B,Tq,Tk) bytes (1 = may attend) or NULL. */
void cuda_sdpa_forward(float *out, float *weights,
                       const float *Q, const float *K, const float *V, const uint8_t *mask,
                       int B, int h, int Tq, int Tk, int d_k, int d_v);
/* dQ, dK, dV +=; scratch (B,h,Tq,Tk) */
void cuda_sdpa_backward(float *dQ, float *dK, float *dV, float *scratch,
                        const float *dout, const float *weights,
                        const float *Q, const float *K, const float *V,
                        int B, int h, int Tq, int Tk, int d_k, int d_v);

/* Fused attention, FlashAttention-style (Dao et al. 2022): the same out as
 * cuda_sdpa_forward without ever writing the (Tq,Tk) weights to memory:
 * keys are visited in order with an online softmax (running max and sum,
 * rescaling the output accumulated so far when the max grows).
 * Masks are given the way they arise, not as a (B,Tq,Tk) array:
 * key_len (B) (device ints, or NULL): key j of batch b is visible only if
 * j < key_len[b] (padding); causal: only if j <= i (Sec. 3.2.3).
 * A query with no visible key gets a zero output.
 * d_k and d_v must be at most CUDA_FLASH_MAX_D. */
#define CUDA_FLASH_MAX_D 128
enum {
    CUDA_FLASH_THREAD = 1,   /* one thread per query, K and V read from global memory */
    CUDA_FLASH_TILED = 2,    /* one warp per query; K,V tiles shared by the block     */
    CUDA_FLASH_VERSIONS = 3
};
void cuda_flash_attention_forward(float *out, const float *Q, const float *K, const float *V,
                                  const int *key_len, int causal,
                                  int B, int h, int Tq, int Tk, int d_k, int d_v);
void cuda_flash_attention_forward_version(int version, float *out,
                                          const float *Q, const float *K, const float *V,
                                          const int *key_len, int causal,
                                          int B, int h, int Tq, int Tk, int d_k, int d_v);

/* ---- layers (nn.cu), as nn.h ----------------------------------------------- */

/* out (N,C), mean (N), rstd (N), inp (N,C), gamma, beta (C); eps LAYERNORM_EPS */
enum {
    CUDA_LAYERNORM_ROW = 1,  /* one thread per row                           */
    CUDA_LAYERNORM_WARP = 2, /* one warp per row, shuffle reductions         */
    CUDA_LAYERNORM_VERSIONS = 3
};
void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                            const float *gamma, const float *beta, int N, int C);
void cuda_layernorm_forward_version(int version, float *out, float *mean, float *rstd,
                                    const float *inp, const float *gamma, const float *beta,
                                    int N, int C);
/* dinp (N,C) +=, dgamma (C) +=, dbeta (C) += */
void cuda_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                             const float *inp, const float *mean, const float *rstd,
                             const float *gamma, int N, int C);

/* ReLU (Eq. 2): out = max(0, inp); dinp += dout where out > 0 */
void cuda_relu_forward(float *out, const float *inp, size_t n);
void cuda_relu_backward(float *dinp, const float *dout, const float *out, size_t n);

/* The residual connection with dropout on the sub-layer output (Sec. 5.4),
 * fused: out = x + dropout(sub). keep (n) records the scale each element got
 * (0 or 1/(1-p)), as dropout_forward does. The random numbers come from a
 * counter-based hash of (seed, i), so any thread can draw its own: the same
 * seed gives the same mask on every GPU, but not the CPU's Rng stream.
 * p == 0 keeps everything. out may equal x. */
void cuda_residual_dropout_forward(float *out, float *keep, const float *x, const float *sub,
                                   float p, size_t n, uint64_t seed);
/* dx += dout, dsub += dout * keep */
void cuda_residual_dropout_backward(float *dx, float *dsub, const float *dout,
                                    const float *keep, size_t n);

/* out (B,T,d_model) = table[ids] * sqrt(d_model) + pe[t]; ids (B,T) device
 * ints, already validated (a bad id stops the kernel with a device assert) */
void cuda_embed_forward(float *out, const int *ids, const float *table, const float *pe,
                        int B, int T, int d_model, int vocab);
/* dtable (vocab,d_model) += scatter of dout * sqrt(d_model) by id */
enum {
    CUDA_EMBED_BWD_COLUMN = 1,  /* one thread per column, positions in order: deterministic */
    CUDA_EMBED_BWD_ATOMIC = 2,  /* one thread per element, atomicAdd: order varies run to run */
    CUDA_EMBED_BWD_VERSIONS = 3
};
void cuda_embed_backward(float *dtable, const float *dout, const int *ids,
                         int B, int T, int d_model, int vocab);
void cuda_embed_backward_version(int version, float *dtable, const float *dout, const int *ids,
                                 int B, int T, int d_model, int vocab);

/* logp (N,V) = log softmax(logits (N,V)), one block per row */
void cuda_logsoftmax_forward(float *logp, const float *logits, int N, int V);
/* Label-smoothed cross-entropy (Sec. 5.4) as smoothed_xent_forward: returns
 * the mean over non-padding positions and the count in *n_tokens (may be
 * NULL). row_loss (N) receives the per-position losses (0 on padding);
 * they are summed on the GPU in a fixed order. targets (N) device ints.
 * Returns after the GPU is done (the loss is read back). */
float cuda_smoothed_xent_forward(float *row_loss, const float *logp, const int *targets,
                                 int N, int V, float eps_ls, int pad_id, int *n_tokens);
/* dlogits (N,V) += (softmax - dist) / n_tokens on counted rows */
void cuda_smoothed_xent_backward(float *dlogits, const float *logp, const int *targets,
                                 int N, int V, float eps_ls, int pad_id);

/* ---- optimizer (optim.cu) ------------------------------------------------------
 * One bias-corrected Adam step on n parameters in place, as adam_update. */
void cuda_adam_update(float *param, const float *grad, float *m, float *v, size_t n,
                      float lr, float beta1, float beta2, float eps, int step);

/* ---- what the backend needs beyond the ops above (backend_kernels.cu) ------ */
/* ref/multihead_ref.h's heads_split / heads_merge: out (B,h,T,d) <-> inp (B,T,h*d) */
void cuda_heads_split(float *out, const float *inp, int B, int T, int h, int d);
void cuda_heads_merge(float *out, const float *inp, int B, int T, int h, int d);
/* nn.h's dropout_forward: keep[i] = dropout_keep(key, tensor, i, p) of
 * common/core/dropout_mask.h, the CPU's mask bit for bit. out may equal inp.
 * backward: dinp += dout * keep. */
void cuda_dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                          uint64_t key, uint32_t tensor);
void cuda_dropout_backward(float *dinp, const float *dout, const float *keep, size_t n);
/* out = a + b */
void cuda_residual_forward(float *out, const float *a, const float *b, size_t n);
/* sum of x[i]^2 in double, in a fixed order (deterministic); NaN or inf if
 * any x[i] is. Waits for the GPU. */
double cuda_sum_squares(const float *x, size_t n);

/* ---- self-test (selftest.c): each kernel against its CPU reference --------
 * Check i (0 <= i < cuda_selftest_count()) runs one op (every version of it)
 * on random inputs from a fixed seed, on the GPU and on the CPU, and reports
 * the largest absolute difference over everything it compared. size 0 is
 * quick (the Check suite), 1 is larger (cuda_validate). */
typedef struct {
    char name[48];      /* "gemm v2 tiled"                                  */
    char detail[96];    /* sizes, and which output differed most           */
    double max_diff;    /* max |gpu - cpu|                                  */
    double tol;         /* float32 tolerance for this op at these sizes     */
    int pass;           /* max_diff <= tol (and no NaN)                     */
} CudaCheck;
int cuda_selftest_count(void);
/* Fills up to max results for check i; returns how many it wrote. */
int cuda_selftest_run(int i, int size, CudaCheck *results, int max);

#ifdef __cplusplus
}
#endif

#endif
