/* The training loop. Nothing here knows which device or implementation runs the operations, nor
 * whether other ranks share the work: a rank trains its share of each batch, and the backend's
 * all-reduce (where there is one) sums the ranks' gradients between the backward pass and the
 * update. A sharded update (train_config's shard_update) sums only this rank's shard of the
 * gradient, updates that shard of the parameters and of the optimizer's state, and gathers the
 * ranks' shards of the parameters; at each epoch's end it gathers the optimizer's state too, so
 * that between epochs every rank holds all of both. */
#include "core/trainer.h"
#include "util/host_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/nvtx_ranges.h"
#include "profiling/wall_clock.h"
#include "core/progress.h"
#include "core/rng.h"

typedef enum { PASS_DIRECT, PASS_RECORDED, PASS_WHOLE } pass_mode;
static const char *const pass_mode_names[] = {"direct", "recorded", "whole"};

/* The kinds of step: full batches, and the pass's last, shorter batch. */
enum { FULL_BATCH, LAST_BATCH, STEP_KINDS };

/* A step is recorded whole, or, to time the all-reduce apart (--profile with an all-reduce), in
 * parts replayed in turn: the batch, forward and backward; the all-reduce (sharded: the
 * reduce-scatter); the update; and, sharded, the all-gather. */
enum { STEP_PARTS = 4 };

/* Recorded steps are replayed as runs of several steps in one recording: each replay costs the
 * device a few µs before its first kernel starts (4.5–5.8 µs between two replayed one-step
 * graphs, measured on an H200), paid once per run instead of once per step. A pass replays, in
 * this order: full steps MAX_RUN_STEPS at a time, then the rest of the pass (the full steps
 * left over and the last batch) as one run. A step recorded in parts is its own run. */
enum { RUN_OF_FULL, REST_OF_PASS, RUN_KINDS };
enum { MAX_RUN_STEPS = 32 };

typedef struct {
    long full_steps; /* full-batch steps recorded one after another... */
    bool last_batch; /* ...then the pass's last, shorter batch */
    long replays;    /* per pass; 0: not recorded */
    recording *parts[STEP_PARTS]; /* parts 1 to 3 NULL when recorded whole; 3 unless sharded */
} recorded_run;

/* This rank's part of a training pass. Every rank draws the same order and cuts each global batch
 * (config.batch rows, the last one possibly shorter) into one share per rank, as even as can be;
 * it trains its shares, each step's gradient being the sum over its rows divided by the global
 * batch's rows, so that the all-reduce's sum over the ranks is the global batch's mean. Alone,
 * the share is the whole batch. */
typedef struct {
    long steps;                 /* global batches in a pass */
    int batch_rows[STEP_KINDS]; /* rows of a full and of the last global batch; 0: no such step */
    int rows[STEP_KINDS];       /* this rank's share of them (possibly 0 of a short last one) */
    int samples;                /* rows this rank trains in a pass */
} pass_plan;

/* A set the trainer evaluates, in file order: its batches, and its per-sample metrics on the
 * device. */
typedef struct {
    const dataset *data;
    batch_feed *feed;
    pass_metrics metrics;
    int32_t *order; /* 0..count-1 */
    bool fed;       /* the feed has the order (from the first pass on) */
} evaluation_set;

struct trainer {
    backend *be;
    train_config config;
    const dataset *train;
    mlp_model *model;
    optimizer *opt;
    batch_feed *train_feed;
    /* Per-sample loss and correctness of a pass, kept on the device and reduced once per pass:
     * no host synchronization inside a step, and a deterministic sum. */
    pass_metrics train_metrics;
    evaluation_set test;  /* the set each epoch evaluates */
    evaluation_set other; /* trainer_evaluate_set's, made at its first call (data NULL before) */
    float *metric_sums;      /* two floats on the device: total loss, total correct */
    float *metric_sums_host; /* their copy on the host (alloc_host) */
    pass_cursor *train_cursor, *test_cursor; /* on the device */
    pass_plan plan;
    bool sharded;      /* the update shared out among the ranks */
    int reduces_early; /* sums across the ranks the backward pass starts (mlp_reduces_early) */
    int epochs_done;
    pass_mode mode;
    char whole_pass_refusal[256];
    recorded_run runs[RUN_KINDS];
    phase_profile *profile;
    progress progress;
};

