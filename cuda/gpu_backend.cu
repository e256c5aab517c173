/* The operation table on the GPU. Memory is device memory; every operation is queued on one
 * stream and returns at once; only download() and synchronize() wait. A timing stamp is a CUDA
 * event on that stream, and a recording is a CUDA graph captured from it. The naive, tiled and
 * blas implementations differ in their GEMM: the ladder's rung 1 (gemm_1_naive.cu), rung 5
 * (gemm_5_tiled.cu) or cuBLAS, and tiled runs a step's output layer in one operation
 * (output_layer.cu); in TF32 and BF16 (--precision), rung 10 (gemm_10_tiled_tensor.cu) or
 * cuBLAS's reduced-precision compute types; tiled's BF16 reads BF16 copies of its operands, and
 * its TF32 an FP16 copy of the batch, where they are kept (gpu_narrow_copies.h). The fused
 * implementation is the tiled one plus a whole training pass in one persistent kernel
 * (fused_pass.cu), in FP32 only. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <utility>

#include "libs/cublas_gemm.h"
#include "libs/cuda_check.h"
#include "cuda/gpu_backend.h"
#include "cuda/kernels/gpu_kernels.h"
#include "cuda/gemm/gemm_common.cuh" /* vectors_aligned */
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/fused_pass.h"
#include "cuda/gpu_state.h"
#ifdef MLP_HAVE_NCCL
#include "cuda/gpu_nccl.h"
#endif
#ifdef MLP_HAVE_MPI
#include "cuda/gpu_p2p.h"
#endif

