/* The GEMM of the GPU blas implementation: cublasSgemm behind the row-major contract of
 * backend.h, in FP32 (no TF32 unless asked for). */
#ifndef MLP_CUBLAS_GEMM_H
#define MLP_CUBLAS_GEMM_H

#include <cublas_v2.h>

/* A handle bound to `stream`, with TF32 tensor-core math only if allow_tf32. */
cublasHandle_t cublas_gemm_handle(cudaStream_t stream, bool allow_tf32);

/* C = alpha * op(A) * op(B) + beta * C, row-major, op(A) M×K, op(B) K×N, C M×N. */
void cublas_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc);

#endif
