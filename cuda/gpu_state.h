/* What the GPU backend keeps (gpu_backend.cu) and its batch feeds use (gpu_feed.cu). */
#ifndef MLP_GPU_STATE_H
#define MLP_GPU_STATE_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/backend.h"

#include "cuda/gpu_narrow_copies.h"
#include "cuda/kernels/gpu_kernels.h"

struct gpu_state {
    cudaStream_t stream;                /* every operation of the step runs on it, in order... */
    /* ...but the output layer's sums over rows, which run on sums_stream beside layer 1's
     * weight gradient (nothing reads them before the update): sums_ready marks their end, and
     * sums_pending says that the stream has yet to wait for it (gpu_join_output_sums). */
    cudaStream_t sums_stream;
    cudaEvent_t rows_done, sums_ready;
    bool sums_pending;
    /* The sums read the step's hidden activations and hidden delta back (sums_inputs, rows×in
     * floats each): a GEMM that writes either first waits for them
     * (gpu_join_output_sums_reading). */
    const float *sums_inputs[2];
    size_t sums_input_floats;
    /* ...and the resident feeds' gathers of the next batch, which run on feed_stream beside the
     * current step (gpu_feed.cu): batch_wanted marks where the stream is done with the buffer
     * they fill, batch_ready their end, and batch_pending says that the stream has yet to wait
     * for it. capture_serial changes at every start and end of a recording: a batch gathered
     * ahead is only used by a step queued in the same one (a capture cannot wait for work
     * outside it). */
    cudaStream_t feed_stream;
    cudaEvent_t batch_wanted, batch_ready;
    bool batch_pending;
    unsigned long capture_serial;
    bool gather_ahead; /* the implementation's kernels leave room for a gather beside them */
    /* ...and, under mpirun, the layers' all-reduces started during the backward pass
     * (backend.h, all_reduce_start), on reduce_stream: grads_ready marks the work they wait for
     * on the stream, reduced their end, and reduce_pending says that the stream has yet to wait
     * for it (gpu_fork_reduce, gpu_join_reduces). */
    cudaStream_t reduce_stream;
    cudaEvent_t grads_ready, reduced;
    bool reduce_pending;
    cublasHandle_t cublas;              /* blas implementation only */
    void *cublas_workspace;             /* its workspace, fixed so that its calls can be recorded */
    gpu_softmax_scratch softmax_scratch; /* the output bias gradient's partial sums */
    unsigned *update_blocks_done;       /* the update kernels' count of finished blocks (gpu_step_end) */
    /* tiled and fused: the output layer's dlogits and partial sums (output_layer_prepare) */
    float *output_layer_scratch;
    size_t output_layer_scratch_floats;
    /* tiled and fused: 16-bit copies that the products read where they are current
     * (gpu_narrow_copies.h). --precision bf16: BF16 copies of the batches (gpu_feed.cu), of the
     * output layer's hidden delta and of the parameters; tf32: TF32 copies of the batches, in
     * FP16. Its format is NARROW_NONE where the implementation and precision keep none. */
    gpu_narrow_copies narrow_copies;
    __nv_bfloat16 *params_bf16;  /* parameters_allocated */
    __nv_bfloat16 *delta_bf16;   /* output_layer_prepare: max_rows × in */
    size_t delta_bf16_count;
    gpu_narrow_copies_snapshot recording_assumes; /* the copies current as a recording began */
    struct fused_pass *fused;           /* fused implementation only (fused_pass.cu) */
    struct gpu_nccl *nccl;              /* under mpirun: the ranks' communicator (gpu_nccl.cu)... */
    struct gpu_p2p *p2p;                /* ...or the p2p all-reduce's buffers (gpu_p2p.cu) */
};

inline gpu_state *gpu_of(backend *be) { return static_cast<gpu_state *>(be->state); }

/* Batch feeds: see gpu_feed.cu. */
batch_feed *gpu_feed_create(backend *be, const dataset *data, int max_rows, feed_options opts);
void gpu_feed_start_pass(batch_feed *feed, const int32_t *order, int count);
batch_view gpu_feed_next(batch_feed *feed, int rows, const pass_cursor *cursor);
bool gpu_feed_recordable(const batch_feed *feed);

/* A resident feed's data on the device (for the fused implementation, which gathers its own
 * batches): pixels count×features bytes, labels, and the pass's order. */
struct gpu_resident_data {
    const uint8_t *pixels, *labels;
    const int32_t *order;
    int count, features;
    float scale, shift;
};
gpu_resident_data gpu_feed_resident_data(const batch_feed *feed);
void gpu_feed_destroy(batch_feed *feed);

/* Whether FP16 holds, exactly, every pixel value the gather makes (pixel · scale + shift, one
 * fused multiply-add) rounded to TF32: 11 significant bits fit where the value is zero or from
 * 2^-14 to 65504 in magnitude. Where it does not, a TF32 feed keeps no FP16 copies. */
bool gpu_pixels_fit_tf32_in_fp16(float scale, float shift);

/* After an operation that writes an array alone (an upload, an all-gather): every copy of an
 * array that [p, p + bytes) overlaps is rounded again from it on the stream and current (BF16),
 * or stale (TF32 in FP16, exact only for the batch's values). */
void gpu_refresh_narrow_copies(gpu_state *gpu, const void *p, size_t bytes);

/* Makes the stream wait for the output layer's sums, if they are still running beside it: before
 * their scratch is written again; and, with _reading, only if they read [p, p + floats): before
 * that is written. */
void gpu_join_output_sums(gpu_state *gpu);
void gpu_join_output_sums_reading(gpu_state *gpu, const float *p, size_t floats);

/* Makes the stream wait for the batch gathered ahead on feed_stream, if it is still pending:
 * before the step that reads it (gpu_feed.cu). */
void gpu_join_batch_ahead(gpu_state *gpu);

/* Makes reduce_stream wait for what the stream has queued so far and for the output layer's
 * sums (the gradients a started all-reduce sums), and returns it; gpu_reduce_queued marks the
 * end of the all-reduce queued on it, which gpu_join_reduces makes the stream wait for. */
cudaStream_t gpu_fork_reduce(gpu_state *gpu);
void gpu_reduce_queued(gpu_state *gpu);
void gpu_join_reduces(gpu_state *gpu);

/* all_reduce_finish (backend.h) of either all-reduce: gpu_join_reduces. */
void gpu_all_reduce_finish(backend *be);

/* Makes the stream wait for everything running beside it (the output layer's sums, a batch
 * gathered ahead, the layers' all-reduces): before anything that reads the gradients (the
 * update, an all-reduce, a download), moves a pass cursor (which a gather ahead reads), or waits
 * for the device, and before a recording starts or ends. */
void gpu_join_side_streams(gpu_state *gpu);

/* cudaMalloc that names the size when the device runs out. */
void *gpu_alloc_or_exit(size_t bytes);

#endif
