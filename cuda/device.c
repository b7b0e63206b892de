/* device.c - choosing where the math runs (see device.h). */
#include "device.h"

#include <stdio.h>
#include <string.h>

#ifdef USE_CUDA
int cuda_device_count(void);   /* cuda/runtime.cu */
#endif

int device_cuda_built(void) {
#ifdef USE_CUDA
    return 1;
#else
    return 0;
#endif
}

int device_cuda_available(void) {
#ifdef USE_CUDA
    return cuda_device_count() > 0;
#else
    return 0;
#endif
}

int device_select(const char *name, Device *out) {
    static int told = 0;
    if (!strcmp(name, "cpu")) { *out = DEVICE_CPU; return 0; }
    if (strcmp(name, "cuda")) return -1;
    if (device_cuda_available()) { *out = DEVICE_CUDA; return 0; }
    if (!told) {
        told = 1;
        printf("note: --device cuda asked for, but %s; running on the CPU.\n",
               device_cuda_built() ? "no CUDA GPU is visible" : "this build has no CUDA (rebuild with nvcc on PATH)");
    }
    *out = DEVICE_CPU;
    return 0;
}

const char *device_name(Device d) {
    return d == DEVICE_CUDA ? "cuda" : "cpu";
}
