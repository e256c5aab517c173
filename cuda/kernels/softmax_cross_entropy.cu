/* Softmax cross-entropy, forward and backward fused: one warp per row of logits.
 *
 * The lanes stride across the row's classes; three warp-shuffle reductions give the row's
 * maximum (with its index: the first maximum wins, as on the CPU), then the sum of
 * exp(logit - max). Subtracting the maximum keeps exp() finite for any logits. From those:
 *   loss = log(sum) - (logit[label] - max),  correct = (argmax == label),
 *   grad[c] = grad_scale * (exp(logit[c] - max - log(sum)) - [c == label]).
 * Per-row loss and correctness are written to the pass's arrays and summed once per pass
 * (reductions.cu), so nothing here needs atomics. */
#include <cmath>

#include "../cuda_check.h"
#include "gpu_kernels.h"

namespace {

constexpr unsigned WARPS_PER_BLOCK = 8;
constexpr unsigned FULL_MASK = 0xffffffffu;

/* Reduces (value, index) to the warp's maximum value, the smallest index among ties. */
__device__ __forceinline__ void warp_argmax(float &value, int &index) {
    for (int offset = 16; offset > 0; offset /= 2) {
        float other_value = __shfl_xor_sync(FULL_MASK, value, offset);
        int other_index = __shfl_xor_sync(FULL_MASK, index, offset);
        if (other_value > value || (other_value == value && other_index < index)) {
            value = other_value;
            index = other_index;
        }
    }
}

__device__ __forceinline__ float warp_sum(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(FULL_MASK, value, offset);
    return value;
}

/* logits, grad: rows×classes; labels, row_loss, row_correct, prediction: rows. */
__global__ void softmax_cross_entropy_kernel(const float *logits, const uint8_t *labels, int rows,
                                             int classes, float grad_scale, float *grad,
                                             float *row_loss, float *row_correct,
                                             int32_t *prediction) {
    int row = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return; /* a whole warp leaves together: rows are per warp */
    const float *z = logits + (size_t)row * classes;

    float max = -INFINITY;
    int best = classes;
    for (int c = lane; c < classes; c += 32)
        if (z[c] > max) max = z[c], best = c;
    warp_argmax(max, best);
    if (best >= classes) best = 0; /* no logit above -inf (all NaN or -inf): the loss is not finite */

    float sum = 0.0f;
    for (int c = lane; c < classes; c += 32) sum += expf(z[c] - max);
    float log_sum = logf(warp_sum(sum));

    int label = labels[row];
    if (lane == 0) {
        row_loss[row] = log_sum - (z[label] - max);
        row_correct[row] = best == label ? 1.0f : 0.0f;
        if (prediction) prediction[row] = best;
    }
    if (grad) {
        float *g = grad + (size_t)row * classes;
        for (int c = lane; c < classes; c += 32)
            g[c] = grad_scale * (expf(z[c] - max - log_sum) - (c == label ? 1.0f : 0.0f));
    }
}

} // namespace

void gpu_softmax_cross_entropy(cudaStream_t stream, const float *logits, const uint8_t *labels,
                               int rows, int classes, float grad_scale, float *grad,
                               float *row_loss, float *row_correct, int32_t *prediction) {
    if (rows == 0) return;
    softmax_cross_entropy_kernel<<<blocks_for(rows, WARPS_PER_BLOCK), WARPS_PER_BLOCK * 32, 0,
                                   stream>>>(logits, labels, rows, classes, grad_scale, grad,
                                             row_loss, row_correct, prediction);
    CUDA_CHECK_LAUNCH();
}
