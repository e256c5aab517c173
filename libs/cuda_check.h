/* Checking every CUDA call (cuBLAS's: CUBLAS_CHECK, libs/cublas_library.h): a failure prints
 * the call, the error and where it happened, then ends the process with status 1. Kernel launches are checked with
 * CUDA_CHECK_LAUNCH() right after the launch (it catches bad configurations; errors inside the
 * kernel surface at the next synchronizing call, which is checked too). */
#ifndef MLP_CUDA_CHECK_H
#define MLP_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

[[noreturn]] inline void cuda_fail(const char *call, const char *error, const char *file, int line) {
    std::fprintf(stderr, "mlp_train: CUDA error: %s\n  in %s\n  at %s:%d\n", error, call, file, line);
    std::exit(1);
}

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t status_ = (call);                                                              \
        if (status_ != cudaSuccess) cuda_fail(#call, cudaGetErrorString(status_), __FILE__, __LINE__); \
    } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* Blocks of `threads` covering `count` items. */
inline unsigned blocks_for(size_t count, unsigned threads) {
    return (unsigned)((count + threads - 1) / threads);
}

#endif
