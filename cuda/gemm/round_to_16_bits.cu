/* FP32 to 16 bits, a pass over an array: to BF16, rounding to nearest (ties to even), the operands
 * of gemm_7_bf16_mma.cu and a trainer's BF16 copies, made once by whoever keeps them (a
 * benchmark, a trainer after an upload); and to TF32 held as FP16 (rung 10's FP16 A), for a
 * benchmark. One thread per element, grid-stride; NaN stays a NaN, overflow becomes infinity. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/kernels/narrow_quad.cuh" /* tf32_in_fp16 */

namespace {

constexpr unsigned THREADS = 256, MAX_BLOCKS = 4096;

unsigned blocks_of(size_t count) {
    const unsigned blocks = blocks_for(count, THREADS);
    return blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

__global__ void round_to_bf16_kernel(const float *__restrict__ x, size_t count,
                                     __nv_bfloat16 *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(x[i]);
}

__global__ void round_to_tf32_in_fp16_kernel(const float *__restrict__ x, size_t count,
                                             __half *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = tf32_in_fp16(x[i]);
}

} // namespace

void gpu_round_to_bf16(cudaStream_t stream, const float *x, size_t count, __nv_bfloat16 *out) {
    if (count == 0) return;
    round_to_bf16_kernel<<<blocks_of(count), THREADS, 0, stream>>>(x, count, out);
    CUDA_CHECK_LAUNCH();
}

void gpu_round_to_tf32_in_fp16(cudaStream_t stream, const float *x, size_t count, __half *out) {
    if (count == 0) return;
    round_to_tf32_in_fp16_kernel<<<blocks_of(count), THREADS, 0, stream>>>(x, count, out);
    CUDA_CHECK_LAUNCH();
}
