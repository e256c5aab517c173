/* Dot products on the CPU, and the logistic function that turns one into y = sigmoid(w·x).
 *
 * A dot product reads 2n floats and does n multiply-adds: 1 FLOP per 4 bytes, so for vectors
 * larger than the caches its speed is the memory bandwidth, if the loop keeps up with memory.
 *
 * cpu_dot_loop keeps one double accumulator. A product of two floats is exact in double (24 + 24
 * significant bits fit in 53), so the only roundings are the additions, at 2^-53 each: the
 * error is at most about n·2^-53 of the sum of |w[i]·x[i]|, far below a float's 2^-24 for any n
 * up to 2^29 (5·10^8), which makes it a reference as well as a baseline. It is deliberately the
 * plain loop: the additions form one dependency chain, one add in flight at a time (about 4 cycles
 * each), so it runs at about one element per 4 cycles, latency bound rather than memory bound. C
 * forbids the compiler to reorder the additions to vectorize them.
 *
 * cpu_dot_openmp allows exactly that reordering with `omp parallel for simd reduction`: each
 * thread takes a contiguous slice, keeps a vector of partial sums (several additions in flight at
 * once) and the threads' totals are added at the end. That streams at memory speed on each core.
 * Still in double, so it is as accurate as the loop; but the grouping of the additions depends
 * on the thread count and vector width, so the last bits may differ from the loop's, and the
 * order in which OpenMP combines the threads' totals is unspecified (not bitwise reproducible
 * from run to run with more than one thread). */
#include "bench/kernels/cpu_dot.h"

#include <math.h>

float cpu_dot_loop(const float *w, const float *x, size_t n) {
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += (double)w[i] * (double)x[i];
    return (float)total;
}

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

float cpu_dot_openmp(const float *w, const float *x, size_t n) {
    double total = 0.0;
#pragma omp parallel for simd reduction(+ : total) schedule(static) if (n >= PARALLEL_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) total += (double)w[i] * (double)x[i];
    return (float)total;
}

float cpu_sigmoid(float z) {
    if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}
