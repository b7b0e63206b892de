// attention.cu - scaled dot-product attention, Eq. (1), on the GPU, two ways.
//
//   Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
//
//   CPU reference : sdpa_forward / sdpa_backward in common/fast/attention_fast.c
//                   (plain twins sdpa_*_ref in common/ref/attention.c)
//   plain         : the equation as written, three steps with the (Tq,Tk)
//                   weights in memory between them: batched cuBLAS gemm for the
//                   scores, a masked softmax kernel, batched gemm with V.
//                   The weights are kept for backward and for heatmaps.
//   fused v1      : FlashAttention's idea in its simplest form: one thread per
//                   query walks over the keys with an online softmax, so the
//                   scores never leave registers
//   fused v2      : one warp per query (the d_k products of each score are
//                   split over 32 lanes) and the block's warps share tiles of
//                   K and V staged in shared memory, as in FlashAttention
//
// Shapes: Q (B,h,Tq,d_k), K (B,h,Tk,d_k), V (B,h,Tk,d_v), out (B,h,Tq,d_v);
// the B*h (batch, head) pairs are independent problems.
#include "cuda_util.h"
#include "kernels.h"

// ---- plain: scores, masked softmax, weighted sum -------------------------------------

// In place on w (B*h*Tq rows of Tk): blocked keys (mask 0) become -inf, then
// a stable softmax with the fully-masked rule (all -inf -> all 0). One warp
// per row, online max+sum as in softmax.cu. The mask (B,Tq,Tk) is shared by
// the h heads of a batch element.
__global__ void masked_softmax_kernel(float *w, const uint8_t *mask, int BH, int h, int Tq,
                                      int Tk) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= BH * Tq) return;
    int bh = r / Tq, i = r % Tq, b = bh / h;
    float *row = w + (long)r * Tk;
    const uint8_t *mrow = mask ? mask + ((long)b * Tq + i) * Tk : NULL;
    float m = -INFINITY, s = 0.0f;
    for (int j = lane; j < Tk; j += 32)
        if (!mrow || mrow[j]) online_merge(&m, &s, row[j], 1.0f);
    warp_online_merge(&m, &s);
    float inv = m == -INFINITY ? 0.0f : 1.0f / s;
    for (int j = lane; j < Tk; j += 32)
        row[j] = (m == -INFINITY || (mrow && !mrow[j])) ? 0.0f : expf(row[j] - m) * inv;
}

extern "C" void cuda_sdpa_forward(float *out, float *weights,
                                  const float *Q, const float *K, const float *V,
                                  const uint8_t *mask,
                                  int B, int h, int Tq, int Tk, int d_k, int d_v) {
    int BH = B * h;
    // the scale keeps the dot products' variance near 1 as d_k grows, so the
    // softmax does not saturate (Sec. 3.2.1)
    float scale = 1.0f / sqrtf((float)d_k);
    // scores (Tq,Tk) = scale * Q (Tq,d_k) @ K^T, for each (batch, head)
    cuda_gemm_batched(0, 1, Tq, Tk, d_k, scale, Q, d_k, (long)Tq * d_k, K, d_k, (long)Tk * d_k,
                      0.0f, weights, Tk, (long)Tq * Tk, BH);
    masked_softmax_kernel<<<ceil_div((long)BH * Tq, 8), 256>>>(weights, mask, BH, h, Tq, Tk);
    CUDA_CHECK_LAUNCH();
    // out (Tq,d_v) = weights (Tq,Tk) @ V (Tk,d_v)
    cuda_gemm_batched(0, 0, Tq, d_v, Tk, 1.0f, weights, Tk, (long)Tq * Tk, V, d_v,
                      (long)Tk * d_v, 0.0f, out, d_v, (long)Tq * d_v, BH);
}

// ds = w * (dw - <dw, w>) in place on ds (softmax backward, fresh, not +=):
// blocked keys have w = 0 and so get no gradient.
__global__ void softmax_grad_inplace_kernel(float *ds, const float *w, long rows, int Tk) {
    long r = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    float *d = ds + r * Tk;
    const float *y = w + r * Tk;
    float dot = 0.0f;
    for (int j = lane; j < Tk; j += 32) dot += d[j] * y[j];
    dot = warp_sum(dot);
    for (int j = lane; j < Tk; j += 32) d[j] = y[j] * (d[j] - dot);
}

