/* Whole-model checks; see model_checks.h. */
#include "model_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dataset.h"
#include "core/model.h"
#include "core/rng.h"
#include "core/trainer.h"

double relative_difference(const float *a, const float *b, size_t n) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        norm += (double)b[i] * b[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ---- gradient check ---- */

enum { CHECK_ROWS = 6, CHECK_INPUTS = 13, CHECK_CLASSES = 5 };

typedef struct {
    backend *be;
    mlp_model *model;
    float *x;              /* CHECK_ROWS × CHECK_INPUTS on the backend */
    uint8_t *labels;       /* on the backend */
    pass_metrics metrics;  /* on the backend, CHECK_ROWS each */
} check_setup;

/* The objective whose gradient is checked, of the model with parameters `params` (host): the
 * training step's mean loss (with the model's label smoothing), computed on the backend, plus
 * weight_decay / 2 times the sum of the weights' squares (not the biases'). */
static double objective(check_setup *s, const float *params, float weight_decay) {
    backend *be = s->be;
    const mlp_shape *shape = &s->model->shape;
    float losses[CHECK_ROWS];
    be->upload(be, s->model->params, params, shape->param_count * sizeof(float));
    mlp_forward_loss(s->model, s->x, s->labels, CHECK_ROWS, CHECK_ROWS, &s->metrics, NULL);
    be->download(be, losses, s->metrics.row_loss, sizeof losses);
    double total = 0.0, squares = 0.0;
    for (int r = 0; r < CHECK_ROWS; r++) total += losses[r];
    for (int l = 0; l < shape->layers; l++)
        for (size_t i = 0; i < (size_t)shape->width[l] * shape->width[l + 1]; i++)
            squares += (double)params[shape->weight_offset[l] + i] * params[shape->weight_offset[l] + i];
    return total / CHECK_ROWS + 0.5 * weight_decay * squares;
}

static void analytic_gradient(check_setup *s, const float *params, float *grads) {
    backend *be = s->be;
    size_t n = s->model->shape.param_count;
    be->upload(be, s->model->params, params, n * sizeof(float));
    mlp_forward_loss(s->model, s->x, s->labels, CHECK_ROWS, CHECK_ROWS, &s->metrics, NULL);
    mlp_backward(s->model, s->x, CHECK_ROWS);
    be->download(be, grads, s->model->grads, n * sizeof(float));
}

/* The gradient as one update of the backend's SGD (no momentum, zero velocity, rate
 * DESCENT_RATE) with decoupled weight decay moves the parameters: (params - after) / rate.
 * For plain SGD, decay at rate wd is a step down the gradient of wd / 2 · |weights|². */
#define DESCENT_RATE 0.1f
static void gradient_of_one_update(check_setup *s, const float *params, float weight_decay,
                                   float *grads) {
    backend *be = s->be;
    const mlp_shape *shape = &s->model->shape;
    size_t n = shape->param_count;
    optimizer_config config = {.kind = OPTIMIZER_SGD, .lr = DESCENT_RATE, .momentum = 0.0f,
                               .weight_decay = weight_decay};
    optimizer *opt = optimizer_create(be, config, shape);
    pass_cursor *cursor = be->alloc(be, sizeof(pass_cursor));
    be->upload(be, cursor, &(pass_cursor){0, 0}, sizeof(pass_cursor));
    analytic_gradient(s, params, grads); /* leaves params in the model */
    optimizer_step(opt, s->model->params, s->model->grads, cursor, CHECK_ROWS);
    be->download(be, grads, s->model->params, n * sizeof(float));
    for (size_t i = 0; i < n; i++) grads[i] = (float)(((double)params[i] - grads[i]) / DESCENT_RATE);
    be->release(be, cursor);
    optimizer_destroy(opt);
}

/* The smallest |pre-activation| of any hidden unit on any row, computed on the host in double.
 * Central differences are only valid away from ReLU's kink at 0. */
static double closest_to_kink(const mlp_shape *shape, const float *params, const float *x) {
    double closest = INFINITY;
    double input[64], output[64];
    for (int r = 0; r < CHECK_ROWS; r++) {
        for (int i = 0; i < shape->width[0]; i++) input[i] = x[r * shape->width[0] + i];
        for (int l = 0; l < shape->layers - 1; l++) {
            int in = shape->width[l], out = shape->width[l + 1];
            for (int j = 0; j < out; j++) {
                double z = params[shape->bias_offset[l] + j];
                for (int i = 0; i < in; i++) z += input[i] * params[shape->weight_offset[l] + i * out + j];
                closest = fmin(closest, fabs(z));
                output[j] = z > 0 ? z : 0;
            }
            memcpy(input, output, sizeof output);
        }
    }
    return closest;
}

/* Random parameters (with non-zero biases, so they matter), inputs and labels, drawn again
 * until no hidden pre-activation is within KINK_MARGIN of zero: a step of 1e-3 in one parameter
 * moves a pre-activation by far less than that, so no difference straddles the kink. */
#define KINK_MARGIN 0.02
static void draw_check_problem(const mlp_shape *shape, uint64_t seed, float *params, float *x,
                               uint8_t *labels) {
    rng r = rng_create(seed, 7);
    do {
        mlp_init_parameters(shape, rng_next_u32(&r), params);
        for (int l = 0; l < shape->layers; l++)
            for (int i = 0; i < shape->width[l + 1]; i++)
                params[shape->bias_offset[l] + i] = rng_uniform_range(&r, -0.2f, 0.2f);
        for (int i = 0; i < CHECK_ROWS * CHECK_INPUTS; i++) x[i] = rng_uniform_range(&r, -1.0f, 1.0f);
        for (int i = 0; i < CHECK_ROWS; i++) labels[i] = (uint8_t)rng_below(&r, CHECK_CLASSES);
    } while (closest_to_kink(shape, params, x) < KINK_MARGIN);
}

double gradient_check_error(backend *be, uint64_t seed, float scale_analytic,
                            gradient_check_options options) {
    mlp_shape shape;
    char err[256];
    if (!mlp_shape_make(&shape, CHECK_INPUTS, (const int[]){9, 7}, 2, CHECK_CLASSES, err, sizeof err)) {
        fprintf(stderr, "gradient check: %s\n", err);
        return INFINITY;
    }
    size_t n = shape.param_count;
    float *params = malloc(n * sizeof(float)), *analytic = malloc(n * sizeof(float));
    float x[CHECK_ROWS * CHECK_INPUTS];
    uint8_t labels[CHECK_ROWS];
    draw_check_problem(&shape, seed, params, x, labels);

    check_setup s = {be, mlp_model_create(be, &shape, CHECK_ROWS), be->alloc(be, sizeof x),
                     be->alloc(be, sizeof labels),
                     {be->alloc(be, CHECK_ROWS * sizeof(float)),
                      be->alloc(be, CHECK_ROWS * sizeof(float)), NULL}};
    be->upload(be, s.x, x, sizeof x);
    be->upload(be, s.labels, labels, sizeof labels);
    s.model->label_smoothing = options.label_smoothing;
    if (options.weight_decay != 0.0f)
        gradient_of_one_update(&s, params, options.weight_decay, analytic);
    else
        analytic_gradient(&s, params, analytic);

    const float step = 1e-3f;
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        float saved = params[i];
        params[i] = saved + step;
        double up = objective(&s, params, options.weight_decay);
        params[i] = saved - step;
        double down = objective(&s, params, options.weight_decay);
        params[i] = saved;
        double numeric = (up - down) / (2.0 * step);
        double a = (double)analytic[i] * scale_analytic;
        diff += (a - numeric) * (a - numeric);
        norm += numeric * numeric;
    }
    mlp_model_destroy(s.model);
    be->release(be, s.x);
    be->release(be, s.labels);
    be->release(be, s.metrics.row_loss);
    be->release(be, s.metrics.row_correct);
    free(params);
    free(analytic);
    return sqrt(diff / norm);
}

