/* The fused implementation's kernels: a whole training pass of a 784-H-10 MLP (one hidden layer)
 * in one persistent, cooperatively launched kernel, after a short one that lays the pass's
 * samples out in order. fused_mlp.cu says how it works. */
#ifndef MLP_FUSED_MLP_H
#define MLP_FUSED_MLP_H

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/label_smoothing.h"

/* The limits of the design; fused_pass.cu refuses (and the trainer falls back) outside them. */
constexpr int FUSED_THREADS = 512;              /* threads per block: 16 warps */
constexpr int FUSED_MAX_FEATURES = 4 * FUSED_THREADS; /* a thread per 4 or 8 pixels in the backward */
constexpr int FUSED_FEATURE_MULTIPLE = 16;      /* pixels are copied 16 bytes at a time */
constexpr int FUSED_MAX_CLASSES = 10;           /* every class of a row's logits held at once */
constexpr int FUSED_MAX_UNITS_PER_BLOCK = 8;
constexpr int FUSED_MAX_STAGE_ROWS = 64;        /* rows of pixels a block holds at once, ×2 */

struct fused_mlp_args {
    /* the data set, resident on the device, and the pass's order of samples */
    const uint8_t *pixels; /* count×features bytes */
    const uint8_t *labels;
    const int32_t *order;  /* samples of the pass, in order */
    int features, hidden, classes;
    float scale, shift;    /* x = pixel * scale + shift */

    /* the model: W1 features×hidden, b1, W2 hidden×classes, b2, all row-major, in one flat
     * array; the optimizer's state arrays have the same layout */
    float *params;
    float *state[2];
    size_t w1, b1, w2, b2; /* offsets into params (and state) */

    bool adam;
    lr_schedule lr; /* each update's rate: schedule_lr at its number */
    float momentum, beta1, beta2, eps;
    float weight_decay;    /* decoupled, of W1 and W2 (backend.h); 0: none */
    float label_smoothing; /* of the training loss (label_smoothing.h) */
    smoothed_targets targets; /* its targets' values */

    int samples, batch;    /* the pass: samples rows, batch rows a step (the last: the rest) */
    float *row_loss, *row_correct; /* per sample of the pass; NULL: not wanted */
    pass_cursor *cursor;   /* read at the start (Adam's step count), set past the pass at the end */

    /* scratch in device memory (fused_pass.cu sizes it) */
    uint8_t *ordered_pixels; /* samples×features: the pass's samples in the pass's order */
    uint8_t *ordered_labels; /* samples */
    float *partial_logits;   /* batch×classes×blocks: each block's share of each logit */
    float *dlogits;          /* batch×classes: the loss's gradient w.r.t. the logits */

    int units_per_block;   /* 1, 2, 4 or 8: hidden units each block owns */
    int blocks;            /* ceil(hidden / units_per_block), all resident at once */
    int stage_rows;        /* rows of pixels per shared-memory stage, 1..FUSED_MAX_STAGE_ROWS */
};

/* Bytes of shared memory a block needs: its slice of the model and optimizer state (state_arrays
 * of them), the step's hidden activations (batch rows), two stages of pixels and the sums. */
size_t fused_mlp_shared_bytes(int units_per_block, int features, int classes, int state_arrays,
                              int batch, int stage_rows);

/* How many blocks of that size fit on the device at once (0 if none): a cooperative launch
 * needs every block resident. */
int fused_mlp_resident_blocks(int units_per_block, size_t shared_bytes);

/* Launches the pass on stream (the reordering kernel, then the cooperative one); returns at
 * once. */
void gpu_fused_mlp_pass(cudaStream_t stream, const fused_mlp_args &args);

#endif
