/* Ladder rung 10: rung 5 (gemm_5_tiled.cu) on tensor cores, the TF32 and BF16 GEMM of
 * --impl tiled and fused.
 *
 * What it keeps from rung 5: A and B read as FP32 from memory into shared memory by the same
 * 3-stage cp.async pipeline, K-major (tile[kk][i]) whatever their layout; split-K through a
 * thread block cluster's distributed shared memory (no workspace, no second kernel); the
 * epilogue (bias, ReLU, ReLU mask) applied as C is stored; the launch that overlaps the
 * previous kernel's tail. So a step in TF32 or BF16 has the launches of the FP32 step.
 * What changes: each warp's tile is a grid of 16×8 tiles of mma.sync.m16n8k8 (TF32 inputs,
 * FP32 accumulate), and the factors are rounded on their way from shared memory into the
 * registers the tensor cores read: to TF32 (cvt.rna: 10 mantissa bits, to nearest, ties away)
 * or to BF16 (7 bits, to nearest, ties to even; a BF16 value is exact in TF32, so the tensor
 * cores multiply exactly the BF16 factors). No pass over A or B before the product.
 *
 * Fragments of m16n8k8 (g = lane / 4, t = lane % 4): A (16×8) a0 = (g, t), a1 = (g + 8, t),
 * a2 = (g, t + 4), a3 = (g + 8, t + 4); B (8×8) b0 = (t, g), b1 = (t + 4, g); C (16×8)
 * c0, c1 = (g, 2t .. 2t + 1), c2, c3 = (g + 8, 2t .. 2t + 1). Shapes and layout: those of every
 * rung (gemm_ladder.h). docs/kernels.md has the measurements. */
#include <cstdio>
#include <cstdlib>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_tiled_parts.cuh"
#include "cuda/kernels/dependent_launch.cuh"

namespace {

constexpr int PAD = 4;        /* floats after each shared row, as in rung 5 */
constexpr int MIN_SLICE = 32; /* split-K: the thinnest K slice worth a block */
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 8;

/* A block tile of BM×BN, BK deep, STAGES tiles in flight, WARPS_M×WARPS_N warps, each on a
 * (BM/WARPS_M)×(BN/WARPS_N) warp tile of m16n8 tiles. */
template <int BM_, int BN_, int BK_, int STAGES_, int WARPS_M_, int WARPS_N_, int BLOCKS_PER_SM_>
struct tensor_tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, BLOCKS_PER_SM = BLOCKS_PER_SM_;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int TILES_M = WM / MMA_M, TILES_N = WN / MMA_N;
    static constexpr int A_LINE = BM + PAD, B_LINE = BN + PAD;
    static constexpr int STAGE_FLOATS = BK * (A_LINE + B_LINE);
    static constexpr size_t SHARED_BYTES = STAGES * STAGE_FLOATS * sizeof(float);
    static_assert(TILES_M * MMA_M == WM && TILES_N * MMA_N == WN && BK % MMA_K == 0, "tiles must nest");
    static_assert(BM * BN <= STAGES * STAGE_FLOATS, "the partial tile fits in the stages");
};
using large_tile = tensor_tile<128, 128, 32, 3, 2, 4, 1>; /* warp tile 64×32: 4×4 mma tiles */
using small_tile = tensor_tile<64, 64, 32, 3, 2, 2, 3>;   /* warp tile 32×32: 2×4 */
using narrow_tile = tensor_tile<32, 32, 16, 3, 2, 1, 8>;  /* warp tile 16×32: 1×4 */

enum factor_rounding { ROUND_TF32, ROUND_BF16 };

/* x as the tensor cores read it: a TF32 operand (an FP32 register whose low 13 bits are
 * ignored), rounded to TF32 or to BF16. */
