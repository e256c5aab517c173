/* out = xᵀ: x is rows×cols (row stride ld), out cols×rows (row stride rows), FP32. For the TF32
 * wgmma rung (gemm_9_tf32_wgmma.cu), whose tensor cores want both operands K-major: one pass
 * through memory lays an operand out that way before a large product.
 *
 * Textbook shared-memory transpose: a block reads a 32×32 tile of x along its rows (coalesced),
 * and writes it along the rows of out (coalesced too), through a shared tile padded to 33
 * columns so that reading it down a column hits 32 different banks. 32×8 threads, each moving 4
 * elements. Any shape: elements outside x are neither read nor written. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_ladder.h"

namespace {

constexpr int TILE = 32, ROWS_PER_PASS = 8;

__global__ void transpose_kernel(int rows, int cols, const float *__restrict__ x, int ld,
                                 float *__restrict__ out) {
    __shared__ float tile[TILE][TILE + 1];
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int r = ty; r < TILE; r += ROWS_PER_PASS)
        if (row0 + r < rows && col0 + tx < cols) tile[r][tx] = x[(size_t)(row0 + r) * ld + col0 + tx];
    __syncthreads();
#pragma unroll
    for (int c = ty; c < TILE; c += ROWS_PER_PASS) /* row col0 + c of out holds column col0 + c of x */
        if (col0 + c < cols && row0 + tx < rows) out[(size_t)(col0 + c) * rows + row0 + tx] = tile[tx][c];
}

} // namespace

void gpu_transpose(cudaStream_t stream, int rows, int cols, const float *x, int ld, float *out) {
    if (rows == 0 || cols == 0) return;
    const dim3 blocks(blocks_for(cols, TILE), blocks_for(rows, TILE)), threads(TILE, ROWS_PER_PASS);
    transpose_kernel<<<blocks, threads, 0, stream>>>(rows, cols, x, ld, out);
    CUDA_CHECK_LAUNCH();
}
