/* Ladder rung 7: tensor cores in BF16, FP32 accumulate (after gemm_6_tf32_mma.cu).
 *
 * BF16 keeps FP32's 8-bit exponent and 7 bits of mantissa: half the bytes of TF32's FP32
 * storage to move, and the tensor cores do twice as many BF16 multiply-adds per cycle. The
 * caller rounds A and B to BF16 once (gpu_round_to_bf16) and keeps them so; the products and
 * sums stay FP32, C is FP32. mma.sync m16n8k16 multiplies, and ldmatrix loads its fragments
 * from the shared-memory tiles: plain where a tile's lines run along K (A not transposed, B
 * transposed), .trans where they run along M or N (mma_sync.cuh). One ldmatrix.x4 fetches a
 * whole A fragment (16×16) or the B fragments of two mma tiles.
 *
 * Structure as in gemm_6_tf32_mma.cu: block tile 128×128, 3 cp.async stages, 4 warps as 2×2
 * with 64×64 warp tiles (4×8 mma tiles); BK = 64, the same bytes per stage as TF32's 32. Per
 * 16-deep K step a warp issues 4 + 4 ldmatrix.x4 and 32 mma. The rows of the tiles are padded by
 * 8 BF16 (16 bytes), so that the 8 rows one ldmatrix phase reads fall in 8 different 16-byte
 * bank groups: rows of 72 BF16 are 144 bytes apart, rows of 136 are 272 (both 16 mod 128).
 *
 * Small C: split-K (gemm_split_k.cuh), as in the other rungs.
 *
 * Shapes: op(A) is M×K, op(B) is K×N, C is M×N, all row-major; A (BF16) is stored M×K (K×M when
 * transposed), B (BF16) K×N (N×K when transposed), C FP32. Any M, N, K and strides: chunks of
 * 8 BF16 that cross the edge or are not 16-byte aligned are copied element by element. */
#include <cstdint>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/mma_sync.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int BM = 128, BN = 128, BK = 64; /* block tile and K step */
constexpr int WARPS_M = 2, WARPS_N = 2, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N; /* warp tile 64×64 */
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 16;
constexpr int TILES_M = WM / MMA_M, TILES_N = WN / MMA_N; /* mma tiles per warp: 4×8 */
static_assert(TILES_N % 2 == 0, "B's fragments come two tiles at a time");
constexpr int STAGES = 3;
constexpr int MIN_SLICE = 64; /* split-K: the thinnest K slice worth a block */

/* An operand's tile in shared memory, X(i, kk) for i < ROWS, kk < BK, where X is op(A) (i: a
 * row of C) or op(B)ᵀ (i: a column of C), kept in the layout it has in global memory: lines
 * along K (K_CONTIGUOUS: X(i, kk) at i·LINE + kk) or along i (kk·LINE + i). */
template <int ROWS, bool K_CONTIGUOUS_> struct operand_tile {
    static constexpr bool K_CONTIGUOUS = K_CONTIGUOUS_;
    static constexpr int LINE = K_CONTIGUOUS ? BK + 8 : ROWS + 8; /* BF16, padding included */
    static constexpr int ELEMENTS = (K_CONTIGUOUS ? ROWS : BK) * LINE;

    __device__ static int at(int i, int kk) { return K_CONTIGUOUS ? i * LINE + kk : kk * LINE + i; }

    __device__ static void start_copy(bf16 *tile, const bf16 *x, int ld, int i0, int k0, int i_end,
                                      int k_end, bool vectors) {
        if (K_CONTIGUOUS)
            copy_tile_async<bf16, ROWS, BK, LINE, THREADS>(tile, x + (size_t)i0 * ld + k0, ld, i0, k0,
                                                           i_end, k_end, vectors);
        else
            copy_tile_async<bf16, BK, ROWS, LINE, THREADS>(tile, x + (size_t)k0 * ld + i0, ld, k0, i0,
                                                           k_end, i_end, vectors);
    }
};

