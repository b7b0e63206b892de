/* tensor.h - float32 tensors with named dimensions.
 *
 * A Tensor is a pointer to float data plus a shape whose every axis has a
 * name, so that printing reads the way the paper talks:
 *
 *     Q [batch=2, seq=5, d_k=8]
 *
 * Ops in this library (ops.h, attention.h, nn.h) take plain float pointers
 * and sizes, llm.c style, so they port to CUDA and get backward passes
 * without change. Tensors are for owning memory, naming shapes, printing
 * and viewing (reshape / transpose for attention heads).
 *
 * Ownership: tensor_new() allocates and the caller owns the result and calls
 * tensor_free(); tensor_free(NULL) does nothing. Views (tensor_wrap,
 * tensor_reshape, tensor_transpose) are returned by value, own nothing and
 * must not outlive the data they point at.
 */
#ifndef TENSOR_H
#define TENSOR_H

#include <stddef.h>

#define TENSOR_MAX_DIMS 4
#define TENSOR_NAME_LEN 32
#define TENSOR_DIM_LEN 16

typedef struct {
    float *data;                                  /* first element           */
    int ndim;                                     /* 1..TENSOR_MAX_DIMS      */
    int shape[TENSOR_MAX_DIMS];                   /* size of each axis       */
    long stride[TENSOR_MAX_DIMS];                 /* elements between steps  */
    char dim[TENSOR_MAX_DIMS][TENSOR_DIM_LEN];    /* axis names: "batch"...  */
    char name[TENSOR_NAME_LEN];                   /* "Q", "scores", ...      */
    int owns;                                     /* 1: tensor_free frees    */
} Tensor;

/* New zero-filled contiguous tensor. dims is a space-separated list of axis
 * names, one per size that follows:  tensor_new("Q", "batch seq d_k", 2, 5, 8).
 * Out of memory prints a plain message and exits 1 (a failure of the world). */
Tensor *tensor_new(const char *name, const char *dims, ...);
void tensor_free(Tensor *t);

/* calloc(count, size) for a model's big arrays: weights, gradients, Adam's
 * moments, activations. An array of 4 MiB or more is also offered 2 MiB
 * pages (madvise MADV_HUGEPAGE: this machine's transparent huge pages are
 * set to "madvise", so without asking a program gets 4 KiB pages): one TLB
 * entry then covers what 512 did, and the passes over all the weights
 * (packing them for gemm, Adam) wait less for page walks. touch: write
 * each such page once now (see tensor.c), for arrays whose first writes
 * would otherwise come from a parallel job; not for arrays that may never
 * be used (a forward-only model's gradients): touched, they take memory.
 * Free with free(). */
void *calloc_big(size_t count, size_t size, int touch);

/* A view of existing contiguous data (owns nothing). */
Tensor tensor_wrap(float *data, const char *name, const char *dims, ...);
/* The same data with a new shape (t must be contiguous; element counts match). */
Tensor tensor_reshape(const Tensor *t, const char *name, const char *dims, ...);
/* Axes a and b swapped: no copy, only the strides change. */
Tensor tensor_transpose(const Tensor *t, int a, int b);

size_t tensor_numel(const Tensor *t);
int tensor_is_contiguous(const Tensor *t);
/* Pointer to element (i0, i1, ...) honouring strides; unused indices are 0. */
float *tensor_at(const Tensor *t, int i0, int i1, int i2, int i3);
/* Copy src (any strides) into dst (contiguous, same numel), element order of src. */
void tensor_copy(Tensor *dst, const Tensor *src);
/* "Q [batch=2, seq=5, d_k=8]" written into buf; returns buf. */
char *tensor_shape_str(const Tensor *t, char *buf, size_t len);

/* How far apart two float arrays are: max |a-b|, max |a-b|/max(|b|,tiny),
 * and where the largest absolute difference is. NaN anywhere counts as
 * an infinite difference. */
typedef struct {
    double max_abs;
    double max_rel;
    size_t where;
} Diff;
Diff diff_arrays(const float *a, const float *b, size_t n);

#endif
