/* The GEMM ladder past gemm_tiled.cu: one step per file, each a kernel a reader can hold next
 * to the one before it and next to cuBLAS (docs/kernels.md, "The GEMM ladder"). mlp_bench
 * measures them (`mlp_bench gemm --impl warptiled,pipelined,tf32_mma,...`) and
 * tests/test_gpu_gemm_ladder.cu checks them.
 *
 * Every rung keeps the row-major contract of GPU_GEMM_ARGS (gpu_kernels.h): C = alpha · op(A) ·
 * op(B) + beta · C, op(A) M×K, op(B) K×N, C M×N, any shape (1, 17, 1000, ...), any transposes,
 * any row strides and offsets (aligned ones take the fast path), beta == 0 never reads C. Like
 * gpu_gemm_tiled, the rungs that split K for small outputs take the caller's workspace
 * (GPU_GEMM_WORKSPACE_FLOATS is enough for the MLP's layers; a stream runs one GEMM at a time,
 * so one workspace per stream suffices). */
#ifndef MLP_GEMM_LADDER_H
#define MLP_GEMM_LADDER_H

#include <cuda_bf16.h>

#include "gpu_kernels.h"

/* gemm_warptiled.cu: gemm_tiled's register blocking, with each warp on a compact 32×64 tile
 * of C and its lanes placed so that shared-memory reads are conflict-free. */
void gpu_gemm_warptiled(GPU_GEMM_ARGS);

/* gemm_pipelined.cu: warp tiles fed by a 3-stage cp.async pipeline (the next tiles load while
 * the current one is multiplied), 128×256, 128×128, 64×128, 64×64 or 32×32 block tiles by size,
 * split-K for small C through a thread block cluster (no workspace). Like gemm_tiled.cu it
 * applies an epilogue (src/backend.h) as it stores C; nullptr: none. The FP32 GEMM of
 * --impl tiled and fused (gpu_backend.cu). */
void gpu_gemm_pipelined(GPU_GEMM_ARGS, const gemm_epilogue *epilogue = nullptr);
/* The same with the block tile (tile_rows × tile_cols: 32×32, 64×64, 64×128, 128×128 or
 * 128×256; gpu_gemm_pipelined_has_tile) and the number of K slices forced (at most 8, a
 * cluster): for tests and mlp_bench --plan. The 64×64 tile still picks its step depth (16 or
 * 32) for the slices it gets. */
bool gpu_gemm_pipelined_has_tile(int tile_rows, int tile_cols);
void gpu_gemm_pipelined_with_plan(int tile_rows, int tile_cols, int splits, GPU_GEMM_ARGS,
                                  const gemm_epilogue *epilogue = nullptr);

/* gemm_tf32_mma.cu: tensor cores in TF32 (mma.sync m16n8k8, FP32 accumulate). A and B are FP32
 * in memory, rounded to TF32 (10-bit mantissa, round to nearest) as they enter the tensor
 * cores: the same contract as the FP32 GEMMs, at about 1e-3 relative error. */
void gpu_gemm_tf32_mma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
void gpu_gemm_tf32_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS);

/* gemm_bf16_mma.cu: tensor cores in BF16 (mma.sync m16n8k16, FP32 accumulate). The same
 * row-major contract, but A and B are BF16 in memory (rounded once by the caller, e.g. with
 * gpu_round_to_bf16, as cuBLAS's BF16 GEMM is given BF16 operands); alpha, beta and C are FP32. */
#define GPU_GEMM_BF16_ARGS                                                                         \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb, float beta, float *c,    \
        int ldc
void gpu_gemm_bf16_mma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);
void gpu_gemm_bf16_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);

/* Hopper only: the wgmma rungs (sm_90a), the warpgroup MMA that reads A and B from shared
 * memory. They exit with a message on another GPU: ask gpu_gemm_wgmma_available() first. */
bool gpu_gemm_wgmma_available(); /* the current device has compute capability 9.0 */
/* gemm_tf32_wgmma.cu: gpu_gemm_tf32_mma's contract (FP32 A, B and C; TF32 products). For large
 * products an operand that is not K-major in memory is first transposed into the workspace,
 * after split-K's partial sums, where there is room. */
void gpu_gemm_tf32_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
void gpu_gemm_tf32_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
/* gemm_bf16_wgmma.cu: gpu_gemm_bf16_mma's contract (BF16 A and B, FP32 C). */
void gpu_gemm_bf16_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);
void gpu_gemm_bf16_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);

/* transpose.cu: out (cols×rows, row stride rows) = xᵀ, x rows×cols with row stride ld. */
void gpu_transpose(cudaStream_t stream, int rows, int cols, const float *x, int ld, float *out);

/* out[i] = x[i] rounded to the nearest BF16 (ties to even), for i < count. */
void gpu_round_to_bf16(cudaStream_t stream, const float *x, size_t count, __nv_bfloat16 *out);

#endif
