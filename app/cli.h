/* The command line of mlp_train: options, defaults, validation and --help. */
#ifndef MLP_CLI_H
#define MLP_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "app/backend_select.h"
#include "core/backend.h"
#include "core/model.h"
#include "core/optimizer.h"

typedef struct {
    const char *device;    /* "cpu", "gpu", or NULL: the GPU if there is one */
    const char *impl;      /* "naive", "tiled", "blas" or "fused"; NULL: the fastest */
    const char *dataset;   /* "mnist" or "fashion" */
    const char *data_dir;  /* NULL: data/<dataset> */
    int hidden[MLP_MAX_LAYERS];
    int hidden_count;
    bool hidden_given;     /* a checkpoint's shape is used unless --hidden was given */
    int epochs;
    int batch;
    optimizer_config optimizer; /* --weight-decay included */
    float label_smoothing;
    bool lr_given;
    bool schedule_given, warmup_given;
    int schedule_epochs;   /* 0: the run's (the checkpoint's epochs and --epochs) */
    int validation;        /* training images held out to evaluate each epoch; 0: none */
    bool test_each_epoch;  /* with validation: the test set each epoch too, not only at the end */
    double target_accuracy; /* stop at the first epoch that reaches it; 0: none */
    uint64_t seed;
    int threads;           /* 0: one per core */
    feed_options feed;
    bool placement_given;
    bool graph;            /* record steps as CUDA graphs where possible */
    bool graph_given;
    gemm_precision precision; /* of the GEMMs' products; FP32 unless --precision */
    allreduce_choice allreduce; /* GPU ranks' all-reduce; auto unless --allreduce */
    bool allreduce_overlap;     /* GPU ranks: the last layers' all-reduce beside the backward pass */
    bool allreduce_overlap_given;
    bool sharded_update;        /* ranks: each sums and updates its shard, then they gather */
    bool fused_whole_always;    /* --impl fused: its kernel wherever it fits (--fused-pass whole) */
    bool fused_pass_given;
    bool profile, json, quiet, eval_only;
    bool no_train_metrics; /* neither keep nor sum the training loss and accuracy */
    const char *log_path, *save_path, *load_path;
} cli_options;

typedef enum {
    CLI_RUN,          /* options parsed: go on */
    CLI_DONE,         /* --help or --version printed: exit 0 */
    CLI_USAGE_ERROR,  /* message printed: exit 2 */
} cli_outcome;

cli_outcome cli_parse(int argc, char **argv, cli_options *options);

/* The learning rate used when --lr is not given; scales with the batch size (see cli.c). */
float default_learning_rate(optimizer_kind kind, int batch);

#endif
