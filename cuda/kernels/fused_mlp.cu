/* A whole training pass of a one-hidden-layer MLP in one persistent kernel (--impl fused).
 * Shapes (row-major): x is B×F, W1 F×H, b1 H, W2 H×C, b2 C; h = relu(x·W1 + b1) is B×H,
 * logits = h·W2 + b2 is B×C (784, 256, 10 by default). Block g owns hidden units
 * [g·U, g·U + U) (its columns of W1, rows of W2 and their optimizer state, in shared memory for
 * the whole pass); a step is forward, softmax and backward phases separated by grid-wide
 * barriers, every sum over rows in a fixed order. The design, drawn: docs/kernels.md, "Design
 * notes: fused_mlp.cu". */
#include <cmath>
#include <cooperative_groups.h>

#include "core/label_smoothing.h"
#include "libs/cuda_check.h"
#include "cuda/kernels/fused_mlp.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/kernels/warp_reduce.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int WARPS = FUSED_THREADS / 32;
constexpr int SEVERAL_ROWS_FROM = 32; /* stage rows from which a forward warp takes 2 rows (4 from twice that) */

__device__ __forceinline__ float pixel(uint32_t four_pixels, int k) {
    return __uint_as_float(__byte_perm(four_pixels, 0x4B000000u, 0x7540 + k)) - 8388608.0f;
}

/* Rows a warp runs at once in the forward of a full stage; pixels a thread reads per row in the
 * backward (its dW1 sums, PIX×U floats, stay in registers) and the row groups that leaves, at
 * most MAX_ROW_GROUPS (their sums are added with every load in flight at once). */
template <int U> __host__ __device__ constexpr int forward_rows() { return U <= 2 ? 4 : U == 4 ? 2 : 1; }
__host__ __device__ constexpr int backward_pixels(int U) { return U <= 4 ? 8 : 4; }
constexpr int MAX_ROW_GROUPS = 8;
__host__ __device__ inline int backward_groups(int pixels_per_thread, int features) {
    int groups = FUSED_THREADS / (features / pixels_per_thread);
    return groups < 1 ? 1 : groups > MAX_ROW_GROUPS ? MAX_ROW_GROUPS : groups;
}

/* PIX consecutive pixels (PIX = 4 or 8 bytes, aligned) from shared memory, as PIX/4 words. */
template <int PIX> __device__ __forceinline__ void load_pixels(const uint8_t *at, uint32_t (&words)[PIX / 4]) {
    if constexpr (PIX == 8) {
        uint2 v = *reinterpret_cast<const uint2 *>(at);
        words[0] = v.x, words[1] = v.y;
    } else {
        words[0] = *reinterpret_cast<const uint32_t *>(at);
    }
}

/* What every parameter's update of a step uses (set_update_constants). */
struct update_constants {
    float m_correction, v_correction; /* Adam's 1 / (1 - beta1^t) and 1 / (1 - beta2^t) */
    float lr;                         /* the step's rate */
    float keep;                       /* a weight's decay: 1 - lr·weight_decay */
};
constexpr int UPDATE_CONSTANT_FLOATS = sizeof(update_constants) / sizeof(float);

/* The block's slice of the model and its working arrays in shared memory. */
template <int U> struct block_slice {
    uint8_t *stages;   /* two stages of stage_rows×F pixel bytes (16-byte aligned) */
    int stage_bytes;
    float *w1;         /* U×F: W1's columns g·U .. g·U+U-1, transposed */
    float *w1_state;   /* state_arrays × U×F */
    float *w2;         /* U×C: W2's rows */
    float *w2_state;   /* state_arrays × U×C */
    float *b1;         /* U */
    float *b1_state;   /* state_arrays × U */
    float *b2;         /* C: block 0's copy of b2 (the one it updates; the others read global) */
    float *b2_state;   /* state_arrays × C */
    float *w1_sums;    /* U: sum over f of w1[u][f], for the shift term */
    float *h;          /* U×batch: the step's hidden activations */
    float *dlogits;    /* batch×C: the step's dlogits */
    float *dh;         /* U×batch: the gradient at the block's units' pre-activations */
    float *grad_w2;    /* U×C */
    float *grad_b1;    /* U */
    float *grad_b2;    /* C (block 0) */
    float *warp_sums;  /* WARPS×U */
    float *row_sums;   /* WARPS×32: per-warp partial sums of up to 32 outputs (step_sums) */
    update_constants *constants; /* the step's update's (set_update_constants) */
    float *grad_w1;    /* row groups × U×F: the backward's partial dW1 sums, laid out
                        * [group][u][k][column] for pixel column·PIX + k (see dw1_index) */
    /* buffer b (0 or 1), by arithmetic: an array of two pointers indexed at run time would put
     * the whole struct in local memory */
    __device__ uint8_t *stage(int b) const { return stages + b * stage_bytes; }
};

