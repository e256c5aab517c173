/* Ladder rung 5, the FP32 GEMM of --impl tiled and fused: rung 4's warp tiles fed by a 3-stage
 * cp.async pipeline (the next tiles load while one is multiplied), block tiles chosen by size
 * (128×256 down to 32×32), split-K for small C summed in a thread block cluster's distributed
 * shared memory (one launch, no workspace, the same bits every run), the epilogue of
 * core/backend.h applied as C is stored. Shapes and layout: every rung's (gemm_ladder.h). The
 * design, drawn, and its measurements: docs/kernels.md, "Design notes: gemm_5_tiled.cu"; the
 * tile rules are measured at gpu_gemm_tiled below. */
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/gemm_tiled_parts.cuh"

namespace {

constexpr int PAD = 4;     /* floats after each shared row */
constexpr int MIN_SLICE = 32; /* split-K: the thinnest K slice worth a block */

/* A block tile of BM×BN, BK deep, STAGES tiles in flight (one multiplied, the others loading),
 * split among WARPS_M×WARPS_N warps; each warp's lanes form a 4×8 grid of 4×4 patches, repeated
 * over the warp tile (see gemm_4_warptiled.cu). */

template <int BM_, int BN_, int BK_, int STAGES_, int WARPS_M_, int WARPS_N_, int BLOCKS_PER_SM_>
struct tile_config {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int BLOCKS_PER_SM = BLOCKS_PER_SM_; /* __launch_bounds__: caps the registers */
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int LANES_M = 4, LANES_N = 8, TM = 4, TN = 4;
    static constexpr int REPEAT_M = WM / (LANES_M * TM), REPEAT_N = WN / (LANES_N * TN);
    static constexpr int A_LINE = BM + PAD, B_LINE = BN + PAD; /* floats per shared row */
    static constexpr int STAGE_FLOATS = BK * (A_LINE + B_LINE);
    static constexpr size_t SHARED_BYTES = STAGES * STAGE_FLOATS * sizeof(float);
    static_assert(REPEAT_M * LANES_M * TM == WM && REPEAT_N * LANES_N * TN == WN, "tiles must nest");
};
/* BK = 32 is faster than 16 at 4096³ (measured: 3% for 128×128, 4% for 128×256; 4 stages no
 * better); the 32×32 tile serves
 * products with little work per block (N = 10, K = 16 in the MLP), where a shallow step and
 * small patches per lane keep the one block's critical path short. */
using large_tile = tile_config<128, 128, 32, 3, 4, 2, 2>; /* warp tile 32×64, 8×8 per lane */
using small_tile = tile_config<64, 64, 32, 3, 2, 2, 3>;   /* warp tile 32×32, 8×4 per lane */
using narrow_tile = tile_config<32, 32, 16, 3, 2, 1, 8>;  /* warp tile 16×32, 4×4 per lane */
using wide_tile = tile_config<128, 256, 32, 3, 2, 4, 1>;  /* warp tile 64×64, 16×8 per lane */
/* small_tile in 16-deep steps, four in flight: for split-K where K's slices come out shallower
 * in steps of 16 than of 32 (layer 1's forward, K = 784 in 7 slices: 112 deep, against 128 in
 * steps of 32, 11.2 µs against 11.9 at batch 512 on an H200). */
using small_thin_tile = tile_config<64, 64, 16, 4, 2, 2, 3>;
/* 64×128 in 8 warps, 8×4 per lane: for products whose 64×64 tiles are fewer than the
 * multiprocessors but deep in K (layer 1's at batch 2048), in a few deep slices, one 8-warp block
 * per multiprocessor or two (gpu_gemm_tiled has the measurements). */
using medium_tile = tile_config<64, 128, 32, 3, 2, 4, 2>; /* warp tile 32×32, 8×4 per lane */

/* acc += a ⊗ b: the 4×4 outer product of a column piece of op(A) and a row piece of op(B),
 * column by column. Row by row, each accumulator's FMAs the same but issued in another order,
 * was 3-4% slower at 4096³ `NN` on an H100 (docs/kernels.md, rung 5): ptxas schedules and
 * places the operands in registers after the order they are written in. */
template <int TM, int TN>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], float4 a, float4 b) {
    const float av[TM] = {a.x, a.y, a.z, a.w}, bv[TN] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < TN; j++)