namespace {

/* ---- GEMM: the one operation in which the GPU implementations differ ---- */

void gemm_naive(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc,
                const gemm_epilogue *epilogue) {
    gpu_gemm_naive(gpu_of(be)->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                   epilogue);
}

/* For the GEMMs without an epilogue of their own (cuBLAS, the tensor-core rungs of the ladder):
 * the unfused element-wise kernels, one more pass over C (M×N, row stride ldc). */
void apply_epilogue(gpu_state *gpu, float *c, int m, int n, int ldc, const gemm_epilogue *epilogue) {
    if (!epilogue) return;
    if (epilogue->bias || epilogue->relu)
        gpu_bias_activation(gpu->stream, c, epilogue->bias, m, n, ldc, epilogue->relu);
    if (epilogue->relu_mask) gpu_relu_backward(gpu->stream, c, epilogue->relu_mask, m, n, ldc);
}

/* Floats from a stored matrix's first element to past its last: op(X) is rows×cols, X itself
 * cols×rows when transposed, row stride ld. */
size_t stored_extent(bool trans, int rows, int cols, int ld) {
    if (trans) std::swap(rows, cols);
    return rows == 0 || cols == 0 ? 0 : (size_t)(rows - 1) * ld + cols;
}

/* The current 16-bit copy of op(X) (rows×cols, row stride ld; gpu_narrow_copies.h), if its rows
 * copy 16 bytes at a time; else nullptr, and the product reads X (unaligned, a copy would go
 * element by element, slower than the FP32 array's 16-byte copies). */
template <typename T>
const T *aligned_copy(gpu_state *gpu, const float *x, bool trans, int rows, int cols, int ld) {
    const T *copy = static_cast<const T *>(
        gpu_narrow_copy_of(&gpu->narrow_copies, x, stored_extent(trans, rows, cols, ld)));
    return copy && vectors_aligned(copy, ld) ? copy : nullptr;
}

/* C (m×n, row stride ldc) is about to be written without a copy, and not while the output
 * layer's sums may read it. */
void c_written(gpu_state *gpu, const float *c, int m, int n, int ldc) {
    size_t extent = stored_extent(false, m, n, ldc);
    gpu_narrow_copies_written(&gpu->narrow_copies, c, extent * sizeof(float));
    gpu_join_output_sums_reading(gpu, c, extent);
}

/* The ladder's fastest FP32 rung (gemm_5_tiled.cu, docs/kernels.md): rung 4's warp tiles fed by a
 * cp.async pipeline; faster than rung 3 (gemm_3_blocked.cu) on every product of the MLP. */
void gemm_tiled(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc,
                const gemm_epilogue *epilogue) {
    c_written(gpu_of(be), c, m, n, ldc);
    gpu_gemm_tiled(gpu_of(be)->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                   epilogue);
}

/* TF32 and BF16 tensor cores: ladder rung 10 (gemm_10_tiled_tensor.cu), rung 5's pipeline and
 * cluster split-K with the epilogue fused, the factors rounded on their way into the tensor cores
 * (no pass over A or B first): the launches of the FP32 step. Where the operands have copies,
 * rung 10 reads those: half the bytes, the same bits. In TF32 only A can (the batch, in FP16). */
void gemm_tiled_tf32(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc, const gemm_epilogue *epilogue) {
    gpu_state *gpu = gpu_of(be);
    const __half *a16 = aligned_copy<__half>(gpu, a, ta, m, k, lda);
    c_written(gpu, c, m, n, ldc);
    if (a16)
        gpu_gemm_tiled_tf32_fp16_a(gpu->stream, ta, tb, m, n, k, alpha, a16, lda, b, ldb, beta, c,
                                   ldc, epilogue);
    else
        gpu_gemm_tiled_tf32(gpu->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                            epilogue);
}

/* In BF16 both A and B need copies. */
void gemm_tiled_bf16(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc, const gemm_epilogue *epilogue) {
    gpu_state *gpu = gpu_of(be);
    const __nv_bfloat16 *a16 = aligned_copy<__nv_bfloat16>(gpu, a, ta, m, k, lda);
    const __nv_bfloat16 *b16 = aligned_copy<__nv_bfloat16>(gpu, b, tb, k, n, ldb);
    c_written(gpu, c, m, n, ldc);
    if (a16 && b16)
        gpu_gemm_tiled_bf16_stored(gpu->stream, ta, tb, m, n, k, alpha, a16, lda, b16, ldb, beta,
                                   c, ldc, epilogue);
    else
        gpu_gemm_tiled_bf16(gpu->stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                            epilogue);
}

/* A new device buffer of `bytes` in place of `old`, which the stream may still be reading. */
void *replace_device_buffer(gpu_state *gpu, void *old, size_t bytes) {
    gpu_join_side_streams(gpu);
    CUDA_CHECK(cudaStreamSynchronize(gpu->stream));
    if (old) CUDA_CHECK(cudaFree(old));
    return gpu_alloc_or_exit(bytes);
}

/* cuBLAS has no epilogue: it follows as element-wise kernels (one more pass over C). */
void gemm_cublas(backend *be, bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc,
                 const gemm_epilogue *epilogue) {
    gpu_state *gpu = gpu_of(be);
    cublas_gemm(gpu->cublas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    apply_epilogue(gpu, c, m, n, ldc, epilogue);
}

/* FP32 data, CUBLAS_COMPUTE_32F_FAST_TF32: cuBLAS rounds the factors to TF32 itself. */
void gemm_cublas_tf32(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc, const gemm_epilogue *epilogue) {
    gpu_state *gpu = gpu_of(be);
    cublas_gemm_tf32(gpu->cublas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    apply_epilogue(gpu, c, m, n, ldc, epilogue);
}

/* FP32 data, CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS converts the factors itself (to BF16, or to
 * TF32 where it finds that faster), so no BF16 copies are made here. */
void gemm_cublas_bf16(backend *be, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc, const gemm_epilogue *epilogue) {
    gpu_state *gpu = gpu_of(be);
    cublas_gemm_fast_bf16(gpu->cublas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    apply_epilogue(gpu, c, m, n, ldc, epilogue);
}

/* ---- memory ---- */

void *device_alloc(backend *be, size_t bytes) {
    (void)be;
    return gpu_alloc_or_exit(bytes);
}

void device_release(backend *be, void *p) {
    gpu_narrow_copies_forget_origin(&gpu_of(be)->narrow_copies, p);
    if (p) CUDA_CHECK(cudaFree(p));
}

/* The host buffer may be reused as soon as this returns, so the copy is waited for. */
void upload(backend *be, void *dst, const void *src, size_t bytes) {
    gpu_join_side_streams(gpu_of(be)); /* a gather ahead may be reading what is overwritten */
    cudaStream_t stream = gpu_of(be)->stream;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    gpu_refresh_narrow_copies(gpu_of(be), dst, bytes);
}

/* The parameters' BF16 copy (--precision bf16, tiled and fused): written by every update and
 * rounded again after every upload and all-gather; stale until the first. */
void parameters_allocated(backend *be, float *params, size_t count) {
    gpu_state *gpu = gpu_of(be);
    if (gpu->narrow_copies.format != NARROW_BF16) return;
    if (gpu->params_bf16) {
        gpu_narrow_copies_forget_copy(&gpu->narrow_copies, gpu->params_bf16);
        CUDA_CHECK(cudaFree(gpu->params_bf16));
    }
    gpu->params_bf16 = static_cast<__nv_bfloat16 *>(gpu_alloc_or_exit(count * sizeof(__nv_bfloat16)));
    gpu_narrow_copy_add_stale(&gpu->narrow_copies, gpu->params_bf16, params, count);
}

/* After a wait for the device: an all-reduce that gave up on a rank ends the process. */
void check_ranks(gpu_state *gpu) {
#ifdef MLP_HAVE_MPI
    gpu_p2p_check(gpu->p2p);
#else
    (void)gpu;
#endif
}

void download(backend *be, void *dst, const void *src, size_t bytes) {
    gpu_join_side_streams(gpu_of(be));
    cudaStream_t stream = gpu_of(be)->stream;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    check_ranks(gpu_of(be));
}

void *pinned_alloc(backend *be, size_t bytes) {
    (void)be;
    void *p = nullptr;
    cudaError_t status = cudaMallocHost(&p, bytes ? bytes : 1);
    if (status != cudaSuccess) {
        std::fprintf(stderr, "mlp_train: cannot allocate %zu bytes of pinned host memory: %s\n",
                     bytes, cudaGetErrorString(status));
        std::exit(1);
    }
    return p;
}

void pinned_release(backend *be, void *p) {
    (void)be;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* Into pinned memory the copy is asynchronous: the host goes on, synchronize() waits. */
void download_queued(backend *be, void *dst, const void *src, size_t bytes) {
    gpu_join_side_streams(gpu_of(be));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, gpu_of(be)->stream));
}

void synchronize(backend *be) {
    gpu_join_side_streams(gpu_of(be));
    CUDA_CHECK(cudaStreamSynchronize(gpu_of(be)->stream));
    check_ranks(gpu_of(be));
}

size_t memory_available(backend *be) {
    (void)be;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return free_bytes;
}

/* ---- the other operations: kernels/ ---- */

void softmax_cross_entropy(backend *be, const float *logits, const uint8_t *labels, int rows,
                           int classes, float grad_scale, float label_smoothing, float *grad,
                           float *bias_grad, float *row_loss, float *row_correct,
                           int32_t *prediction, const pass_cursor *cursor) {
    gpu_state *gpu = gpu_of(be);
    if (grad) gpu_narrow_copies_written(&gpu->narrow_copies, grad, (size_t)rows * classes * sizeof(float));
    gpu_softmax_cross_entropy(gpu->stream, logits, labels, rows, classes, grad_scale,
                              label_smoothing, grad, bias_grad, row_loss, row_correct, prediction,
                              cursor, gpu->softmax_scratch);
}

/* The output layer in three launches (output_layer.cu) instead of seven. Offered by the tiled
 * implementation (and so by fused where it trains step by step), in every precision: its
 * products (N = 10 classes) are about 1% of a step's multiply-adds and stay FP32 (their kernel
 * has no tensor-core path); naive and blas keep the unfused step, which is what they are there
 * to show. Its scratch is set aside here, before any recording. */
bool output_layer_prepare(backend *be, int max_rows, int in, int classes) {
    if (!gpu_output_layer_fits(in, classes)) return false;
    gpu_state *gpu = gpu_of(be);
    const size_t delta_count = (size_t)max_rows * in; /* the hidden delta's BF16 copy */
    if (gpu->narrow_copies.format == NARROW_BF16 && delta_count > gpu->delta_bf16_count) {
        if (gpu->delta_bf16) gpu_narrow_copies_forget_copy(&gpu->narrow_copies, gpu->delta_bf16);
        gpu->delta_bf16 = static_cast<__nv_bfloat16 *>(
            replace_device_buffer(gpu, gpu->delta_bf16, delta_count * sizeof(__nv_bfloat16)));
        gpu->delta_bf16_count = delta_count;
    }
    size_t floats = gpu_output_layer_scratch_floats(max_rows, in, classes);
    if (floats <= gpu->output_layer_scratch_floats) return true;
    gpu->output_layer_scratch =
        static_cast<float *>(replace_device_buffer(gpu, gpu->output_layer_scratch, floats * sizeof(float)));
    gpu->output_layer_scratch_floats = floats;
    return true;
}

/* The sums of the rows' partials go on sums_stream, so that layer 1's weight gradient (which
 * needs only hidden_delta) starts as soon as the rows are done; the update joins them. */
void output_layer(backend *be, const output_layer_step *step) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_output_sums(gpu); /* the scratch is about to be rewritten */
    gpu_output_layer_rows(gpu->stream, *step, gpu->output_layer_scratch, gpu->delta_bf16); /* rows <= max_rows: model.c */
    if (gpu->delta_bf16)
        gpu_narrow_copy_bind(&gpu->narrow_copies, gpu->delta_bf16, step->hidden_delta, (size_t)step->rows * step->in);
    CUDA_CHECK(cudaEventRecord(gpu->rows_done, gpu->stream));
    CUDA_CHECK(cudaStreamWaitEvent(gpu->sums_stream, gpu->rows_done, 0));
    gpu_output_layer_sums(gpu->sums_stream, *step, gpu->output_layer_scratch);
    CUDA_CHECK(cudaEventRecord(gpu->sums_ready, gpu->sums_stream));
    gpu->sums_pending = true;
    gpu->sums_inputs[0] = step->hidden;
    gpu->sums_inputs[1] = step->hidden_delta;
    gpu->sums_input_floats = (size_t)step->rows * step->in;
}

void column_sums(backend *be, const float *matrix, int rows, int cols, float *sums) {
    gpu_narrow_copies_written(&gpu_of(be)->narrow_copies, sums, (size_t)cols * sizeof(float));
    gpu_column_sums(gpu_of(be)->stream, matrix, rows, cols, sums);
}

void sum(backend *be, const float *x, size_t n, float *result) {
    gpu_narrow_copies_written(&gpu_of(be)->narrow_copies, result, sizeof(float));
    gpu_sum(gpu_of(be)->stream, x, n, result);
}

/* The part of a BF16 copy that the update of param[0..n) writes beside it (nullptr: none); the
 * copy is current once an update has written all of it. */
__nv_bfloat16 *updated_copy(gpu_state *gpu, const float *param, size_t n) {
    gpu_narrow_copy *e = gpu_narrow_copy_covering(&gpu->narrow_copies, param, n);
    if (!e) {
        gpu_narrow_copies_written(&gpu->narrow_copies, param, n * sizeof(float));
        return nullptr;
    }
    if (param == e->origin && n == e->count) e->current = true;
    return static_cast<__nv_bfloat16 *>(e->copy) + (param - e->origin); /* only BF16 has these */
}

void sgd_momentum_step(backend *be, float *param, float *velocity, const float *grad, size_t n,
                       lr_schedule lr, float momentum, const weight_decay *decay,
                       pass_cursor *cursor, int rows) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_side_streams(gpu);
    gpu_sgd_momentum_step(gpu->stream, param, velocity, grad, n, lr, momentum, decay,
                          updated_copy(gpu, param, n),
                          gpu_step_end{cursor, rows, gpu->update_blocks_done});
}

void adam_step(backend *be, float *param, float *m, float *v, const float *grad, size_t n,
               lr_schedule lr, float beta1, float beta2, float eps, const weight_decay *decay,
               pass_cursor *cursor, int rows) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_side_streams(gpu);
    gpu_adam_step(gpu->stream, param, m, v, grad, n, lr, beta1, beta2, eps, decay,
                  updated_copy(gpu, param, n), gpu_step_end{cursor, rows, gpu->update_blocks_done});
}

