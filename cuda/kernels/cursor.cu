/* The pass cursor (core/backend.h) moves to the next batch and counts a step, on the device, so
 * that everything that changes between steps is changed by the device itself and a recorded step
 * can be replayed as it is. One thread. A training step's update moves its cursor itself
 * (optimizers.cu); this kernel serves the test pass, which has no update. */
#include "libs/cuda_check.h"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"

namespace {

__global__ void advance_cursor_kernel(pass_cursor *cursor, int rows) {
    wait_for_previous_kernel();
    cursor->first_row += rows;
    cursor->optimizer_steps += 1;
}

} // namespace

void gpu_advance_cursor(cudaStream_t stream, pass_cursor *cursor, int rows) {
    launch_dependent(advance_cursor_kernel, 1, 1, 0, stream, 1, cursor, rows);
}