/* Carves the dynamic shared memory; the same arithmetic as fused_mlp_shared_bytes. */
template <int U> __device__ block_slice<U> carve(float4 *raw, const fused_mlp_args &a) {
    int F = a.features, C = a.classes, S = a.adam ? 2 : 1, R = a.stage_rows;
    block_slice<U> s;
    uint8_t *bytes = reinterpret_cast<uint8_t *>(raw);
    s.stages = bytes;
    s.stage_bytes = R * F;
    float *smem = reinterpret_cast<float *>(bytes + 2 * (size_t)R * F);
    s.w1 = smem;            smem += U * F;
    s.w1_state = smem;      smem += S * U * F;
    s.w2 = smem;            smem += U * C;
    s.w2_state = smem;      smem += S * U * C;
    s.b1 = smem;            smem += U;
    s.b1_state = smem;      smem += S * U;
    s.b2 = smem;            smem += C;
    s.b2_state = smem;      smem += S * C;
    s.w1_sums = smem;       smem += U;
    s.h = smem;             smem += U * a.batch;
    s.dlogits = smem;       smem += a.batch * C;
    s.dh = smem;            smem += U * a.batch;
    s.grad_w2 = smem;       smem += U * C;
    s.grad_b1 = smem;       smem += U;
    s.grad_b2 = smem;       smem += C;
    s.warp_sums = smem;     smem += WARPS * U;
    s.row_sums = smem;      smem += WARPS * 32;
    s.constants = reinterpret_cast<update_constants *>(smem); smem += UPDATE_CONSTANT_FLOATS;
    s.grad_w1 = smem;
    return s;
}

/* Copies the block's parameters and state between the flat arrays and shared memory (units past
 * H are zero and never written back). */
template <int U> __device__ void move_slice(const fused_mlp_args &a, block_slice<U> &s, bool load) {
    int F = a.features, H = a.hidden, C = a.classes, S = a.adam ? 2 : 1;
    int first_unit = blockIdx.x * U;
    for (int i = threadIdx.x; i < U * F; i += blockDim.x) {
        int u = i / F, f = i % F, unit = first_unit + u;
        if (unit >= H) { if (load) { s.w1[i] = 0; for (int k = 0; k < S; k++) s.w1_state[k * U * F + i] = 0; } continue; }
        size_t at = a.w1 + (size_t)f * H + unit;
        if (load) s.w1[i] = a.params[at]; else a.params[at] = s.w1[i];
        for (int k = 0; k < S; k++) {
            if (load) s.w1_state[k * U * F + i] = a.state[k][at];
            else a.state[k][at] = s.w1_state[k * U * F + i];
        }
    }
    for (int i = threadIdx.x; i < U * C; i += blockDim.x) {
        int unit = first_unit + i / C;
        if (unit >= H) { if (load) { s.w2[i] = 0; for (int k = 0; k < S; k++) s.w2_state[k * U * C + i] = 0; } continue; }
        size_t at = a.w2 + (size_t)first_unit * C + i;
        if (load) s.w2[i] = a.params[at]; else a.params[at] = s.w2[i];
        for (int k = 0; k < S; k++) {
            if (load) s.w2_state[k * U * C + i] = a.state[k][at];
            else a.state[k][at] = s.w2_state[k * U * C + i];
        }
    }
    if (blockIdx.x == 0)
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            size_t at = a.b2 + c;
            if (load) s.b2[c] = a.params[at]; else a.params[at] = s.b2[c];
            for (int k = 0; k < S; k++) {
                if (load) s.b2_state[k * C + c] = a.state[k][at];
                else a.state[k][at] = s.b2_state[k * C + c];
            }
        }
    for (int u = threadIdx.x; u < U; u += blockDim.x) {
        int unit = first_unit + u;
        if (unit >= H) { if (load) { s.b1[u] = 0; for (int k = 0; k < S; k++) s.b1_state[k * U + u] = 0; } continue; }
        size_t at = a.b1 + unit;
        if (load) s.b1[u] = a.params[at]; else a.params[at] = s.b1[u];
        for (int k = 0; k < S; k++) {
            if (load) s.b1_state[k * U + u] = a.state[k][at];
            else a.state[k][at] = s.b1_state[k * U + u];
        }
    }
}