#pragma unroll
        for (int i = 0; i < TM; i++) acc[i][j] += av[i] * bv[j];
}

/* C (M×N) = epilogue(alpha · op(A) · op(B) + beta · C). Grid ceil(N/BN) × ceil(M/BM) × slices,
 * block z multiplying K slice z; with more than one slice, the grid's z blocks of a tile form
 * a cluster (1 × 1 × slices). CFG::SHARED_BYTES of dynamic shared memory. */
template <typename CFG, bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM)
gemm_tiled_kernel(int m, int n, int k, int k_per_split, float alpha, const float *__restrict__ a,
                  int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                  int ldc, gemm_epilogue epilogue, bool vector_a, bool vector_b) {
    constexpr int BM = CFG::BM, BN = CFG::BN, BK = CFG::BK, STAGES = CFG::STAGES, A_LINE = CFG::A_LINE, B_LINE = CFG::B_LINE;
    constexpr int LANES_M = CFG::LANES_M, LANES_N = CFG::LANES_N, TM = CFG::TM, TN = CFG::TN;
    constexpr int REPEAT_M = CFG::REPEAT_M, REPEAT_N = CFG::REPEAT_N;
    /* stage s: a_tile[kk][i] at shared + s·STAGE_FLOATS + kk·A_LINE + i, b_tile right after */
    extern __shared__ __align__(16) float shared[];
    wait_for_previous_kernel();
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int patch_row = (warp / CFG::WARPS_N) * CFG::WM + (lane / LANES_N) * TM;
    const int patch_col = (warp % CFG::WARPS_N) * CFG::WN + (lane % LANES_N) * TN;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        float *a_tile = shared + (step % STAGES) * CFG::STAGE_FLOATS, *b_tile = a_tile + BK * A_LINE;
        const int k0 = range.begin + step * BK;
        copy_tile<BK, BM, A_LINE, CFG::THREADS, !TRANS_A>(a_tile, a, lda, row0, k0, m, range.end, vector_a);
        copy_tile<BK, BN, B_LINE, CFG::THREADS, TRANS_B>(b_tile, b, ldb, col0, k0, n, range.end, vector_b);
    };
    /* one commit group per step, empty ones included, so "step t landed" is always "all but
     * the newest STAGES − 2 groups are done" */
#pragma unroll
    for (int step = 0; step < STAGES - 1; step++) {
        if (step < steps) start_copying(step);
        cp_async_commit();
    }

    float acc[REPEAT_M][REPEAT_N][TM][TN] = {};
    for (int step = 0; step < steps; step++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (step + STAGES - 1 < steps) start_copying(step + STAGES - 1);
        cp_async_commit();

        const float *a_tile = shared + (step % STAGES) * CFG::STAGE_FLOATS, *b_tile = a_tile + BK * A_LINE;
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 a_piece[REPEAT_M], b_piece[REPEAT_N];
#pragma unroll
            for (int rm = 0; rm < REPEAT_M; rm++)
                a_piece[rm] = *reinterpret_cast<const float4 *>(a_tile + kk * A_LINE + patch_row + rm * LANES_M * TM);
#pragma unroll
            for (int rn = 0; rn < REPEAT_N; rn++)
                b_piece[rn] = *reinterpret_cast<const float4 *>(b_tile + kk * B_LINE + patch_col + rn * LANES_N * TN);
#pragma unroll
            for (int rm = 0; rm < REPEAT_M; rm++)
#pragma unroll
                for (int rn = 0; rn < REPEAT_N; rn++) outer_product(acc[rm][rn], a_piece[rm], b_piece[rn]);
        }
    }

    const gemm_output out = output_to_c(c, ldc, alpha, beta, epilogue);
    if (gridDim.z == 1) {
        for_each_quad<LANES_M, LANES_N>(acc, patch_row, patch_col, [&](int row, int col, float4 quad) {
            store_quad(out, m, n, row0 + row, col0 + col, quad);
        });
        return;
    }
    static_assert(CFG::BM * CFG::BN <= CFG::STAGES * CFG::STAGE_FLOATS, "the partial tile fits in the stages");
    cp_async_wait<0>(); /* only empty groups are left, but the stages are about to be reused */
    __syncthreads();    /* every warp has finished reading the last stage */
    for_each_quad<LANES_M, LANES_N>(acc, patch_row, patch_col, [&](int row, int col, float4 quad) {
        *reinterpret_cast<float4 *>(shared + row * BN + col) = quad;
    });
    store_cluster_sum<CFG::BM, CFG::BN, CFG::THREADS>(shared, out, m, n, row0, col0);
}

