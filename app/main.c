/* mlp_train: the command-line program. Parses options, loads the data (and a checkpoint),
 * picks the implementation, then trains or evaluates and reports. Under mpirun every rank runs
 * all of this on its share of each batch (distributed.h); only rank 0 prints, logs and saves. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libs/openblas_gemm.h"
#include "profiling/nvtx_ranges.h"
#include "profiling/wall_clock.h"
#include "util/atomic_file.h"
#include "app/backend_select.h"
#include "core/checkpoint.h"
#include "app/cli.h"
#include "cpu/cpu_backend.h"
#include "core/dataset.h"
#include "core/distributed.h"
#include "core/memory_plan.h"
#include "core/model.h"
#include "app/report.h"
#include "cuda/fused_rule.h"
#include "core/trainer.h"

#define ERR_SIZE 1024

typedef struct {
    cli_options options;
    char data_dir[PATH_MAX];
    const char *device;
    bool impl_chosen; /* no --impl: fastest_impl chose options.impl */
    int threads;
    dataset train, test;
    dataset validation; /* --validation: held out of train, evaluated each epoch */
    bool usage_error;   /* a failure found after loading is the command line's (exit 2) */
    checkpoint loaded;
    bool have_checkpoint;
    mlp_shape shape;
    backend *be;
    trainer *trainer;
    double started; /* wall_seconds() at main() */
    startup_times startup;
    char advice[256]; /* run_info.advice */
} run_state;

/* Every rank names its failures: under mpirun the failing rank may be any of them. */
static int fail(const char *message) {
    if (distributed_ranks() > 1)
        fprintf(stderr, "mlp_train: rank %d of %d: %s\n", distributed_rank(), distributed_ranks(),
                message);
    else
        fprintf(stderr, "mlp_train: %s\n", message);
    return 1;
}

/* Rank 0 speaks for all: notes on stderr come from it alone (results go to stdout, which the
 * other ranks do not have). */
static bool speaks(void) { return distributed_rank() == 0; }

/* The files written after training (--save, --log; rank 0 writes them), refused before the
 * first epoch rather than after the last: a typo in a path must not cost the trained model. */
static bool check_output_paths(const cli_options *o, char *err) {
    const char *paths[] = {o->save_path, o->log_path};
    for (int i = 0; i < 2; i++)
        if (paths[i] && speaks() && !atomic_file_check(paths[i], err, ERR_SIZE)) return false;
    return true;
}

static bool is_directory(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

/* --data DIR, or data/<dataset> here, or beside the executable's directory, or (Fashion-MNIST)
 * where Debian's dataset-fashion-mnist package puts it. */
static bool resolve_data_dir(run_state *s, char *err) {
    const cli_options *o = &s->options;
    if (o->data_dir) {
        snprintf(s->data_dir, sizeof s->data_dir, "%s", o->data_dir);
        return true;
    }
    char candidates[3][PATH_MAX];
    int n = 0;
    snprintf(candidates[n++], PATH_MAX, "data/%s", o->dataset);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(candidates[n++], PATH_MAX, "%.3000s/../data/%s", exe, o->dataset);
    }
    if (strcmp(o->dataset, "fashion") == 0)
        snprintf(candidates[n++], PATH_MAX, "/usr/share/datasets/fashion-mnist");
    for (int i = 0; i < n; i++) {
        if (is_directory(candidates[i])) {
            memcpy(s->data_dir, candidates[i], PATH_MAX);
            return true;
        }
    }
    snprintf(err, ERR_SIZE,
             "no %s data: looked in %.400s%s%.400s; run tools/fetch_data.sh or pass --data DIR",
             o->dataset, candidates[0], n > 1 ? " and " : "", n > 1 ? candidates[1] : "");
    return false;
}

static bool choose_device(run_state *s, char *err) {
    const cli_options *o = &s->options;
    char why[256];
    if (o->device) {
        s->device = o->device;
        return true;
    }
    device_presence gpu = gpu_presence(why, sizeof why);
    if (gpu == DEVICE_PRESENT) {
        s->device = "gpu";
        return true;
    }
    if (gpu == DEVICE_BROKEN) {
        snprintf(err, ERR_SIZE, "the GPU fails: %s; mend the driver, or train with --device cpu",
                 why);
        return false;
    }
    if (o->placement_given) {
        snprintf(err, ERR_SIZE, "--data host|device needs a GPU: %s", why);
        return false;
    }
    char rule[256];
    if (!precision_supported("cpu", o->impl, o->precision, rule, sizeof rule)) {
        snprintf(err, ERR_SIZE, "no GPU here (%s): %s", why, rule);
        return false;
    }
    s->device = "cpu";
    if (speaks()) fprintf(stderr, "mlp_train: no GPU (%s); training on the CPU\n", why);
    return true;
}

