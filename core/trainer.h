/* Training and evaluation of an MLP on one backend: the loop over epochs and batches, timed by
 * phase and bracketed by NVTX ranges (run → epoch → step → h2d/forward/backward/update, or a
 * replayed run of steps, then d2h, the host's wait and eval). Written once; the backend decides where and how each operation runs.
 *
 * A pass runs in one of three ways, chosen once when the trainer is created:
 *   direct    the host queues each step's operations (per-phase timing and ranges);
 *   recorded  runs of up to 32 steps are recorded once (CUDA graphs) and replayed;
 *   whole     the backend trains the whole pass in one call (--impl fused).
 * All three compute the same thing from the same batches. */
#ifndef MLP_TRAINER_H
#define MLP_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/phase_profile.h"
#include "core/backend.h"
#include "core/dataset.h"
#include "core/model.h"
#include "core/optimizer.h"

/* --allreduce-overlap on: the last layers' gradients are summed beside the backward pass from
 * 1 MiB (overlap_all_reduce_floats). Two H200s, 2026-11-26 (docs/distributed.md): summed so,
 * 784-1024-1024-10's top two layers (4.2 MB) took 1-8% off an epoch at batch 512 to 8192, where
 * 784-256-10's top layer alone (10 KB) added 12-27% at 512 and 2048: a second all-reduce there
 * costs more than it hides. */
#define OVERLAP_ALL_REDUCE_FLOATS ((size_t)1 << 18)

/* Test-set batches hold this many samples (or the training batch, if larger). Fewer, larger
 * batches shorten the test pass until its fixed costs (uploads, the metrics' sums, the wait)
 * dominate: MNIST's 10,000 test images took 0.46 ms in batches of 1000 and 0.28-0.31 ms in
 * batches of 2000 to 10,000 (H100, tiled, training batch 512). */
#define EVAL_ROWS 2048

/* The most rows a pass holds at once, for a training batch of `batch`: every buffer the model's
 * steps use has room for this many. */
static inline int trainer_max_rows(int batch) { return batch > EVAL_ROWS ? batch : EVAL_ROWS; }

typedef struct {
    int batch;
    uint64_t seed;
    optimizer_config optimizer;
    float label_smoothing; /* of the training loss (label_smoothing.h) */
    feed_options feed;
    bool record_steps; /* record a step once and replay it, where the backend and feed allow */
    /* among ranks: sum the last layers' gradients beside the rest of the backward pass as soon as
     * they hold this many floats (model.h, early_reduce_floats), where the backend can
     * (backend.h, all_reduce_start) and profile is off; 0: the whole gradient after it */
    size_t overlap_all_reduce_floats;
    /* among ranks, where the backend can (backend.h, reduce_scatter_sum): each rank sums and
     * updates its shard of the parameters, then the shards are gathered (trainer.c); the
     * last layers' sums are then not started early */
    bool shard_update;
    bool profile;  /* time each phase with the backend's stamps */
    bool progress; /* progress on stderr */
    /* the training loss and accuracy neither kept per sample nor summed (--no-train-metrics):
     * epoch_result's are NaN, and only the evaluation's loss can show a divergence */
    bool skip_train_metrics;
} train_config;

typedef struct {
    int epoch;               /* counts from 1, continuing the epochs of a loaded checkpoint */
    double train_loss;       /* mean over the epoch's batches, as the weights moved */
    double train_accuracy;   /* fraction (both NaN with train_config's skip_train_metrics) */
    double test_loss;
    double test_accuracy;
    double time_s;           /* the training pass, wall clock, its metrics read back (if summed) */
    double images_per_s;
    double eval_time_s;
    phase_totals phases;     /* zeros unless profiling */
    /* where test_loss and test_accuracy are a validation split's, the test set's as well when
     * the caller evaluated it after the epoch (mlp_train's --test-each-epoch) */
    bool test_set_evaluated;
    double test_set_loss, test_set_accuracy;
} epoch_result;

typedef struct trainer trainer;

/* initial_params: param_count floats on the host. optimizer_state: NULL for a fresh optimizer,
 * else the saved state arrays (see trainer_export). epochs_done: epochs already trained. */
trainer *trainer_create(backend *be, const mlp_shape *shape, const dataset *train,
                        const dataset *test, const train_config *config,
                        const float *initial_params, const float *optimizer_state,
                        int optimizer_step, int epochs_done);
void trainer_destroy(trainer *t);

/* How passes run ("direct", "recorded" or "whole"; see above) and, when the backend offers a
 * whole-pass implementation that could not take this model, why not (else NULL). */
const char *trainer_pass_mode(const trainer *t);
const char *trainer_whole_pass_refusal(const trainer *t);

/* The all-reduces each step's backward pass starts before its end (train_config's
 * overlap_all_reduce_floats, where it took effect; mlp_reduces_early); 0: none. */
int trainer_all_reduces_early(const trainer *t);

/* Whether the ranks share the update out (train_config's shard_update, where it took effect). */
bool trainer_update_sharded(const trainer *t);

/* One epoch of training and one test pass. False if the loss stopped being finite
 * (the message is in err); the parameters are then not worth saving. */
bool trainer_run_epoch(trainer *t, int epochs_in_run, epoch_result *result, char *err,
                       size_t err_size);

/* A test pass only: loss, accuracy and the confusion matrix (rows: true class, columns: predicted). */
void trainer_evaluate(trainer *t, double *loss, double *accuracy,
                      long confusion[DATASET_CLASSES][DATASET_CLASSES]);

/* Loss and accuracy on another set than the one each epoch evaluates (the test set, where the
 * epochs evaluate a validation split), in file order. */
void trainer_evaluate_set(trainer *t, const dataset *data, double *loss, double *accuracy);

/* Copies the parameters and optimizer state to the host (for a checkpoint). The arrays returned
 * are malloc'd: params has param_count floats, state param_count * state_arrays. */
void trainer_export(trainer *t, float **params, float **state, int *state_arrays,
                    int *optimizer_step, int *epochs_done);

#endif
