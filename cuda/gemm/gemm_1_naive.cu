/* The textbook GEMM: one thread per element of C, computing a dot product of a row of op(A)
 * and a column of op(B) straight from global memory.
 *
 * C is M×N; the grid is ceil(N/16) × ceil(M/16) blocks of 16×16 threads; threadIdx.x runs
 * along a row of C, so within a warp the reads of B (when not transposed) and the writes of C
 * are consecutive addresses (coalesced) and the element of A is the same (a broadcast).
 * Every element of A is read N times and of B M times from memory (or cache): that is why it
 * is slow, and what the tiled kernels fix. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"

namespace {

constexpr int BLOCK_SIDE = 16;

__global__ void gemm_naive_kernel(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, const float *b, int ldb, float beta,
                                  float *c, int ldc, gemm_epilogue epilogue) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++)
        acc += op_element(a, lda, trans_a, row, p) * op_element(b, ldb, trans_b, p, col);
    write_c(c, ldc, row, col, acc, alpha, beta, epilogue);
}

} // namespace

void gpu_gemm_naive(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    if (m == 0 || n == 0) return;
    dim3 threads(BLOCK_SIDE, BLOCK_SIDE);
    dim3 blocks(blocks_for(n, BLOCK_SIDE), blocks_for(m, BLOCK_SIDE));
    gemm_naive_kernel<<<blocks, threads, 0, stream>>>(trans_a, trans_b, m, n, k, alpha, a, lda, b,
                                                      ldb, beta, c, ldc,
                                                      epilogue ? *epilogue : gemm_epilogue{});
    CUDA_CHECK_LAUNCH();
}
