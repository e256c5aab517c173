/* How mlp_bench times a call: warm-up runs, then timed repeats until `repeats` of them or until
 * time_cap_s seconds have been measured (whichever comes first, but never fewer than
 * BENCH_MIN_REPEATS unless repeats itself is smaller); the median is reported, which ignores the
 * odd run slowed by something else on the machine. The CPU side (monotonic clock) is here; the
 * GPU side (CUDA events) is in gpu_bench.cu and uses the same rules. */
#ifndef MLP_BENCH_MEASURE_H
#define MLP_BENCH_MEASURE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MIN_REPEATS 3
#define BENCH_MAX_REPEATS 1000

typedef struct {
    int warmup;        /* untimed runs first */
    int repeats;       /* timed runs at most, 1..BENCH_MAX_REPEATS */
    double time_cap_s; /* stop once this much was measured (after BENCH_MIN_REPEATS) */
} bench_timing;

/* Whether `done` timed runs, which took elapsed_s together, are enough. */
bool timing_done(const bench_timing *timing, int done, double elapsed_s);

/* The median of count > 0 values (sorts them). */
double median_of(double *values, int count);

typedef void timed_call(void *context);

/* Median milliseconds of one call(context) on the CPU's monotonic clock. Calls shorter than
 * 100 µs are timed in batches of several back to back (the per-call time of each batch is one
 * sample), so that the clock's own cost and resolution do not distort tiny cases. */
double cpu_time_ms(timed_call *call, void *context, const bench_timing *timing);

/* The CPU's copy bandwidth in GB/s (bytes read + written per second): memcpy of `bytes` split
 * among the OpenMP threads. 0 if the buffers cannot be allocated. */
double cpu_copy_bandwidth(size_t bytes, const bench_timing *timing);

#ifdef __cplusplus
}
#endif

#endif
