/* cpu_fma_peak: what this machine's cores can multiply-add in FP32, on 1, 2, 4, ... threads.
 *
 * Each thread runs CHAINS independent chains of vector multiply-adds (acc = acc·a + b) on
 * registers alone, enough to cover the FMA units' latency, so the loop is bound by the FMA
 * units' throughput and nothing else: no memory, no synchronization. The GFLOP/s at T threads
 * is the ceiling for any FP32 GEMM on T threads, and its growth from 1 thread to all of them is
 * the ceiling for a compute-bound program's speed-up: where cores share their FMA units
 * (SMT) or slow their clock when all run wide vectors, it stays short of T
 * (docs/performance.md). The best of five runs per count is reported, after an untimed run on
 * all threads that wakes the cores up to speed (on the GPU host's virtual machine, one thread
 * measured first without it reached 103 GFLOP/s, against the 142 its GEMM reaches).
 *
 * The vectors are GCC/clang vector extensions of VECTOR_FLOATS floats (no intrinsics); built with
 * -march=native and -ffp-contract=fast (CMakeLists.txt), each acc·a + b is one FMA instruction
 * of the machine's widest vectors.
 *
 * Usage: cpu_fma_peak [--threads N] (the largest count; default: all cores) */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse_number.h"
#include "profiling/wall_clock.h"

#if defined(__AVX512F__)
enum { VECTOR_FLOATS = 16 };
#elif defined(__AVX__)
enum { VECTOR_FLOATS = 8 };
#else
enum { VECTOR_FLOATS = 4 };
#endif
typedef float vector __attribute__((vector_size(VECTOR_FLOATS * sizeof(float))));

enum { CHAINS = 16 };                   /* independent accumulators a thread keeps in registers */
enum { ROUNDS = 5 };                    /* runs per thread count; the best is reported */
static const long STEPS = 12500000;     /* multiply-adds per chain and run: ~0.1 s on one core */

/* One thread's work; returns a value that depends on every chain, so none is optimized out. */
__attribute__((noinline)) /* one function to inspect (tests/fma_instructions_test.sh) */
static float multiply_add_chains(long steps, float seed) {
    vector acc[CHAINS], a, b;
    for (int j = 0; j < VECTOR_FLOATS; j++) a[j] = 1.0000001f, b[j] = 1e-7f;
    for (int i = 0; i < CHAINS; i++) acc[i] = a * (seed + (float)i);
    for (long s = 0; s < steps; s++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = acc[i] * a + b;
    float sum = 0.0f;
    for (int i = 0; i < CHAINS; i++) sum += acc[i][0];
    return sum;
}

/* GFLOP/s of `threads` threads running the chains at once (the best of ROUNDS). */
static double peak_gflops(int threads) {
    double best = 0.0;
    for (int round = 0; round < ROUNDS; round++) {
        float sink = 0.0f;
        double start = wall_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += multiply_add_chains(STEPS, (float)omp_get_thread_num());
        double seconds = wall_seconds() - start;
        double flops = 2.0 * VECTOR_FLOATS * CHAINS * (double)STEPS * threads;
        if (sink == 0.5f) printf(" "); /* never true; keeps sink alive */
        if (flops / seconds / 1e9 > best) best = flops / seconds / 1e9;
    }
    return best;
}

static int usage(const char *message) {
    fprintf(stderr, "cpu_fma_peak: %s\nUsage: cpu_fma_peak [--threads N]\n", message);
    return 2;
}

int main(int argc, char **argv) {
    int max_threads = omp_get_max_threads();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("Usage: cpu_fma_peak [--threads N]\n"
                   "FP32 multiply-add peak (registers only) on 1, 2, 4, ... N threads (default:\n"
                   "all cores), and its speed-up over one thread: the ceiling for a GEMM's\n"
                   "thread scaling (docs/performance.md).\n");
            return 0;
        }
        if (strcmp(argv[i], "--threads") != 0) return usage("unknown option");
        if (i + 1 == argc || !parse_int_in(argv[++i], 1, 4096, &max_threads))
            return usage("--threads wants a whole number from 1 to 4096");
    }
    printf("cpu_fma_peak: %d-float vectors, %d chains a thread; GFLOP/s, best of %d runs\n",
           VECTOR_FLOATS, CHAINS, ROUNDS);
    printf("%8s %12s %12s %10s %11s\n", "threads", "GFLOP/s", "per thread", "speed-up",
           "efficiency");
    peak_gflops(max_threads); /* untimed: the cores' clocks up to speed */
    double one = 0.0;
    for (int threads = 1;; threads = threads * 2 < max_threads ? threads * 2 : max_threads) {
        double gflops = peak_gflops(threads);
        if (threads == 1) one = gflops;
        printf("%8d %12.1f %12.1f %9.2fx %10.0f%%\n", threads, gflops, gflops / threads,
               gflops / one, 100.0 * gflops / one / threads);
        if (threads == max_threads) break;
    }
    return 0;
}
