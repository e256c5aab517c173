/* Ladder rung 10: rung 5 (gemm_5_tiled.cu) on tensor cores, the TF32 and BF16 GEMM of
 * --impl tiled and fused.
 *
 * What it keeps from rung 5: A and B read from memory (as FP32, or as 16-bit copies: below) into
 * shared memory by a cp.async pipeline (3 stages, 4 for the 64×64 tile); split-K through a thread block cluster's
 * distributed shared memory (no workspace, no second kernel); the epilogue (bias, ReLU, ReLU
 * mask) applied as C is stored; the launch that overlaps the previous kernel's tail. So a step
 * in TF32 or BF16 has the launches of the FP32 step.
 * What changes:
 * - Each operand's tile keeps its layout in memory (operand_tile): a K-contiguous operand
 *   (A not transposed, B transposed) as tile[i][kk], the other as tile[kk][i]. Every copy of an
 *   aligned tile is 16 bytes wide, and the padding of a line is chosen so that a warp's
 *   fragment loads hit 32 different banks (rung 5 transposes K-contiguous operands as it copies
 *   them, one float at a time, because its FMAs want tiles whose lines run along M or N; the
 *   fragments do not).
 * - Each warp's tile is a grid of 16×8 tensor-core tiles. TF32: mma.sync.m16n8k8 on factors
 *   rounded to TF32 (cvt.rna: 10 mantissa bits, to nearest, ties away). BF16: m16n8k16 on
 *   factors rounded to BF16 (7 bits, to nearest, ties to even), two to a register. Both
 *   accumulate in FP32, and the factors are rounded on their way from shared memory into the
 *   registers the tensor cores read: no pass over A or B before the product.
 * - BF16 operands may also come as BF16 in memory (gpu_gemm_tiled_bf16_stored), rounded to
 *   nearest even by whoever wrote them: their tiles hold BF16, half the bytes to copy, and
 *   ldmatrix loads a warp's fragments (four 8×8 matrices an instruction, .trans where a tile's
 *   lines run along M or N); the products are those of the FP32 originals to the bit (same tiles,
 *   K slices and order).
 * - A TF32 product's A may come as FP16 in memory (gpu_gemm_tiled_tf32_fp16_a), holding each
 *   element already rounded to TF32: 11 significant bits, which an FP16 holds exactly where it is
 *   zero or at least 2^-14 in magnitude (the batch's normalized pixels). Its tiles hold FP16,
 *   half the bytes, and each factor is widened to FP32 as it is read: the same factors, tiles,
 *   K slices and order, so the bits of the FP32 original.
 *
 * The fragments (which element of A, B and C each lane holds) are in mma_sync.cuh.
 * Shapes and layout: those of every rung (gemm_ladder.h). docs/kernels.md has the
 * measurements. */
#include <cstdio>
#include <cstdlib>
#include <cuda_fp16.h>
#include <type_traits>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_tiled_parts.cuh"
#include "cuda/gemm/mma_sync.cuh"
#include "cuda/kernels/dependent_launch.cuh"