/* Raises the kernel's dynamic shared memory limit (48 KB unless asked) once. */
template <typename CFG, bool TRANS_A, bool TRANS_B> void allow_shared_memory() {
    static bool done = false;
    if (done) return;
    CUDA_CHECK(cudaFuncSetAttribute(gemm_tiled_kernel<CFG, TRANS_A, TRANS_B>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)CFG::SHARED_BYTES));
    done = true;
}

/* The grid is ceil(N/BN) × ceil(M/BM) × slices, and with more than one slice a tile's blocks are
 * a cluster. */
template <typename CFG, bool TRANS_A, bool TRANS_B>
void launch_kernel(gemm_k_split split, const gemm_epilogue &epilogue, GPU_GEMM_ARGS) {
    allow_shared_memory<CFG, TRANS_A, TRANS_B>();
    const dim3 grid(blocks_for(n, CFG::BN), blocks_for(m, CFG::BM), split.splits);
    launch_dependent(gemm_tiled_kernel<CFG, TRANS_A, TRANS_B>, grid, CFG::THREADS,
                     CFG::SHARED_BYTES, stream, split.splits, m, n, k, split.k_per_split, alpha, a,
                     lda, b, ldb, beta, c, ldc, epilogue, vectors_aligned(a, lda),
                     vectors_aligned(b, ldb));
}

long tiles(int m, int n, int side) { return (long)blocks_for(m, side) * blocks_for(n, side); }
long wide_tiles(int m, int n) { return (long)blocks_for(m, wide_tile::BM) * blocks_for(n, wide_tile::BN); }

/* K cut into `forced_splits` slices, or (0) power_of_two_slices when the tiles leave
 * multiprocessors without a block; at most MAX_SLICES (a cluster), and one where the GPU has no
 * clusters. Slices are whole steps of CFG::BK. */
template <typename CFG> gemm_k_split split_for(int forced_splits, int m, int n, int k) {
    const long grid_tiles = (long)blocks_for(m, CFG::BM) * blocks_for(n, CFG::BN);
    const int sms = gemm_multiprocessor_count();
    long wanted = forced_splits > 0 ? forced_splits : grid_tiles >= sms ? 1 : power_of_two_slices(grid_tiles, sms);
    if (wanted > MAX_SLICES) wanted = MAX_SLICES;
    if (!clusters_available()) wanted = 1;
    return gemm_k_slices((int)wanted, k, CFG::BK, MIN_SLICE);
}

template <typename CFG>
void run(gemm_k_split split, const gemm_epilogue &epilogue, GPU_GEMM_ARGS) {
#define GEMM_TILED_LAUNCH(TA, TB)                                                                  \
    launch_kernel<CFG, TA, TB>(split, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, \
                               ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_TILED_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_TILED_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_TILED_LAUNCH(false, true);
    else GEMM_TILED_LAUNCH(true, true);
#undef GEMM_TILED_LAUNCH
}

void run_tile(int rows, int cols, int forced_splits, const gemm_epilogue *epilogue, GPU_GEMM_ARGS) {
    const gemm_epilogue e = epilogue ? *epilogue : gemm_epilogue{};
#define GEMM_TILED_ARGS stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    if (rows == 128 && cols == 256) {
        run<wide_tile>(split_for<wide_tile>(forced_splits, m, n, k), e, GEMM_TILED_ARGS);
    } else if (rows == 128) {
        run<large_tile>(split_for<large_tile>(forced_splits, m, n, k), e, GEMM_TILED_ARGS);
    } else if (rows == 64 && cols == 128) {
        run<medium_tile>(split_for<medium_tile>(forced_splits, m, n, k), e, GEMM_TILED_ARGS);
    } else if (rows == 64) { /* 16-deep steps where they make the slices shallower */
        const gemm_k_split deep = split_for<small_tile>(forced_splits, m, n, k);
        const gemm_k_split thin = split_for<small_thin_tile>(forced_splits, m, n, k);
        if (thin.k_per_split < deep.k_per_split) run<small_thin_tile>(thin, e, GEMM_TILED_ARGS);
        else run<small_tile>(deep, e, GEMM_TILED_ARGS);
    } else {
        run<narrow_tile>(split_for<narrow_tile>(forced_splits, m, n, k), e, GEMM_TILED_ARGS);
    }
#undef GEMM_TILED_ARGS
}

