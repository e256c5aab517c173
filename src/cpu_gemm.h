/* CPU GEMMs. Each follows the gemm_fn contract of backend.h (row-major,
 * C = alpha * op(A) * op(B) + beta * C, op(A) is M×K, op(B) is K×N, C is M×N, beta == 0 never reads C),
 * without the backend argument so tests and the benchmark call them directly.
 * Threads: each uses OpenMP with the number set by omp_set_num_threads (1 means sequential). */
#ifndef MLP_CPU_GEMM_H
#define MLP_CPU_GEMM_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Textbook triple loop, one output element at a time; OpenMP over rows of C. */
void cpu_gemm_naive(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Cache-blocked: packs panels of A and B, then a register-blocked micro-kernel whose inner loop
 * the compiler vectorizes; OpenMP over blocks of C. */
void cpu_gemm_tiled(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* double-precision reference for tests and benchmark verification: same contract, doubles out. */
void reference_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const float *a,
                    int lda, const float *b, int ldb, double beta, const float *c_in, int ldc,
                    double *c_out);

#ifdef __cplusplus
}
#endif

#endif