template <factor_rounding ROUND> __device__ __forceinline__ uint32_t factor(float x) {
    if constexpr (ROUND == ROUND_TF32) {
        uint32_t bits;
        asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
        return bits;
    } else {
        return __float_as_uint(__bfloat162float(__float2bfloat16_rn(x)));
    }
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* C (M×N) = epilogue(alpha · op(A) · op(B) + beta · C). Grid ceil(N/BN) × ceil(M/BM) × slices,
 * block z multiplying K slice z; with more than one slice, a tile's blocks form a cluster
 * (1 × 1 × slices). CFG::SHARED_BYTES of dynamic shared memory. */
template <typename CFG, bool TRANS_A, bool TRANS_B, factor_rounding ROUND>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM)
gemm_tensor_kernel(int m, int n, int k, int k_per_split, float alpha, const float *__restrict__ a,
                   int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                   int ldc, gemm_epilogue epilogue, bool vector_a, bool vector_b) {
    constexpr int BM = CFG::BM, BN = CFG::BN, BK = CFG::BK, STAGES = CFG::STAGES;
    constexpr int A_LINE = CFG::A_LINE, B_LINE = CFG::B_LINE;
    extern __shared__ __align__(16) float shared[]; /* stage s: a_tile[kk][i], then b_tile[kk][j] */
    wait_for_previous_kernel();
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int warp_row = (warp / CFG::WARPS_N) * CFG::WM, warp_col = (warp % CFG::WARPS_N) * CFG::WN;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        float *a_tile = shared + (step % STAGES) * CFG::STAGE_FLOATS, *b_tile = a_tile + BK * A_LINE;
        const int k0 = range.begin + step * BK;
        copy_tile<BK, BM, A_LINE, CFG::THREADS, !TRANS_A>(a_tile, a, lda, row0, k0, m, range.end, vector_a);
        copy_tile<BK, BN, B_LINE, CFG::THREADS, TRANS_B>(b_tile, b, ldb, col0, k0, n, range.end, vector_b);
    };
#pragma unroll
    for (int step = 0; step < STAGES - 1; step++) {
        if (step < steps) start_copying(step);
        cp_async_commit();
    }

    float acc[CFG::TILES_M][CFG::TILES_N][4] = {};
    for (int step = 0; step < steps; step++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (step + STAGES - 1 < steps) start_copying(step + STAGES - 1);
        cp_async_commit();

        const float *a_tile = shared + (step % STAGES) * CFG::STAGE_FLOATS, *b_tile = a_tile + BK * A_LINE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            const float *a_low = a_tile + (kk + t) * A_LINE, *a_high = a_low + 4 * A_LINE;
            const float *b_low = b_tile + (kk + t) * B_LINE, *b_high = b_low + 4 * B_LINE;
            uint32_t bf[CFG::TILES_N][2];
#pragma unroll
            for (int j = 0; j < CFG::TILES_N; j++) {
                const int col = warp_col + j * MMA_N + g;
                bf[j][0] = factor<ROUND>(b_low[col]);
                bf[j][1] = factor<ROUND>(b_high[col]);
            }
#pragma unroll
            for (int i = 0; i < CFG::TILES_M; i++) {
                const int row = warp_row + i * MMA_M + g;
                const uint32_t af[4] = {factor<ROUND>(a_low[row]), factor<ROUND>(a_low[row + 8]),
                                        factor<ROUND>(a_high[row]), factor<ROUND>(a_high[row + 8])};
#pragma unroll
                for (int j = 0; j < CFG::TILES_N; j++) mma_tf32(acc[i][j], af, bf[j]);
            }
        }
    }

    const gemm_output out = output_to_c(c, ldc, alpha, beta, epilogue);
    const bool split = gridDim.z > 1;
    if (split) {
        cp_async_wait<0>(); /* only empty groups are left, but the stages are about to be reused */
        __syncthreads();    /* every warp has finished reading the last stage */
    }
#pragma unroll
    for (int i = 0; i < CFG::TILES_M; i++)
#pragma unroll
        for (int j = 0; j < CFG::TILES_N; j++) {
            const int row = warp_row + i * MMA_M + g, col = warp_col + j * MMA_N + 2 * t;
            const float *d = acc[i][j];
            if (split) { /* the partial tile, row-major, where the cluster's sum reads it */
                *reinterpret_cast<float2 *>(shared + row * BN + col) = make_float2(d[0], d[1]);
                *reinterpret_cast<float2 *>(shared + (row + 8) * BN + col) = make_float2(d[2], d[3]);
            } else {
                store_pair(out, m, n, row0 + row, col0 + col, d[0], d[1]);
                store_pair(out, m, n, row0 + row + 8, col0 + col, d[2], d[3]);
            }
        }
    if (split) store_cluster_sum<BM, BN, CFG::THREADS>(shared, out, m, n, row0, col0);
}

