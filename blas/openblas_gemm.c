/* cblas_sgemm in row-major order; see openblas_gemm.h for why no transposition tricks are
 * needed. */
#include "openblas_gemm.h"

#include <cblas.h>
#include <stdio.h>

void cpu_gemm_blas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void openblas_threads(int n) { openblas_set_num_threads(n); }

int openblas_thread_count(void) { return openblas_get_num_threads(); }

bool openblas_has_own_threads(void) { return openblas_get_parallel() == 1; }

const char *openblas_description(void) {
    static char description[96];
    static const char *const builds[] = {"sequential", "pthreads", "OpenMP"};
    int parallel = openblas_get_parallel();
    char version[32] = "";
    sscanf(openblas_get_config(), "OpenBLAS %31s", version);
    snprintf(description, sizeof description, "OpenBLAS %s, %s build, %s kernels", version,
             parallel >= 0 && parallel <= 2 ? builds[parallel] : "unknown", openblas_get_corename());
    return description;
}
