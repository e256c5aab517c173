/* The operation table every implementation fills in.
 *
 * The trainer (trainer.c, model.c, optimizer.c) is written once against this table and never asks
 * which implementation it holds. An implementation is a device (CPU or GPU) plus a GEMM
 * (naive, tiled or the vendor BLAS); cpu_backend.c and cuda/gpu_backend.cu fill the table in.
 * Two parts are optional and change how the trainer drives a pass, not what it computes: a
 * device that can record a step and replay it (CUDA graphs), and an implementation that runs a
 * whole pass in one call (--impl fused, one persistent kernel). A third is there when the
 * process is one of several ranks training one model (distributed.h): an all-reduce, with which
 * the trainer sums the gradients across the ranks between the backward pass and the update.
 *
 * Conventions for every operation:
 *   - All matrices are row-major. "A is M×K" means M rows of K floats; lda is the row stride.
 *   - Every pointer passed to an operation points into the backend's own memory (host memory for
 *     the CPU, device memory for the GPU), obtained from alloc().
 *   - Operations are queued in order on one stream; only download() and synchronize() wait.
 *   - Errors inside an operation (a failed CUDA call, out of memory) print a message naming the
 *     problem and end the process with exit status 1: the table has no error returns to forget.
 */
#ifndef MLP_BACKEND_H
#define MLP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/host_device.h"
#include "core/lr_schedule.h"

typedef struct backend backend;
typedef struct batch_feed batch_feed;
typedef struct timing_stamp timing_stamp;
typedef struct dataset dataset;
typedef struct recording recording;
typedef struct mlp_shape mlp_shape;
typedef struct optimizer_config optimizer_config;

/* What a GEMM does to C after the product, in this order (each part optional):
 *   C[i][j] += bias[j]               (bias: N floats, broadcast over the rows)
 *   C[i][j]  = max(C[i][j], 0)       (relu: a hidden layer's activation)
 *   C[i][j]  = 0 where mask[i][j] <= 0  (relu_mask: M×N, row stride ldc; the ReLU's backward,
 *                                        mask being the ReLU's output)
 * Fusing it into the GEMM saves a pass over C; cpu_ops.h defines the unfused operations. */
typedef struct {
    const float *bias;
    bool relu;
    const float *relu_mask;
} gemm_epilogue;

/* What a GEMM multiplies in (--precision). Only the products change: the operations read and
 * write FP32 matrices and the sums are FP32. TF32 keeps 10 bits of each factor's mantissa, BF16
 * 7, as the factors enter the GPU's tensor cores (the GPU backend may keep BF16 copies of some
 * matrices beside them for its products to read, the values they would round to:
 * parameters_allocated); the CPU implementations multiply in FP32 only. */
typedef enum { PRECISION_FP32, PRECISION_TF32, PRECISION_BF16, PRECISION_COUNT } gemm_precision;

static inline const char *gemm_precision_name(gemm_precision p) {
    return p == PRECISION_TF32 ? "tf32" : p == PRECISION_BF16 ? "bf16" : "fp32";
}

/* Whether a device is there to run an implementation: present; absent (no such device, or no
 * driver for it); or broken (its driver is installed, but fails), which is an error to report,
 * never a reason to skip. */
typedef enum { DEVICE_PRESENT, DEVICE_ABSENT, DEVICE_BROKEN } device_presence;

/* C = epilogue(alpha * op(A) * op(B) + beta * C); epilogue NULL means none.
 * op(A) is M×K (A itself is K×M when trans_a), op(B) is K×N (B is N×K when trans_b), C is M×N.
 * beta == 0 means C is only written, never read (so C may hold garbage or NaN on entry). */
typedef void gemm_fn(backend *be, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc, const gemm_epilogue *epilogue);

/* Where a pass (over the training or the test set) stands, kept in the backend's memory. The
 * operations of a step read it instead of taking its values as arguments, so the step's
 * arguments are the same every time and a recorded step (a CUDA graph) can be replayed. */
typedef struct {
    int32_t first_row;       /* the current batch's first sample, counted in the pass's order */
    int32_t optimizer_steps; /* updates made before the current step (Adam's bias correction) */
} pass_cursor;

/* The output layer of one training step, forward and backward, with h the last hidden layer's
 * output (after its ReLU):
 *   logits = h·W + b, and each row's loss and correctness as softmax_cross_entropy writes them
 *   dlogits = grad_scale · (softmax(logits) − target)      (rows×classes, not stored), target
 *             being the one-hot label smoothed by label_smoothing (label_smoothing.h); each
 *             row's loss is the cross-entropy against that target
 *   weight_grad = hᵀ·dlogits,  bias_grad = column sums of dlogits
 *   hidden_delta = dlogits·Wᵀ, zero where h <= 0 (the gradient w.r.t. the hidden layer's
 *                  pre-activation),  hidden_bias_grad = column sums of hidden_delta
 * Every sum over rows is deterministic (the same bits every time). */
