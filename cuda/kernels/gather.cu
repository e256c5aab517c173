/* Building a batch on the device: gathering the shuffled samples' pixels (bytes) and labels,
 * and converting pixels to normalized floats. Block y-index = row of the batch; threads run
 * along the row's pixels, so reads of a sample's bytes and writes of its floats are coalesced.
 * Where a row's pixels are a multiple of 4 (MNIST's 784), a thread converts four: one 4-byte
 * load and one 16-byte store, a quarter of the instructions and blocks of one pixel a thread
 * (4.0 µs a batch of 512 on an H200, in the trace before this change). Sixteen pixels a thread
 * in 98 blocks instead of 512 was slower (2.7 → 3.5 µs: the kernel's time is mostly the latency
 * of its three dependent loads, the cursor, the sample's index and its pixels). */
#include "../cuda_check.h"
#include "dependent_launch.cuh"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* x is rows×features; pixels count×features; order == NULL: sample r is row r. QUADS: features
 * is a multiple of 4, so every row of pixels and of x starts 4-byte and 16-byte aligned. */
template <bool QUADS>
__global__ void gather_normalize_kernel(const uint8_t *pixels, const uint8_t *labels,
                                        const int32_t *order, const pass_cursor *cursor, int rows,
                                        int features, float scale, float shift, float *x,
                                        uint8_t *y) {
    wait_for_previous_kernel();
    const int32_t *indices = order ? order + cursor->first_row : nullptr;
    const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    const bool labeller = blockIdx.x == 0 && threadIdx.x == 0; /* one thread per row writes y */
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        size_t sample = indices ? (size_t)indices[row] : (size_t)row;
        /* loaded before the pixels are written, which (bytes may alias anything) the compiler
         * could not move it above: so its latency overlaps theirs instead of following it */
        const uint8_t label = labeller ? labels[sample] : 0;
        const uint8_t *source = pixels + sample * features;
        float *destination = x + (size_t)row * features;
        if (QUADS) {
            const uchar4 *quads = reinterpret_cast<const uchar4 *>(source);
            float4 *out = reinterpret_cast<float4 *>(destination);
            for (int q = first; q < features / 4; q += stride) {
                uchar4 p = quads[q];
                out[q] = make_float4(p.x * scale + shift, p.y * scale + shift, p.z * scale + shift,
                                     p.w * scale + shift);
            }
        } else {
            for (int f = first; f < features; f += stride) destination[f] = source[f] * scale + shift;
        }
        if (labeller) y[row] = label;
    }
}

} // namespace

void gpu_gather_normalize(cudaStream_t stream, const uint8_t *pixels, const uint8_t *labels,
                          const int32_t *order, const pass_cursor *cursor, int rows,
                          int features, float scale, float shift, float *x, uint8_t *y) {
    if (rows == 0) return;
    const bool quads = features % 4 == 0;
    dim3 blocks(blocks_for(quads ? features / 4 : features, THREADS), rows < 65535 ? rows : 65535);
    auto kernel = quads ? gather_normalize_kernel<true> : gather_normalize_kernel<false>;
    launch_dependent(kernel, blocks, THREADS, 0, stream, 1, pixels, labels, order, cursor, rows,
                     features, scale, shift, x, y);
}
