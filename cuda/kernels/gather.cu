/* Building a batch on the device: gathering the shuffled samples' pixels (bytes) and labels,
 * and converting pixels to normalized floats.
 *
 * Where a row's pixels are a multiple of 4 (MNIST's 784), a thread converts four: one 4-byte
 * load and one 16-byte store, a quarter of the instructions of one pixel a thread (4.0 µs a
 * batch of 512 on an H200, in the trace before that change). The threads run over the batch's
 * quads as one flat range (row = quad / quads a row), so that no thread idles: with a block
 * per row, 196 quads left 60 of 256 threads with nothing to do (4.99 µs a batch of 2048, the
 * trace of 2026-11-24 14:11 UTC; an epoch at batch 2048 went 2.132 → 2.127 ms). Sixteen pixels
 * a thread in 98 blocks instead of 512 was slower at batch 512 (2.7 → 3.5 µs: the kernel's
 * time is mostly the latency of its three dependent loads, the cursor, the sample's index and
 * its pixels). Otherwise a block's y-index is a row of the batch, its threads run along the
 * row's pixels, one each. Reads of a sample's bytes and writes of its floats are coalesced
 * either way. A batch gathered ahead (gpu_feed.cu) is found past the cursor (source.ahead),
 * stops at the pass's end, and runs in a capped grid, each thread taking several quads. A 16-bit
 * copy of x, where asked for (BF16, or TF32 values in FP16), is written beside it (8 bytes a
 * quad). A pixel's value is one fused multiply-add, as the feed's check of the FP16 copy's
 * exactness assumes (gpu_feed.cu). */
#include <climits>

#include "libs/cuda_check.h"
#include "cuda/kernels/narrow_quad.cuh"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* x is rows×features; source.pixels count×features; the batch's rows: find_batch. The
 * thread of a row's first pixel (quad) writes its label, loaded before the pixels are written,
 * which (bytes may alias anything) the compiler could not move it above: so its latency overlaps
 * theirs. */

/* The batch's first sample's place in the pass's order (0 without an order), and its rows: at
 * most `rows`, and none past the pass's end. The two loads are independent, so their latencies
 * overlap. */
struct batch_rows {
    const int32_t *indices; /* NULL: row r is sample r */
    int rows;
};
__device__ __forceinline__ batch_rows find_batch(const gpu_batch_source &source, int rows) {
    if (!source.order) return {nullptr, rows};
    const int first = source.cursor->first_row + source.ahead, pass_rows = *source.pass_rows;
    const int left = pass_rows - first;
    return {source.order + first, left < rows ? (left > 0 ? left : 0) : rows};
}

__device__ __forceinline__ float normalized(uint8_t pixel, float scale, float shift) {
    return __fmaf_rn(pixel, scale, shift);
}

/* features a multiple of 4: every row of pixels, of x and of its copy starts 4-, 16- and 8-byte
 * aligned (their bases come from cudaMalloc) */
__global__ void gather_quads_kernel(gpu_batch_source source, int max_rows, int features,
                                    float scale, float shift, float *x, __nv_bfloat16 *x_bf16,
                                    __half *x_tf32, uint8_t *y) {
    wait_for_previous_kernel();
    const batch_rows batch = find_batch(source, max_rows);
    const int quads_per_row = features / 4, quads = batch.rows * quads_per_row; /* < 2^31: the caller */
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
        const int row = q / quads_per_row, quad = q - row * quads_per_row;
        const size_t sample = batch.indices ? (size_t)batch.indices[row] : (size_t)row;
        const uint8_t label = quad == 0 ? source.labels[sample] : 0;
        const uchar4 p = reinterpret_cast<const uchar4 *>(source.pixels + sample * features)[quad];
        const float4 v = make_float4(normalized(p.x, scale, shift), normalized(p.y, scale, shift),
                                     normalized(p.z, scale, shift), normalized(p.w, scale, shift));
        reinterpret_cast<float4 *>(x + (size_t)row * features)[quad] = v;
        if (x_bf16) store_bf16_quad(x_bf16 + (size_t)row * features, quad, v);
        if (x_tf32) store_tf32_in_fp16_quad(x_tf32 + (size_t)row * features, quad, v);
        if (quad == 0) y[row] = label;
    }
}

__global__ void gather_pixels_kernel(gpu_batch_source source, int max_rows, int features,
                                     float scale, float shift, float *x, __nv_bfloat16 *x_bf16,
                                     __half *x_tf32, uint8_t *y) {
    wait_for_previous_kernel();
    const batch_rows batch = find_batch(source, max_rows);
    const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    const bool labeller = blockIdx.x == 0 && threadIdx.x == 0; /* one thread per row writes y */
    for (int row = blockIdx.y; row < batch.rows; row += gridDim.y) {
        size_t sample = batch.indices ? (size_t)batch.indices[row] : (size_t)row;
        const uint8_t label = labeller ? source.labels[sample] : 0;
        const uint8_t *pixels = source.pixels + sample * features;
        float *destination = x + (size_t)row * features;
        for (int f = first; f < features; f += stride) {
            const float value = normalized(pixels[f], scale, shift);
            destination[f] = value;
            if (x_bf16) x_bf16[(size_t)row * features + f] = __float2bfloat16_rn(value);
            if (x_tf32) x_tf32[(size_t)row * features + f] = tf32_in_fp16(value);
        }
        if (labeller) y[row] = label;
    }
}

} // namespace

void gpu_gather_normalize(cudaStream_t stream, gpu_batch_source source, int rows, int features,
                          float scale, float shift, float *x, __nv_bfloat16 *x_bf16,
                          __half *x_tf32, uint8_t *y, unsigned max_blocks) {
    if (rows == 0) return;
    const unsigned cap = max_blocks ? max_blocks : 65535;
    const size_t quads = (size_t)rows * (features / 4);
    if (features % 4 == 0 && quads <= INT_MAX) {
        size_t wanted = (quads + THREADS - 1) / THREADS;
        unsigned blocks = wanted < 1 ? 1 : wanted < cap ? (unsigned)wanted : cap;
        launch_dependent(gather_quads_kernel, blocks, THREADS, 0, stream, 1, source, rows, features,
                         scale, shift, x, x_bf16, x_tf32, y);
        return;
    }
    const unsigned along_row = blocks_for(features, THREADS);
    const unsigned row_cap = cap / along_row > 1 ? cap / along_row : 1;
    dim3 blocks(along_row, (unsigned)rows < row_cap ? (unsigned)rows : row_cap);
    launch_dependent(gather_pixels_kernel, blocks, THREADS, 0, stream, 1, source, rows, features,
                     scale, shift, x, x_bf16, x_tf32, y);
}
