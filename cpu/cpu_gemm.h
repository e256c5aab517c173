/* CPU GEMMs. Each follows the gemm_fn contract of backend.h (row-major,
 * C = alpha * op(A) * op(B) + beta * C, op(A) is M×K, op(B) is K×N, C is M×N, beta == 0 never reads C),
 * without the backend argument so tests and the benchmark call them directly.
 * Threads: each uses OpenMP with the number set by omp_set_num_threads (1 means sequential), and
 * gives the same bits for any number of threads. */
#ifndef MLP_CPU_GEMM_H
#define MLP_CPU_GEMM_H

#include <stdbool.h>

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The loops a student writes first, in the cache-friendly order (cpu_gemm_naive.c): the inner
 * loop walks rows of memory; no blocking, no packing, no intrinsics. OpenMP over rows of C. */
void cpu_gemm_naive(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Cache-blocked: packed panels of B, a register-blocked micro-kernel the compiler vectorizes,
 * OpenMP over tiles of C (cpu_gemm_tiled.c). */
void cpu_gemm_tiled(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* The same with the epilogue of backend.h (bias, ReLU, ReLU mask; NULL: none) applied to each
 * tile of C as it is stored: the same bits as cpu_gemm_tiled followed by cpu_ops.h's passes. */
void cpu_gemm_tiled_fused(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc, const gemm_epilogue *epilogue);

/* double-precision reference for tests and benchmark verification: same contract, doubles out. */
void reference_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const float *a,
                    int lda, const float *b, int ldb, double beta, const float *c_in, int ldc,
                    double *c_out);

#ifdef __cplusplus
}
#endif

#endif
