/* backend.h - where the model's ops run: one table of function pointers.
 *
 * model.c, train.c and decode.c are written once, against this table (the
 * way ggml and tinygrad do it). The CPU backend (backend_cpu.c) is the
 * library's own functions, pointer for pointer where one function does the
 * whole op; a reader who wants to know what `be->layernorm_forward` does
 * reads layernorm_forward in fast/nn_fast.c (its plain twin,
 * layernorm_forward_ref, in ref/nn.c). The CUDA backend
 * (cuda/backend_cuda.c) is the same table filled with cuda/'s kernels; it
 * lives in a shared object, build/libaiyn_cuda.so, opened only when a
 * program asks for `--device cuda` (device.h), so a CPU run never loads
 * cudart or cuBLAS.
 *
 * One level of ops: what the model, the training step and the decoder call,
 * a layer or a whole step each (LayerNorm, multi-head attention, the FFN,
 * the tied output projection, the loss, an Adam step), never the products
 * and permutations inside them: those are each backend's own business (the
 * CPU's in fast/ and layers/: nn_fast.c, attention_fast.c, gemm.c,
 * linear.c, multihead.c; the GPU's composed from kernels in
 * backend_cuda.c). Shared code asks the table for work and for facts
 * (host_memory), never which backend it holds.
 *
 * Every op takes the CPU function's arguments in the CPU function's order,
 * with pointers in the backend's memory (host memory for the CPU, device
 * memory for CUDA). Backward ops ACCUMULATE (+=), as on the CPU; the one
 * exception, logits_backward's dx, says so.
 *
 * This header also finds the CUDA table: backend.c opens the shared object.
 * Choosing between the CPU and CUDA by name is device.h's backend_select.
 */
#ifndef BACKEND_H
#define BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "layers/multihead.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BACKEND_ABI 4   /* bumped when this table changes: a stale .so is refused */

