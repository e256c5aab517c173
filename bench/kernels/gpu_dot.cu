/* The dot product w·x of two float vectors, three ways, from the textbook first attempt to a
 * kernel that runs at memory speed; and the sigmoid that turns it into y = sigmoid(w·x).
 *
 * A dot product does one multiply-add per 8 bytes read, so on any GPU it is bound by memory
 * bandwidth; what separates the versions is how they combine the partial sums of many threads.
 * All three run one "wave": as many blocks as fit on the GPU at once (asked of the occupancy
 * calculator once per kernel), each thread summing a strided slice (consecutive threads read
 * consecutive elements, so every load of a warp is coalesced) in a float register.
 *
 *   naive        each thread adds its partial sum into *dot with atomicAdd (the result is set to
 *                zero first). One atomic per thread, all on one address, and the order in which
 *                they land varies from run to run, so the last bits of the result do too: not
 *                deterministic.
 *   shared_tree  each block writes its threads' partial sums to shared memory and halves them
 *                pairwise (the tree: log2(threads) steps, a __syncthreads after each) into one
 *                partial per block; a second pass of one block does the same over the block
 *                partials. Every sum is combined in a fixed order: deterministic for a given n
 *                on a given GPU (the number of blocks depends on the GPU's size).
 *   warp_shuffle the same two passes, faster at each level: 16-byte float4 loads when both
 *                vectors are 16-byte aligned (a quarter of the load instructions), UNROLL
 *                independent loads and accumulators per thread (several loads in flight at a
 *                time per thread, which is what keeps the memory system busy), and the block's
 *                sum done with __shfl_down_sync inside each warp (registers only, no
 *                __syncthreads) with one value per warp through shared memory. Deterministic
 *                like shared_tree.
 *
 * The sigmoid is a separate one-thread kernel that every version (and cuBLAS's dot) ends with,
 * so the versions differ only in the dot product; it costs one launch, which shows only at
 * small n. */
#include <algorithm>

#include "libs/cuda_check.h"
#include "bench/kernels/gpu_bench_kernels.h"

namespace {

constexpr int DOT_THREADS = 256;    /* threads per block of the first pass */
constexpr int FINAL_THREADS = 1024; /* the one block of the second pass */
constexpr int UNROLL = 4;           /* independent loads and accumulators per thread */
constexpr unsigned FULL_WARP = 0xffffffffu;

/* ---- reductions within a block; every thread of the block must call them ---- */

/* The textbook tree in shared memory (sequential addressing: the active threads stay
 * contiguous, so whole warps drop out and there are no bank conflicts). The sum is returned to
 * every thread. */
template <int THREADS> __device__ float block_sum_tree(float value) {
    __shared__ float partial[THREADS];
    partial[threadIdx.x] = value;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    return partial[0];
}

/* Lane 0 gets the sum of the warp's 32 values. */
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
        value += __shfl_down_sync(FULL_WARP, value, offset);
    return value;
}

/* Each warp sums its values with shuffles, the warps' sums meet in shared memory, and the first
 * warp sums those. Thread 0 gets the block's sum. */
template <int THREADS> __device__ float block_sum_shuffle(float value) {
    static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 32 of them");
    __shared__ float warp_sums[THREADS / 32];
    value = warp_sum(value);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
    __syncthreads();
    value = 0.0f;
    if (threadIdx.x < 32) { /* the whole first warp, as __shfl_down_sync(FULL_WARP) needs */
        value = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.0f;
        value = warp_sum(value);
    }
    return value;
}

/* ---- first passes ---- */

__device__ __forceinline__ size_t global_thread() {
    return blockIdx.x * (size_t)blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_threads() { return (size_t)gridDim.x * blockDim.x; }

/* This thread's share of w·x: elements thread, thread + T, thread + 2T, ... (T threads). */
__device__ __forceinline__ float strided_partial(const float *__restrict__ w,
                                                 const float *__restrict__ x, size_t n) {
    float acc = 0.0f;
    for (size_t i = global_thread(); i < n; i += grid_threads()) acc = fmaf(w[i], x[i], acc);
    return acc;
}

__global__ void dot_atomic_kernel(const float *__restrict__ w, const float *__restrict__ x,
                                  size_t n, float *dot) {
    atomicAdd(dot, strided_partial(w, x, n));
}

__global__ void dot_tree_kernel(const float *__restrict__ w, const float *__restrict__ x, size_t n,
                                float *partials) {
    float block_total = block_sum_tree<DOT_THREADS>(strided_partial(w, x, n));
    if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

/* acc + a·b, for one float or four. */
__device__ __forceinline__ float multiply_add(float a, float b, float acc) {
    return fmaf(a, b, acc);
}
__device__ __forceinline__ float multiply_add(float4 a, float4 b, float acc) {
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

/* This thread's share of w·x over `count` elements of type T (float4 or float): UNROLL loads of
 * each vector issued before any is used, in UNROLL accumulators; then the remainder one at a
 * time. Returns the accumulators' sum. */
template <typename T>
__device__ __forceinline__ float unrolled_partial(const T *__restrict__ w, const T *__restrict__ x,
                                                  size_t count) {
    const size_t threads = grid_threads();
    float acc[UNROLL] = {};
    size_t i = global_thread();
    for (; i + (UNROLL - 1) * threads < count; i += UNROLL * threads) {
        T wv[UNROLL], xv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) wv[u] = w[i + u * threads], xv[u] = x[i + u * threads];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc[u] = multiply_add(wv[u], xv[u], acc[u]);
    }
    for (; i < count; i += threads) acc[0] = multiply_add(w[i], x[i], acc[0]);
    float total = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) total += acc[u];
    return total;
}

/* vectors: both w and x are 16-byte aligned, so they are read as n/4 float4s, and the last
 * n % 4 elements (at most 3) by the first threads. */
__global__ void dot_shuffle_kernel(const float *__restrict__ w, const float *__restrict__ x,
                                   size_t n, bool vectors, float *partials) {
    float partial;
    if (vectors) {
        size_t quads = n / 4, tail = quads * 4 + global_thread();
        partial = unrolled_partial(reinterpret_cast<const float4 *>(w),
                                   reinterpret_cast<const float4 *>(x), quads);
        if (tail < n) partial = fmaf(w[tail], x[tail], partial);
    } else {
        partial = unrolled_partial(w, x, n);
    }
    float block_total = block_sum_shuffle<DOT_THREADS>(partial);
    if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

/* ---- second passes: one block over the first pass's `count` partials ---- */

/* Thread t adds partials t, t + FINAL_THREADS, ... in that order. */
__device__ __forceinline__ float final_partial(const float *partials, int count) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += FINAL_THREADS) acc += partials[i];
    return acc;
}

