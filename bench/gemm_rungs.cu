/* The registry of GPU GEMMs (gemm_rungs.h): each rung behind one signature. */
#include "bench/gemm_rungs.h"

#include "cuda/gemm/gemm_ladder.h"
#include "libs/cublas_gemm.h"

namespace {

using bf16 = __nv_bfloat16;

#define FP32_ARGS                                                                                  \
    static_cast<cudaStream_t>(x->stream), x->trans_a, x->trans_b, x->m, x->n, x->k, x->alpha,      \
        x->a, x->lda, x->b, x->ldb, x->beta, x->c, x->ldc
#define BF16_ARGS                                                                                  \
    static_cast<cudaStream_t>(x->stream), x->trans_a, x->trans_b, x->m, x->n, x->k, x->alpha,      \
        static_cast<const bf16 *>(x->a_bf16), x->lda, static_cast<const bf16 *>(x->b_bf16),        \
        x->ldb, x->beta, x->c, x->ldc
#define CUBLAS_ARGS(a, b)                                                                          \
    static_cast<cublasHandle_t>(x->cublas), x->trans_a, x->trans_b, x->m, x->n, x->k, x->alpha,    \
        a, x->lda, b, x->ldb, x->beta, x->c, x->ldc

gpu_gemm_workspace workspace(const gpu_gemm_call *x) { return {x->workspace, x->workspace_floats}; }

void naive(const gpu_gemm_call *x) { gpu_gemm_naive(FP32_ARGS); }
void shared(const gpu_gemm_call *x) { gpu_gemm_shared(FP32_ARGS); }
void blocked(const gpu_gemm_call *x) {
    if (x->plan_rows)
        gpu_gemm_blocked_with_plan(x->plan_rows, x->plan_splits, workspace(x), FP32_ARGS);
    else
        gpu_gemm_blocked(workspace(x), FP32_ARGS);
}
void warptiled(const gpu_gemm_call *x) { gpu_gemm_warptiled(FP32_ARGS); }
void tiled(const gpu_gemm_call *x) {
    if (x->plan_rows)
        gpu_gemm_tiled_with_plan(x->plan_rows, x->plan_cols, x->plan_splits, FP32_ARGS);
    else
        gpu_gemm_tiled(FP32_ARGS);
}
void tf32_mma(const gpu_gemm_call *x) {
    if (x->plan_splits)
        gpu_gemm_tf32_mma_with_splits(x->plan_splits, workspace(x), FP32_ARGS);
    else
        gpu_gemm_tf32_mma(workspace(x), FP32_ARGS);
}
void bf16_mma(const gpu_gemm_call *x) {
    if (x->plan_splits)
        gpu_gemm_bf16_mma_with_splits(x->plan_splits, workspace(x), BF16_ARGS);
    else
        gpu_gemm_bf16_mma(workspace(x), BF16_ARGS);
}
void tf32_wgmma(const gpu_gemm_call *x) {
    if (x->plan_splits)
        gpu_gemm_tf32_wgmma_with_splits(x->plan_splits, workspace(x), FP32_ARGS);
    else
        gpu_gemm_tf32_wgmma(workspace(x), FP32_ARGS);
}
void bf16_wgmma(const gpu_gemm_call *x) {
    if (x->plan_splits)
        gpu_gemm_bf16_wgmma_with_splits(x->plan_splits, workspace(x), BF16_ARGS);
    else
        gpu_gemm_bf16_wgmma(workspace(x), BF16_ARGS);
}
void tf32_wgmma_tma(const gpu_gemm_call *x) { gpu_gemm_tf32_wgmma_tma(workspace(x), FP32_ARGS); }
void bf16_wgmma_tma(const gpu_gemm_call *x) { gpu_gemm_bf16_wgmma_tma(workspace(x), BF16_ARGS); }
template <gemm_precision P> void tiled_tensor(const gpu_gemm_call *x) {
    gpu_gemm_tiled_tensor_with_plan(P, x->plan_rows, x->plan_cols, x->plan_splits, FP32_ARGS);
}
void tiled_bf16_stored(const gpu_gemm_call *x) {
    gpu_gemm_tiled_bf16_stored_with_plan(x->plan_rows, x->plan_cols, x->plan_splits, BF16_ARGS);
}
void tiled_tf32_fp16_a(const gpu_gemm_call *x) {
    gpu_gemm_tiled_tf32_fp16_a_with_plan(x->plan_rows, x->plan_cols, x->plan_splits,
                                         static_cast<cudaStream_t>(x->stream), x->trans_a,
                                         x->trans_b, x->m, x->n, x->k, x->alpha,
                                         static_cast<const __half *>(x->a_fp16), x->lda, x->b,
                                         x->ldb, x->beta, x->c, x->ldc);
}
void cublas_fp32(const gpu_gemm_call *x) { cublas_gemm(CUBLAS_ARGS(x->a, x->b)); }
void cublas_tf32(const gpu_gemm_call *x) { cublas_gemm_tf32(CUBLAS_ARGS(x->a, x->b)); }
void cublas_bf16(const gpu_gemm_call *x) {
    cublas_gemm_bf16(CUBLAS_ARGS(static_cast<const bf16 *>(x->a_bf16),
                                 static_cast<const bf16 *>(x->b_bf16)));
}

bool blocked_has_tile(int rows, int cols) { return rows == cols && (rows == 32 || rows == 64 || rows == 128); }

constexpr gemm_operands FP32 = OPERANDS_FP32, BF16 = OPERANDS_BF16, FP16_A = OPERANDS_FP16_A;

} // namespace

