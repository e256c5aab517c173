/* The GEMM a student writes first: three nested loops, in the order that walks memory row by
 * row, and nothing else (no blocking, no packing, no intrinsics).
 *
 *     C[i][j] = alpha * sum_p op(A)[i][p] * op(B)[p][j] + beta * C[i][j]
 *
 * The loop order depends on the transposes, so that the innermost loop always reads a row of a
 * row-major matrix (unit stride):
 *
 *   op(B) = B   (NN, TN): i, p, j    C's row i += op(A)[i][p] * B's row p
 *                                    (the classic i-k-j order; op(A)[i][p] is one value, read
 *                                    once per row of B, whether A is transposed or not)
 *   op(B) = B^T (NT):     i, j, p    C[i][j] = dot(A's row i, B's row j)
 *   TT:                   i, j, p    the dot product with A's column i: no order reads both A^T
 *                                    and B^T along rows (the MLP never multiplies them)
 *
 * The i-p-j loop is a scaled row addition that gcc vectorizes at -O3; the dot products are sums
 * gcc keeps in order (ISO C forbids reassociating them), so they run one multiply-add at a time.
 * Either way each multiply-add loads its operands from the caches: this is the baseline every
 * faster GEMM is measured against (docs/kernels.md). Rows of C are independent: OpenMP hands
 * them out to threads, and every row is computed the same way whatever the thread count. */
#include "cpu/cpu_gemm.h"

#include <stddef.h>

/* C's row i (n values): beta * row, or zeros when beta == 0 (C may hold NaN, and NaN * 0 is
 * NaN). */
static void scale_row(float *c_row, int n, float beta) {
    for (int j = 0; j < n; j++) c_row[j] = beta == 0.0f ? 0.0f : beta * c_row[j];
}

/* op(B) = B: C's row i += alpha * op(A)[i][p] * B's row p, for p in order. */
static void row_times_b(bool trans_a, int i, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float *c_row) {
    for (int p = 0; p < k; p++) {
        float a_ip = alpha * (trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
        const float *b_row = b + (size_t)p * ldb;
        for (int j = 0; j < n; j++) c_row[j] += a_ip * b_row[j];
    }
}

/* op(B) = B^T: C[i][j] += alpha * dot(op(A)'s row i, B's row j). */
static void row_times_b_transposed(bool trans_a, int i, int n, int k, float alpha, const float *a,
                                   int lda, const float *b, int ldb, float *c_row) {
    for (int j = 0; j < n; j++) {
        const float *b_row = b + (size_t)j * ldb;
        float dot = 0.0f;
        if (trans_a)
            for (int p = 0; p < k; p++) dot += a[(size_t)p * lda + i] * b_row[p];
        else
            for (int p = 0; p < k; p++) dot += a[(size_t)i * lda + p] * b_row[p];
        c_row[j] += alpha * dot;
    }
}

void cpu_gemm_naive(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        float *c_row = c + (size_t)i * ldc;
        scale_row(c_row, n, beta);
        if (alpha == 0.0f) continue; /* as in BLAS, A and B are then not read */
        if (trans_b)
            row_times_b_transposed(trans_a, i, n, k, alpha, a, lda, b, ldb, c_row);
        else
            row_times_b(trans_a, i, n, k, alpha, a, lda, b, ldb, c_row);
    }
}
