/* Ladder rung 9, Hopper only: TF32 with wgmma (gemm_6_tf32_mma.cu's contract, gemm_8_bf16_wgmma.cu's
 * structure, after both).
 *
 * wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32: a warpgroup multiplies 64×8 of A by
 * 8×128 of B from shared memory, FP32 accumulators. Unlike BF16, TF32 wgmma has no transpose
 * bits: both operands must be K-major in shared memory, each row of a tile the 32 k (128
 * bytes, BK = 32) of one m or n, in the 128-byte swizzle (chunk j of 4 floats of row r at
 * j ^ (r % 8)). The operands whose rows in global memory run along K (A not transposed, B
 * transposed) are copied 16 bytes at a time, as in gemm_8_bf16_wgmma.cu; the others have to be
 * transposed, and that is this rung's lesson. Transposed on the way in, 4 bytes per cp.async
 * (copy_transposing below), they starve the tensor cores: measured at 4096³ on an H200, 0.85
 * of cuBLAS's TF32 with no operand to transpose (op NT) but 0.37 for NN. Two other ways of
 * transposing on the way in did no better, measured: lanes ordered so that no two 4-byte
 * copies hit one bank, and 16-byte loads into registers stored transposed (one or two steps
 * ahead; Nsight Compute showed the stores waiting for the loads). What works is to transpose
 * such an operand once, in a pass of its own through memory (transpose.cu, into the caller's
 * workspace), and multiply the K-major copy: 0.83 of cuBLAS for NN at 4096³, the transposition
 * included. It pays only where each element is used many times, so small products (and a
 * workspace without room) keep the 4-byte copies.
 *
 * The tensor cores take the FP32 bits as they are in shared memory and use the TF32 part of
 * them (sign, exponent, the 10 high mantissa bits): the inputs are truncated, not rounded to
 * nearest as gemm_6_tf32_mma.cu's cvt.rna does (no instruction can touch them on the way), which
 * doubles the worst rounding error of a product to about 2^-9 of its size.
 *
 * The rest is gemm_8_bf16_wgmma.cu's: block tile 128×128, 2 warpgroups of m64n128, 3 cp.async
 * stages, fence.proxy.async before each barrier, split-K for small C; sm_90a only.
 *
 * Shapes: op(A) is M×K, op(B) is K×N, C is M×N, all row-major FP32; A is stored M×K (K×M when
 * transposed), B K×N (N×K when transposed). Any M, N, K and strides. */
#include <cstdint>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/wgmma.cuh"

namespace {

constexpr int BM = 128, BN = 128, BK = 32;          /* block tile and K step */
constexpr int WARPGROUPS = BM / 64, THREADS = 128 * WARPGROUPS;
constexpr int WGMMA_N = BN, WGMMA_K = 8, ACCUMULATORS = WGMMA_N / 2; /* per thread */
constexpr int STAGES = 3, WGMMA_IN_FLIGHT = 0, PREFETCH = STAGES - 1 - WGMMA_IN_FLIGHT;
constexpr int MIN_SLICE = 64; /* split-K: the thinnest K slice worth a block */
constexpr int A_TILE_BYTES = BM * BK * (int)sizeof(float), B_TILE_BYTES = BN * BK * (int)sizeof(float);
constexpr int STAGE_BYTES = A_TILE_BYTES + B_TILE_BYTES;
constexpr size_t SHARED_BYTES = (size_t)STAGES * STAGE_BYTES + SWIZZLE_BYTES; /* + alignment */
static_assert(BK * sizeof(float) == ROW_BYTES, "a row is the 32 floats of one BK step");

/* Where element (i, k) of a K-major tile goes: row i, the swizzled chunk of k, k's place in it. */
__device__ __forceinline__ int element_offset(int i, int k) {
    return i * ROW_BYTES + swizzled_chunk(k / 4, i) + k % 4 * (int)sizeof(float);
}

/* Where a wgmma reading rows from (i, k) starts: i % 64 == 0, k % 8 == 0. */
__device__ __forceinline__ int slice_offset(int i, int k) { return i * ROW_BYTES + k * (int)sizeof(float); }

/* An operand's tile in shared memory, X(i, k) for i < ROWS, k < BK, K-major, where X is op(A)
 * (i: a row of C) or op(B)ᵀ (i: a column of C); K_CONTIGUOUS says how X is in global memory:
 * element (i, k) at x[i·ld + k], or at x[k·ld + i]. */
template <int ROWS, bool K_CONTIGUOUS> struct k_major_tile {
    /* Starts copying the tile at (i0, k0); zeros past i_end and k_end. */
    __device__ static void start_copy(char *tile, const float *x, int ld, int i0, int k0, int i_end,
                                      int k_end, bool vectors) {
        if constexpr (K_CONTIGUOUS) copy_rows(tile, x, ld, i0, k0, i_end, k_end, vectors);
        else copy_transposing(tile, x, ld, i0, k0, i_end, k_end);
    }

    /* 16 bytes (4 k of one i) per copy, consecutive threads along a row of x. */
    __device__ static void copy_rows(char *tile, const float *x, int ld, int i0, int k0, int i_end,
                                     int k_end, bool vectors) {
        constexpr int CHUNKS_PER_ROW = BK / 4, ROWS_PER_ROUND = THREADS / CHUNKS_PER_ROW;
        const int i = threadIdx.x / CHUNKS_PER_ROW, k = threadIdx.x % CHUNKS_PER_ROW * 4;
        const float *from = x + (size_t)(i0 + i) * ld + k0 + k;
        const size_t round_stride = (size_t)ROWS_PER_ROUND * ld;
        if (vectors && i0 + ROWS <= i_end && k0 + BK <= k_end) {
#pragma unroll
            for (int round = 0; round < ROWS / ROWS_PER_ROUND; round++, from += round_stride)
                cp_async_16(tile + element_offset(i + round * ROWS_PER_ROUND, k), from);
            return;
        }
        const int inside_row = min(4, max(0, k_end - (k0 + k)));
#pragma unroll 1
        for (int round = 0; round < ROWS / ROWS_PER_ROUND; round++, from += round_stride) {
            const int row = i + round * ROWS_PER_ROUND;
            float *to = reinterpret_cast<float *>(tile + element_offset(row, k));
            const int inside = i0 + row < i_end ? inside_row : 0;
            if (vectors && inside == 4) {
                cp_async_16(to, from);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) to[e] = e < inside ? from[e] : 0.0f;
            }
        }
    }

