/* Optimizer updates over the flat parameter array, one thread per parameter (grid-stride): one
 * launch updates every layer's weights and biases. Memory-bound: SGD reads 3 and writes 2
 * floats per parameter, Adam reads 4 and writes 3.
 *
 * The update ends a training step, so its kernel also moves the pass cursor on, and a step needs
 * no kernel of its own for that (1.0 µs of a 36 µs step at batch 512 on an H200). SGD does not
 * read the cursor: its first thread moves it. Adam reads the step number from it in every block,
 * so the last block to finish moves it, counted with one atomic add per block (on an H200 that
 * count made SGD's launch 0.8 µs longer, hence not for SGD). */
#include <cmath>

#include "../cuda_check.h"
#include "dependent_launch.cuh"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;
constexpr unsigned MAX_BLOCKS = 4096;

__device__ void move_cursor_on(const gpu_step_end &end) {
    end.cursor->first_row += end.rows;
    end.cursor->optimizer_steps += 1;
}

/* After every thread of the block is done with the cursor: the grid's last block to get here
 * moves it on and zeroes the counter for the next launch. */
__device__ void move_cursor_on_when_read(const gpu_step_end &end) {
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (atomicAdd(end.blocks_done, 1u) != gridDim.x - 1) return;
    move_cursor_on(end);
    *end.blocks_done = 0;
}

__global__ void sgd_momentum_kernel(float *param, float *velocity, const float *grad, size_t n,
                                    float lr, float momentum, gpu_step_end end) {
    wait_for_previous_kernel();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = momentum * velocity[i] + grad[i];
        velocity[i] = v;
        param[i] -= lr * v;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) move_cursor_on(end);
}

/* The step number t comes from the pass cursor in device memory, so a recorded step is the same
 * launch every time; each thread works out the bias corrections 1 / (1 - beta^t) in double, as
 * the CPU does, which costs far less than the memory traffic. */
__global__ void adam_kernel(float *param, float *m, float *v, const float *grad, size_t n,
                            float lr, float beta1, float beta2, float eps, gpu_step_end end) {
    wait_for_previous_kernel();
    int t = end.cursor->optimizer_steps + 1;
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
    move_cursor_on_when_read(end);
}

/* At least one block, which moves the cursor on even with no parameters. */
unsigned grid_for(size_t n) {
    unsigned blocks = blocks_for(n, THREADS);
    return blocks < 1 ? 1 : blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

} // namespace

void gpu_sgd_momentum_step(cudaStream_t stream, float *param, float *velocity, const float *grad,
                           size_t n, float lr, float momentum, gpu_step_end end) {
    launch_dependent(sgd_momentum_kernel, grid_for(n), THREADS, 0, stream, 1, param, velocity, grad,
                     n, lr, momentum, end);
}

void gpu_adam_step(cudaStream_t stream, float *param, float *m, float *v, const float *grad,
                   size_t n, float lr, float beta1, float beta2, float eps, gpu_step_end end) {
    launch_dependent(adam_kernel, grid_for(n), THREADS, 0, stream, 1, param, m, v, grad, n, lr,
                     beta1, beta2, eps, end);
}
