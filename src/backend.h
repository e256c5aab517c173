/* The operation table every implementation fills in.
 *
 * The trainer (trainer.c, model.c, optimizer.c) is written once against this table and never asks
 * which implementation it holds. An implementation is a device (CPU or GPU) plus a GEMM
 * (naive, tiled or the vendor BLAS); cpu_backend.c and cuda/gpu_backend.cu fill the table in.
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

typedef struct backend backend;
typedef struct batch_feed batch_feed;
typedef struct timing_stamp timing_stamp;
typedef struct dataset dataset;

/* C = alpha * op(A) * op(B) + beta * C.
 * op(A) is M×K (A itself is K×M when trans_a), op(B) is K×N (B is N×K when trans_b), C is M×N.
 * beta == 0 means C is only written, never read (so C may hold garbage or NaN on entry). */
typedef void gemm_fn(backend *be, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc);

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

struct backend {
    const char *device_name; /* "cpu" or "gpu" */
    const char *impl_name;   /* "naive", "tiled" or "blas" */
    char description[128];   /* for reports, e.g. "NVIDIA H200, cuBLAS 13.0" */
    void *state;             /* the implementation's private state */

    /* ---- memory on the backend's device ---- */
    void *(*alloc)(backend *be, size_t bytes);
    void (*release)(backend *be, void *p);
    void (*upload)(backend *be, void *dst, const void *src, size_t bytes);   /* host → device */
    void (*download)(backend *be, void *dst, const void *src, size_t bytes); /* device → host, waits */
    void (*synchronize)(backend *be);

    /* ---- the math of one training step ---- */
    gemm_fn *gemm;

    /* z (rows×cols) += bias (cols) broadcast over rows; then z = max(z, 0) when relu. */
    void (*bias_activation)(backend *be, float *z, const float *bias, int rows, int cols, bool relu);

    /* grad[i] = 0 where activation[i] <= 0 (activation is the ReLU output of the same layer). */
    void (*relu_backward)(backend *be, float *grad, const float *activation, size_t count);

    /* For each of rows rows of logits (rows×classes), stably:
     *   row_loss[r]    = logsumexp(logits[r]) - logits[r][labels[r]]
     *   row_correct[r] = 1 if argmax(logits[r]) == labels[r] else 0  (first maximum wins)
     *   grad[r][c]     = grad_scale * (softmax(logits[r])[c] - (c == labels[r]))  (skipped if grad == NULL)
     *   prediction[r]  = argmax(logits[r])                              (skipped if prediction == NULL) */
    void (*softmax_cross_entropy)(backend *be, const float *logits, const uint8_t *labels, int rows,
                                  int classes, float grad_scale, float *grad, float *row_loss,
                                  float *row_correct, int32_t *prediction);

    /* sums[c] = sum over r of matrix[r][c], matrix is rows×cols; a deterministic reduction. */
    void (*column_sums)(backend *be, const float *matrix, int rows, int cols, float *sums);

    /* *result = sum of x[0..n); result is one float in the backend's memory. Deterministic. */
    void (*sum)(backend *be, const float *x, size_t n, float *result);

    /* velocity = momentum * velocity + grad;  param -= lr * velocity   (PyTorch's convention) */
    void (*sgd_momentum_step)(backend *be, float *param, float *velocity, const float *grad,
                              size_t n, float lr, float momentum);

    /* Adam with bias correction; step counts from 1. */
    void (*adam_step)(backend *be, float *param, float *m, float *v, const float *grad, size_t n,
                      float lr, float beta1, float beta2, float eps, int step);

    /* ---- batches ---- */
    batch_feed *(*feed_create)(backend *be, const dataset *data, int max_rows, feed_options opts);
    /* The order of samples for the coming pass; order has data->count indices. */
    void (*feed_start_pass)(batch_feed *feed, const int32_t *order);
    /* The next rows samples of the pass, in order. Batches are taken whole, max_rows at a time,
     * except the pass's last, which is the remainder (a feed may prefetch on that basis). */
    batch_view (*feed_next)(batch_feed *feed, int rows);
    void (*feed_destroy)(batch_feed *feed);

    /* ---- timing: a stamp marks a point in the backend's stream of work ---- */
    timing_stamp *(*stamp_create)(backend *be);
    void (*stamp_record)(backend *be, timing_stamp *s);
    /* Milliseconds between two recorded stamps; waits until `end` has been reached. */
    double (*stamp_elapsed_ms)(backend *be, timing_stamp *start, timing_stamp *end);
    void (*stamp_destroy)(backend *be, timing_stamp *s);

    void (*destroy)(backend *be);
};

#endif
