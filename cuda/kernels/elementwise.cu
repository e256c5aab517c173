/* Element-wise layer operations: bias + ReLU after a layer's GEMM, and the ReLU's backward mask:
 * the epilogues of a GEMM that cannot apply them itself (cuBLAS's cublasSgemm), and the
 * references the fused epilogues are tested against. One thread per element; memory-bound, so
 * what matters is that a warp touches consecutive addresses, which it does. */
#include "libs/cuda_check.h"
#include "cuda/kernels/gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* z is rows×cols, row stride ld: z[r][c] = max(z[r][c] + bias[c], 0) (no bias when bias is
 * NULL, no max when !relu). Grid: x covers cols, y covers rows, so no division is needed to
 * find the column. */
__global__ void bias_activation_kernel(float *z, const float *bias, int rows, int cols, int ld,
                                       bool relu) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    float add = bias ? bias[col] : 0.0f;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        float value = z[(size_t)row * ld + col] + add;
        z[(size_t)row * ld + col] = (relu && value < 0.0f) ? 0.0f : value;
    }
}

/* grad and activation are rows×cols, row stride ld; the same grid as above. */
__global__ void relu_backward_kernel(float *grad, const float *activation, int rows, int cols,
                                     int ld) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    for (int row = blockIdx.y; row < rows; row += gridDim.y)
        if (activation[(size_t)row * ld + col] <= 0.0f) grad[(size_t)row * ld + col] = 0.0f;
}

dim3 grid_for(int rows, int cols) {
    return dim3(blocks_for(cols, THREADS), rows < 65535 ? rows : 65535);
}

} // namespace

void gpu_bias_activation(cudaStream_t stream, float *z, const float *bias, int rows, int cols,
                         int ld, bool relu) {
    if (rows == 0 || cols == 0) return;
    bias_activation_kernel<<<grid_for(rows, cols), THREADS, 0, stream>>>(z, bias, rows, cols, ld,
                                                                         relu);
    CUDA_CHECK_LAUNCH();
}

void gpu_relu_backward(cudaStream_t stream, float *grad, const float *activation, int rows,
                       int cols, int ld) {
    if (rows == 0 || cols == 0) return;
    relu_backward_kernel<<<grid_for(rows, cols), THREADS, 0, stream>>>(grad, activation, rows,
                                                                       cols, ld);
    CUDA_CHECK_LAUNCH();
}
