/* The end of a step on the device: the pass cursor (src/backend.h) moves to the next batch and
 * counts the update. One thread; it exists so that everything that changes between steps is
 * changed by the device itself, and a recorded step can be replayed as it is. */
#include "../cuda_check.h"
#include "gpu_kernels.h"

namespace {

__global__ void advance_cursor_kernel(pass_cursor *cursor, int rows) {
    cursor->first_row += rows;
    cursor->optimizer_steps += 1;
}

} // namespace

void gpu_advance_cursor(cudaStream_t stream, pass_cursor *cursor, int rows) {
    advance_cursor_kernel<<<1, 1, 0, stream>>>(cursor, rows);
    CUDA_CHECK_LAUNCH();
}