/* w1_sums[u] = sum over f of w1[u][f], in a fixed order: each thread's part (its features f =
 * threadIdx.x, + blockDim.x, ...), then the warp's, then the warps' in order. */
template <int U> __device__ void finish_w1_sums(block_slice<U> &s, const float (&part)[U]) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int u = 0; u < U; u++) {
        float sum = warp_sum(part[u]);
        if (lane == 0) s.warp_sums[warp * U + u] = sum;
    }
    __syncthreads();
    if (threadIdx.x < U) {
        float total = 0.0f;
        for (int w = 0; w < WARPS; w++) total += s.warp_sums[w * U + threadIdx.x];
        s.w1_sums[threadIdx.x] = total;
    }
    __syncthreads();
}

template <int U> __device__ void sum_w1_columns(const fused_mlp_args &a, block_slice<U> &s) {
    float part[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        part[u] = 0.0f;
        for (int f = threadIdx.x; f < a.features; f += blockDim.x) part[u] += s.w1[u * a.features + f];
    }
    finish_w1_sums<U>(s, part);
}

/* The pass's rows [first, first + rows) of pixels into a stage, as cp.async copies of 16 bytes,
 * committed as one group (every thread commits, whether it copied or not). */
__device__ void copy_rows_to_stage(const fused_mlp_args &a, uint8_t *stage, int first, int rows) {
    const uint4 *from = reinterpret_cast<const uint4 *>(a.ordered_pixels + (size_t)first * a.features);
    uint4 *to = reinterpret_cast<uint4 *>(stage);
    int vectors = rows * a.features / 16;
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) cp_async_16(to + i, from + i);
    cp_async_commit();
}

/* Where a step's stages are: stage j of step `step` (rows [j·R, j·R + R) of the step) goes to
 * buffer (j + step) % 2, so that the next step's first stage never lands on this step's. */
struct step_plan {
    int step, first, rows, stages;
    __device__ int buffer(int j) const { return (j + step) & 1; }
};

__device__ step_plan plan_step(const fused_mlp_args &a, int step) {
    step_plan p;
    p.step = step;
    p.first = step * a.batch;
    p.rows = min(a.batch, a.samples - p.first);
    p.stages = (p.rows + a.stage_rows - 1) / a.stage_rows;
    return p;
}

/* Starts copying stage j of step p into its buffer. */
template <int U> __device__ void stage_of(const fused_mlp_args &a, block_slice<U> &s, const step_plan &p, int j) {
    int r0 = j * a.stage_rows;
    copy_rows_to_stage(a, s.stage(p.buffer(j)), p.first + r0, min(a.stage_rows, p.rows - r0));
}

/* The forward of one stage's n rows (rows r0.. of the step), whose pixels are in xs: h for the
 * block's units into shared memory, the block's partial logits to global memory. A warp takes RW
 * rows at a time; lane j reads word j, j + 32, ... (4 pixels) of each, then the warp adds up. */
