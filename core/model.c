/* The MLP's forward and backward passes, written once against the operation table. */
#include "core/model.h"
#include "util/host_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

bool mlp_shape_make(mlp_shape *shape, int inputs, const int *hidden, int hidden_count, int classes,
                    char *err, size_t err_size) {
    memset(shape, 0, sizeof *shape);
    if (hidden_count < 0 || hidden_count + 1 > MLP_MAX_LAYERS) {
        snprintf(err, err_size, "%d hidden layers; at most %d are supported", hidden_count,
                 MLP_MAX_LAYERS - 1);
        return false;
    }
    shape->layers = hidden_count + 1;
    shape->width[0] = inputs;
    for (int i = 0; i < hidden_count; i++) shape->width[i + 1] = hidden[i];
    shape->width[shape->layers] = classes;
    size_t offset = 0;
    for (int l = 0; l <= shape->layers; l++) {
        if (shape->width[l] < 1 || shape->width[l] > MLP_MAX_WIDTH) {
            snprintf(err, err_size, "layer width %d is outside 1..%d", shape->width[l],
                     MLP_MAX_WIDTH);
            return false;
        }
    }
    for (int l = 0; l < shape->layers; l++) {
        shape->weight_offset[l] = offset;
        offset += (size_t)shape->width[l] * shape->width[l + 1];
        shape->bias_offset[l] = offset;
        offset += (size_t)shape->width[l + 1];
    }
    shape->param_count = offset;
    return true;
}

bool mlp_shape_equal(const mlp_shape *a, const mlp_shape *b) {
    if (a->layers != b->layers) return false;
    for (int l = 0; l <= a->layers; l++)
        if (a->width[l] != b->width[l]) return false;
    return true;
}

void mlp_shape_format(const mlp_shape *shape, char *out, size_t out_size) {
    size_t used = 0;
    out[0] = '\0';
    for (int l = 0; l <= shape->layers && used < out_size; l++)
        used += (size_t)snprintf(out + used, out_size - used, l ? "-%d" : "%d", shape->width[l]);
}

double mlp_train_step_flops(const mlp_shape *shape, int rows) {
    double flops = 0.0;
    for (int l = 0; l < shape->layers; l++) {
        double gemm = 2.0 * rows * shape->width[l] * shape->width[l + 1];
        flops += gemm;                /* forward */
        flops += gemm;                /* weight gradient */
        if (l > 0) flops += gemm;     /* input gradient (not needed for the first layer) */
    }
    return flops;
}

void mlp_init_parameters(const mlp_shape *shape, uint64_t seed, float *host_params) {
    rng r = rng_create(seed, 1);
    for (int l = 0; l < shape->layers; l++) {
        float bound = sqrtf(6.0f / (float)shape->width[l]);
        size_t weights = (size_t)shape->width[l] * shape->width[l + 1];
        float *w = host_params + shape->weight_offset[l];
        for (size_t i = 0; i < weights; i++) w[i] = rng_uniform_range(&r, -bound, bound);
        memset(host_params + shape->bias_offset[l], 0, (size_t)shape->width[l + 1] * sizeof(float));
    }
}

static int widest_layer_after_input(const mlp_shape *shape) {
    int widest = 0;
    for (int l = 1; l <= shape->layers; l++)
        if (shape->width[l] > widest) widest = shape->width[l];
    return widest;
}

mlp_model *mlp_model_create(backend *be, const mlp_shape *shape, int max_rows) {
    mlp_model *model = zalloc_or_exit(sizeof *model, "the model");
    model->be = be;
    model->shape = *shape;
    model->max_rows = max_rows;
    size_t param_bytes = shape->param_count * sizeof(float);
    model->params = be->alloc(be, param_bytes);
    if (be->parameters_allocated) be->parameters_allocated(be, model->params, shape->param_count);
    model->grads = be->alloc(be, param_bytes);
    for (int l = 0; l < shape->layers; l++)
        model->activations[l] =
            be->alloc(be, (size_t)max_rows * shape->width[l + 1] * sizeof(float));
    size_t delta_bytes = (size_t)max_rows * widest_layer_after_input(shape) * sizeof(float);
    model->deltas[0] = be->alloc(be, delta_bytes);
    model->deltas[1] = be->alloc(be, delta_bytes);
    model->output_layer_fused =
        shape->layers >= 2 && be->output_layer_prepare &&
        be->output_layer_prepare(be, max_rows, shape->width[shape->layers - 1],
                                 shape->width[shape->layers]);
    return model;
}