static pass_metrics metrics_create(backend *be, int count) {
    return (pass_metrics){
        be->alloc(be, (size_t)count * sizeof(float)),
        be->alloc(be, (size_t)count * sizeof(float)),
        NULL,
    };
}

static void metrics_destroy(backend *be, pass_metrics *m) {
    be->release(be, m->row_loss);
    be->release(be, m->row_correct);
}

static evaluation_set evaluation_set_create(trainer *t, const dataset *data) {
    backend *be = t->be;
    evaluation_set s = {data, be->feed_create(be, data, t->model->max_rows, t->config.feed),
                        metrics_create(be, data->count),
                        alloc_or_exit((size_t)data->count * sizeof(int32_t), "an evaluation order"),
                        false};
    for (int i = 0; i < data->count; i++) s.order[i] = i;
    return s;
}

static void evaluation_set_destroy(backend *be, evaluation_set *s) {
    if (!s->data) return;
    be->feed_destroy(s->feed);
    metrics_destroy(be, &s->metrics);
    free(s->order);
}

/* Queues the reduction of a pass's metrics (count rows here) on the device and their copy back
 * to the host; with across_ranks, each rank having had its share of the pass's total rows, the
 * sums are added over the ranks first (the one reduction of a pass across ranks). They are
 * there once wait_for_device returns: metrics_mean reads them. */
static void metrics_queue(trainer *t, const pass_metrics *m, int count, bool across_ranks) {
    backend *be = t->be;
    be->sum(be, m->row_loss, (size_t)count, &t->metric_sums[0]);
    be->sum(be, m->row_correct, (size_t)count, &t->metric_sums[1]);
    if (across_ranks && be->all_reduce_sum) be->all_reduce_sum(be, t->metric_sums, 2);
    be->download_queued(be, t->metric_sums_host, t->metric_sums, 2 * sizeof(float));
}

/* The host waits for the device to finish what it queued: a range of its own ("wait"), so that
 * a trace does not put the wait for an epoch's steps under the name of what comes after. */
static void wait_for_device(trainer *t) {
    nvtx_range_push("wait");
    t->be->synchronize(t->be);
    nvtx_range_pop();
}

static void metrics_mean(const trainer *t, int total, double *mean_loss, double *accuracy) {
    *mean_loss = t->metric_sums_host[0] / total;
    *accuracy = t->metric_sums_host[1] / total;
}

/* The share of rank `rank` in a batch of `rows` rows cut into `ranks` consecutive shares: the
 * first rows % ranks shares have one row more than the others. */
static int share_rows(int rows, int rank, int ranks) {
    return rows / ranks + (rank < rows % ranks ? 1 : 0);
}

static int share_start(int rows, int rank, int ranks) {
    return rank * (rows / ranks) + (rank < rows % ranks ? rank : rows % ranks);
}

static pass_plan plan_pass(int samples, int batch, int rank, int ranks) {
    pass_plan p = {.steps = updates_per_epoch(samples, batch)};
    p.batch_rows[FULL_BATCH] = samples >= batch ? batch : 0;
    p.batch_rows[LAST_BATCH] = samples % batch;
    for (int kind = 0; kind < STEP_KINDS; kind++)
        p.rows[kind] = share_rows(p.batch_rows[kind], rank, ranks);
    p.samples = samples / batch * p.rows[FULL_BATCH] + p.rows[LAST_BATCH];
    return p;
}

/* The most rows this rank takes in a step: its share of a full batch, or of the only one. */
static int largest_share(const pass_plan *p) {
    return p->rows[FULL_BATCH] > p->rows[LAST_BATCH] ? p->rows[FULL_BATCH] : p->rows[LAST_BATCH];
}

/* Keeps, in place, this rank's share of each global batch of the pass's order: plan.samples
 * indices. */
static void keep_own_share(const trainer *t, int32_t *order) {
    int samples = t->train->count, batch = t->config.batch, kept = 0;
    for (int first = 0; first < samples; first += batch) {
        int rows = samples - first < batch ? samples - first : batch;
        int start = first + share_start(rows, t->be->rank, t->be->ranks);
        int mine = share_rows(rows, t->be->rank, t->be->ranks);
        memmove(order + kept, order + start, (size_t)mine * sizeof *order);
        kept += mine;
    }
}

