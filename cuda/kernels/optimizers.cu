/* Optimizer updates over the flat parameter array, grid-stride (SGD four parameters a thread,
 * Adam one): one launch updates every layer's weights and biases. Memory-bound: SGD reads 3 and writes 2
 * floats per parameter, Adam reads 4 and writes 3.
 *
 * The update ends a training step, so its kernel also moves the pass cursor on, and a step needs
 * no kernel of its own for that (1.0 µs of a 36 µs step at batch 512 on an H200). SGD at a
 * constant rate does not read the cursor: its first thread moves it. Adam, and SGD on a schedule
 * (lr_schedule.h), read the step number from it in every block, so the last block to finish
 * moves it, counted with one atomic add per block (on an H200 that count made SGD's launch
 * 0.8 µs longer, hence not for SGD at a constant rate).
 *
 * Weight decay (backend.h; its spans in device memory) scales a weight by keep = 1 - lr·rate just
 * before its update, in the same pass; each kernel is compiled with it (DECAY) and without, the
 * form launched without decay being the update as it was before decay existed.
 *
 * With a BF16 copy of the parameters (gpu_narrow_copies.h; nullptr: none), each kernel also
 * writes every parameter it updates to the copy, rounded to nearest even. */
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "libs/cuda_check.h"
#include "cuda/kernels/narrow_quad.cuh"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"

namespace {

constexpr unsigned THREADS = 256;
constexpr unsigned MAX_BLOCKS = 4096;

__device__ void move_cursor_on(const gpu_step_end &end) {
    end.cursor->first_row += end.rows;
    end.cursor->optimizer_steps += 1;
}

/* After every thread of the block is done with the cursor: the grid's last block to get here
 * moves it on and zeroes the counter for the next launch. */
__device__ void move_cursor_on_when_read(const gpu_step_end &end) {
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (atomicAdd(end.blocks_done, 1u) != gridDim.x - 1) return;
    move_cursor_on(end);
    *end.blocks_done = 0;
}

/* A parameter as its update starts: a weight decayed, a bias as it is. */
__device__ __forceinline__ float decayed(float param, const weight_decay *decay, size_t i,
                                         float keep) {
    return weight_decays(decay, (int64_t)i) ? __fmul_rn(param, keep) : param;
}

__device__ __forceinline__ float sgd_momentum(float &param, float velocity, float grad, float lr,
                                              float momentum) {
    float v = momentum * velocity + grad;
    param -= lr * v;
    return v;
}

/* Four parameters a thread (float4) over the first 4·quads, then one a thread over the rest: a
 * quarter of the loads and stores to issue (1.76 µs a step at batch 512 on an H200 with one a
 * thread). quads is 0 where the arrays are not 16-byte aligned, or the BF16 copy not 8-byte
 * aligned. */
template <bool DECAY>
__global__ void sgd_momentum_kernel(float *param, float *velocity, const float *grad, size_t n,
                                    size_t quads, lr_schedule schedule, float momentum,
                                    const weight_decay *decay, __nv_bfloat16 *param_bf16,
                                    gpu_step_end end) {
    wait_for_previous_kernel();
    const bool varies = schedule_varies(schedule);
    const float lr = varies ? schedule_lr(schedule, end.cursor->optimizer_steps) : schedule.lr;
    const float keep = DECAY ? 1.0f - lr * decay->rate : 1.0f;
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    float4 *param4 = reinterpret_cast<float4 *>(param), *velocity4 = reinterpret_cast<float4 *>(velocity);
    const float4 *grad4 = reinterpret_cast<const float4 *>(grad);
    for (size_t q = first; q < quads; q += stride) {
        float4 p = param4[q], v = velocity4[q];
        const float4 g = grad4[q];
        if (DECAY) {
            p.x = decayed(p.x, decay, 4 * q, keep);
            p.y = decayed(p.y, decay, 4 * q + 1, keep);
            p.z = decayed(p.z, decay, 4 * q + 2, keep);
            p.w = decayed(p.w, decay, 4 * q + 3, keep);
        }
        v.x = sgd_momentum(p.x, v.x, g.x, lr, momentum);
        v.y = sgd_momentum(p.y, v.y, g.y, lr, momentum);
        v.z = sgd_momentum(p.z, v.z, g.z, lr, momentum);
        v.w = sgd_momentum(p.w, v.w, g.w, lr, momentum);
        velocity4[q] = v;
        param4[q] = p;
        if (param_bf16) store_bf16_quad(param_bf16, q, p);
    }
    for (size_t i = 4 * quads + first; i < n; i += stride) {
        if (DECAY) param[i] = decayed(param[i], decay, i, keep);
        velocity[i] = sgd_momentum(param[i], velocity[i], grad[i], lr, momentum);
        if (param_bf16) param_bf16[i] = __float2bfloat16_rn(param[i]);
    }
    if (varies) move_cursor_on_when_read(end);
    else if (blockIdx.x == 0 && threadIdx.x == 0) move_cursor_on(end);
}

/* The step number t comes from the pass cursor in device memory, so a recorded step is the same
 * launch every time; each thread works out the bias corrections 1 / (1 - beta^t) in double, as
 * the CPU does, which costs far less than the memory traffic. */
template <bool DECAY>
__global__ void adam_kernel(float *param, float *m, float *v, const float *grad, size_t n,
                            lr_schedule schedule, float beta1, float beta2, float eps,
                            const weight_decay *decay, __nv_bfloat16 *param_bf16, gpu_step_end end) {
    wait_for_previous_kernel();
    int t = end.cursor->optimizer_steps + 1;
    float lr = schedule_lr(schedule, t - 1);
    const float keep = DECAY ? 1.0f - lr * decay->rate : 1.0f;
    float m_correction = (float)(1.0 / (1.0 - pow((double)beta1, t)));
    float v_correction = (float)(1.0 / (1.0 - pow((double)beta2, t)));
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        if (DECAY) param[i] = decayed(param[i], decay, i, keep);
        param[i] -= lr * (mi * m_correction) / (sqrtf(vi * v_correction) + eps);
        if (param_bf16) param_bf16[i] = __float2bfloat16_rn(param[i]);
    }
    move_cursor_on_when_read(end);
}

