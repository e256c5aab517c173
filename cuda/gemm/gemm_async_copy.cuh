/* Asynchronous copies from global to shared memory (cp.async, sm_80 and later), for the GEMM
 * rungs that overlap loading the next tiles with multiplying the current one.
 *
 * cp.async hands a copy to the memory system and lets the thread go on; copies are grouped by
 * cp_async_commit(), and cp_async_wait<N>() blocks until at most N of the thread's groups are
 * still in flight. A copy lands in shared memory without passing through registers, so it is
 * visible to the other threads only after the wait and a __syncthreads().
 *
 * The 16-byte form needs 16-byte aligned addresses on both sides (PTX ISA, cp.async); the
 * 4-byte form, 4-byte aligned ones. Every copy here is whole: an element outside the matrix is
 * never read, its place in shared memory gets an ordinary store of zero instead. */
#ifndef MLP_GEMM_ASYNC_COPY_CUH
#define MLP_GEMM_ASYNC_COPY_CUH

#include <cstdint>

__device__ __forceinline__ uint32_t shared_address(const void *pointer) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

/* 16 bytes, cached in L2 only (.cg: each tile is read once per block). */
__device__ __forceinline__ void cp_async_16(void *shared, const void *global) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(shared)),
                 "l"(global)
                 : "memory");
}

/* 4 bytes (.ca is the only cache mode the 4-byte form has). */
__device__ __forceinline__ void cp_async_4(void *shared, const void *global) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared_address(shared)),
                 "l"(global)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int GROUPS_IN_FLIGHT> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(GROUPS_IN_FLIGHT) : "memory");
}

/* Copies a tile of LINES × WIDTH elements of a row-major matrix into shared memory, where each
 * line starts SHARED_LINE elements after the previous one (WIDTH plus padding).
 *
 * `global` points at the matrix's element (line0, pos0); its lines are `ld` elements apart and
 * its elements along a line are contiguous. Lines at or past line_end, and positions at or
 * past pos_end, are outside the matrix and become zeros. The copy is cut into 16-byte chunks;
 * consecutive threads take consecutive chunks of a line, so a warp reads whole segments, and
 * each thread keeps the same position in every round, LINES_PER_ROUND lines further each time.
 *
 * A tile wholly inside an aligned matrix (`vectors`: the matrix and its row stride are 16-byte
 * aligned) is all cp_async_16 with no checks: the common case. Otherwise each chunk is checked:
 * a chunk wholly inside goes by cp_async_16 if `vectors`, the others element by element through
 * registers, which is slower but needs no alignment: the edge of a matrix whose size is not a
 * multiple of the chunk, and matrices with odd strides or offsets. */
template <typename T, int LINES, int WIDTH, int SHARED_LINE, int THREADS>
__device__ __forceinline__ void copy_tile_async(T *shared, const T *global, int ld, int line0,
                                                int pos0, int line_end, int pos_end, bool vectors) {
    constexpr int CHUNK = 16 / sizeof(T);
    constexpr int CHUNKS_PER_LINE = WIDTH / CHUNK;
    constexpr int LINES_PER_ROUND = THREADS / CHUNKS_PER_LINE, ROUNDS = LINES / LINES_PER_ROUND;
    static_assert(WIDTH % CHUNK == 0 && THREADS % CHUNKS_PER_LINE == 0 && LINES % LINES_PER_ROUND == 0,
                  "the tile must split into whole chunks, the same number per thread");
    static_assert(SHARED_LINE % CHUNK == 0, "shared lines must keep 16-byte alignment");
    const int line = threadIdx.x / CHUNKS_PER_LINE, pos = (threadIdx.x % CHUNKS_PER_LINE) * CHUNK;
    T *to = shared + line * SHARED_LINE + pos;
    const T *from = global + (size_t)line * ld + pos;
    const size_t round_stride = (size_t)LINES_PER_ROUND * ld;
    if (vectors && line0 + LINES <= line_end && pos0 + WIDTH <= pos_end) {
#pragma unroll
        for (int round = 0; round < ROUNDS; round++, from += round_stride)
            cp_async_16(to + round * LINES_PER_ROUND * SHARED_LINE, from);
        return;
    }
    const int inside_line = min(CHUNK, max(0, pos_end - (pos0 + pos))); /* of a line inside */
    /* not unrolled: this path is rare, and unrolled it keeps every chunk's address in registers */
#pragma unroll 1
    for (int round = 0; round < ROUNDS; round++, from += round_stride) {
        T *chunk = to + round * LINES_PER_ROUND * SHARED_LINE;
        const int inside = line0 + line + round * LINES_PER_ROUND < line_end ? inside_line : 0;
        if (vectors && inside == CHUNK) {
            cp_async_16(chunk, from);
        } else {
#pragma unroll
            for (int e = 0; e < CHUNK; e++) chunk[e] = e < inside ? from[e] : T(0.0f);
        }
    }
}

#endif
