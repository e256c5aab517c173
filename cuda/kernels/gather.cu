/* Building a batch on the device: gathering the shuffled samples' pixels (bytes) and labels,
 * and converting pixels to normalized floats.
 *
 * Where a row's pixels are a multiple of 4 (MNIST's 784), a thread converts four: one 4-byte
 * load and one 16-byte store, a quarter of the instructions of one pixel a thread (4.0 µs a
 * batch of 512 on an H200, in the trace before that change). The threads run over the batch's
 * quads as one flat range (row = quad / quads a row), so that no thread idles: with a block
 * per row, 196 quads left 60 of 256 threads with nothing to do (4.99 µs a batch of 2048, the
 * trace of 2026-11-24 14:11 UTC; an epoch at batch 2048 went 2.132 → 2.127 ms). Sixteen pixels a thread in 98 blocks instead of 512 was
 * slower at batch 512 (2.7 → 3.5 µs: the kernel's time is mostly the latency of its three
 * dependent loads, the cursor, the sample's index and its pixels). Otherwise a block's y-index
 * is a row of the batch, its threads run along the row's pixels, one each. Reads of a sample's
 * bytes and writes of its floats are coalesced either way. */
#include <climits>

#include "../cuda_check.h"
#include "dependent_launch.cuh"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* x is rows×features; pixels count×features; order == NULL: sample r is row r. The thread of a
 * row's first pixel (quad) writes its label, loaded before the pixels are written, which (bytes
 * may alias anything) the compiler could not move it above: so its latency overlaps theirs. */

/* features a multiple of 4: every row of pixels and of x starts 4- and 16-byte aligned */
__global__ void gather_quads_kernel(const uint8_t *pixels, const uint8_t *labels,
                                    const int32_t *order, const pass_cursor *cursor, int rows,
                                    int features, float scale, float shift, float *x, uint8_t *y) {
    wait_for_previous_kernel();
    const int32_t *indices = order ? order + cursor->first_row : nullptr;
    const int quads_per_row = features / 4, quads = rows * quads_per_row; /* < 2^31: the caller */
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
        const int row = q / quads_per_row, quad = q - row * quads_per_row;
        const size_t sample = indices ? (size_t)indices[row] : (size_t)row;
        const uint8_t label = quad == 0 ? labels[sample] : 0;
        const uchar4 p = reinterpret_cast<const uchar4 *>(pixels + sample * features)[quad];
        reinterpret_cast<float4 *>(x + (size_t)row * features)[quad] =
            make_float4(p.x * scale + shift, p.y * scale + shift, p.z * scale + shift, p.w * scale + shift);
        if (quad == 0) y[row] = label;
    }
}

__global__ void gather_pixels_kernel(const uint8_t *pixels, const uint8_t *labels,
                                     const int32_t *order, const pass_cursor *cursor, int rows,
                                     int features, float scale, float shift, float *x, uint8_t *y) {
    wait_for_previous_kernel();
    const int32_t *indices = order ? order + cursor->first_row : nullptr;
    const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    const bool labeller = blockIdx.x == 0 && threadIdx.x == 0; /* one thread per row writes y */
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        size_t sample = indices ? (size_t)indices[row] : (size_t)row;
        const uint8_t label = labeller ? labels[sample] : 0;
        const uint8_t *source = pixels + sample * features;
        float *destination = x + (size_t)row * features;
        for (int f = first; f < features; f += stride) destination[f] = source[f] * scale + shift;
        if (labeller) y[row] = label;
    }
}

} // namespace

void gpu_gather_normalize(cudaStream_t stream, const uint8_t *pixels, const uint8_t *labels,
                          const int32_t *order, const pass_cursor *cursor, int rows,
                          int features, float scale, float shift, float *x, uint8_t *y) {
    if (rows == 0) return;
    const size_t quads = (size_t)rows * (features / 4);
    if (features % 4 == 0 && quads <= INT_MAX) {
        constexpr unsigned MAX_BLOCKS = 65535;
        size_t wanted = (quads + THREADS - 1) / THREADS;
        unsigned blocks = wanted < 1 ? 1 : wanted < MAX_BLOCKS ? (unsigned)wanted : MAX_BLOCKS;
        launch_dependent(gather_quads_kernel, blocks, THREADS, 0, stream, 1, pixels, labels, order,
                         cursor, rows, features, scale, shift, x, y);
        return;
    }
    dim3 blocks(blocks_for(features, THREADS), rows < 65535 ? rows : 65535);
    launch_dependent(gather_pixels_kernel, blocks, THREADS, 0, stream, 1, pixels, labels, order,
                     cursor, rows, features, scale, shift, x, y);
}