typedef struct Backend {
    int abi;                 /* BACKEND_ABI of the code that filled the table   */
    const char *name;        /* "cpu", "cuda"                                   */
    /* 1: the ops' pointers are host memory, which plain C (and MPI) may read
     * and write as they are; share() hands back the host array itself and a
     * download to it moves nothing. 0: backend memory, reached from the host
     * only through upload and download (the CUDA backend, and the host shim
     * that stands in for it in the tests). */
    int host_memory;

    /* ---- memory -------------------------------------------------------- */
    /* bytes of zeroed backend memory, or NULL when there is none left */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);                          /* NULL: no-op              */
    /* The backend's view of n bytes of host memory that the ops will read
     * and write: the CPU returns host itself (no copy, so a change on either
     * side is seen by the other); CUDA returns a device copy (NULL when out
     * of memory). unshare(view, host) releases it (CPU: nothing to do). */
    void *(*share)(void *host, size_t bytes);
    void (*unshare)(void *view, void *host);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);       /* within the backend */
    void (*upload)(void *dst, const void *host_src, size_t bytes);
    /* host_dst may be the very memory share() returned (CPU): then nothing moves */
    void (*download)(void *host_dst, const void *src, size_t bytes);

    /* ---- the training pass (model.c), in the order of Figure 1 ------------ */
    /* Sec. 3.4-3.5: out (B,T,d_model) = table[ids] * sqrt(d_model) + pe[t];
     * ids (B,T) in backend memory; pe (max_len,d_model) */
    void (*embed_forward)(float *out, const int *ids, const float *table, const float *pe,
                          int B, int T, int d_model, int vocab);
    void (*embed_backward)(float *dtable, const float *dout, const int *ids, int B, int T,
                           int d_model, int vocab);
    /* the learned PE of Table 3 (E): every sequence added the same row t, so
     * dpos (T,d_model) += sum over b of demb (B,T,d_model), done as the
     * product ones (1,B) . demb (B, T*d_model) with ones (B) all 1.0f in
     * backend memory (the model keeps it) */
    void (*pos_embed_backward)(float *dpos, const float *demb, const float *ones, int B, int T,
                               int d_model);
    /* dropout_mask.h's keep(key, tensor, i) for i in [0, n) */
    void (*dropout_forward)(float *out, float *keep, const float *inp, float p, size_t n,
                            uint64_t key, uint32_t tensor);
    void (*dropout_backward)(float *dinp, const float *dout, const float *keep, size_t n);
    /* out = a + b (the residual connection), n floats */
    void (*residual_forward)(float *out, const float *a, const float *b, size_t n);
    /* out = s * inp, n floats (a micro-batch's share of the step's gradient, train.c) */
    void (*scale_forward)(float *out, const float *inp, float s, size_t n);
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *gamma, const float *beta, int N, int C);
    void (*layernorm_backward)(float *dinp, float *dgamma, float *dbeta, const float *dout,
                               const float *inp, const float *mean, const float *rstd,
                               const float *gamma, int N, int C);
    /* multi-head attention with its (B,Tq,Tk) byte mask; a laid out by mha_acts_layout
     * (layers/multihead.h) */
    void (*mha_forward)(float *out, MhaActs *a, const MhaParams *p, const float *x_q,
                        const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                        int d_model, int h, int d_k, int d_v);
    void (*mha_backward)(float *dx_q, float *dx_kv, MhaParams *g, float *scratch,
                         const float *dout, const MhaActs *a, const MhaParams *p,
                         const float *x_q, const float *x_kv, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v);
    /* Eq. (2) */
    void (*ffn_forward)(float *out, float *hidden, const float *x, const float *W1,
                        const float *b1, const float *W2, const float *b2, int N, int d_model,
                        int d_ff);
    /* dhidden is (N,d_ff) scratch */
    void (*ffn_backward)(float *dx, float *dW1, float *db1, float *dW2, float *db2,
                         float *dhidden, const float *dout, const float *hidden, const float *x,
                         const float *W1, const float *W2, int N, int d_model, int d_ff);
    /* The pre-softmax linear transformation IS the embedding matrix (Sec. 3.4):
     * logits (N,V) = x (N,D) E^T, E (V,D) */
    void (*logits_forward)(float *logits, const float *x, const float *E, int N, int D, int V);
    /* its backward: dx (N,D) = dlogits (N,V) E, WRITTEN, not added (the first
     * gradient of the decoder's backward: nothing came before it), and
     * dE (V,D) += dlogits^T x (one of the embedding's three uses) */
    void (*logits_backward)(float *dx, float *dE, const float *dlogits, const float *x,
                            const float *E, int N, int D, int V);
    void (*logsoftmax_forward)(float *logp, const float *logits, int N, int V);
    /* targets (N) in backend memory; row_loss (N) scratch; the mean comes back to the host */
    float (*smoothed_xent_forward)(float *row_loss, const float *logp, const int *targets, int N,
                                   int V, float eps_ls, int pad_id, int *n_tokens);
    void (*smoothed_xent_backward)(float *dlogits, const float *logp, const int *targets, int N,
                                   int V, float eps_ls, int pad_id);

    /* ---- the optimizer step (train.c) and one rank's gradient norm (dist.c) */
    /* optim.h's adam_step: the sum of squares of grad (every gradient
     * finite? and the global norm), then, only when it is finite, Adam over
     * all n parameters; param, m, v untouched otherwise. One op, so a
     * backend can do it in one pass over the gradients. */
    double (*adam_step)(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                        float beta1, float beta2, float eps, int step);
    /* sum of x[i]^2 in double, in a fixed order; NaN or inf if any x[i] is */
    double (*sum_squares)(const float *x, size_t n);

    /* ---- decoding one position at a time (decode.h; ref/rows.h has the
     * exact contracts, fast/rows_fast.h the CPU's functions) ---- */
    /* out (R,OUT) = inp (R,IN) W (IN,OUT) + bias (OUT, or NULL): few rows */
    void (*linear_rows_forward)(float *out, const float *inp, const float *W, const float *bias,
                                int R, int IN, int OUT);
    /* out (R,V) = x (R,D) E^T: logits_forward's product for a few rows. Its
     * own entry because the CPU streams E once for all R rows here (rows_fast.c)
     * where gemm's packing would cost more than the product: another
     * summation order, so each path keeps its own bits */
    void (*logits_rows_forward)(float *out, const float *x, const float *E, int R, int D, int V);
    void (*relu_forward)(float *out, const float *inp, size_t n);
    /* Eq. (1), one query per row and head against n cached keys */
    void (*attend_rows_forward)(float *out, float *weights, const float *q, const float *K,
                                const float *V, const uint8_t *keep, int R, int group, int h, int n,
                                int stride, int d_k, int d_v);
    /* rows copy: dst + j*dst_pitch <- src + idx[j]*src_pitch, width floats; idx host (NULL: j) */
    void (*gather_rows)(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                        const int *idx, int n, size_t width);
} Backend;

/* ---- the CUDA backend's shared object (backend.c) ------------------------ */

/* The CUDA backend from the shared object: $AIYN_CUDA_LIB if set, else
 * libaiyn_cuda.so beside the running program. NULL, with the reason in err
 * (no such file, no CUDA runtime on this machine, no GPU), when it cannot
 * be had. Opened once per process; later calls return the same answer. */
const Backend *backend_cuda(char *err, size_t errlen);

/* The backend of the shared object at path (the tests open the host shim,
 * build/libaiyn_cuda_shim.so, this way), or NULL with the reason in err. */
const Backend *backend_open(const char *path, char *err, size_t errlen);

/* A symbol of the opened CUDA shared object (the kernel self-test, NCCL,
 * the one-op helpers of device.h), or NULL. Call after backend_cuda
 * succeeded. */
void *backend_cuda_symbol(const char *name);

#ifdef __cplusplus
}
#endif

#endif