    /* 4 bytes (one element) per copy, consecutive threads along a row of x (a k of the tile). */
    __device__ static void copy_transposing(char *tile, const float *x, int ld, int i0, int k0,
                                            int i_end, int k_end) {
        constexpr int KS_PER_ROUND = THREADS / ROWS;
        static_assert(THREADS % ROWS == 0 && BK % KS_PER_ROUND == 0, "whole rounds");
        const int i = threadIdx.x % ROWS, k = threadIdx.x / ROWS;
        const float *from = x + (size_t)(k0 + k) * ld + i0 + i;
        const size_t round_stride = (size_t)KS_PER_ROUND * ld;
        const bool i_inside = i0 + i < i_end;
        const bool whole = i0 + ROWS <= i_end && k0 + BK <= k_end;
#pragma unroll 4
        for (int round = 0; round < BK / KS_PER_ROUND; round++, from += round_stride) {
            const int kk = k + round * KS_PER_ROUND;
            char *to = tile + element_offset(i, kk);
            if (whole || (i_inside && k0 + kk < k_end)) cp_async_4(to, from);
            else *reinterpret_cast<float *>(to) = 0.0f;
        }
    }
};

/* d (64×128, the warpgroup's) += A (64×8) · B (8×128), both K-major in shared memory. */
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[ACCUMULATORS], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, accumulate, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "l"(a), "l"(b), "r"(1));
}

/* C (M×N) = alpha · op(A) · op(B) + beta · C, or with partials != nullptr the raw product of
 * K slice blockIdx.z into plane z of partials. Grid ceil(N/BN) × ceil(M/BM) × slices,
 * THREADS threads, SHARED_BYTES of dynamic shared memory. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS)
gemm_tf32_wgmma_kernel(int m, int n, int k, int k_per_split, float alpha, const float *__restrict__ a,
                       int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                       int ldc, float *__restrict__ partials, bool vector_a, bool vector_b) {
    using a_tile = k_major_tile<BM, !TRANS_A>;
    using b_tile = k_major_tile<BN, TRANS_B>;
    extern __shared__ __align__(16) char shared_bytes[]; /* STAGES × (A tile, B tile) */
    char *shared = shared_bytes + (SWIZZLE_BYTES - shared_address(shared_bytes) % SWIZZLE_BYTES) % SWIZZLE_BYTES;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warpgroup = threadIdx.x / 128;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        char *stage = shared + (step % STAGES) * STAGE_BYTES;
        const int k0 = range.begin + step * BK;
        a_tile::start_copy(stage, a, lda, row0, k0, m, range.end, vector_a);
        b_tile::start_copy(stage + A_TILE_BYTES, b, ldb, col0, k0, n, range.end, vector_b);
    };
