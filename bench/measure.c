/* Timing on the CPU; see measure.h. */
#include "bench/measure.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/wall_clock.h"

/* A sample shorter than this is mostly the clock's own cost and resolution. */
#define MIN_SAMPLE_S 1e-4
#define MAX_BATCH 100000

bool timing_done(const bench_timing *timing, int done, double elapsed_s) {
    if (done >= timing->repeats) return true;
    return done >= BENCH_MIN_REPEATS && elapsed_s >= timing->time_cap_s;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_of(double *values, int count) {
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

/* Seconds per call of `batch` calls back to back. */
static double time_batch(timed_call *call, void *context, int batch) {
    double start = wall_seconds();
    for (int i = 0; i < batch; i++) call(context);
    return (wall_seconds() - start) / batch;
}

/* Calls per sample so that a sample lasts at least MIN_SAMPLE_S, from one call's duration. */
static int batch_for(double call_s) {
    if (call_s >= MIN_SAMPLE_S) return 1;
    double batch = MIN_SAMPLE_S / (call_s > 1e-9 ? call_s : 1e-9);
    return batch > MAX_BATCH ? MAX_BATCH : (int)batch + 1;
}

double cpu_time_ms(timed_call *call, void *context, const bench_timing *timing) {
    double call_s = 0.0;
    for (int i = 0; i < timing->warmup; i++) call_s = time_batch(call, context, 1);
    if (timing->warmup == 0) call_s = MIN_SAMPLE_S; /* no warm-up to learn from: no batching */
    int batch = batch_for(call_s);
    double samples[BENCH_MAX_REPEATS];
    double elapsed_s = 0.0;
    int done = 0;
    while (!timing_done(timing, done, elapsed_s)) {
        samples[done] = time_batch(call, context, batch);
        elapsed_s += samples[done] * batch;
        done++;
    }
    return 1e3 * median_of(samples, done);
}

typedef struct {
    char *destination;
    const char *source;
    size_t bytes;
} copy_job;

/* Each OpenMP thread copies its own contiguous share. */
static void parallel_copy(void *context) {
    const copy_job *job = context;
#pragma omp parallel
    {
        size_t threads = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        size_t begin = job->bytes * id / threads, end = job->bytes * (id + 1) / threads;
        memcpy(job->destination + begin, job->source + begin, end - begin);
    }
}

double cpu_copy_bandwidth(size_t bytes, const bench_timing *timing) {
    char *source = malloc(bytes), *destination = malloc(bytes);
    double gb_per_s = 0.0;
    if (source && destination) {
        memset(source, 1, bytes);
        copy_job job = {destination, source, bytes};
        parallel_copy(&job); /* touches every page of the destination before timing */
        gb_per_s = 2.0 * (double)bytes / (cpu_time_ms(parallel_copy, &job, timing) * 1e-3) / 1e9;
    }
    free(source);
    free(destination);
    return gb_per_s;
}
