/* optim.h - Adam with the paper's learning-rate schedule (Section 5.3), and
 * AdamW with the warmup-and-cosine schedule language models train with.
 *
 *   lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *   Adam: beta1 = 0.9, beta2 = 0.98, eps = 1e-9
 *
 *   AdamW (Loshchilov & Hutter 2019): Adam, plus p -= lr * wd * p
 *   lr: linear warmup to lr_max, cosine decay to lr_min (nanoGPT's recipe)
 */
#ifndef OPTIM_H
#define OPTIM_H

#include <stddef.h>

/* step counts from 1; returns the rate for that step (peak at step == warmup) */
float lr_schedule(int step, int d_model, int warmup, float factor);

/* One Adam update of n parameters in place, bias-corrected, step >= 1.
 * param, grad, m, v: (n). m and v start at zero. */
void adam_update(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step);

/* The optimizer's whole step over the flat gradient array, in one op:
 *   1. the sum of squares of every gradient, in double (NaN or inf when any
 *      gradient is: a float's square, and the sum of up to 2^64 of them,
 *      fit in a double, so a finite sum means every gradient is finite);
 *   2. only if it is finite, adam_update over all n parameters.
 * Returns the sum of squares; when it is not finite, param, m and v are
 * left exactly as they were (the step is refused, nothing to roll back).
 * The square root of the return value is the global gradient norm.
 *
 * adam_step_ref is the plain version: the sum in index order (one running
 * double), then adam_update. Its tuned twin adam_step (fast/optim_fast.h)
 * shares the work among the threads and vector lanes. */
double adam_step_ref(float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, int step);

/* ---- AdamW and the cosine schedule (chapter 14) ------------------------------ */

/* nanoGPT's schedule; step counts from 1:
 *   step <= warmup               lr_max * step / warmup     (linear rise)
 *   warmup < step < max_steps    lr_min + (lr_max - lr_min) * (1 + cos(pi r)) / 2,
 *                                r = (step - warmup) / (max_steps - warmup)
 *   step >= max_steps            lr_min                      (constant after)
 * so the rate peaks at lr_max at step == warmup, passes (lr_max + lr_min) / 2
 * half way through the decay and ends at lr_min at step == max_steps.
 * warmup 0: no rise, the decay starts at lr_max. Needs max_steps > warmup >= 0. */
float lr_warmup_cosine(int step, int warmup, int max_steps, float lr_max, float lr_min);

/* One AdamW update of n parameters in place (Loshchilov & Hutter 2019,
 * Algorithm 2): each parameter first shrinks by the factor (1 - lr * wd),
 * which is p -= lr * wd * p, then takes adam_update's step. weight_decay 0
 * gives adam_update's bits exactly. param, grad, m, v: (n). step >= 1. */
void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step);

/* The flat parameter array as AdamW sees it: tensors laid end to end (the
 * model's order), each decayed or exempt. A language model usually exempts
 * the biases and the norms' gains and shifts (1-D: shrinking a gain toward 0
 * fights the normalisation, a bias cannot overfit by growing), and often the
 * embeddings (a rare character's row gets few gradients, and decay would
 * wear it away between them; GPT-2 and nanoGPT decay them all the same). */
typedef struct {
    size_t n;     /* the tensor's floats                            */
    int decay;    /* 1: weight decay applies; 0: exempt             */
} AdamwTensor;

/* adam_step_ref's twin for AdamW: the sum of squares of grad in index order
 * (one running double); only if it is finite, adamw_update over each tensor
 * with weight_decay where its decay flag is set and 0 where it is not. The
 * tensors' n must add up to n; tensors NULL (ntensors 0): one tensor of n,
 * decayed. Returns the sum of squares; when it is not finite, param, m and
 * v are left exactly as they were. Its tuned twin: adamw_step (fast/optim_fast.h). */
double adamw_step_ref(float *param, const float *grad, float *m, float *v, size_t n, const AdamwTensor *tensors,
                      int ntensors, float lr, float beta1, float beta2, float eps, float weight_decay, int step);

#endif
