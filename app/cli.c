/* Parsing mlp_train's command line with getopt_long. Usage errors name the option and the
 * problem and exit with status 2 (the caller's job); --help and --version print to stdout. */
#define _POSIX_C_SOURCE 200809L
#include "app/cli.h"

#include "app/backend_select.h"
#include "libs/openblas_gemm.h"
#include "libs/openblas_library.h"
#include "util/json_text.h"
#include "util/parse_number.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/build_info.h"
#include "app/version.h"

static const char USAGE[] =
    "Usage: mlp_train [OPTIONS]\n"
    "Train a multi-layer perceptron on MNIST or Fashion-MNIST, on the CPU or the GPU,\n"
    "with hand-written kernels or the vendor BLAS, and report where the time goes.\n"
    "\n"
    "Implementation:\n"
    "  --device cpu|gpu        where to run (default: the GPU if one is present)\n"
    "  --impl naive|tiled|blas the kernels: textbook loops, cache/shared-memory tiled,\n"
    "                          or OpenBLAS / cuBLAS ('cublas' = blas on gpu)\n"
    "  --impl fused            GPU: one persistent kernel trains a whole epoch (one hidden\n"
    "                          layer, fp32) where that is faster than the tiled step: up\n"
    "                          to batch 128 and batch x hidden width 65536; elsewhere the\n"
    "                          tiled step, with a message\n"
    "                          (default: the fastest for the device and batch: fused where\n"
    "                          it would run its kernel (fp32, one process), else tiled;\n"
    "                          on the CPU tiled)\n"
    "  --fused-pass auto|whole  --impl fused: the kernel only where it is faster (auto),\n"
    "                          or wherever it fits (whole) (default: auto)\n"
    "  --graph on|off          GPU: record training steps once as CUDA graphs (up to 32\n"
    "                          steps, and the last batch) and replay them (default: on;\n"
    "                          off queues each kernel, and --profile times each phase)\n"
    "  --precision fp32|tf32|bf16  GPU tiled, blas, fused: the GEMMs' products on TF32\n"
    "                          or BF16 tensor cores; data and sums stay FP32 (default: fp32)\n"
    "  --threads N             CPU threads for OpenMP and OpenBLAS (default: all cores,\n"
    "                          shared among the ranks on a host under mpirun)\n"
    "\n"
    "Ranks (docs/distributed.md):\n"
    "  mpirun -np N mlp_train ...  N processes train one model, each a share of every\n"
    "                          batch (--batch must be a multiple of N; batch and learning\n"
    "                          rate as for one process), gradients summed every step (MPI\n"
    "                          on the CPU; on the GPU, one GPU per rank, see --allreduce);\n"
    "                          rank 0 alone prints, logs and saves.\n"
    "                          As root: mpirun --allow-run-as-root\n"
    "  --allreduce auto|p2p|nccl  GPU ranks: sum the gradients with the hand-written\n"
    "                          all-reduce that reads the other GPUs' memory (p2p: one\n"
    "                          host, peer access), or NCCL's (default: auto, p2p where\n"
    "                          it can run, else NCCL)\n"
    "  --allreduce-overlap on|off  GPU ranks: sum the last layers' gradients beside the\n"
    "                          rest of the backward pass once they hold 1 MiB, or the\n"
    "                          whole gradient after it (default: on; --profile: off)\n"
    "  --sharded-update on|off  ranks: each rank sums and updates its shard of the\n"
    "                          parameters (reduce-scatter), then the ranks' shards are\n"
    "                          gathered (all-gather), rather than every rank summing and\n"
    "                          updating all of them (default: off)\n"
    "\n";

