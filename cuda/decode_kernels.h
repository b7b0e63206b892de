/* decode_kernels.h - the GPU's versions of the two decoding ops of
 * common/ref/rows.h that have no kernel elsewhere (attend_rows_forward,
 * gather_rows), callable from C. Device pointers, as in kernels.h;
 * cuda/decode_kernels.cu has the kernels, cuda/host_shim.c the CPU
 * stand-ins. */
#ifndef DECODE_KERNELS_H
#define DECODE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* as attend_rows_forward (ref/rows.h): one query per row and head */
void cuda_attend_rows_forward(float *out, float *weights, const float *q, const float *K,
                              const float *V, const uint8_t *keep, int R, int group, int h, int n,
                              int stride, int d_k, int d_v);
/* as gather_rows (ref/rows.h), but idx (n ints, or NULL) is DEVICE memory */
void cuda_gather_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                      const int *idx, int n, size_t width);

#ifdef __cplusplus
}
#endif

#endif
