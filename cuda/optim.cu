// optim.cu - Adam (Sec. 5.3: beta1 = 0.9, beta2 = 0.98, eps = 1e-9) on the GPU.
//
//   CPU reference : adam_update in common/ref/optim.c
//   kernel        : one thread per parameter (each element is independent);
//                   the bias corrections are computed once, on the host, in
//                   double, exactly as the CPU does
#include <math.h>

#include "cuda_util.h"
#include "kernels.h"

__global__ void adam_kernel(float *param, const float *grad, float *m, float *v, size_t n,
                            float lr, float beta1, float beta2, float eps, float a1, float a2) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i];
        // running averages of the gradient and of its square (Kingma & Ba, Alg. 1)
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        // a1 = 1/(1 - beta1^t), a2 = 1/(1 - beta2^t) undo the bias toward the zero start
        param[i] -= lr * (mi * a1) / (sqrtf(vi * a2) + eps);
    }
}

extern "C" void cuda_adam_update(float *param, const float *grad, float *m, float *v, size_t n,
                                 float lr, float beta1, float beta2, float eps, int step) {
    if (n == 0) return;
    float a1 = (float)(1.0 / (1.0 - pow(beta1, step)));
    float a2 = (float)(1.0 / (1.0 - pow(beta2, step)));
    adam_kernel<<<grid_for(n, 256), 256>>>(param, grad, m, v, n, lr, beta1, beta2, eps, a1, a2);
    CUDA_CHECK_LAUNCH();
}
