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
 * adam_step_ref is the plain version: the sum in index order (one running
 * double), then adam_update. Its tuned twin adam_step (fast/optim_fast.h)
 * shares the work among the threads and vector lanes. */
double adam_step_ref(float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, int step);

#endif