static const char USAGE_DATA_AND_TRAINING[] =
    "Data:\n"
    "  --dataset mnist|fashion (default: mnist)\n"
    "  --data DIR              directory of the four IDX files, raw or .gz\n"
    "                          (default: data/mnist or data/fashion)\n"
    "  --data device|host      GPU only: keep the data set on the device and gather batches\n"
    "                          there (device, the default), or copy each batch from the host\n"
    "  --pinned                with --data host: copy from pinned memory (default: pageable)\n"
    "  --overlap               with --data host: copy the next batch on a second stream\n"
    "                          while the current one computes (implies --pinned)\n"
    "\n"
    "Model and training:\n"
    "  --hidden W[,W...]       hidden layer widths, e.g. 256 or 512,256; 'none' for none\n"
    "                          (default: 256)\n"
    "  --epochs N              epochs to train (default: 10)\n"
    "  --batch N               batch size; the last partial batch is used (default: 64)\n"
    "  --optimizer sgd|adam    (default: sgd, with momentum)\n"
    "  --lr X                  learning rate (default: sgd 0.02 at batch 64, scaled with\n"
    "                          the batch (linearly above 64, by its square root below),\n"
    "                          at most 0.2; adam 0.001*sqrt(batch/64), at most 0.004)\n"
    "  --momentum X            SGD momentum (default: 0.9)\n"
    "  --schedule constant|step|cosine|onecycle  the rate of each update, --lr at its\n"
    "                          peak: step divides it by 10 at half the run and again at\n"
    "                          3/4; cosine falls to 0 along a half cosine; onecycle falls\n"
    "                          to 0 in a line (default: constant; a run resumed with\n"
    "                          --load continues its checkpoint's schedule)\n"
    "  --warmup STEPS          updates that raise the rate linearly to --lr first\n"
    "                          (default: 0; onecycle: 30 percent of the updates)\n"
    "  --schedule-epochs N     the epochs the schedule spans (default: the run's; a run\n"
    "                          to be resumed later spans the whole training)\n"
    "  --weight-decay WD       decoupled weight decay (AdamW's, SGDW's): each update first\n"
    "                          scales the weights, not the biases, by 1 - rate*WD\n"
    "                          (default: 0)\n"
    "  --label-smoothing E     train against labels smoothed to 1-E+E/classes and\n"
    "                          E/classes, E in [0, 1); the training loss reported is\n"
    "                          that loss, evaluations the plain one (default: 0)\n"
    "  --seed N                seed of the weights and the batch order (default: 42)\n"
    "  --validation N          hold out N training images (the same ones for a seed) and\n"
    "                          evaluate them each epoch; the test set is evaluated once,\n"
    "                          at the end (default: 0, the test set each epoch)\n"
    "  --test-each-epoch       with --validation: evaluate the test set after each epoch\n"
    "                          too (its own columns), not only at the end\n"
    "  --target-accuracy A     stop after the first epoch whose accuracy (validation, else\n"
    "                          test) reaches A, in (0, 1], and report the time to it\n"
    "\n";

static const char USAGE_OUTPUT[] =
    "Output:\n"
    "  --profile               time each phase (h2d, forward, backward, update, d2h, eval;\n"
    "                          'compute' for graph-replayed steps and fused passes;\n"
    "                          'allreduce' under mpirun) and the start-up, and print a\n"
    "                          table per epoch and for the run\n"
    "  --no-train-metrics      neither keep nor sum the training loss and accuracy (the\n"
    "                          peers' switch of that name, for timing like with like):\n"
    "                          their columns read '-', and only the evaluation's loss\n"
    "                          stops a diverging run\n"
    "  --json                  print one JSON object with the configuration and results\n"
    "                          on stdout at the end (and nothing else on stdout)\n"
    "  --log FILE.csv          write the per-epoch results as CSV\n"
    "  --quiet                 no progress on stderr\n"
    "\n"
    "Checkpoints:\n"
    "  --save FILE             write a checkpoint after training\n"
    "  --load FILE             start from a checkpoint (its layer widths unless --hidden)\n"
    "  --eval                  with --load: only evaluate on the test set, with the\n"
    "                          confusion matrix\n"
    "\n"
    "  --help                  this text\n"
    "  --version               the version and the build: commit, compiler, CUDA, MPI,\n"
    "                          NCCL, the OpenBLAS loaded (with --json: as JSON)\n"
    "\n"
    "Exit status: 0 success, 1 runtime error (bad data, no GPU, divergence), 2 usage error.\n"
    "Example: mlp_train --device gpu --impl tiled --batch 512 --profile\n";

