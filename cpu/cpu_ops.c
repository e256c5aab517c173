/* CPU operations other than GEMM; see cpu_ops.h. Each is one pass over its data, and each
 * opens one OpenMP parallel region when its work pays for waking the threads (a few µs). */
#include "cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>

#include "core/label_smoothing.h"

/* Below this many elements of a memory-bound loop a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

/* The same for the softmax, whose elements cost two exponentials or so each. */
#define SOFTMAX_PARALLEL_MIN_ELEMENTS 2048

/* Columns are shared out among threads in cpu_column_sums by blocks of one cache line of
 * floats, so that no two threads write the same line of the sums. */
enum { COLUMN_BLOCK = 16 };

/* How many rows ahead cpu_gather_normalize asks for the source row: rows are picked at random
 * from the data set, so the hardware prefetcher cannot guess them, and each is a DRAM miss. */
enum { GATHER_PREFETCH_ROWS = 8 };

/* The optimizers run over the parameters a cache line at a time and ask for the line this far
 * ahead to be fetched for writing. In a step, every thread has just read all of W1 (the forward
 * GEMM multiplies its rows of the batch by all of it), so each line an update writes is held by
 * the other cores' caches, and the write must first take it from them: a few lines at a time,
 * as the stores reach them, without the hint (the update ran 5-8× slower in a step than alone on
 * 16 cores). With it, more lines can be on their way at once: on the 2-core development machine
 * the update in a step went 174 → 36 µs, on the 16-core H100 host 101 → 60-97 µs, and on the
 * H200 host it made no difference (docs/performance.md). */
enum { LINE_FLOATS = 16 };
enum { UPDATE_PREFETCH_FLOATS = 16 * LINE_FLOATS };

/* Elements [first, returned end) of n are the optimizer's line `line`. Asks for the line
 * UPDATE_PREFETCH_FLOATS after it: the parameter for writing, the gradient for reading (a
 * GCC/clang builtin, prefetchw on x86; no intrinsics). */
static inline size_t update_line(float *param, const float *grad, size_t line, size_t n,
                                 size_t *first) {
    *first = line * LINE_FLOATS;
    if (*first + UPDATE_PREFETCH_FLOATS < n) {
        __builtin_prefetch(param + *first + UPDATE_PREFETCH_FLOATS, 1);
        __builtin_prefetch(grad + *first + UPDATE_PREFETCH_FLOATS, 0);
    }
    return *first + LINE_FLOATS < n ? *first + LINE_FLOATS : n;
}

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
void cpu_softmax_cross_entropy_row(const float *logits, int label, int classes, float grad_scale,
                                   smoothed_targets targets, float *grad, float *loss,
                                   float *correct, int32_t *prediction) {
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (logits[c] > logits[best]) best = c;
    float max = logits[best];
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) {
        float e = expf(logits[c] - max);
        if (grad) grad[c] = e; /* kept for the gradient: one exponential per class */
        sum += e;
    }
    float target_logit = logits[label] - max; /* sum over c of target[c]·(logits[c] - max) */
    if (targets.other != 0.0f) {
        target_logit = 0.0f;
        for (int c = 0; c < classes; c++)
            target_logit += (c == label ? targets.label : targets.other) * (logits[c] - max);
    }
    if (loss) *loss = logf(sum) - target_logit;
    if (correct) *correct = (best == label) ? 1.0f : 0.0f;
    if (prediction) *prediction = best;
    if (grad) {
        for (int c = 0; c < classes; c++) {
            float probability = grad[c] / sum;
            grad[c] = grad_scale * (probability - (c == label ? targets.label : targets.other));
        }
    }
}

void cpu_softmax_cross_entropy(const float *logits, const uint8_t *labels, int rows, int classes,
                               float grad_scale, float smoothing, float *grad, float *row_loss,
                               float *row_correct, int32_t *prediction) {
    smoothed_targets targets = label_targets(smoothing, classes);
#pragma omp parallel for if ((long)rows * classes >= SOFTMAX_PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++) {
        size_t offset = (size_t)r * classes;
        cpu_softmax_cross_entropy_row(logits + offset, labels[r], classes, grad_scale, targets,
                                      grad ? grad + offset : NULL, row_loss ? &row_loss[r] : NULL,
                                      row_correct ? &row_correct[r] : NULL,
                                      prediction ? &prediction[r] : NULL);
    }
}