#pragma unroll
    for (int step = 0; step < PREFETCH; step++) { /* one commit group per step, empty ones too */
        if (step < steps) start_copying(step);
        cp_async_commit();
    }

    float acc[ACCUMULATORS] = {};
    for (int step = 0; step < steps; step++) {
        cp_async_wait<PREFETCH - 1>();
        fence_proxy_async();
        wgmma_wait<WGMMA_IN_FLIGHT>(); /* then the stage refilled below is no longer read */
        fence_accumulators<ACCUMULATORS>(acc);
        __syncthreads();
        if (step + PREFETCH < steps) start_copying(step + PREFETCH);
        cp_async_commit();

        const char *as = shared + (step % STAGES) * STAGE_BYTES, *bs = as + A_TILE_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += WGMMA_K) {
            wgmma_m64n128k8(acc, descriptor(as + slice_offset(64 * warpgroup, kk), 16, SWIZZLE_BYTES),
                            descriptor(bs + slice_offset(0, kk), 16, SWIZZLE_BYTES));
        }
        wgmma_commit();
    }
    wgmma_wait<0>();
    fence_accumulators<ACCUMULATORS>(acc);

    const gemm_output out = block_output(c, ldc, alpha, beta, partials, m, n);
    store_accumulators<WGMMA_N>(acc, out, m, n, row0 + 64 * warpgroup, col0);
}

template <bool TRANS_A, bool TRANS_B> void launch_kernel(gemm_k_split split, float *partials, GPU_GEMM_ARGS) {
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_tf32_wgmma_kernel<TRANS_A, TRANS_B>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SHARED_BYTES));
        allowed = true;
    }
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), split.splits);
    gemm_tf32_wgmma_kernel<TRANS_A, TRANS_B><<<blocks, THREADS, SHARED_BYTES, stream>>>(
        m, n, k, split.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, partials,
        vectors_aligned(a, lda), vectors_aligned(b, ldb));
    CUDA_CHECK_LAUNCH();
}

/* Where an operand is used by at least this many rows or columns of C, one pass through memory
 * to lay it out K-major costs little beside the product (measured on an H200, NN: 4096³ 0.44 ms
 * against 1.03 without it, 2048³ 0.070 against 0.143, 1024³ the same as without). */
constexpr int TRANSPOSE_REUSE = 1024;

/* Launches the kernel for the operands as they are now (the pre-transposed ones included). */
void launch(gemm_k_split split, float *partials, GPU_GEMM_ARGS) {
#define GEMM_WGMMA_LAUNCH(TA, TB)                                                                  \
    launch_kernel<TA, TB>(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b,    \
                          ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_WGMMA_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_WGMMA_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_WGMMA_LAUNCH(false, true);
    else GEMM_WGMMA_LAUNCH(true, true);
#undef GEMM_WGMMA_LAUNCH
}

void run(gemm_k_split split, gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    require_wgmma("gpu_gemm_tf32_wgmma");
    float *partials = split.splits > 1 ? workspace.data : nullptr;
    /* The operands that are not K-major (A transposed: K×M; B not: K×N), transposed into the
     * workspace after the partial sums when both fit: then the kernel copies 16 bytes at a time. */
    const bool move_a = trans_a && n >= TRANSPOSE_REUSE, move_b = !trans_b && m >= TRANSPOSE_REUSE;
    const size_t used = partials ? (size_t)split.splits * m * n : 0;
    const size_t needed = (move_a ? (size_t)m * k : 0) + (move_b ? (size_t)k * n : 0);
    if (needed > 0 && used + needed <= workspace.floats) {
        float *free_space = workspace.data + used;
        if (move_a) { /* A (K×M) → Aᵀ (M×K) */
            gpu_transpose(stream, k, m, a, lda, free_space);
            a = free_space, lda = k, trans_a = false;
            free_space += (size_t)m * k;
        }
        if (move_b) { /* B (K×N) → Bᵀ (N×K) */
            gpu_transpose(stream, k, n, b, ldb, free_space);
            b = free_space, ldb = k, trans_b = true;
        }
    }
    launch(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (partials) gemm_sum_slices(stream, partials, split, m, n, alpha, beta, c, ldc);
}

} // namespace

void gpu_gemm_tf32_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    const gemm_k_split split = gemm_slices(splits, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_tf32_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    const long tiles = (long)blocks_for(m, BM) * blocks_for(n, BN);
    const gemm_k_split split = gemm_choose_slices(tiles, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