enum {
    OPT_DEVICE = 256, OPT_IMPL, OPT_THREADS, OPT_DATASET, OPT_DATA, OPT_PINNED, OPT_OVERLAP,
    OPT_GRAPH, OPT_PRECISION, OPT_HIDDEN, OPT_EPOCHS, OPT_BATCH, OPT_OPTIMIZER, OPT_LR,
    OPT_MOMENTUM, OPT_WEIGHT_DECAY, OPT_LABEL_SMOOTHING, OPT_SEED, OPT_ALLREDUCE,
    OPT_ALLREDUCE_OVERLAP, OPT_SHARDED_UPDATE, OPT_FUSED_PASS, OPT_SCHEDULE, OPT_WARMUP,
    OPT_SCHEDULE_EPOCHS,
    OPT_VALIDATION, OPT_TEST_EACH_EPOCH, OPT_TARGET, OPT_PROFILE, OPT_NO_TRAIN_METRICS, OPT_JSON,
    OPT_LOG, OPT_QUIET,
    OPT_SAVE, OPT_LOAD, OPT_EVAL, OPT_HELP, OPT_VERSION,
};

static const struct option LONG_OPTIONS[] = {
    {"device", required_argument, NULL, OPT_DEVICE},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"dataset", required_argument, NULL, OPT_DATASET},
    {"data", required_argument, NULL, OPT_DATA},
    {"pinned", no_argument, NULL, OPT_PINNED},
    {"overlap", no_argument, NULL, OPT_OVERLAP},
    {"graph", required_argument, NULL, OPT_GRAPH},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"label-smoothing", required_argument, NULL, OPT_LABEL_SMOOTHING},
    {"seed", required_argument, NULL, OPT_SEED},
    {"allreduce", required_argument, NULL, OPT_ALLREDUCE},
    {"allreduce-overlap", required_argument, NULL, OPT_ALLREDUCE_OVERLAP},
    {"sharded-update", required_argument, NULL, OPT_SHARDED_UPDATE},
    {"fused-pass", required_argument, NULL, OPT_FUSED_PASS},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"schedule-epochs", required_argument, NULL, OPT_SCHEDULE_EPOCHS},
    {"validation", required_argument, NULL, OPT_VALIDATION},
    {"test-each-epoch", no_argument, NULL, OPT_TEST_EACH_EPOCH},
    {"target-accuracy", required_argument, NULL, OPT_TARGET},
    {"profile", no_argument, NULL, OPT_PROFILE},
    {"no-train-metrics", no_argument, NULL, OPT_NO_TRAIN_METRICS},
    {"json", no_argument, NULL, OPT_JSON},
    {"log", required_argument, NULL, OPT_LOG},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"save", required_argument, NULL, OPT_SAVE},
    {"load", required_argument, NULL, OPT_LOAD},
    {"eval", no_argument, NULL, OPT_EVAL},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static bool usage_error(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "mlp_train: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\nTry 'mlp_train --help'.\n");
    va_end(args);
    return false;
}

static bool parse_int(const char *option, const char *text, long lo, long hi, int *out) {
    if (parse_int_in(text, (int)lo, (int)hi, out)) return true;
    return usage_error("%s wants an integer from %ld to %ld", option, lo, hi);
}

/* A number in [lo, hi], stored as the float the options hold; no message (the callers word
 * their own). *out is written only on success. */
static bool read_float_in(const char *text, double lo, double hi, float *out) {
    double value;
    if (!parse_double_in(text, lo, hi, &value)) return false;
    *out = (float)value;
    return true;
}

static bool parse_float(const char *option, const char *text, double lo, double hi, float *out) {
    if (read_float_in(text, lo, hi, out)) return true;
    return usage_error("%s wants a number from %g to %g", option, lo, hi);
}

/* Its own message: "1e6" (parse_float's %g would print 1e+06), an example and the text given.
 * Whether lr times the decay stays below 1 is checked once the rate is known
 * (check_consistency). */
static bool parse_weight_decay(const char *text, float *out) {
    if (read_float_in(text, 0.0, 1e6, out)) return true;
    return usage_error("--weight-decay wants a number from 0 to 1e6, such as 5e-4, not '%s'", text);
}

static bool parse_label_smoothing(const char *text, float *out) {
    float value; /* checked as the float it becomes: 0.99999999 rounds to 1 */
    if (!read_float_in(text, 0.0, 1.0, &value) || value >= 1.0f)
        return usage_error("--label-smoothing wants a number in [0, 1), such as 0.1, not '%s'",
                           text);
    *out = value;
    return true;
}

