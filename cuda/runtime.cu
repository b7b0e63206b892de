// runtime.cu - asking the CUDA runtime what is there.
#include <cuda_runtime.h>

extern "C" int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;   // no driver / no GPU: CPU it is
    return n;
}
