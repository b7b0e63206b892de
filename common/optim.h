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

#endif