typedef struct {
    const float *hidden;     /* rows×in */
    const float *weights;    /* in×classes */
    const float *bias;       /* classes */
    const uint8_t *labels;   /* rows */
    int rows, in, classes;
    float grad_scale;
    float label_smoothing;   /* 0: the plain one-hot target */
    float *weight_grad;      /* in×classes */
    float *bias_grad;        /* classes */
    float *hidden_delta;     /* rows×in */
    float *hidden_bias_grad; /* in */
    float *row_loss, *row_correct; /* at o + r, o = cursor->first_row; NULL: not wanted */
    const pass_cursor *cursor;     /* NULL: o = 0 */
} output_layer_step;

/* Decoupled weight decay (--weight-decay, as in AdamW and SGDW): an update first multiplies each
 * weight by keep = 1 - lr·rate, lr being that update's scheduled rate, the product rounded on its
 * own; then the optimizer changes the weight as usual. keep itself may differ by one rounding
 * between the CPU and the GPU, whose compiler fuses 1 - lr·rate into one multiply-add. Biases
 * are not decayed: the weights are the spans [begin[i], end[i]) of the flat parameter array
 * (model.h's layout). The update operations take it in the backend's memory, or NULL for no
 * decay (their updates as they were before decay existed, to the bit). */
#define WEIGHT_DECAY_MAX_SPANS 16
typedef struct {
    float rate;
    int spans;
    int64_t begin[WEIGHT_DECAY_MAX_SPANS], end[WEIGHT_DECAY_MAX_SPANS];
} weight_decay;

/* Whether parameter i is one of the weights that decay. */
MLP_HOST_DEVICE static inline bool weight_decays(const weight_decay *decay, int64_t i) {
    for (int s = 0; s < decay->spans; s++)
        if (i >= decay->begin[s] && i < decay->end[s]) return true;
    return false;
}

/* Where rank `rank` of `ranks` starts its shard of n floats (backend's reduce_scatter_sum): the
 * shards are whole 4-float units (16-byte aligned where the array is), as many in each, but the
 * last ones, which may be shorter or empty; shard_begin(n, ranks, ranks) is n. */
MLP_HOST_DEVICE static inline size_t shard_begin(size_t n, int rank, int ranks) {
    size_t quads = (n + 3) / 4, per_shard = (quads + (size_t)ranks - 1) / (size_t)ranks * 4;
    size_t begin = (size_t)rank * per_shard;
    return begin < n ? begin : n;
}

/* Where the training batches come from on a GPU (the CPU always reads host memory in place). */
typedef enum {
    DATA_RESIDENT,      /* whole data set copied to the device once; batches gathered there */
    DATA_HOST_PAGEABLE, /* each batch gathered on the host and copied from pageable memory */
    DATA_HOST_PINNED,   /* the same, from pinned (page-locked) memory */
} data_placement;

typedef struct {
    data_placement placement;
    bool overlap; /* copy the next batch on a second stream while this one computes */
} feed_options;

/* One batch on the backend's device: x is rows×features (normalized floats), y holds rows labels. */
typedef struct {
    const float *x;
    const uint8_t *y;
    int rows;
} batch_view;

/* A training pass handed to run_pass whole: the model's parameters and optimizer state, where the
 * batches come from, and where the per-sample metrics go. */
typedef struct {
    const mlp_shape *shape;
    const optimizer_config *optimizer; /* the kind, learning rate and hyperparameters */
    float *params;                     /* shape->param_count floats, updated in place */
    float *optimizer_state[2];         /* SGD: velocity; Adam: first and second moments */
    batch_feed *feed;                  /* the pass's samples, in the order feed_start_pass set */
    int samples;                       /* samples in the pass */
    int batch;                         /* rows per step; the last step takes the remainder */
    float *row_loss, *row_correct;     /* per-sample loss and correctness, samples each (NULL:
                                        * not wanted, --no-train-metrics) */
    pass_cursor *cursor;               /* {0, updates so far} before; past the last step after */
    float label_smoothing;             /* of the training loss (label_smoothing.h) */
} training_pass;

struct backend {
    const char *device_name; /* "cpu" or "gpu" */
    const char *impl_name;   /* "naive", "tiled" or "blas" */
    gemm_precision precision; /* of gemm's products, chosen when the backend is created */
    char description[128];   /* for reports, e.g. "NVIDIA H200, cuBLAS 13.0" */
    void *state;             /* the implementation's private state */

