/* Optimizer updates over the flat parameter array, one thread per parameter (grid-stride): one
 * launch updates every layer's weights and biases. Memory-bound: SGD reads 3 and writes 2
 * floats per parameter, Adam reads 4 and writes 3. */
#include <cmath>

#include "../cuda_check.h"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;
constexpr unsigned MAX_BLOCKS = 4096;

__global__ void sgd_momentum_kernel(float *param, float *velocity, const float *grad, size_t n,
                                    float lr, float momentum) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = momentum * velocity[i] + grad[i];
        velocity[i] = v;
        param[i] -= lr * v;
    }
}

/* The step number t comes from the pass cursor in device memory, so a recorded step is the same
 * launch every time; each thread works out the bias corrections 1 / (1 - beta^t) in double, as
 * the CPU does, which costs far less than the memory traffic. */
__global__ void adam_kernel(float *param, float *m, float *v, const float *grad, size_t n,
                            float lr, float beta1, float beta2, float eps,
                            const pass_cursor *cursor) {
    int t = cursor->optimizer_steps + 1;
    float m_correction = (float)(1.0 / (1.0 - pow((double)beta1, t)));
    float v_correction = (float)(1.0 / (1.0 - pow((double)beta2, t)));
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] -= lr * (mi * m_correction) / (sqrtf(vi * v_correction) + eps);
    }
}

unsigned grid_for(size_t n) {
    unsigned blocks = blocks_for(n, THREADS);
    return blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

} // namespace

void gpu_sgd_momentum_step(cudaStream_t stream, float *param, float *velocity, const float *grad,
                           size_t n, float lr, float momentum) {
    if (n == 0) return;
    sgd_momentum_kernel<<<grid_for(n), THREADS, 0, stream>>>(param, velocity, grad, n, lr, momentum);
    CUDA_CHECK_LAUNCH();
}

void gpu_adam_step(cudaStream_t stream, float *param, float *m, float *v, const float *grad,
                   size_t n, float lr, float beta1, float beta2, float eps,
                   const pass_cursor *cursor) {
    if (n == 0) return;
    adam_kernel<<<grid_for(n), THREADS, 0, stream>>>(param, m, v, grad, n, lr, beta1, beta2, eps,
                                                     cursor);
    CUDA_CHECK_LAUNCH();
}
