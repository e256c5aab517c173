/* cpu_step_ops: where a CPU tiled training step's time goes, operation by operation, and how
 * much of it is the operations' own work.
 *
 * A step of the default model (784-256-10, SGD) is five OpenMP operations: the batch gather,
 * the layer-1 forward GEMM (bias and ReLU fused), the output layer (one region), the layer-1
 * weight-gradient GEMM and the update. This program runs them as the trainer does, one after
 * another on synthetic data of MNIST's size, and times each; then it times each again alone,
 * repeated back to back on the same data. The difference is what an operation pays for running
 * between the others: its data was last written by other threads (or other cores' caches hold
 * copies it must invalidate), where alone it is already in this thread's cache. Figures are
 * medians in µs over the steps; docs/performance.md reads them. It exits 1 if the steps did not
 * train (see steps_trained).
 *
 * Usage: cpu_step_ops [--threads N] [--batch B] [--steps S] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_gemm.h"
#include "util/host_memory.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_output_layer.h"
#include "core/model.h"
#include "core/rng.h"
#include "util/parse_number.h"
#include "profiling/wall_clock.h"

enum { SAMPLES = 60000, FEATURES = 784, HIDDEN = 256, CLASSES = 10 };

/* The operations of a step, in the trainer's order. */
enum { GATHER, FORWARD_GEMM, OUTPUT_LAYER, WEIGHT_GRADIENT_GEMM, UPDATE, OPERATIONS };

static const char *const OPERATION_NAMES[OPERATIONS] = {"gather", "forward GEMM", "output layer",
                                                        "weight-gradient GEMM", "SGD update"};

typedef struct {
    int batch, steps;
    uint8_t *pixels, *labels, *batch_labels;
    int32_t *order;
    mlp_shape shape; /* 784-256-10: where W1, b1, W2 and b2 lie in params and grads */
    float *params, *grads, *velocity;
    float *x, *hidden, *hidden_delta, *scratch, *row_loss, *row_correct;
} step_data;

static void *allocate(size_t bytes) {
    return aligned_alloc_or_exit(64, bytes, "the step's data");
}

static step_data step_data_create(int batch, int steps) {
    step_data d = {.batch = batch, .steps = steps};
    rng r = rng_create(42, 0);
    d.pixels = allocate((size_t)SAMPLES * FEATURES);
    for (size_t i = 0; i < (size_t)SAMPLES * FEATURES; i++)
        d.pixels[i] = (uint8_t)(rng_below(&r, 5) == 0 ? rng_below(&r, 256) : 0); /* ~80% zero */
    d.labels = allocate(SAMPLES);
    for (int i = 0; i < SAMPLES; i++) d.labels[i] = (uint8_t)rng_below(&r, CLASSES);
    d.order = allocate(sizeof(int32_t) * SAMPLES);
    rng_permutation(&r, d.order, SAMPLES);
    d.batch_labels = allocate((size_t)batch);
    char err[128];
    if (!mlp_shape_make(&d.shape, FEATURES, (const int[]){HIDDEN}, 1, CLASSES, err, sizeof err)) {
        fprintf(stderr, "cpu_step_ops: %s\n", err);
        exit(1);
    }
    size_t count = d.shape.param_count;
    d.params = allocate(count * sizeof(float));
    d.grads = allocate(count * sizeof(float));
    d.velocity = allocate(count * sizeof(float));
    mlp_init_parameters(&d.shape, 42, d.params);
    for (size_t i = 0; i < count; i++) d.grads[i] = d.velocity[i] = 0.0f;
    d.x = allocate(sizeof(float) * batch * FEATURES);
    d.hidden = allocate(sizeof(float) * batch * HIDDEN);
    d.hidden_delta = allocate(sizeof(float) * batch * HIDDEN);
    d.scratch = allocate(sizeof(float) * cpu_output_layer_scratch_floats(batch, HIDDEN, CLASSES));
    d.row_loss = allocate(sizeof(float) * batch);
    d.row_correct = allocate(sizeof(float) * batch);
    return d;
}

static void step_data_free(step_data *d) {
    void *buffers[] = {d->pixels, d->labels, d->batch_labels, d->order, d->params, d->grads,
                       d->velocity, d->x, d->hidden, d->hidden_delta, d->scratch, d->row_loss,
                       d->row_correct};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
}