static void cursor_reset(backend *be, pass_cursor *cursor, int optimizer_steps) {
    pass_cursor start = {0, optimizer_steps};
    be->upload(be, cursor, &start, sizeof start);
}

/* Runs the kernels of a step and of a test pass once, on zeros, before anything is timed: CUDA
 * loads a kernel's module at its first launch and cuBLAS picks (and loads) kernels per shape,
 * which would otherwise land in epoch 1's time; the all-reduce, where there is one, makes its
 * connections. Shapes: this rank's share of a full batch and of the epoch's last partial batch,
 * and a test batch. Parameters and optimizer state are not touched. */
static void warm_up(trainer *t) {
    backend *be = t->be;
    mlp_model *model = t->model;
    int rows_list[3] = {t->plan.rows[FULL_BATCH], t->plan.rows[LAST_BATCH], t->model->max_rows};
    int rows = model->max_rows;
    size_t x_bytes = (size_t)rows * model->shape.width[0] * sizeof(float);
    float *zeros = zalloc_or_exit(x_bytes, "the warm-up batch");
    float *x = be->alloc(be, x_bytes);
    uint8_t *labels = be->alloc(be, (size_t)rows);
    pass_metrics scratch = metrics_create(be, rows);
    be->upload(be, x, zeros, x_bytes);
    be->upload(be, labels, zeros, (size_t)rows);
    for (int i = 0; i < 3; i++) {
        if (rows_list[i] <= 0) continue;
        mlp_forward_loss(model, x, labels, rows_list[i], rows_list[i], &scratch, NULL);
        mlp_backward(model, x, rows_list[i]);
        mlp_forward(model, x, rows_list[i]); /* the test pass's kernels */
        mlp_loss(model, labels, rows_list[i], &scratch, NULL);
    }
    size_t n = model->shape.param_count;
    if (be->all_reduce_sum) be->all_reduce_sum(be, model->grads, n);
    if (t->sharded) { /* its two halves make their own first calls */
        be->reduce_scatter_sum(be, model->grads, n);
        be->all_gather(be, model->grads, n);
    }
    metrics_queue(t, &scratch, rows, false); /* the metrics' reduction: loading its module waits */
    be->synchronize(be);
    metrics_destroy(be, &scratch);
    be->release(be, labels);
    be->release(be, x);
    free(zeros);
}

/* The operations of one training step of the given kind, queued (or recorded: then profile is
 * NULL, so no phase is timed or named, as nothing runs yet), in parts (STEP_PARTS). */
static void queue_gradients(trainer *t, int kind, phase_profile *profile) {
    backend *be = t->be;
    int rows = t->plan.rows[kind];
    phase_begin(profile, PHASE_H2D);
    batch_view batch = be->feed_next(t->train_feed, rows, t->train_cursor);
    phase_end(profile, PHASE_H2D);

    phase_begin(profile, PHASE_FORWARD);
    mlp_forward_loss(t->model, batch.x, batch.y, rows, t->plan.batch_rows[kind],
                     &t->train_metrics, t->train_cursor);
    phase_end(profile, PHASE_FORWARD);

    phase_begin(profile, PHASE_BACKWARD);
    mlp_backward(t->model, batch.x, rows);
    phase_end(profile, PHASE_BACKWARD);
}

/* The ranks' gradients summed: the gradient of the global batch's mean loss on every rank, or,
 * sharded, in this rank's shard. Where the backward pass started the sums, what is left is to
 * wait for them. */
static void queue_all_reduce(trainer *t, phase_profile *profile) {
    backend *be = t->be;
    if (!be->all_reduce_sum) return;
    size_t n = t->model->shape.param_count;
    phase_begin(profile, PHASE_ALLREDUCE);
    if (t->sharded) be->reduce_scatter_sum(be, t->model->grads, n);
    else if (t->reduces_early > 0) be->all_reduce_finish(be);
    else be->all_reduce_sum(be, t->model->grads, n);
    phase_end(profile, PHASE_ALLREDUCE);
}

static void queue_update(trainer *t, int kind, phase_profile *profile) {
    phase_begin(profile, PHASE_UPDATE);
    optimizer_step(t->opt, t->model->params, t->model->grads, t->train_cursor, t->plan.rows[kind]);
    phase_end(profile, PHASE_UPDATE);
}