/* Without --impl, the fastest implementation for the device and the batch (docs/training.md
 * gives the measurements): on the GPU the fused persistent kernel for one hidden layer (as
 * --hidden says: a checkpoint of more layers makes it fall back to tiled) where it beats the
 * recorded step (cuda/fused_rule.h) in FP32, one process alone, and the tiled kernels otherwise;
 * on the CPU the tiled kernels. */
static const char *fastest_impl(const run_state *s) {
    const cli_options *o = &s->options;
    if (strcmp(s->device, "cpu") == 0) return "tiled";
    bool fused_fits = o->hidden_count == 1 && fused_whole_epoch_pays(o->batch, o->hidden[0]) &&
                      o->precision == PRECISION_FP32 && distributed_ranks() == 1;
    return fused_fits ? "fused" : "tiled";
}

/* The model's shape: --hidden, else the checkpoint's, else 256; inputs and classes from the data. */
static bool choose_shape(run_state *s, char *err) {
    const cli_options *o = &s->options;
    char why[256];
    int features = s->test.features;
    if (s->have_checkpoint && !o->hidden_given) {
        s->shape = s->loaded.shape;
    } else if (!mlp_shape_make(&s->shape, features, o->hidden, o->hidden_count, DATASET_CLASSES,
                               why, sizeof why)) {
        snprintf(err, ERR_SIZE, "%s", why);
        return false;
    }
    if (s->have_checkpoint) {
        char have[256], want[256];
        mlp_shape_format(&s->loaded.shape, have, sizeof have);
        mlp_shape_format(&s->shape, want, sizeof want);
        if (!mlp_shape_equal(&s->loaded.shape, &s->shape)) {
            snprintf(err, ERR_SIZE, "%s: the checkpoint's model is %s, not %s", o->load_path,
                     have, want);
            return false;
        }
    }
    if (s->shape.width[0] != features || s->shape.width[s->shape.layers] != DATASET_CLASSES) {
        snprintf(err, ERR_SIZE, "%.300s: the checkpoint's model takes %d inputs and gives %d classes, "
                 "but the images in %.300s are %dx%d (%d pixels) of %d classes",
                 o->load_path, s->shape.width[0], s->shape.width[s->shape.layers], s->data_dir,
                 s->test.image_rows, s->test.image_cols, features, DATASET_CLASSES);
        return false;
    }
    return true;
}

/* The model's input width comes from the images: both splits must hold images of one size. */
static bool check_splits_match(const run_state *s, char *err) {
    const dataset *train = &s->train, *test = &s->test;
    if (s->options.eval_only ||
        (train->image_rows == test->image_rows && train->image_cols == test->image_cols))
        return true;
    snprintf(err, ERR_SIZE,
             "%.400s: the training images are %dx%d pixels but the test images are %dx%d: the two "
             "splits must hold images of one size",
             s->data_dir, train->image_rows, train->image_cols, test->image_rows, test->image_cols);
    return false;
}

