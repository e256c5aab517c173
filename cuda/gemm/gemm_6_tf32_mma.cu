/* Ladder rung 6: tensor cores, in TF32 (after gemm_5_tiled.cu, which uses the FP32 units).
 *
 * A Hopper multiprocessor does 128 FP32 multiply-adds per cycle on its CUDA cores and several
 * times that on its tensor cores, which multiply small matrices in one instruction per warp.
 * mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 computes D (16×8) = A (16×8) · B (8×8)
 * + C, FP32 accumulators, with A and B in TF32: FP32's 8-bit exponent and a 10-bit mantissa
 * (the inputs are rounded here, to nearest with cvt.rna.tf32.f32, so each product is within
 * about 2^-10 of the FP32 one; the sums stay FP32).
 *
 * The operands of one mma are spread over the warp's 32 lanes in a fixed pattern (the
 * fragments, mma_sync.cuh): lane (g, t) = (lane / 4, lane % 4) holds A[g][t], A[g + 8][t],
 * A[g][t + 4], A[g + 8][t + 4] and B[t][g], B[t + 4][g]. So each lane reads its own elements of
 * the tiles in shared memory with ordinary loads.
 *
 * The kernel is gemm_5_tiled.cu's structure with the tensor cores doing the arithmetic:
 *   block tile 128×128 of C, BK = 32, 3 cp.async stages; 4 warps as 2×2, each a 64×64 warp
 *   tile = 4×8 mma tiles of 16×8, so per 8-deep K step a warp loads 4 A fragments and 8 B
 *   fragments and issues 32 mma.
 * The tiles sit in shared memory as they are in global memory, so every copy is 16 bytes
 * (no transposing); a lane reads A[row][k] from a tile stored row-major or k-major alike.
 * The padding of the rows (4 floats on rows along K, 8 on rows along M or N) puts the 32
 * lanes' reads of one fragment register in 32 different banks in both layouts:
 *   rows along K, 36 floats apart:    bank = (36·g + t) % 32 = 4g + t
 *   rows along M or N, 136 apart:     bank = (136·t + g) % 32 = 8t + g
 *
 * Small C: split-K (gemm_split_k.cuh), as gemm_5_tiled.cu does.
 *
 * Shapes: op(A) is M×K, op(B) is K×N, C is M×N, all row-major FP32; A is stored M×K (K×M when
 * transposed), B K×N (N×K when transposed). Any M, N, K and strides: chunks that cross the edge
 * of the matrix or are not 16-byte aligned are copied element by element. */
#include <cstdint>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/mma_sync.cuh"

namespace {

constexpr int BM = 128, BN = 128, BK = 32; /* block tile and K step */
constexpr int WARPS_M = 2, WARPS_N = 2, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N; /* warp tile 64×64 */
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 8;
constexpr int TILES_M = WM / MMA_M, TILES_N = WN / MMA_N; /* mma tiles per warp: 4×8 */
constexpr int STAGES = 3;
constexpr int MIN_SLICE = 64; /* split-K: the thinnest K slice worth a block */

/* An operand's tile in shared memory, X(i, kk) for i < ROWS, kk < BK, where X is op(A) (i: a
 * row of C) or op(B)ᵀ (i: a column of C), kept in the layout it has in global memory: lines
 * along K (K_CONTIGUOUS: X(i, kk) at i·LINE + kk) or along i (kk·LINE + i). */
template <int ROWS, bool K_CONTIGUOUS> struct operand_tile {
    static constexpr int LINE = K_CONTIGUOUS ? BK + 4 : ROWS + 8; /* floats, padding included */
    static constexpr int FLOATS = (K_CONTIGUOUS ? ROWS : BK) * LINE;

    __device__ static float at(const float *tile, int i, int kk) {
        return K_CONTIGUOUS ? tile[i * LINE + kk] : tile[kk * LINE + i];
    }

    /* Starts copying the tile at (i0, k0) of the matrix x (element (i, k) at x[i·ld + k] or
     * x[k·ld + i]); zeros past i_end and k_end. */
    __device__ static void start_copy(float *tile, const float *x, int ld, int i0, int k0, int i_end,
                                      int k_end, bool vectors) {
        if (K_CONTIGUOUS)
            copy_tile_async<float, ROWS, BK, LINE, THREADS>(tile, x + (size_t)i0 * ld + k0, ld, i0,
                                                            k0, i_end, k_end, vectors);
        else
            copy_tile_async<float, BK, ROWS, LINE, THREADS>(tile, x + (size_t)k0 * ld + i0, ld, k0,
                                                            i0, k_end, i_end, vectors);
    }
};

/* C (M×N) = alpha · op(A) · op(B) + beta · C, or with partials != nullptr the raw product of
 * K slice blockIdx.z into plane z of partials. Grid ceil(N/BN) × ceil(M/BM) × slices,
 * THREADS threads, shared_bytes() of dynamic shared memory. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS)
gemm_tf32_kernel(int m, int n, int k, int k_per_split, float alpha, const float *__restrict__ a,
                 int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                 int ldc, float *__restrict__ partials, bool vector_a, bool vector_b) {
    using a_tile = operand_tile<BM, !TRANS_A>;
    using b_tile = operand_tile<BN, TRANS_B>;
    constexpr int STAGE_FLOATS = a_tile::FLOATS + b_tile::FLOATS;
    extern __shared__ __align__(16) float shared[]; /* STAGES × (A tile, B tile) */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const int g = lane / 4, t = lane % 4; /* the fragment coordinates */
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        float *stage = shared + (step % STAGES) * STAGE_FLOATS;
        const int k0 = range.begin + step * BK;
        a_tile::start_copy(stage, a, lda, row0, k0, m, range.end, vector_a);
        b_tile::start_copy(stage + a_tile::FLOATS, b, ldb, col0, k0, n, range.end, vector_b);
    };
    /* the pipeline of gemm_5_tiled.cu: one commit group per step, empty ones included */
