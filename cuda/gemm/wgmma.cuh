/* What the wgmma rungs (gemm_8_bf16_wgmma.cu, gemm_9_tf32_wgmma.cu, gemm_11_wgmma_tma.cu) share:
 * the check that the GPU runs wgmma, the shared-memory matrix descriptor of the 128-byte swizzle
 * layout, the fences and waits around wgmma.mma_async (PTX ISA, "Asynchronous Warpgroup Level
 * Matrix Multiply-Accumulate"), and the store of a warpgroup's accumulators. sm_90a only:
 * include it from files built for that target alone. */
#ifndef MLP_WGMMA_CUH
#define MLP_WGMMA_CUH

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_output.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "wgmma needs the sm_90a target (CMake: CUDA_ARCHITECTURES 90a)"
#endif

/* Exits with a message naming `caller` unless this GPU runs wgmma (gpu_gemm_wgmma_available). */
inline void require_wgmma(const char *caller) {
    if (gpu_gemm_wgmma_available()) return;
    std::fprintf(stderr, "%s: needs a GPU of compute capability 9.0 (Hopper)\n", caller);
    std::exit(1);
}

/* The 128-byte swizzle: rows of 128 bytes in which the 16-byte chunk j of row r is stored at
 * chunk j ^ (r % 8); the pattern repeats every 8 rows, so a tile starts on 1024 bytes. */
constexpr int ROW_BYTES = 128, SWIZZLE_BYTES = 8 * ROW_BYTES;

__device__ __forceinline__ int swizzled_chunk(int chunk, int row) { return (chunk ^ (row % 8)) * 16; }

/* The 64-bit shared-memory matrix descriptor: start address, leading and stride byte offsets,
 * all in 16-byte units, base offset 0 (tiles start on 1024 bytes), 128-byte swizzle (mode 1 in
 * bits 62-63) (PTX ISA, "Matrix Descriptor Format"). */
__device__ __forceinline__ uint64_t descriptor(const char *start, int leading_bytes, int stride_bytes) {
    return (uint64_t)((shared_address(start) & 0x3FFFF) >> 4) | (uint64_t)(leading_bytes >> 4) << 16 |
           (uint64_t)(stride_bytes >> 4) << 32 | (uint64_t)1 << 62;
}

/* Orders this thread's ordinary (generic proxy) writes to shared memory, cp.async included,
 * before the tensor cores' reads through the async proxy; a barrier must follow. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int GROUPS_IN_FLIGHT> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(GROUPS_IN_FLIGHT) : "memory");
}

/* Keeps the compiler from moving accesses to the accumulators across the points where
 * asynchronous wgmma may be writing them. */
template <int N> __device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* Stores a warpgroup's m64nN accumulators, its 64×N of C from (row0, col0), into out: alpha ·
 * acc + beta · C inside the m×n matrix. The accumulators are wgmma's D fragments: lane
 * (g = lane / 4, t = lane % 4) of the warpgroup's warp w holds, for j < N / 8, rows 16w + g and
 * 16w + g + 8 of columns 8j + 2t and 8j + 2t + 1, at acc[4j .. 4j + 3]. */
template <int N>
__device__ __forceinline__ void store_accumulators(const float (&acc)[N / 2], const gemm_output &out,
                                                   int m, int n, int row0, int col0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row = row0 + 16 * (threadIdx.x / 32 % 4) + g;
#pragma unroll
    for (int j = 0; j < N / 8; j++) {
        const int col = col0 + 8 * j + 2 * t;
        store_pair(out, m, n, row, col, acc[4 * j], acc[4 * j + 1]);
        store_pair(out, m, n, row + 8, col, acc[4 * j + 2], acc[4 * j + 3]);
    }
}

#endif
