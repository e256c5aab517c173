/* The output layer in double precision, row by row; see output_layer_reference.h. */
#include "output_layer_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void *zeroed(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* The row's logits into z; returns the index of the first maximum, its gap to the runner-up in
 * *gap, and log(sum of exp(z − max)) in *log_sum. */
static int row_logits(const float *h, const float *w, const float *b, int in, int classes,
                      double *z, double *gap, double *log_sum) {
    for (int c = 0; c < classes; c++) {
        z[c] = b[c];
        for (int k = 0; k < in; k++) z[c] += (double)h[k] * w[(size_t)k * classes + c];
    }
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (z[c] > z[best]) best = c;
    double runner_up = -INFINITY, sum = 0;
    for (int c = 0; c < classes; c++) {
        if (c != best) runner_up = fmax(runner_up, z[c]);
        sum += exp(z[c] - z[best]);
    }
    *gap = z[best] - runner_up;
    *log_sum = log(sum);
    return best;
}

void output_layer_reference_compute(output_layer_reference *ref, const float *h, const float *w,
                                    const float *b, const uint8_t *labels, int rows, int in,
                                    int classes, double grad_scale, double smoothing) {
    size_t weights = (size_t)in * classes, deltas = (size_t)rows * in;
    *ref = (output_layer_reference){.rows = rows, .in = in, .classes = classes};
    ref->loss = zeroed(rows, sizeof(double));
    ref->correct = zeroed(rows, sizeof(float));
    ref->top_gap = zeroed(rows, sizeof(double));
    ref->weight_grad = zeroed(weights, sizeof(double));
    ref->weight_size = zeroed(weights, sizeof(double));
    ref->bias_grad = zeroed(classes, sizeof(double));
    ref->bias_size = zeroed(classes, sizeof(double));
    ref->hidden_delta = zeroed(deltas, sizeof(double));
    ref->delta_size = zeroed(deltas, sizeof(double));
    ref->hidden_bias_grad = zeroed(in, sizeof(double));
    ref->hidden_bias_size = zeroed(in, sizeof(double));
    double *z = zeroed(classes, sizeof(double)), *dl = zeroed(classes, sizeof(double));
    for (int r = 0; r < rows; r++) {
        const float *hr = h + (size_t)r * in;
        double log_sum;
        int best = row_logits(hr, w, b, in, classes, z, &ref->top_gap[r], &log_sum);
        ref->loss[r] = log_sum;
        ref->correct[r] = best == labels[r] ? 1.0f : 0.0f;
        for (int c = 0; c < classes; c++) {
            double target = (c == labels[r] ? 1.0 - smoothing : 0.0) + smoothing / classes;
            ref->loss[r] -= target * (z[c] - z[best]);
            dl[c] = grad_scale * (exp(z[c] - z[best] - log_sum) - target);
            ref->bias_grad[c] += dl[c];
            ref->bias_size[c] += fabs(dl[c]);
        }
        for (int k = 0; k < in; k++) {
            double d = 0, size = 0;
            for (int c = 0; c < classes; c++) {
                size_t kc = (size_t)k * classes + c;
                d += dl[c] * w[kc];
                size += fabs(dl[c] * w[kc]);
                ref->weight_grad[kc] += hr[k] * dl[c];
                ref->weight_size[kc] += fabs(hr[k] * dl[c]);
            }
            if (hr[k] <= 0) d = 0;
            ref->hidden_delta[(size_t)r * in + k] = d;
            ref->delta_size[(size_t)r * in + k] = size;
            ref->hidden_bias_grad[k] += d;
            ref->hidden_bias_size[k] += size;
        }
    }
    free(z);
    free(dl);
}

void output_layer_reference_free(output_layer_reference *ref) {
    double *arrays[] = {ref->loss, ref->top_gap, ref->weight_grad, ref->weight_size,
                        ref->bias_grad, ref->bias_size, ref->hidden_delta, ref->delta_size,
                        ref->hidden_bias_grad, ref->hidden_bias_size};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    free(ref->correct);
}

/* ‖got − want‖ / ‖size‖ (size NULL: 1 each); infinite if got holds a NaN. */
static double scaled_error(const float *got, const double *want, const double *size, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += size ? size[i] * size[i] : 1.0;
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

output_layer_errors output_layer_compare(const output_layer_reference *ref, const float *loss,
                                         const float *correct, const float *weight_grad,
                                         const float *bias_grad, const float *hidden_delta,
                                         const float *hidden_bias_grad) {
    size_t weights = (size_t)ref->in * ref->classes, deltas = (size_t)ref->rows * ref->in;
    output_layer_errors e = {
        scaled_error(loss, ref->loss, NULL, ref->rows),
        scaled_error(weight_grad, ref->weight_grad, ref->weight_size, weights),
        scaled_error(bias_grad, ref->bias_grad, ref->bias_size, ref->classes),
        scaled_error(hidden_delta, ref->hidden_delta, ref->delta_size, deltas),
        scaled_error(hidden_bias_grad, ref->hidden_bias_grad, ref->hidden_bias_size, ref->in),
        0,
    };
    for (int r = 0; r < ref->rows; r++)
        if (correct[r] != ref->correct[r] && ref->top_gap[r] > 1e-4) e.flipped++;
    return e;
}

double output_layer_worst_error(const output_layer_errors *e) {
    double errors[] = {e->loss, e->weight_grad, e->bias_grad, e->hidden_delta, e->hidden_bias_grad};
    double worst = 0;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) worst = fmax(worst, errors[i]);
    return worst;
}