template <int U, int RW> __device__ void forward_stage(const fused_mlp_args &a, block_slice<U> &s,
                                                       const uint8_t *xs, int r0, int n) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int words = a.features / 4, C = a.classes;
    const uint32_t *x = reinterpret_cast<const uint32_t *>(xs);
    const float4 *w = reinterpret_cast<const float4 *>(s.w1);
    for (int r = warp * RW; r < n; r += WARPS * RW) {
        float acc[RW][U];
#pragma unroll
        for (int i = 0; i < RW; i++)
#pragma unroll
            for (int u = 0; u < U; u++) acc[i][u] = 0.0f;
#pragma unroll 2
        for (int j = lane; j < words; j += 32) {
            uint32_t four[RW];
#pragma unroll
            for (int i = 0; i < RW; i++) four[i] = x[min(r + i, n - 1) * words + j]; /* past n: recomputed, not stored */
#pragma unroll
            for (int u = 0; u < U; u++) {
                float4 wv = w[u * words + j];
#pragma unroll
                for (int i = 0; i < RW; i++) {
                    acc[i][u] = fmaf(pixel(four[i], 0), wv.x, acc[i][u]);
                    acc[i][u] = fmaf(pixel(four[i], 1), wv.y, acc[i][u]);
                    acc[i][u] = fmaf(pixel(four[i], 2), wv.z, acc[i][u]);
                    acc[i][u] = fmaf(pixel(four[i], 3), wv.w, acc[i][u]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < RW; i++) {
            int row = r0 + r + i;
            float h[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                float z = a.scale * warp_sum(acc[i][u]) + a.shift * s.w1_sums[u] + s.b1[u];
                h[u] = fmaxf(z, 0.0f);
                if (lane == u && r + i < n) s.h[u * a.batch + row] = h[u];
            }
            if (lane < C && r + i < n) {
                float part = 0.0f;
#pragma unroll
                for (int u = 0; u < U; u++) part = fmaf(h[u], s.w2[u * C + lane], part);
                a.partial_logits[((size_t)row * C + lane) * a.blocks + blockIdx.x] = part;
            }
        }
    }
}

/* The step's forward, stage by stage, each stage's copy waited for and the next one started. */
template <int U> __device__ void forward(const fused_mlp_args &a, block_slice<U> &s, const step_plan &p,
                                         int steps) {
    for (int j = 0; j < p.stages; j++) {
        cp_async_wait<0>();
        __syncthreads(); /* stage j is in; everyone is done with the buffer the next copy takes */
        if (j + 1 < p.stages) stage_of<U>(a, s, p, j + 1);
        else if (p.stages == 1 && p.step + 1 < steps) stage_of<U>(a, s, plan_step(a, p.step + 1), 0);
        int r0 = j * a.stage_rows, n = min(a.stage_rows, p.rows - r0);
        const uint8_t *xs = s.stage(p.buffer(j));
        if (a.stage_rows >= 2 * SEVERAL_ROWS_FROM) forward_stage<U, forward_rows<U>()>(a, s, xs, r0, n);
        else if (a.stage_rows >= SEVERAL_ROWS_FROM) forward_stage<U, 2>(a, s, xs, r0, n);
        else forward_stage<U, 1>(a, s, xs, r0, n);
    }
}

/* Softmax cross-entropy, one warp per row, rows spread over every warp of the grid (from the
 * last block down: block 0 has b2's update to do). A row's partial logits (C×blocks floats,
 * contiguous) are loaded 128 blocks' worth at a time (40 floats a lane for 10 classes), every
 * load issued before the first is added, then summed in block order. Reads of other blocks'
 * writes bypass L1 (__ldcg): L1 is not coherent across SMs. */
__device__ void softmax(const fused_mlp_args &a, const step_plan &p) {
    constexpr int CM = FUSED_MAX_CLASSES, SPAN = 4;
    int lane = threadIdx.x % 32, C = a.classes, G = a.blocks;
    int warp_in_grid = (G - 1 - blockIdx.x) * WARPS + threadIdx.x / 32;
    for (int r = warp_in_grid; r < p.rows; r += G * WARPS) {
        const float *partials = a.partial_logits + (size_t)r * C * G;
        float bias = lane < C ? __ldcg(a.params + a.b2 + lane) : 0.0f;
        int label = __ldg(a.ordered_labels + p.first + r);
        float part[CM];
#pragma unroll
        for (int c = 0; c < CM; c++) part[c] = 0.0f;
        for (int g0 = 0; g0 < G; g0 += 32 * SPAN) {
            float v[SPAN][CM];
#pragma unroll
            for (int k = 0; k < SPAN; k++) {
                int g = g0 + 32 * k + lane;
#pragma unroll
                for (int c = 0; c < CM; c++) v[k][c] = c < C && g < G ? __ldcg(partials + c * G + g) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < SPAN; k++)
#pragma unroll
                for (int c = 0; c < CM; c++) part[c] += v[k][c];
        }
        float my_logit = -INFINITY;
#pragma unroll
        for (int c = 0; c < CM; c++) { /* unguarded, so that the sums interleave: part[c] is 0 past C */
            float logit = warp_sum(part[c]);
            if (lane == c && c < C) my_logit = logit + bias;
        }
        float max = my_logit;
        int best = lane < C ? lane : C;
        warp_argmax(max, best);
        if (best >= C) best = 0; /* every logit NaN: the loss says so */
        float e = lane < C ? expf(my_logit - max) : 0.0f;
        float log_sum = logf(warp_sum(e));
        float label_logit = __shfl_sync(WARP_FULL_MASK, my_logit, label);
        float target = lane >= C ? 0.0f : lane == label ? a.targets.label : a.targets.other;
        float target_logit = label_logit - max; /* sum over c of target[c]·(logit[c] - max) */
        if (a.label_smoothing != 0.0f)
            target_logit = warp_sum(lane < C ? target * (my_logit - max) : 0.0f);
        if (lane == 0 && a.row_loss) a.row_loss[p.first + r] = log_sum - target_logit;
        if (lane == 0 && a.row_correct) a.row_correct[p.first + r] = best == label ? 1.0f : 0.0f;
        if (lane < C)
            a.dlogits[(size_t)r * C + lane] =
                (expf(my_logit - max - log_sum) - target) / p.rows;
    }
}

/* One parameter's update; a weight (not a bias) decays first where there is weight decay. */
__device__ __forceinline__ void update(const fused_mlp_args &a, float &param, float *state0,
                                       float *state1, float grad, const update_constants &k,
                                       bool weight) {
    float lr = k.lr, m_correction = k.m_correction, v_correction = k.v_correction;
    if (weight && a.weight_decay != 0.0f) param = __fmul_rn(param, k.keep);
    if (a.adam) {
        float m = a.beta1 * *state0 + (1.0f - a.beta1) * grad;
        float v = a.beta2 * *state1 + (1.0f - a.beta2) * grad * grad;
        *state0 = m;
        *state1 = v;
        param -= lr * (m * m_correction) / (sqrtf(v * v_correction) + a.eps);
    } else {
        float v = a.momentum * *state0 + grad;
        *state0 = v;
        param -= lr * v;
    }
}

/* Sums over the step's rows: dW2[u][c] = h[u]·dlogits[:, c], db1[u] = sum of dh[u], and in
 * block 0, db2[c] = sum of dlogits[:, c]. 32 outputs at a time, one a lane; warp w adds rows
 * w, w + WARPS, ..., then the warps' sums are added in order. */
template <int U> __device__ void step_sums(const fused_mlp_args &a, block_slice<U> &s, int rows) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, C = a.classes, B = a.batch;
    int outputs = U * C + U + (blockIdx.x == 0 ? C : 0);
    for (int first = 0; first < outputs; first += 32) {
        int j = first + lane;
        float part = 0.0f;
        if (j < U * C) {
            int u = j / C, c = j % C;
            for (int r = warp; r < rows; r += WARPS) part = fmaf(s.h[u * B + r], s.dlogits[r * C + c], part);
        } else if (j < U * C + U) {
            int u = j - U * C;
            for (int r = warp; r < rows; r += WARPS) part += s.dh[u * B + r];
        } else if (j < outputs) {
            int c = j - U * C - U;
            for (int r = warp; r < rows; r += WARPS) part += s.dlogits[r * C + c];
        }
        s.row_sums[warp * 32 + lane] = part;
        __syncthreads();
        if (warp == 0 && j < outputs) {
            float sum = 0.0f;
            for (int w = 0; w < WARPS; w++) sum += s.row_sums[w * 32 + lane];
            if (j < U * C) s.grad_w2[j] = sum;
            else if (j < U * C + U) s.grad_b1[j - U * C] = sum;
            else s.grad_b2[j - U * C - U] = sum;
        }
        __syncthreads();
    }
}

/* Where dW1's partial sum for unit u, pixel f of row group `group` is kept: consecutive threads
 * (columns) store to consecutive words, so the stores of a warp hit 32 banks, not 2. */
template <int U, int PIX> __device__ __forceinline__ int dw1_index(int group, int u, int f, int F) {
    return (group * U + u) * F + (f % PIX) * (F / PIX) + f / PIX;
}

/* The update of the block's parameters (and of b2 in block 0) from the step's sums; dW1's
 * partial sums are in registers (acc) until here, then added over the row groups in group order.
 * Each thread sums the W1 entries it updated, for the next step's w1_sums. */
template <int U, int PIX> __device__ void apply_update(const fused_mlp_args &a, block_slice<U> &s,
                                                       const float (&acc)[PIX][U]) {
    int t = threadIdx.x, C = a.classes, F = a.features;
    int columns = F / PIX, groups = backward_groups(PIX, F);
    int column = t % columns, group = t / columns;
    if (group < groups)
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int k = 0; k < PIX; k++) s.grad_w1[dw1_index<U, PIX>(group, u, column * PIX + k, F)] = acc[k][u];
    __syncthreads();
    const update_constants k = *s.constants;
    float w1_part[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        w1_part[u] = 0.0f;
        float shift_term = a.shift * s.grad_b1[u];
        for (int f = t; f < F; f += blockDim.x) {
            float part[MAX_ROW_GROUPS];
#pragma unroll
            for (int g = 0; g < MAX_ROW_GROUPS; g++) part[g] = g < groups ? s.grad_w1[dw1_index<U, PIX>(g, u, f, F)] : 0.0f;
            float sum = 0.0f;
#pragma unroll
            for (int g = 0; g < MAX_ROW_GROUPS; g++) sum += part[g];
            int i = u * F + f;
            update(a, s.w1[i], &s.w1_state[i], &s.w1_state[U * F + i], a.scale * sum + shift_term,
                   k, true);
            w1_part[u] += s.w1[i];
        }
    }
    for (int i = t; i < U * C; i += blockDim.x)
        update(a, s.w2[i], &s.w2_state[i], &s.w2_state[U * C + i], s.grad_w2[i], k, true);
    if (t < U)
        update(a, s.b1[t], &s.b1_state[t], &s.b1_state[U + t], s.grad_b1[t], k, false);
    if (blockIdx.x == 0 && t < C) {
        update(a, s.b2[t], &s.b2_state[t], &s.b2_state[C + t], s.grad_b2[t], k, false);
        a.params[a.b2 + t] = s.b2[t]; /* where the next step's softmax reads it */
    }
    finish_w1_sums<U>(s, w1_part);
}

