/* device.h - where the math runs: the CPU (always) or a CUDA GPU (optional).
 *
 * The CPU code is the reference. A build with CUDA (make, when nvcc is
 * found; CUDA=0 turns it off) adds kernels in cuda/; at run time
 * `--device cuda` uses them if a GPU is present. Without a CUDA build or
 * without a GPU, asking for cuda prints one clear line and runs on the CPU.
 */
#ifndef DEVICE_H
#define DEVICE_H

typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1 } Device;

/* 1 if this binary was built with CUDA support */
int device_cuda_built(void);
/* 1 if built with CUDA and a GPU is visible (cudaGetDeviceCount > 0) */
int device_cuda_available(void);
/* Resolves a request ("cpu" or "cuda") to what can actually run, printing
 * one line (once per process) when cuda was asked for and cannot be had.
 * Returns -1 for a name that is neither. */
int device_select(const char *name, Device *out);
const char *device_name(Device d);

#endif