namespace {

constexpr int MIN_SLICE = 32; /* split-K: the thinnest K slice worth a block */
constexpr int MMA_M = 16, MMA_N = 8;

enum factor_rounding { ROUND_TF32, ROUND_BF16 };

/* k of one mma: m16n8k8 for TF32, m16n8k16 for BF16 */
template <factor_rounding ROUND> __host__ __device__ constexpr int mma_k() {
    return ROUND == ROUND_TF32 ? 8 : 16;
}

/* One operand's stage tile: WIDTH rows of C (A) or columns (B), BK deep, element (i, k) at
 * tile[at(i, k)], of type T: FP32, rounded as it leaves (ROUND), BF16 as it was stored, or FP16
 * holding TF32 factors.
 * - K_CONTIGUOUS: tile[i][kk], LINE = BK + 4 for TF32, so a fragment's loads (i = g,
 *   k = t) hit banks 4g + t; BK + 8 for BF16, whose pairs (i = g, k = 2t, 2t + 1) are 8-byte
 *   loads that hit banks 8g + 2t, + 1 in each half warp. (BK = 16: 20 and 24 do the same.)
 * - otherwise tile[kk][i], LINE = WIDTH + 8 for TF32 (k = t, i = g: banks 8t + g), + 4 for
 *   BF16 (k = 2t and 2t + 1: banks 8t + g and 8t + 4 + g).
 * - Stored BF16 is read by ldmatrix, 8 lines of 16 bytes at a time: lines of BK + 8 or
 *   WIDTH + 8 elements (12, 20, 36 or 68 words: 4 more than a multiple of 8) put those 8
 *   in different banks.
 * - FP16 (TF32 factors) is read an element at a time, as TF32 from FP32, in lines of BK + 8 or
 *   WIDTH + 8 halves: a fragment's 32 lanes read 16 different words, two lanes to a word. */
template <int WIDTH, int BK, bool K_CONTIGUOUS_, factor_rounding ROUND, typename T>
struct operand_tile {
    static constexpr bool K_CONTIGUOUS = K_CONTIGUOUS_;
    static constexpr bool STORED_BF16 = std::is_same<T, __nv_bfloat16>::value;
    static constexpr bool TF32_IN_FP16 = std::is_same<T, __half>::value;
    static_assert(!STORED_BF16 || ROUND == ROUND_BF16, "BF16 operands make BF16 products");
    static_assert(!TF32_IN_FP16 || ROUND == ROUND_TF32, "FP16 operands hold TF32 factors");
    static constexpr bool NARROW = STORED_BF16 || TF32_IN_FP16;
    static constexpr int LINE = K_CONTIGUOUS ? BK + (ROUND == ROUND_TF32 && !NARROW ? 4 : 8)
                                             : WIDTH + (ROUND == ROUND_TF32 || STORED_BF16 ? 8 : 4);
    static constexpr int ELEMENTS = K_CONTIGUOUS ? WIDTH * LINE : BK * LINE;
    static constexpr int BYTES = ELEMENTS * (int)sizeof(T);
    static_assert(LINE * sizeof(T) % 16 == 0, "16-byte copies need 16-byte aligned lines");
    __device__ static int at(int i, int k) { return K_CONTIGUOUS ? i * LINE + k : k * LINE + i; }
};

/* A block tile of BM×BN, BK deep, STAGES tiles in flight, WARPS_M×WARPS_N warps, each on a
 * (BM/WARPS_M)×(BN/WARPS_N) warp tile of m16n8 tiles. */
template <int BM_, int BN_, int BK_, int STAGES_, int WARPS_M_, int WARPS_N_, int BLOCKS_PER_SM_>
struct tensor_tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, BLOCKS_PER_SM = BLOCKS_PER_SM_;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int TILES_M = WM / MMA_M, TILES_N = WN / MMA_N;
    static_assert(TILES_M * MMA_M == WM && TILES_N * MMA_N == WN, "tiles must nest");
};
/* The 64×64 tile in 4 stages: with 3, tiled TF32 and BF16 epochs were 1-3% slower (H200).
 * Stored BF16 in steps of twice the depth (the bytes of an FP32 stage) was no faster at batch
 * 512 and 2% slower at 2048 (epochs, H100).
 * BLOCKS_PER_SM bounds the registers; the shared memory decides how many blocks fit: 3 of the
 * 64×64 tile, 4 with A in FP16, but 2 in BF16 from FP32 operands both K-contiguous (80 KB a
 * block). */
using large_tile = tensor_tile<128, 128, 32, 3, 2, 4, 1>; /* warp tile 64×32: 4×4 mma tiles */
using small_tile = tensor_tile<64, 64, 32, 4, 2, 2, 3>;   /* warp tile 32×32: 2×4 */
using narrow_tile = tensor_tile<32, 32, 16, 3, 2, 1, 8>;  /* warp tile 16×32: 1×4 */

/* A stage in shared memory: A's tile (of type TA), then B's (TB; op(B)ᵀ: element (j, k) is B's
 * (k, j)). A is K-contiguous unless transposed; B is K-contiguous when transposed. A split
 * product's partial tile (BM×BN floats) reuses the stages' memory after the last product. */
