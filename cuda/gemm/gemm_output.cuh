/* Writing a GEMM's finished tile: C = epilogue(alpha · acc + beta · C) (C not read when beta is
 * zero; the epilogue of core/backend.h, none unless given),
 * 8 or 16 bytes at a time where aligned, element by element at the matrix's edge. Used by the
 * ladder's rungs (gemm_4_warptiled.cu and after). */
#ifndef MLP_GEMM_OUTPUT_CUH
#define MLP_GEMM_OUTPUT_CUH

#include <cstdint>

#include "cuda/gemm/gemm_common.cuh"

/* Where a block puts its finished tile (C, or split-K's plane of partial sums) and how:
 * out = epilogue(alpha · acc + beta · out). `pairs`, `quads`: whether 8- and 16-byte stores are
 * aligned. */
struct gemm_output {
    float *c;
    int ldc;
    float alpha, beta;
    bool pairs, quads;
    gemm_epilogue epilogue;
};

__device__ __forceinline__ gemm_output output_to_c(float *c, int ldc, float alpha, float beta,
                                                   const gemm_epilogue &epilogue = gemm_epilogue{}) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(c);
    return {c, ldc, alpha, beta, base % 8 == 0 && ldc % 2 == 0, base % 16 == 0 && ldc % 4 == 0,
            epilogue};
}

/* alpha · v + beta · old, through the epilogue, for the element at (row, col). */
__device__ __forceinline__ float output_value(const gemm_output &out, int row, int col, float v,
                                              float old) {
    const float value = out.beta != 0.0f ? out.alpha * v + out.beta * old : out.alpha * v;
    return apply_epilogue(value, out.epilogue, row, col, out.ldc);
}

/* out(row, col) and out(row, col + 1), each only if inside the m×n matrix. */
__device__ __forceinline__ void store_pair(const gemm_output &out, int m, int n, int row, int col,
                                           float v0, float v1) {
    if (row >= m) return;
    float *to = out.c + (size_t)row * out.ldc + col;
    if (out.pairs && col + 1 < n) {
        const float2 old = out.beta != 0.0f ? *reinterpret_cast<const float2 *>(to) : float2{};
        *reinterpret_cast<float2 *>(to) =
            make_float2(output_value(out, row, col, v0, old.x), output_value(out, row, col + 1, v1, old.y));
    } else {
        if (col < n) write_c(out.c, out.ldc, row, col, v0, out.alpha, out.beta, out.epilogue);
        if (col + 1 < n) write_c(out.c, out.ldc, row, col + 1, v1, out.alpha, out.beta, out.epilogue);
    }
}

/* out(row, col .. col + 3), each only if inside the m×n matrix. */
__device__ __forceinline__ void store_quad(const gemm_output &out, int m, int n, int row, int col,
                                           float4 v) {
    if (row >= m) return;
    float *to = out.c + (size_t)row * out.ldc + col;
    if (out.quads && col + 3 < n) {
        const float4 old = out.beta != 0.0f ? *reinterpret_cast<const float4 *>(to) : float4{};
        *reinterpret_cast<float4 *>(to) =
            make_float4(output_value(out, row, col, v.x, old.x), output_value(out, row, col + 1, v.y, old.y),
                        output_value(out, row, col + 2, v.z, old.z), output_value(out, row, col + 3, v.w, old.w));
    } else {
        const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (col + e < n) write_c(out.c, out.ldc, row, col + e, values[e], out.alpha, out.beta, out.epilogue);
    }
}

/* The warp-tiled rungs' accumulators (gemm_4_warptiled.cu, gemm_5_tiled.cu), one row of 4 at a
 * time: acc[rm][rn][i][0..3] is element (patch_row + rm·LANES_M·4 + i, patch_col + rn·LANES_N·4
 * + 0..3) of the block's tile; visit(tile_row, tile_col, quad) gets each. */
template <int LANES_M, int LANES_N, int REPEAT_M, int REPEAT_N, typename Visit>
__device__ __forceinline__ void for_each_quad(const float (&acc)[REPEAT_M][REPEAT_N][4][4], int patch_row,
                                              int patch_col, Visit visit) {
#pragma unroll
    for (int rm = 0; rm < REPEAT_M; rm++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int rn = 0; rn < REPEAT_N; rn++) {
                const float(&row)[4] = acc[rm][rn][i];
                visit(patch_row + rm * LANES_M * 4 + i, patch_col + rn * LANES_N * 4,
                      make_float4(row[0], row[1], row[2], row[3]));
            }
}

#endif