static bool parse_seed(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-')
        return usage_error("--seed wants a non-negative integer, not '%s'", text);
    *out = value;
    return true;
}

static bool one_of(const char *option, const char *value, const char *const *choices) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(value, choices[i]) == 0) return true;
    return usage_error("%s: unknown value '%s'", option, value);
}

static bool parse_precision(const char *text, cli_options *o) {
    for (int p = 0; p < PRECISION_COUNT; p++)
        if (strcmp(text, gemm_precision_name((gemm_precision)p)) == 0) {
            o->precision = (gemm_precision)p;
            return true;
        }
    return usage_error("--precision: unknown value '%s' (fp32, tf32 or bf16)", text);
}

static bool parse_hidden(const char *text, cli_options *o) {
    o->hidden_count = 0;
    o->hidden_given = true;
    if (strcmp(text, "none") == 0) return true;
    const char *p = text;
    while (true) {
        char *end;
        errno = 0;
        long width = strtol(p, &end, 10);
        if (errno || end == p || width < 1 || width > MLP_MAX_WIDTH ||
            (*end != ',' && *end != '\0'))
            return usage_error("--hidden wants widths like 256 or 512,256 (each 1..%d), not '%s'",
                               MLP_MAX_WIDTH, text);
        if (o->hidden_count == MLP_MAX_LAYERS - 1)
            return usage_error("--hidden: too many layers in '%s'", text);
        o->hidden[o->hidden_count++] = (int)width;
        if (*end == '\0') return true;
        p = end + 1;
    }
}

/* Chosen from 10-epoch runs on MNIST (784-256-10, He init, momentum 0.9; docs/training.md):
 * SGD 0.02 at batch 64 reaches 98.2% where 0.05 stalls at 97.6%. Larger batches take fewer
 * steps, so they want a proportionally larger rate (linear scaling), up to 0.2, past which
 * batch 2048 loses accuracy; smaller batches are noisier, so the rate shrinks only with the
 * square root (0.01 at batch 16). */
float default_learning_rate(optimizer_kind kind, int batch) {
    double ratio = batch / 64.0;
    if (kind == OPTIMIZER_ADAM) return (float)fmin(0.001 * sqrt(ratio), 0.004);
    double scale = ratio >= 1.0 ? ratio : sqrt(ratio);
    return (float)fmin(0.02 * scale, 0.2);
}

static void set_defaults(cli_options *o) {
    memset(o, 0, sizeof *o);
    o->impl = NULL; /* the fastest for the device and batch, chosen by main.c */
    o->dataset = "mnist";
    o->hidden[0] = 256;
    o->hidden_count = 1;
    o->epochs = 10;
    o->batch = 64;
    o->optimizer = (optimizer_config){.kind = OPTIMIZER_SGD, .momentum = 0.9f, .beta1 = 0.9f,
                                      .beta2 = 0.999f, .eps = 1e-8f};
    o->seed = 42;
    o->feed = (feed_options){DATA_RESIDENT, false};
    o->graph = true;
    o->allreduce_overlap = true;
}

