/* The GEMM every other implementation is checked against: the same contract as gemm_fn, but
 * products are summed in double and the result is returned in double, so its own rounding error
 * (about K * 1e-16 relative) is negligible next to the float32 error being measured.
 * c_in and c_out are both M×N with row stride ldc; c_out may be a different array from c_in.
 * Single-threaded and deliberately plain: it has to be obviously right, not fast. */
#include "cpu/cpu_gemm.h"

#include <stddef.h>

void reference_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const float *a,
                    int lda, const float *b, int ldb, double beta, const float *c_in, int ldc,
                    double *c_out) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double dot = 0.0;
            for (int p = 0; p < k; p++) {
                double a_ip = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double b_pj = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                dot += a_ip * b_pj;
            }
            size_t at = (size_t)i * ldc + j;
            /* c_in may be NULL when beta == 0: C is then never read, as in the contract. */
            c_out[at] = beta == 0.0 ? alpha * dot : alpha * dot + beta * (double)c_in[at];
        }
    }
}