/* The constants of update number optimizer_step + 1, into shared memory (one thread; a barrier
 * follows before apply_update reads them). */
template <int U> __device__ void set_update_constants(const fused_mlp_args &a, block_slice<U> &s,
                                                      int optimizer_step) {
    if (threadIdx.x != 0) return;
    update_constants k;
    k.lr = schedule_lr(a.lr, optimizer_step);
    k.keep = 1.0f - k.lr * a.weight_decay;
    if (a.adam) {
        k.m_correction = (float)(1.0 / (1.0 - pow((double)a.beta1, optimizer_step + 1)));
        k.v_correction = (float)(1.0 / (1.0 - pow((double)a.beta2, optimizer_step + 1)));
    } else {
        k.m_correction = k.v_correction = 0.0f;
    }
    *s.constants = k;
}

/* Backward for the block's units and the update of its parameters. The step's dlogits come in
 * at once (one trip to L2), then dh and the small sums for every row of the step; only dW1 needs
 * the pixels, stage by stage from the last (whose pixels, and the one's before, are still in
 * shared memory). For dW1 the threads are split into row groups; within a group, thread `column`
 * owns pixels [column·PIX, column·PIX + PIX) and runs over the group's rows, its PIX×U sums in
 * registers across the stages. */
template <int U> __device__ void backward_update(const fused_mlp_args &a, block_slice<U> &s,
                                                 const step_plan &p, int steps, int optimizer_step) {
    constexpr int PIX = backward_pixels(U);
    int t = threadIdx.x, C = a.classes, F = a.features, R = a.stage_rows;
#pragma unroll 8 /* the loads of eight iterations in flight at once */
    for (int i = t; i < p.rows * C; i += blockDim.x) s.dlogits[i] = __ldcg(a.dlogits + i);
    set_update_constants<U>(a, s, optimizer_step);
    __syncthreads();
    for (int r = t; r < p.rows; r += blockDim.x) {
        float d[U];
#pragma unroll
        for (int u = 0; u < U; u++) d[u] = 0.0f;
        for (int c = 0; c < C; c++) {
            float dl = s.dlogits[r * C + c];
#pragma unroll
            for (int u = 0; u < U; u++) d[u] = fmaf(dl, s.w2[u * C + c], d[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) s.dh[u * a.batch + r] = s.h[u * a.batch + r] > 0.0f ? d[u] : 0.0f;
    }
    __syncthreads();
    step_sums<U>(a, s, p.rows);

    int columns = F / PIX, groups = backward_groups(PIX, F);
    int column = t % columns, group = t / columns;
    float acc[PIX][U];
#pragma unroll
    for (int k = 0; k < PIX; k++)
#pragma unroll
        for (int u = 0; u < U; u++) acc[k][u] = 0.0f;
    for (int j = p.stages - 1; j >= 0; j--) {
        if (j < p.stages - 2) cp_async_wait<0>(); /* the last two stages are still in from the forward */
        __syncthreads(); /* stage j is in; everyone is done with the other buffer */
        if (j >= 1 && j - 1 < p.stages - 2) stage_of<U>(a, s, p, j - 1);
        else if (j == 0 && p.stages >= 2 && p.step + 1 < steps) stage_of<U>(a, s, plan_step(a, p.step + 1), 0);
        int r0 = j * R, n = min(R, p.rows - r0);
        if (group < groups) {
            const uint8_t *xs = s.stage(p.buffer(j));
#pragma unroll 4
            for (int r = group; r < n; r += groups) {
                uint32_t words[PIX / 4];
                load_pixels<PIX>(xs + (size_t)r * F + column * PIX, words);
                float d[U];
#pragma unroll
                for (int u = 0; u < U; u++) d[u] = s.dh[u * a.batch + r0 + r];
#pragma unroll
                for (int k = 0; k < PIX; k++) {
                    float px = pixel(words[k / 4], k % 4);
#pragma unroll
                    for (int u = 0; u < U; u++) acc[k][u] = fmaf(px, d[u], acc[k][u]);
                }
            }
        }
    }
    apply_update<U, PIX>(a, s, acc);
}

template <int U> __global__ void __launch_bounds__(FUSED_THREADS, 1) fused_mlp_pass_kernel(fused_mlp_args a) {
    extern __shared__ float4 shared_raw[];
    block_slice<U> s = carve<U>(shared_raw, a);
    cg::grid_group grid = cg::this_grid();

    move_slice<U>(a, s, true);
    __syncthreads();
    sum_w1_columns<U>(a, s);
    int steps_before = a.cursor->optimizer_steps;
    int steps = (a.samples + a.batch - 1) / a.batch;
    grid.sync(); /* everyone has read the cursor before block 0 moves it at the end */
    if (steps > 0) stage_of<U>(a, s, plan_step(a, 0), 0);

    for (int step = 0; step < steps; step++) {
        step_plan p = plan_step(a, step);
        forward<U>(a, s, p, steps);
        grid.sync();
        softmax(a, p);
        grid.sync();
        backward_update<U>(a, s, p, steps, steps_before + step);
    }

    move_slice<U>(a, s, false);
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.cursor = pass_cursor{a.samples, steps_before + steps};
}

/* The pass's samples, in the pass's order, into one array (pixels, then labels): a warp copies
 * ROWS rows at a time, every load of them issued before the first store. */
constexpr int REORDER_THREADS = 256, REORDER_ROWS = 8;

__global__ void reorder_pass_kernel(const uint8_t *pixels, const uint8_t *labels, const int32_t *order,
                                    int samples, int features, uint8_t *ordered_pixels,
                                    uint8_t *ordered_labels) {
    int lane = threadIdx.x % 32, vectors = features / 16;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, warps = gridDim.x * blockDim.x / 32;
    for (int r0 = warp * REORDER_ROWS; r0 < samples; r0 += warps * REORDER_ROWS) {
        int my_sample = lane < REORDER_ROWS && r0 + lane < samples ? __ldg(order + r0 + lane) : -1;
        int sample[REORDER_ROWS];
#pragma unroll
        for (int i = 0; i < REORDER_ROWS; i++) sample[i] = __shfl_sync(WARP_FULL_MASK, my_sample, i);
        for (int v = lane; v < vectors; v += 32) {
            uint4 chunk[REORDER_ROWS];
#pragma unroll
            for (int i = 0; i < REORDER_ROWS; i++)
                if (sample[i] >= 0) chunk[i] = __ldg(reinterpret_cast<const uint4 *>(pixels + (size_t)sample[i] * features) + v);
#pragma unroll
            for (int i = 0; i < REORDER_ROWS; i++)
                if (sample[i] >= 0) reinterpret_cast<uint4 *>(ordered_pixels + (size_t)(r0 + i) * features)[v] = chunk[i];
        }
        if (my_sample >= 0) ordered_labels[r0 + lane] = __ldg(labels + my_sample);
    }
}

template <int U> void launch(cudaStream_t stream, const fused_mlp_args &args) {
    size_t shared = fused_mlp_shared_bytes(U, args.features, args.classes, args.adam ? 2 : 1, args.batch,
                                           args.stage_rows);
    CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_pass_kernel<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
    fused_mlp_args copy = args;
    void *params[] = {&copy};
    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void *>(fused_mlp_pass_kernel<U>),
                                           dim3(args.blocks), dim3(FUSED_THREADS), params, shared, stream));
}

