/* The operation table on the CPU. Memory is host memory, every operation runs to completion
 * before returning, and a timing stamp is a reading of the monotonic clock. The three CPU
 * implementations differ in their GEMM (the tiled one fuses the epilogue into it; the others
 * run it as a pass of its own), and the tiled one runs a step's output layer in one
 * operation. Every operation adds its wall time to one of two counters, GEMM or the rest, for
 * --profile (take_operation_times). */
#define _POSIX_C_SOURCE 200809L
#include "cpu/cpu_backend.h"
#include "util/host_memory.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libs/openblas_gemm.h"
#include "profiling/wall_clock.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_output_layer.h"
#include "core/dataset.h"
#include "core/distributed.h"
#include "core/memory_plan.h"

/* Time spent inside operations since take_operation_times last read it. */
typedef struct {
    double gemm_seconds, other_seconds;
} operation_clock;

typedef struct {
    operation_clock clock;
    /* tiled only: the fused output layer's scratch (output_layer_prepare) */
    float *output_layer_scratch;
    size_t output_layer_scratch_floats;
} cpu_state;

static cpu_state *cpu_of(backend *be) { return be->state; }
static operation_clock *clock_of(backend *be) { return &cpu_of(be)->clock; }

/* ---- GEMM: the one operation in which the CPU implementations differ ---- */

/* The epilogue as a pass of its own over C, after the product. */
static void apply_epilogue(int m, int n, float *c, int ldc, const gemm_epilogue *epilogue) {
    if (!epilogue) return;
    if (epilogue->bias || epilogue->relu)
        cpu_bias_activation(c, epilogue->bias, m, n, ldc, epilogue->relu);
    if (epilogue->relu_mask) cpu_relu_backward(c, epilogue->relu_mask, m, n, ldc);
}

