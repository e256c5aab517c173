/* What the tiled rungs share: rung 5 (gemm_5_tiled.cu, FP32 on the FMA units) and rung 10
 * (gemm_10_tiled_tensor.cu, the same pipeline on tensor cores): the split-K sum of a cluster's
 * partial tiles through distributed shared memory, and how many K slices a grid wants. Also
 * rung 5's copy of a tile into shared memory, K-major (tile[kk][i]) whatever the operand's
 * layout in memory (rung 10 keeps the layout instead). gemm_5_tiled.cu's opening comment says
 * why each is so. */
#ifndef MLP_GEMM_TILED_PARTS_CUH
#define MLP_GEMM_TILED_PARTS_CUH

#include <cooperative_groups.h>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_output.cuh"
#include "cuda/gemm/gemm_split_k.cuh"

namespace {

constexpr int MAX_SLICES = 8; /* split-K: blocks in a cluster, the most any GPU guarantees */

/* Starts copying tile[kk][i] = X(i0 + i, k0 + kk), kk < BK, i < WIDTH (zero outside the
 * matrix), where X is op(A) (i: a row of C) or op(B)ᵀ (i: a column of C), stored with element
 * (i, k) at x[i·ld + k] when K_CONTIGUOUS, else at x[k·ld + i]. */
template <int BK, int WIDTH, int LINE, int THREADS, bool K_CONTIGUOUS>
__device__ __forceinline__ void copy_tile(float *tile, const float *x, int ld, int i0, int k0,
                                          int i_end, int k_end, bool vectors) {
    static_assert(WIDTH * BK % THREADS == 0, "every thread copies the same number of floats");
    if constexpr (!K_CONTIGUOUS) { /* the tile's rows are the matrix's rows: 16-byte copies */
        copy_tile_async<float, BK, WIDTH, LINE, THREADS>(tile, x + (size_t)k0 * ld + i0, ld, k0, i0,
                                                        k_end, i_end, vectors);
    } else { /* transposing, one float per copy. A warp takes 8 consecutive k (one 32-byte
              * sector of global memory) of 4 consecutive i: its stores land in shared memory at
              * kk·LINE + i, banks 4·kk + i (LINE is 4 more than a multiple of 32), all 32
              * different. (Lanes along 32 k of one i, the obvious order, hit every bank 4
              * times; measured, that made no difference at 4096³, where the FMAs are the
              * limit, but it is no dearer.) Each thread keeps its k and moves I_PER_ROUND
              * values of i each round. */
        constexpr int K_OCTETS = BK / 8, I_PER_ROUND = THREADS / BK, ROUNDS = WIDTH / I_PER_ROUND;
        static_assert(BK % 8 == 0 && (THREADS / 32) % K_OCTETS == 0 && WIDTH % I_PER_ROUND == 0,
                      "whole warps of 8 k × 4 i, whole rounds");
        static_assert(LINE % 32 == 4, "conflict-free stores need LINE = 4 mod 32");
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        const int kk = warp % K_OCTETS * 8 + lane % 8, i = warp / K_OCTETS * 4 + lane / 8;
        float *to = tile + kk * LINE + i;
        const float *from = x + (size_t)(i0 + i) * ld + (k0 + kk);
        const size_t round_stride = (size_t)I_PER_ROUND * ld;
        if (i0 + WIDTH <= i_end && k0 + BK <= k_end) { /* the whole tile is inside */
#pragma unroll
            for (int round = 0; round < ROUNDS; round++, from += round_stride)
                cp_async_4(to + round * I_PER_ROUND, from);
        } else {
            const bool k_inside = k0 + kk < k_end;
#pragma unroll 1
            for (int round = 0; round < ROUNDS; round++, from += round_stride) {
                if (k_inside && i0 + i + round * I_PER_ROUND < i_end) cp_async_4(to + round * I_PER_ROUND, from);
                else to[round * I_PER_ROUND] = 0.0f;
            }
        }
    }
}

/* Stores the block's tile of C (rows row0.., columns col0..), each element the sum of the
 * cluster's partial tiles: the split-K reduction described at the top. Every thread has left
 * its accumulators at its patches of `tile` (BM×BN, row-major, in its block's shared memory). */
template <int BM, int BN, int THREADS>
__device__ __forceinline__ void store_cluster_sum(float *tile, const gemm_output &out, int m, int n,
                                                  int row0, int col0) {
    namespace cg = cooperative_groups;
    constexpr int QUADS = BM * BN / 4, QUADS_PER_ROW = BN / 4;
    cg::cluster_group cluster = cg::this_cluster();
    const int slices = (int)cluster.num_blocks();
    cluster.sync(); /* every block's partial tile is in its shared memory */
    for (int q = (int)cluster.block_rank() * THREADS + threadIdx.x; q < QUADS; q += slices * THREADS) {
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int z = 0; z < slices; z++) {
            const float4 part = reinterpret_cast<const float4 *>(cluster.map_shared_rank(tile, z))[q];
            sum.x += part.x, sum.y += part.y, sum.z += part.z, sum.w += part.w;
        }
        store_quad(out, m, n, row0 + q / QUADS_PER_ROW, col0 + q % QUADS_PER_ROW * 4, sum);
    }
    /* The other blocks must have read this one's tile before it exits. Their reads are done
     * (each fed a store above), so a relaxed arrival will do: unlike cluster.sync()'s, it does
     * not wait for this block's stores to C to complete. */
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

/* Whether this GPU runs thread block clusters (compute capability 9.0 on): split-K needs them. */
bool clusters_available() {
    static int available = -1;
    if (available < 0) {
        int device;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&available, cudaDevAttrClusterLaunch, device));
    }
    return available != 0;
}

/* Slices for a grid of `tiles` blocks: the largest power of two that keeps it within two blocks
 * per multiprocessor, at most MAX_SLICES. Measured on an H200 (132 multiprocessors, graphs of
 * back-to-back GEMMs, 2026-11-24): layer 1's weight gradient at batch 512 (784×256×512, 52
 * tiles) took 10.5 µs in 4 slices, 10.5 in 5, 12.0 in 6 and 14.2 in 3; at batch 2048 32.9 µs in
 * 4, 34.0 in 6 and 31.6 in 8 (and 39.4 in 5, measured before the relaxed cluster barrier).
 * Clusters of 5 to 7 blocks place worse than 4 or 8. */
long power_of_two_slices(long tiles, int sms) {
    long slices = 1;
    while (slices < MAX_SLICES && 2 * slices * tiles <= 2L * sms) slices *= 2;
    return slices;
}

} // namespace

#endif