template <typename CFG, bool TRANS_A, bool TRANS_B, factor_rounding ROUND, typename TA, typename TB>
struct stage_layout {
    using A = operand_tile<CFG::BM, CFG::BK, !TRANS_A, ROUND, TA>;
    using B = operand_tile<CFG::BN, CFG::BK, TRANS_B, ROUND, TB>;
    static constexpr int BYTES = A::BYTES + B::BYTES;
    static constexpr size_t PARTIAL_BYTES = (size_t)CFG::BM * CFG::BN * sizeof(float);
    static constexpr size_t SHARED_BYTES = CFG::STAGES * (size_t)BYTES > PARTIAL_BYTES
                                               ? CFG::STAGES * (size_t)BYTES
                                               : PARTIAL_BYTES;
    static_assert(CFG::BK % mma_k<ROUND>() == 0, "whole mma steps in a stage");
    static_assert(BYTES % 16 == 0, "every tile starts 16-byte aligned");
};

/* Starts copying one operand's tile: elements (i0 + i, k0 + kk), zero outside the matrix (i at
 * or past i_end, k at or past k_end), from x, where element (i, k) is x[i·ld + k] if the tile
 * is K-contiguous, else x[k·ld + i]. Either way the copy runs along memory, 16 bytes at a time. */
template <typename TILE, int WIDTH, int BK, int THREADS, typename T>
__device__ __forceinline__ void copy_operand(T *tile, const T *x, int ld, int i0, int k0,
                                             int i_end, int k_end, bool vectors) {
    if constexpr (TILE::K_CONTIGUOUS)
        copy_tile_async<T, WIDTH, BK, TILE::LINE, THREADS>(tile, x + (size_t)i0 * ld + k0, ld, i0,
                                                          k0, i_end, k_end, vectors);
    else
        copy_tile_async<T, BK, WIDTH, TILE::LINE, THREADS>(tile, x + (size_t)k0 * ld + i0, ld, k0,
                                                          i0, k_end, i_end, vectors);
}

/* The register a BF16 mma reads for elements (i, k) and (i, k + 1): both rounded to BF16,
 * (i, k) in the low half. */
__device__ __forceinline__ uint32_t bf16_pair(float low, float high) {
    uint32_t bits;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(bits) : "f"(high), "f"(low));
    return bits;
}

/* The register a TF32 mma reads for element (i, k), or a BF16 mma for (i, k) and (i, k + 1). */
template <typename TILE, factor_rounding ROUND, typename T>
__device__ __forceinline__ uint32_t factor_at(const T *tile, int i, int k) {
    if constexpr (TILE::TF32_IN_FP16) {
        return __float_as_uint(__half2float(tile[TILE::at(i, k)])); /* a TF32 value already */
    } else if constexpr (ROUND == ROUND_TF32) {
        return tf32_bits(tile[TILE::at(i, k)]);
    } else if constexpr (TILE::K_CONTIGUOUS) {
        const float2 pair = *reinterpret_cast<const float2 *>(tile + TILE::at(i, k));
        return bf16_pair(pair.x, pair.y);
    } else {
        return bf16_pair(tile[TILE::at(i, k)], tile[TILE::at(i, k + 1)]);
    }
}

/* ---- fragments: the registers one warp's mma reads, from a stage tile ---- */

/* A's fragment of the block at rows row.. row + 15, k kk.. (16 deep in BF16, 8 in TF32): from
 * stored BF16 by ldmatrix (mma_sync.cuh), else a factor at a time (factor_at). */
