/* Formatting of results; see report.h. */
#define _POSIX_C_SOURCE 200809L
#include "app/report.h"

#include "util/json_text.h"

#include "util/atomic_file.h"

#include <math.h>
#include <string.h>

#include "app/version.h"

/* Where batches come from; the CPU reads the data set in host memory, whatever the option. */
static const char *placement_name(const run_info *info) {
    const feed_options *feed = &info->options->feed;
    if (strcmp(info->device, "cpu") == 0) return "host";
    switch (feed->placement) {
    case DATA_HOST_PAGEABLE: return "host-pageable";
    case DATA_HOST_PINNED: return feed->overlap ? "host-pinned-overlapped" : "host-pinned";
    default: return "device";
    }
}

/* How each training pass runs (trainer.h). */
static const char *execution_description(const char *pass_mode) {
    if (strcmp(pass_mode, "recorded") == 0) return "each step replayed from a CUDA graph";
    if (strcmp(pass_mode, "whole") == 0) return "each epoch in one persistent kernel";
    return "each step's operations queued one by one";
}

void report_header(FILE *out, const run_info *info) {
    const cli_options *o = info->options;
    char layers[256];
    mlp_shape_format(info->shape, layers, sizeof layers);
    fprintf(out, "mlp_train %s: %s on %s (%s)\n", MLP_VERSION, layers, info->device,
            info->device_description);
    fprintf(out, "data: %s (%s), %d train, %d test images, batches from %s\n", o->dataset,
            info->data_dir, info->train_count, info->test_count, placement_name(info));
    if (info->validation_count)
        fprintf(out, "evaluation: each epoch on %d validation images held out of the training "
                     "set (seed %llu); the test set %s\n",
                info->validation_count, (unsigned long long)o->seed,
                o->test_each_epoch ? "after each epoch too" : "once, at the end");
    fprintf(out, "training: %s, lr %g", optimizer_name(o->optimizer.kind), o->optimizer.lr);
    if (o->optimizer.kind == OPTIMIZER_SGD) fprintf(out, ", momentum %g", o->optimizer.momentum);
    if (schedule_varies(optimizer_schedule(&o->optimizer)))
        fprintf(out, ", %s schedule over %d updates (warm-up %d)",
                schedule_name(o->optimizer.schedule), o->optimizer.total_steps,
                o->optimizer.warmup_steps);
    if (o->optimizer.weight_decay != 0.0f)
        fprintf(out, ", weight decay %g (weights)", o->optimizer.weight_decay);
    if (o->label_smoothing != 0.0f)
        fprintf(out, ", label smoothing %g (train_loss is the smoothed loss)", o->label_smoothing);
    fprintf(out, ", batch %d, %d epochs, seed %llu\n", o->batch, o->epochs,
            (unsigned long long)o->seed);
    fprintf(out, "execution: %s\n", execution_description(info->pass_mode));
    if (o->precision == PRECISION_FP32)
        fprintf(out, "precision: fp32\n");
    else
        fprintf(out, "precision: %s products in the GEMMs; storage, sums and updates in FP32\n",
                gemm_precision_name(o->precision));
    if (info->all_reduce && info->update_sharded)
        fprintf(out, "ranks: %d (%s), each a share of every batch, the update sharded: each rank "
                     "sums its shard of the gradients (reduce-scatter) and updates it, then the "
                     "shards are gathered (all-gather)\n",
                info->ranks, info->mpi_library);
    else if (info->all_reduce)
        fprintf(out, "ranks: %d (%s), each a share of every batch, gradients summed by %s%s\n",
                info->ranks, info->mpi_library, info->all_reduce,
                info->all_reduce_overlapped ? ", the last layers' beside the backward pass" : "");
    if (info->advice) fprintf(out, "note: %s\n", info->advice);
    if (o->profile) report_startup(out, info->startup);
    bool validation = info->validation_count > 0;
    fprintf(out, "%5s %10s %9s %10s %9s %9s %12s", "epoch", "train_loss", "train_acc",
            validation ? "val_loss" : "test_loss", validation ? "val_acc" : "test_acc", "time_s",
            "images/s");
    if (validation && o->test_each_epoch) fprintf(out, " %10s %9s", "test_loss", "test_acc");
    fprintf(out, "\n");
}

void report_outcome(FILE *out, const run_info *info, const run_outcome *r, int epochs_run) {
    if (info->validation_count && !info->options->test_each_epoch)
        fprintf(out, "test set (once, after epoch %d): loss %.4f, accuracy %.2f%%\n", epochs_run,
                r->test_loss, 100 * r->test_accuracy);
    if (r->target <= 0.0) return;
    const char *set = info->validation_count ? "validation" : "test";
    if (r->target_epoch)
        fprintf(out, "target %.2f%% (%s) reached in epoch %d: %.3f s of training, %.3f s since the "
                     "process started\n",
                100 * r->target, set, r->target_epoch, r->target_train_s, r->target_wall_s);
    else
        fprintf(out, "target %.2f%% (%s) not reached in %d epochs\n", 100 * r->target, set,
                epochs_run);
}

