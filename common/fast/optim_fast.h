/* optim_fast.h - the tuned twins of optim.h's adam_step_ref and adamw_step_ref. */
#ifndef OPTIM_FAST_H
#define OPTIM_FAST_H

#include <stddef.h>
#include "ref/optim.h"

/* adam_step_ref (ref/optim.h: the sum of squares of grad; Adam only if it is
 * finite; returns the sum) in chunks of ADAM_CHUNK floats (64 KiB) over all
 * threads, vectorised: each chunk's sum kept as 16 running doubles, the
 * chunks' sums added in chunk order, so the result depends on n only, not on
 * the thread count; it differs from the index-order sum in the last bits.
 * The parameters, m and v it writes are bit-for-bit adam_update's
 * (element-wise, same operations, no fusing).
 * Memory traffic: each gradient is read twice (pass 1, then Adam, which
 * needs the verdict of pass 1 before it may write anything): 32 bytes per
 * parameter against the 28 Adam alone must move. */
#define ADAM_CHUNK 16384
double adam_step(float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, int step);

/* adamw_step_ref (ref/optim.h) the same way: the sum of squares as
 * adam_step's; then, in the same chunks, each chunk's share of each tensor
 * with its factor (1 - lr * weight_decay, or 1 where the tensor is exempt):
 * parameters, m and v bit-for-bit adamw_update's. */
double adamw_step(float *param, const float *grad, float *m, float *v, size_t n, const AdamwTensor *tensors,
                  int ntensors, float lr, float beta1, float beta2, float eps, float weight_decay, int step);

#endif