void advance_cursor(backend *be, pass_cursor *cursor, int rows) {
    gpu_join_side_streams(gpu_of(be)); /* a gather ahead reads the cursor */
    gpu_advance_cursor(gpu_of(be)->stream, cursor, rows);
}

/* ---- timing: CUDA events on the stream ---- */

} // namespace

struct timing_stamp {
    cudaEvent_t event;
};

namespace {

timing_stamp *stamp_create(backend *be) {
    (void)be;
    timing_stamp *s = new timing_stamp;
    CUDA_CHECK(cudaEventCreate(&s->event));
    return s;
}

void stamp_record(backend *be, timing_stamp *s) {
    gpu_join_side_streams(gpu_of(be)); /* a phase's time includes its work on the side */
    CUDA_CHECK(cudaEventRecord(s->event, gpu_of(be)->stream));
}

double stamp_elapsed_ms(backend *be, timing_stamp *start, timing_stamp *end) {
    (void)be;
    float ms;
    CUDA_CHECK(cudaEventSynchronize(end->event));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start->event, end->event));
    return ms;
}

void stamp_destroy(backend *be, timing_stamp *s) {
    (void)be;
    CUDA_CHECK(cudaEventDestroy(s->event));
    delete s;
}

/* ---- recording: a CUDA graph captured from the stream ---- */

} // namespace