/* Sharded: every rank's updated shard of the parameters to every rank. */
static void queue_gather(trainer *t, phase_profile *profile) {
    if (!t->sharded) return;
    phase_begin(profile, PHASE_ALLREDUCE);
    t->be->all_gather(t->be, t->model->params, t->model->shape.param_count);
    phase_end(profile, PHASE_ALLREDUCE);
}

static void queue_step(trainer *t, int kind, phase_profile *profile) {
    queue_gradients(t, kind, profile);
    queue_all_reduce(t, profile);
    queue_update(t, kind, profile);
    queue_gather(t, profile);
}

/* How a pass's steps are cut into recorded runs (see recorded_run). Where the full steps come
 * out even, the rest of the pass takes the last run of them, so that the last batch does not
 * cost a replay of its own (H200, batch 2048: 2.077 → 2.062 ms an epoch, same run). Recorded
 * in parts, a run is one step (run = 1, so rest = 0). */
static void plan_runs(trainer *t, bool in_parts) {
    bool last = t->plan.batch_rows[LAST_BATCH] != 0;
    long full = t->plan.steps - (last ? 1 : 0);
    long run = in_parts || full < 1 ? 1 : full < MAX_RUN_STEPS ? full : MAX_RUN_STEPS;
    long runs = full / run, rest = full % run;
    if (last && rest == 0 && runs > 0 && !in_parts) runs--, rest = run;
    t->runs[RUN_OF_FULL] = (recorded_run){run, false, runs, {NULL}};
    t->runs[REST_OF_PASS] = (recorded_run){rest, last, rest || last ? 1 : 0, {NULL}};
}

static void queue_run(trainer *t, const recorded_run *run) {
    for (long step = 0; step < run->full_steps; step++) queue_step(t, FULL_BATCH, NULL);
    if (run->last_batch) queue_step(t, LAST_BATCH, NULL);
}

static void record_steps(trainer *t) {
    backend *be = t->be;
    bool in_parts = t->config.profile && be->all_reduce_sum;
    plan_runs(t, in_parts);
    for (int r = 0; r < RUN_KINDS; r++) {
        recorded_run *run = &t->runs[r];
        if (run->replays == 0) continue;
        be->record_begin(be);
        if (!in_parts) {
            queue_run(t, run);
            run->parts[0] = be->record_end(be);
            continue;
        }
        int kind = run->last_batch ? LAST_BATCH : FULL_BATCH;
        queue_gradients(t, kind, NULL);
        run->parts[0] = be->record_end(be);
        be->record_begin(be);
        queue_all_reduce(t, NULL);
        run->parts[1] = be->record_end(be);
        be->record_begin(be);
        queue_update(t, kind, NULL);
        run->parts[2] = be->record_end(be);
        if (!t->sharded) continue;
        be->record_begin(be);
        queue_gather(t, NULL);
        run->parts[3] = be->record_end(be);
    }
}

/* A recorded run: timed as one "compute" phase, or in its parts: forward and backward
 * ("compute"), the all-reduce (sharded: the reduce-scatter), the update, and, sharded, the
 * all-gather (the all-reduce's phase too). */
static void replay_run(trainer *t, const recorded_run *run) {
    backend *be = t->be;
    phase_id phases[STEP_PARTS] = {PHASE_COMPUTE, PHASE_ALLREDUCE, PHASE_UPDATE, PHASE_ALLREDUCE};
    for (int part = 0; part < STEP_PARTS && run->parts[part]; part++) {
        phase_begin(t->profile, phases[part]);
        be->replay(be, run->parts[part]);
        phase_end(t->profile, phases[part]);
    }
}

static training_pass whole_pass(trainer *t) {
    return (training_pass){
        .shape = &t->model->shape,
        .optimizer = &t->config.optimizer,
        .params = t->model->params,
        .optimizer_state = {t->opt->state[0], t->opt->state[1]},
        .feed = t->train_feed,
        .samples = t->plan.samples,
        .batch = largest_share(&t->plan),
        .row_loss = t->train_metrics.row_loss,
        .row_correct = t->train_metrics.row_correct,
        .cursor = t->train_cursor,
        .label_smoothing = t->config.label_smoothing,
    };
}

