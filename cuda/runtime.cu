// runtime.cu - asking the CUDA runtime what is there; device memory, the
// cuBLAS handle, and event timing (see kernels.h).
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "cuda_util.h"
#include "kernels.h"

// A CUDA GPU on Linux shows up as NVIDIA device files (/dev/nvidiactl), or
// /dev/dxg under WSL2. Without them there is nothing to find, and we answer
// without starting the CUDA runtime: that start loads the driver library
// with dlopen, which costs time and makes valgrind report errors inside
// the system's dynamic loader in every run on a machine without a GPU.
static int nvidia_device_files(void) {
    return access("/dev/nvidiactl", F_OK) == 0 || access("/dev/dxg", F_OK) == 0;
}

extern "C" int cuda_device_count(void) {
    static int count = -1;                                   // asked once per process
    if (count >= 0) return count;
    int n = 0;
    if (!nvidia_device_files() || cudaGetDeviceCount(&n) != cudaSuccess) n = 0;  // CPU it is
    count = n;
    return count;
}

// ---- memory -------------------------------------------------------------------

extern "C" void *cuda_alloc(size_t bytes) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        // a failure of the world (too big a model for this GPU), not a bug
        fprintf(stderr, "out of GPU memory: could not allocate %.1f MiB (%s); try smaller sizes\n",
                bytes / 1048576.0, cudaGetErrorString(err));
        exit(1);
    }
    return p;
}

extern "C" void *cuda_try_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();   // clear it: running out is not a sticky error
        return NULL;
    }
    return p;
}

extern "C" void cuda_copy(void *dev_dst, const void *dev_src, size_t bytes) {
    if (dev_dst != dev_src) CUDA_CHECK(cudaMemcpy(dev_dst, dev_src, bytes, cudaMemcpyDeviceToDevice));
}

extern "C" void cuda_free(void *dev) {
    if (dev) CUDA_CHECK(cudaFree(dev));
}

extern "C" void cuda_upload(void *dev_dst, const void *host_src, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(dev_dst, host_src, bytes, cudaMemcpyHostToDevice));
}

extern "C" void cuda_download(void *host_dst, const void *dev_src, size_t bytes) {
    // cudaMemcpy waits for every kernel queued before it on the default stream
    CUDA_CHECK(cudaMemcpy(host_dst, dev_src, bytes, cudaMemcpyDeviceToHost));
}

extern "C" void cuda_zero(void *dev, size_t bytes) {
    CUDA_CHECK(cudaMemset(dev, 0, bytes));
}

extern "C" void cuda_sync(void) {
    CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- cuBLAS handle ------------------------------------------------------------
// Creating a handle costs milliseconds and some memory, so there is one per
// process, made when the first gemm needs it.
static cublasHandle_t blas_handle = NULL;

cublasHandle_t cuda_blas_handle(void) {
    if (!blas_handle) {
        CUBLAS_CHECK(cublasCreate(&blas_handle));
        // plain float32 arithmetic (no TF32): the results are compared with
        // the CPU's float32 code at float32 tolerances
        CUBLAS_CHECK(cublasSetMathMode(blas_handle, CUBLAS_DEFAULT_MATH));
    }
    return blas_handle;
}

extern "C" void cuda_release(void) {
    if (blas_handle) {
        CUBLAS_CHECK(cublasDestroy(blas_handle));
        blas_handle = NULL;
    }
}

extern "C" char *cuda_describe(char *buf, size_t len) {
    int dev = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
    return buf;
}

// ---- timing -------------------------------------------------------------------
// CUDA events are timestamps recorded on the GPU's own queue, so they time
// the kernels, not the CPU's launching of them.
extern "C" float cuda_time_ms(CudaBenchFn fn, void *ctx, int reps) {
    if (reps < 1) reps = 1;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    fn(ctx);                                   // warm-up: first-call costs, caches
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ms(reps);
    for (int r = 0; r < reps; r++) {
        CUDA_CHECK(cudaEventRecord(start));
        fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(ms.begin(), ms.end());
    return ms[reps / 2];
}