    /* ---- memory on the backend's device ---- */
    void *(*alloc)(backend *be, size_t bytes);
    void (*release)(backend *be, void *p);
    void (*upload)(backend *be, void *dst, const void *src, size_t bytes);   /* host → device */
    void (*download)(backend *be, void *dst, const void *src, size_t bytes); /* device → host, waits */
    /* Host memory that a queued copy can fill without the host waiting for it (pinned on the
     * GPU), and that copy: queued like any operation, dst holds the bytes once synchronize()
     * returns. The epoch's metrics come back this way, so that a profile tells the copy (d2h)
     * from the host's wait for the epoch's work (trainer.c). */
    void *(*alloc_host)(backend *be, size_t bytes);
    void (*release_host)(backend *be, void *p);
    void (*download_queued)(backend *be, void *dst, const void *src, size_t bytes);
    void (*synchronize)(backend *be);
    /* Bytes alloc() can still hand out (what the device has free); SIZE_MAX if unknown. */
    size_t (*memory_available)(backend *be);

    /* Optional (NULL: nothing to do). The model's parameters are at params (count floats, from
     * alloc()), before anything is queued on them: a backend whose products read them in another
     * form keeps that form here, current through its own writes to them (--precision bf16 on
     * the GPU: a BF16 copy, cuda/gpu_narrow_copies.h). Called once per model, when it is made. */
    void (*parameters_allocated)(backend *be, float *params, size_t count);

    /* ---- the math of one training step ---- */
    gemm_fn *gemm;

    /* For each of rows rows of logits (rows×classes), stably, with o = cursor->first_row
     * (0 when cursor is NULL), the row's place in the pass, and target[r] the one-hot label
     * smoothed by label_smoothing (label_smoothing.h; 0 for the plain loss):
     *   row_loss[o+r]    = logsumexp(logits[r]) - sum over c of target[r][c]·logits[r][c]
     *   row_correct[o+r] = 1 if argmax(logits[r]) == labels[r] else 0  (first maximum wins)
     *                      (row_loss and row_correct each skipped if NULL)
     *   prediction[o+r]  = argmax(logits[r])                              (skipped if NULL)
     *   grad[r][c]       = grad_scale * (softmax(logits[r])[c] - target[r][c])  (skipped if NULL)
     *   bias_grad[c]     = sum over r of grad[r][c]: the output layer's bias gradient
     *                      (skipped if NULL; needs grad) */
    void (*softmax_cross_entropy)(backend *be, const float *logits, const uint8_t *labels, int rows,
                                  int classes, float grad_scale, float label_smoothing, float *grad,
                                  float *bias_grad, float *row_loss, float *row_correct,
                                  int32_t *prediction, const pass_cursor *cursor);

    /* ---- the output layer of a training step in one operation (optional) ----
     * output_layer_prepare says whether output_layer can run this output layer (in inputs,
     * classes outputs, batches of up to max_rows rows), and sets aside the memory it needs; it is
     * called once, when the model is created (before any step is recorded). Where it says no, or
     * is NULL, the model runs the output layer as gemm, softmax_cross_entropy, gemm, gemm and
     * column_sums (model.c); where it says yes, model.c calls output_layer instead. */
    bool (*output_layer_prepare)(backend *be, int max_rows, int in, int classes);
    void (*output_layer)(backend *be, const output_layer_step *step);

    /* sums[c] = sum over r of matrix[r][c], matrix is rows×cols; a deterministic reduction. */
    void (*column_sums)(backend *be, const float *matrix, int rows, int cols, float *sums);

    /* *result = sum of x[0..n); result is one float in the backend's memory. Deterministic. */
    void (*sum)(backend *be, const float *x, size_t n, float *result);

    /* The update, which ends a training step. One call updates every parameter of the model
     * (they are one flat array), then moves the step's cursor on as advance_cursor(cursor, rows)
     * does: in one operation, so that on the GPU the update's kernel is the step's last.
     * The rate lr is schedule_lr(schedule, cursor->optimizer_steps), read before the move.
     * First the weights decay (weight_decay above; decay is NULL or in the backend's memory), then:
     * SGD: velocity = momentum * velocity + grad;  param -= lr * velocity  (PyTorch's convention).
     * Adam: with bias correction, at step t = cursor->optimizer_steps + 1. */
    void (*sgd_momentum_step)(backend *be, float *param, float *velocity, const float *grad,
                              size_t n, lr_schedule schedule, float momentum,
                              const weight_decay *decay, pass_cursor *cursor, int rows);
    void (*adam_step)(backend *be, float *param, float *m, float *v, const float *grad, size_t n,
                      lr_schedule schedule, float beta1, float beta2, float eps,
                      const weight_decay *decay, pass_cursor *cursor, int rows);

    /* cursor->first_row += rows, cursor->optimizer_steps += 1: where a pass moves on without an
     * update (the test pass). */
    void (*advance_cursor)(backend *be, pass_cursor *cursor, int rows);

