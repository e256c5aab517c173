/* The steps every benchmark case goes through; see bench.h. */
#include "bench/bench.h"
#include "util/host_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu_bench.h"
#include "core/rng.h"

/* Copy buffers well beyond any cache: a CPU's last level, an H200's 60 MB L2. */
#define COPY_BYTES_CPU ((size_t)128 << 20)
#define COPY_BYTES_GPU ((size_t)256 << 20)

bool impl_selected(const bench_options *o, const char *impl) {
    if (o->impl_count == 0) return true;
    for (int i = 0; i < o->impl_count; i++)
        if (strcmp(o->impls[i], impl) == 0) return true;
    return false;
}

bool skip_row(result_row *row, const char *reason) {
    row->status = ROW_SKIPPED;
    snprintf(row->note, sizeof row->note, "%s", reason);
    return false;
}

bool fits_memory(const bench_options *o, result_row *row, double bytes) {
    if (bytes <= (double)o->max_bytes) return true;
    char reason[96];
    snprintf(reason, sizeof reason, "needs %.0f MiB > --max-mib %.0f", bytes / 1048576.0,
             o->max_bytes / 1048576.0);
    return skip_row(row, reason);
}

void maybe_corrupt(const bench_options *o, const char *impl, float *value, double term_size) {
    if (o->corrupt && strcmp(o->corrupt, impl) == 0) *value += (float)(0.1 * term_size + 1.0);
}

bool verified(result_row *row, double error, double bound) {
    row->error = error;
    if (error <= bound) return true; /* false for NaN */
    row->status = ROW_FAILED;
    snprintf(row->note, sizeof row->note, "error %.3g > bound %.3g", error, bound);
    return false;
}

void report_progress(const bench_options *o, const char *benchmark, const result_row *row) {
    if (o->quiet) return;
    if (row->status == ROW_OK)
        fprintf(stderr, "  %s %s %s %s: %.4g ms\n", row->device, benchmark, row->impl, row->shape,
                row->median_ms);
    else
        fprintf(stderr, "  %s %s %s %s: %s (%s)\n", row->device, benchmark, row->impl, row->shape,
                row->status == ROW_FAILED ? "FAILED" : "skipped", row->note);
}

void fill_random(float *values, size_t n, uint64_t seed) {
    rng generator = rng_create(seed, 1);
    for (size_t i = 0; i < n; i++) values[i] = rng_uniform_range(&generator, -1.0f, 1.0f);
}

float *host_floats(size_t count) {
    return alloc_or_exit(count * sizeof(float), "the benchmark's arrays");
}

static size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

/* The CPU's buffers count against --max-mib; the GPU's are device memory (and a copy that fit
 * in the GPU's L2 cache would not measure memory at all). */
void measure_copy_bandwidth(const bench_options *o, results *r) {
    if (o->run_cpu)
        r->copy_gb_per_s[0] =
            cpu_copy_bandwidth(smaller(COPY_BYTES_CPU, o->max_bytes / 2), &o->cpu_timing);
#ifdef MLP_HAVE_CUDA
    if (o->run_gpu) r->copy_gb_per_s[1] = gpu_bench_copy_bandwidth(COPY_BYTES_GPU, &o->gpu_timing);
#endif
}