/* C (M×N) = alpha · op(A) · op(B) + beta · C, or with partials != nullptr the raw product of
 * K slice blockIdx.z into plane z of partials. Grid ceil(N/BN) × ceil(M/BM) × slices,
 * THREADS threads, shared_bytes() of dynamic shared memory. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS)
gemm_bf16_kernel(int m, int n, int k, int k_per_split, float alpha, const bf16 *__restrict__ a,
                 int lda, const bf16 *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                 int ldc, float *__restrict__ partials, bool vector_a, bool vector_b) {
    using a_tile = operand_tile<BM, !TRANS_A>;
    using b_tile = operand_tile<BN, TRANS_B>;
    constexpr int STAGE_ELEMENTS = a_tile::ELEMENTS + b_tile::ELEMENTS;
    extern __shared__ __align__(16) bf16 shared[]; /* STAGES × (A tile, B tile) */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        bf16 *stage = shared + (step % STAGES) * STAGE_ELEMENTS;
        const int k0 = range.begin + step * BK;
        a_tile::start_copy(stage, a, lda, row0, k0, m, range.end, vector_a);
        b_tile::start_copy(stage + a_tile::ELEMENTS, b, ldb, col0, k0, n, range.end, vector_b);
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

        const bf16 *as = shared + (step % STAGES) * STAGE_ELEMENTS, *bs = as + a_tile::ELEMENTS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            uint32_t af[TILES_M][4], bf[TILES_N][2];
#pragma unroll
            for (int i = 0; i < TILES_M; i++) bf16_a_fragment<a_tile>(as, warp_row + i * MMA_M, kk, af[i]);
#pragma unroll
            for (int j = 0; j < TILES_N; j += 2)
                bf16_b_fragments<b_tile>(bs, warp_col + j * MMA_N, kk, reinterpret_cast<uint32_t (&)[2][2]>(bf[j]));
#pragma unroll
            for (int i = 0; i < TILES_M; i++)
#pragma unroll
                for (int j = 0; j < TILES_N; j++) mma_bf16(acc[i][j], af[i], bf[j]);
        }
    }

    const gemm_output out = block_output(c, ldc, alpha, beta, partials, m, n);
    const int g = lane / 4, t = lane % 4;
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
    return STAGES * (operand_tile<BM, !TRANS_A>::ELEMENTS + operand_tile<BN, TRANS_B>::ELEMENTS) * sizeof(bf16);
}

template <bool TRANS_A, bool TRANS_B> void launch_kernel(gemm_k_split split, float *partials, GPU_GEMM_BF16_ARGS) {
    constexpr size_t bytes = shared_bytes<TRANS_A, TRANS_B>();
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_kernel<TRANS_A, TRANS_B>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        allowed = true;
    }
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), split.splits);
    gemm_bf16_kernel<TRANS_A, TRANS_B><<<blocks, THREADS, bytes, stream>>>(
        m, n, k, split.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, partials,
        vectors_aligned(a, lda), vectors_aligned(b, ldb));
    CUDA_CHECK_LAUNCH();
}

void run(gemm_k_split split, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    float *partials = split.splits > 1 ? workspace.data : nullptr;
#define GEMM_BF16_LAUNCH(TA, TB)                                                                   \
    launch_kernel<TA, TB>(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b,    \
                          ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_BF16_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_BF16_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_BF16_LAUNCH(false, true);
    else GEMM_BF16_LAUNCH(true, true);
#undef GEMM_BF16_LAUNCH
    if (partials) gemm_sum_slices(stream, partials, split, m, n, alpha, beta, c, ldc);
}

} // namespace

void gpu_gemm_bf16_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const gemm_k_split split = gemm_slices(splits, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_bf16_mma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const long tiles = (long)blocks_for(m, BM) * blocks_for(n, BN);
    const gemm_k_split split = gemm_choose_slices(tiles, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
