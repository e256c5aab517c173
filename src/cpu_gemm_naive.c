/* The textbook GEMM: every element of C is one dot product over K.
 *
 *     C[i][j] = alpha * sum_p op(A)[i][p] * op(B)[p][j] + beta * C[i][j]
 *
 * Transposes are index arithmetic only: op(A)[i][p] is A[i][p] normally and A[p][i] when
 * trans_a, and likewise for B. Nothing is copied or reordered, so this is the version to read
 * first and the baseline every faster one is measured against. Rows of C are independent, so
 * OpenMP hands them out to threads. */
#include "cpu_gemm.h"

#include <stddef.h>

/* op(A)[i][p]: A is M×K (row stride lda), or K×M when transposed. */
static inline float element_of_op_a(const float *a, int lda, bool trans_a, int i, int p) {
    return trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
}

/* op(B)[p][j]: B is K×N (row stride ldb), or N×K when transposed. */
static inline float element_of_op_b(const float *b, int ldb, bool trans_b, int p, int j) {
    return trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
}

void cpu_gemm_naive(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float dot = 0.0f;
            for (int p = 0; p < k; p++)
                dot += element_of_op_a(a, lda, trans_a, i, p) *
                       element_of_op_b(b, ldb, trans_b, p, j);
            float *out = &c[(size_t)i * ldc + j];
            /* beta == 0 must not read C: it may hold NaN, and NaN * 0 is NaN. */
            *out = beta == 0.0f ? alpha * dot : alpha * dot + beta * *out;
        }
    }
}
