/* cuBLAS is column-major; the project is row-major. A row-major matrix X (r×c, row stride ld)
 * is, read column-major with the same ld, the matrix X^T (c×r). So the row-major product
 *     C = op(A) · op(B)                 (C is M×N)
 * is computed as the column-major product of the transposes:
 *     C^T = op(B)^T · op(A)^T           (C^T is N×M, column-major = C row-major)
 * i.e. cublasSgemm with the operands swapped (B first), the dimensions swapped (N, M, K), and
 * each operand's transpose flag unchanged: no data is moved. */
#include "../cuda/cuda_check.h"
#include "cublas_gemm.h"

cublasHandle_t cublas_gemm_handle(cudaStream_t stream, bool allow_tf32) {
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetStream(handle, stream));
    CUBLAS_CHECK(cublasSetMathMode(handle, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH));
    return handle;
}

void cublas_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc) {
    if (m == 0 || n == 0) return;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}
