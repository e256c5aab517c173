/* Launchers of the GPU kernels, one kernel (or one family) per file in this folder. Each queues
 * its kernel on `stream` and checks the launch; none synchronizes. Contracts (shapes, row-major
 * layout, what is read and written) are those of the matching operation in core/backend.h, and
 * each file's comment says how its kernel works. Pointers are device pointers. */
#ifndef MLP_GPU_KERNELS_H
#define MLP_GPU_KERNELS_H

#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/backend.h" /* gemm_epilogue, pass_cursor */
#include "cuda/gemm/gemm_ladder.h" /* the GEMMs */

/* The unfused epilogues (cpu_ops.h's contracts): z (rows×cols, row stride ld) += bias (NULL:
 * none), then max(z, 0) if relu; grad = 0 where activation <= 0. */
void gpu_bias_activation(cudaStream_t stream, float *z, const float *bias, int rows, int cols,
                         int ld, bool relu);
void gpu_relu_backward(cudaStream_t stream, float *grad, const float *activation, int rows,
                       int cols, int ld);

/* softmax_cross_entropy.cu. The output bias gradient (bias_grad, when not NULL) is summed in the
 * same launch, block by block and then by the last block in block order (deterministic); that
 * needs `scratch` from gpu_softmax_scratch_create, one per stream, and at most
 * GPU_SOFTMAX_MAX_CLASSES classes (labels are bytes, so 256 covers every data set). */
typedef struct {
    float *block_sums;     /* GPU_SOFTMAX_MAX_BLOCKS × GPU_SOFTMAX_MAX_CLASSES partial sums */
    unsigned *blocks_done; /* counts finished blocks; back to 0 at the end of each launch */
} gpu_softmax_scratch;
constexpr int GPU_SOFTMAX_MAX_BLOCKS = 1024;
constexpr int GPU_SOFTMAX_MAX_CLASSES = 256;
gpu_softmax_scratch gpu_softmax_scratch_create(void);
void gpu_softmax_scratch_destroy(gpu_softmax_scratch scratch);
void gpu_softmax_cross_entropy(cudaStream_t stream, const float *logits, const uint8_t *labels,
                               int rows, int classes, float grad_scale, float label_smoothing,
                               float *grad, float *bias_grad, float *row_loss, float *row_correct,
                               int32_t *prediction, const pass_cursor *cursor,
                               gpu_softmax_scratch scratch);

/* output_layer.cu: a training step's output layer, forward and backward, in three launches
 * (backend.h, output_layer_step). gpu_output_layer_fits says whether the kernels hold in inputs
 * and classes outputs; scratch holds gpu_output_layer_scratch_floats(rows...) floats (the
 * dlogits and the blocks' partial sums; one per stream). */
constexpr int OUTPUT_LAYER_MAX_IN = 1024;
bool gpu_output_layer_fits(int in, int classes);
size_t gpu_output_layer_scratch_floats(int max_rows, int in, int classes);
void gpu_output_layer(cudaStream_t stream, const output_layer_step &step, float *scratch);
/* The same launches on two streams: the rows (logits, loss, hidden_delta, the dlogits) on
 * `stream`; the sums over rows (weight_grad, bias_grad, hidden_bias_grad) on `sums_stream`,
 * after the rows (the caller orders it so: an event). What comes next in the step (layer 1's
 * weight gradient reads hidden_delta only) need not wait for the sums; but the sums read hidden
 * and hidden_delta, which nothing may write before they end.
 * hidden_delta_bf16 (rows×in; nullptr: none) gets hidden_delta rounded to BF16 (nearest even). */
void gpu_output_layer_rows(cudaStream_t stream, const output_layer_step &step, float *scratch,
                           __nv_bfloat16 *hidden_delta_bf16 = nullptr);
void gpu_output_layer_sums(cudaStream_t sums_stream, const output_layer_step &step, float *scratch);

/* cursor.cu: cursor->first_row += rows, cursor->optimizer_steps += 1, on the device. */
void gpu_advance_cursor(cudaStream_t stream, pass_cursor *cursor, int rows);

void gpu_column_sums(cudaStream_t stream, const float *matrix, int rows, int cols, float *sums);
void gpu_sum(cudaStream_t stream, const float *x, size_t n, float *result);

/* optimizers.cu: the update that ends a step (backend.h); its kernel moves the cursor on
 * (first_row += rows, optimizer_steps += 1). Adam's t = cursor->optimizer_steps + 1, read on the
 * device by every block, so there the last block to finish moves it: blocks_done counts the
 * finished blocks and is back at 0 after each launch (one counter per stream, zeroed before its
 * first use; SGD does not use it). param_bf16 (n values; nullptr: none) gets each updated
 * parameter rounded to BF16 (nearest even). */