static bool load_inputs(run_state *s, char *err) {
    cli_options *o = &s->options;
    if (!resolve_data_dir(s, err)) return false;
    if (!dataset_load(s->data_dir, SPLIT_TEST, &s->test, err, ERR_SIZE)) return false;
    if (!o->eval_only && !dataset_load(s->data_dir, SPLIT_TRAIN, &s->train, err, ERR_SIZE))
        return false;
    if (o->load_path) {
        if (!checkpoint_load(o->load_path, &s->loaded, err, ERR_SIZE)) return false;
        s->have_checkpoint = true;
        if (!o->eval_only && s->loaded.optimizer != o->optimizer.kind) {
            snprintf(err, ERR_SIZE,
                     "%s was trained with %s; resume it with --optimizer %s (or --eval)",
                     o->load_path, optimizer_name(s->loaded.optimizer),
                     optimizer_name(s->loaded.optimizer));
            return false;
        }
    }
    if (!check_splits_match(s, err) || !choose_shape(s, err)) return false;
    if (o->validation && !o->eval_only) {
        if (o->validation >= s->train.count) {
            snprintf(err, ERR_SIZE,
                     "--validation %d leaves no training images: %.400s has %d; hold out fewer",
                     o->validation, s->data_dir, s->train.count);
            s->usage_error = true;
            return false;
        }
        dataset_hold_out(&s->train, o->validation, o->seed, &s->validation);
    }
    /* Inputs are normalized with the training set's statistics, kept in the checkpoint. */
    float scale, shift;
    if (s->have_checkpoint) {
        scale = s->loaded.input_scale;
        shift = s->loaded.input_shift;
    } else {
        dataset_normalization(&s->train, &scale, &shift);
    }
    s->train.scale = s->test.scale = s->validation.scale = scale;
    s->train.shift = s->test.shift = s->validation.shift = shift;
    return true;
}

/* Refuses, before anything is allocated, a run whose model cannot fit in host memory (on the
 * CPU the trainer's buffers are host memory too), naming what does not fit. */
static bool check_host_memory(const run_state *s, char *err) {
    const cli_options *o = &s->options;
    int arrays = o->optimizer.kind == OPTIMIZER_ADAM ? 2 : 1;
    size_t params = s->shape.param_count * sizeof(float);
    memory_plan plan = {0};
    if (strcmp(s->device, "cpu") == 0)
        memory_plan_trainer(&plan, &s->shape, o->batch, arrays, o->eval_only ? 0 : s->train.count,
                            s->test.count);
    if (!s->have_checkpoint) memory_plan_add(&plan, "initial parameters", params);
    if (o->save_path) memory_plan_add(&plan, "the checkpoint's copy", params * (1 + arrays));
    char shape[256], what[320];
    mlp_shape_format(&s->shape, shape, sizeof shape);
    snprintf(what, sizeof what, "the model %s at batch %d", shape, o->batch);
    return memory_plan_fits(&plan, host_memory_available(), what, "host memory", err, ERR_SIZE);
}

/* On the GPU the trainer's buffers (and the resident data set) are device memory: refused, before
 * anything is allocated there, if they cannot fit, naming what does not. */
static bool check_device_memory(const run_state *s, char *err) {
    const cli_options *o = &s->options;
    if (strcmp(s->device, "gpu") != 0) return true; /* check_host_memory covered it */
    memory_plan plan = {0};
    int train_count = o->eval_only ? 0 : s->train.count;
    memory_plan_trainer(&plan, &s->shape, o->batch, o->optimizer.kind == OPTIMIZER_ADAM ? 2 : 1,
                        train_count, s->test.count);
    if (o->feed.placement == DATA_RESIDENT) {
        memory_plan_add(&plan, "the data set",
                        ((size_t)train_count + s->test.count) * (s->test.features + 1));
        /* tiled and fused gather the next batch ahead into a second buffer (gpu_feed.cu); counted
         * for every implementation, as the most a run can need */
        size_t test_rows = (size_t)trainer_max_rows(o->batch);
        size_t train_rows = train_count ? (size_t)o->batch : 0;
        memory_plan_add(&plan, "batches gathered ahead",
                        (train_rows + test_rows) * (s->test.features * sizeof(float) + 1));
    }
    char shape[256], what[320];
    mlp_shape_format(&s->shape, shape, sizeof shape);
    snprintf(what, sizeof what, "the model %s at batch %d", shape, o->batch);
    return memory_plan_fits(&plan, s->be->memory_available(s->be), what, "GPU memory", err,
                            ERR_SIZE);
}

/* Creating the implementation (on the GPU: the CUDA context, the stream, cuBLAS) on its own
 * thread, while the main thread reads the data: the two take similar time and need nothing of
 * each other. */
typedef struct {
    const char *device, *impl;
    gemm_precision precision;
    backend *be;
    char err[ERR_SIZE];
    double finished; /* wall_seconds() */
} device_setup;

static void *create_backend(void *arg) {
    device_setup *setup = arg;
    setup->be = backend_create(setup->device, setup->impl, setup->precision, setup->err,
                               sizeof setup->err);
    setup->finished = wall_seconds();
    return NULL;
}

