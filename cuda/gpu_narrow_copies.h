/* 16-bit copies of FP32 arrays that rung 10's products read in place of the arrays, half the
 * bytes, for the same bits: a copy holds what the product would round each element to. Two
 * formats, one a backend:
 * - BF16 (--precision bf16, tiled and fused): each element rounded to nearest even. Where both
 *   operands of a product have a current copy, it reads the copies (gpu_gemm_tiled_bf16_stored).
 *   The batch's copy is written by the gather (gpu_feed.cu), the hidden delta's by the output
 *   layer's rows (output_layer.cu), the parameters' by the update (optimizers.cu), and by a
 *   rounding pass after an upload or an all-gather.
 * - TF32 in FP16 (--precision tf32, tiled and fused): each element rounded to TF32 (cvt.rna), held
 *   exactly as FP16, which only values that are zero or at least 2^-14 in magnitude allow: so only
 *   the batch has one, written by the gather where every normalized pixel value fits
 *   (gpu_feed.cu). Where A has a current copy, a product reads it (gpu_gemm_tiled_tf32_fp16_a).
 *
 * The backend keeps here, in the order the operations are queued, which copies hold their
 * arrays' values: an operation that writes an array without its copy (a GEMM's C) marks the copy
 * stale (gpu_narrow_copies_written) until the next write of both. A recorded step replays the
 * queue's order, so the same holds in a graph, provided the copies it found current are current
 * at each replay (the backend checks: gpu_narrow_copies_snapshot). Memory: each copy's is its
 * owner's; an entry is dropped before it is freed. */
#ifndef MLP_GPU_NARROW_COPIES_H
#define MLP_GPU_NARROW_COPIES_H

#include <cstddef>

enum gpu_narrow_format {
    NARROW_NONE,         /* no copies kept */
    NARROW_BF16,         /* __nv_bfloat16: rounded to nearest even */
    NARROW_TF32_IN_FP16, /* __half: rounded to TF32, held exactly */
};

struct gpu_narrow_copy {
    const float *origin; /* the array: count floats */
    size_t count;
    void *copy;          /* count 16-bit values of the registry's format */
    bool current;        /* copy[i] is origin[i] rounded, for every i */
};

constexpr int GPU_NARROW_COPIES_MAX = 16; /* three feeds of two batches, the parameters, the delta: 8 */

struct gpu_narrow_copies {
    gpu_narrow_format format;
    gpu_narrow_copy entries[GPU_NARROW_COPIES_MAX];
    int count;
};

/* copy now holds the values of origin[0..count) (the caller has just queued the write of both):
 * the entry of `copy` is made or moved to origin, and current; another copy's entry for origin
 * is dropped (one array, one copy). */
void gpu_narrow_copy_bind(gpu_narrow_copies *copies, void *copy, const float *origin, size_t count);

/* The same entry, stale: its copy is there to be written, not yet read. */
void gpu_narrow_copy_add_stale(gpu_narrow_copies *copies, void *copy, const float *origin,
                               size_t count);

/* Whether the array of e shares any byte with [p, p + bytes). */
bool gpu_narrow_copy_overlaps(const gpu_narrow_copy *e, const void *p, size_t bytes);

/* Bytes [p, p + bytes) are being written without their copies: the copies that cover any of
 * them are stale. */
void gpu_narrow_copies_written(gpu_narrow_copies *copies, const void *p, size_t bytes);

/* The entry whose array contains [p, p + count), or nullptr. */
gpu_narrow_copy *gpu_narrow_copy_covering(gpu_narrow_copies *copies, const float *p, size_t count);

/* The current copy of [p, p + count) (its element for p, of the registry's format), or nullptr. */
const void *gpu_narrow_copy_of(gpu_narrow_copies *copies, const float *p, size_t count);

/* Which copies are current (their memory), to compare with later: a recorded step decided at
 * recording which copies to read, so they must be current whenever it is replayed. */
struct gpu_narrow_copies_snapshot {
    const void *current[GPU_NARROW_COPIES_MAX];
    int count;
};
gpu_narrow_copies_snapshot gpu_narrow_copies_current(const gpu_narrow_copies *copies);
bool gpu_narrow_copies_still_current(const gpu_narrow_copies *copies, const gpu_narrow_copies_snapshot &then);

/* Drops the entries of an array about to be freed (origin p) and of a copy about to be freed. */
void gpu_narrow_copies_forget_origin(gpu_narrow_copies *copies, const void *p);
void gpu_narrow_copies_forget_copy(gpu_narrow_copies *copies, const void *copy);

#endif
