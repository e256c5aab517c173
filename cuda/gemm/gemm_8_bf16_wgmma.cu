/* Ladder rung 8, Hopper only (sm_90a): BF16 with wgmma, the warpgroup MMA that reads A and B
 * from swizzled shared memory through matrix descriptors and runs asynchronously; BF16 A and B
 * in memory, FP32 C and sums, rung 7's contract. 128×128 block tiles, BK = 64, two warpgroups,
 * a cp.async pipeline; split-K through the workspace. The design and its measurements:
 * docs/kernels.md, "Design notes: gemm_8_bf16_wgmma.cu". */
#include <cstdint>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int BM = 128, BN = 128, BK = 64;          /* block tile and K step */
constexpr int WARPGROUPS = BM / 64, THREADS = 128 * WARPGROUPS;
constexpr int WGMMA_N = BN, WGMMA_K = 16, ACCUMULATORS = WGMMA_N / 2; /* per thread */
constexpr int STAGES = 3, WGMMA_IN_FLIGHT = 0, PREFETCH = STAGES - 1 - WGMMA_IN_FLIGHT;
static_assert(PREFETCH >= 1, "a stage for each tile loading, being multiplied, or still read");
constexpr int MIN_SLICE = 64; /* split-K: the thinnest K slice worth a block */
constexpr int A_TILE_BYTES = BM * BK * (int)sizeof(bf16), B_TILE_BYTES = BN * BK * (int)sizeof(bf16);
constexpr int STAGE_BYTES = A_TILE_BYTES + B_TILE_BYTES;
constexpr size_t SHARED_BYTES = (size_t)STAGES * STAGE_BYTES + SWIZZLE_BYTES; /* + alignment */
static_assert(BK * sizeof(bf16) == ROW_BYTES, "a K-major row is the 64 BF16 of one BK step");

/* An operand's tile in shared memory: X(i, k) for i < ROWS, k < BK, where X is op(A) (i: a row
 * of C) or op(B)ᵀ (i: a column of C), in the 128-byte swizzle layout. K_MAJOR: row i holds the
 * 64 k of i. Otherwise atom a = i / 64 (BK rows of 128 bytes) holds i = 64a .. 64a + 63 in its
 * row k. Either way a row's 16-byte chunk j is stored at chunk j ^ (row % 8). */
template <int ROWS, bool K_MAJOR> struct swizzled_tile {
    static constexpr int ATOM_BYTES = BK * ROW_BYTES;
    static constexpr int LEADING_BYTES = K_MAJOR ? 16 : ATOM_BYTES; /* unused when K-major */
    static constexpr int STRIDE_BYTES = SWIZZLE_BYTES;              /* between groups of 8 rows */

    /* Where the 16-byte chunk holding (i, k) goes: i and k as in global memory, k % 8 == 0 when
     * K_MAJOR, i % 8 == 0 otherwise. */
    __device__ static int chunk_offset(int i, int k) {
        if (K_MAJOR) return i * ROW_BYTES + swizzled_chunk(k / 8, i);
        return i / 64 * ATOM_BYTES + k * ROW_BYTES + swizzled_chunk(i % 64 / 8, k);
    }

    /* Where a wgmma reading rows from (i, k) starts: i % 64 == 0, k % 16 == 0. */
    __device__ static int slice_offset(int i, int k) {
        return K_MAJOR ? i * ROW_BYTES + k * (int)sizeof(bf16) : i / 64 * ATOM_BYTES + k * ROW_BYTES;
    }

    /* Starts copying the tile at (i0, k0) of the matrix x (element (i, k) at x[i·ld + k] when
     * K_MAJOR, else at x[k·ld + i]); zeros past i_end and k_end. The matrix is read in lines
     * (its rows) of 8-element chunks, consecutive threads on consecutive chunks of a line. */
    __device__ static void start_copy(char *tile, const bf16 *x, int ld, int i0, int k0, int i_end,
                                      int k_end, bool vectors) {
        constexpr int LINES = K_MAJOR ? ROWS : BK, WIDTH = K_MAJOR ? BK : ROWS;
        constexpr int CHUNKS_PER_LINE = WIDTH / 8, ROUNDS = LINES * CHUNKS_PER_LINE / THREADS;
        constexpr int LINES_PER_ROUND = THREADS / CHUNKS_PER_LINE;
        static_assert(THREADS % CHUNKS_PER_LINE == 0 && LINES % LINES_PER_ROUND == 0, "whole rounds");
        const int line = threadIdx.x / CHUNKS_PER_LINE, pos = threadIdx.x % CHUNKS_PER_LINE * 8;
        const int line0 = K_MAJOR ? i0 : k0, line_end = K_MAJOR ? i_end : k_end;
        const int pos0 = K_MAJOR ? k0 : i0, pos_end = K_MAJOR ? k_end : i_end;
        const bf16 *from = x + (size_t)(line0 + line) * ld + pos0 + pos;
        const size_t round_stride = (size_t)LINES_PER_ROUND * ld;
        auto chunk = [&](int round) { /* this round's chunk in the tile */
            const int l = line + round * LINES_PER_ROUND;
            return tile + (K_MAJOR ? chunk_offset(l, pos) : chunk_offset(pos, l));
        };
        if (vectors && line0 + LINES <= line_end && pos0 + WIDTH <= pos_end) {
#pragma unroll
            for (int round = 0; round < ROUNDS; round++, from += round_stride) cp_async_16(chunk(round), from);
            return;
        }
        const int inside_line = min(8, max(0, pos_end - (pos0 + pos)));
#pragma unroll 1
        for (int round = 0; round < ROUNDS; round++, from += round_stride) {
            bf16 *to = reinterpret_cast<bf16 *>(chunk(round));
            const int inside = line0 + line + round * LINES_PER_ROUND < line_end ? inside_line : 0;
            if (vectors && inside == 8) {
                cp_async_16(to, from);
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) to[e] = e < inside ? from[e] : bf16(0.0f);
            }
        }
    }
};

