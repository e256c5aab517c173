/* The GEMM ladder: one rung per file, in the order a reader climbs it, each next to the one
 * before it and next to cuBLAS (docs/kernels.md, "The GEMM ladder"). The number in a file's name
 * is its place. Training runs rung 1 (--impl naive), rung 5 (--impl tiled and fused) and, with
 * --precision tf32 or bf16, rung 10; rungs 2 to 4, 6 to 9 and 11 are built into mlp_bench and
 * the tests only.
 * bench/gemm_rungs.h lists every rung once for mlp_bench and tests/test_gpu_gemm_ladder.cu.
 *
 * The contract of every rung (GPU_GEMM_ARGS): C = alpha · op(A) · op(B) + beta · C, row-major,
 * op(A) M×K, op(B) K×N, C M×N, any shape (1, 17, 1000, ...), any transposes, any row strides
 * and offsets (aligned ones take the fast path); beta == 0 never reads C. A rung that splits K
 * through memory takes the caller's workspace: device memory allocated once, never per call
 * (GPU_GEMM_WORKSPACE_FLOATS is enough for the MLP's layers; a stream runs one GEMM at a time,
 * so one workspace per stream suffices). Launchers queue their kernels on `stream` and never
 * synchronize. */
#ifndef MLP_GEMM_LADDER_H
#define MLP_GEMM_LADDER_H

#include <cstddef>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/backend.h" /* gemm_epilogue */

#define GPU_GEMM_ARGS                                                                              \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc

/* The same, with A and B in BF16 (rounded once by the caller, gpu_round_to_bf16, as cuBLAS's
 * BF16 GEMM is given BF16 operands); alpha, beta and C stay FP32. */
#define GPU_GEMM_BF16_ARGS                                                                         \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const __nv_bfloat16 *a, int lda, const __nv_bfloat16 *b, int ldb, float beta, float *c,    \
        int ldc

/* The same, with A in FP16 holding values already rounded to TF32 (for which FP16 is exact where
 * each is zero or at least 2^-14 in magnitude); B, alpha, beta and C stay FP32. */
#define GPU_GEMM_FP16_A_ARGS                                                                       \
    cudaStream_t stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,             \
        const __half *a, int lda, const float *b, int ldb, float beta, float *c, int ldc

typedef struct {
    float *data;
    size_t floats;
} gpu_gemm_workspace;
constexpr size_t GPU_GEMM_WORKSPACE_FLOATS = size_t(4) << 20; /* 16 MiB */

/* 1. gemm_1_naive.cu: one thread per element of C. Applies an epilogue (core/backend.h) as it
 *    stores C; nullptr: none. */
void gpu_gemm_naive(GPU_GEMM_ARGS, const gemm_epilogue *epilogue = nullptr);

/* 2. gemm_2_shared.cu: textbook shared-memory tiles, one output per thread. */
void gpu_gemm_shared(GPU_GEMM_ARGS);

/* 3. gemm_3_blocked.cu: register blocking, 16-byte loads, split-K through the workspace; an
 *    epilogue as it stores C. _with_plan forces the tile (32, 64 or 128) and the number of K
 *    slices (fewer where K or the workspace is too small): for tests. */
void gpu_gemm_blocked(gpu_gemm_workspace workspace, GPU_GEMM_ARGS,
                      const gemm_epilogue *epilogue = nullptr);
void gpu_gemm_blocked_with_plan(int tile, int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS,
                                const gemm_epilogue *epilogue = nullptr);

/* 4. gemm_4_warptiled.cu: rung 3's register blocking, each warp on a compact 32×64 tile of C,
 *    its lanes placed so that shared-memory reads are conflict-free. */
void gpu_gemm_warptiled(GPU_GEMM_ARGS);

/* 5. gemm_5_tiled.cu, the FP32 GEMM of --impl tiled and fused: warp tiles fed by a 3-stage
 *    cp.async pipeline, block tiles by size (128×256 down to 32×32), split-K for small C
 *    through a thread block cluster (no workspace); an epilogue as it stores C. _with_plan
 *    forces the block tile (tile_rows × tile_cols; gpu_gemm_tiled_has_tile says which exist)
 *    and the K slices (at most 8, a cluster): for tests and mlp_bench --plan. */
void gpu_gemm_tiled(GPU_GEMM_ARGS, const gemm_epilogue *epilogue = nullptr);
bool gpu_gemm_tiled_has_tile(int tile_rows, int tile_cols);
void gpu_gemm_tiled_with_plan(int tile_rows, int tile_cols, int splits, GPU_GEMM_ARGS,
                              const gemm_epilogue *epilogue = nullptr);

/* 6. gemm_6_tf32_mma.cu: TF32 tensor cores (mma.sync m16n8k8, FP32 accumulate); A and B FP32
 *    in memory, rounded to TF32 as they enter the tensor cores (about 1e-3 relative error). */