/* A recording's decisions about 16-bit copies (gpu_narrow_copies.h) hold where the copies it found
 * current are current whenever it is replayed: it keeps them (assumed), and every replay checks. */
struct recording {
    cudaGraphExec_t graph;
    gpu_narrow_copies_snapshot assumed;
};

namespace {

/* A recording read the copies of `assumed` as current: they must be so when it is replayed. */
void require_narrow_copies(gpu_state *gpu, const gpu_narrow_copies_snapshot &assumed, const char *when) {
    if (gpu_narrow_copies_still_current(&gpu->narrow_copies, assumed)) return;
    std::fprintf(stderr, "mlp_train: internal error: a recorded step %s the 16-bit copies it read\n", when);
    std::exit(1);
}

/* Thread-local capture: a CUDA call of this thread that is illegal while capturing (a
 * synchronizing copy, say) fails loudly instead of being recorded or run. */
void record_begin(backend *be) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_side_streams(gpu); /* work forked before the capture is waited for outside it */
    gpu->recording_assumes = gpu_narrow_copies_current(&gpu->narrow_copies);
    gpu->capture_serial++;
    CUDA_CHECK(cudaStreamBeginCapture(gpu->stream, cudaStreamCaptureModeThreadLocal));
}

recording *record_end(backend *be) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_side_streams(gpu); /* a capture must end with every stream it forked joined */
    gpu->capture_serial++;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamEndCapture(gpu->stream, &graph));
    recording *r = new recording;
    CUDA_CHECK(cudaGraphInstantiate(&r->graph, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph)); /* the executable graph is a copy */
    r->assumed = gpu->recording_assumes;
    require_narrow_copies(gpu, r->assumed, "ends without"); /* so that replays can follow it */
    return r;
}