void mlp_model_destroy(mlp_model *model) {
    if (!model) return;
    backend *be = model->be;
    be->release(be, model->params);
    be->release(be, model->grads);
    for (int l = 0; l < model->shape.layers; l++) be->release(be, model->activations[l]);
    be->release(be, model->deltas[0]);
    be->release(be, model->deltas[1]);
    free(model);
}

/* Layers [0, layers) of the forward pass, from x (rows × width[0]). */
static void forward_layers(mlp_model *model, const float *x, int rows, int layers) {
    backend *be = model->be;
    const mlp_shape *s = &model->shape;
    const float *input = x;
    for (int l = 0; l < layers; l++) {
        int in = s->width[l], out = s->width[l + 1];
        float *z = model->activations[l];
        /* Z (rows×out) = input (rows×in) · W_l (in×out) + b_l, through the ReLU unless last */
        gemm_epilogue bias_activation = {model->params + s->bias_offset[l], l < s->layers - 1, NULL};
        be->gemm(be, false, false, rows, out, in, 1.0f, input, in,
                 model->params + s->weight_offset[l], out, 0.0f, z, out, &bias_activation);
        input = z;
    }
}

void mlp_forward(mlp_model *model, const float *x, int rows) {
    forward_layers(model, x, rows, model->shape.layers);
}

void mlp_loss(mlp_model *model, const uint8_t *labels, int rows, const pass_metrics *metrics,
              const pass_cursor *cursor) {
    const mlp_shape *s = &model->shape;
    model->be->softmax_cross_entropy(model->be, model->activations[s->layers - 1], labels, rows,
                                     s->width[s->layers], 1.0f, 0.0f, NULL, NULL, metrics->row_loss,
                                     metrics->row_correct, metrics->prediction, cursor);
}

/* The output layer (forward and backward) in one backend operation; see output_layer_fused. */
static void fused_output_layer(mlp_model *model, const uint8_t *labels, int rows, float grad_scale,
                               const pass_metrics *metrics, const pass_cursor *cursor) {
    const mlp_shape *s = &model->shape;
    int last = s->layers - 1;
    output_layer_step step = {
        .hidden = model->activations[last - 1],
        .weights = model->params + s->weight_offset[last],
        .bias = model->params + s->bias_offset[last],
        .labels = labels,
        .rows = rows,
        .in = s->width[last],
        .classes = s->width[last + 1],
        .grad_scale = grad_scale,
        .label_smoothing = model->label_smoothing,
        .weight_grad = model->grads + s->weight_offset[last],
        .bias_grad = model->grads + s->bias_offset[last],
        .hidden_delta = model->deltas[(last - 1) % 2],
        .hidden_bias_grad = model->grads + s->bias_offset[last - 1],
        .row_loss = metrics->row_loss,
        .row_correct = metrics->row_correct,
        .cursor = cursor,
    };
    model->be->output_layer(model->be, &step);
}

