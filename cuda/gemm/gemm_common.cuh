/* Helpers shared by the GEMM kernels: reading op(A) and op(B) of row-major matrices, and
 * writing C = epilogue(alpha * acc + beta * C) without reading C when beta is zero. */
#ifndef MLP_GEMM_COMMON_CUH
#define MLP_GEMM_COMMON_CUH

#include <cstdint>

#include "cuda/gemm/gemm_ladder.h"

/* Element (row, col) of op(X), where X is stored row-major with row stride ld and op(X) = X^T
 * when trans. */
__device__ __forceinline__ float op_element(const float *x, int ld, bool trans, int row, int col) {
    return trans ? x[(size_t)col * ld + row] : x[(size_t)row * ld + col];
}

/* The epilogue (core/backend.h's gemm_epilogue) on the value of C at (row, col). The kernels
 * take the epilogue by value; its null pointers make each test the same for every thread. */
__device__ __forceinline__ float apply_epilogue(float value, const gemm_epilogue &epilogue, int row,
                                                int col, int ldc) {
    if (epilogue.bias) value += epilogue.bias[col];
    if (epilogue.relu && value < 0.0f) value = 0.0f; /* as on the CPU: NaN stays NaN */
    if (epilogue.relu_mask && epilogue.relu_mask[(size_t)row * ldc + col] <= 0.0f) value = 0.0f;
    return value;
}

__device__ __forceinline__ void write_c(float *c, int ldc, int row, int col, float acc,
                                        float alpha, float beta,
                                        const gemm_epilogue &epilogue = gemm_epilogue{}) {
    float *out = c + (size_t)row * ldc + col;
    float value = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
    *out = apply_epilogue(value, epilogue, row, col, ldc);
}

/* Whether 16-byte accesses to a row-major matrix of T (float4, 8 BF16) are aligned: its base
 * and every row. */
template <typename T> inline bool vectors_aligned(const T *x, int ld) {
    return reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld * sizeof(T) % 16 == 0;
}

#endif