/* ---- short training runs on synthetic data ---- */

enum { SYNTHETIC_SIDE = 8, SYNTHETIC_TEST = 300 };

void synthetic_dataset(dataset *d, int count, uint64_t seed) {
    rng r = rng_create(seed, 11);
    memset(d, 0, sizeof *d);
    d->count = count;
    d->image_rows = d->image_cols = SYNTHETIC_SIDE;
    d->features = SYNTHETIC_SIDE * SYNTHETIC_SIDE;
    d->pixels = malloc((size_t)count * d->features);
    d->labels = malloc((size_t)count);
    for (int i = 0; i < count; i++) {
        uint8_t *image = d->pixels + (size_t)i * d->features;
        int best_row = 0, best_sum = -1;
        for (int row = 0; row < SYNTHETIC_SIDE; row++) {
            int sum = 0;
            for (int col = 0; col < SYNTHETIC_SIDE; col++) {
                image[row * SYNTHETIC_SIDE + col] = (uint8_t)rng_below(&r, 256);
                sum += image[row * SYNTHETIC_SIDE + col];
            }
            if (sum > best_sum) best_sum = sum, best_row = row;
        }
        d->labels[i] = (uint8_t)best_row;
    }
    d->scale = 1.0f / 255.0f;
    d->shift = -0.5f;
}

