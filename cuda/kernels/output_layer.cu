/* The output layer of a training step, forward and backward, in three launches (backend.h,
 * output_layer_step), where the unfused step takes seven: the logits' GEMM and its split-K sum,
 * the softmax, the weight gradient's GEMM and its sum, the input gradient's GEMM and the hidden
 * layer's bias sums. The output layer is thin (784-256-10: 10 columns), so its GEMMs are too
 * small to fill the GPU and each costs a launch and a round trip through L2 for little work.
 *
 * Shapes (row-major): h is R×H (the last hidden layer, after its ReLU), W is H×C, b is C.
 *
 * Launch 1, output_layer_rows, on the step's path: one block per 8 rows, a warp per row. W
 * (transposed) and b are copied to shared memory once per block. For row r, lane j holds
 * h[r][j + 32i]:
 *     partial[c] = sum over the lane's k of h[r][k]·W[k][c], for every class c
 *     a transposing sum over the warp leaves logit[c] = b[c] + sum of partial[c] in the lanes
 *     of class c (two lanes a class for C <= 16, one for C <= 32)
 *     softmax across those lanes, as softmax_cross_entropy.cu computes it (label smoothing
 *     included): loss, correctness, the lane's dlogit, stored to the scratch's dlogits (R×C);
 *     then every lane gets every class's dlogit (shuffles)
 *     dh[r][k] = sum over c of dlogits[c]·W[k][c], 0 where h[r][k] <= 0, for the lane's k
 *   At these sizes the kernel is a chain of latencies, not of arithmetic: its global loads are
 *   all issued before the first wait, and the small blocks spread a batch over many SMs.
 * Launches 2 and 3, the sums over rows, may run on a stream of their own (the GPU backend puts
 *   them beside layer 1's weight gradient, which needs only dh): gpu_output_layer_rows and
 *   gpu_output_layer_sums are the launches apart. They read h and dh back from global memory
 *   and the dlogits from the scratch.
 *   Launch 2, partial_sums: a block per 32 hidden units (a lane each) and 64 rows (8 a warp)
 *     writes its plane of the scratch's partial sums over those rows, laid out as
 *       [ dbh (H) | dWᵀ (C×H, dWᵀ[c][k] = sum over rows of h[r][k]·dlogits[r][c]) | db (C) ]
 *     dW is stored class by class so that a warp's stores (consecutive k) are coalesced.
 *   Launch 3, sum_planes: each of those H + H·C + C outputs is the sum of the planes, added in a
 *     fixed order (deterministic): a block takes 32 outputs, its 8 warps every 8th plane, and
 *     warp 0 adds the warps' sums in order.
 *
 * Where asked (--precision bf16: gpu_narrow_copies.h), launch 1 also writes dh rounded to BF16.
 *
 * Limits: H ≤ OUTPUT_LAYER_MAX_IN (a lane holds H/32 values of a row), C ≤ 32 (a lane holds
 * every logit), and W must fit in shared memory; the backend checks them
 * (gpu_output_layer_fits) before it offers the operation. */
#include <cmath>

#include "core/label_smoothing.h"
#include "libs/cuda_check.h"
#include "cuda/kernels/dependent_launch.cuh"
#include "cuda/kernels/gpu_kernels.h"
#include "cuda/kernels/warp_reduce.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int ROWS_PER_BLOCK = WARPS; /* a row per warp */
constexpr int MAX_CLASSES = 32;
constexpr int ROWS_PER_PLANE = 64; /* rows a block of partial_sums adds: 8 a warp */

struct row_args {
    output_layer_step step;
    __nv_bfloat16 *hidden_delta_bf16; /* nullptr: no BF16 copy of hidden_delta */
    float *dlogits; /* R×C */
    smoothed_targets targets; /* of step.label_smoothing */
};

__host__ __device__ int plane_floats(int in, int classes) { return in + in * classes + classes; }
int planes_for(int rows) { return (rows + ROWS_PER_PLANE - 1) / ROWS_PER_PLANE; }

