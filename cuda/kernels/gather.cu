/* Building a batch on the device: gathering the shuffled samples' pixels (bytes) and labels,
 * and converting pixels to normalized floats. Block y-index = row of the batch; threads run
 * along the row's pixels, so reads of a sample's bytes and writes of its floats are coalesced. */
#include "../cuda_check.h"
#include "gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;

/* x is rows×features; pixels count×features; order == NULL: sample r is row r. */
__global__ void gather_normalize_kernel(const uint8_t *pixels, const uint8_t *labels,
                                        const int32_t *order, const pass_cursor *cursor, int rows,
                                        int features, float scale, float shift, float *x,
                                        uint8_t *y) {
    const int32_t *indices = order ? order + cursor->first_row : nullptr;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        size_t sample = indices ? (size_t)indices[row] : (size_t)row;
        const uint8_t *source = pixels + sample * features;
        float *destination = x + (size_t)row * features;
        for (int f = blockIdx.x * blockDim.x + threadIdx.x; f < features; f += gridDim.x * blockDim.x)
            destination[f] = source[f] * scale + shift;
        if (blockIdx.x == 0 && threadIdx.x == 0) y[row] = labels[sample];
    }
}

} // namespace

void gpu_gather_normalize(cudaStream_t stream, const uint8_t *pixels, const uint8_t *labels,
                          const int32_t *order, const pass_cursor *cursor, int rows,
                          int features, float scale, float shift, float *x, uint8_t *y) {
    if (rows == 0) return;
    dim3 blocks(blocks_for(features, THREADS), rows < 65535 ? rows : 65535);
    gather_normalize_kernel<<<blocks, THREADS, 0, stream>>>(pixels, labels, order, cursor, rows,
                                                            features, scale, shift, x, y);
    CUDA_CHECK_LAUNCH();
}