void report_epoch(FILE *out, const epoch_result *e) {
    fprintf(out, "%5d ", e->epoch);
    if (isnan(e->train_loss)) /* not measured (--no-train-metrics) */
        fprintf(out, "%10s %9s", "-", "-");
    else
        fprintf(out, "%10.4f %8.2f%%", e->train_loss, 100 * e->train_accuracy);
    fprintf(out, " %10.4f %8.2f%% %9.3f %12.0f", e->test_loss, 100 * e->test_accuracy, e->time_s,
            e->images_per_s);
    if (e->test_set_evaluated)
        fprintf(out, " %10.4f %8.2f%%", e->test_set_loss, 100 * e->test_set_accuracy);
    fprintf(out, "\n");
    fflush(out);
}

phase_totals phases_add(phase_totals a, const phase_totals *b) {
    for (int p = 0; p < PHASE_COUNT; p++) {
        a.ms[p] += b->ms[p];
        a.count[p] += b->count[p];
        a.gemm_ms[p] += b->gemm_ms[p];
        a.operations_ms[p] += b->operations_ms[p];
    }
    a.split = a.split || b->split;
    return a;
}

static double percent(double part, double whole) { return whole > 0 ? 100 * part / whole : 0.0; }

/* The training pass (everything but the test pass) as GEMM, the other operations and the host
 * code between them. */
static void report_pass_split(FILE *out, const phase_totals *phases, double wall_ms) {
    double pass_ms = wall_ms - phases->ms[PHASE_EVAL], gemm_ms = 0.0, operations_ms = 0.0;
    for (int p = 0; p < PHASE_COUNT; p++) {
        if (p == PHASE_EVAL) continue;
        gemm_ms += phases->gemm_ms[p];
        operations_ms += phases->operations_ms[p];
    }
    double all_reduce_ms = phases->ms[PHASE_ALLREDUCE]; /* among ranks: not host code */
    double between_ms = pass_ms - gemm_ms - operations_ms - all_reduce_ms;
    fprintf(out, "  training pass %.3f ms: gemm %.3f ms (%.1f%%), other operations %.3f ms (%.1f%%), ",
            pass_ms, gemm_ms, percent(gemm_ms, pass_ms), operations_ms,
            percent(operations_ms, pass_ms));
    if (phases->count[PHASE_ALLREDUCE])
        fprintf(out, "all-reduce %.3f ms (%.1f%%), ", all_reduce_ms,
                percent(all_reduce_ms, pass_ms));
    fprintf(out, "between operations %.3f ms (%.1f%%)\n", between_ms, percent(between_ms, pass_ms));
}

void report_phases(FILE *out, const char *title, const phase_totals *phases, double wall_ms) {
    fprintf(out, "  %s (wall %.2f ms)\n", title, wall_ms);
    fprintf(out, "    %-9s %11s %8s %12s %7s", "phase", "total_ms", "count", "ms_each", "share");
    if (phases->split) fprintf(out, " %11s %12s", "gemm_ms", "other_ops_ms");
    fprintf(out, "\n");
    double accounted = 0.0;
    for (int p = 0; p < PHASE_COUNT; p++) {
        long n = phases->count[p];
        if (n == 0) continue; /* e.g. the per-phase rows when steps are replayed */
        accounted += phases->ms[p];
        fprintf(out, "    %-9s %11.3f %8ld %12.4f %6.1f%%", phase_names[p], phases->ms[p], n,
                n ? phases->ms[p] / n : 0.0, percent(phases->ms[p], wall_ms));
        if (phases->split)
            fprintf(out, " %11.3f %12.3f", phases->gemm_ms[p], phases->operations_ms[p]);
        fprintf(out, "\n");
    }
    double other = wall_ms - accounted;
    fprintf(out, "    %-9s %11.3f %8s %12s %6.1f%%\n", "other", other > 0 ? other : 0.0, "", "",
            other > 0 ? percent(other, wall_ms) : 0.0);
    if (phases->split) report_pass_split(out, phases, wall_ms);
}

/* ---- JSON ---- */

/* A figure, or null where it was not measured (NaN). */
static void json_number_or_null(FILE *out, double value) {
    if (isnan(value)) fprintf(out, "null");
    else fprintf(out, "%.9g", value);
}