static bool parse_option(int code, const char *arg, cli_options *o, bool *pinned) {
    static const char *const devices[] = {"cpu", "gpu", NULL};
    static const char *const fused_passes[] = {"auto", "whole", NULL};
    static const char *const impls[] = {"naive", "tiled", "blas", "cublas", "fused", NULL};
    static const char *const on_off[] = {"on", "off", NULL};
    static const char *const datasets[] = {"mnist", "fashion", NULL};
    static const char *const optimizers[] = {"sgd", "adam", NULL};
    static const char *const allreduce_choices[] = {"auto", "p2p", "nccl", NULL};
    switch (code) {
    case OPT_DEVICE: o->device = arg; return one_of("--device", arg, devices);
    case OPT_IMPL: o->impl = arg; return one_of("--impl", arg, impls);
    case OPT_THREADS: return parse_int("--threads", arg, 1, 1024, &o->threads);
    case OPT_DATASET: o->dataset = arg; return one_of("--dataset", arg, datasets);
    case OPT_DATA:
        if (strcmp(arg, "host") == 0 || strcmp(arg, "device") == 0) {
            o->feed.placement = arg[0] == 'h' ? DATA_HOST_PAGEABLE : DATA_RESIDENT;
            o->placement_given = true;
        } else {
            o->data_dir = arg;
        }
        return true;
    case OPT_PINNED: *pinned = true; return true;
    case OPT_OVERLAP: o->feed.overlap = true; return true;
    case OPT_GRAPH:
        o->graph = strcmp(arg, "on") == 0;
        o->graph_given = true;
        return one_of("--graph", arg, on_off);
    case OPT_FUSED_PASS:
        o->fused_whole_always = strcmp(arg, "whole") == 0;
        o->fused_pass_given = true;
        return one_of("--fused-pass", arg, fused_passes);
    case OPT_PRECISION: return parse_precision(arg, o);
    case OPT_HIDDEN: return parse_hidden(arg, o);
    case OPT_EPOCHS: return parse_int("--epochs", arg, 1, 1000000, &o->epochs);
    case OPT_BATCH: return parse_int("--batch", arg, 1, 65536, &o->batch);
    case OPT_OPTIMIZER:
        if (!one_of("--optimizer", arg, optimizers)) return false;
        o->optimizer.kind = strcmp(arg, "adam") == 0 ? OPTIMIZER_ADAM : OPTIMIZER_SGD;
        return true;
    case OPT_LR:
        o->lr_given = true;
        return parse_float("--lr", arg, 1e-12, 1e6, &o->optimizer.lr);
    case OPT_MOMENTUM: return parse_float("--momentum", arg, 0.0, 0.999999, &o->optimizer.momentum);
    case OPT_WEIGHT_DECAY: return parse_weight_decay(arg, &o->optimizer.weight_decay);
    case OPT_LABEL_SMOOTHING: return parse_label_smoothing(arg, &o->label_smoothing);
    case OPT_SEED: return parse_seed(arg, &o->seed);
    case OPT_ALLREDUCE:
        o->allreduce = strcmp(arg, "p2p") == 0    ? ALLREDUCE_P2P
                       : strcmp(arg, "nccl") == 0 ? ALLREDUCE_NCCL
                                                  : ALLREDUCE_AUTO;
        return one_of("--allreduce", arg, allreduce_choices);
    case OPT_ALLREDUCE_OVERLAP:
        o->allreduce_overlap = strcmp(arg, "on") == 0;
        o->allreduce_overlap_given = true;
        return one_of("--allreduce-overlap", arg, on_off);
    case OPT_SHARDED_UPDATE:
        o->sharded_update = strcmp(arg, "on") == 0;
        return one_of("--sharded-update", arg, on_off);
    case OPT_SCHEDULE:
        o->schedule_given = true;
        for (int k = 0; k < SCHEDULE_KINDS; k++)
            if (strcmp(arg, schedule_name((schedule_kind)k)) == 0) {
                o->optimizer.schedule = (schedule_kind)k;
                return true;
            }
        return usage_error("--schedule: unknown value '%s' (constant, step, cosine or onecycle)", arg);
    case OPT_WARMUP:
        o->warmup_given = true;
        return parse_int("--warmup", arg, 0, 1000000000, &o->optimizer.warmup_steps);
    case OPT_SCHEDULE_EPOCHS:
        return parse_int("--schedule-epochs", arg, 1, 1000000, &o->schedule_epochs);
    case OPT_VALIDATION: return parse_int("--validation", arg, 1, 100000000, &o->validation);
    case OPT_TEST_EACH_EPOCH: o->test_each_epoch = true; return true;
    case OPT_TARGET:
        if (!parse_double_in(arg, 0.0, 1.0, &o->target_accuracy) || o->target_accuracy <= 0.0)
            return usage_error("--target-accuracy wants an accuracy in (0, 1], such as 0.98, not '%s'", arg);
        return true;
    case OPT_PROFILE: o->profile = true; return true;
    case OPT_NO_TRAIN_METRICS: o->no_train_metrics = true; return true;
    case OPT_JSON: o->json = true; return true;
    case OPT_LOG: o->log_path = arg; return true;
    case OPT_QUIET: o->quiet = true; return true;
    case OPT_SAVE: o->save_path = arg; return true;
    case OPT_LOAD: o->load_path = arg; return true;
    case OPT_EVAL: o->eval_only = true; return true;
    default: return usage_error("unknown option");
    }
}