void replay(backend *be, recording *r) {
    require_narrow_copies(gpu_of(be), r->assumed, "is replayed without");
    CUDA_CHECK(cudaGraphLaunch(r->graph, gpu_of(be)->stream));
}

void recording_destroy(backend *be, recording *r) {
    (void)be;
    CUDA_CHECK(cudaGraphExecDestroy(r->graph));
    delete r;
}

void destroy(backend *be) {
    gpu_state *gpu = gpu_of(be);
    gpu_join_side_streams(gpu);
    CUDA_CHECK(cudaStreamSynchronize(gpu->stream));
#ifdef MLP_HAVE_NCCL
    if (gpu->nccl) gpu_nccl_leave(gpu->nccl);
#endif
#ifdef MLP_HAVE_MPI
    if (gpu->p2p) gpu_p2p_leave(gpu->p2p);
#endif
    if (gpu->fused) fused_pass_destroy(gpu->fused);
    if (gpu->cublas) cublas_gemm_handle_destroy(gpu->cublas);
    if (gpu->cublas_workspace) CUDA_CHECK(cudaFree(gpu->cublas_workspace));
    if (gpu->output_layer_scratch) CUDA_CHECK(cudaFree(gpu->output_layer_scratch));
    CUDA_CHECK(cudaFree(gpu->params_bf16));
    CUDA_CHECK(cudaFree(gpu->delta_bf16));
    gpu_softmax_scratch_destroy(gpu->softmax_scratch);
    CUDA_CHECK(cudaFree(gpu->update_blocks_done));
    CUDA_CHECK(cudaEventDestroy(gpu->rows_done));
    CUDA_CHECK(cudaEventDestroy(gpu->sums_ready));
    CUDA_CHECK(cudaStreamDestroy(gpu->sums_stream));
    CUDA_CHECK(cudaEventDestroy(gpu->batch_wanted));
    CUDA_CHECK(cudaEventDestroy(gpu->batch_ready));
    CUDA_CHECK(cudaStreamDestroy(gpu->feed_stream));
    CUDA_CHECK(cudaEventDestroy(gpu->grads_ready));
    CUDA_CHECK(cudaEventDestroy(gpu->reduced));
    CUDA_CHECK(cudaStreamDestroy(gpu->reduce_stream));
    CUDA_CHECK(cudaStreamDestroy(gpu->stream));
    delete gpu;
    delete be;
}

