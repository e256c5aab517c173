/* BF16 copies of FP32 arrays, for --precision bf16 on the tiled and fused implementations: where
 * both operands of a BF16 product have a current copy, the product reads the copies (half the
 * bytes; gemm_10_tiled_tensor.cu's stored-BF16 kernels) and gives the bits it would give on the
 * arrays, since a copy holds what the product would round each element to (nearest, ties to
 * even).
 *
 * A copy is written by the kernels that write its array, in the same launch: the batch's by the
 * gather (gpu_feed.cu), the hidden delta's by the output layer's rows (output_layer.cu), the
 * parameters' by the update (optimizers.cu), and by a rounding pass after an upload or an
 * all-gather. Only these three kinds of array have copies. The backend keeps here, in the order
 * the operations are queued, which copies hold their arrays' values: an operation that writes
 * an array without its copy (a GEMM's C) marks the copy stale (gpu_bf16_copies_written) until
 * the next write of both. A recorded step replays the queue's order, so the same
 * holds in a graph, provided the copies it found current are current at each replay (the backend
 * checks: gpu_bf16_copies_snapshot). Memory: each copy's is its owner's; an entry is dropped
 * before it is freed. */
#ifndef MLP_GPU_BF16_COPIES_H
#define MLP_GPU_BF16_COPIES_H

#include <cstddef>
#include <cuda_bf16.h>

struct gpu_bf16_copy {
    const float *origin; /* the array: count floats */
    size_t count;
    __nv_bfloat16 *copy; /* count BF16 values */
    bool current;        /* copy[i] is origin[i] rounded, for every i */
};

constexpr int GPU_BF16_COPIES_MAX = 16; /* three feeds of two batches, the parameters, the delta: 8 */

struct gpu_bf16_copies {
    gpu_bf16_copy entries[GPU_BF16_COPIES_MAX];
    int count;
};

/* copy now holds the values of origin[0..count) (the caller has just queued the write of both):
 * the entry of `copy` is made or moved to origin, and current. */
void gpu_bf16_copy_bind(gpu_bf16_copies *copies, __nv_bfloat16 *copy, const float *origin, size_t count);

/* The same entry, stale: its copy is there to be written, not yet read. */
void gpu_bf16_copy_add_stale(gpu_bf16_copies *copies, __nv_bfloat16 *copy, const float *origin,
                             size_t count);

/* Whether the array of e shares any byte with [p, p + bytes). */
bool gpu_bf16_copy_overlaps(const gpu_bf16_copy *e, const void *p, size_t bytes);

/* Bytes [p, p + bytes) are being written without their copies: the copies that cover any of
 * them are stale. */
void gpu_bf16_copies_written(gpu_bf16_copies *copies, const void *p, size_t bytes);

/* The entry whose array contains [p, p + count), or nullptr. */
gpu_bf16_copy *gpu_bf16_copy_covering(gpu_bf16_copies *copies, const float *p, size_t count);

/* The current copy of [p, p + count) (its element for p), or nullptr. */
const __nv_bfloat16 *gpu_bf16_copy_of(gpu_bf16_copies *copies, const float *p, size_t count);

/* Which copies are current (their memory), to compare with later: a recorded step decided at
 * recording which copies to read, so they must be current whenever it is replayed. */
struct gpu_bf16_copies_snapshot {
    const __nv_bfloat16 *current[GPU_BF16_COPIES_MAX];
    int count;
};
gpu_bf16_copies_snapshot gpu_bf16_copies_current(const gpu_bf16_copies *copies);
bool gpu_bf16_copies_still_current(const gpu_bf16_copies *copies, const gpu_bf16_copies_snapshot &then);

/* Drops the entries of an array about to be freed (origin p) and of a copy about to be freed. */
void gpu_bf16_copies_forget_origin(gpu_bf16_copies *copies, const void *p);
void gpu_bf16_copies_forget_copy(gpu_bf16_copies *copies, const __nv_bfloat16 *copy);

#endif