/* d (64×128, the warpgroup's) += A (64×16) · B (16×128), A and B described in shared memory;
 * MN_MAJOR_A / MN_MAJOR_B are the instruction's transpose bits. */
template <int MN_MAJOR_A, int MN_MAJOR_B>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[ACCUMULATORS], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, accumulate, 1, 1, %67, %68;\n}\n"
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
        : "l"(a), "l"(b), "r"(1), "n"(MN_MAJOR_A), "n"(MN_MAJOR_B));
}

/* C (M×N) = alpha · op(A) · op(B) + beta · C, or with partials != nullptr the raw product of
 * K slice blockIdx.z into plane z of partials. Grid ceil(N/BN) × ceil(M/BM) × slices,
 * THREADS threads, SHARED_BYTES of dynamic shared memory. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS)
gemm_bf16_wgmma_kernel(int m, int n, int k, int k_per_split, float alpha, const bf16 *__restrict__ a,
                       int lda, const bf16 *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                       int ldc, float *__restrict__ partials, bool vector_a, bool vector_b) {
    using a_tile = swizzled_tile<BM, !TRANS_A>;
    using b_tile = swizzled_tile<BN, TRANS_B>;
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
            const uint64_t a_desc = descriptor(as + a_tile::slice_offset(64 * warpgroup, kk),
                                               a_tile::LEADING_BYTES, a_tile::STRIDE_BYTES);
            const uint64_t b_desc = descriptor(bs + b_tile::slice_offset(0, kk), b_tile::LEADING_BYTES,
                                               b_tile::STRIDE_BYTES);
            wgmma_m64n128k16<TRANS_A ? 1 : 0, TRANS_B ? 0 : 1>(acc, a_desc, b_desc);
        }
        wgmma_commit();
    }
    wgmma_wait<0>();
    fence_accumulators<ACCUMULATORS>(acc);

    const gemm_output out = block_output(c, ldc, alpha, beta, partials, m, n);
    store_accumulators<WGMMA_N>(acc, out, m, n, row0 + 64 * warpgroup, col0);
}

template <bool TRANS_A, bool TRANS_B> void launch_kernel(gemm_k_split split, float *partials, GPU_GEMM_BF16_ARGS) {
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_wgmma_kernel<TRANS_A, TRANS_B>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SHARED_BYTES));
        allowed = true;
    }
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), split.splits);
    gemm_bf16_wgmma_kernel<TRANS_A, TRANS_B><<<blocks, THREADS, SHARED_BYTES, stream>>>(
        m, n, k, split.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, partials,
        vectors_aligned(a, lda), vectors_aligned(b, ldb));
    CUDA_CHECK_LAUNCH();
}

void run(gemm_k_split split, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    require_wgmma("gpu_gemm_bf16_wgmma");
    float *partials = split.splits > 1 ? workspace.data : nullptr;
#define GEMM_WGMMA_LAUNCH(TA, TB)                                                                  \
    launch_kernel<TA, TB>(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b,    \
                          ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_WGMMA_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_WGMMA_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_WGMMA_LAUNCH(false, true);
    else GEMM_WGMMA_LAUNCH(true, true);
#undef GEMM_WGMMA_LAUNCH
    if (partials) gemm_sum_slices(stream, partials, split, m, n, alpha, beta, c, ldc);
}

} // namespace

bool gpu_gemm_wgmma_available() {
    int device, major, minor;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
}

void gpu_gemm_bf16_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const gemm_k_split split = gemm_slices(splits, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_bf16_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const long tiles = (long)blocks_for(m, BM) * blocks_for(n, BN);
    const gemm_k_split split = gemm_choose_slices(tiles, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
