/* Split-K through memory, shared by the ladder's rungs that serve every size (gemm_6_tf32_mma.cu,
 * gemm_7_bf16_mma.cu; gemm_5_tiled.cu splits K through a cluster instead, and takes only
 * gemm_k_slices from here); gemm_split_k.cu holds the host side.
 *
 * A GEMM whose C is small (the MLP's layers: 512×256 is 32 tiles of 64×64 for 132
 * multiprocessors) leaves most of the GPU idle when one block computes each tile. So K is cut
 * into slices, one block per (tile, slice) (grid z is the slice); each block writes its raw
 * partial tile to its own plane of a workspace (M×N, row stride N), and gemm_sum_slices adds the
 * planes in the order z = 0, 1, ... and applies alpha and beta: no atomics, the same bits on
 * every run. gemm_3_blocked.cu uses the host side too, with its epilogue applied in the sum. */
#ifndef MLP_GEMM_SPLIT_K_CUH
#define MLP_GEMM_SPLIT_K_CUH

#include "cuda/gemm/gemm_output.cuh"
#include "cuda/gemm/gemm_ladder.h"

/* K cut into `splits` slices of k_per_split (the last one may be shorter). */
struct gemm_k_split {
    int splits;
    int k_per_split;
};

int gemm_multiprocessor_count();

/* `wanted` slices of whole k_step steps, each at least min_slice deep, no empty slice; one
 * slice means no split. */
gemm_k_split gemm_k_slices(int wanted, int k, int k_step, int min_slice);

/* The same, and no more than the workspace has planes for. */
gemm_k_split gemm_slices(int wanted, int m, int n, int k, int k_step, int min_slice,
                         gpu_gemm_workspace workspace);

/* For a grid of `tiles` blocks: no split when they give every multiprocessor one, otherwise
 * enough slices for about two blocks per multiprocessor. */
gemm_k_split gemm_choose_slices(long tiles, int m, int n, int k, int k_step, int min_slice,
                                gpu_gemm_workspace workspace);

/* C = epilogue(alpha · (sum of the `split.splits` planes of partials) + beta · C). */
void gemm_sum_slices(cudaStream_t stream, const float *partials, gemm_k_split split, int m, int n,
                     float alpha, float beta, float *c, int ldc,
                     const gemm_epilogue &epilogue = gemm_epilogue{});

/* ---- on the device ---- */

/* The block's K slice [begin, end). */
struct gemm_k_range {
    int begin, end;
};

__device__ __forceinline__ gemm_k_range block_k_range(int k, int k_per_split) {
    const int begin = blockIdx.z * k_per_split;
    return {begin, min(k, begin + k_per_split)};
}

/* partials == nullptr: C itself, through the epilogue. Otherwise plane blockIdx.z of partials
 * (M×N, row stride N), raw: gemm_sum_slices applies the epilogue. */
__device__ __forceinline__ gemm_output block_output(float *c, int ldc, float alpha, float beta,
                                                    float *partials, int m, int n,
                                                    const gemm_epilogue &epilogue = gemm_epilogue{}) {
    if (!partials) return output_to_c(c, ldc, alpha, beta, epilogue);
    /* the workspace is cudaMalloc'd: plane z, z·m·n floats in, keeps 8-byte alignment when n is
     * even and 16-byte alignment when n is a multiple of 4 */
    return {partials + (size_t)blockIdx.z * m * n, n, 1.0f, 0.0f, n % 2 == 0, n % 4 == 0, gemm_epilogue{}};
}

#endif