template <int U> int resident_blocks(size_t shared) {
    CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_pass_kernel<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
    int per_sm = 0, device = 0, sms = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_mlp_pass_kernel<U>, FUSED_THREADS, shared));
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return per_sm * sms;
}

} // namespace

size_t fused_mlp_shared_bytes(int U, int F, int C, int S, int batch, int stage_rows) {
    size_t floats = (size_t)U * F * (1 + S) + (size_t)U * C * (1 + S) + (size_t)U * (1 + S) +
                    (size_t)C * (1 + S) + U + (size_t)U * batch + (size_t)batch * C +
                    (size_t)U * batch + (size_t)U * C + U + C + (size_t)WARPS * U + WARPS * 32 +
                    UPDATE_CONSTANT_FLOATS +
                    (size_t)backward_groups(backward_pixels(U), F) * U * F;
    return 2 * (size_t)stage_rows * F + floats * sizeof(float);
}

int fused_mlp_resident_blocks(int units_per_block, size_t shared_bytes) {
    int device = 0, most_shared = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&most_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (shared_bytes > (size_t)most_shared) return 0;
    switch (units_per_block) {
    case 1: return resident_blocks<1>(shared_bytes);
    case 2: return resident_blocks<2>(shared_bytes);
    case 4: return resident_blocks<4>(shared_bytes);
    case 8: return resident_blocks<8>(shared_bytes);
    default: return 0;
    }
}

void gpu_fused_mlp_pass(cudaStream_t stream, const fused_mlp_args &args) {
    if (args.samples > 0) {
        int rows_per_block = REORDER_THREADS / 32 * REORDER_ROWS;
        int blocks = (args.samples + rows_per_block - 1) / rows_per_block;
        reorder_pass_kernel<<<blocks, REORDER_THREADS, 0, stream>>>(
            args.pixels, args.labels, args.order, args.samples, args.features, args.ordered_pixels,
            args.ordered_labels);
        CUDA_CHECK_LAUNCH();
    }
    switch (args.units_per_block) {
    case 1: launch<1>(stream, args); break;
    case 2: launch<2>(stream, args); break;
    case 4: launch<4>(stream, args); break;
    case 8: launch<8>(stream, args); break;
    default:
        std::fprintf(stderr, "mlp_train: internal error: %d units per block\n", args.units_per_block);
        std::exit(1);
    }
}
