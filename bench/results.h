/* The rows mlp_bench collects (one per device, implementation and shape) and how they are
 * written: an aligned table for people, CSV and JSON for scripts (each written to a temporary
 * file that is renamed into place, so a reader never sees half a file). */
#ifndef MLP_BENCH_RESULTS_H
#define MLP_BENCH_RESULTS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum { ROW_OK, ROW_FAILED, ROW_SKIPPED } row_status;

typedef struct {
    char device[4]; /* "cpu" or "gpu" */
    char impl[32];
    char library[32];   /* the row vs_library compares with: "blas" unless set otherwise */
    char shape[64];     /* "512x256x784 TN", "n=1048576", "4x1024x1024 k2s2p0" */
    double size;        /* the x axis of plots: gemm ∛(M·N·K), dot n, maxpool image side */
    double work;        /* per call: FLOPs (gemm) or bytes moved (dot, maxpool) */
    double median_ms;   /* NAN when not timed */
    double transfer_ms; /* gemm --with-transfer on the GPU: the host↔device copies; else NAN */
    double vs_library;  /* the library row's time / this time (> 1: faster); NAN if none */
    double of_copy_bw;  /* this rate / the device's copy bandwidth; NAN if not applicable */
    double error;       /* verification: relative error, or mismatches for maxpool; NAN if none */
    row_status status;
    char note[96]; /* why a row failed or was skipped */
} result_row;

typedef struct {
    const char *benchmark; /* "gemm", "dot" or "maxpool" */
    int cpu_threads;
    char blas_core[32];      /* the kernels OpenBLAS chose for this CPU, e.g. "Haswell" */
    char gpu_name[128];      /* empty without a GPU */
    double copy_gb_per_s[2]; /* measured copy bandwidth of cpu [0] and gpu [1]; 0 = not measured */
    bool with_transfer;
    result_row *rows;
    int count, capacity;
} results;

void results_init(results *r, const char *benchmark);
void results_free(results *r);

/* A new row with its identity; not timed, not verified, status ok until said otherwise. */
result_row *results_add(results *r, const char *device, const char *impl, const char *shape,
                        double size, double work);

/* GFLOP/s (gemm) or GB/s (dot, maxpool) of a timed row; NAN if not timed. */
double row_rate(const result_row *row);

/* After the last row: CPU rows before GPU rows, and vs_library (against the row of the same
 * device and shape whose impl is this row's `library`) and of_copy_bw (dot, maxpool) filled in. */
void results_finish(results *r);

void results_print_table(const results *r, FILE *out);

/* False (with a message on stderr) if the file cannot be written. */
bool results_write_csv(const results *r, const char *path);
bool results_write_json(const results *r, const char *path);

/* Prints one line per failed row on `out`; returns how many failed. */
int results_report_failures(const results *r, FILE *out);

#endif
