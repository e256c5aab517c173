/* cuBLAS is column-major; the project is row-major. A row-major matrix X (r×c, row stride ld)
 * is, read column-major with the same ld, the matrix X^T (c×r). So the row-major product
 *     C = op(A) · op(B)                 (C is M×N)
 * is computed as the column-major product of the transposes:
 *     C^T = op(B)^T · op(A)^T           (C^T is N×M, column-major = C row-major)
 * i.e. cublasSgemm with the operands swapped (B first), the dimensions swapped (N, M, K), and
 * each operand's transpose flag unchanged: no data is moved. The TF32 and BF16 variants do the
 * same through cublasGemmEx, which takes the storage types and the compute type apart. */
#include "libs/cuda_check.h"
#include "libs/cublas_gemm.h"

cublasHandle_t cublas_gemm_handle(cudaStream_t stream) {
    const cublas_functions &cublas = cublas_library();
    cublasHandle_t handle;
    CUBLAS_CHECK(cublas.create(&handle));
    CUBLAS_CHECK(cublas.set_stream(handle, stream));
    /* FP32 unless a call asks for less (the compute types of the tf32/bf16 functions below) */
    CUBLAS_CHECK(cublas.set_math_mode(handle, CUBLAS_DEFAULT_MATH));
    return handle;
}

void cublas_gemm_handle_destroy(cublasHandle_t handle) {
    CUBLAS_CHECK(cublas_library().destroy(handle));
}

void cublas_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc) {
    if (m == 0 || n == 0) return;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublas_library().sgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta,
                                        c, ldc));
}

/* cublasGemmEx with the row-major-to-column-major swap above: A and B of type `inputs`, C FP32. */
static void gemm_ex(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const void *a, int lda, const void *b, int ldb, float beta, float *c,
                    int ldc, cudaDataType inputs, cublasComputeType_t compute) {
    if (m == 0 || n == 0) return;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublas_library().gemm_ex(handle, op_b, op_a, n, m, k, &alpha, b, inputs, ldb, a,
                                          inputs, lda, &beta, c, CUDA_R_32F, ldc, compute,
                                          CUBLAS_GEMM_DEFAULT));
}

void cublas_gemm_tf32(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc) {
    gemm_ex(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, CUDA_R_32F,
            CUBLAS_COMPUTE_32F_FAST_TF32);
}

void cublas_gemm_fast_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc) {
    gemm_ex(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, CUDA_R_32F,
            CUBLAS_COMPUTE_32F_FAST_16BF);
}

void cublas_gemm_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb,
                      float beta, float *c, int ldc) {
    gemm_ex(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, CUDA_R_16BF,
            CUBLAS_COMPUTE_32F);
}
