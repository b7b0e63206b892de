/* ops_fast.h - the tuned twins of ref/ops.h's element-wise ops.
 *
 * gemm(), the tuned twin of ops.h's gemm_ref, has its own header (gemm.h). */
#ifndef OPS_FAST_H
#define OPS_FAST_H

/* y[i] = expf(x[i]) for i < n, the same bits as expf() (y may be x): with
 * AVX-512, 16 at a time (simd.h's exp16_ps), with AVX2 8 at a time; on other
 * CPUs the plain loop. Plain twin: exp_array_ref, ref/ops.c; tests/check_ops.c
 * compares the two bit for bit. */
void exp_array(float *y, const float *x, int n);

#endif
