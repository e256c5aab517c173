/* Deterministic reductions: the bias gradient (column sums of a rows×cols matrix) and the sum
 * of a vector (a pass's per-sample losses and correct flags). No floating-point atomics: every
 * partial sum is combined in a fixed order, so the same input always gives the same bits. */
#include "libs/cuda_check.h"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"

namespace {

/* Column sums: a block of 32×ROW_GROUPS threads owns 32 adjacent columns. Thread (x, y) sums
 * rows y, y + ROW_GROUPS, ... of column x (a warp reads 32 consecutive floats of a row:
 * coalesced); then the ROW_GROUPS partial sums of each column are added in shared memory as a
 * tree, always in the same order. */
constexpr int COLUMNS_PER_BLOCK = 32;
constexpr int ROW_GROUPS = 16;

__global__ void column_sums_kernel(const float *matrix, int rows, int cols, float *sums) {
    __shared__ float partial[ROW_GROUPS][COLUMNS_PER_BLOCK + 1];
    int col = blockIdx.x * COLUMNS_PER_BLOCK + threadIdx.x;
    float acc = 0.0f;
    if (col < cols)
        for (int row = threadIdx.y; row < rows; row += ROW_GROUPS) acc += matrix[(size_t)row * cols + col];
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int stride = ROW_GROUPS / 2; stride > 0; stride /= 2) {
        if (threadIdx.y < stride) partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + stride][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && col < cols) sums[col] = partial[0][threadIdx.x];
}

/* Sum of n floats in one block: each thread adds a strided slice (in double, so the long
 * slices of a 60000-sample pass lose nothing), then a shared-memory tree halves the partial
 * sums until one is left. One block suffices: this runs once per pass, not per step. A thread
 * loads SUM_LOADS of its values before adding them, in the same order as one by one: the
 * loads' latencies overlap instead of following each other (a pass of 60000 on an H200, under
 * Nsight Systems: 8.6 → 5.8 µs a sum; epochs at batch 512, 3.638 → 3.506 ms). */
constexpr int SUM_THREADS = 1024;
constexpr int SUM_LOADS = 8;

__global__ void sum_kernel(const float *x, size_t n, float *result) {
    __shared__ double partial[SUM_THREADS];
    wait_for_previous_kernel();
    double acc = 0.0;
    size_t i = threadIdx.x;
    for (; i + (SUM_LOADS - 1) * SUM_THREADS < n; i += SUM_LOADS * SUM_THREADS) {
        float values[SUM_LOADS];
#pragma unroll
        for (int l = 0; l < SUM_LOADS; l++) values[l] = x[i + l * SUM_THREADS];
#pragma unroll
        for (int l = 0; l < SUM_LOADS; l++) acc += values[l];
    }
    for (; i < n; i += SUM_THREADS) acc += x[i];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = SUM_THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) *result = (float)partial[0];
}

} // namespace

void gpu_column_sums(cudaStream_t stream, const float *matrix, int rows, int cols, float *sums) {
    if (cols == 0) return;
    dim3 threads(COLUMNS_PER_BLOCK, ROW_GROUPS);
    column_sums_kernel<<<blocks_for(cols, COLUMNS_PER_BLOCK), threads, 0, stream>>>(matrix, rows,
                                                                                    cols, sums);
    CUDA_CHECK_LAUNCH();
}

void gpu_sum(cudaStream_t stream, const float *x, size_t n, float *result) {
    launch_dependent(sum_kernel, 1, SUM_THREADS, 0, stream, 1, x, n, result);
}