static bool load_and_set_up(run_state *s, char *err) {
    device_setup setup = {
        .device = s->device, .impl = s->options.impl, .precision = s->options.precision};
    pthread_t thread;
    bool threaded = pthread_create(&thread, NULL, create_backend, &setup) == 0;
    if (!threaded) create_backend(&setup);
    bool loaded = load_inputs(s, err);
    double data_done = wall_seconds();
    if (threaded) pthread_join(thread, NULL);
    s->be = setup.be;
    /* made on another thread: CUDA's current device is per thread, and from here on this thread
     * drives the backend (even if only to destroy it after an error) */
    if (s->be) backend_bind_this_thread(s->be);
    s->startup.data_s = data_done - s->started;
    s->startup.device_s = setup.finished - s->started;
    s->startup.ready_s = wall_seconds() - s->started;
    if (!loaded) return false;
    if (!s->be) {
        snprintf(err, ERR_SIZE, "%s", setup.err);
        return false;
    }
    backend_fused_whole_always(s->be, s->options.fused_whole_always);
    return true;
}

/* The schedule's span (--schedule-epochs, else the checkpoint's epochs and this run's) and
 * warm-up, in updates; a run resumed without --schedule continues its checkpoint's schedule
 * where that one varies. False, with the reason in err, where the warm-up takes the whole run:
 * a usage error. */
static bool plan_schedule(run_state *s, char *err) {
    cli_options *o = &s->options;
    optimizer_config *c = &o->optimizer;
    if (o->eval_only) return true;
    const lr_schedule *saved = &s->loaded.schedule;
    if (s->have_checkpoint && !o->schedule_given && schedule_varies(*saved)) {
        c->schedule = saved->kind;
        c->total_steps = saved->total_steps;
        if (!o->warmup_given) c->warmup_steps = saved->warmup_steps;
        if (!o->lr_given) c->lr = saved->lr;
        return true;
    }
    long steps = updates_per_epoch(s->train.count, o->batch);
    long epochs = o->schedule_epochs ? o->schedule_epochs : s->loaded.epochs_done + o->epochs;
    long total = steps * epochs;
    if (total > INT32_MAX) total = INT32_MAX;
    if (c->schedule == SCHEDULE_ONECYCLE && !o->warmup_given) c->warmup_steps = (int32_t)(total * 3 / 10);
    c->total_steps = (int32_t)total;
    if (c->warmup_steps == 0 || c->warmup_steps < total) return true;
    snprintf(err, ERR_SIZE,
             "--warmup %d is as long as the schedule or longer: it spans %ld updates (%ld epochs "
             "of %ld); use a shorter --warmup or more --epochs",
             c->warmup_steps, total, epochs, steps);
    s->usage_error = true;
    return false;
}

static bool start_trainer(run_state *s, char *err) {
    if (!backend_join_ranks(s->be, s->options.allreduce, err, ERR_SIZE) ||
        !check_device_memory(s, err))
        return false;
    train_config config = {
        .batch = s->options.batch,
        .seed = s->options.seed,
        .optimizer = s->options.optimizer,
        .label_smoothing = s->options.label_smoothing,
        .feed = s->options.feed,
        .record_steps = s->options.graph,
        .overlap_all_reduce_floats = s->options.allreduce_overlap ? OVERLAP_ALL_REDUCE_FLOATS : 0,
        .shard_update = s->options.sharded_update,
        .profile = s->options.profile,
        .progress = !s->options.quiet && speaks(),
        .skip_train_metrics = s->options.no_train_metrics,
    };
    float *params = s->have_checkpoint ? s->loaded.params : NULL;
    float *fresh = NULL;
    if (!params) {
        fresh = malloc(s->shape.param_count * sizeof(float));
        if (!fresh) {
            snprintf(err, ERR_SIZE, "out of host memory for the parameters");
            return false;
        }
        mlp_init_parameters(&s->shape, s->options.seed, fresh);
        params = fresh;
    }
    const dataset *each_epoch = s->validation.count ? &s->validation : &s->test;
    s->trainer = trainer_create(s->be, &s->shape, s->options.eval_only ? NULL : &s->train, each_epoch,
                                &config, params, s->have_checkpoint ? s->loaded.state : NULL,
                                s->loaded.optimizer_step, s->loaded.epochs_done);
    free(fresh);
    double now = wall_seconds() - s->started;
    s->startup.trainer_s = now - s->startup.ready_s;
    s->startup.total_s = now;
    const char *refusal = trainer_whole_pass_refusal(s->trainer);
    if (refusal && !s->options.eval_only && !s->impl_chosen && speaks())
        fprintf(stderr, "mlp_train: --impl %s: %s; training step by step instead\n",
                s->options.impl, refusal);
    return true;
}