/* Whole if the backend can, else recorded if asked for and possible, else direct. */
static pass_mode choose_pass_mode(trainer *t) {
    backend *be = t->be;
    if (be->pass_supported) {
        training_pass pass = whole_pass(t);
        if (be->pass_supported(be, &pass, t->whole_pass_refusal, sizeof t->whole_pass_refusal))
            return PASS_WHOLE;
    }
    if (t->config.record_steps && be->record_begin && be->feed_recordable(t->train_feed))
        return PASS_RECORDED;
    return PASS_DIRECT;
}

trainer *trainer_create(backend *be, const mlp_shape *shape, const dataset *train,
                        const dataset *test, const train_config *config,
                        const float *initial_params, const float *optimizer_state,
                        int optimizer_step, int epochs_done) {
    /* training only: a test pass shares its rows unevenly, and sums nothing but metrics */
    if (train && config->batch % be->ranks != 0) {
        fprintf(stderr, "mlp_train: internal error: batches of %d do not split across %d ranks\n",
                config->batch, be->ranks);
        exit(1);
    }
    trainer *t = zalloc_or_exit(sizeof *t, "the trainer");
    t->be = be;
    t->config = *config;
    t->train = train;
    t->epochs_done = epochs_done;
    int max_rows = trainer_max_rows(config->batch);
    t->model = mlp_model_create(be, shape, max_rows);
    t->model->label_smoothing = config->label_smoothing;
    be->upload(be, t->model->params, initial_params, shape->param_count * sizeof(float));
    t->opt = optimizer_create(be, config->optimizer, shape);
    if (optimizer_state) {
        for (int i = 0; i < t->opt->state_arrays; i++)
            be->upload(be, t->opt->state[i], optimizer_state + (size_t)i * shape->param_count,
                       shape->param_count * sizeof(float));
        t->opt->step = optimizer_step;
    }
    t->metric_sums = be->alloc(be, 2 * sizeof(float));
    t->metric_sums_host = be->alloc_host(be, 2 * sizeof(float));
    t->train_cursor = be->alloc(be, sizeof(pass_cursor));
    t->test_cursor = be->alloc(be, sizeof(pass_cursor));
    t->test = evaluation_set_create(t, test);
    t->profile = phase_profile_create(be, config->profile);
    progress_init(&t->progress, config->progress);
    if (train) t->plan = plan_pass(train->count, config->batch, be->rank, be->ranks);
    t->sharded = config->shard_update && be->reduce_scatter_sum;
    warm_up(t); /* with the whole gradient's all-reduce, which sets it up, and its halves */
    if (t->sharded) {
        size_t n = shape->param_count;
        optimizer_shard(t->opt, shard_begin(n, be->rank, be->ranks),
                        shard_begin(n, be->rank + 1, be->ranks));
    } else if (be->all_reduce_start && !config->profile) {
        t->model->early_reduce_floats = config->overlap_all_reduce_floats;
    }
    t->reduces_early = mlp_reduces_early(t->model);
    if (train) {
        t->train_feed = be->feed_create(be, train, largest_share(&t->plan), config->feed);
        if (!config->skip_train_metrics) t->train_metrics = metrics_create(be, train->count);
        t->mode = choose_pass_mode(t);
        if (t->mode == PASS_RECORDED) record_steps(t);
    }
    return t;
}

void trainer_destroy(trainer *t) {
    if (!t) return;
    backend *be = t->be;
    phase_profile_destroy(t->profile);
    for (int r = 0; r < RUN_KINDS; r++)
        for (int part = 0; part < STEP_PARTS; part++)
            if (t->runs[r].parts[part]) be->recording_destroy(be, t->runs[r].parts[part]);
    if (t->train_feed) {
        be->feed_destroy(t->train_feed);
        metrics_destroy(be, &t->train_metrics);
    }
    evaluation_set_destroy(be, &t->test);
    evaluation_set_destroy(be, &t->other);
    be->release(be, t->metric_sums);
    be->release_host(be, t->metric_sums_host);
    be->release(be, t->train_cursor);
    be->release(be, t->test_cursor);
    optimizer_destroy(t->opt);
    mlp_model_destroy(t->model);
    free(t);
}

const char *trainer_pass_mode(const trainer *t) { return pass_mode_names[t->mode]; }

