/* Softmax cross-entropy, forward and backward fused, and the output layer's bias gradient in the
 * same launch: one warp per row of logits.
 *
 * The lanes stride across the row's classes; three warp-shuffle reductions give the row's
 * maximum (with its index: the first maximum wins, as on the CPU), then the sum of
 * exp(logit - max). Subtracting the maximum keeps exp() finite for any logits. From those, with
 * target the one-hot label smoothed by label_smoothing (label_smoothing.h; 0: one-hot):
 *   loss = log(sum) - sum over c of target[c]·(logit[c] - max),  correct = (argmax == label),
 *   grad[c] = grad_scale * (exp(logit[c] - max - log(sum)) - target[c]).
 * Per-row loss and correctness are written to the pass's arrays (at the rows the pass cursor
 * names; each skipped where its array is NULL) and summed once per pass (reductions.cu), so
 * nothing here needs atomics on floats.
 *
 * The bias gradient is the column sums of grad. Each warp adds its rows' gradients into its own
 * row of shared memory (lane c owns classes c, c + 32, ...), the block adds its warps in order
 * and stores its partial sums; the last block to finish (an atomic ticket, the only atomic)
 * adds the blocks' partials in block order. The same input gives the same bits every time. */
#include <cmath>

#include "libs/cuda_check.h"
#include "core/label_smoothing.h"
#include "cuda/kernels/gpu_kernels.h"
#include "cuda/kernels/warp_reduce.cuh"

namespace {

constexpr unsigned WARPS_PER_BLOCK = 8;

struct softmax_args {
    const float *logits;   /* rows×classes */
    const uint8_t *labels; /* rows */
    int rows, classes;
    float grad_scale, label_smoothing;
    smoothed_targets targets; /* of label_smoothing */
    float *grad;           /* rows×classes, or NULL */
    float *bias_grad;      /* classes, or NULL */
    float *row_loss, *row_correct;
    int32_t *prediction;   /* or NULL */
    const pass_cursor *cursor; /* or NULL: rows from 0 */
    gpu_softmax_scratch scratch;
};

/* One row, by one warp; adds the row's gradient into warp_grad_sum (classes floats) if given. */
__device__ void softmax_row(const softmax_args &p, int row, int first_row, float *warp_grad_sum) {
    int lane = threadIdx.x % 32;
    const float *z = p.logits + (size_t)row * p.classes;
    float max = -INFINITY;
    int best = p.classes;
    for (int c = lane; c < p.classes; c += 32)
        if (z[c] > max) max = z[c], best = c;
    warp_argmax(max, best);
    if (best >= p.classes) best = 0; /* no logit above -inf (all NaN or -inf): the loss is not finite */

    float sum = 0.0f;
    for (int c = lane; c < p.classes; c += 32) sum += expf(z[c] - max);
    float log_sum = logf(warp_sum(sum));

    int label = p.labels[row];
    float target_logit = z[label] - max; /* sum over c of target[c]·(z[c] - max) */
    if (p.label_smoothing != 0.0f) {
        float part = 0.0f;
        for (int c = lane; c < p.classes; c += 32)
            part += (c == label ? p.targets.label : p.targets.other) * (z[c] - max);
        target_logit = warp_sum(part);
    }
    if (lane == 0) {
        if (p.row_loss) p.row_loss[first_row + row] = log_sum - target_logit;
        if (p.row_correct) p.row_correct[first_row + row] = best == label ? 1.0f : 0.0f;
        if (p.prediction) p.prediction[first_row + row] = best;
    }
    if (p.grad) {
        float *g = p.grad + (size_t)row * p.classes;
        for (int c = lane; c < p.classes; c += 32) {
            g[c] = p.grad_scale *
                   (expf(z[c] - max - log_sum) - (c == label ? p.targets.label : p.targets.other));
            if (warp_grad_sum) warp_grad_sum[c] += g[c];
        }
    }
}

/* The last block to finish adds every block's partial bias gradient, in block order. */
__device__ void finish_bias_grad(const softmax_args &p) {
    __shared__ bool last;
    __threadfence(); /* this block's partial sums are visible before its ticket is */
    if (threadIdx.x == 0) last = atomicAdd(p.scratch.blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    for (int c = threadIdx.x; c < p.classes; c += blockDim.x) {
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++)
            total += __ldcg(&p.scratch.block_sums[b * GPU_SOFTMAX_MAX_CLASSES + c]);
        p.bias_grad[c] = total;
    }
    if (threadIdx.x == 0) *p.scratch.blocks_done = 0; /* ready for the next launch */
}

/* Grid-stride over rows: warp w of block b takes rows b·WARPS + w, then + gridDim·WARPS, ... */
__global__ void softmax_cross_entropy_kernel(softmax_args p) {
    __shared__ float warp_sums[WARPS_PER_BLOCK][GPU_SOFTMAX_MAX_CLASSES];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int first_row = p.cursor ? p.cursor->first_row : 0;
    float *my_sums = p.bias_grad ? warp_sums[warp] : nullptr;
    if (my_sums)
        for (int c = lane; c < p.classes; c += 32) my_sums[c] = 0.0f;
    for (int row = blockIdx.x * WARPS_PER_BLOCK + warp; row < p.rows;
         row += gridDim.x * WARPS_PER_BLOCK)
        softmax_row(p, row, first_row, my_sums);
    if (!p.bias_grad) return; /* uniform across the grid */

    __syncthreads();
    for (int c = threadIdx.x; c < p.classes; c += blockDim.x) {
        float block_total = 0.0f;
        for (int w = 0; w < (int)WARPS_PER_BLOCK; w++) block_total += warp_sums[w][c];
        p.scratch.block_sums[blockIdx.x * GPU_SOFTMAX_MAX_CLASSES + c] = block_total;
    }
    finish_bias_grad(p);
}

} // namespace

