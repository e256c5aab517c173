/* Helpers shared by the GEMM kernels: reading op(A) and op(B) of row-major matrices, and
 * writing C = alpha * acc + beta * C without reading C when beta is zero. */
#ifndef MLP_GEMM_COMMON_CUH
#define MLP_GEMM_COMMON_CUH

#include <cstdint>

/* Element (row, col) of op(X), where X is stored row-major with row stride ld and op(X) = X^T
 * when trans. */
__device__ __forceinline__ float op_element(const float *x, int ld, bool trans, int row, int col) {
    return trans ? x[(size_t)col * ld + row] : x[(size_t)row * ld + col];
}

__device__ __forceinline__ void write_c(float *c, int ldc, int row, int col, float acc,
                                        float alpha, float beta) {
    float *out = c + (size_t)row * ldc + col;
    *out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
}

/* Whether float4 accesses to a matrix are aligned: the base on 16 bytes and every row too. */
inline bool float4_aligned(const float *x, int ld) {
    return reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld % 4 == 0;
}

#endif
