/* Every GPU GEMM mlp_bench measures, listed once: the ladder's rungs in their order
 * (cuda/gemm/gemm_ladder.h) and cuBLAS in each precision. mlp_bench's GEMM rows and
 * tests/test_gpu_gemm_ladder.cu both take their list from GPU_GEMM_RUNGS. C and CUDA. */
#ifndef MLP_GEMM_RUNGS_H
#define MLP_GEMM_RUNGS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h" /* gemm_precision */

#ifdef __cplusplus
extern "C" {
#endif

/* One call of a GEMM (the ladder's contract, GPU_GEMM_ARGS): device pointers, A and B also as
 * the 16-bit copies that some rungs take; a plan (0: the rung's own choice) is honoured by
 * the rungs that can be told their block tile (plan_rows × plan_cols) or K slices. */
typedef struct {
    void *stream; /* cudaStream_t */
    void *cublas; /* cublasHandle_t, bound to stream */
    float *workspace;
    size_t workspace_floats;
    bool trans_a, trans_b;
    int m, n, k;
    float alpha;
    const float *a, *b;
    const void *a_bf16, *b_bf16; /* __nv_bfloat16 */
    const void *a_fp16;          /* __half: A rounded to TF32 */
    int lda, ldb;
    float beta;
    float *c;
    int ldc;
    int plan_rows, plan_cols, plan_splits;
} gpu_gemm_call;

/* What a rung reads of a call. */
typedef enum {
    OPERANDS_FP32,      /* a and b */
    OPERANDS_BF16,      /* a_bf16 and b_bf16 */
    OPERANDS_FP16_A,    /* a_fp16 and b */
} gemm_operands;

typedef struct {
    const char *name;         /* mlp_bench --impl */
    int rung;                 /* its place on the ladder, 1 to 11; 0: the library (cuBLAS) */
    gemm_precision precision; /* of the products */
    gemm_operands operands;
    bool truncates_tf32;      /* its tensor cores truncate FP32 to TF32 (wgmma), not round */
    bool hopper_only;         /* wgmma: compute capability 9.0 (gpu_gemm_wgmma_available) */
    void (*launch)(const gpu_gemm_call *call);
    /* Whether plan_rows × plan_cols is a block tile it has; NULL: it takes no tile plan. */
    bool (*has_tile)(int rows, int cols);
    bool splits_k; /* honours plan_splits */
} gpu_gemm_rung;

extern const gpu_gemm_rung GPU_GEMM_RUNGS[];
extern const int GPU_GEMM_RUNG_COUNT;

#ifdef __cplusplus
}
#endif

#endif