static void json_config(FILE *out, const run_info *info) {
    const cli_options *o = info->options;
    fprintf(out, "\"config\": {\"device\": ");
    json_write_string(out, info->device);
    fprintf(out, ", \"impl\": ");
    json_write_string(out, o->impl);
    fprintf(out, ", \"precision\": ");
    json_write_string(out, gemm_precision_name(o->precision));
    fprintf(out, ", \"device_description\": ");
    json_write_string(out, info->device_description);
    fprintf(out, ", \"dataset\": ");
    json_write_string(out, o->dataset);
    fprintf(out, ", \"data_dir\": ");
    json_write_string(out, info->data_dir);
    fprintf(out, ", \"data_placement\": ");
    json_write_string(out, placement_name(info));
    fprintf(out, ", \"layers\": [");
    for (int l = 0; l <= info->shape->layers; l++)
        fprintf(out, "%s%d", l ? ", " : "", info->shape->width[l]);
    fprintf(out, "], \"epochs\": %d, \"batch\": %d, \"optimizer\": ", o->epochs, o->batch);
    json_write_string(out, optimizer_name(o->optimizer.kind));
    fprintf(out, ", \"lr\": %.9g, \"momentum\": %.9g, \"seed\": %llu, \"threads\": %d",
            o->optimizer.lr, o->optimizer.momentum, (unsigned long long)o->seed, info->threads);
    fprintf(out, ", \"schedule\": ");
    json_write_string(out, schedule_name(o->optimizer.schedule));
    fprintf(out, ", \"warmup_steps\": %d, \"schedule_steps\": %d", o->optimizer.warmup_steps,
            o->optimizer.total_steps);
    fprintf(out, ", \"weight_decay\": %.9g, \"label_smoothing\": %.9g", o->optimizer.weight_decay,
            o->label_smoothing);
    fprintf(out, ", \"train_images\": %d, \"test_images\": %d, \"validation_images\": %d, "
                 "\"execution\": ",
            info->train_count, info->test_count, info->validation_count);
    json_write_string(out, info->pass_mode);
    fprintf(out, ", \"ranks\": %d, \"all_reduce\": ", info->ranks);
    if (info->all_reduce)
        json_write_string(out, info->all_reduce);
    else
        fprintf(out, "null");
    fprintf(out, ", \"all_reduce_overlap\": %s, \"sharded_update\": %s, \"train_metrics\": %s}",
            info->all_reduce_overlapped ? "true" : "false",
            info->update_sharded ? "true" : "false", o->no_train_metrics ? "false" : "true");
}

static void json_phases(FILE *out, const phase_totals *phases) {
    fprintf(out, "{");
    for (int p = 0; p < PHASE_COUNT; p++) {
        fprintf(out, "%s\"%s\": {\"ms\": %.6f, \"count\": %ld", p ? ", " : "", phase_names[p],
                phases->ms[p], phases->count[p]);
        if (phases->split)
            fprintf(out, ", \"gemm_ms\": %.6f, \"other_operations_ms\": %.6f", phases->gemm_ms[p],
                    phases->operations_ms[p]);
        fprintf(out, "}");
    }
    fprintf(out, "}");
}

void report_startup(FILE *out, const startup_times *t) {
    fprintf(out,
            "start-up: %.3f s: data %.3f s and device set-up %.3f s side by side, then trainer "
            "%.3f s (buffers, upload, warm-up)\n",
            t->total_s, t->data_s, t->device_s, t->trainer_s);
}