extern "C" void cuda_sdpa_backward(float *dQ, float *dK, float *dV, float *scratch,
                                   const float *dout, const float *weights,
                                   const float *Q, const float *K, const float *V,
                                   int B, int h, int Tq, int Tk, int d_k, int d_v) {
    int BH = B * h;
    float scale = 1.0f / sqrtf((float)d_k);
    long sQ = (long)Tq * d_k, sK = (long)Tk * d_k, sV = (long)Tk * d_v;
    long sO = (long)Tq * d_v, sW = (long)Tq * Tk;
    // forward: out = W V           ->  dV += W^T dout,  dW = dout V^T
    cuda_gemm_batched(1, 0, Tk, d_v, Tq, 1.0f, weights, Tk, sW, dout, d_v, sO,
                      1.0f, dV, d_v, sV, BH);
    cuda_gemm_batched(0, 1, Tq, Tk, d_v, 1.0f, dout, d_v, sO, V, d_v, sV,
                      0.0f, scratch, Tk, sW, BH);
    // forward: W = softmax(S)      ->  dS = W * (dW - <dW, W>)
    long rows = (long)BH * Tq;
    softmax_grad_inplace_kernel<<<ceil_div(rows, 8), 256>>>(scratch, weights, rows, Tk);
    CUDA_CHECK_LAUNCH();
    // forward: S = scale * Q K^T   ->  dQ += scale * dS K,  dK += scale * dS^T Q
    cuda_gemm_batched(0, 0, Tq, d_k, Tk, scale, scratch, Tk, sW, K, d_k, sK,
                      1.0f, dQ, d_k, sQ, BH);
    cuda_gemm_batched(1, 0, Tk, d_k, Tq, scale, scratch, Tk, sW, Q, d_k, sQ,
                      1.0f, dK, d_k, sK, BH);
}

// ---- fused (FlashAttention-style) -----------------------------------------------------
// The visible keys of query i form a prefix 0 .. kend-1: padding hides keys
// from key_len[b] on, the causal mask hides keys after i. So no mask array is
// needed: each query just stops early.
__device__ __forceinline__ int visible_keys(const int *key_len, int causal, int b, int i, int Tk) {
    int kend = Tk;
    if (key_len) kend = min(kend, max(0, key_len[b]));
    if (causal) kend = min(kend, i + 1);
    return kend;
}

// One step of the online softmax for a new score s: the running max m may
// grow, and then everything accumulated so far (the sum l and the output
// acc) was weighted by exp(old score - old m) and must be rescaled by
// exp(old m - new m). Returns the new key's weight p; the caller rescales acc
// by *corr and adds p * v.
__device__ __forceinline__ float online_step(float s, float *m, float *l, float *corr) {
    float m_new = fmaxf(*m, s);
    *corr = expf(*m - m_new);              // m = -inf at the start: corr = 0, acc is 0 anyway
    float p = expf(s - m_new);
    *l = *l * *corr + p;
    *m = m_new;
    return p;
}

// v1: thread idx handles query row idx of the (B*h*Tq) rows.
__global__ void flash_thread_kernel(float *out, const float *Q, const float *K, const float *V,
                                    const int *key_len, int causal, int h, int Tq, int Tk,
                                    int d_k, int d_v, long rows, float scale) {
    long idx = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (idx >= rows) return;
    long bh = idx / Tq;
    int i = (int)(idx % Tq), b = (int)(bh / h);
    const float *q = Q + idx * d_k;
    const float *Kb = K + bh * Tk * d_k, *Vb = V + bh * Tk * d_v;
    int kend = visible_keys(key_len, causal, b, i, Tk);
    float acc[CUDA_FLASH_MAX_D];
    for (int c = 0; c < d_v; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f, corr;
    for (int j = 0; j < kend; j++) {
        float s = 0.0f;
        for (int c = 0; c < d_k; c++) s += q[c] * Kb[(long)j * d_k + c];
        float p = online_step(s * scale, &m, &l, &corr);
        for (int c = 0; c < d_v; c++) acc[c] = acc[c] * corr + p * Vb[(long)j * d_v + c];
    }
    // l == 0: no visible key; a zero output, as the CPU's fully-masked rule
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int c = 0; c < d_v; c++) out[idx * d_v + c] = acc[c] * inv;
}