static bool save_checkpoint(run_state *s, char *err) {
    checkpoint c = {.shape = s->shape,
                    .optimizer = s->options.optimizer.kind,
                    .schedule = optimizer_schedule(&s->options.optimizer),
                    .input_scale = s->train.scale,
                    .input_shift = s->train.shift};
    trainer_export(s->trainer, &c.params, &c.state, &c.state_arrays, &c.optimizer_step,
                   &c.epochs_done);
    bool ok = checkpoint_save(s->options.save_path, &c, err, ERR_SIZE);
    checkpoint_free(&c);
    return ok;
}

/* The checkpoint first, then the log: each is attempted whatever became of the other, so that a
 * failure of one (the disk filled since check_output_paths) never costs the other. */
static int write_outputs(run_state *s, const epoch_result *epochs, int epochs_run) {
    const cli_options *o = &s->options;
    char err[ERR_SIZE];
    int status = 0;
    if (o->save_path && !save_checkpoint(s, err)) status = fail(err);
    if (o->log_path && !report_csv(o->log_path, epochs, epochs_run, s->validation.count > 0, err,
                                   sizeof err))
        status = fail(err);
    return status;
}

static run_info describe(run_state *s) {
    bool blas_on_cpu = strcmp(s->device, "cpu") == 0 && strcmp(s->options.impl, "blas") == 0;
    bool advised = blas_on_cpu && openblas_core_advice(s->advice, sizeof s->advice);
    return (run_info){&s->options,   s->device,     s->be->description,
                      s->data_dir,   &s->shape,     s->threads,
                      s->train.count, s->test.count, s->validation.count,
                      trainer_pass_mode(s->trainer),
                      &s->startup,   s->be->ranks,  s->be->all_reduce_name,
                      distributed_library(), advised ? s->advice : NULL,
                      trainer_all_reduces_early(s->trainer) > 0,
                      trainer_update_sharded(s->trainer)};
}

static int evaluate_only(run_state *s) {
    double loss, accuracy;
    long confusion[DATASET_CLASSES][DATASET_CLASSES];
    trainer_evaluate(s->trainer, &loss, &accuracy, confusion);
    run_info info = describe(s);
    report_evaluation(stdout, &info, loss, accuracy, confusion, s->options.json);
    return 0;
}

static int train(run_state *s) {
    const cli_options *o = &s->options;
    char err[ERR_SIZE];
    run_info info = describe(s);
    /* with --json, stdout holds the JSON alone; a rank other than 0 has stdout in /dev/null, and
     * its tables go there too */
    FILE *table = o->json && speaks() ? stderr : stdout;
    report_header(table, &info);
    epoch_result *epochs = calloc((size_t)o->epochs, sizeof *epochs);
    if (!epochs) return fail("out of host memory for the results");
    phase_totals run_phases = {0};
    double run_wall_ms = 0.0, train_s = 0.0;
    int status = 0, ran = 0;
    run_outcome outcome = {.target = o->target_accuracy};
    for (int i = 0; i < o->epochs && status == 0 && !outcome.target_epoch; i++) {
        if (!trainer_run_epoch(s->trainer, o->epochs - i, &epochs[i], err, sizeof err)) {
            status = fail(err);
            break;
        }
        ran = i + 1;
        train_s += epochs[i].time_s;
        if (o->test_each_epoch) {
            trainer_evaluate_set(s->trainer, &s->test, &epochs[i].test_set_loss,
                                 &epochs[i].test_set_accuracy);
            epochs[i].test_set_evaluated = true;
        }
        if (o->target_accuracy > 0.0 && epochs[i].test_accuracy >= o->target_accuracy)
            outcome = (run_outcome){.target = o->target_accuracy, .target_epoch = epochs[i].epoch,
                                    .target_train_s = train_s,
                                    .target_wall_s = wall_seconds() - s->started};
        report_epoch(table, &epochs[i]);
        if (o->profile) {
            double wall_ms = 1e3 * (epochs[i].time_s + epochs[i].eval_time_s);
            char title[64];
            snprintf(title, sizeof title, "epoch %d phases", epochs[i].epoch);
            report_phases(table, title, &epochs[i].phases, wall_ms);
            run_phases = phases_add(run_phases, &epochs[i].phases);
            run_wall_ms += wall_ms;
        }
    }
    if (status == 0 && o->profile) report_phases(table, "run phases", &run_phases, run_wall_ms);
    if (status == 0 && ran && o->test_each_epoch) { /* the test set, after the last epoch */
        outcome.test_loss = epochs[ran - 1].test_set_loss;
        outcome.test_accuracy = epochs[ran - 1].test_set_accuracy;
    } else if (status == 0 && s->validation.count) /* the test set, once */
        trainer_evaluate_set(s->trainer, &s->test, &outcome.test_loss, &outcome.test_accuracy);
    else if (ran) {
        outcome.test_loss = epochs[ran - 1].test_loss;
        outcome.test_accuracy = epochs[ran - 1].test_accuracy;
    }
    if (status == 0) report_outcome(table, &info, &outcome, ran);
    if (status == 0 && o->json) report_json(stdout, &info, epochs, ran, &outcome);
    if (status == 0 && speaks()) status = write_outputs(s, epochs, ran);
    free(epochs);
    return status;
}