int trainer_all_reduces_early(const trainer *t) { return t->reduces_early; }

bool trainer_update_sharded(const trainer *t) { return t->sharded; }

const char *trainer_whole_pass_refusal(const trainer *t) {
    return t->whole_pass_refusal[0] ? t->whole_pass_refusal : NULL;
}

/* The pass's steps, each queued directly. */
static void queue_steps(trainer *t, long steps) {
    for (long step = 0; step < steps; step++) {
        int kind = step == steps - 1 && t->plan.batch_rows[LAST_BATCH] ? LAST_BATCH : FULL_BATCH;
        nvtx_range_push("step");
        queue_step(t, kind, t->profile);
        nvtx_range_pop();
        progress_step(&t->progress, step + 1);
    }
}

/* The pass's steps replayed from their recorded runs, an NVTX range "steps" per replay. */
static void replay_steps(trainer *t) {
    long done = 0;
    for (int r = 0; r < RUN_KINDS; r++) {
        const recorded_run *run = &t->runs[r];
        for (long replay = 0; replay < run->replays; replay++) {
            nvtx_range_push("steps");
            replay_run(t, run);
            nvtx_range_pop();
            done += run->full_steps + (run->last_batch ? 1 : 0);
            progress_step(&t->progress, done);
        }
    }
}

static void train_pass(trainer *t, long steps) {
    backend *be = t->be;
    if (t->mode == PASS_WHOLE) {
        training_pass pass = whole_pass(t);
        phase_begin(t->profile, PHASE_COMPUTE);
        be->run_pass(be, &pass);
        phase_end(t->profile, PHASE_COMPUTE);
        progress_step(&t->progress, steps);
    } else if (t->mode == PASS_RECORDED) {
        replay_steps(t);
    } else {
        queue_steps(t, steps);
    }
    t->opt->step += (int)steps;
}

/* A set through the model in file order, batch by batch: per-row metrics (and predictions,
 * unless NULL) on the device, and their sums queued for metrics_mean. */
static void evaluation_pass(trainer *t, evaluation_set *set, int32_t *predictions) {
    backend *be = t->be;
    int count = set->data->count;
    pass_metrics metrics = set->metrics;
    metrics.prediction = predictions;
    be->feed_start_pass(set->feed, set->fed ? NULL : set->order, count);
    set->fed = true;
    cursor_reset(be, t->test_cursor, 0);
    for (int offset = 0; offset < count; offset += t->model->max_rows) {
        int rows = count - offset < t->model->max_rows ? count - offset : t->model->max_rows;
        batch_view batch = be->feed_next(set->feed, rows, t->test_cursor);
        mlp_forward(t->model, batch.x, rows);
        mlp_loss(t->model, batch.y, rows, &metrics, t->test_cursor);
        be->advance_cursor(be, t->test_cursor, rows);
    }
    metrics_queue(t, &set->metrics, count, false);
}

/* Sharded: every rank's shard of the optimizer's state to every rank, so that all of it is whole
 * on each between epochs (for a checkpoint, which rank 0 alone writes). */
static void gather_optimizer_state(trainer *t) {
    if (!t->sharded) return;
    phase_begin(t->profile, PHASE_ALLREDUCE);
    for (int i = 0; i < t->opt->state_arrays; i++)
        t->be->all_gather(t->be, t->opt->state[i], t->model->shape.param_count);
    phase_end(t->profile, PHASE_ALLREDUCE);
}

