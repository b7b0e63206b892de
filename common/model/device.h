/* device.h - where the math runs: the CPU (always) or a CUDA GPU (optional).
 *
 * The CPU code is the reference. A build with nvcc adds the CUDA backend as
 * a shared object (build/libaiyn_cuda.so, see backend.h), opened only when
 * `--device cuda` asks for it. Without it, or without a GPU, asking for
 * cuda prints one clear line and runs on the CPU.
 *
 * This is the one place that chooses a backend by name; what it hands out
 * is a table (backend.h), and the code that runs on it never asks which.
 */
#ifndef DEVICE_H
#define DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "model/backend.h"
#include "model/backend_cpu.h"

typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1 } Device;

/* 1 if this build has the CUDA backend (libaiyn_cuda.so beside the program) */
int device_cuda_built(void);
/* 1 if the CUDA backend opens and a GPU is visible */
int device_cuda_available(void);
/* Resolves a request ("cpu" or "cuda") to what can actually run, printing
 * one line (once per process) when cuda was asked for and cannot be had.
 * Returns -1 for a name that is neither. */
int device_select(const char *name, Device *out);
const char *device_name(Device d);
/* the backend table of a device (the CPU's for DEVICE_CPU) */
const Backend *device_backend(Device d);
/* "cpu" or "cuda" -> a backend, as device_select resolves it (cuda that
 * cannot be had says so once and gives the CPU). NULL for any other name. */
const Backend *backend_select(const char *name);

/* ---- one op on the GPU from host arrays, for the chapters -------------------
 * Upload the inputs, run the CUDA backend's op, download the outputs, free:
 * slow (it allocates every call) but a one-line way to show that the GPU
 * computes what the CPU does. Same arguments as the CPU functions, host
 * pointers; return 0, or 2 with a message in err (no CUDA backend, out of
 * GPU memory). */
/* sdpa_forward: out (B,h,Tq,d_v), weights (B,h,Tq,Tk) */
int gpu_sdpa_forward_host(float *out, float *weights, const float *Q, const float *K, const float *V,
                          const uint8_t *mask, int B, int h, int Tq, int Tk, int d_k, int d_v,
                          char *err, size_t errlen);
/* mha_forward: out (B,Tq,d_model), weights (B,h,Tq,Tk) (may be NULL) */
int gpu_mha_forward_host(float *out, float *weights, const MhaParams *p, const float *x_q,
                         const float *x_kv, const uint8_t *mask, int B, int Tq, int Tk,
                         int d_model, int h, int d_k, int d_v, char *err, size_t errlen);

#endif
