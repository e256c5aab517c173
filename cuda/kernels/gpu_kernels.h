/* Launchers of the GPU kernels, one kernel (or one family) per file in this folder. Each queues
 * its kernel on `stream` and checks the launch; none synchronizes. Contracts (shapes, row-major
 * layout, what is read and written) are those of the matching operation in src/backend.h, and
 * each file's comment says how its kernel works. Pointers are device pointers. */
#ifndef MLP_GPU_KERNELS_H
#define MLP_GPU_KERNELS_H

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

/* C = alpha * op(A) * op(B) + beta * C; op(A) is M×K, op(B) is K×N, C is M×N, all row-major. */
#define GPU_GEMM_ARGS                                                                              \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc

void gpu_gemm_naive(GPU_GEMM_ARGS);        /* gemm_naive.cu: one thread per element of C */
void gpu_gemm_tiled_shared(GPU_GEMM_ARGS); /* gemm_tiled_shared.cu: textbook shared-memory tiles */

/* gemm_tiled.cu: register-blocked, wide loads, split-K for small outputs. The workspace holds
 * split-K's partial products: device memory the caller allocates once and keeps (nothing is
 * allocated per call); GPU_GEMM_WORKSPACE_FLOATS is enough for the MLP's layers. A stream runs
 * one GEMM at a time, so one workspace per stream suffices. */
typedef struct {
    float *data;
    size_t floats;
} gpu_gemm_workspace;
constexpr size_t GPU_GEMM_WORKSPACE_FLOATS = size_t(4) << 20; /* 16 MiB */
void gpu_gemm_tiled(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
/* The same with the tile (32, 64 or 128) and the number of K slices forced instead of chosen by
 * size (fewer slices are used where K or the workspace is too small): for tests. */
void gpu_gemm_tiled_with_plan(int tile, int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS);

void gpu_bias_activation(cudaStream_t stream, float *z, const float *bias, int rows, int cols,
                         bool relu);
void gpu_relu_backward(cudaStream_t stream, float *grad, const float *activation, size_t count);

void gpu_softmax_cross_entropy(cudaStream_t stream, const float *logits, const uint8_t *labels,
                               int rows, int classes, float grad_scale, float *grad,
                               float *row_loss, float *row_correct, int32_t *prediction);

void gpu_column_sums(cudaStream_t stream, const float *matrix, int rows, int cols, float *sums);
void gpu_sum(cudaStream_t stream, const float *x, size_t n, float *result);

void gpu_sgd_momentum_step(cudaStream_t stream, float *param, float *velocity, const float *grad,
                           size_t n, float lr, float momentum);
void gpu_adam_step(cudaStream_t stream, float *param, float *m, float *v, const float *grad,
                   size_t n, float lr, float beta1, float beta2, float eps, int step);

/* x[r] = pixels[indices[r]] * scale + shift, y[r] = labels[indices[r]]; indices == NULL means
 * row r itself (a batch already gathered). pixels is (at least) rows' worth of count×features. */
void gpu_gather_normalize(cudaStream_t stream, const uint8_t *pixels, const uint8_t *labels,
                          const int32_t *indices, int rows, int features, float scale,
                          float shift, float *x, uint8_t *y);

/* ==== Benchmark kernels (mlp_bench): the dot product of y = sigmoid(w·x), and max pooling ==== */

/* *dot = w·x over n floats; dot is one float of device memory. Three ways, dot.cu says how each
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

/* Max pooling with the contract of src/cpu_maxpool.h (padding never wins; exits with a message
 * if the window is invalid or the output empty): out is planes × out_height × out_width. */
void gpu_maxpool(cudaStream_t stream, const float *in, size_t planes, int height, int width,
                 int kernel, int stride, int padding, float *out);

#endif
