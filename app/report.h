/* What mlp_train prints: the text table on stdout, the phase tables of --profile, the JSON object
 * of --json and the CSV file of --log. */
#ifndef MLP_REPORT_H
#define MLP_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "app/cli.h"
#include "core/dataset.h"
#include "core/model.h"
#include "core/trainer.h"

/* Everything about a run that is not a result. */
/* Where the time before the first epoch went, in seconds from main(). The data is read while
 * the device is set up (a CUDA context, cuBLAS), on another thread. */
typedef struct {
    double data_s;    /* reading and decoding the IDX files, normalization statistics */
    double device_s;  /* creating the implementation: CUDA context, streams, cuBLAS, workspaces */
    double ready_s;   /* both done: from main() to the end of the longer of the two */
    double trainer_s; /* the trainer: buffers, the data set to the device, warm-up, recording */
    double total_s;   /* main() to the first epoch */
} startup_times;

typedef struct {
    const cli_options *options;
    const char *device;           /* resolved: "cpu" or "gpu" */
    const char *device_description;
    const char *data_dir;
    const mlp_shape *shape;
    int threads;
    int train_count, test_count;
    int validation_count;  /* --validation: held out of the training images, evaluated each
                            * epoch (the test set then once, at the end, or with
                            * --test-each-epoch after each epoch too); 0: none */
    const char *pass_mode; /* trainer_pass_mode(): "direct", "recorded" or "whole" */
    const startup_times *startup;
    int ranks;                  /* processes training the model (mpirun -np), 1 alone */
    const char *all_reduce;     /* how their gradients are summed; NULL alone, not under mpirun */
    const char *mpi_library;    /* e.g. "Open MPI v4.1.4" */
    const char *advice;         /* a fix for a slow set-up (OpenBLAS's kernels), or NULL */
    bool all_reduce_overlapped; /* the last layers' summed beside the backward pass */
    bool update_sharded;        /* each rank its shard: reduce-scatter, update, all-gather */
} run_info;

/* The run's description; with --profile, its start-up too. */
void report_header(FILE *out, const run_info *info);
/* One line: where the start-up time went. */
void report_startup(FILE *out, const startup_times *t);
void report_epoch(FILE *out, const epoch_result *e);

/* A table of where the time went: per phase, total ms, ms per occurrence, share of wall_ms.
 * The row "other" is wall time no phase accounts for (host work, launch gaps). Where the
 * backend times its operations (the CPU), each phase's GEMM and other-operation time too, and a
 * line splitting the training pass (wall_ms less the test pass) into GEMM, other operations,
 * and the host code between operations. */
void report_phases(FILE *out, const char *title, const phase_totals *phases, double wall_ms);

/* Sums the phases of several epochs. */
phase_totals phases_add(phase_totals a, const phase_totals *b);

/* How a training run ended: the test set's figures (at the end where a validation split was
 * evaluated each epoch, else the last epoch's) and, with --target-accuracy, when the target
 * was reached (target_epoch 0: not reached). */
typedef struct {
    double target;
    int target_epoch;
    double target_train_s; /* training time of the epochs up to it */
    double target_wall_s;  /* since the process started */
    double test_loss, test_accuracy;
} run_outcome;

/* Lines after the epoch table: the test set's figures where a validation split was evaluated
 * each epoch; the target, reached or not. epochs_run: epochs trained. */
void report_outcome(FILE *out, const run_info *info, const run_outcome *outcome, int epochs_run);

void report_json(FILE *out, const run_info *info, const epoch_result *epochs, int count,
                 const run_outcome *outcome);

/* Writes the CSV whole or not at all (atomic_file.h); validation: the epochs evaluated a
 * validation split (its columns are named so). */
bool report_csv(const char *path, const epoch_result *epochs, int count, bool validation, char *err,
                size_t err_size);

void report_evaluation(FILE *out, const run_info *info, double loss, double accuracy,
                       long confusion[DATASET_CLASSES][DATASET_CLASSES], bool json);

#endif
