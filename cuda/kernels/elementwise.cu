/* Element-wise layer operations: bias + ReLU after a layer's GEMM, and the ReLU's backward mask.
 * One thread per element; memory-bound, so what matters is that a warp touches consecutive
 * addresses, which it does. */
#include "../cuda_check.h"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* z is rows×cols: z[r][c] = max(z[r][c] + bias[c], 0) (without the max when !relu).
 * Grid: x covers cols, y covers rows, so no division is needed to find the column. */
__global__ void bias_activation_kernel(float *z, const float *bias, int rows, int cols, bool relu) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        float value = z[(size_t)row * cols + col] + bias[col];
        z[(size_t)row * cols + col] = (relu && value < 0.0f) ? 0.0f : value;
    }
}

__global__ void relu_backward_kernel(float *grad, const float *activation, size_t count) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        if (activation[i] <= 0.0f) grad[i] = 0.0f;
}

} // namespace

void gpu_bias_activation(cudaStream_t stream, float *z, const float *bias, int rows, int cols,
                         bool relu) {
    if (rows == 0 || cols == 0) return;
    dim3 blocks(blocks_for(cols, THREADS), rows < 65535 ? rows : 65535);
    bias_activation_kernel<<<blocks, THREADS, 0, stream>>>(z, bias, rows, cols, relu);
    CUDA_CHECK_LAUNCH();
}

void gpu_relu_backward(cudaStream_t stream, float *grad, const float *activation, size_t count) {
    if (count == 0) return;
    unsigned blocks = blocks_for(count, THREADS);
    relu_backward_kernel<<<blocks < 65535 ? blocks : 65535, THREADS, 0, stream>>>(grad, activation,
                                                                                  count);
    CUDA_CHECK_LAUNCH();
}