void report_json(FILE *out, const run_info *info, const epoch_result *epochs, int count,
                 const run_outcome *outcome) {
    const char *eval = info->validation_count ? "validation" : "test";
    fprintf(out, "{\"version\": \"%s\", ", MLP_VERSION);
    json_config(out, info);
    fprintf(out, ", \"epochs\": [");
    phase_totals run = {0};
    double train_time = 0.0;
    for (int i = 0; i < count; i++) {
        const epoch_result *e = &epochs[i];
        fprintf(out, "%s\n  {\"epoch\": %d, \"train_loss\": ", i ? "," : "", e->epoch);
        json_number_or_null(out, e->train_loss);
        fprintf(out, ", \"train_accuracy\": ");
        json_number_or_null(out, e->train_accuracy);
        fprintf(out,
                ", \"%s_loss\": %.9g, \"%s_accuracy\": %.9g, \"time_s\": %.9g, "
                "\"images_per_s\": %.9g, \"eval_time_s\": %.9g",
                eval, e->test_loss, eval, e->test_accuracy, e->time_s, e->images_per_s,
                e->eval_time_s);
        if (e->test_set_evaluated)
            fprintf(out, ", \"test_loss\": %.9g, \"test_accuracy\": %.9g", e->test_set_loss,
                    e->test_set_accuracy);
        if (info->options->profile) {
            fprintf(out, ", \"phases\": ");
            json_phases(out, &e->phases);
        }
        fprintf(out, "}");
        run = phases_add(run, &e->phases);
        train_time += e->time_s;
    }
    fprintf(out, "\n], \"test_accuracy\": %.9g, \"test_loss\": %.9g, \"train_time_s\": %.9g",
            outcome->test_accuracy, outcome->test_loss, train_time);
    if (info->validation_count)
        fprintf(out, ", \"validation_accuracy\": %.9g", count ? epochs[count - 1].test_accuracy : 0.0);
    if (outcome->target > 0.0) {
        fprintf(out, ", \"target\": {\"accuracy\": %.9g, \"set\": \"%s\", \"reached\": %s",
                outcome->target, eval, outcome->target_epoch ? "true" : "false");
        if (outcome->target_epoch)
            fprintf(out, ", \"epoch\": %d, \"train_time_s\": %.9g, \"process_time_s\": %.9g",
                    outcome->target_epoch, outcome->target_train_s, outcome->target_wall_s);
        fprintf(out, "}");
    }
    if (info->options->profile) {
        fprintf(out, ", \"phases\": ");
        json_phases(out, &run);
    }
    const startup_times *t = info->startup;
    fprintf(out,
            ", \"startup\": {\"total_s\": %.6f, \"data_s\": %.6f, \"device_s\": %.6f, "
            "\"trainer_s\": %.6f}",
            t->total_s, t->data_s, t->device_s, t->trainer_s);
    fprintf(out, "}\n");
}

/* ---- CSV ---- */

typedef struct {
    const epoch_result *epochs;
    int count;
    const char *evaluated; /* "test", or "validation" (--validation) */
} epoch_rows;

static bool write_csv(FILE *out, const void *contents) {
    const epoch_rows *rows = contents;
    bool tested = rows->count > 0 && rows->epochs[0].test_set_evaluated;
    fprintf(out, "epoch,train_loss,train_accuracy,%s_loss,%s_accuracy,time_s,images_per_s%s\n",
            rows->evaluated, rows->evaluated, tested ? ",test_loss,test_accuracy" : "");
    for (int i = 0; i < rows->count; i++) {
        const epoch_result *e = &rows->epochs[i];
        if (isnan(e->train_loss)) /* not measured (--no-train-metrics): empty fields */
            fprintf(out, "%d,,,", e->epoch);
        else
            fprintf(out, "%d,%.9g,%.9g,", e->epoch, e->train_loss, e->train_accuracy);
        fprintf(out, "%.9g,%.9g,%.9g,%.9g", e->test_loss, e->test_accuracy, e->time_s,
                e->images_per_s);
        if (tested) fprintf(out, ",%.9g,%.9g", e->test_set_loss, e->test_set_accuracy);
        fprintf(out, "\n");
    }
    return !ferror(out);
}

bool report_csv(const char *path, const epoch_result *epochs, int count, bool validation,
                char *err, size_t err_size) {
    epoch_rows rows = {epochs, count, validation ? "validation" : "test"};
    return atomic_file_write(path, write_csv, &rows, err, err_size);
}

/* ---- --eval ---- */

void report_evaluation(FILE *out, const run_info *info, double loss, double accuracy,
                       long confusion[DATASET_CLASSES][DATASET_CLASSES], bool json) {
    if (json) {
        fprintf(out, "{\"version\": \"%s\", ", MLP_VERSION);
        json_config(out, info);
        fprintf(out, ", \"test_loss\": %.9g, \"test_accuracy\": %.9g, \"confusion\": [", loss,
                accuracy);
        for (int t = 0; t < DATASET_CLASSES; t++) {
            fprintf(out, "%s[", t ? ", " : "");
            for (int p = 0; p < DATASET_CLASSES; p++)
                fprintf(out, "%s%ld", p ? ", " : "", confusion[t][p]);
            fprintf(out, "]");
        }
        fprintf(out, "]}\n");
        return;
    }
    char layers[256];
    mlp_shape_format(info->shape, layers, sizeof layers);
    fprintf(out, "evaluation of %s on %s test set (%d images): loss %.4f, accuracy %.2f%%\n",
            layers, info->options->dataset, info->test_count, loss, 100 * accuracy);
    fprintf(out, "confusion matrix (rows: true class, columns: predicted)\n      ");
    for (int p = 0; p < DATASET_CLASSES; p++) fprintf(out, "%6d", p);
    fprintf(out, "\n");
    for (int t = 0; t < DATASET_CLASSES; t++) {
        fprintf(out, "%6d", t);
        for (int p = 0; p < DATASET_CLASSES; p++) fprintf(out, "%6ld", confusion[t][p]);
        fprintf(out, "\n");
    }
}