/* The cores this process may use (its affinity mask, which mpirun may have narrowed), shared
 * with the other ranks on this host where they overlap: never more threads than the host's
 * cores divided among its ranks. */
static int default_threads(void) {
    int mine = omp_get_num_procs();
    long host = sysconf(_SC_NPROCESSORS_ONLN);
    int fair = host > 0 ? (int)(host / distributed_local_ranks()) : mine;
    int threads = mine < fair ? mine : fair;
    return threads > 0 ? threads : 1;
}

/* Each rank takes an equal share of every batch: a usage error (exit 2) if the batch does not
 * split, with the batch sizes nearest to it that do. */
static bool check_batch_splits(const cli_options *o) {
    int ranks = distributed_ranks(), below = o->batch / ranks * ranks;
    if (o->eval_only || o->batch % ranks == 0) return true;
    if (speaks())
        fprintf(stderr,
                "mlp_train: --batch %d does not split across %d ranks: each rank takes an equal "
                "share of every batch, so the batch must be a multiple of %d (such as --batch "
                "%d%s%d)\n",
                o->batch, ranks, ranks, below > 0 ? below : below + ranks,
                below > 0 ? " or " : ", ", below > 0 ? below + ranks : below + 2 * ranks);
    return false;
}

static int run(run_state *s) {
    char err[ERR_SIZE];
    if (!check_output_paths(&s->options, err) || !choose_device(s, err)) return fail(err);
    if (!s->options.impl) {
        s->options.impl = fastest_impl(s);
        s->impl_chosen = true;
    }
    s->threads = s->options.threads ? s->options.threads : default_threads();
    cpu_set_threads(s->threads, s->options.impl);
    if (!load_and_set_up(s, err) || !plan_schedule(s, err)) {
        if (!s->usage_error) return fail(err);
        if (speaks()) fprintf(stderr, "mlp_train: %s\nTry 'mlp_train --help'.\n", err);
        return 2;
    }
    if (!check_host_memory(s, err) || !start_trainer(s, err)) return fail(err);
    nvtx_range_push("run");
    int status = s->options.eval_only ? evaluate_only(s) : train(s);
    nvtx_range_pop();
    return status;
}

static void cleanup(run_state *s) {
    trainer_destroy(s->trainer);
    if (s->be) s->be->destroy(s->be);
    checkpoint_free(&s->loaded);
    dataset_free(&s->train);
    dataset_free(&s->test);
    dataset_free(&s->validation);
}

int main(int argc, char **argv) {
    static run_state state;
    state.started = wall_seconds();
    distributed_start(&argc, &argv);
    switch (cli_parse(argc, argv, &state.options)) {
    case CLI_DONE: return distributed_finish(0);
    case CLI_USAGE_ERROR: return distributed_finish(2);
    case CLI_RUN: break;
    }
    if (!check_batch_splits(&state.options)) return distributed_finish(2);
    int status = run(&state);
    cleanup(&state);
    return distributed_finish(status);
}