template <typename TILE, factor_rounding ROUND, typename T>
__device__ __forceinline__ void a_fragment(const T *tile, int row, int kk, uint32_t (&af)[4]) {
    if constexpr (TILE::STORED_BF16) {
        bf16_a_fragment<TILE>(tile, row, kk, af);
    } else {
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int k_low = kk + (ROUND == ROUND_TF32 ? t : 2 * t), k_high = k_low + mma_k<ROUND>() / 2;
        af[0] = factor_at<TILE, ROUND>(tile, row + g, k_low);
        af[1] = factor_at<TILE, ROUND>(tile, row + g + 8, k_low);
        af[2] = factor_at<TILE, ROUND>(tile, row + g, k_high);
        af[3] = factor_at<TILE, ROUND>(tile, row + g + 8, k_high);
    }
}

/* B's fragments of the two blocks at columns col.. col + 7 and col + 8.. col + 15, k kk..., the
 * same two ways. */
template <typename TILE, factor_rounding ROUND, typename T>
__device__ __forceinline__ void b_fragments(const T *tile, int col, int kk, uint32_t (&bf)[2][2]) {
    if constexpr (TILE::STORED_BF16) {
        bf16_b_fragments<TILE>(tile, col, kk, bf);
    } else {
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int k_low = kk + (ROUND == ROUND_TF32 ? t : 2 * t), k_high = k_low + mma_k<ROUND>() / 2;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            bf[j][0] = factor_at<TILE, ROUND>(tile, col + 8 * j + g, k_low);
            bf[j][1] = factor_at<TILE, ROUND>(tile, col + 8 * j + g, k_high);
        }
    }
}

template <factor_rounding ROUND>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    if constexpr (ROUND == ROUND_TF32) mma_tf32(d, a, b);
    else mma_bf16(d, a, b);
}

/* C (M×N) = epilogue(alpha · op(A) · op(B) + beta · C), A of type TA, B of TB. Grid
 * ceil(N/BN) × ceil(M/BM) × slices, block z multiplying K slice z; with more than one slice, a
 * tile's blocks form a cluster (1 × 1 × slices). stage_layout's SHARED_BYTES of dynamic shared
 * memory. */
template <typename CFG, bool TRANS_A, bool TRANS_B, factor_rounding ROUND, typename TA, typename TB>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM)
gemm_tensor_kernel(int m, int n, int k, int k_per_split, float alpha, const TA *__restrict__ a,
                   int lda, const TB *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                   int ldc, gemm_epilogue epilogue, bool vector_a, bool vector_b) {
    using STAGE = stage_layout<CFG, TRANS_A, TRANS_B, ROUND, TA, TB>;
    using A_TILE = typename STAGE::A;
    using B_TILE = typename STAGE::B;
    constexpr int BM = CFG::BM, BN = CFG::BN, BK = CFG::BK, STAGES = CFG::STAGES;
    constexpr int MMA_K = mma_k<ROUND>();
    static_assert(CFG::TILES_N % 2 == 0, "B's fragments come two blocks at a time");
    extern __shared__ __align__(16) unsigned char shared[]; /* stage s: A's tile, then B's */
    wait_for_previous_kernel();
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int warp_row = (warp / CFG::WARPS_N) * CFG::WM, warp_col = (warp % CFG::WARPS_N) * CFG::WN;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;
    auto a_tile_of = [&](int step) { return reinterpret_cast<TA *>(shared + (step % STAGES) * STAGE::BYTES); };
    auto b_tile_of = [&](int step) { return reinterpret_cast<TB *>(shared + (step % STAGES) * STAGE::BYTES + A_TILE::BYTES); };

    auto start_copying = [&](int step) {
        const int k0 = range.begin + step * BK;
        copy_operand<A_TILE, BM, BK, CFG::THREADS>(a_tile_of(step), a, lda, row0, k0, m, range.end, vector_a);
        copy_operand<B_TILE, BN, BK, CFG::THREADS>(b_tile_of(step), b, ldb, col0, k0, n, range.end, vector_b);
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

        const TA *a_tile = a_tile_of(step);
        const TB *b_tile = b_tile_of(step);
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            uint32_t bf[CFG::TILES_N][2];
#pragma unroll
            for (int j = 0; j < CFG::TILES_N; j += 2)
                b_fragments<B_TILE, ROUND>(b_tile, warp_col + j * MMA_N, kk,
                                           reinterpret_cast<uint32_t (&)[2][2]>(bf[j]));
#pragma unroll
            for (int i = 0; i < CFG::TILES_M; i++) {
                uint32_t af[4];
                a_fragment<A_TILE, ROUND>(a_tile, warp_row + i * MMA_M, kk, af);
#pragma unroll
                for (int j = 0; j < CFG::TILES_N; j++) mma<ROUND>(acc[i][j], af, bf[j]);
            }
        }
    }

    const gemm_output out = output_to_c(c, ldc, alpha, beta, epilogue);
    const bool split = gridDim.z > 1;
    float *partial = reinterpret_cast<float *>(shared);
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
                *reinterpret_cast<float2 *>(partial + row * BN + col) = make_float2(d[0], d[1]);
                *reinterpret_cast<float2 *>(partial + (row + 8) * BN + col) = make_float2(d[2], d[3]);
            } else {
                store_pair(out, m, n, row0 + row, col0 + col, d[0], d[1]);
                store_pair(out, m, n, row0 + row + 8, col0 + col, d[2], d[3]);
            }
        }
    if (split) store_cluster_sum<BM, BN, CFG::THREADS>(partial, out, m, n, row0, col0);
}

