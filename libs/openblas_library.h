/* OpenBLAS, loaded when first used. Linked, it would run its start-up at every start of
 * mlp_train, before main(): it reserves a buffer of about 128 MB per thread, and under a small
 * address-space limit (ulimit -v 300000) that start-up retries its allocation for ever, so even
 * --help hung. Loaded here, only the blas implementation and the benchmark's OpenBLAS rows pay
 * for it, and a limit too small for it is named instead of hanging.
 *
 * The library is the one the build chose (CMakeLists.txt prefers OpenBLAS's OpenMP build, whose
 * threads are OpenMP's), else libopenblas.so.0 wherever the loader finds it. */
#ifndef MLP_OPENBLAS_LIBRARY_H
#define MLP_OPENBLAS_LIBRARY_H

#include <cblas.h>

typedef struct {
    void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint,
                  blasint, float, const float *, blasint, const float *, blasint, float, float *,
                  blasint);
    float (*sdot)(blasint, const float *, blasint, const float *, blasint);
    void (*set_num_threads)(int);
    int (*get_parallel)(void); /* 0 sequential, 1 pthreads, 2 OpenMP */
    char *(*get_config)(void);
    char *(*get_corename)(void);
} openblas_functions;

/* The table, loading the library on the first call; a library that cannot be loaded, or lacks
 * one of the functions, or an address-space limit too small for its start-up, ends the process
 * with status 1 and a message naming the problem. */
const openblas_functions *openblas_library(void);

/* The file it was loaded from (as named to the loader: a path, or the fallback's name). */
const char *openblas_library_file(void);

#endif
