/* tensor.c - named-dimension tensors: create, view, print, compare. */
#include "core/tensor.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>

/* Splits "batch seq d_k" into t->dim and reads one int size per name. */
static void set_shape(Tensor *t, const char *name, const char *dims, va_list ap) {
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    t->ndim = 0;
    const char *p = dims;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        assert(t->ndim < TENSOR_MAX_DIMS && "too many dimension names");
        snprintf(t->dim[t->ndim], TENSOR_DIM_LEN, "%.*s", (int)len, p);
        t->shape[t->ndim] = va_arg(ap, int);
        assert(t->shape[t->ndim] > 0 && "dimension sizes must be positive");
        t->ndim++;
        p += len;
    }
    assert(t->ndim > 0 && "a tensor needs at least one named dimension");
    long s = 1;   /* row-major: the last axis is contiguous */
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

void *calloc_big(size_t count, size_t size, int touch) {
    void *p = calloc(count, size);
#ifdef MADV_HUGEPAGE
    size_t bytes = count * size, huge = (size_t)2 << 20;   /* calloc checked count * size */
    if (p && bytes >= 2 * huge) {
        /* the whole 2 MiB pages inside the array; calloc's own big arrays
         * are fresh mappings not yet touched, so the kernel can give them
         * huge pages from the first write on. A refusal changes nothing.
         * With touch, each page is then written here, once: the kernel
         * clears a huge page on its first write (tens of microseconds),
         * and a first write inside a training step's parallel job held the
         * other thread up: it waits for every chunk taken (parallel.c). */
        uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1);
        uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(huge - 1);
        if (hi > lo && madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0 && touch)
            for (uintptr_t q = lo; q < hi; q += huge) *(volatile char *)q = 0;
    }
#endif
    return p;
}

Tensor *tensor_new(const char *name, const char *dims, ...) {
    Tensor *t = calloc(1, sizeof *t);
    if (!t) { fprintf(stderr, "error: out of memory\n"); exit(1); }
    va_list ap;
    va_start(ap, dims);
    set_shape(t, name, dims, ap);
    va_end(ap);
    t->data = calloc(tensor_numel(t), sizeof(float));
    if (!t->data) {
        fprintf(stderr, "error: out of memory allocating %s (%zu floats)\n", t->name, tensor_numel(t));
        exit(1);
    }
    t->owns = 1;
    return t;
}

void tensor_free(Tensor *t) {
    if (!t) return;
    if (t->owns) free(t->data);
    free(t);
}

Tensor tensor_wrap(float *data, const char *name, const char *dims, ...) {
    Tensor t = {0};
    va_list ap;
    va_start(ap, dims);
    set_shape(&t, name, dims, ap);
    va_end(ap);
    t.data = data;
    return t;
}

Tensor tensor_reshape(const Tensor *src, const char *name, const char *dims, ...) {
    assert(tensor_is_contiguous(src) && "reshape needs contiguous data; tensor_copy first");
    Tensor t = {0};
    va_list ap;
    va_start(ap, dims);
    set_shape(&t, name, dims, ap);
    va_end(ap);
    if (tensor_numel(&t) != tensor_numel(src)) {
        fprintf(stderr, "reshape: %s has %zu elements, new shape has %zu\n",
                src->name, tensor_numel(src), tensor_numel(&t));
        assert(0 && "reshape must keep the element count");
    }
    t.data = src->data;
    return t;
}

Tensor tensor_transpose(const Tensor *src, int a, int b) {
    assert(a >= 0 && a < src->ndim && b >= 0 && b < src->ndim);
    Tensor t = *src;
    t.owns = 0;
    t.shape[a] = src->shape[b];   t.shape[b] = src->shape[a];
    t.stride[a] = src->stride[b]; t.stride[b] = src->stride[a];
    memcpy(t.dim[a], src->dim[b], TENSOR_DIM_LEN);
    memcpy(t.dim[b], src->dim[a], TENSOR_DIM_LEN);
    return t;
}

size_t tensor_numel(const Tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

int tensor_is_contiguous(const Tensor *t) {
    long s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

float *tensor_at(const Tensor *t, int i0, int i1, int i2, int i3) {
    int idx[TENSOR_MAX_DIMS] = {i0, i1, i2, i3};
    long off = 0;
    for (int i = 0; i < t->ndim; i++) {
        assert(idx[i] >= 0 && idx[i] < t->shape[i] && "tensor index out of range");
        off += idx[i] * t->stride[i];
    }
    return t->data + off;
}

void tensor_copy(Tensor *dst, const Tensor *src) {
    assert(tensor_is_contiguous(dst));
    assert(tensor_numel(dst) == tensor_numel(src) && "tensor_copy needs equal element counts");
    int s[TENSOR_MAX_DIMS] = {1, 1, 1, 1};
    long st[TENSOR_MAX_DIMS] = {0, 0, 0, 0};
    for (int i = 0; i < src->ndim; i++) { s[i] = src->shape[i]; st[i] = src->stride[i]; }
    float *o = dst->data;
    for (int a = 0; a < s[0]; a++)
        for (int b = 0; b < s[1]; b++)
            for (int c = 0; c < s[2]; c++)
                for (int d = 0; d < s[3]; d++)
                    *o++ = src->data[a * st[0] + b * st[1] + c * st[2] + d * st[3]];
}

char *tensor_shape_str(const Tensor *t, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "%s [", t->name);
    for (int i = 0; i < t->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s=%d", i ? ", " : "", t->dim[i], t->shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

Diff diff_arrays(const float *a, const float *b, size_t n) {
    Diff d = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        double abs_d = (isnan(x) || isnan(y)) ? INFINITY : fabs(x - y);
        if (isinf(x) && isinf(y) && (x > 0) == (y > 0)) abs_d = 0;  /* same infinity */
        double rel = abs_d / fmax(fabs(y), 1e-30);
        if (abs_d > d.max_abs || (i == 0 && abs_d > 0)) { d.max_abs = abs_d; d.where = i; }
        if (rel > d.max_rel) d.max_rel = rel;
    }
    return d;
}