__global__ void final_tree_kernel(const float *partials, int count, float *dot) {
    float total = block_sum_tree<FINAL_THREADS>(final_partial(partials, count));
    if (threadIdx.x == 0) *dot = total;
}

__global__ void final_shuffle_kernel(const float *partials, int count, float *dot) {
    float total = block_sum_shuffle<FINAL_THREADS>(final_partial(partials, count));
    if (threadIdx.x == 0) *dot = total;
}

/* The same formula as cpu_sigmoid (bench/kernels/cpu_dot.c): e^z only of z <= 0, so nothing
 * overflows. */
__global__ void sigmoid_scalar_kernel(const float *dot, float *y) {
    float z = *dot;
    if (z >= 0.0f) {
        *y = 1.0f / (1.0f + expf(-z));
    } else {
        float e = expf(z);
        *y = e / (1.0f + e);
    }
}

/* ---- grid sizes ---- */

/* Blocks of DOT_THREADS that `kernel` can keep resident on the current device at once (one full
 * wave), at most GPU_DOT_MAX_BLOCKS. */
unsigned one_wave(const void *kernel) {
    int device, multiprocessors, blocks_per_multiprocessor;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_multiprocessor, kernel,
                                                             DOT_THREADS, 0));
    int blocks = multiprocessors * std::max(blocks_per_multiprocessor, 1);
    return (unsigned)std::min(blocks, GPU_DOT_MAX_BLOCKS);
}

/* One wave, or fewer blocks when n is too small to give each thread min_per_thread elements. */
unsigned dot_blocks(unsigned wave, size_t n, size_t min_per_thread) {
    size_t wanted = blocks_for((n + min_per_thread - 1) / min_per_thread, DOT_THREADS);
    return (unsigned)std::max<size_t>(1, std::min<size_t>(wanted, wave));
}

bool aligned16(const float *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

/* The waves are asked for once per process (static locals): the device is assumed to stay the
 * same. The query costs microseconds, which would show in the timing of small n. */

void gpu_dot_naive(cudaStream_t stream, const float *w, const float *x, size_t n, float *dot) {
    static const unsigned wave = one_wave(reinterpret_cast<const void *>(dot_atomic_kernel));
    CUDA_CHECK(cudaMemsetAsync(dot, 0, sizeof(float), stream));
    dot_atomic_kernel<<<dot_blocks(wave, n, 1), DOT_THREADS, 0, stream>>>(w, x, n, dot);
    CUDA_CHECK_LAUNCH();
}

void gpu_dot_shared_tree(cudaStream_t stream, const float *w, const float *x, size_t n,
                         float *partials, float *dot) {
    static const unsigned wave = one_wave(reinterpret_cast<const void *>(dot_tree_kernel));
    unsigned blocks = dot_blocks(wave, n, 1);
    dot_tree_kernel<<<blocks, DOT_THREADS, 0, stream>>>(w, x, n, partials);
    CUDA_CHECK_LAUNCH();
    final_tree_kernel<<<1, FINAL_THREADS, 0, stream>>>(partials, (int)blocks, dot);
    CUDA_CHECK_LAUNCH();
}

void gpu_dot_warp_shuffle(cudaStream_t stream, const float *w, const float *x, size_t n,
                          float *partials, float *dot) {
    static const unsigned wave = one_wave(reinterpret_cast<const void *>(dot_shuffle_kernel));
    unsigned blocks = dot_blocks(wave, n, 4 * UNROLL);
    bool vectors = aligned16(w) && aligned16(x);
    dot_shuffle_kernel<<<blocks, DOT_THREADS, 0, stream>>>(w, x, n, vectors, partials);
    CUDA_CHECK_LAUNCH();
    final_shuffle_kernel<<<1, FINAL_THREADS, 0, stream>>>(partials, (int)blocks, dot);
    CUDA_CHECK_LAUNCH();
}

void gpu_sigmoid_scalar(cudaStream_t stream, const float *dot, float *y) {
    sigmoid_scalar_kernel<<<1, 1, 0, stream>>>(dot, y);
    CUDA_CHECK_LAUNCH();
}
