/* device.c - choosing where the math runs (see device.h). */
#include "model/device.h"

#include <stdio.h>
#include <string.h>
#include "core/fail.h"

int device_cuda_built(void) {
    char err[512];
    if (backend_cuda(err, sizeof err)) return 1;
    return strstr(err, "not found") == NULL && strstr(err, "cannot find") == NULL;
}

int device_cuda_available(void) {
    char err[512];
    return backend_cuda(err, sizeof err) != NULL;
}

int device_select(const char *name, Device *out) {
    static int told = 0;
    if (!strcmp(name, "cpu")) {
        *out = DEVICE_CPU;
        return 0;
    }
    if (strcmp(name, "cuda")) return -1;
    char err[512];
    *out = backend_cuda(err, sizeof err) ? DEVICE_CUDA : DEVICE_CPU;
    if (*out == DEVICE_CPU && !told) {
        told = 1;
        printf("note: --device cuda asked for, but %s; running on the CPU.\n", err);
    }
    return 0;
}

const char *device_name(Device d) {
    return d == DEVICE_CUDA ? "cuda" : "cpu";
}

const Backend *device_backend(Device d) {
    char err[512];
    const Backend *be = d == DEVICE_CUDA ? backend_cuda(err, sizeof err) : NULL;
    return be ? be : backend_cpu();
}

const Backend *backend_select(const char *name) {
    Device d;
    return device_select(name, &d) ? NULL : device_backend(d);
}

/* ---- one-op helpers -------------------------------------------------------- */

/* cuda_sdpa_forward's type (cuda/kernels.h): sdpa_forward's arguments */
typedef void (*SdpaForward)(float *out, float *weights, const float *Q, const float *K, const float *V,
                            const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v);

/* n bytes of device memory holding a copy of host (NULL for NULL); *oom set when out of memory */
static void *upload_new(const Backend *be, const void *host, size_t bytes, int *oom) {
    if (!host) return NULL;
    void *dev = be->alloc(bytes);
    if (!dev) {
        *oom = 1;
        return NULL;
    }
    be->upload(dev, host, bytes);
    return dev;
}

static void *alloc_or(const Backend *be, size_t bytes, int *oom) {
    void *p = be->alloc(bytes);
    if (!p) *oom = 1;
    return p;
}

int gpu_sdpa_forward_host(float *out, float *weights, const float *Q, const float *K, const float *V,
                          const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v,
                          char *err, size_t errlen) {
    const Backend *be = backend_cuda(err, errlen);
    if (!be) return 2;
    /* Eq. (1) by itself is no op of the table (the model calls whole
     * layers): the kernel, cuda/attention.cu, by its name in the .so */
    SdpaForward sdpa = (SdpaForward)backend_cuda_symbol("cuda_sdpa_forward");
    if (!sdpa) return fail(err, errlen, "the CUDA backend has no cuda_sdpa_forward");
    size_t nq = (size_t)B * h * Tq * d_k, nk = (size_t)B * h * Tk * d_k;
    size_t nv = (size_t)B * h * Tk * d_v, no = (size_t)B * h * Tq * d_v, nw = (size_t)B * h * Tq * Tk;
    int oom = 0;
    float *dQ = upload_new(be, Q, nq * sizeof(float), &oom), *dK = upload_new(be, K, nk * sizeof(float), &oom);
    float *dV = upload_new(be, V, nv * sizeof(float), &oom);
    uint8_t *dmask = upload_new(be, mask, (size_t)B * Tq * Tk, &oom);
    float *dout = alloc_or(be, no * sizeof(float), &oom), *dw = alloc_or(be, nw * sizeof(float), &oom);
    if (!oom) {
        sdpa(dout, dw, dQ, dK, dV, dmask, B, h, Tq, Tk, d_k, d_v);
        be->download(out, dout, no * sizeof(float));
        be->download(weights, dw, nw * sizeof(float));
    }
    be->free(dQ), be->free(dK), be->free(dV), be->free(dmask), be->free(dout), be->free(dw);
    return oom ? fail(err, errlen, "out of GPU memory") : 0;
}

int gpu_mha_forward_host(float *out, float *weights, const MhaParams *p, const float *x_q,
                         const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v, char *err, size_t errlen) {
    const Backend *be = backend_cuda(err, errlen);
    if (!be) return 2;
    size_t D = (size_t)d_model, wq = D * h * d_k, wv = D * h * d_v;
    int oom = 0;
    MhaParams dp = {
        .w_q = upload_new(be, p->w_q, wq * sizeof(float), &oom), .w_k = upload_new(be, p->w_k, wq * sizeof(float), &oom),
        .w_v = upload_new(be, p->w_v, wv * sizeof(float), &oom), .w_o = upload_new(be, p->w_o, wv * sizeof(float), &oom),
    };
    float *dxq = upload_new(be, x_q, (size_t)B * Tq * D * sizeof(float), &oom);
    float *dxkv = upload_new(be, x_kv, (size_t)B * Tk * D * sizeof(float), &oom);
    uint8_t *dmask = upload_new(be, mask, (size_t)B * Tq * Tk, &oom);
    size_t no = (size_t)B * Tq * D;
    float *dout = alloc_or(be, no * sizeof(float), &oom);
    float *acts = alloc_or(be, mha_acts_size(B, Tq, Tk, h, d_k, d_v) * sizeof(float), &oom);
    if (!oom) {
        MhaActs a;
        mha_acts_layout(&a, acts, B, Tq, Tk, h, d_k, d_v);
        be->mha_forward(dout, &a, &dp, dxq, dxkv, dmask, B, Tq, Tk, d_model, h, d_k, d_v);
        be->download(out, dout, no * sizeof(float));
        if (weights) be->download(weights, a.weights, (size_t)B * h * Tq * Tk * sizeof(float));
    }
    be->free(dp.w_q), be->free(dp.w_k), be->free(dp.w_v), be->free(dp.w_o);
    be->free(dxq), be->free(dxkv), be->free(dmask), be->free(dout), be->free(acts);
    return oom ? fail(err, errlen, "out of GPU memory") : 0;
}
