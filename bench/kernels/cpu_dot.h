/* y = sigmoid(w·x) on the CPU: the dot product of two vectors of n floats, then the logistic
 * function. Two ways to take the dot product (a third, OpenBLAS's cblas_sdot, is in
 * libs/openblas_dot.h); cpu_dot.c says how each works and how fast it can be. */
#ifndef MLP_CPU_DOT_H
#define MLP_CPU_DOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* w·x = sum of w[i]·x[i] over i < n (0 when n == 0); sequential, accumulated in double, rounded
 * to float once: the accurate baseline. */
float cpu_dot_loop(const float *w, const float *x, size_t n);

/* The same sum over all OpenMP threads (omp_set_num_threads), vectorized, in double. */
float cpu_dot_openmp(const float *w, const float *x, size_t n);

/* 1 / (1 + e^-z), computed without overflow for any z (e^z is only taken of z <= 0). */
float cpu_sigmoid(float z);

#ifdef __cplusplus
}
#endif

#endif
