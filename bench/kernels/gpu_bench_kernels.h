/* The benchmark's own GPU kernels (mlp_bench, not mlp_train): the dot product of
 * y = sigmoid(w·x), and max pooling. Launchers queue on `stream`; pointers are device memory. */
#ifndef MLP_GPU_BENCH_KERNELS_H
#define MLP_GPU_BENCH_KERNELS_H

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

/* *dot = w·x over n floats; dot is one float of device memory. Three ways, gpu_dot.cu says how each
 * works. The two-pass ones take `partials`, scratch of GPU_DOT_MAX_BLOCKS floats from the
 * caller (nothing is allocated here); they are deterministic on a given GPU, the naive one
 * (atomics) is not. */
constexpr int GPU_DOT_MAX_BLOCKS = 2048;
void gpu_dot_naive(cudaStream_t stream, const float *w, const float *x, size_t n, float *dot);
void gpu_dot_shared_tree(cudaStream_t stream, const float *w, const float *x, size_t n,
                         float *partials, float *dot);
void gpu_dot_warp_shuffle(cudaStream_t stream, const float *w, const float *x, size_t n,
                          float *partials, float *dot);
/* *y = sigmoid(*dot): the last step of y = sigmoid(w·x), the same for every dot product. */
void gpu_sigmoid_scalar(cudaStream_t stream, const float *dot, float *y);

/* Max pooling with the contract of bench/kernels/cpu_maxpool.h (padding never wins; exits with a message
 * if the window is invalid or the output empty): out is planes × out_height × out_width. */
void gpu_maxpool(cudaStream_t stream, const float *in, size_t planes, int height, int width,
                 int kernel, int stride, int padding, float *out);

#endif