/* At least one block, which moves the cursor on even with no parameters. */
unsigned grid_for(size_t n) {
    unsigned blocks = blocks_for(n, THREADS);
    return blocks < 1 ? 1 : blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

} // namespace

void gpu_sgd_momentum_step(cudaStream_t stream, float *param, float *velocity, const float *grad,
                           size_t n, lr_schedule schedule, float momentum,
                           const weight_decay *decay, __nv_bfloat16 *param_bf16, gpu_step_end end) {
    const bool aligned = (reinterpret_cast<uintptr_t>(param) | reinterpret_cast<uintptr_t>(velocity) |
                          reinterpret_cast<uintptr_t>(grad)) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(param_bf16) % 8 == 0;
    const size_t quads = aligned ? n / 4 : 0;
    launch_dependent(decay ? sgd_momentum_kernel<true> : sgd_momentum_kernel<false>,
                     grid_for(aligned ? quads : n), THREADS, 0, stream, 1, param, velocity, grad, n,
                     quads, schedule, momentum, decay, param_bf16, end); /* the tail: fewer than 4 threads */
}

void gpu_adam_step(cudaStream_t stream, float *param, float *m, float *v, const float *grad,
                   size_t n, lr_schedule schedule, float beta1, float beta2, float eps,
                   const weight_decay *decay, __nv_bfloat16 *param_bf16, gpu_step_end end) {
    launch_dependent(decay ? adam_kernel<true> : adam_kernel<false>, grid_for(n), THREADS,
                     0, stream, 1, param, m, v, grad, n, schedule, beta1, beta2, eps, decay,
                     param_bf16, end);
}
