/* CPU operations other than GEMM; see cpu_ops.h. */
#include "cpu_ops.h"

#include <math.h>

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

void cpu_bias_activation(float *z, const float *bias, int rows, int cols, int ldz, bool relu) {
#pragma omp parallel for if ((long)rows * cols >= PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++) {
        float *row = z + (size_t)r * ldz;
        for (int c = 0; c < cols; c++) {
            float value = bias ? row[c] + bias[c] : row[c];
            row[c] = (relu && value < 0.0f) ? 0.0f : value;
        }
    }
}

void cpu_relu_backward(float *grad, const float *activation, int rows, int cols, int ld) {
#pragma omp parallel for if ((long)rows * cols >= PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            if (activation[(size_t)r * ld + c] <= 0.0f) grad[(size_t)r * ld + c] = 0.0f;
}

/* One row: subtract the maximum before exponentiating, so logits of ±1e4 stay finite. */
static void softmax_cross_entropy_row(const float *logits, int label, int classes, float grad_scale,
                                      float *grad, float *loss, float *correct, int32_t *prediction) {
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (logits[c] > logits[best]) best = c;
    float max = logits[best];
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) sum += expf(logits[c] - max);
    float log_sum = logf(sum);
    *loss = log_sum - (logits[label] - max);
    *correct = (best == label) ? 1.0f : 0.0f;
    if (prediction) *prediction = best;
    if (grad) {
        for (int c = 0; c < classes; c++) {
            float probability = expf(logits[c] - max - log_sum);
            grad[c] = grad_scale * (probability - (c == label ? 1.0f : 0.0f));
        }
    }
}

void cpu_softmax_cross_entropy(const float *logits, const uint8_t *labels, int rows, int classes,
                               float grad_scale, float *grad, float *row_loss, float *row_correct,
                               int32_t *prediction) {
#pragma omp parallel for if ((long)rows * classes >= PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++) {
        size_t offset = (size_t)r * classes;
        softmax_cross_entropy_row(logits + offset, labels[r], classes, grad_scale,
                                  grad ? grad + offset : NULL, &row_loss[r], &row_correct[r],
                                  prediction ? &prediction[r] : NULL);
    }
}

void cpu_column_sums(const float *matrix, int rows, int cols, float *sums) {
    for (int c = 0; c < cols; c++) sums[c] = 0.0f;
    for (int r = 0; r < rows; r++) {
        const float *row = matrix + (size_t)r * cols;
        for (int c = 0; c < cols; c++) sums[c] += row[c];
    }
}

float cpu_sum(const float *x, size_t n) {
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += x[i];
    return (float)total;
}

void cpu_sgd_momentum_step(float *param, float *velocity, const float *grad, size_t n, float lr,
                           float momentum) {
#pragma omp parallel for if (n >= PARALLEL_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        velocity[i] = momentum * velocity[i] + grad[i];
        param[i] -= lr * velocity[i];
    }
}

void cpu_adam_step(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                   float beta1, float beta2, float eps, int step) {
    float m_correction = (float)(1.0 / (1.0 - pow(beta1, step)));
    float v_correction = (float)(1.0 / (1.0 - pow(beta2, step)));
#pragma omp parallel for if (n >= PARALLEL_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
        float m_hat = m[i] * m_correction;
        float v_hat = v[i] * v_correction;
        param[i] -= lr * m_hat / (sqrtf(v_hat) + eps);
    }
}

void cpu_gather_normalize(const uint8_t *pixels, const uint8_t *labels, const int32_t *indices,
                          int rows, int features, float scale, float shift, float *x, uint8_t *y) {
#pragma omp parallel for if ((long)rows * features >= PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++) {
        const uint8_t *source = pixels + (size_t)indices[r] * features;
        float *destination = x + (size_t)r * features;
        for (int f = 0; f < features; f++) destination[f] = source[f] * scale + shift;
        y[r] = labels[indices[r]];
    }
}
