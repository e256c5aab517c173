/* The CPU versions of every operation of the table in backend.h except GEMM: plain loops,
 * OpenMP over rows or elements where the work is large enough to pay for a parallel region.
 * All three CPU implementations use them, and the GPU tests use them as the reference.
 * Contracts are those of backend.h; they take host pointers and no backend. */
#ifndef MLP_CPU_OPS_H
#define MLP_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/label_smoothing.h"

#ifdef __cplusplus
extern "C" {
#endif

/* z is rows×cols with row stride ldz: z += bias (cols floats, broadcast over rows; NULL: none),
 * then z = max(z, 0) if relu. The unfused form of a GEMM's bias and ReLU epilogue. */
void cpu_bias_activation(float *z, const float *bias, int rows, int cols, int ldz, bool relu);

/* grad = 0 where activation <= 0; both rows×cols with row stride ld (activation is the ReLU's
 * output). The unfused form of a GEMM's relu_mask epilogue. */
void cpu_relu_backward(float *grad, const float *activation, int rows, int cols, int ld);

/* One row of cpu_softmax_cross_entropy: its loss into loss, its correctness into correct, the
 * gradient (grad_scale · (softmax − target), targets being label_targets of the smoothing:
 * label_smoothing.h) into grad and the first maximum's index into prediction; each of the four
 * skipped if NULL. */
void cpu_softmax_cross_entropy_row(const float *logits, int label, int classes, float grad_scale,
                                   smoothed_targets targets, float *grad, float *loss,
                                   float *correct, int32_t *prediction);

/* The rows of logits (rows×classes) through cpu_softmax_cross_entropy_row, row r's results at
 * grad's row r and at row_loss[r], row_correct[r], prediction[r] (each array skipped if NULL). */
void cpu_softmax_cross_entropy(const float *logits, const uint8_t *labels, int rows, int classes,
                               float grad_scale, float smoothing, float *grad, float *row_loss,
                               float *row_correct, int32_t *prediction);

/* Each column summed in row order, so the result does not depend on the thread count. */
void cpu_column_sums(const float *matrix, int rows, int cols, float *sums);

/* Sum accumulated in double in index order, rounded to float once. */
float cpu_sum(const float *x, size_t n);

/* Decoupled weight decay: each weight of decay's spans times 1 - lr·rate (backend.h). */
void cpu_decay_weights(float *param, const weight_decay *decay, float lr);

void cpu_sgd_momentum_step(float *param, float *velocity, const float *grad, size_t n, float lr,
                           float momentum);

void cpu_adam_step(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                   float beta1, float beta2, float eps, int step);

/* x[r] = pixels[indices[r]] * scale + shift (features values each), y[r] = labels[indices[r]].
 * pixels is count×features bytes; x is rows×features floats. */
void cpu_gather_normalize(const uint8_t *pixels, const uint8_t *labels, const int32_t *indices,
                          int rows, int features, float scale, float shift, float *x, uint8_t *y);

#ifdef __cplusplus
}
#endif

#endif
