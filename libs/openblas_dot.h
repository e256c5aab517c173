/* The vendor-BLAS dot product on the CPU: OpenBLAS's cblas_sdot, the library the benchmark
 * compares cpu_dot_loop and cpu_dot_openmp (bench/kernels/cpu_dot.h) against. */
#ifndef MLP_OPENBLAS_DOT_H
#define MLP_OPENBLAS_DOT_H

#include <stddef.h>

/* w·x over n floats (0 when n == 0), with OpenBLAS's own threads (openblas_threads). */
float cpu_dot_blas(const float *w, const float *x, size_t n);

#endif