static bool impl_is(const cli_options *o, const char *name) {
    return o->impl && strcmp(o->impl, name) == 0;
}

/* Combinations that parse but make no sense. */
static bool check_consistency(cli_options *o, bool pinned) {
    if (impl_is(o, "cublas")) {
        if (o->device && strcmp(o->device, "gpu") != 0)
            return usage_error("--impl cublas runs on the GPU, not with --device %s", o->device);
        o->impl = "blas";
        o->device = "gpu";
    }
    if (impl_is(o, "fused")) {
        if (o->device && strcmp(o->device, "gpu") != 0)
            return usage_error("--impl fused runs on the GPU, not with --device %s", o->device);
        o->device = "gpu";
    }
    char why[256];
    if (!precision_supported(o->device, o->impl, o->precision, why, sizeof why))
        return usage_error("%s", why);
    if (o->feed.overlap || pinned) {
        if (o->feed.placement != DATA_HOST_PAGEABLE)
            return usage_error("%s only applies with --data host",
                               o->feed.overlap ? "--overlap" : "--pinned");
        o->feed.placement = DATA_HOST_PINNED;
    }
    if (o->placement_given && o->device && strcmp(o->device, "cpu") == 0)
        return usage_error("--data host|device chooses where a GPU reads its batches; "
                           "the CPU always reads host memory");
    if (o->graph_given && o->graph && o->device && strcmp(o->device, "cpu") == 0)
        return usage_error("--graph on records CUDA graphs: it needs --device gpu");
    if (o->graph_given && o->graph && o->feed.placement != DATA_RESIDENT)
        return usage_error("--graph on cannot replay steps that copy each batch from the host: "
                           "use --data device, or --graph off");
    if ((o->allreduce != ALLREDUCE_AUTO || o->allreduce_overlap_given) && o->device &&
        strcmp(o->device, "cpu") == 0)
        return usage_error("--allreduce%s chooses how GPU ranks sum their gradients; the CPU's "
                           "ranks use MPI_Allreduce, after the backward pass",
                           o->allreduce_overlap_given ? "-overlap" : "");
    if (o->sharded_update && o->allreduce_overlap_given && o->allreduce_overlap)
        return usage_error("--sharded-update on sums each rank's shard after the backward pass, "
                           "so it cannot overlap the sums with it: drop --allreduce-overlap on");
    if (o->fused_pass_given && !impl_is(o, "fused"))
        return usage_error("--fused-pass chooses how --impl fused trains; give --impl fused");
    if (o->eval_only && !o->load_path)
        return usage_error("--eval needs --load FILE: there is nothing to evaluate");
    if (o->test_each_epoch && !o->validation)
        return usage_error("--test-each-epoch goes with --validation: without a validation split "
                           "every epoch evaluates the test set already");
    if (o->eval_only && (o->validation || o->target_accuracy > 0.0))
        return usage_error("--eval evaluates the test set; --validation and --target-accuracy "
                           "apply to training");
    if (o->eval_only && (o->optimizer.weight_decay != 0.0f || o->label_smoothing != 0.0f))
        return usage_error("--eval measures the plain loss; --weight-decay and --label-smoothing "
                           "apply to training");
    if (o->eval_only && (o->save_path || o->log_path))
        return usage_error("--eval only evaluates; --save and --log apply to training");
    if (o->eval_only && o->no_train_metrics)
        return usage_error("--eval only evaluates; --no-train-metrics applies to training");
    if (o->save_path && o->log_path && strcmp(o->save_path, o->log_path) == 0)
        return usage_error("--save and --log both name %s: the log would replace the checkpoint",
                           o->save_path);
    if (!o->lr_given) o->optimizer.lr = default_learning_rate(o->optimizer.kind, o->batch);
    /* in float, as the updates work it out: a product just below 1 may round to it (and one at
     * 1 or above rounds to 1 or above) */
    float decayed_share = o->optimizer.lr * o->optimizer.weight_decay;
    if (decayed_share >= 1.0f)
        return usage_error("--weight-decay %g at --lr %g would scale the weights by 1 - %g each "
                           "update: lr times the decay must stay below 1",
                           o->optimizer.weight_decay, o->optimizer.lr, (double)decayed_share);
    return true;
}