struct gpu_impl {
    const char *name;
    gemm_fn *gemm[PRECISION_COUNT]; /* by gemm_precision; NULL: not in that precision */
    bool fused; /* a whole pass in one persistent kernel, the tiled kernels for the rest */
    bool gathers_ahead; /* the resident feed gathers the next batch beside the step (gpu_feed.cu) */
    const char *description;
};

const gpu_impl gpu_impls[] = {
    {"naive", {gemm_naive, nullptr, nullptr}, false, false, "naive CUDA kernels"},
    {"tiled", {gemm_tiled, gemm_tiled_tf32, gemm_tiled_bf16}, false, true, "tiled CUDA kernels"},
    {"blas", {gemm_cublas, gemm_cublas_tf32, gemm_cublas_bf16}, false, false, "cuBLAS"},
    {"fused", {gemm_tiled, gemm_tiled_tf32, gemm_tiled_bf16}, true, true,
     "fused persistent kernel, tiled kernels for the test pass"},
};

const char *const precision_descriptions[PRECISION_COUNT] = {
    "", ", TF32 tensor cores", ", BF16 tensor cores"};

/* The persistent kernel multiplies in FP32 only: in TF32 or BF16, --impl fused trains step by
 * step with the tiled kernels in that precision, and says so (the trainer prints `why`). */
bool fused_pass_supported_in_precision(backend *be, const training_pass *pass, char *why,
                                       size_t why_size) {
    if (be->precision != PRECISION_FP32) {
        std::snprintf(why, why_size,
                      "the persistent kernel multiplies in FP32 only, so --precision %s runs the "
                      "tiled kernels' %s tensor-core GEMMs",
                      gemm_precision_name(be->precision), gemm_precision_name(be->precision));
        return false;
    }
    return fused_pass_supported(be, pass, why, why_size);
}

/* cuBLAS's recommended workspace on Hopper. Given to cuBLAS once, so that it never allocates
 * one itself, which it could not do while a step is being captured into a graph. */
constexpr size_t CUBLAS_WORKSPACE_BYTES = size_t(32) << 20;

