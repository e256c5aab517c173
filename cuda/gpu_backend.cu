/* The operation table on the GPU. Memory is device memory; every operation is queued on one
 * stream and returns at once; only download() and synchronize() wait. A timing stamp is a CUDA
 * event on that stream. The three GPU implementations differ only in their GEMM: the naive or
 * tiled kernels of kernels/, or cuBLAS. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../blas/cublas_gemm.h"
#include "cuda_check.h"
#include "gpu_backend.h"
#include "gpu_kernels.h"
#include "gpu_state.h"

namespace {

/* ---- GEMM: the one operation in which the GPU implementations differ ---- */

void gemm_naive(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    gpu_gemm_naive(gpu_of(be)->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_tiled(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    gpu_state *gpu = gpu_of(be);
    gpu_gemm_tiled(gpu->gemm_workspace, gpu->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                   c, ldc);
}

void gemm_cublas(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    cublas_gemm(gpu_of(be)->cublas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* ---- memory ---- */

void *device_alloc(backend *be, size_t bytes) {
    (void)be;
    return gpu_alloc_or_exit(bytes);
}

void device_release(backend *be, void *p) {
    (void)be;
    if (p) CUDA_CHECK(cudaFree(p));
}

/* The host buffer may be reused as soon as this returns, so the copy is waited for. */
void upload(backend *be, void *dst, const void *src, size_t bytes) {
    cudaStream_t stream = gpu_of(be)->stream;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

void download(backend *be, void *dst, const void *src, size_t bytes) {
    cudaStream_t stream = gpu_of(be)->stream;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

void synchronize(backend *be) { CUDA_CHECK(cudaStreamSynchronize(gpu_of(be)->stream)); }

/* ---- the other operations: kernels/ ---- */

void bias_activation(backend *be, float *z, const float *bias, int rows, int cols, bool relu) {
    gpu_bias_activation(gpu_of(be)->stream, z, bias, rows, cols, relu);
}

void relu_backward(backend *be, float *grad, const float *activation, size_t count) {
    gpu_relu_backward(gpu_of(be)->stream, grad, activation, count);
}

void softmax_cross_entropy(backend *be, const float *logits, const uint8_t *labels, int rows,
                           int classes, float grad_scale, float *grad, float *row_loss,
                           float *row_correct, int32_t *prediction) {
    gpu_softmax_cross_entropy(gpu_of(be)->stream, logits, labels, rows, classes, grad_scale, grad,
                              row_loss, row_correct, prediction);
}

void column_sums(backend *be, const float *matrix, int rows, int cols, float *sums) {
    gpu_column_sums(gpu_of(be)->stream, matrix, rows, cols, sums);
}

void sum(backend *be, const float *x, size_t n, float *result) {
    gpu_sum(gpu_of(be)->stream, x, n, result);
}

void sgd_momentum_step(backend *be, float *param, float *velocity, const float *grad, size_t n,
                       float lr, float momentum) {
    gpu_sgd_momentum_step(gpu_of(be)->stream, param, velocity, grad, n, lr, momentum);
}

void adam_step(backend *be, float *param, float *m, float *v, const float *grad, size_t n,
               float lr, float beta1, float beta2, float eps, int step) {
    gpu_adam_step(gpu_of(be)->stream, param, m, v, grad, n, lr, beta1, beta2, eps, step);
}

/* ---- timing: CUDA events on the stream ---- */

} // namespace

struct timing_stamp {
    cudaEvent_t event;
};

namespace {

timing_stamp *stamp_create(backend *be) {
    (void)be;
    timing_stamp *s = new timing_stamp;
    CUDA_CHECK(cudaEventCreate(&s->event));
    return s;
}

void stamp_record(backend *be, timing_stamp *s) {
    CUDA_CHECK(cudaEventRecord(s->event, gpu_of(be)->stream));
}

double stamp_elapsed_ms(backend *be, timing_stamp *start, timing_stamp *end) {
    (void)be;
    float ms;
    CUDA_CHECK(cudaEventSynchronize(end->event));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start->event, end->event));
    return ms;
}

void stamp_destroy(backend *be, timing_stamp *s) {
    (void)be;
    CUDA_CHECK(cudaEventDestroy(s->event));
    delete s;
}

void destroy(backend *be) {
    gpu_state *gpu = gpu_of(be);
    CUDA_CHECK(cudaStreamSynchronize(gpu->stream));
    if (gpu->cublas) CUBLAS_CHECK(cublasDestroy(gpu->cublas));
    if (gpu->gemm_workspace.data) CUDA_CHECK(cudaFree(gpu->gemm_workspace.data));
    CUDA_CHECK(cudaStreamDestroy(gpu->stream));
    delete gpu;
    delete be;
}

struct gpu_impl {
    const char *name;
    gemm_fn *gemm;
    const char *description;
};

const gpu_impl gpu_impls[] = {
    {"naive", gemm_naive, "naive CUDA kernels"},
    {"tiled", gemm_tiled, "tiled CUDA kernels"},
    {"blas", gemm_cublas, "cuBLAS"},
};

} // namespace

void *gpu_alloc_or_exit(size_t bytes) {
    void *p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes ? bytes : 1);
    if (status != cudaSuccess) {
        std::fprintf(stderr, "mlp_train: cannot allocate %zu bytes on the GPU: %s\n", bytes,
                     cudaGetErrorString(status));
        std::exit(1);
    }
    return p;
}

extern "C" bool gpu_device_available(char *why, size_t why_size) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        std::snprintf(why, why_size, "%s", cudaGetErrorString(status));
        cudaGetLastError(); /* clear it: asking is not an error of the program */
        return false;
    }
    if (count == 0) {
        std::snprintf(why, why_size, "no CUDA device found");
        return false;
    }
    return true;
}