template <typename CFG, bool TRANS_A, bool TRANS_B, factor_rounding ROUND, typename TA, typename TB>
void launch_kernel(gemm_k_split split, const gemm_epilogue &epilogue, cudaStream_t stream, int m,
                   int n, int k, float alpha, const TA *a, int lda, const TB *b, int ldb, float beta,
                   float *c, int ldc) {
    constexpr size_t shared_bytes = stage_layout<CFG, TRANS_A, TRANS_B, ROUND, TA, TB>::SHARED_BYTES;
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_tensor_kernel<CFG, TRANS_A, TRANS_B, ROUND, TA, TB>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)shared_bytes));
        allowed = true;
    }
    const dim3 grid(blocks_for(n, CFG::BN), blocks_for(m, CFG::BM), split.splits);
    launch_dependent(gemm_tensor_kernel<CFG, TRANS_A, TRANS_B, ROUND, TA, TB>, grid, CFG::THREADS,
                     shared_bytes, stream, split.splits, m, n, k, split.k_per_split, alpha, a,
                     lda, b, ldb, beta, c, ldc, epilogue, vectors_aligned(a, lda),
                     vectors_aligned(b, ldb));
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

/* The arguments of every rung (GPU_GEMM_ARGS), with A of type TA and B of TB. */
#define GEMM_TENSOR_PARAMS                                                                         \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const TA *a, int lda, const TB *b, int ldb, float beta, float *c, int ldc
#define GEMM_TENSOR_ARGS stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc

