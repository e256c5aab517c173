/* The multi-layer perceptron: shapes, parameter layout, and forward/backward through the
 * operation table of backend.h. Hidden layers use ReLU; the output layer feeds softmax
 * cross-entropy. */
#ifndef MLP_MODEL_H
#define MLP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"

#define MLP_MAX_LAYERS 16     /* weight layers, i.e. hidden layers + 1 */
#define MLP_MAX_WIDTH 65536   /* widest layer accepted */

/* Parameters live in one flat array so one optimizer call updates them all. For layer l:
 * W_l is width[l] × width[l+1] row-major at weight_offset[l]; b_l has width[l+1] at bias_offset[l]. */
typedef struct mlp_shape {
    int layers;
    int width[MLP_MAX_LAYERS + 1]; /* width[0] = inputs, width[layers] = classes */
    size_t weight_offset[MLP_MAX_LAYERS];
    size_t bias_offset[MLP_MAX_LAYERS];
    size_t param_count;
} mlp_shape;

/* inputs-hidden[0]-...-classes. False, with a message in err, for no or too many layers or a bad width. */
bool mlp_shape_make(mlp_shape *shape, int inputs, const int *hidden, int hidden_count, int classes,
                    char *err, size_t err_size);

bool mlp_shape_equal(const mlp_shape *a, const mlp_shape *b);

/* "784-256-10" */
void mlp_shape_format(const mlp_shape *shape, char *out, size_t out_size);

/* Floating-point operations of one training step on `rows` samples (forward, backward, update). */
double mlp_train_step_flops(const mlp_shape *shape, int rows);

/* He-uniform weights, W ~ U(-sqrt(6/fan_in), +sqrt(6/fan_in)), zero biases, from the project's
 * generator: the same seed gives the same host_params on every machine. */
void mlp_init_parameters(const mlp_shape *shape, uint64_t seed, float *host_params);

/* A model on one backend, with buffers for batches of up to max_rows samples. */
typedef struct {
    backend *be;
    mlp_shape shape;
    int max_rows;
    float *params;                         /* param_count */
    float *grads;                          /* param_count, same layout */
    float *activations[MLP_MAX_LAYERS];    /* layer l's output: max_rows × width[l+1]; last = logits */
    float *deltas[2];                      /* gradient w.r.t. a layer's pre-activation, ping-pong */
    /* The backend runs a training step's output layer, forward and backward, in one operation
     * (backend.h, output_layer): a hidden layer's delta and bias gradient come with the loss. */
    bool output_layer_fused;
    float label_smoothing; /* of mlp_forward_loss's loss (label_smoothing.h); 0 from create */
    /* Among ranks (backend.h, all_reduce_start): mlp_backward starts the sum of the layers whose
     * gradients are complete, beside the rest of the backward pass, as soon as they hold at least
     * early_reduce_floats floats (the layers of a smaller sum wait for the layers below them),
     * and then the sum of the rest at its end; 0 (from create): never, and the caller sums the
     * whole gradient after it. */
    size_t early_reduce_floats;
} mlp_model;

mlp_model *mlp_model_create(backend *be, const mlp_shape *shape, int max_rows);
void mlp_model_destroy(mlp_model *model);

/* x is rows × width[0]. Leaves the logits in activations[layers - 1]. */
void mlp_forward(mlp_model *model, const float *x, int rows);

/* Where a pass's per-sample results go (each indexed by the sample's place in the pass). */
typedef struct {
    float *row_loss;     /* NULL (with row_correct): not wanted (--no-train-metrics) */
    float *row_correct;
    int32_t *prediction; /* NULL: not wanted */
} pass_metrics;

/* Softmax cross-entropy of the logits (mlp_forward's) against labels: each row's loss and
 * correctness (and prediction) into metrics, at the rows starting at cursor->first_row (0 if
 * cursor is NULL). For evaluation: no gradient, and the plain loss (no label smoothing). */
void mlp_loss(mlp_model *model, const uint8_t *labels, int rows, const pass_metrics *metrics,
              const pass_cursor *cursor);

/* A training step's forward pass and loss: the metrics as mlp_loss writes them (the loss with
 * model->label_smoothing's target), and the gradient w.r.t. the logits of the rows' summed
 * loss divided by batch_rows, kept for mlp_backward, with
 * the output layer's bias gradient. That is the gradient of the batch's mean loss when
 * batch_rows == rows; when these rows are one rank's share of a batch of batch_rows rows, the
 * ranks' gradients add up to it. Where the output layer is fused (output_layer_fused), the
 * logits are not stored, and the output layer's backward comes here too. */
void mlp_forward_loss(mlp_model *model, const float *x, const uint8_t *labels, int rows,
                      int batch_rows, const pass_metrics *metrics, const pass_cursor *cursor);

/* Gradients of mlp_forward_loss's loss w.r.t. every parameter into model->grads (overwritten,
 * not added), from what mlp_forward_loss left (so that call comes first); summed across the
 * ranks as well where mlp_reduces_early says so (the caller then calls all_reduce_finish). */
void mlp_backward(mlp_model *model, const float *x, int rows);

/* How many sums across the ranks mlp_backward starts before its end (early_reduce_floats); where
 * it starts any, it starts the rest's too. 0: it starts none. */
int mlp_reduces_early(const mlp_model *model);

#endif