/* sums[first..end) = column sums of those columns, row after row. */
static void sum_columns(const float *restrict matrix, int rows, int cols, int first, int end,
                        float *restrict sums) {
    for (int c = first; c < end; c++) sums[c] = 0.0f;
    for (int r = 0; r < rows; r++) {
        const float *row = matrix + (size_t)r * cols;
        for (int c = first; c < end; c++) sums[c] += row[c];
    }
}

/* Each thread sums a contiguous run of whole column blocks, row after row: every column is
 * summed in the same order whatever the thread count. */
void cpu_column_sums(const float *matrix, int rows, int cols, float *sums) {
    int blocks = (cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel if ((long)rows * cols >= PARALLEL_MIN_ELEMENTS)
    {
        int thread = omp_get_thread_num(), threads = omp_get_num_threads();
        int first = blocks * thread / threads * COLUMN_BLOCK;
        int end = blocks * (thread + 1) / threads * COLUMN_BLOCK;
        sum_columns(matrix, rows, cols, first, end < cols ? end : cols, sums);
    }
}

float cpu_sum(const float *x, size_t n) {
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += x[i];
    return (float)total;
}

void cpu_decay_weights(float *param, const weight_decay *decay, float lr) {
    float keep = 1.0f - lr * decay->rate;
    for (int s = 0; s < decay->spans; s++) {
        int64_t begin = decay->begin[s], end = decay->end[s];
#pragma omp parallel for schedule(static) if (end - begin >= PARALLEL_MIN_ELEMENTS)
        for (int64_t i = begin; i < end; i++) param[i] *= keep;
    }
}

void cpu_sgd_momentum_step(float *restrict param, float *restrict velocity,
                           const float *restrict grad, size_t n, float lr, float momentum) {
    size_t lines = (n + LINE_FLOATS - 1) / LINE_FLOATS;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN_ELEMENTS)
    for (size_t line = 0; line < lines; line++) {
        size_t first, end = update_line(param, grad, line, n, &first);
        for (size_t i = first; i < end; i++) {
            velocity[i] = momentum * velocity[i] + grad[i];
            param[i] -= lr * velocity[i];
        }
    }
}

void cpu_adam_step(float *restrict param, float *restrict m, float *restrict v,
                   const float *restrict grad, size_t n, float lr, float beta1, float beta2,
                   float eps, int step) {
    float m_correction = (float)(1.0 / (1.0 - pow(beta1, step)));
    float v_correction = (float)(1.0 / (1.0 - pow(beta2, step)));
    size_t lines = (n + LINE_FLOATS - 1) / LINE_FLOATS;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN_ELEMENTS)
    for (size_t line = 0; line < lines; line++) {
        size_t first, end = update_line(param, grad, line, n, &first);
        for (size_t i = first; i < end; i++) {
            m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
            v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
            float m_hat = m[i] * m_correction;
            float v_hat = v[i] * v_correction;
            param[i] -= lr * m_hat / (sqrtf(v_hat) + eps);
        }
    }
}

void cpu_gather_normalize(const uint8_t *pixels, const uint8_t *labels, const int32_t *indices,
                          int rows, int features, float scale, float shift, float *x, uint8_t *y) {
#pragma omp parallel for if ((long)rows * features >= PARALLEL_MIN_ELEMENTS)
    for (int r = 0; r < rows; r++) {
        if (r + GATHER_PREFETCH_ROWS < rows) { /* a GCC/clang builtin: a hint, no intrinsics */
            const uint8_t *ahead = pixels + (size_t)indices[r + GATHER_PREFETCH_ROWS] * features;
            for (int f = 0; f < features; f += 64) __builtin_prefetch(ahead + f);
        }
        const uint8_t *source = pixels + (size_t)indices[r] * features;
        float *destination = x + (size_t)r * features;
        for (int f = 0; f < features; f++) destination[f] = source[f] * scale + shift;
        y[r] = labels[indices[r]];
    }
}
