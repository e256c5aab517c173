/* The textbook tiled GEMM: each block computes a TILE×TILE square of C. For each TILE-wide
 * slice of K, the block's threads copy a TILE×TILE tile of op(A) and one of op(B) into shared
 * memory (one element each, zero outside the matrix), synchronize, and every thread
 * accumulates its dot product from shared memory.
 *
 * Each element loaded from global memory is now used TILE times instead of once, which is the
 * whole idea of tiling. What it still lacks (see gemm_3_blocked.cu, the next step): each thread
 * computes one output, so it issues two shared-memory loads per multiply-add; loads are
 * 4 bytes wide; and with a transposed operand the copy into shared memory is not coalesced. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"

namespace {

constexpr int TILE = 32;

__global__ void gemm_shared_kernel(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                   const float *a, int lda, const float *b, int ldb, float beta,
                                   float *c, int ldc) {
    __shared__ float a_tile[TILE][TILE];     /* a_tile[i][p] = op(A)[row0 + i][k0 + p] */
    __shared__ float b_tile[TILE][TILE + 1]; /* b_tile[p][j] = op(B)[k0 + p][col0 + j]; +1 pad */
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        a_tile[ty][tx] = (row < m && k0 + tx < k) ? op_element(a, lda, trans_a, row, k0 + tx) : 0.0f;
        b_tile[ty][tx] = (k0 + ty < k && col < n) ? op_element(b, ldb, trans_b, k0 + ty, col) : 0.0f;
        __syncthreads();
        for (int p = 0; p < TILE; p++) acc += a_tile[ty][p] * b_tile[p][tx];
        __syncthreads();
    }
    if (row < m && col < n) write_c(c, ldc, row, col, acc, alpha, beta);
}

} // namespace

void gpu_gemm_shared(GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    dim3 threads(TILE, TILE);
    dim3 blocks(blocks_for(n, TILE), blocks_for(m, TILE));
    gemm_shared_kernel<<<blocks, threads, 0, stream>>>(trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                                       ldb, beta, c, ldc);
    CUDA_CHECK_LAUNCH();
}