void mlp_forward_loss(mlp_model *model, const float *x, const uint8_t *labels, int rows,
                      int batch_rows, const pass_metrics *metrics, const pass_cursor *cursor) {
    const mlp_shape *s = &model->shape;
    int last = s->layers - 1;
    float grad_scale = 1.0f / (float)batch_rows;
    if (rows > model->max_rows) { /* the buffers, and output_layer_prepare's scratch, hold max_rows */
        fprintf(stderr, "mlp_train: internal error: a batch of %d rows, but the model holds %d\n",
                rows, model->max_rows);
        exit(1);
    }
    if (model->output_layer_fused) {
        forward_layers(model, x, rows, last);
        fused_output_layer(model, labels, rows, grad_scale, metrics, cursor);
        return;
    }
    forward_layers(model, x, rows, s->layers);
    model->be->softmax_cross_entropy(model->be, model->activations[last], labels, rows,
                                     s->width[s->layers], grad_scale, model->label_smoothing,
                                     model->deltas[last % 2],
                                     model->grads + s->bias_offset[last], metrics->row_loss,
                                     metrics->row_correct, metrics->prediction, cursor);
}

/* The backward pass's sums across the ranks (early_reduce_floats): the layers whose gradients
 * are complete and whose sum has not started are l, l + 1, ...: one span of the flat layout
 * (W_l, b_l, W_l+1, ...) from weight_offset[l] to `end`. */
typedef struct {
    size_t end;
    int started; /* sums started before the pass's end */
} early_reduces;

/* Layer l's gradient is complete: whether to start the sum of the layers complete and not yet
 * summed, [weight_offset[l], r->end): where they hold enough, or where l is the first layer and
 * sums were started before it. If so, *count gets its length and r moves on. */
static bool sum_ready(const mlp_model *model, early_reduces *r, int l, size_t *count) {
    if (!model->early_reduce_floats) return false;
    size_t begin = model->shape.weight_offset[l];
    bool early = l > 0 && r->end - begin >= model->early_reduce_floats;
    if (!early && !(l == 0 && r->started)) return false;
    *count = r->end - begin;
    r->end = begin;
    r->started += early;
    return true;
}

static void layer_complete(mlp_model *model, early_reduces *r, int l) {
    size_t count;
    if (sum_ready(model, r, l, &count))
        model->be->all_reduce_start(model->be, model->grads + model->shape.weight_offset[l], count);
}

int mlp_reduces_early(const mlp_model *model) {
    early_reduces r = {model->shape.param_count, 0};
    size_t count;
    for (int l = model->shape.layers - 1; l >= 0; l--) sum_ready(model, &r, l, &count);
    return r.started;
}

void mlp_backward(mlp_model *model, const float *x, int rows) {
    backend *be = model->be;
    const mlp_shape *s = &model->shape;
    /* The loss left the output layer's delta and bias gradient; a fused output layer left all of
     * its gradients, and the delta and bias gradient of the layer below it. */
    int top = s->layers - 1 - (model->output_layer_fused ? 1 : 0);
    early_reduces reduces = {s->param_count, 0};
    if (model->output_layer_fused) layer_complete(model, &reduces, s->layers - 1);
    for (int l = top; l >= 0; l--) {
        int in = s->width[l], out = s->width[l + 1];
        const float *input = l == 0 ? x : model->activations[l - 1];
        const float *delta = model->deltas[l % 2]; /* dLoss/dZ_l, rows×out */
        /* dW_l (in×out) = input^T (in×rows) · delta (rows×out) */
        be->gemm(be, true, false, in, out, rows, 1.0f, input, in, delta, out, 0.0f,
                 model->grads + s->weight_offset[l], out, NULL);
        /* db_l (out) = column sums of delta, unless it came with the loss */
        if (l < top) be->column_sums(be, delta, rows, out, model->grads + s->bias_offset[l]);
        layer_complete(model, &reduces, l);
        if (l == 0) break;
        /* dZ_{l-1} (rows×in) = delta (rows×out) · W_l^T (out×in), zero where the ReLU was */
        float *input_delta = model->deltas[(l - 1) % 2];
        gemm_epilogue relu_backward = {NULL, false, model->activations[l - 1]};
        be->gemm(be, false, true, rows, in, out, 1.0f, delta, out,
                 model->params + s->weight_offset[l], out, 0.0f, input_delta, in, &relu_backward);
    }
}