/* Operation `op` of step `step` (the batch of that step of an epoch's order). */
static void run_operation(step_data *d, int op, int step) {
    const mlp_shape *s = &d->shape;
    float *w1 = d->params + s->weight_offset[0], *b1 = d->params + s->bias_offset[0];
    float *w2 = d->params + s->weight_offset[1], *b2 = d->params + s->bias_offset[1];
    float *dw1 = d->grads + s->weight_offset[0], *db1 = d->grads + s->bias_offset[0];
    float *dw2 = d->grads + s->weight_offset[1], *db2 = d->grads + s->bias_offset[1];
    int B = d->batch, first = step % (SAMPLES / B) * B;
    switch (op) {
    case GATHER:
        cpu_gather_normalize(d->pixels, d->labels, d->order + first, B, FEATURES, 1.0f / 255, 0.0f,
                             d->x, d->batch_labels);
        break;
    case FORWARD_GEMM: {
        gemm_epilogue bias_relu = {b1, true, NULL};
        cpu_gemm_tiled_fused(false, false, B, HIDDEN, FEATURES, 1.0f, d->x, FEATURES, w1, HIDDEN,
                             0.0f, d->hidden, HIDDEN, &bias_relu);
        break;
    }
    case OUTPUT_LAYER: {
        output_layer_step step_args = {.hidden = d->hidden, .weights = w2, .bias = b2,
                               .labels = d->batch_labels, .rows = B, .in = HIDDEN,
                               .classes = CLASSES, .grad_scale = 1.0f / B, .weight_grad = dw2,
                               .bias_grad = db2, .hidden_delta = d->hidden_delta,
                               .hidden_bias_grad = db1, .row_loss = d->row_loss,
                               .row_correct = d->row_correct, .cursor = NULL};
        cpu_output_layer(&step_args, d->scratch);
        break;
    }
    case WEIGHT_GRADIENT_GEMM:
        cpu_gemm_tiled(true, false, FEATURES, HIDDEN, B, 1.0f, d->x, FEATURES, d->hidden_delta,
                       HIDDEN, 0.0f, dw1, HIDDEN);
        break;
    case UPDATE:
        cpu_sgd_momentum_step(d->params, d->velocity, d->grads, s->param_count, 0.01f, 0.9f);
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_us(double *seconds, int n) {
    qsort(seconds, (size_t)n, sizeof *seconds, compare_doubles);
    return 1e6 * seconds[n / 2];
}

/* Fills in_sequence[op][step] (the steps as the trainer runs them, after one untimed round)
 * and alone[op][step] (each operation repeated on its own). */
static void measure(step_data *d, double *in_sequence, double *alone, double *step_seconds) {
    for (int round = 0; round < 2; round++)
        for (int step = 0; step < d->steps; step++) {
            double step_start = wall_seconds();
            for (int op = 0; op < OPERATIONS; op++) {
                double start = wall_seconds();
                run_operation(d, op, step);
                in_sequence[op * d->steps + step] = wall_seconds() - start;
            }
            step_seconds[step] = wall_seconds() - step_start;
        }
    for (int op = 0; op < OPERATIONS; op++)
        for (int step = 0; step < d->steps; step++) {
            double start = wall_seconds();
            run_operation(d, op, op == GATHER ? step : 0); /* the gather's rows differ step to step */
            alone[op * d->steps + step] = wall_seconds() - start;
        }
}

/* The timed steps must be training steps: losses finite and positive, every parameter finite,
 * and the updates must have moved them from where they started. False, with a message, if
 * not: a figure for a step that does not train is no figure. */
static bool steps_trained(const step_data *d) {
    float *initial = allocate(d->shape.param_count * sizeof(float));
    mlp_init_parameters(&d->shape, 42, initial);
    size_t moved = 0, finite = 0;
    for (size_t i = 0; i < d->shape.param_count; i++) {
        moved += d->params[i] != initial[i];
        finite += isfinite(d->params[i]);
    }
    free(initial);
    double loss = 0.0;
    for (int r = 0; r < d->batch; r++) loss += d->row_loss[r];
    loss /= d->batch;
    bool ok = finite == d->shape.param_count && moved > d->shape.param_count / 2 &&
              isfinite(loss) && loss > 0.0;
    printf("check: %s (last batch's loss %.4f, %zu of %zu parameters moved, %zu finite)\n",
           ok ? "the steps trained" : "FAILED: these are not training steps", loss, moved,
           d->shape.param_count, finite);
    return ok;
}

static int usage(const char *message) {
    fprintf(stderr, "cpu_step_ops: %s\nUsage: cpu_step_ops [--threads N] [--batch B] [--steps S]\n",
            message);
    return 2;
}

int main(int argc, char **argv) {
    int threads = omp_get_max_threads(), batch = 512, steps = 117;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("Usage: cpu_step_ops [--threads N] [--batch B] [--steps S]\n"
                   "Times each operation of a CPU tiled training step (784-256-10, SGD) in\n"
                   "sequence and alone; medians in µs (docs/performance.md).\n"
                   "Defaults: all cores, batch 512, 117 steps (one epoch of 60000 samples).\n");
            return 0;
        }
        int *target = strcmp(argv[i], "--threads") == 0 ? &threads
                      : strcmp(argv[i], "--batch") == 0 ? &batch
                      : strcmp(argv[i], "--steps") == 0 ? &steps
                      : NULL;
        if (!target) return usage("unknown option");
        if (i + 1 == argc || !parse_int_in(argv[++i], 1, target == &batch ? SAMPLES : 100000, target))
            return usage("--threads, --batch and --steps want a positive whole number (batch at most 60000)");
    }
    omp_set_num_threads(threads);
    step_data d = step_data_create(batch, steps);
    double *in_sequence = allocate(sizeof(double) * OPERATIONS * steps);
    double *alone = allocate(sizeof(double) * OPERATIONS * steps);
    double *step_seconds = allocate(sizeof(double) * steps);
    measure(&d, in_sequence, alone, step_seconds);
    printf("cpu_step_ops: %d threads, batch %d, %d steps; median µs\n", threads, batch, steps);
    printf("%-22s %12s %10s %10s\n", "operation", "in sequence", "alone", "ratio");
    double sum_sequence = 0, sum_alone = 0;
    for (int op = 0; op < OPERATIONS; op++) {
        double s = median_us(in_sequence + op * steps, steps), a = median_us(alone + op * steps, steps);
        sum_sequence += s;
        sum_alone += a;
        printf("%-22s %12.1f %10.1f %9.2fx\n", OPERATION_NAMES[op], s, a, s / a);
    }
    printf("%-22s %12.1f %10.1f %9.2fx\n", "sum", sum_sequence, sum_alone, sum_sequence / sum_alone);
    printf("step (median)          %12.1f\n", median_us(step_seconds, steps));
    bool trained = steps_trained(&d);
    free(in_sequence);
    free(alone);
    free(step_seconds);
    step_data_free(&d);
    return trained ? 0 : 1;
}