gpu_softmax_scratch gpu_softmax_scratch_create(void) {
    gpu_softmax_scratch scratch;
    size_t floats = (size_t)GPU_SOFTMAX_MAX_BLOCKS * GPU_SOFTMAX_MAX_CLASSES;
    CUDA_CHECK(cudaMalloc(&scratch.block_sums, floats * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&scratch.blocks_done, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(scratch.blocks_done, 0, sizeof(unsigned)));
    return scratch;
}

void gpu_softmax_scratch_destroy(gpu_softmax_scratch scratch) {
    CUDA_CHECK(cudaFree(scratch.block_sums));
    CUDA_CHECK(cudaFree(scratch.blocks_done));
}

void gpu_softmax_cross_entropy(cudaStream_t stream, const float *logits, const uint8_t *labels,
                               int rows, int classes, float grad_scale, float label_smoothing,
                               float *grad, float *bias_grad, float *row_loss, float *row_correct,
                               int32_t *prediction, const pass_cursor *cursor,
                               gpu_softmax_scratch scratch) {
    if (bias_grad && (!grad || classes > GPU_SOFTMAX_MAX_CLASSES)) {
        std::fprintf(stderr, "mlp_train: softmax bias gradient of %d classes%s is not supported\n",
                     classes, grad ? "" : " without the logit gradient");
        std::exit(1);
    }
    if (rows == 0) {
        if (bias_grad) CUDA_CHECK(cudaMemsetAsync(bias_grad, 0, classes * sizeof(float), stream));
        return;
    }
    unsigned blocks = blocks_for(rows, WARPS_PER_BLOCK);
    if (blocks > GPU_SOFTMAX_MAX_BLOCKS) blocks = GPU_SOFTMAX_MAX_BLOCKS;
    softmax_args args = {logits, labels, rows, classes, grad_scale, label_smoothing,
                         label_targets(label_smoothing, classes), grad, bias_grad,
                         row_loss, row_correct, prediction, cursor, scratch};
    softmax_cross_entropy_kernel<<<blocks, WARPS_PER_BLOCK * 32, 0, stream>>>(args);
    CUDA_CHECK_LAUNCH();
}
