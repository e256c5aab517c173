/* FP32 to BF16, rounding to nearest (ties to even): the operands of gemm_7_bf16_mma.cu, made once
 * by whoever keeps them (a benchmark, a trainer's BF16 copy of the weights). One thread per
 * element, grid-stride; __float2bfloat16_rn keeps NaN a NaN and rounds overflow to infinity. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_ladder.h"

namespace {

__global__ void round_to_bf16_kernel(const float *__restrict__ x, size_t count,
                                     __nv_bfloat16 *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(x[i]);
}

} // namespace

void gpu_round_to_bf16(cudaStream_t stream, const float *x, size_t count, __nv_bfloat16 *out) {
    if (count == 0) return;
    constexpr unsigned THREADS = 256, MAX_BLOCKS = 4096;
    const unsigned blocks = blocks_for(count, THREADS);
    round_to_bf16_kernel<<<blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS, THREADS, 0, stream>>>(x, count, out);
    CUDA_CHECK_LAUNCH();
}
