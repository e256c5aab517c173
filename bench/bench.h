/* What the three benchmarks of mlp_bench share: the options (parsed in main.c), and the steps
 * every case goes through (bench.c): is the implementation selected, do its buffers fit, then
 * verify the output against the reference, and only if it passes, time it. */
#ifndef MLP_BENCH_H
#define MLP_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/kernels/cpu_maxpool.h"
#include "bench/measure.h"
#include "bench/results.h"

#define BENCH_MAX_LIST 64

typedef struct {
    int m, n, k;
    bool trans_a, trans_b;
    char label[24]; /* e.g. "L1 fwd b16" for the MLP's shapes; empty otherwise */
} gemm_shape;

typedef struct {
    bool run_cpu, run_gpu; /* the devices asked for that are available */
    const char *impls[BENCH_MAX_LIST];
    int impl_count; /* 0: every implementation */
    long sizes[BENCH_MAX_LIST];
    int size_count; /* gemm square sides or dot lengths; 0: the benchmark's default */
    bool mlp_shapes;
    int plan_rows, plan_cols, plan_splits; /* --plan: GPU blocked and tiled's tile (rows×cols)
                                            * and K slices; 0: their own choice */
    gemm_shape shapes[BENCH_MAX_LIST];
    int shape_count;
    long image_sizes[BENCH_MAX_LIST];
    int image_size_count;
    long planes;
    maxpool_window window;
    long naive_max;   /* CPU naive GEMM skipped when M·N·K > naive_max³ */
    size_t max_bytes; /* cases needing more memory than this are skipped */
    bench_timing cpu_timing, gpu_timing;
    int threads;
    bool with_transfer;
    const char *corrupt; /* --corrupt: the implementation whose output is perturbed */
    bool quiet;
    const char *csv_path, *json_path;
} bench_options;

/* The benchmarks: each adds its rows to r. */
void bench_gemm(const bench_options *o, results *r);
/* gemm's --impl names: the CPU's, then the GPU's registry (gemm_rungs.h); NULL-terminated. */
const char *const *bench_gemm_names(void);
void bench_dot(const bench_options *o, results *r);
void bench_maxpool(const bench_options *o, results *r);

/* ---- the steps of a case (bench.c) ---- */

bool impl_selected(const bench_options *o, const char *impl);

/* Marks the row skipped with the reason; always returns false (so `return skip(...)` reads). */
bool skip_row(result_row *row, const char *reason);

/* Whether a case needing `bytes` of host memory is within --max-mib; if not, the row is
 * marked skipped. (A double: the sizes asked for may not even fit in a size_t.) */
bool fits_memory(const bench_options *o, result_row *row, double bytes);

/* The --corrupt self-test: if impl is the one named, adds 10% of `term_size` (the size of the
 * terms the value is made of) plus 1 to *value, more than any tolerance allows (the loosest,
 * BF16 GEMM's, is 1.6%). */
void maybe_corrupt(const bench_options *o, const char *impl, float *value, double term_size);

/* Records the verification error; if it is above bound (or NaN) the row FAILED and false is
 * returned: the case is then not timed. */
bool verified(result_row *row, double error, double bound);

/* One line on stderr about a finished row, unless --quiet. */
void report_progress(const bench_options *o, const char *benchmark, const result_row *row);

/* Measures the copy bandwidth of each device in the run (the yardstick of the GB/s columns)
 * into r->copy_gb_per_s. */
void measure_copy_bandwidth(const bench_options *o, results *r);

/* n uniform floats in [-1, 1) from the project's generator, the same for the same seed. */
void fill_random(float *values, size_t n, uint64_t seed);

/* malloc of count floats, or exit with a message. */
float *host_floats(size_t count);

#endif