typedef struct {
    pass_cursor *cursor;
    int rows;
    unsigned *blocks_done;
} gpu_step_end;
void gpu_sgd_momentum_step(cudaStream_t stream, float *param, float *velocity, const float *grad,
                           size_t n, lr_schedule schedule, float momentum,
                           const weight_decay *decay, __nv_bfloat16 *param_bf16, gpu_step_end end);
void gpu_adam_step(cudaStream_t stream, float *param, float *m, float *v, const float *grad,
                   size_t n, lr_schedule schedule, float beta1, float beta2, float eps,
                   const weight_decay *decay, __nv_bfloat16 *param_bf16, gpu_step_end end);

/* Where a batch's samples are: the data set's pixels (count×features bytes) and labels, and,
 * where order is not NULL, which of them: row r of the batch is sample
 * order[cursor->first_row + ahead + r], for the rows before the pass's end (*pass_rows entries
 * of order, on the device); ahead > 0 gathers a batch before the cursor has moved to it
 * (gpu_feed.cu). order == NULL: row r is sample r (a batch already gathered; the rest unused). */
typedef struct {
    const uint8_t *pixels, *labels;
    const int32_t *order;
    const int32_t *pass_rows;
    const pass_cursor *cursor;
    int ahead;
} gpu_batch_source;

/* x[r] = pixels[i] * scale + shift, y[r] = labels[i] for the batch's rows r (source above): at
 * most `rows`, fewer where the pass ends first; the rows of x and y past them are left as
 * they were. max_blocks caps the grid (0: as many blocks as the rows need): a gather that runs
 * beside other kernels takes the spare threads of a few multiprocessors, not all of them.
 * x_bf16 (nullptr: none) gets x's rows rounded to BF16 (nearest even), and x_tf32 (nullptr:
 * none) rounded to TF32 (ties away) as FP16 (exact for pixel values of zero or at least 2^-14 in
 * magnitude), in the same launch. */
void gpu_gather_normalize(cudaStream_t stream, gpu_batch_source source, int rows, int features,
                          float scale, float shift, float *x, __nv_bfloat16 *x_bf16,
                          __half *x_tf32, uint8_t *y, unsigned max_blocks);

/* p2p_all_reduce.cu: data[0..n) = its sum over the ranks, in rank order, on GPUs that read each
 * other's memory (cuda/gpu_p2p.cu maps the buffers and flags below into every rank). Each rank
 * has two staging buffers (used in turn, call by call) that its peers read, and flags that its
 * peers write: flags[src * P2P_BLOCKS + block] is the last mark block `block` of rank src
 * reached. The launch's P2P_BLOCKS blocks meet their namesakes on the other ranks at each
 * barrier; a wait longer than timeout_ns (0: none) gives up, and the kernel records who it
 * waited for in *failure (host memory) and returns. One-shot: every rank reads all of every
 * peer's data (one barrier). Two-shot: rank r sums chunk r of every rank (reduce-scatter), then
 * copies the other ranks' summed chunks (all-gather): half the traffic of one-shot on 2 ranks,
 * one barrier more. Every element is summed in rank order, once, so every rank holds its bits.
 * Chunk r is rank r's shard (backend.h's shard_begin). The two halves of two-shot also run on
 * their own, one barrier each, for a sharded update (backend.h's reduce_scatter_sum, all_gather):
 * reduce-scatter leaves the other chunks of data as they were. */
constexpr int P2P_MAX_RANKS = 8;
typedef enum { P2P_ONE_SHOT, P2P_TWO_SHOT, P2P_REDUCE_SCATTER, P2P_ALL_GATHER } p2p_pattern;
constexpr int P2P_BLOCKS = 64;
typedef struct {
    int failed;          /* 0 until a wait times out */
    int waited_for_rank; /* the rank that did not arrive */
    unsigned long long mark;
} p2p_failure;
typedef struct {
    float *data;
    size_t n;
    int rank, ranks;
    p2p_pattern pattern;
    size_t chunk_floats; /* chunk k: [k, k + 1)·chunk_floats ∩ [0, n): shard_begin(n, 1, chunks) */
    const float *staging[P2P_MAX_RANKS][2]; /* every rank's (this one's own included) */
    unsigned long long *flags[P2P_MAX_RANKS];
    unsigned long long *generation; /* this rank's calls so far, one count per block */
    unsigned long long timeout_ns;
    p2p_failure *failure;
} p2p_all_reduce_args;
void gpu_p2p_all_reduce(cudaStream_t stream, const p2p_all_reduce_args &args);

#endif