extern "C" backend *gpu_backend_create(const char *impl) {
    const gpu_impl *chosen = nullptr;
    for (const gpu_impl &candidate : gpu_impls)
        if (std::strcmp(impl, candidate.name) == 0) chosen = &candidate;
    if (!chosen) return nullptr;

    gpu_state *gpu = new gpu_state{};
    CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp properties;
    CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu->stream, cudaStreamNonBlocking));
    if (chosen->gemm == gemm_cublas) gpu->cublas = cublas_gemm_handle(gpu->stream, false);
    if (chosen->gemm == gemm_tiled) {
        gpu->gemm_workspace.floats = GPU_GEMM_WORKSPACE_FLOATS;
        gpu->gemm_workspace.data =
            static_cast<float *>(gpu_alloc_or_exit(GPU_GEMM_WORKSPACE_FLOATS * sizeof(float)));
    }

    backend *be = new backend{};
    be->device_name = "gpu";
    be->impl_name = chosen->name;
    be->state = gpu;
    be->alloc = device_alloc;
    be->release = device_release;
    be->upload = upload;
    be->download = download;
    be->synchronize = synchronize;
    be->gemm = chosen->gemm;
    be->bias_activation = bias_activation;
    be->relu_backward = relu_backward;
    be->softmax_cross_entropy = softmax_cross_entropy;
    be->column_sums = column_sums;
    be->sum = sum;
    be->sgd_momentum_step = sgd_momentum_step;
    be->adam_step = adam_step;
    be->feed_create = gpu_feed_create;
    be->feed_start_pass = gpu_feed_start_pass;
    be->feed_next = gpu_feed_next;
    be->feed_destroy = gpu_feed_destroy;
    be->stamp_create = stamp_create;
    be->stamp_record = stamp_record;
    be->stamp_elapsed_ms = stamp_elapsed_ms;
    be->stamp_destroy = stamp_destroy;
    be->destroy = destroy;
    std::snprintf(be->description, sizeof be->description, "%.64s, %d SMs, %s", properties.name,
                  properties.multiProcessorCount, chosen->description);
    return be;
}