/* The scratch of a step of R rows: the dlogits (R×C), then planes_for(R) planes of partial sums. */
float *planes_in(float *scratch, const output_layer_step &step) {
    return scratch + (size_t)step.rows * step.classes;
}

/* The kernels' class counts: C rounded up to 10 (digits and Fashion-MNIST's ten classes: no
 * padding), 16 or 32; and the classes of the softmax's lane layout (a power of two). */
constexpr int TEN_CLASSES = 10;
int padded_classes(int classes) { return classes <= TEN_CLASSES ? TEN_CLASSES : classes <= 16 ? 16 : MAX_CLASSES; }
__host__ __device__ constexpr int lane_classes(int classes) { return classes <= 16 ? 16 : 32; }

/* Floats of shared memory a block of launch 1 uses: W (transposed and padded) and b. */
size_t row_shared_floats(int in, int classes) {
    int padded = padded_classes(classes);
    return (size_t)(in + 1) * padded + lane_classes(padded);
}

/* The kernels come in sizes: C is padded to CLASSES (10, 16 or 32), VALUES (8 or 32) bounds
 * H / 32, so that the per-lane arrays stay in registers, the loops unroll without a test per
 * class, and the default 784-256-10 pays for 10 classes and 256 inputs, not the maximum.
 * Padding classes have zero weights and bias -inf: logit -inf, probability 0, gradient 0. */

/* W (H×C) into shared memory transposed, as wt (CLASSES rows of H, stride H + 1: wt[c][k] =
 * W[k][c]), so that the lanes' reads of one class (consecutive k) hit distinct banks; the
 * padding classes' rows are zero, and b gets -inf padding up to the lane layout's classes. The
 * loads run along W as it lies in memory (coalesced), COPY_LOADS of them in flight a thread. */
template <int CLASSES>
__device__ void copy_layer(const output_layer_step &p, float *wt, float *bias) {
    constexpr int COPY_LOADS = 16;
    int H = p.in, C = p.classes, count = H * C;
    /* element i = k·C + c; a step of THREADS elements moves k on by rows_per_step and c by
     * classes_per_step (carrying into k), which spares a division per element */
    const int rows_per_step = THREADS / C, classes_per_step = THREADS % C;
    for (int first = threadIdx.x; first < count; first += COPY_LOADS * THREADS) {
        float v[COPY_LOADS];
#pragma unroll
        for (int u = 0; u < COPY_LOADS; u++) {
            int i = first + u * THREADS;
            v[u] = i < count ? p.weights[i] : 0.0f;
        }
        int k = first / C, c = first % C;
#pragma unroll
        for (int u = 0; u < COPY_LOADS; u++) {
            if (first + u * THREADS < count) wt[c * (H + 1) + k] = v[u];
            k += rows_per_step, c += classes_per_step;
            if (c >= C) c -= C, k++;
        }
    }
    for (int i = threadIdx.x; i < (CLASSES - C) * H; i += THREADS) /* the padding classes */
        wt[(C + i / H) * (H + 1) + i % H] = 0.0f;
    if (threadIdx.x < lane_classes(CLASSES))
        bias[threadIdx.x] = threadIdx.x < C ? p.bias[threadIdx.x] : -INFINITY;
}

/* Sums each of the lanes' CLASSES values over the warp, and leaves class c's total in the
 * 32/WIDTH lanes from c·(32/WIDTH) on (returned), WIDTH = lane_classes(CLASSES); classes past
 * CLASSES get 0. Transposing as it goes: at each step a lane keeps half of its values and trades
 * the other half with its partner, so the warp makes about WIDTH shuffles, not 5·CLASSES as a
 * sum per class would. */
