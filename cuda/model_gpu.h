/* model_gpu.h - the Transformer of common/model.h, run on a CUDA GPU.
 *
 * A GpuModel is a mirror of a CPU Model: the same Config, the same named
 * parameter tensors in the same order (Params, with every pointer in GPU
 * memory), gradients in the same layout, activations for the same capacity
 * (max_B, max_Ts, max_Tt), plus Adam's m and v. The CPU Model stays the
 * reference and the owner of the weights on disk: build a GpuModel from it,
 * train on the GPU, download the parameters back, and checkpoints, greedy
 * decoding and every inspection function of model.h work on the CPU copy.
 *
 *   Model m;  model_build(&m, ...);
 *   GpuModel *g;  gpu_model_build(&g, &m, err, sizeof err);
 *   for each step: gpu_train_step(g, src, tgt_in, tgt_out, ..., lr, step, &st);
 *   gpu_model_download_params(g, &m);  model_save(&m, ...);
 *   gpu_model_free(g);  model_free(&m);
 *
 * The forward and backward passes are model.c's, sub-layer for sub-layer
 * (post-LN or pre-LN, dropout in the same places, causal + padding masks,
 * the one embedding matrix used three times), each op replaced by its
 * kernel from kernels.h. Two differences, both deliberate:
 *   - dropout masks come from a counter-based hash on the GPU (kernels.h,
 *     cuda_residual_dropout_forward), not from the CPU's Rng stream, so with
 *     P_drop > 0 a GPU step is a different (equally valid) random draw;
 *     with P_drop = 0 or training = 0 the two agree to float32 rounding;
 *   - the saved sub-layer output is kept before dropout (the CPU keeps it
 *     after); nothing reads it but the CPU's inspection functions.
 *
 * Token ids are host arrays (uploaded here, a few KB), already validated
 * with model_check_tokens; sizes already checked with model_check_sizes on
 * the CPU Model the GpuModel was built from. Masks are built on the host
 * with attention.h's functions and uploaded. Every CUDA call is checked
 * (kernels.h: a failure prints where and exits 1; out of GPU memory says so).
 *
 * In a build without CUDA (no nvcc, CUDA=0, SANITIZE=1) every function
 * still links: gpu_model_build and the gpu_*_host helpers return 2 with
 * "this build has no CUDA", gpu_model_free(NULL) is a no-op, and the rest
 * can never be reached (there is no GpuModel to pass them).
 */
#ifndef MODEL_GPU_H
#define MODEL_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "attention.h"
#include "model.h"
#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuModel GpuModel;   /* laid out in model_gpu.c */

/* ---- build, copy, free ------------------------------------------------------
 * Uploads m's weights and PE table; gradients and Adam's m, v start at zero;
 * dropout seeds derive from m->dropout_rng. Capacity is m's. Returns 0 and
 * *out, or 2 with a message in err (no CUDA in this build; out of host
 * memory); *out is then NULL. The caller owns *out: gpu_model_free. */
int gpu_model_build(GpuModel **out, const Model *m, char *err, size_t errlen);
void gpu_model_free(GpuModel *g);   /* NULL: no-op */

void gpu_model_upload_params(GpuModel *g, const Model *m);     /* CPU weights -> GPU     */
void gpu_model_download_params(const GpuModel *g, Model *m);   /* GPU weights -> m->params */
void gpu_model_download_grads(const GpuModel *g, Model *m);    /* GPU grads   -> m->grads  */
/* Adam's moments, (n params) each, host arrays (a Trainer's adam_m/adam_v) */
void gpu_model_upload_adam(GpuModel *g, const float *adam_m, const float *adam_v);
void gpu_model_download_adam(const GpuModel *g, float *adam_m, float *adam_v);

/* ---- forward and backward ----------------------------------------------------
 * As model_forward: src (B,Ts), tgt (B,Tt) host ids; training = 1 applies
 * dropout. Returns logp (B*Tt, vocab) in GPU memory, valid until the next
 * call. */
const float *gpu_model_forward(GpuModel *g, const int *src, const int *tgt, int B, int Ts, int Tt,
                               int training);
/* As model_backward: dlogits (B*Tt, vocab) in GPU memory; accumulates into
 * the GPU gradients. */
void gpu_model_backward(GpuModel *g, const float *dlogits);
void gpu_model_zero_grad(GpuModel *g);

/* One training step as train_step_batch (train.h), all on the GPU: zero
 * grads, forward with dropout, label-smoothed cross-entropy (hp->eps_ls),
 * its backward, the model's backward, finite checks (nothing changes on
 * NaN/inf), Adam (hp->beta1, beta2, adam_eps) with rate lr (the caller's
 * lr_schedule(step, ...), Sec. 5.3) at Adam step `step` (>= 1).
 * tgt_out (B,Tt) host ids. st (may be NULL) gets loss, lr, grad_norm,
 * n_tokens as on the CPU. */
TrainStatus gpu_train_step(GpuModel *g, const int *src, const int *tgt_in, const int *tgt_out,
                           int B, int Ts, int Tt, const TrainHyper *hp, float lr, int step,
                           StepStats *st);

/* ---- reading results back (host arrays, after a gpu_model_forward) ---------- */
void gpu_model_logp(const GpuModel *g, float *logp);              /* (B*Tt, vocab)  */
/* the attention weights of one layer, (B,h,Tq,Tk) as model_attention */
void gpu_model_attention(const GpuModel *g, AttnKind kind, int layer, float *weights);

/* ---- one op on the GPU from host arrays, for the chapters -------------------
 * Upload the inputs, run the kernel, download the outputs, free: slow (it
 * allocates every call) but a one-line way to show that the GPU computes
 * what the CPU does. Same arguments as the CPU functions, host pointers;
 * return 0, or 2 with a message in err (this build has no CUDA). */
/* sdpa_forward: out (B,h,Tq,d_v), weights (B,h,Tq,Tk) */
int gpu_sdpa_forward_host(float *out, float *weights, const float *Q, const float *K, const float *V,
                          const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v,
                          char *err, size_t errlen);
/* mha_forward: out (B,Tq,d_model), weights (B,h,Tq,Tk) (may be NULL) */
int gpu_mha_forward_host(float *out, float *weights, const MhaParams *p, const float *x_q,
                         const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v, char *err, size_t errlen);

/* ---- kernels the model needs beyond kernels.h (model_gpu_kernels.cu) --------
 * Device pointers; same conventions as kernels.h. */
/* attention.h's heads_split / heads_merge: out (B,h,T,d) <-> inp (B,T,h*d) */
void cuda_heads_split(float *out, const float *inp, int B, int T, int h, int d);
void cuda_heads_merge(float *out, const float *inp, int B, int T, int h, int d);
/* dropout alone (on the embeddings, Sec. 5.4): out = inp * keep, keep (n)
 * 0 or 1/(1-p) from the same hash as cuda_residual_dropout_forward. out may
 * equal inp. dinp += dout * keep. */
void cuda_dropout_forward(float *out, float *keep, const float *inp, float p, size_t n,
                          uint64_t seed);
void cuda_dropout_backward(float *dinp, const float *dout, const float *keep, size_t n);
/* sum of x[i]^2 in double, in a fixed order (deterministic); NaN or inf if
 * any x[i] is. Waits for the GPU. */
double cuda_sum_squares(const float *x, size_t n);

#ifdef __cplusplus
}
#endif

#endif
