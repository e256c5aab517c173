/* Whole-model checks shared by the CPU and GPU test programs: a finite-difference gradient
 * check, and short training runs on synthetic data whose parameters implementations compare. */
#ifndef MLP_MODEL_CHECKS_H
#define MLP_MODEL_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/dataset.h"
#include "core/optimizer.h"

/* What the gradient check's objective includes besides the plain mean loss. */
typedef struct {
    float label_smoothing; /* the loss against smoothed labels (label_smoothing.h) */
    float weight_decay;    /* not 0: + weight_decay / 2 · |weights|², and the analytic gradient
                            * read from one SGD update with that decoupled decay (backend.h) */
} gradient_check_options;

/* Gradient check of a small MLP (13-9-7-5, 6 samples, random weights and biases, drawn so that
 * no ReLU input sits near its kink) on `be`:
 * returns ‖analytic − central difference‖ / ‖central difference‖ over all parameters.
 * With scale_analytic != 1 the analytic gradient is scaled before comparing, to prove the check
 * notices a wrong gradient. */
double gradient_check_error(backend *be, uint64_t seed, float scale_analytic,
                            gradient_check_options options);

/* The bound for gradient_check_error: central differences of a float loss (~1.6, rounding
 * ~1e-7) with step 1e-3 carry ~1e-4 absolute noise per derivative; over the whole vector that
 * measured 1e-4 to 2.5e-4 relative (20 seeds, CPU), and at most 3.2e-4 with label smoothing,
 * 1.8e-4 with weight decay (seeds 1-20, the three CPU implementations). A gradient 10% off
 * scores 0.1; decayed biases score 0.05. */
#define GRADIENT_CHECK_BOUND 2e-3

/* The objectives every implementation's gradient is checked on: the plain loss, label
 * smoothing, weight decay (biases left out), and both. */
#define GRADIENT_CHECK_CASES 4
static const gradient_check_options GRADIENT_CHECK_OPTIONS[GRADIENT_CHECK_CASES] = {
    {0.0f, 0.0f}, {0.2f, 0.0f}, {0.0f, 0.5f}, {0.1f, 0.3f}};

typedef struct {
    optimizer_kind optimizer;
    int batch;
    int steps;             /* steps of one epoch; the last batch is partial */
    uint64_t seed;
    feed_options feed;     /* where batches come from; {DATA_RESIDENT, false} for the usual */
    int hidden;            /* 0: two hidden layers, 32 and 16 wide; else one layer this wide */
    bool deep;             /* with hidden 0: three hidden layers, 32, 16 and 16 wide */
    bool record_steps;     /* record a step once and replay it (CUDA graphs), where possible */
    int epochs;            /* 0 means 1 */
    int samples;           /* training images; 0: steps batches, the last a partial one */
    bool regularized;      /* with weight decay and label smoothing (REGULARIZATION below) */
    bool overlap_all_reduce; /* among ranks: each layer's all-reduce started as it is complete */
    bool shard_update;       /* among ranks: each rank sums and updates its shard (trainer.h) */
    bool profile;            /* time each phase (--profile; among ranks, a step in parts) */
} synthetic_run;

typedef struct {
    double initial_test_loss; /* before the first step */
    double train_loss;        /* the epoch's mean, as the weights moved */
    double test_loss;         /* after the epoch */
    double test_accuracy;
    const char *pass_mode;    /* how the trainer ran the passes: "direct", "recorded", "whole" */
    int all_reduces_early;    /* a step's all-reduces started before its backward pass ended */
    bool update_sharded;      /* the ranks shared the update out */
} synthetic_result;

/* The weight decay and label smoothing of a regularized synthetic run: large enough to change
 * the parameters by far more than the agreement bounds (lr 0.05 · 0.5 shrinks SGD's weights
 * by 2.5% a step). */
#define REGULARIZATION_WEIGHT_DECAY 0.5f
#define REGULARIZATION_LABEL_SMOOTHING 0.1f

/* Trains a 64-32-16-10 MLP (64-32-16-16-10 deep, or 64-hidden-10) for run->epochs epochs on
 * synthetic data (random 8×8 images whose label depends on the pixels) and returns its
 * parameters (malloc'd, *count floats) and the last epoch's losses. */
float *train_synthetic(backend *be, const synthetic_run *run, size_t *count,
                       synthetic_result *result);

/* count random 8×8 images; the label is the index of the brightest row (classes 0..7 of 10):
 * quickly learnable, and the same on every machine for a given seed. */
void synthetic_dataset(dataset *d, int count, uint64_t seed);

/* ‖a − b‖ / ‖b‖ in double. */
double relative_difference(const float *a, const float *b, size_t n);

#endif
