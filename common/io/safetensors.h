/* safetensors.h - write float32 tensors in the safetensors format.
 *
 * The format (huggingface/safetensors; what PyTorch, JAX and the Hugging Face
 * tools load without running any code from the file):
 *
 *   offset  bytes  field
 *   0       8      u64 little-endian N: the length of the JSON header
 *   8       N      UTF-8 JSON object, one entry per tensor
 *                    "name": {"dtype": "F32" or "I32", "shape": [d0, ...],
 *                             "data_offsets": [begin, end]}
 *                  plus an optional "__metadata__": {"key": "value", ...}
 *                  (strings only); padded at the end with spaces so that
 *                  8 + N is a multiple of 8
 *   8+N    ...     the byte buffer: every tensor row-major, little-endian,
 *                  at [8+N+begin, 8+N+end). Offsets are relative to the
 *                  buffer; the tensors cover it exactly, back to back, with
 *                  no holes and no overlaps.
 *
 * This writer keeps the tensors in the order given (the checkpoint's order)
 * and writes a unique temporary beside path (FioWriter, core/fileio.h),
 * then renames it over path, so a failed write never leaves a partial file.
 */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_DIMS 4

typedef enum { SAFETENSORS_F32, SAFETENSORS_I32 } SafeDtype;

typedef struct {
    const char *name;               /* printable ASCII, no '"' or '\\'    */
    SafeDtype dtype;                /* F32 (float) or I32 (int32_t)       */
    const void *data;               /* product(shape) elements, row-major */
    int ndim;                       /* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
    int64_t shape[SAFETENSORS_MAX_DIMS];
} SafeTensor;

/* meta: n_meta key/value pairs (meta[2i] the key, meta[2i+1] the value),
 * written as "__metadata__"; keys and values follow the same character
 * rule as names. Returns 0; 2 for an unusable name, shape or duplicate name
 * (nothing written); 1 for an I/O failure (path untouched). Message in err. */
int safetensors_write(const char *path, const SafeTensor *t, int n, const char *const *meta, int n_meta,
                      char *err, size_t errlen);

#endif