    /* ---- batches ---- */
    batch_feed *(*feed_create)(backend *be, const dataset *data, int max_rows, feed_options opts);
    /* The order of samples for the coming pass: count indices into the data set (count is at
     * most data->count; less when ranks share the pass, each feeding its own share). order
     * NULL: the last pass's order and count again, which the feed keeps (nothing is copied). */
    void (*feed_start_pass)(batch_feed *feed, const int32_t *order, int count);
    /* The batch of rows samples starting at cursor->first_row in the pass's order. Batches are
     * taken in order, max_rows at a time, except the pass's last, which is the remainder (a feed
     * may prefetch on that basis). */
    batch_view (*feed_next)(batch_feed *feed, int rows, const pass_cursor *cursor);
    /* Whether feed_next's work may be recorded (false when each batch is copied from the host). */
    bool (*feed_recordable)(const batch_feed *feed);
    void (*feed_destroy)(batch_feed *feed);

    /* ---- recording (optional: NULL where the device cannot record work) ----
     * The operations queued between record_begin and record_end are recorded, not run; replay
     * runs them again, with the same arguments, as often as asked (on the GPU: a CUDA graph,
     * captured from the stream). Operations that wait for the device (upload, download,
     * synchronize) must not be recorded. */
    void (*record_begin)(backend *be);
    recording *(*record_end)(backend *be);
    void (*replay)(backend *be, recording *r);
    void (*recording_destroy)(backend *be, recording *r);

    /* ---- a whole training pass in one call (optional: --impl fused) ----
     * pass_supported says whether run_pass can train this model from this feed (and if not,
     * why); where it cannot, the trainer runs the pass step by step with the operations above. */
    bool (*pass_supported)(backend *be, const training_pass *pass, char *why, size_t why_size);
    void (*run_pass)(backend *be, const training_pass *pass);

    /* ---- ranks training one model (distributed.h) ----
     * rank of ranks: this process's place among them (0 of 1 alone). all_reduce_sum is NULL
     * unless the process was launched by mpirun (then set even for one rank): data[0..n) in the
     * backend's memory becomes its sum over the ranks, in place, the same on every rank; queued
     * like any operation, and recordable (the GPU's is an NCCL all-reduce on the stream). Every
     * rank calls it in the same order with the same n. all_reduce_name says how, for reports. */
    int rank, ranks;
    void (*all_reduce_sum)(backend *be, float *data, size_t n);
    const char *all_reduce_name;
    /* Optional beside all_reduce_sum (NULL: the trainer sums the whole gradient after the
     * backward pass): all_reduce_start queues the same sum of data[0..n), to run beside the
     * operations queued after it (the GPU's, on a stream of its own); all_reduce_finish makes the
     * operations queued after it wait for every sum started. The backward pass starts the last
     * layers' once they are complete and large enough (model.h, early_reduce_floats). */
    void (*all_reduce_start)(backend *be, float *data, size_t n);
    void (*all_reduce_finish)(backend *be);
    /* Optional beside all_reduce_sum (NULL: the update cannot be sharded): the two halves of an
     * all-reduce, for an update shared out among the ranks (--sharded-update, trainer.c). Rank r's
     * shard of n floats is [shard_begin(n, r, ranks), shard_begin(n, r + 1, ranks)).
     * reduce_scatter_sum: this rank's shard of data[0..n) becomes its sum over the ranks (the
     *   same sum as all_reduce_sum's on 2 ranks, and with p2p on any number: rank order); the
     *   rest of data is left as it may be.
     * all_gather: every rank's shard of data[0..n) is copied from that rank to every rank.
     * Queued and recordable like all_reduce_sum; every rank calls them in the same order. */
    void (*reduce_scatter_sum)(backend *be, float *data, size_t n);
    void (*all_gather)(backend *be, float *data, size_t n);

    /* ---- timing: a stamp marks a point in the backend's stream of work ---- */
    timing_stamp *(*stamp_create)(backend *be);
    void (*stamp_record)(backend *be, timing_stamp *s);
    /* Milliseconds between two recorded stamps; waits until `end` has been reached. */
    double (*stamp_elapsed_ms)(backend *be, timing_stamp *start, timing_stamp *end);
    void (*stamp_destroy)(backend *be, timing_stamp *s);
    /* Wall-clock milliseconds spent inside gemm and inside every other operation (the batch
     * gather included) since the previous call, which starts the count again. Optional: NULL
     * where operations are queued and run later (the GPU), so that the time of a call is not
     * the time of its work. On the CPU it splits a phase into GEMM, the other operations and
     * the host code between them: the parts that threads speed up differently. */
    void (*take_operation_times)(backend *be, double *gemm_ms, double *other_ms);

    void (*destroy)(backend *be);
};

#endif