float *train_synthetic(backend *be, const synthetic_run *run, size_t *count,
                       synthetic_result *out) {
    dataset train, test;
    int samples = run->samples > 0 ? run->samples : run->steps * run->batch - run->batch / 3;
    synthetic_dataset(&train, samples, run->seed);
    synthetic_dataset(&test, SYNTHETIC_TEST, run->seed + 1);
    mlp_shape shape;
    char err[256];
    int hidden[3] = {32, 16, 16};
    if (run->hidden > 0) hidden[0] = run->hidden;
    int hidden_layers = run->hidden > 0 ? 1 : run->deep ? 3 : 2;
    mlp_shape_make(&shape, train.features, hidden, hidden_layers, DATASET_CLASSES, err, sizeof err);
    float *initial = malloc(shape.param_count * sizeof(float));
    mlp_init_parameters(&shape, run->seed, initial);
    train_config config = {
        .batch = run->batch,
        .seed = run->seed,
        .optimizer = {.kind = run->optimizer,
                      .lr = run->optimizer == OPTIMIZER_ADAM ? 0.003f : 0.05f,
                      .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                      .weight_decay = run->regularized ? REGULARIZATION_WEIGHT_DECAY : 0.0f},
        .label_smoothing = run->regularized ? REGULARIZATION_LABEL_SMOOTHING : 0.0f,
        .feed = run->feed,
        .record_steps = run->record_steps,
        .overlap_all_reduce_floats = run->overlap_all_reduce ? 1 : 0,
        .shard_update = run->shard_update,
        .profile = run->profile,
    };
    trainer *t = trainer_create(be, &shape, &train, &test, &config, initial, NULL, 0, 0);
    double initial_accuracy;
    long confusion[DATASET_CLASSES][DATASET_CLASSES];
    trainer_evaluate(t, &out->initial_test_loss, &initial_accuracy, confusion);
    epoch_result result;
    int epoch_count = run->epochs > 0 ? run->epochs : 1;
    for (int e = 0; e < epoch_count; e++) {
        if (!trainer_run_epoch(t, epoch_count, &result, err, sizeof err)) {
            /* what the callers compare would be garbage: the test fails here */
            fprintf(stderr, "FAIL train_synthetic on %s %s: %s\n", be->device_name, be->impl_name,
                    err);
            exit(1);
        }
    }
    out->pass_mode = trainer_pass_mode(t);
    out->all_reduces_early = trainer_all_reduces_early(t);
    out->update_sharded = trainer_update_sharded(t);
    out->train_loss = result.train_loss;
    out->test_loss = result.test_loss;
    out->test_accuracy = result.test_accuracy;
    float *params, *state;
    int arrays, step, epochs;
    trainer_export(t, &params, &state, &arrays, &step, &epochs);
    *count = shape.param_count;
    trainer_destroy(t);
    free(state);
    free(initial);
    dataset_free(&train);
    dataset_free(&test);
    return params;
}