bool trainer_run_epoch(trainer *t, int epochs_in_run, epoch_result *result, char *err,
                       size_t err_size) {
    backend *be = t->be;
    const dataset *train = t->train;
    int epoch = t->epochs_done + 1;
    long steps = t->plan.steps;
    memset(result, 0, sizeof *result);
    result->epoch = epoch;

    nvtx_range_push("epoch");
    /* Each epoch's order depends only on (seed, epoch), so a resumed run sees the same batches. */
    int32_t *order = alloc_or_exit((size_t)train->count * sizeof(int32_t), "the epoch's order");
    rng shuffle = rng_create(t->config.seed, 1000u + (uint64_t)epoch);
    rng_permutation(&shuffle, order, train->count);
    keep_own_share(t, order);
    be->feed_start_pass(t->train_feed, order, t->plan.samples);
    free(order);
    cursor_reset(be, t->train_cursor, t->opt->step);

    progress_epoch_start(&t->progress, epoch, t->epochs_done + epochs_in_run, steps);
    double started = wall_seconds();
    train_pass(t, steps);
    gather_optimizer_state(t);
    result->train_loss = result->train_accuracy = NAN;
    if (!t->config.skip_train_metrics) {
        phase_begin(t->profile, PHASE_D2H);
        metrics_queue(t, &t->train_metrics, t->plan.samples, true);
        phase_end(t->profile, PHASE_D2H);
    }
    wait_for_device(t);
    if (!t->config.skip_train_metrics)
        metrics_mean(t, train->count, &result->train_loss, &result->train_accuracy);
    result->time_s = wall_seconds() - started;
    result->images_per_s = train->count / result->time_s;
    progress_epoch_end(&t->progress);

    double eval_started = wall_seconds();
    phase_begin(t->profile, PHASE_EVAL);
    evaluation_pass(t, &t->test, NULL);
    wait_for_device(t);
    metrics_mean(t, t->test.data->count, &result->test_loss, &result->test_accuracy);
    phase_end(t->profile, PHASE_EVAL);
    result->eval_time_s = wall_seconds() - eval_started;
    result->phases = phase_profile_collect(t->profile);
    nvtx_range_pop();

    t->epochs_done = epoch;
    bool train_finite = t->config.skip_train_metrics || isfinite(result->train_loss);
    if (train_finite && isfinite(result->test_loss)) return true;
    if (t->config.skip_train_metrics)
        snprintf(err, err_size,
                 "training diverged in epoch %d: the evaluation's loss is %g (the training loss "
                 "was not summed: --no-train-metrics); try a smaller --lr (it was %g)",
                 epoch, result->test_loss, t->config.optimizer.lr);
    else
        snprintf(err, err_size,
                 "training diverged in epoch %d: the loss is %g (train) and %g (test); "
                 "try a smaller --lr (it was %g)",
                 epoch, result->train_loss, result->test_loss, t->config.optimizer.lr);
    return false;
}

void trainer_evaluate(trainer *t, double *loss, double *accuracy,
                      long confusion[DATASET_CLASSES][DATASET_CLASSES]) {
    backend *be = t->be;
    int count = t->test.data->count;
    int32_t *predictions_device = be->alloc(be, (size_t)count * sizeof(int32_t));
    int32_t *predictions = alloc_or_exit((size_t)count * sizeof(int32_t), "the predictions");
    nvtx_range_push("eval");
    evaluation_pass(t, &t->test, predictions_device);
    wait_for_device(t);
    metrics_mean(t, count, loss, accuracy);
    be->download(be, predictions, predictions_device, (size_t)count * sizeof(int32_t));
    nvtx_range_pop();
    memset(confusion, 0, sizeof(long) * DATASET_CLASSES * DATASET_CLASSES);
    for (int i = 0; i < count; i++) confusion[t->test.data->labels[i]][predictions[i]]++;
    free(predictions);
    be->release(be, predictions_device);
}

void trainer_evaluate_set(trainer *t, const dataset *data, double *loss, double *accuracy) {
    if (t->other.data != data) { /* a set's batches and metrics are made once, kept for the next */
        evaluation_set_destroy(t->be, &t->other);
        t->other = evaluation_set_create(t, data);
    }
    nvtx_range_push("eval");
    evaluation_pass(t, &t->other, NULL);
    wait_for_device(t);
    metrics_mean(t, data->count, loss, accuracy);
    nvtx_range_pop();
}

void trainer_export(trainer *t, float **params, float **state, int *state_arrays,
                    int *optimizer_step, int *epochs_done) {
    backend *be = t->be;
    size_t n = t->model->shape.param_count;
    *params = alloc_or_exit(n * sizeof(float), "the checkpoint's parameters");
    *state = alloc_or_exit(n * t->opt->state_arrays * sizeof(float), "the checkpoint's state");
    be->download(be, *params, t->model->params, n * sizeof(float));
    for (int i = 0; i < t->opt->state_arrays; i++)
        be->download(be, *state + (size_t)i * n, t->opt->state[i], n * sizeof(float));
    *state_arrays = t->opt->state_arrays;
    *optimizer_step = t->opt->step;
    *epochs_done = t->epochs_done;
}
