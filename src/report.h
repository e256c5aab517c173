/* What mlp_train prints: the text table on stdout, the phase tables of --profile, the JSON object
 * of --json and the CSV file of --log. */
#ifndef MLP_REPORT_H
#define MLP_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "cli.h"
#include "dataset.h"
#include "model.h"
#include "trainer.h"

/* Everything about a run that is not a result. */
typedef struct {
    const cli_options *options;
    const char *device;           /* resolved: "cpu" or "gpu" */
    const char *device_description;
    const char *data_dir;
    const mlp_shape *shape;
    int threads;
    int train_count, test_count;
    const char *pass_mode; /* trainer_pass_mode(): "direct", "recorded" or "whole" */
    int ranks;                  /* processes training the model (mpirun -np), 1 alone */
    const char *all_reduce;     /* how their gradients are summed; NULL alone, not under mpirun */
    const char *mpi_library;    /* e.g. "Open MPI v4.1.4" */
} run_info;

void report_header(FILE *out, const run_info *info);
void report_epoch(FILE *out, const epoch_result *e);

/* A table of where the time went: per phase, total ms, ms per occurrence, share of wall_ms.
 * The row "other" is wall time no phase accounts for (host work, launch gaps). */
void report_phases(FILE *out, const char *title, const phase_totals *phases, double wall_ms);

/* Sums the phases of several epochs. */
phase_totals phases_add(phase_totals a, const phase_totals *b);

void report_json(FILE *out, const run_info *info, const epoch_result *epochs, int count);

/* Writes the CSV through a temporary file renamed into place. */
bool report_csv(const char *path, const epoch_result *epochs, int count, char *err,
                size_t err_size);

void report_evaluation(FILE *out, const run_info *info, double loss, double accuracy,
                       long confusion[DATASET_CLASSES][DATASET_CLASSES], bool json);

#endif
