/* Writing a GEMM's finished tile: C = alpha · acc + beta · C (C not read when beta is zero),
 * 8 or 16 bytes at a time where aligned, element by element at the matrix's edge. Used by the
 * ladder's rungs (gemm_warptiled.cu and after). */
#ifndef MLP_GEMM_OUTPUT_CUH
#define MLP_GEMM_OUTPUT_CUH

#include <cstdint>

#include "gemm_common.cuh"

/* Where a block puts its finished tile (C, or split-K's plane of partial sums) and how:
 * out = alpha · acc + beta · out. `pairs`, `quads`: whether 8- and 16-byte stores are aligned. */
struct gemm_output {
    float *c;
    int ldc;
    float alpha, beta;
    bool pairs, quads;
};

__device__ __forceinline__ gemm_output output_to_c(float *c, int ldc, float alpha, float beta) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(c);
    return {c, ldc, alpha, beta, base % 8 == 0 && ldc % 2 == 0, base % 16 == 0 && ldc % 4 == 0};
}

/* out(row, col) and out(row, col + 1), each only if inside the m×n matrix. */
__device__ __forceinline__ void store_pair(const gemm_output &out, int m, int n, int row, int col,
                                           float v0, float v1) {
    if (row >= m) return;
    float *to = out.c + (size_t)row * out.ldc + col;
    if (out.pairs && col + 1 < n) {
        float2 value = make_float2(out.alpha * v0, out.alpha * v1);
        if (out.beta != 0.0f) {
            const float2 old = *reinterpret_cast<const float2 *>(to);
            value.x += out.beta * old.x, value.y += out.beta * old.y;
        }
        *reinterpret_cast<float2 *>(to) = value;
    } else {
        if (col < n) write_c(out.c, out.ldc, row, col, v0, out.alpha, out.beta);
        if (col + 1 < n) write_c(out.c, out.ldc, row, col + 1, v1, out.alpha, out.beta);
    }
}

/* out(row, col .. col + 3), each only if inside the m×n matrix. */
__device__ __forceinline__ void store_quad(const gemm_output &out, int m, int n, int row, int col,
                                           float4 v) {
    if (row >= m) return;
    float *to = out.c + (size_t)row * out.ldc + col;
    if (out.quads && col + 3 < n) {
        float4 value = make_float4(out.alpha * v.x, out.alpha * v.y, out.alpha * v.z, out.alpha * v.w);
        if (out.beta != 0.0f) {
            const float4 old = *reinterpret_cast<const float4 *>(to);
            value.x += out.beta * old.x, value.y += out.beta * old.y;
            value.z += out.beta * old.z, value.w += out.beta * old.w;
        }
        *reinterpret_cast<float4 *>(to) = value;
    } else {
        const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (col + e < n) write_c(out.c, out.ldc, row, col + e, values[e], out.alpha, out.beta);
    }
}

#endif