// v2: a block of FLASH_WARPS warps handles FLASH_WARPS consecutive queries of
// one (batch, head); warp w owns query i = blockIdx.x * FLASH_WARPS + w. Lane
// `lane` holds elements lane, lane+32, lane+64, lane+96 of q and of the output
// accumulator in registers. Keys are visited in tiles of FLASH_BC: the block
// copies K and V rows of the tile into shared memory once, and all its warps
// read them from there (FlashAttention's tiling: each K/V element comes from
// global memory once per block instead of once per query).
#define FLASH_WARPS 8
#define FLASH_BC 32
#define FLASH_PER_LANE (CUDA_FLASH_MAX_D / 32)
__global__ void flash_tiled_kernel(float *out, const float *Q, const float *K, const float *V,
                                   const int *key_len, int causal, int h, int Tq, int Tk,
                                   int d_k, int d_v, float scale) {
    extern __shared__ float smem[];
    float *Ks = smem;                            // (FLASH_BC, d_k)
    float *Vs = smem + FLASH_BC * d_k;           // (FLASH_BC, d_v)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int bh = blockIdx.y, b = bh / h;
    int i0 = blockIdx.x * FLASH_WARPS, i = i0 + warp;
    int active = i < Tq;                         // the last block may run past Tq
    const float *Kb = K + (long)bh * Tk * d_k, *Vb = V + (long)bh * Tk * d_v;

    float q[FLASH_PER_LANE], acc[FLASH_PER_LANE];
#pragma unroll
    for (int t = 0; t < FLASH_PER_LANE; t++) {
        int c = lane + 32 * t;
        q[t] = (active && c < d_k) ? Q[((long)bh * Tq + i) * d_k + c] : 0.0f;
        acc[t] = 0.0f;
    }
    int kend = active ? visible_keys(key_len, causal, b, i, Tk) : 0;
    // the block loads tiles up to the last key any of its queries sees
    int i_last = min(i0 + FLASH_WARPS, Tq) - 1;
    int block_kend = visible_keys(key_len, causal, b, i_last, Tk);

    float m = -INFINITY, l = 0.0f, corr;
    for (int j0 = 0; j0 < block_kend; j0 += FLASH_BC) {
        for (int e = threadIdx.x; e < FLASH_BC * d_k; e += blockDim.x) {
            int r = e / d_k, c = e % d_k;
            Ks[e] = j0 + r < block_kend ? Kb[(long)(j0 + r) * d_k + c] : 0.0f;
        }
        for (int e = threadIdx.x; e < FLASH_BC * d_v; e += blockDim.x) {
            int r = e / d_v, c = e % d_v;
            Vs[e] = j0 + r < block_kend ? Vb[(long)(j0 + r) * d_v + c] : 0.0f;
        }
        __syncthreads();                         // tile complete
        int jn = min(FLASH_BC, kend - j0);       // this warp's visible keys in the tile
        for (int jj = 0; jj < jn; jj++) {        // jn is the same for the whole warp
            float part = 0.0f;
#pragma unroll
            for (int t = 0; t < FLASH_PER_LANE; t++) {
                int c = lane + 32 * t;
                if (c < d_k) part += q[t] * Ks[jj * d_k + c];
            }
            float s = warp_sum(part) * scale;    // every lane now has the full score
            float p = online_step(s, &m, &l, &corr);
#pragma unroll
            for (int t = 0; t < FLASH_PER_LANE; t++) {
                int c = lane + 32 * t;
                if (c < d_v) acc[t] = acc[t] * corr + p * Vs[jj * d_v + c];
            }
        }
        __syncthreads();                         // everyone done with the tile
    }
    if (!active) return;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int t = 0; t < FLASH_PER_LANE; t++) {
        int c = lane + 32 * t;
        if (c < d_v) out[((long)bh * Tq + i) * d_v + c] = acc[t] * inv;
    }
}

extern "C" void cuda_flash_attention_forward_version(int version, float *out,
                                                     const float *Q, const float *K,
                                                     const float *V, const int *key_len,
                                                     int causal, int B, int h, int Tq, int Tk,
                                                     int d_k, int d_v) {
    if (d_k > CUDA_FLASH_MAX_D || d_v > CUDA_FLASH_MAX_D) {
        fprintf(stderr, "cuda_flash_attention_forward: d_k (%d) and d_v (%d) must be at most %d\n",
                d_k, d_v, CUDA_FLASH_MAX_D);
        exit(2);
    }
    long rows = (long)B * h * Tq;
    if (rows == 0) return;
    float scale = 1.0f / sqrtf((float)d_k);
    if (version == CUDA_FLASH_THREAD) {
        flash_thread_kernel<<<ceil_div(rows, 128), 128>>>(out, Q, K, V, key_len, causal, h, Tq,
                                                          Tk, d_k, d_v, rows, scale);
    } else {
        dim3 grid(ceil_div(Tq, FLASH_WARPS), B * h);
        size_t smem = (size_t)FLASH_BC * (d_k + d_v) * sizeof(float);
        flash_tiled_kernel<<<grid, FLASH_WARPS * 32, smem>>>(out, Q, K, V, key_len, causal, h,
                                                             Tq, Tk, d_k, d_v, scale);
    }
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_flash_attention_forward(float *out, const float *Q, const float *K,
                                             const float *V, const int *key_len, int causal,
                                             int B, int h, int Tq, int Tk, int d_k, int d_v) {
    cuda_flash_attention_forward_version(CUDA_FLASH_TILED, out, Q, K, V, key_len, causal,
                                         B, h, Tq, Tk, d_k, d_v);
}
