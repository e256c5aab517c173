/* The vendor dot product on the GPU: cublasSdot, the library the benchmark compares the dot
 * kernels of bench/kernels/gpu_dot.cu against. */
#ifndef MLP_CUBLAS_DOT_H
#define MLP_CUBLAS_DOT_H

#include <cstddef>

#include "libs/cublas_library.h"

/* *dot = w·x over n floats, all three in device memory, queued on the handle's stream. */
void cublas_dot(cublasHandle_t handle, const float *w, const float *x, size_t n, float *dot);

#endif