template <typename CFG, bool TRANS_A, bool TRANS_B, factor_rounding ROUND>
void launch_kernel(gemm_k_split split, const gemm_epilogue &epilogue, GPU_GEMM_ARGS) {
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_tensor_kernel<CFG, TRANS_A, TRANS_B, ROUND>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)CFG::SHARED_BYTES));
        allowed = true;
    }
    const dim3 grid(blocks_for(n, CFG::BN), blocks_for(m, CFG::BM), split.splits);
    launch_dependent(gemm_tensor_kernel<CFG, TRANS_A, TRANS_B, ROUND>, grid, CFG::THREADS,
                     CFG::SHARED_BYTES, stream, split.splits, m, n, k, split.k_per_split, alpha, a,
                     lda, b, ldb, beta, c, ldc, epilogue, float4_aligned(a, lda),
                     float4_aligned(b, ldb));
}

/* K cut into `forced` slices, or (0) as the grid wants them (power_of_two_slices); one where
 * the GPU has no clusters. */
template <typename CFG> gemm_k_split split_for(int forced, int m, int n, int k) {
    const long grid_tiles = (long)blocks_for(m, CFG::BM) * blocks_for(n, CFG::BN);
    const int sms = gemm_multiprocessor_count();
    long wanted = forced > 0 ? forced : grid_tiles >= sms ? 1 : power_of_two_slices(grid_tiles, sms);
    if (wanted > MAX_SLICES) wanted = MAX_SLICES;
    if (!clusters_available()) wanted = 1;
    return gemm_k_slices((int)wanted, k, CFG::BK, MIN_SLICE);
}

template <typename CFG, factor_rounding ROUND>
void run(int forced_splits, const gemm_epilogue &epilogue, GPU_GEMM_ARGS) {
    const gemm_k_split split = split_for<CFG>(forced_splits, m, n, k);
#define GEMM_TENSOR_LAUNCH(TA, TB)                                                                 \
    launch_kernel<CFG, TA, TB, ROUND>(split, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, \
                                      lda, b, ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_TENSOR_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_TENSOR_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_TENSOR_LAUNCH(false, true);
    else GEMM_TENSOR_LAUNCH(true, true);
#undef GEMM_TENSOR_LAUNCH
}

template <factor_rounding ROUND>
void run_tile(int tile, int forced_splits, const gemm_epilogue *epilogue, GPU_GEMM_ARGS) {
    const gemm_epilogue e = epilogue ? *epilogue : gemm_epilogue{};
#define GEMM_TENSOR_ARGS stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    if (tile == 128) run<large_tile, ROUND>(forced_splits, e, GEMM_TENSOR_ARGS);
    else if (tile == 64) run<small_tile, ROUND>(forced_splits, e, GEMM_TENSOR_ARGS);
    else run<narrow_tile, ROUND>(forced_splits, e, GEMM_TENSOR_ARGS);
#undef GEMM_TENSOR_ARGS
}

/* The tile rung 5 would take, in its simplest form: 128×128 where those give every
 * multiprocessor a block; else 64×64, or 32×32 where M or N is under 64 or K under 32, in as
 * many K slices as the grid wants. */
int chosen_tile(int m, int n, int k) {
    const long large = (long)blocks_for(m, 128) * blocks_for(n, 128);
    if (large >= gemm_multiprocessor_count()) return 128;
    return m < 64 || n < 64 || k < 32 ? 32 : 64;
}

bool has_tile(int rows, int cols) { return rows == cols && (rows == 32 || rows == 64 || rows == 128); }

template <factor_rounding ROUND>
void gemm(int tile, int splits, const gemm_epilogue *epilogue, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    run_tile<ROUND>(tile ? tile : chosen_tile(m, n, k), splits, epilogue, stream, trans_a, trans_b,
                    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void refuse_plan(const char *name, int rows, int cols) {
    std::fprintf(stderr, "%s: no %d×%d tile (32×32, 64×64 or 128×128)\n", name, rows, cols);
    std::exit(1);
}

} // namespace

bool gpu_gemm_tiled_tensor_has_tile(int rows, int cols) { return has_tile(rows, cols); }

void gpu_gemm_tiled_tf32(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_TF32>(0, 0, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_tiled_bf16(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_BF16>(0, 0, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_tiled_tensor_with_plan(gemm_precision precision, int tile_rows, int tile_cols,
                                     int splits, GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    if (tile_rows && !has_tile(tile_rows, tile_cols)) refuse_plan("gpu_gemm_tiled_tensor_with_plan", tile_rows, tile_cols);
    if (precision == PRECISION_BF16)
        gemm<ROUND_BF16>(tile_rows, splits, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        gemm<ROUND_TF32>(tile_rows, splits, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