void fill_table(backend *be, const gpu_impl *chosen, gemm_precision precision) {
    be->device_name = "gpu";
    be->impl_name = chosen->name;
    be->precision = precision;
    be->alloc = device_alloc;
    be->release = device_release;
    be->upload = upload;
    be->download = download;
    be->alloc_host = pinned_alloc;
    be->release_host = pinned_release;
    be->download_queued = download_queued;
    be->synchronize = synchronize;
    be->memory_available = memory_available;
    be->parameters_allocated = parameters_allocated;
    be->gemm = chosen->gemm[precision];
    if (chosen->gemm[PRECISION_FP32] == gemm_tiled) { /* tiled and fused, in every precision */
        be->output_layer_prepare = output_layer_prepare;
        be->output_layer = output_layer;
    }
    be->softmax_cross_entropy = softmax_cross_entropy;
    be->column_sums = column_sums;
    be->sum = sum;
    be->sgd_momentum_step = sgd_momentum_step;
    be->adam_step = adam_step;
    be->advance_cursor = advance_cursor;
    be->feed_create = gpu_feed_create;
    be->feed_start_pass = gpu_feed_start_pass;
    be->feed_next = gpu_feed_next;
    be->feed_recordable = gpu_feed_recordable;
    be->feed_destroy = gpu_feed_destroy;
    be->ranks = 1;
    be->record_begin = record_begin;
    be->record_end = record_end;
    be->replay = replay;
    be->recording_destroy = recording_destroy;
    if (chosen->fused) {
        be->pass_supported = fused_pass_supported_in_precision;
        be->run_pass = fused_pass_run;
    }
    be->stamp_create = stamp_create;
    be->stamp_record = stamp_record;
    be->stamp_elapsed_ms = stamp_elapsed_ms;
    be->stamp_destroy = stamp_destroy;
    be->destroy = destroy;
}

} // namespace

void gpu_refresh_narrow_copies(gpu_state *gpu, const void *p, size_t bytes) {
    gpu_narrow_copies *copies = &gpu->narrow_copies;
    for (int i = 0; i < copies->count; i++) {
        gpu_narrow_copy &e = copies->entries[i];
        if (!gpu_narrow_copy_overlaps(&e, p, bytes)) continue;
        if (copies->format == NARROW_BF16) {
            gpu_round_to_bf16(gpu->stream, e.origin, e.count, static_cast<__nv_bfloat16 *>(e.copy));
            e.current = true;
        } else {
            e.current = false; /* FP16 holds TF32 exactly only for the batch's values */
        }
    }
}

void gpu_join_output_sums(gpu_state *gpu) {
    if (!gpu->sums_pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(gpu->stream, gpu->sums_ready, 0));
    gpu->sums_pending = false;
}

void gpu_join_output_sums_reading(gpu_state *gpu, const float *p, size_t floats) {
    for (const float *input : gpu->sums_inputs)
        if (gpu->sums_pending && p < input + gpu->sums_input_floats && input < p + floats)
            gpu_join_output_sums(gpu);
}

void gpu_join_batch_ahead(gpu_state *gpu) {
    if (!gpu->batch_pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(gpu->stream, gpu->batch_ready, 0));
    gpu->batch_pending = false;
}

cudaStream_t gpu_fork_reduce(gpu_state *gpu) {
    CUDA_CHECK(cudaEventRecord(gpu->grads_ready, gpu->stream));
    CUDA_CHECK(cudaStreamWaitEvent(gpu->reduce_stream, gpu->grads_ready, 0));
    if (gpu->sums_pending) CUDA_CHECK(cudaStreamWaitEvent(gpu->reduce_stream, gpu->sums_ready, 0));
    return gpu->reduce_stream;
}

void gpu_reduce_queued(gpu_state *gpu) {
    CUDA_CHECK(cudaEventRecord(gpu->reduced, gpu->reduce_stream));
    gpu->reduce_pending = true;
}

void gpu_join_reduces(gpu_state *gpu) {
    if (!gpu->reduce_pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(gpu->stream, gpu->reduced, 0));
    gpu->reduce_pending = false;
}

void gpu_all_reduce_finish(backend *be) { gpu_join_reduces(gpu_of(be)); }