template <int CLASSES> __device__ float warp_sum_by_class(const float (&values)[CLASSES]) {
    constexpr int WIDTH = lane_classes(CLASSES), STEPS = WIDTH == 32 ? 5 : 4;
    int lane = threadIdx.x % 32;
    float v[WIDTH];
#pragma unroll
    for (int c = 0; c < WIDTH; c++) v[c] = c < CLASSES ? values[c] : 0.0f;
#pragma unroll
    for (int step = 0; step < STEPS; step++) {
        int half = WIDTH >> (step + 1), offset = 16 >> step;
        bool upper = lane & offset; /* this lane keeps the upper half */
#pragma unroll
        for (int i = 0; i < WIDTH / 2; i++) {
            if (i >= half) break; /* a constant bound, so that both loops unroll */
            float send = upper ? v[i] : v[i + half];
            float keep = upper ? v[i + half] : v[i];
            v[i] = keep + __shfl_xor_sync(WARP_FULL_MASK, send, offset);
        }
    }
    float total = v[0]; /* class lane / (32 / WIDTH), summed over the lanes that differ above */
    for (int offset = 16 / WIDTH; offset > 0; offset /= 2)
        total += __shfl_xor_sync(WARP_FULL_MASK, total, offset);
    return total;
}

/* The sum of x over the classes, where every class sits in `lanes` lanes (each counted once). */
__device__ float sum_over_classes(float x, int lanes) {
    for (int offset = 16; offset >= lanes; offset /= 2) x += __shfl_xor_sync(WARP_FULL_MASK, x, offset);
    return x;
}

/* The warp's row (lane j holds h[j + 32i]) through the layer; the row's dlogits go to dlogits,
 * dh to hidden_delta (and, rounded, to hidden_delta_bf16 unless null). wt (W transposed) and
 * bias are in shared memory. SMOOTH: with label smoothing (compiled apart, so that the step
 * without it is unchanged). */
template <int CLASSES, int VALUES, bool SMOOTH>
__device__ void output_row(const output_layer_step &p, __nv_bfloat16 *hidden_delta_bf16,
                           float *dlogits_out, const float *wt, const float *bias,
                           const float (&h)[VALUES], int row, int label, smoothed_targets targets,
                           int first_row) {
    constexpr int LANES_PER_CLASS = 32 / lane_classes(CLASSES);
    int lane = threadIdx.x % 32, H = p.in;
    float partial[CLASSES];
#pragma unroll
    for (int c = 0; c < CLASSES; c++) partial[c] = 0.0f;
#pragma unroll
    for (int i = 0; i < VALUES; i++) {
        int k = lane + 32 * i;
        if (k < H) /* no break: it would keep partial[] out of registers */
#pragma unroll
            for (int c = 0; c < CLASSES; c++) partial[c] = fmaf(h[i], wt[c * (H + 1) + k], partial[c]);
    }

    /* softmax with a class per lane (LANES_PER_CLASS copies of each) */
    int my_class = lane / LANES_PER_CLASS;
    float logit = warp_sum_by_class<CLASSES>(partial) + bias[my_class];
    float max = logit;
    int best = my_class;
    warp_argmax(max, best); /* the first maximum wins */
    if (best >= p.classes) best = 0; /* no logit above -inf (all NaN or -inf): the loss says so */
    float e = expf(logit - max);
    float sum = sum_over_classes(e, LANES_PER_CLASS);
    float label_logit = __shfl_sync(WARP_FULL_MASK, logit, label * LANES_PER_CLASS);
    float target = my_class == label ? 1.0f : 0.0f;
    float target_logit = label_logit - max; /* sum over c of target[c]·(logit[c] - max) */
    if constexpr (SMOOTH) {
        bool real_class = my_class < p.classes; /* past C: padding, whose logit is -inf */
        target = !real_class ? 0.0f : my_class == label ? targets.label : targets.other;
        float term = real_class ? target * (logit - max) : 0.0f;
        target_logit = sum_over_classes(term, LANES_PER_CLASS);
    }
    float dlogit = p.grad_scale * (e / sum - target);
    if (lane == 0 && p.row_loss) p.row_loss[first_row + row] = logf(sum) - target_logit;
    if (lane == 0 && p.row_correct) p.row_correct[first_row + row] = best == label ? 1.0f : 0.0f;
    if (lane % LANES_PER_CLASS == 0 && my_class < p.classes)
        dlogits_out[(size_t)row * p.classes + my_class] = dlogit;

    float dlogits[CLASSES]; /* every class's, in every lane */
#pragma unroll
    for (int c = 0; c < CLASSES; c++) dlogits[c] = __shfl_sync(WARP_FULL_MASK, dlogit, c * LANES_PER_CLASS);
#pragma unroll
    for (int i = 0; i < VALUES; i++) {
        int k = lane + 32 * i;
        if (k >= H) continue;
        float d = 0.0f;
#pragma unroll
        for (int c = 0; c < CLASSES; c++) d = fmaf(dlogits[c], wt[c * (H + 1) + k], d);
        if (h[i] <= 0.0f) d = 0.0f;
        p.hidden_delta[(size_t)row * H + k] = d;
        if (hidden_delta_bf16) hidden_delta_bf16[(size_t)row * H + k] = __float2bfloat16_rn(d);
    }
}

