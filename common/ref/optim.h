/* optim.h - Adam with the paper's learning-rate schedule (Section 5.3).
 *
 *   lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *   Adam: beta1 = 0.9, beta2 = 0.98, eps = 1e-9
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
 * adam_step_ref: the plain version: the sum in index order (one running
 * double), then adam_update. adam_step: the same in chunks of ADAM_CHUNK
 * floats (64 KiB) over all threads, vectorised: each chunk's sum kept as 16
 * running doubles, the chunks' sums added in chunk order, so the result
 * depends on n only, not on the thread count; it differs from the
 * index-order sum in the last bits. The parameters, m and v it writes are
 * bit-for-bit adam_update's (element-wise, same operations, no fusing).
 * Memory traffic: each gradient is read twice (pass 1, then Adam, which
 * needs the verdict of pass 1 before it may write anything): 32 bytes per
 * parameter against the 28 Adam alone must move. */
#define ADAM_CHUNK 16384
double adam_step_ref(float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, int step);
double adam_step(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step);

#endif