void gpu_join_side_streams(gpu_state *gpu) {
    gpu_join_output_sums(gpu);
    gpu_join_batch_ahead(gpu);
    gpu_join_reduces(gpu);
}

void *gpu_alloc_or_exit(size_t bytes) {
    void *p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes ? bytes : 1);
    if (status != cudaSuccess) {
        std::fprintf(stderr, "mlp_train: cannot allocate %zu bytes on the GPU: %s\n", bytes,
                     cudaGetErrorString(status));
        std::exit(1);
    }
    return p;
}

extern "C" int gpu_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: none to use, not an error of the program */
        return 0;
    }
    return count;
}

/* Whether an NVIDIA driver is installed: its library can be loaded. */
static bool driver_installed() {
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver) dlclose(driver);
    return driver != nullptr;
}

extern "C" device_presence gpu_probe(char *why, size_t why_size) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    cudaGetLastError(); /* asking is not an error of the program: clear it */
    if (status == cudaSuccess && count > 0) return DEVICE_PRESENT;
    if (status == cudaSuccess || status == cudaErrorNoDevice) {
        std::snprintf(why, why_size, "no CUDA device found");
        return DEVICE_ABSENT;
    }
    if (status == cudaErrorInsufficientDriver && !driver_installed()) {
        std::snprintf(why, why_size, "no NVIDIA driver is installed");
        return DEVICE_ABSENT;
    }
    std::snprintf(why, why_size, "an NVIDIA driver is installed, but CUDA fails: %s (%s)",
                  cudaGetErrorString(status), cudaGetErrorName(status));
    return DEVICE_BROKEN;
}

extern "C" void gpu_use_device(int device) { CUDA_CHECK(cudaSetDevice(device)); }

extern "C" void gpu_backend_fused_whole_always(backend *be, bool always) {
    if (gpu_of(be)->fused) fused_pass_whole_always(gpu_of(be)->fused, always);
}

extern "C" backend *gpu_backend_create(const char *impl, int device, gemm_precision precision) {
    const gpu_impl *chosen = nullptr;
    for (const gpu_impl &candidate : gpu_impls)
        if (std::strcmp(impl, candidate.name) == 0) chosen = &candidate;
    if (!chosen || unsigned(precision) >= PRECISION_COUNT || !chosen->gemm[precision])
        return nullptr;

    gpu_state *gpu = new gpu_state{};
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp properties;
    CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu->sums_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->rows_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->sums_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu->feed_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->batch_wanted, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->batch_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu->reduce_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->grads_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu->reduced, cudaEventDisableTiming));
    if (chosen->gemm[PRECISION_FP32] == gemm_cublas) {
        gpu->cublas = cublas_gemm_handle(gpu->stream);
        gpu->cublas_workspace = gpu_alloc_or_exit(CUBLAS_WORKSPACE_BYTES);
        CUBLAS_CHECK(cublas_library().set_workspace(gpu->cublas, gpu->cublas_workspace,
                                                    CUBLAS_WORKSPACE_BYTES));
    }
    gpu->gather_ahead = chosen->gathers_ahead;
    gpu->narrow_copies.format = chosen->gemm[precision] == gemm_tiled_bf16   ? NARROW_BF16
                                : chosen->gemm[precision] == gemm_tiled_tf32 ? NARROW_TF32_IN_FP16
                                                                             : NARROW_NONE;
    gpu->softmax_scratch = gpu_softmax_scratch_create();
    gpu->update_blocks_done = static_cast<unsigned *>(gpu_alloc_or_exit(sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(gpu->update_blocks_done, 0, sizeof(unsigned)));
    if (chosen->fused && precision == PRECISION_FP32) gpu->fused = fused_pass_create();

    backend *be = new backend{};
    be->state = gpu;
    fill_table(be, chosen, precision);
    std::snprintf(be->description, sizeof be->description, "%.64s, %d SMs, %s%s", properties.name,
                  properties.multiProcessorCount, chosen->description,
                  precision_descriptions[precision]);
    return be;
}