/* Every global load is issued before the first wait (the row, its label, the cursor, W and b),
 * so that their latencies overlap: at the MLP's sizes this kernel is a chain of latencies, not
 * of arithmetic. ptxas caps the 32-class instance with label smoothing and H <= 256 at 64
 * registers and spills; asking for one block a multiprocessor lifts the cap (96 registers). The
 * other instances ask for nothing (0), and compile as they would without it. */
template <int CLASSES, int VALUES, bool SMOOTH>
constexpr int rows_min_blocks() { return CLASSES == MAX_CLASSES && VALUES == 8 && SMOOTH ? 1 : 0; }

template <int CLASSES, int VALUES, bool SMOOTH>
__global__ void __launch_bounds__(THREADS, (rows_min_blocks<CLASSES, VALUES, SMOOTH>()))
output_layer_rows(row_args a) {
    extern __shared__ float shared[];
    wait_for_previous_kernel();
    const output_layer_step &p = a.step;
    int H = p.in;
    float *wt = shared;                   /* W transposed: CLASSES rows, stride H + 1 */
    float *bias = wt + CLASSES * (H + 1); /* lane_classes(CLASSES) */

    int lane = threadIdx.x % 32;
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    bool has_row = row < p.rows;
    float h[VALUES];
#pragma unroll
    for (int i = 0; i < VALUES; i++) {
        int k = lane + 32 * i;
        h[i] = has_row && k < H ? p.hidden[(size_t)row * H + k] : 0.0f;
    }
    int label = has_row ? p.labels[row] : 0;
    int first_row = p.cursor ? p.cursor->first_row : 0;
    copy_layer<CLASSES>(p, wt, bias);
    __syncthreads();

    if (has_row)
        output_row<CLASSES, VALUES, SMOOTH>(p, a.hidden_delta_bf16, a.dlogits, wt, bias, h, row,
                                            label, a.targets, first_row);
}

/* Launch 2: the plane of partial sums over rows [64·blockIdx.y, +64) of hidden units
 * k = 32·blockIdx.x + lane, [ dbh (H) | dWᵀ (C×H) | db (C, blocks of blockIdx.x = 0) ]. Warp w
 * adds rows w, w + WARPS, ... of dh[r][k] and h[r][k]·dlogits[r][c], its loads of h and dh
 * issued before the wait for the dlogits' copy to shared memory; the warps' sums are then added
 * in order. Rows past the last add nothing. */