/* The medium tile's K slices: the most (a power of two, at most MAX_SLICES) that keep every slice
 * at least MEDIUM_MIN_SLICE deep and the grid within two blocks per multiprocessor; 0 where that
 * grid would leave more than a tenth of the multiprocessors without a block. */
constexpr int MEDIUM_MIN_SLICE = 256;
int medium_tile_slices(int m, int n, int k, int sms) {
    const long grid_tiles = (long)blocks_for(m, medium_tile::BM) * blocks_for(n, medium_tile::BN);
    long slices = power_of_two_slices(grid_tiles, sms);
    while (slices > 1 && k / slices < MEDIUM_MIN_SLICE) slices /= 2;
    return 10 * grid_tiles * slices >= 9L * sms ? (int)slices : 0;
}

} // namespace

bool gpu_gemm_tiled_has_tile(int rows, int cols) {
    return (rows == cols && (rows == 32 || rows == 64 || rows == 128)) || (rows == 64 && cols == 128) ||
           (rows == 128 && cols == 256);
}

void gpu_gemm_tiled_with_plan(int tile_rows, int tile_cols, int splits, GPU_GEMM_ARGS,
                                  const gemm_epilogue *epilogue) {
    if (m == 0 || n == 0) return;
    if (!gpu_gemm_tiled_has_tile(tile_rows, tile_cols)) {
        std::fprintf(stderr, "gpu_gemm_tiled_with_plan: no %d×%d tile (32×32, 64×64, 64×128, "
                             "128×128 or 128×256)\n", tile_rows, tile_cols);
        std::exit(1);
    }
    run_tile(tile_rows, tile_cols, splits > 1 ? splits : 1, epilogue, stream, trans_a, trans_b, m, n, k,
             alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The largest tile that still gives every multiprocessor a block, 128×256, 128×128 or 64×64;
 * failing that 64×64 with split-K, or 32×32 (16 deep) when M or N is under 64 or K under 32,
 * where a 64-wide or 32-deep tile would be mostly padding. Three exceptions, measured on an H200
 * (132 multiprocessors; mlp_bench --plan, tools/device_run.sh plans, and graphs of back-to-back
 * GEMMs, 2026-11-24):
 * - Fewer 64×64 tiles than multiprocessors, but K deep enough for 64×128 tiles in slices of 256
 *   or more to give nine tenths of them a block (medium_tile_slices): those. Layer 1 at batch
 *   2048: the forward product (2048×256×784) 27.2 µs in 2 slices against 30.0 for 64×64
 *   unsplit; the weight gradient (784×256×2048) 30.2 µs in 8 slices against 32.9 for 64×64 in 4
 *   (cuBLAS: 24.8 and 26.0). Shallower slices lose: 2048×256×784 in 4 took 40.5 µs.
 * - 64×64 tiles for three quarters of the multiprocessors or more: no split-K. The sum costs
 *   as much as the idle multiprocessors.
 * - K too short for more than 2 slices, and enough 32×32 tiles to go round: those, unsplit
 *   (784×256×64, layer 1's weight gradient at batch 64: 8.4 µs against 10.3 in 2 slices). */
void gpu_gemm_tiled(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    if (m == 0 || n == 0) return;
    const int sms = gemm_multiprocessor_count();
    const bool narrow = m < 64 || n < 64 || k < 32;
    int rows, cols, splits = 0; /* 0: as many K slices as the grid needs */
    const int medium_slices = !narrow && tiles(m, n, 64) < sms ? medium_tile_slices(m, n, k, sms) : 0;
    if (medium_slices > 0) rows = 64, cols = 128, splits = medium_slices;
    else if (wide_tiles(m, n) >= sms) rows = 128, cols = 256;
    else if (tiles(m, n, 128) >= sms) rows = cols = 128;
    else if (!narrow && 4 * tiles(m, n, 64) >= 3L * sms) rows = cols = 64, splits = 1;
    else if (k < 3 * MIN_SLICE && tiles(m, n, 32) >= sms) rows = cols = 32, splits = 1;
    else rows = cols = narrow ? 32 : 64;
    run_tile(rows, cols, splits, epilogue, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
