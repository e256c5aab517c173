/* The vendor-BLAS GEMM on the CPU: OpenBLAS's cblas_sgemm behind the gemm_fn contract of
 * core/backend.h (row-major, C = alpha * op(A) * op(B) + beta * C).
 *
 * CBLAS takes the storage order as an argument, so with CblasRowMajor our row-major matrices,
 * strides and transpose flags go straight through: no swapping of A and B, no reinterpreting
 * C as its transpose. (Contrast cuBLAS, which is column-major only: the GPU backend has to deal
 * with that itself, typically by computing C^T = op(B)^T op(A)^T with A and B swapped.)
 *
 * beta == 0: the BLAS reference semantics say C need not be set on input and is not read, so NaN
 * or garbage in C does not leak into the result, exactly as the contract requires. The tests
 * check this by poisoning C with NaN.
 *
 * OpenBLAS picks its kernels from the CPU model when it loads. 0.3.21 (Debian 12) does not know
 * model 207 (Emerald Rapids) and falls back to its generic SSE3 "Prescott" kernels, about 5x
 * slower; OPENBLAS_CORETYPE=SkylakeX (or Cooperlake) in the environment selects its AVX-512
 * kernels. openblas_core_advice says so where it happens. */
#ifndef MLP_OPENBLAS_GEMM_H
#define MLP_OPENBLAS_GEMM_H

#include <stdbool.h>
#include <stddef.h>

void cpu_gemm_blas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* The number of threads OpenBLAS uses (its own pool in the pthreads build, OpenMP's in the
 * OpenMP build, which CMakeLists.txt prefers). */
void openblas_threads(int n);

/* True for OpenBLAS's pthreads build, which keeps a thread pool of its own beside OpenMP's. */
bool openblas_has_own_threads(void);

/* "OpenBLAS 0.3.21, OpenMP build, SkylakeX kernels": which build and kernels are in use. */
const char *openblas_description(void);

/* The name of the kernel set in use ("SkylakeX", "Haswell", "Prescott", ...). */
const char *openblas_core_name(void);

/* True, with advice (the kernels in use and the OPENBLAS_CORETYPE that fixes it), where OpenBLAS
 * uses kernels older than the CPU's instruction set: it did not recognise the CPU. */
bool openblas_core_advice(char *advice, size_t size);

#endif