void gpu_gemm_tf32_mma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
void gpu_gemm_tf32_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS);

/* 7. gemm_7_bf16_mma.cu: BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate). */
void gpu_gemm_bf16_mma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);
void gpu_gemm_bf16_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);

/* Hopper only: rungs 8, 9 and 11 use wgmma, the warpgroup MMA that reads A and B from shared memory
 * (compiled for sm_90a alone). They exit with a message on another GPU: ask
 * gpu_gemm_wgmma_available() first (the current device has compute capability 9.0). */
bool gpu_gemm_wgmma_available();

/* 8. gemm_8_bf16_wgmma.cu: rung 7's contract. */
void gpu_gemm_bf16_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);
void gpu_gemm_bf16_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);

/* 9. gemm_9_tf32_wgmma.cu: rung 6's contract; for large products an operand that is not K-major
 *    in memory is first transposed into the workspace, where there is room. */
void gpu_gemm_tf32_wgmma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);
void gpu_gemm_tf32_wgmma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS);

/* 10. gemm_10_tiled_tensor.cu, the TF32 and BF16 GEMM of --impl tiled and fused: rung 5's
 *     pipeline, cluster split-K and epilogue, the products on tensor cores (mma.sync m16n8k8
 *     in TF32, m16n8k16 in BF16, FP32 accumulate), A and B read as FP32 and rounded to TF32 or
 *     to BF16 on their way in.
 *     _with_plan forces the tile (32, 64 or 128; 0: its own) and the K slices (0: its own). */
void gpu_gemm_tiled_tf32(GPU_GEMM_ARGS, const gemm_epilogue *epilogue = nullptr);
void gpu_gemm_tiled_bf16(GPU_GEMM_ARGS, const gemm_epilogue *epilogue = nullptr);
bool gpu_gemm_tiled_tensor_has_tile(int rows, int cols);
void gpu_gemm_tiled_tensor_with_plan(gemm_precision precision, int tile_rows, int tile_cols,
                                     int splits, GPU_GEMM_ARGS,
                                     const gemm_epilogue *epilogue = nullptr);
/*     The BF16 GEMM with A and B stored as BF16 (GPU_GEMM_BF16_ARGS): half the bytes to read,
 *     and, given A and B rounded to nearest even from FP32 ones, the bits gpu_gemm_tiled_bf16
 *     gives on those (the same tiles, K slices and order of the products). */
void gpu_gemm_tiled_bf16_stored(GPU_GEMM_BF16_ARGS, const gemm_epilogue *epilogue = nullptr);
void gpu_gemm_tiled_bf16_stored_with_plan(int tile_rows, int tile_cols, int splits,
                                          GPU_GEMM_BF16_ARGS,
                                          const gemm_epilogue *epilogue = nullptr);
/*     The TF32 GEMM with A stored as FP16 TF32 values (GPU_GEMM_FP16_A_ARGS): half A's bytes,
 *     and, given A's elements rounded to TF32 (cvt.rna) and held exactly, the bits
 *     gpu_gemm_tiled_tf32 gives on the FP32 originals. */
void gpu_gemm_tiled_tf32_fp16_a(GPU_GEMM_FP16_A_ARGS, const gemm_epilogue *epilogue = nullptr);
void gpu_gemm_tiled_tf32_fp16_a_with_plan(int tile_rows, int tile_cols, int splits,
                                          GPU_GEMM_FP16_A_ARGS,
                                          const gemm_epilogue *epilogue = nullptr);

/* 11. gemm_11_wgmma_tma.cu, Hopper only: rungs 8 and 9 fed by TMA copies from a producer
 *     warpgroup into 4 stages, 128×256 tiles, persistent blocks, no split-K (a product of fewer
 *     tiles than multiprocessors leaves the others idle). BF16 takes rung 8's contract, TF32
 *     rung 9's (TN lays B out K-major in the workspace first). Where TMA cannot map an operand
 *     (an unaligned base or row stride), K is 0, or TN's copy has no room, the rung before
 *     takes the product. */
void gpu_gemm_bf16_wgmma_tma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS);
void gpu_gemm_tf32_wgmma_tma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS);

/* Helpers of the rungs. transpose.cu: out (cols×rows, row stride rows) = xᵀ, x rows×cols with
 * row stride ld. round_to_16_bits.cu: out[i] = x[i] rounded to the nearest BF16 (ties to even),
 * or to TF32 (ties away) as FP16 (exact where that is zero or from 2^-14 to 65504 in magnitude). */
void gpu_transpose(cudaStream_t stream, int rows, int cols, const float *x, int ld, float *out);
void gpu_round_to_bf16(cudaStream_t stream, const float *x, size_t count, __nv_bfloat16 *out);
void gpu_round_to_tf32_in_fp16(cudaStream_t stream, const float *x, size_t count, __half *out);

#endif