template <int CLASSES>
__global__ void __launch_bounds__(THREADS) partial_sums(output_layer_step p, const float *dlogits,
                                                      float *planes) {
    constexpr int WARP_ROWS = ROWS_PER_PLANE / WARPS;
    __shared__ float chunk_dlogits[ROWS_PER_PLANE][CLASSES]; /* the padding classes' are 0 */
    __shared__ float warp_totals[WARPS][CLASSES + 1][32];    /* [w][c][lane]: dW; [w][CLASSES]: dbh */
    wait_for_previous_kernel();
    int H = p.in, C = p.classes, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int first_row = blockIdx.y * ROWS_PER_PLANE, k = blockIdx.x * 32 + lane;
    int rows = min(ROWS_PER_PLANE, p.rows - first_row);
    float hk[WARP_ROWS], dk[WARP_ROWS];
#pragma unroll
    for (int u = 0; u < WARP_ROWS; u++) {
        int r = warp + u * WARPS;
        bool in_range = r < rows && k < H;
        size_t at = (size_t)(first_row + r) * H + k;
        hk[u] = in_range ? p.hidden[at] : 0.0f;
        dk[u] = in_range ? p.hidden_delta[at] : 0.0f;
    }
    for (int i = threadIdx.x; i < ROWS_PER_PLANE * CLASSES; i += THREADS) {
        int r = i / CLASSES, c = i % CLASSES;
        chunk_dlogits[r][c] = r < rows && c < C ? dlogits[(size_t)(first_row + r) * C + c] : 0.0f;
    }
    __syncthreads();

    float dbh = 0.0f, dw[CLASSES];
#pragma unroll
    for (int c = 0; c < CLASSES; c++) dw[c] = 0.0f;
#pragma unroll
    for (int u = 0; u < WARP_ROWS; u++) {
        dbh += dk[u];
#pragma unroll
        for (int c = 0; c < CLASSES; c++)
            dw[c] = fmaf(hk[u], chunk_dlogits[warp + u * WARPS][c], dw[c]);
    }
#pragma unroll
    for (int c = 0; c < CLASSES; c++) warp_totals[warp][c][lane] = dw[c];
    warp_totals[warp][CLASSES][lane] = dbh;
    __syncthreads();

    float *plane = planes + (size_t)blockIdx.y * plane_floats(H, C);
    for (int c = warp; c <= CLASSES; c += WARPS) { /* a warp an output of each unit */
        if (k >= H || (c < CLASSES && c >= C)) continue;
        float total = 0.0f;
        for (int w = 0; w < WARPS; w++) total += warp_totals[w][c][lane];
        plane[c == CLASSES ? k : H + c * H + k] = total;
    }
    if (blockIdx.x == 0 && threadIdx.x < C) {
        float db = 0.0f;
        for (int r = 0; r < ROWS_PER_PLANE; r++) db += chunk_dlogits[r][threadIdx.x];
        plane[H + H * C + threadIdx.x] = db;
    }
}

/* Launch 3: out[o] = sum over b of planes[b][o], in a fixed order; o indexes [ dbh | dWᵀ | db ]. A
 * block takes 32 outputs; its warp g adds planes g, g + SUM_WARPS, ..., LOADS loads in flight;
 * warp 0 then adds the warps' sums in order. The blocks are small (8 warps, few registers) so
 * that they fit beside the weight gradient's GEMM blocks, which run at the same time on the other
 * stream. */
constexpr int SUM_WARPS = 8;

__global__ void __launch_bounds__(SUM_WARPS * 32) sum_planes(output_layer_step p, const float *planes, int blocks) {
    constexpr int LOADS = 8;
    __shared__ float warp_totals[SUM_WARPS][32];
    wait_for_previous_kernel();
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int H = p.in, C = p.classes, floats = plane_floats(H, C);
    int o = blockIdx.x * 32 + lane;
    float total = 0.0f;
    if (o < floats)
        for (int first = warp; first < blocks; first += SUM_WARPS * LOADS) {
            float v[LOADS];
#pragma unroll
            for (int u = 0; u < LOADS; u++) {
                int b = first + u * SUM_WARPS;
                v[u] = b < blocks ? planes[(size_t)b * floats + o] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < LOADS; u++) total += v[u];
        }
    warp_totals[warp][lane] = total;
    __syncthreads();
    if (warp != 0 || o >= floats) return;
    total = 0.0f;
    for (int w = 0; w < SUM_WARPS; w++) total += warp_totals[w][lane];
    if (o < H) p.hidden_bias_grad[o] = total;
    else if (o < H + H * C) p.weight_grad[(o - H) % H * C + (o - H) / H] = total; /* dWᵀ[c][k] */
    else p.bias_grad[o - H - H * C] = total;
}

