/* rows_fast.h - the decoder step's ops, tuned: the ones the CPU backend runs
 * (backend_cpu.c) for a decoding step (model/decode.h). Plain twins, with
 * the same signatures and contracts: ref/rows.h (read that first).
 *
 * A decoding step has one row per beam. gemm() (behind linear_forward) packs
 * the weight matrix into tiles on every call, which pays when many rows reuse
 * each tile; with a handful of rows the step is bound by reading the weights,
 * so these stream each weight row through once instead, and share the work
 * among the threads in a way that gives the same bits on any thread count
 * (rows_fast.c says why and how). More than DECODE_FEW_ROWS rows go to the
 * training pass's ops (linear_forward, gemm). tests/check_decode.c checks
 * each against its plain twin (equal up to rounding: other orders of the
 * same sums) and one thread against all.
 */
#ifndef ROWS_FAST_H
#define ROWS_FAST_H

#include "ref/rows.h"   /* the plain twins, and gather_rows (a copy: it has no tuned twin) */

#define DECODE_FEW_ROWS 16

/* out (R,OUT) = inp (R,IN) @ W (IN,OUT) + bias (OUT or NULL).
 * Plain twin: linear_rows_forward_ref, ref/rows.c. */
void linear_rows_forward(float *out, const float *inp, const float *W, const float *bias,
                         int R, int IN, int OUT);

/* out (R,V) = x (R,D) @ E^T, E (V,D) the shared embedding.
 * Plain twin: logits_rows_forward_ref, ref/rows.c. */
void logits_rows_forward(float *out, const float *x, const float *E, int R, int D, int V);

/* Eq. (1), one query per row and head against n cached keys (the layout of
 * ref/rows.h). Plain twin: attend_rows_forward_ref, ref/rows.c. */
void attend_rows_forward(float *out, float *weights, const float *q, const float *K, const float *V,
                         const uint8_t *keep, int R, int group, int h, int n, int stride, int d_k, int d_v);

#endif