/*                      name          rung precision       operands trunc hopper launch     tile plans              K splits */
extern "C" const gpu_gemm_rung GPU_GEMM_RUNGS[] = {
    {"naive",      1, PRECISION_FP32, FP32,  false, false, naive,       nullptr,                 false},
    {"shared",     2, PRECISION_FP32, FP32,  false, false, shared,      nullptr,                 false},
    {"blocked",    3, PRECISION_FP32, FP32,  false, false, blocked,     blocked_has_tile,        true},
    {"warptiled",  4, PRECISION_FP32, FP32,  false, false, warptiled,   nullptr,                 false},
    {"tiled",      5, PRECISION_FP32, FP32,  false, false, tiled,       gpu_gemm_tiled_has_tile, true},
    {"blas",       0, PRECISION_FP32, FP32,  false, false, cublas_fp32, nullptr,                 false},
    {"tf32_mma",   6, PRECISION_TF32, FP32,  false, false, tf32_mma,    nullptr,                 true},
    {"tf32_wgmma", 9, PRECISION_TF32, FP32,  true,  true,  tf32_wgmma,  nullptr,                 true},
    {"tiled_tf32", 10, PRECISION_TF32, FP32, false, false, tiled_tensor<PRECISION_TF32>, gpu_gemm_tiled_tensor_has_tile, true},
    {"tiled_tf32_fp16_a", 10, PRECISION_TF32, FP16_A, false, false, tiled_tf32_fp16_a, gpu_gemm_tiled_tensor_has_tile, true},
    {"tf32_wgmma_tma", 11, PRECISION_TF32, FP32, true, true, tf32_wgmma_tma, nullptr,         false},
    {"blas_tf32",  0, PRECISION_TF32, FP32,  false, false, cublas_tf32, nullptr,                 false},
    {"bf16_mma",   7, PRECISION_BF16, BF16,  false, false, bf16_mma,    nullptr,                 true},
    {"bf16_wgmma", 8, PRECISION_BF16, BF16,  false, true,  bf16_wgmma,  nullptr,                 true},
    {"tiled_bf16", 10, PRECISION_BF16, FP32, false, false, tiled_tensor<PRECISION_BF16>, gpu_gemm_tiled_tensor_has_tile, true},
    {"tiled_bf16_stored", 10, PRECISION_BF16, BF16, false, false, tiled_bf16_stored, gpu_gemm_tiled_tensor_has_tile, true},
    {"bf16_wgmma_tma", 11, PRECISION_BF16, BF16, false, true, bf16_wgmma_tma, nullptr,        false},
    {"blas_bf16",  0, PRECISION_BF16, BF16,  false, false, cublas_bf16, nullptr,                 false},
};
extern "C" const int GPU_GEMM_RUNG_COUNT = sizeof GPU_GEMM_RUNGS / sizeof GPU_GEMM_RUNGS[0];