static void json_field(const char *name, const char *value, const char *after) {
    printf("\"%s\": ", name);
    if (value) json_write_string(stdout, value);
    else fputs("null", stdout);
    fputs(after, stdout);
}

/* --version: the version, then the build (app/build_info.h, written by CMake) and the OpenBLAS
 * this machine loads, its build and the kernels it picked for this CPU (loaded last, after the
 * rest is out: a missing OpenBLAS ends the process with status 1 and a message). */
static void print_version(bool json) {
    const char *cuda_compiler = MLP_BUILD_CUDA ? MLP_BUILD_CUDA_COMPILER : NULL;
    const char *cuda_architectures = MLP_BUILD_CUDA ? MLP_BUILD_CUDA_ARCHITECTURES : NULL;
    if (json) {
        printf("{\"program\": \"mlp_train\", ");
        json_field("version", MLP_VERSION, ", ");
        json_field("commit", MLP_BUILD_COMMIT, ", ");
        json_field("build_type", MLP_BUILD_TYPE, ", ");
        json_field("c_compiler", MLP_BUILD_C_COMPILER, ", ");
        printf("\"native\": %s, \"cuda\": %s, ", MLP_BUILD_NATIVE ? "true" : "false",
               MLP_BUILD_CUDA ? "true" : "false");
        json_field("cuda_compiler", cuda_compiler, ", ");
        json_field("cuda_architectures", cuda_architectures, ", ");
        printf("\"mpi\": %s, \"nccl\": %s, ", MLP_BUILD_MPI ? "true" : "false",
               MLP_BUILD_NCCL ? "true" : "false");
    } else {
        printf("mlp_train %s\ncommit: %s\n", MLP_VERSION, MLP_BUILD_COMMIT);
        printf("compiler: %s (%s%s)\n", MLP_BUILD_C_COMPILER, MLP_BUILD_TYPE,
               MLP_BUILD_NATIVE ? ", -march=native" : "");
        if (MLP_BUILD_CUDA)
            printf("CUDA: on (%s, architectures %s)\n", cuda_compiler, cuda_architectures);
        else
            printf("CUDA: off\n");
        printf("MPI: %s\nNCCL: %s\n", MLP_BUILD_MPI ? "on" : "off", MLP_BUILD_NCCL ? "on" : "off");
    }
    fflush(stdout);

    const char *library = openblas_library_file();
    if (json) {
        printf("\"openblas\": {");
        json_field("description", openblas_description(), ", "); /* its build: OpenMP, pthreads */
        json_field("core", openblas_core_name(), ", ");
        json_field("library", library, "}}\n");
    } else {
        printf("OpenBLAS: %s (%s)\n", openblas_description(), library);
    }
}

cli_outcome cli_parse(int argc, char **argv, cli_options *o) {
    set_defaults(o);
    bool pinned = false;
    opterr = 0;
    optind = 1;
    int code;
    while ((code = getopt_long(argc, argv, "", LONG_OPTIONS, NULL)) != -1) {
        if (code == OPT_HELP) {
            fputs(USAGE, stdout);
            fputs(USAGE_DATA_AND_TRAINING, stdout);
            fputs(USAGE_OUTPUT, stdout);
            return CLI_DONE;
        }
        if (code == OPT_VERSION) { /* --json, before or after, asks for JSON */
            bool json = o->json;
            for (int i = optind; i < argc && !json; i++) json = strcmp(argv[i], "--json") == 0;
            print_version(json);
            return CLI_DONE;
        }
        if (code == '?') {
            const char *bad = argv[optind - 1];
            if (optopt)
                usage_error("option '%s' needs a value", bad);
            else
                usage_error("unknown option '%s'", bad);
            return CLI_USAGE_ERROR;
        }
        if (!parse_option(code, optarg, o, &pinned)) return CLI_USAGE_ERROR;
    }
    if (optind < argc) {
        usage_error("unexpected argument '%s'", argv[optind]);
        return CLI_USAGE_ERROR;
    }
    return check_consistency(o, pinned) ? CLI_RUN : CLI_USAGE_ERROR;
}
