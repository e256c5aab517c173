/* A double-precision reference for the output layer of a training step (backend.h,
 * output_layer_step), and the comparison of a result with it: shared by the CPU and GPU tests. */
#ifndef MLP_OUTPUT_LAYER_REFERENCE_H
#define MLP_OUTPUT_LAYER_REFERENCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rows, in, classes;
    /* what each output should be, and the size of the terms that make it (the sum of their
     * absolute values), so that cancellation cannot make a correct result look wrong */
    double *loss, *weight_grad, *bias_grad, *hidden_delta, *hidden_bias_grad;
    double *weight_size, *bias_size, *delta_size, *hidden_bias_size;
    float *correct;
    double *top_gap; /* per row: best logit minus the runner-up (a near tie may flip) */
} output_layer_reference;

/* The label-smoothed loss also sums target[c]·(logit[c] - max) over the classes in float: at
 * most `classes` roundings (2^-24 relative each) of a partial sum no larger than the logits'
 * range (largest minus smallest), `range`. A bound for one float sum against the exact one. */
static inline double smoothed_loss_rounding(int classes, double range) {
    return classes * range * 0x1p-24;
}

/* h is rows×in, w in×classes, b classes; grad_scale and smoothing as output_layer_step's
 * grad_scale and label_smoothing. */
void output_layer_reference_compute(output_layer_reference *ref, const float *h, const float *w,
                                    const float *b, const uint8_t *labels, int rows, int in,
                                    int classes, double grad_scale, double smoothing);
void output_layer_reference_free(output_layer_reference *ref);

/* Each output's ‖got − want‖ / ‖size‖ (the loss: relative to 1 a row), infinite where anything
 * is NaN (an unwritten, poisoned element); and the rows whose correctness differs from the
 * reference's where its top two logits are more than 1e-4 apart. */
typedef struct {
    double loss, weight_grad, bias_grad, hidden_delta, hidden_bias_grad;
    int flipped;
} output_layer_errors;

output_layer_errors output_layer_compare(const output_layer_reference *ref, const float *loss,
                                         const float *correct, const float *weight_grad,
                                         const float *bias_grad, const float *hidden_delta,
                                         const float *hidden_bias_grad);

/* The largest of the five errors. */
double output_layer_worst_error(const output_layer_errors *e);

#ifdef __cplusplus
}
#endif

#endif