template <int CLASSES, int VALUES>
void launch_rows(cudaStream_t stream, const row_args &a, int blocks, size_t shared) {
    auto kernel = a.step.label_smoothing != 0.0f ? output_layer_rows<CLASSES, VALUES, true>
                                                 : output_layer_rows<CLASSES, VALUES, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)shared));
    launch_dependent(kernel, blocks, THREADS, shared, stream, 1, a);
}

template <int CLASSES>
void launch_classes(cudaStream_t stream, const row_args &a, int blocks, size_t shared) {
    if (a.step.in <= 256) launch_rows<CLASSES, 8>(stream, a, blocks, shared);
    else launch_rows<CLASSES, OUTPUT_LAYER_MAX_IN / 32>(stream, a, blocks, shared);
}

int row_blocks(const output_layer_step &step) { return (step.rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK; }

} // namespace

bool gpu_output_layer_fits(int in, int classes) {
    if (in < 1 || in > OUTPUT_LAYER_MAX_IN || classes < 1 || classes > MAX_CLASSES) return false;
    int device = 0, shared_limit = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return row_shared_floats(in, classes) * sizeof(float) <= (size_t)shared_limit;
}

size_t gpu_output_layer_scratch_floats(int max_rows, int in, int classes) {
    return (size_t)max_rows * classes + (size_t)planes_for(max_rows) * plane_floats(in, classes);
}

void gpu_output_layer_rows(cudaStream_t stream, const output_layer_step &step, float *scratch,
                           __nv_bfloat16 *hidden_delta_bf16) {
    int blocks = row_blocks(step);
    size_t shared = row_shared_floats(step.in, step.classes) * sizeof(float);
    row_args a{step, hidden_delta_bf16, scratch, label_targets(step.label_smoothing, step.classes)};
    if (blocks == 0) return; /* a rank without rows in a short last batch: the sums give 0 */
    switch (padded_classes(step.classes)) {
    case TEN_CLASSES: launch_classes<TEN_CLASSES>(stream, a, blocks, shared); break;
    case 16: launch_classes<16>(stream, a, blocks, shared); break;
    default: launch_classes<MAX_CLASSES>(stream, a, blocks, shared); break;
    }
}

void gpu_output_layer_sums(cudaStream_t sums_stream, const output_layer_step &step,
                           float *scratch) {
    int planes = planes_for(step.rows);
    float *plane_scratch = planes_in(scratch, step);
    if (planes > 0) {
        dim3 grid((step.in + 31) / 32, planes);
        auto kernel = partial_sums<MAX_CLASSES>;
        if (padded_classes(step.classes) == TEN_CLASSES) kernel = partial_sums<TEN_CLASSES>;
        else if (padded_classes(step.classes) == 16) kernel = partial_sums<16>;
        launch_dependent(kernel, grid, THREADS, 0, sums_stream, 1, step,
                         static_cast<const float *>(scratch), plane_scratch);
    }
    int outputs = plane_floats(step.in, step.classes);
    launch_dependent(sum_planes, (outputs + 31) / 32, SUM_WARPS * 32, 0, sums_stream, 1, step,
                     static_cast<const float *>(plane_scratch), planes);
}

void gpu_output_layer(cudaStream_t stream, const output_layer_step &step, float *scratch) {
    gpu_output_layer_rows(stream, step, scratch);
    gpu_output_layer_sums(stream, step, scratch);
}