static void gemm_naive(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc, const gemm_epilogue *epilogue) {
    double started = wall_seconds();
    cpu_gemm_naive(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    apply_epilogue(m, n, c, ldc, epilogue);
    clock_of(be)->gemm_seconds += wall_seconds() - started;
}

static void gemm_tiled(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc, const gemm_epilogue *epilogue) {
    double started = wall_seconds();
    cpu_gemm_tiled_fused(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue);
    clock_of(be)->gemm_seconds += wall_seconds() - started;
}

static void gemm_blas(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc, const gemm_epilogue *epilogue) {
    double started = wall_seconds();
    cpu_gemm_blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    apply_epilogue(m, n, c, ldc, epilogue);
    clock_of(be)->gemm_seconds += wall_seconds() - started;
}

/* Adds the time since `started` to the other operations' count. */
static void count_other(backend *be, double started) {
    clock_of(be)->other_seconds += wall_seconds() - started;
}

static void take_operation_times(backend *be, double *gemm_ms, double *other_ms) {
    operation_clock *clock = clock_of(be);
    *gemm_ms = 1e3 * clock->gemm_seconds;
    *other_ms = 1e3 * clock->other_seconds;
    *clock = (operation_clock){0};
}

/* ---- memory ---- */

static void *host_alloc(backend *be, size_t bytes) {
    (void)be;
    return aligned_alloc_or_exit(64, bytes, "a buffer of the CPU implementation");
}

static void host_release(backend *be, void *p) {
    (void)be;
    free(p);
}

static void host_copy(backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    memcpy(dst, src, bytes);
}

static size_t host_memory_left(backend *be) {
    (void)be;
    return host_memory_available();
}

static void nothing_to_wait_for(backend *be) { (void)be; }

/* ---- the operations, forwarded to cpu_ops.c ---- */

static int32_t first_row(const pass_cursor *cursor) { return cursor ? cursor->first_row : 0; }

static void softmax_cross_entropy(backend *be, const float *logits, const uint8_t *labels, int rows,
                                  int classes, float grad_scale, float label_smoothing, float *grad,
                                  float *bias_grad, float *row_loss, float *row_correct,
                                  int32_t *prediction, const pass_cursor *cursor) {
    double started = wall_seconds();
    int32_t o = first_row(cursor);
    cpu_softmax_cross_entropy(logits, labels, rows, classes, grad_scale, label_smoothing, grad,
                              row_loss ? row_loss + o : NULL, row_correct ? row_correct + o : NULL,
                              prediction ? prediction + o : NULL);
    if (bias_grad) cpu_column_sums(grad, rows, classes, bias_grad);
    count_other(be, started);
}

/* The output layer in one parallel region instead of five (cpu_output_layer.c), offered by the
 * tiled implementation; naive and blas keep the unfused step. Its time counts as GEMM time:
 * most of it is the layer's three products. */
static bool output_layer_prepare(backend *be, int max_rows, int in, int classes) {
    if (classes > CPU_OUTPUT_LAYER_MAX_CLASSES) return false;
    cpu_state *cpu = cpu_of(be);
    size_t floats = cpu_output_layer_scratch_floats(max_rows, in, classes);
    if (floats > cpu->output_layer_scratch_floats) {
        free(cpu->output_layer_scratch);
        cpu->output_layer_scratch = host_alloc(be, floats * sizeof(float));
        cpu->output_layer_scratch_floats = floats;
    }
    return true;
}

static void output_layer(backend *be, const output_layer_step *step) {
    double started = wall_seconds();
    cpu_output_layer(step, cpu_of(be)->output_layer_scratch); /* rows <= max_rows: model.c */
    clock_of(be)->gemm_seconds += wall_seconds() - started;
}

static void column_sums(backend *be, const float *matrix, int rows, int cols, float *sums) {
    double started = wall_seconds();
    cpu_column_sums(matrix, rows, cols, sums);
    count_other(be, started);
}

static void sum(backend *be, const float *x, size_t n, float *result) {
    double started = wall_seconds();
    *result = cpu_sum(x, n);
    count_other(be, started);
}

static void advance_cursor(backend *be, pass_cursor *cursor, int rows) {
    (void)be;
    cursor->first_row += rows;
    cursor->optimizer_steps++;
}

static void sgd_momentum_step(backend *be, float *param, float *velocity, const float *grad,
                              size_t n, lr_schedule schedule, float momentum,
                              const weight_decay *decay, pass_cursor *cursor, int rows) {
    double started = wall_seconds();
    float lr = schedule_lr(schedule, cursor->optimizer_steps);
    if (decay) cpu_decay_weights(param, decay, lr);
    cpu_sgd_momentum_step(param, velocity, grad, n, lr, momentum);
    advance_cursor(be, cursor, rows);
    count_other(be, started);
}

static void adam_step(backend *be, float *param, float *m, float *v, const float *grad, size_t n,
                      lr_schedule schedule, float beta1, float beta2, float eps,
                      const weight_decay *decay, pass_cursor *cursor, int rows) {
    double started = wall_seconds();
    float lr = schedule_lr(schedule, cursor->optimizer_steps);
    if (decay) cpu_decay_weights(param, decay, lr);
    cpu_adam_step(param, m, v, grad, n, lr, beta1, beta2, eps, cursor->optimizer_steps + 1);
    advance_cursor(be, cursor, rows);
    count_other(be, started);
}

/* ---- batches: gathered from the host data set into one reusable buffer ---- */

struct batch_feed {
    backend *be;
    const dataset *data;
    int max_rows;
    int32_t *order; /* the current pass's samples: count indices (room for data->count) */
    int count;
    float *x;       /* max_rows × features */
    uint8_t *y;     /* max_rows */
};

static batch_feed *feed_create(backend *be, const dataset *data, int max_rows, feed_options opts) {
    (void)opts; /* the CPU reads host memory in place: there is no placement to choose */
    batch_feed *feed = zalloc_or_exit(sizeof *feed, "the batch feed");
    feed->be = be;
    feed->data = data;
    feed->max_rows = max_rows;
    feed->order = host_alloc(be, (size_t)data->count * sizeof(int32_t));
    feed->x = host_alloc(be, (size_t)max_rows * data->features * sizeof(float));
    feed->y = host_alloc(be, (size_t)max_rows);
    return feed;
}

static void feed_start_pass(batch_feed *feed, const int32_t *order, int count) {
    if (!order) return; /* the last pass's again */
    memcpy(feed->order, order, (size_t)count * sizeof(int32_t));
    feed->count = count;
}

static batch_view feed_next(batch_feed *feed, int rows, const pass_cursor *cursor) {
    const dataset *d = feed->data;
    if (rows > feed->max_rows || cursor->first_row + rows > feed->count) {
        fprintf(stderr, "mlp_train: internal error: batch of %d rows past the feed's end\n", rows);
        exit(1);
    }
    double started = wall_seconds();
    cpu_gather_normalize(d->pixels, d->labels, feed->order + cursor->first_row, rows, d->features,
                         d->scale, d->shift, feed->x, feed->y);
    count_other(feed->be, started);
    return (batch_view){feed->x, feed->y, rows};
}

/* Nothing on the CPU is recorded: each step runs as it is queued. */
static bool feed_recordable(const batch_feed *feed) {
    (void)feed;
    return false;
}

static void feed_destroy(batch_feed *feed) {
    if (!feed) return;
    free(feed->order);
    free(feed->x);
    free(feed->y);
    free(feed);
}

/* ---- timing: the CPU finishes each operation before returning, so the clock suffices ---- */

struct timing_stamp {
    double seconds;
};

static timing_stamp *stamp_create(backend *be) { return host_alloc(be, sizeof(timing_stamp)); }

static void stamp_record(backend *be, timing_stamp *s) {
    (void)be;
    s->seconds = wall_seconds();
}

static double stamp_elapsed_ms(backend *be, timing_stamp *start, timing_stamp *end) {
    (void)be;
    return 1e3 * (end->seconds - start->seconds);
}

static void stamp_destroy(backend *be, timing_stamp *s) { host_release(be, s); }

static void destroy(backend *be) {
    free(cpu_of(be)->output_layer_scratch);
    free(be->state);
    free(be);
}

/* ---- ranks: the gradients summed in host memory by MPI ---- */

static void all_reduce_sum(backend *be, float *data, size_t n) {
    (void)be;
    distributed_sum(data, n);
}

static void reduce_scatter_sum(backend *be, float *data, size_t n) {
    (void)be;
    distributed_reduce_scatter(data, n);
}

static void all_gather(backend *be, float *data, size_t n) {
    (void)be;
    distributed_all_gather_shards(data, n);
}

void cpu_backend_join(backend *be) {
    be->rank = distributed_rank();
    be->ranks = distributed_ranks();
    be->all_reduce_sum = all_reduce_sum;
    be->reduce_scatter_sum = reduce_scatter_sum;
    be->all_gather = all_gather;
    be->all_reduce_name = "MPI_Allreduce";
}

/* OpenMP's threads and those of OpenBLAS's pthreads build both spin for a while after their
 * work, waiting for more. With two pools of `threads` each, a training step that alternates
 * GEMMs with element-wise loops has twice as many busy threads as cores, and a loop's barrier
 * waits for whichever of its threads the kernel has just descheduled. So when OpenBLAS has its
 * own pool, the blas implementation gives it the cores and runs its element-wise loops (a few
 * percent of the step) on the calling thread. With OpenBLAS's OpenMP build, which
 * CMakeLists.txt prefers, both share one pool and nothing of this applies. */
static int configured_threads; /* cpu_set_threads's count, for the description */

void cpu_set_threads(int threads, const char *impl) {
    bool blas = strcmp(impl, "blas") == 0; /* OpenBLAS is loaded by its first use: not otherwise */
    omp_set_num_threads(blas && openblas_has_own_threads() ? 1 : threads);
    if (blas) openblas_threads(threads);
    configured_threads = threads;
}

static const struct {
    const char *name;
    gemm_fn *gemm;
    const char *description;
} cpu_impls[] = {
    {"naive", gemm_naive, "naive loops"},
    {"tiled", gemm_tiled, "cache-tiled GEMM"},
    {"blas", gemm_blas, "OpenBLAS"},
};

backend *cpu_backend_create(const char *impl) {
    int chosen = -1;
    for (int i = 0; i < (int)(sizeof cpu_impls / sizeof cpu_impls[0]); i++)
        if (strcmp(impl, cpu_impls[i].name) == 0) chosen = i;
    if (chosen < 0) return NULL;
    backend *be = calloc(1, sizeof *be);
    cpu_state *cpu = calloc(1, sizeof *cpu);
    if (!be || !cpu) {
        free(be);
        free(cpu);
        return NULL;
    }
    *be = (backend){
        .device_name = "cpu",
        .impl_name = cpu_impls[chosen].name,
        .state = cpu,
        .alloc = host_alloc,
        .release = host_release,
        .upload = host_copy,
        .download = host_copy,
        .alloc_host = host_alloc,
        .release_host = host_release,
        .download_queued = host_copy,
        .synchronize = nothing_to_wait_for,
        .memory_available = host_memory_left,
        .gemm = cpu_impls[chosen].gemm,
        .softmax_cross_entropy = softmax_cross_entropy,
        .column_sums = column_sums,
        .sum = sum,
        .sgd_momentum_step = sgd_momentum_step,
        .adam_step = adam_step,
        .advance_cursor = advance_cursor,
        .feed_create = feed_create,
        .feed_start_pass = feed_start_pass,
        .feed_next = feed_next,
        .feed_recordable = feed_recordable,
        .feed_destroy = feed_destroy,
        .ranks = 1,
        .stamp_create = stamp_create,
        .stamp_record = stamp_record,
        .stamp_elapsed_ms = stamp_elapsed_ms,
        .stamp_destroy = stamp_destroy,
        .take_operation_times = take_operation_times,
        .destroy = destroy,
    };
    if (cpu_impls[chosen].gemm == gemm_tiled) {
        be->output_layer_prepare = output_layer_prepare;
        be->output_layer = output_layer;
    }
    /* The count cpu_set_threads set, not this thread's: OpenMP's thread count is a setting of
     * each thread, and main() creates the backend on a thread of its own. */
    bool blas = cpu_impls[chosen].gemm == gemm_blas;
    int threads = configured_threads ? configured_threads : omp_get_max_threads();
    snprintf(be->description, sizeof be->description, "CPU, %d thread%s, %s", threads,
             threads == 1 ? "" : "s", blas ? openblas_description() : cpu_impls[chosen].description);
    return be;
}