template <typename CFG, factor_rounding ROUND, typename TA, typename TB>
void run(int forced_splits, const gemm_epilogue &epilogue, GEMM_TENSOR_PARAMS) {
    const gemm_k_split split = split_for<CFG>(forced_splits, m, n, k);
#define GEMM_TENSOR_LAUNCH(TRANS_A, TRANS_B)                                                       \
    launch_kernel<CFG, TRANS_A, TRANS_B, ROUND, TA, TB>(split, epilogue, stream, m, n, k, alpha,   \
                                                        a, lda, b, ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_TENSOR_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_TENSOR_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_TENSOR_LAUNCH(false, true);
    else GEMM_TENSOR_LAUNCH(true, true);
#undef GEMM_TENSOR_LAUNCH
}

template <factor_rounding ROUND, typename TA, typename TB>
void run_tile(int tile, int forced_splits, const gemm_epilogue *epilogue, GEMM_TENSOR_PARAMS) {
    const gemm_epilogue e = epilogue ? *epilogue : gemm_epilogue{};
    if (tile == 128) run<large_tile, ROUND, TA, TB>(forced_splits, e, GEMM_TENSOR_ARGS);
    else if (tile == 64) run<small_tile, ROUND, TA, TB>(forced_splits, e, GEMM_TENSOR_ARGS);
    else run<narrow_tile, ROUND, TA, TB>(forced_splits, e, GEMM_TENSOR_ARGS);
}

/* The tile rung 5 would take, in its simplest form: 128×128 where those give every
 * multiprocessor a block; else 64×64, or 32×32 where M or N is under 64 or K under 32, in as
 * many K slices as the grid wants. BF16 also takes 128×128 for a deep product whose tiles, in
 * MAX_SLICES slices of at least 256, give three quarters of the multiprocessors a block (layer
 * 1's weight gradient at batch 2048: 2% off the BF16 epoch on an H100; in TF32 the same tile
 * made the epoch 10% slower). */
template <factor_rounding ROUND> int chosen_tile(int m, int n, int k) {
    const long large = (long)blocks_for(m, 128) * blocks_for(n, 128);
    const int sms = gemm_multiprocessor_count();
    if (large >= sms) return 128;
    const bool deep = clusters_available() && k >= 256 * MAX_SLICES && 4 * large * MAX_SLICES >= 3L * sms;
    if (ROUND == ROUND_BF16 && deep) return 128;
    return m < 64 || n < 64 || k < 32 ? 32 : 64;
}

bool has_tile(int rows, int cols) { return rows == cols && (rows == 32 || rows == 64 || rows == 128); }

template <factor_rounding ROUND, typename TA, typename TB>
void gemm(int tile, int splits, const gemm_epilogue *epilogue, GEMM_TENSOR_PARAMS) {
    if (m == 0 || n == 0) return;
    run_tile<ROUND, TA, TB>(tile ? tile : chosen_tile<ROUND>(m, n, k), splits, epilogue, GEMM_TENSOR_ARGS);
}

void refuse_plan(const char *name, int rows, int cols) {
    std::fprintf(stderr, "%s: no %d×%d tile (32×32, 64×64 or 128×128)\n", name, rows, cols);
    std::exit(1);
}

} // namespace

bool gpu_gemm_tiled_tensor_has_tile(int rows, int cols) { return has_tile(rows, cols); }

void gpu_gemm_tiled_tf32(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_TF32, float, float>(0, 0, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_bf16(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_BF16, float, float>(0, 0, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_bf16_stored(GPU_GEMM_BF16_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_BF16, __nv_bfloat16, __nv_bfloat16>(0, 0, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_tf32_fp16_a(GPU_GEMM_FP16_A_ARGS, const gemm_epilogue *epilogue) {
    gemm<ROUND_TF32, __half, float>(0, 0, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_tensor_with_plan(gemm_precision precision, int tile_rows, int tile_cols,
                                     int splits, GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    if (tile_rows && !has_tile(tile_rows, tile_cols)) refuse_plan("gpu_gemm_tiled_tensor_with_plan", tile_rows, tile_cols);
    if (precision == PRECISION_BF16)
        gemm<ROUND_BF16, float, float>(tile_rows, splits, epilogue, GEMM_TENSOR_ARGS);
    else
        gemm<ROUND_TF32, float, float>(tile_rows, splits, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_bf16_stored_with_plan(int tile_rows, int tile_cols, int splits,
                                          GPU_GEMM_BF16_ARGS, const gemm_epilogue *epilogue) {
    if (tile_rows && !has_tile(tile_rows, tile_cols)) refuse_plan("gpu_gemm_tiled_bf16_stored_with_plan", tile_rows, tile_cols);
    gemm<ROUND_BF16, __nv_bfloat16, __nv_bfloat16>(tile_rows, splits, epilogue, GEMM_TENSOR_ARGS);
}

void gpu_gemm_tiled_tf32_fp16_a_with_plan(int tile_rows, int tile_cols, int splits,
                                          GPU_GEMM_FP16_A_ARGS, const gemm_epilogue *epilogue) {
    if (tile_rows && !has_tile(tile_rows, tile_cols)) refuse_plan("gpu_gemm_tiled_tf32_fp16_a_with_plan", tile_rows, tile_cols);
    gemm<ROUND_TF32, __half, float>(tile_rows, splits, epilogue, GEMM_TENSOR_ARGS);
}