#pragma unroll
    for (int step = 0; step < STAGES - 1; step++) {
        if (step < steps) start_copying(step);
        cp_async_commit();
    }

    float acc[TILES_M][TILES_N][4] = {};
    for (int step = 0; step < steps; step++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (step + STAGES - 1 < steps) start_copying(step + STAGES - 1);
        cp_async_commit();

        const float *as = shared + (step % STAGES) * STAGE_FLOATS, *bs = as + a_tile::FLOATS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            uint32_t bf[TILES_N][2]; /* the warp's B fragments, then one A fragment at a time */
#pragma unroll
            for (int j = 0; j < TILES_N; j++) {
                const int col = warp_col + j * MMA_N + g;
                bf[j][0] = tf32_bits(b_tile::at(bs, col, kk + t));
                bf[j][1] = tf32_bits(b_tile::at(bs, col, kk + t + 4));
            }
#pragma unroll
            for (int i = 0; i < TILES_M; i++) {
                const int row = warp_row + i * MMA_M + g;
                const uint32_t af[4] = {tf32_bits(a_tile::at(as, row, kk + t)),
                                        tf32_bits(a_tile::at(as, row + 8, kk + t)),
                                        tf32_bits(a_tile::at(as, row, kk + t + 4)),
                                        tf32_bits(a_tile::at(as, row + 8, kk + t + 4))};
#pragma unroll
                for (int j = 0; j < TILES_N; j++) mma_tf32(acc[i][j], af, bf[j]);
            }
        }
    }

    const gemm_output out = block_output(c, ldc, alpha, beta, partials, m, n);
#pragma unroll
    for (int i = 0; i < TILES_M; i++)
#pragma unroll
        for (int j = 0; j < TILES_N; j++) {
            const int row = row0 + warp_row + i * MMA_M + g, col = col0 + warp_col + j * MMA_N + 2 * t;
            store_pair(out, m, n, row, col, acc[i][j][0], acc[i][j][1]);
            store_pair(out, m, n, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

template <bool TRANS_A, bool TRANS_B> constexpr size_t shared_bytes() {
    return STAGES * (operand_tile<BM, !TRANS_A>::FLOATS + operand_tile<BN, TRANS_B>::FLOATS) * sizeof(float);
}

template <bool TRANS_A, bool TRANS_B> void launch_kernel(gemm_k_split split, float *partials, GPU_GEMM_ARGS) {
    constexpr size_t bytes = shared_bytes<TRANS_A, TRANS_B>();
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_tf32_kernel<TRANS_A, TRANS_B>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        allowed = true;
    }
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), split.splits);
    gemm_tf32_kernel<TRANS_A, TRANS_B><<<blocks, THREADS, bytes, stream>>>(
        m, n, k, split.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, partials,
        vectors_aligned(a, lda), vectors_aligned(b, ldb));
    CUDA_CHECK_LAUNCH();
}

void run(gemm_k_split split, gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    float *partials = split.splits > 1 ? workspace.data : nullptr;
#define GEMM_TF32_LAUNCH(TA, TB)                                                                   \
    launch_kernel<TA, TB>(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b,    \
                          ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_TF32_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_TF32_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_TF32_LAUNCH(false, true);
    else GEMM_TF32_LAUNCH(true, true);
#undef GEMM_TF32_LAUNCH
    if (partials) gemm_sum_slices(stream, partials, split, m, n, alpha, beta, c, ldc);
}

} // namespace

void gpu_gemm_tf32_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    const gemm_k_split split = gemm_slices(splits, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_tf32_mma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    const long tiles = (long)blocks_for(m, BM) * blocks_for(n, BN);
    const gemm_k_split split = gemm_choose_slices(tiles, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
