/* The GEMM of the GPU blas implementation: cublasSgemm behind the row-major contract of
 * backend.h, in FP32 (no TF32 unless asked for); and the same contract in TF32 and BF16
 * (cublasGemmEx, FP32 accumulate), the libraries the tensor-core rungs of the GEMM ladder are
 * measured against (cuda/gemm/gemm_ladder.h). */
#ifndef MLP_CUBLAS_GEMM_H
#define MLP_CUBLAS_GEMM_H

#include <cuda_bf16.h>

#include "libs/cublas_library.h"

/* A handle bound to `stream`, in FP32 (no TF32 unless a call's compute type asks for it). */
cublasHandle_t cublas_gemm_handle(cudaStream_t stream);
void cublas_gemm_handle_destroy(cublasHandle_t handle);

/* C = alpha * op(A) * op(B) + beta * C, row-major, op(A) M×K, op(B) K×N, C M×N. */
void cublas_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc);

/* The same with TF32 tensor-core math (inputs rounded to TF32, FP32 accumulate), whatever the
 * handle's math mode. */
void cublas_gemm_tf32(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc);

/* FP32 A, B and C with CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS may convert A and B to BF16 (or
 * TF32) for the tensor cores, FP32 accumulate; the training GEMM of --precision bf16. */
void cublas_gemm_fast_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc);

/* BF16 A and B, FP32 C and accumulation: the contract of gpu_gemm_bf16_mma. */
void cublas_gemm_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb,
                      float beta, float *c, int ldc);

#endif
