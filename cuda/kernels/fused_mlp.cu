/* A whole training pass of a one-hidden-layer MLP in one persistent kernel.
 *
 * Shapes (row-major): x is B×F (pixels of the step's B samples), W1 is F×H, b1 H, W2 is H×C,
 * b2 C; h = relu(x·W1 + b1) is B×H, logits = h·W2 + b2 is B×C. F = 784, H = 256, C = 10 by default.
 *
 * The idea: block g owns hidden units [g·U, g·U + U) — its U columns of W1, its U entries of b1,
 * its U rows of W2 and their optimizer state — in shared memory for the whole pass. Every other
 * quantity of a step then splits cleanly by hidden unit, except the logits, which need all of
 * them. So a step is three phases separated by two grid-wide barriers:
 *
 *   forward   (each block, its units)   h[:, g] = relu(x·W1[:, g] + b1[g])        B×U, local
 *                                       partial[:, :, g] = h[:, g]·W2[g, :]       B×C, to global
 *   ---- grid barrier ----
 *   softmax   (rows spread over blocks) logits[r] = b2 + sum over g of partial[r, :, g]
 *                                       loss, correct; dlogits[r] = (softmax - onehot) / B
 *   ---- grid barrier ----
 *   backward  (each block, its units)   dW2[g, :] = h[:, g]ᵀ·dlogits
 *    + update                           dh = dlogits·W2[g, :]ᵀ, masked where h == 0
 *                                       db1[g] = column sums of dh, dW1[:, g] = xᵀ·dh
 *                                       then SGD or Adam on the block's own parameters;
 *                                       block 0 also owns b2.
 *
 * No barrier is needed between a step's update and the next step's forward: each block only
 * reads its own parameters there. Every sum runs in a fixed order (no atomics), so a pass gives
 * the same bits every time on a given GPU.
 *
 * The batch is never expanded to floats: each block reads the step's pixels (bytes) straight
 * from the resident data set, twice (forward, dW1), and keeps x = p·scale + shift folded in:
 *   x·w = scale·(p·w) + shift·sum(w),   xᵀ·dh = scale·(pᵀ·dh) + shift·sum(dh).
 * A byte becomes a float in two instructions: 0x4B0000pp is the float 2^23 + pp.
 *
 * Those reads (every block reads the whole batch) are what the pass spends most on at large
 * batches, and L2's latency, not its bandwidth, is what limits them unless many bytes are in
 * flight: so the forward reads 16 pixels per lane for several rows of a warp at once (which also
 * reuses each weight read from shared memory across those rows), and the backward reads 4 to 16
 * pixels per thread with the block's threads split into row groups, whose dW1 partial sums are
 * added in group order at the end of the step. */
#include <cmath>
#include <cooperative_groups.h>

#include "../cuda_check.h"
#include "fused_mlp.h"
#include "warp_reduce.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int WARPS = FUSED_THREADS / 32;
constexpr int ROW_CHUNK = 256; /* rows of dlogits and dh held in shared memory at a time */
constexpr int SEVERAL_ROWS_FROM_BATCH = 64;

__device__ __forceinline__ float pixel(uint32_t four_pixels, int k) {
    return __uint_as_float(__byte_perm(four_pixels, 0x4B000000u, 0x7540 + k)) - 8388608.0f;
}

/* Rows a warp runs at once in the forward; pixels a thread reads per row in the backward (its
 * dW1 sums, PIX×U floats, stay in registers) and the row groups that leaves. */
template <int U> __host__ __device__ constexpr int forward_rows() { return U <= 2 ? 4 : U == 4 ? 2 : 1; }
template <int U> __host__ __device__ constexpr int backward_pixels() { return U <= 2 ? 16 : U == 4 ? 8 : 4; }
__host__ __device__ inline int backward_groups(int pixels_per_thread, int features) {
    int groups = FUSED_THREADS / (features / pixels_per_thread);
    return groups > 0 ? groups : 1;
}

/* PIX consecutive pixels (PIX = 4, 8 or 16 bytes, aligned), as PIX/4 words of four. */
template <int PIX> __device__ __forceinline__ void load_pixels(const uint8_t *at, uint32_t (&words)[PIX / 4]) {
    if constexpr (PIX == 16) {
        uint4 v = __ldg(reinterpret_cast<const uint4 *>(at));
        words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
    } else if constexpr (PIX == 8) {
        uint2 v = __ldg(reinterpret_cast<const uint2 *>(at));
        words[0] = v.x, words[1] = v.y;
    } else {
        words[0] = __ldg(reinterpret_cast<const uint32_t *>(at));
    }
}

/* The block's slice of the model in shared memory; all arrays unit-major. */
template <int U> struct block_slice {
    float *w1;        /* U×F: W1's columns g·U .. g·U+U-1, transposed */
    float *w1_state;  /* state_arrays × U×F */
    float *w2;        /* U×C: W2's rows */
    float *w2_state;  /* state_arrays × U×C */
    float *b1;        /* U */
    float *b1_state;  /* state_arrays × U */
    float *w1_sums;   /* U: sum over f of w1[u][f], for the shift term */
    float *dlogits;   /* ROW_CHUNK×C */
    float *h;         /* U×ROW_CHUNK */
    float *dh;        /* U×ROW_CHUNK */
    int *samples;     /* ROW_CHUNK */
    float *grad_w2;   /* U×C, accumulated over a step's row chunks */
    float *grad_b1;   /* U */
    float *grad_b2;   /* C (block 0) */
    float *warp_sums; /* WARPS×U */
    float *grad_w1;   /* row groups × U×F: the backward's partial dW1 sums */
};

/* Carves the dynamic shared memory; the same arithmetic as fused_mlp_shared_bytes. */
template <int U> __device__ block_slice<U> carve(float *smem, int F, int C, int S) {
    block_slice<U> s;
    s.w1 = smem;            smem += U * F;
    s.w1_state = smem;      smem += S * U * F;
    s.w2 = smem;            smem += U * C;
    s.w2_state = smem;      smem += S * U * C;
    s.b1 = smem;            smem += U;
    s.b1_state = smem;      smem += S * U;
    s.w1_sums = smem;       smem += U;
    s.dlogits = smem;       smem += ROW_CHUNK * C;
    s.h = smem;             smem += U * ROW_CHUNK;
    s.dh = smem;            smem += U * ROW_CHUNK;
    s.samples = reinterpret_cast<int *>(smem); smem += ROW_CHUNK;
    s.grad_w2 = smem;       smem += U * C;
    s.grad_b1 = smem;       smem += U;
    s.grad_b2 = smem;       smem += C;
    s.warp_sums = smem;     smem += WARPS * U;
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

/* w1_sums[u] = sum over f of w1[u][f], in a fixed order. */
template <int U> __device__ void sum_w1_columns(const fused_mlp_args &a, block_slice<U> &s) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int u = 0; u < U; u++) {
        float part = 0.0f;
        for (int f = threadIdx.x; f < a.features; f += blockDim.x) part += s.w1[u * a.features + f];
        part = warp_sum(part);
        if (lane == 0) s.warp_sums[warp * U + u] = part;
    }
    __syncthreads();
    if (threadIdx.x < U) {
        float total = 0.0f;
        for (int w = 0; w < WARPS; w++) total += s.warp_sums[w * U + threadIdx.x];
        s.w1_sums[threadIdx.x] = total;
    }
    __syncthreads();
}

/* Forward for the block's units. A warp takes RW rows at a time; each lane reads 16 pixels of
 * each of them per iteration (a warp: 512 contiguous bytes per row), then the warp adds up. */
template <int U, int RW> __device__ void forward_rows_at_once(const fused_mlp_args &a, block_slice<U> &s,
                                                              int first, int rows) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int F = a.features, C = a.classes, chunks = F / 16;
    for (int r0 = warp * RW; r0 < rows; r0 += WARPS * RW) {
        const uint8_t *row_pixels[RW];
#pragma unroll
        for (int i = 0; i < RW; i++) {
            int r = min(r0 + i, rows - 1); /* past the end: recompute the last row, not stored */
            row_pixels[i] = a.pixels + (size_t)__ldg(a.order + first + r) * F;
        }
        float acc[RW][U];
#pragma unroll
        for (int i = 0; i < RW; i++)
#pragma unroll
            for (int u = 0; u < U; u++) acc[i][u] = 0.0f;
        for (int j = lane; j < chunks; j += 32) {
            uint32_t words[RW][4];
#pragma unroll
            for (int i = 0; i < RW; i++) load_pixels<16>(row_pixels[i] + 16 * j, words[i]);
#pragma unroll
            for (int q = 0; q < 4; q++) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    float4 w = reinterpret_cast<const float4 *>(s.w1 + u * F)[4 * j + q];
#pragma unroll
                    for (int i = 0; i < RW; i++) {
                        uint32_t four = words[i][q];
                        acc[i][u] = fmaf(pixel(four, 0), w.x, acc[i][u]);
                        acc[i][u] = fmaf(pixel(four, 1), w.y, acc[i][u]);
                        acc[i][u] = fmaf(pixel(four, 2), w.z, acc[i][u]);
                        acc[i][u] = fmaf(pixel(four, 3), w.w, acc[i][u]);
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < RW; i++) {
            int r = r0 + i;
            float h[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                float z = a.scale * warp_sum(acc[i][u]) + a.shift * s.w1_sums[u] + s.b1[u];
                h[u] = fmaxf(z, 0.0f);
                if (lane == u && r < rows) a.hidden_t[(size_t)(blockIdx.x * U + u) * a.batch + r] = h[u];
            }
            if (lane < C && r < rows) {
                float part = 0.0f;
#pragma unroll
                for (int u = 0; u < U; u++) part = fmaf(h[u], s.w2[u * C + lane], part);
                a.partial_logits[((size_t)r * C + lane) * a.blocks + blockIdx.x] = part;
            }
        }
    }
}

/* Several rows per warp where the batch is large enough to keep every warp busy; one row per
 * warp (the shortest chain of dependent work) for small batches, where latency is all. */
template <int U> __device__ void forward(const fused_mlp_args &a, block_slice<U> &s, int first,
                                         int rows) {
    if (a.batch >= SEVERAL_ROWS_FROM_BATCH) forward_rows_at_once<U, forward_rows<U>()>(a, s, first, rows);
    else forward_rows_at_once<U, 1>(a, s, first, rows);
}

/* Softmax cross-entropy, one warp per row, rows spread over every warp of the grid. The row's
 * partial logits (C×blocks floats, contiguous) are read coalesced and summed in block order.
 * Reads of other blocks' writes bypass L1 (__ldcg): L1 is not coherent across SMs. */
__device__ void softmax(const fused_mlp_args &a, int first, int rows) {
    int lane = threadIdx.x % 32, C = a.classes, G = a.blocks;
    int warp_in_grid = blockIdx.x * WARPS + threadIdx.x / 32;
    for (int r = warp_in_grid; r < rows; r += G * WARPS) {
        const float *partials = a.partial_logits + (size_t)r * C * G;
        float my_logit = -INFINITY;
        for (int c = 0; c < C; c++) {
            float part = 0.0f;
            for (int g = lane; g < G; g += 32) part += __ldcg(partials + c * G + g);
            float logit = warp_sum(part) + __ldcg(a.params + a.b2 + c);
            if (lane == c) my_logit = logit;
        }
        float max = my_logit;
        int best = lane < C ? lane : C;
        warp_argmax(max, best);
        if (best >= C) best = 0; /* every logit NaN: the loss says so */
        float e = lane < C ? expf(my_logit - max) : 0.0f;
        float log_sum = logf(warp_sum(e));
        int sample = __ldg(a.order + first + r);
        int label = __ldg(a.labels + sample);
        float label_logit = __shfl_sync(WARP_FULL_MASK, my_logit, label);
        if (lane == 0) {
            a.row_loss[first + r] = log_sum - (label_logit - max);
            a.row_correct[first + r] = best == label ? 1.0f : 0.0f;
        }
        if (lane < C)
            a.dlogits[(size_t)r * C + lane] =
                (expf(my_logit - max - log_sum) - (lane == label ? 1.0f : 0.0f)) / rows;
    }
}

/* One parameter's update; m_correction and v_correction are Adam's 1 / (1 - beta^t). */
__device__ __forceinline__ void update(const fused_mlp_args &a, float &param, float *state0,
                                       float *state1, float grad, float m_correction,
                                       float v_correction) {
    if (a.adam) {
        float m = a.beta1 * *state0 + (1.0f - a.beta1) * grad;
        float v = a.beta2 * *state1 + (1.0f - a.beta2) * grad * grad;
        *state0 = m;
        *state1 = v;
        param -= a.lr * (m * m_correction) / (sqrtf(v * v_correction) + a.eps);
    } else {
        float v = a.momentum * *state0 + grad;
        *state0 = v;
        param -= a.lr * v;
    }
}

/* Sums over the chunk's rows, one warp per output: dW2[u][c] += h[u]·dlogits[:, c],
 * db1[u] += sum of dh[u], and in block 0, db2[c] += sum of dlogits[:, c]. */
template <int U> __device__ void chunk_sums(const fused_mlp_args &a, block_slice<U> &s, int n) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, C = a.classes;
    int outputs = U * C + U + (blockIdx.x == 0 ? C : 0);
    for (int j = warp; j < outputs; j += WARPS) {
        float part = 0.0f;
        if (j < U * C) {
            int u = j / C, c = j % C;
            for (int r = lane; r < n; r += 32) part = fmaf(s.h[u * ROW_CHUNK + r], s.dlogits[r * C + c], part);
        } else if (j < U * C + U) {
            int u = j - U * C;
            for (int r = lane; r < n; r += 32) part += s.dh[u * ROW_CHUNK + r];
        } else {
            int c = j - U * C - U;
            for (int r = lane; r < n; r += 32) part += s.dlogits[r * C + c];
        }
        part = warp_sum(part);
        if (lane == 0) {
            if (j < U * C) s.grad_w2[j] += part;
            else if (j < U * C + U) s.grad_b1[j - U * C] += part;
            else s.grad_b2[j - U * C - U] += part;
        }
    }
}

/* Backward for the block's units and the update of its parameters (and b2 in block 0).
 * For dW1 the threads are split into row groups; within a group, thread `column` owns pixels
 * [column·PIX, column·PIX + PIX) and runs over the group's rows (every groups-th row of the
 * step), its PIX×U sums in registers; at the end the groups' sums are added in group order. */
template <int U> __device__ void backward_update(const fused_mlp_args &a, block_slice<U> &s,
                                                 int first, int rows, int step) {
    constexpr int PIX = backward_pixels<U>();
    int t = threadIdx.x, C = a.classes, F = a.features;
    int columns = F / PIX, groups = backward_groups(PIX, F);
    int column = t % columns, group = t / columns;
    bool owns_pixels = group < groups;
    float acc[PIX][U];
#pragma unroll
    for (int k = 0; k < PIX; k++)
#pragma unroll
        for (int u = 0; u < U; u++) acc[k][u] = 0.0f;
    for (int i = t; i < U * C; i += blockDim.x) s.grad_w2[i] = 0.0f;
    if (t < U) s.grad_b1[t] = 0.0f;
    if (t < C) s.grad_b2[t] = 0.0f;

    for (int chunk = 0; chunk < rows; chunk += ROW_CHUNK) {
        int n = min(ROW_CHUNK, rows - chunk);
        for (int i = t; i < n * C; i += blockDim.x) s.dlogits[i] = __ldcg(a.dlogits + (size_t)chunk * C + i);
        for (int i = t; i < n; i += blockDim.x) s.samples[i] = __ldg(a.order + first + chunk + i);
        for (int i = t; i < U * n; i += blockDim.x) {
            int u = i / n, r = i % n;
            s.h[u * ROW_CHUNK + r] = __ldcg(a.hidden_t + (size_t)(blockIdx.x * U + u) * a.batch + chunk + r);
        }
        __syncthreads();
        for (int i = t; i < U * n; i += blockDim.x) {
            int u = i / n, r = i % n;
            float d = 0.0f;
            if (s.h[u * ROW_CHUNK + r] > 0.0f)
                for (int c = 0; c < C; c++) d = fmaf(s.dlogits[r * C + c], s.w2[u * C + c], d);
            s.dh[u * ROW_CHUNK + r] = d;
        }
        __syncthreads();
        chunk_sums<U>(a, s, n);
        if (owns_pixels) {
#pragma unroll 4
            for (int r = group; r < n; r += groups) {
                uint32_t words[PIX / 4];
                load_pixels<PIX>(a.pixels + (size_t)s.samples[r] * F + column * PIX, words);
                float d[U];
#pragma unroll
                for (int u = 0; u < U; u++) d[u] = s.dh[u * ROW_CHUNK + r];
#pragma unroll
                for (int k = 0; k < PIX; k++) {
                    float p = pixel(words[k / 4], k % 4);
#pragma unroll
                    for (int u = 0; u < U; u++) acc[k][u] = fmaf(p, d[u], acc[k][u]);
                }
            }
        }
        __syncthreads(); /* the next chunk overwrites dlogits, h and dh */
    }

    int t_adam = step + 1;
    float m_correction = a.adam ? (float)(1.0 / (1.0 - pow((double)a.beta1, t_adam))) : 0.0f;
    float v_correction = a.adam ? (float)(1.0 / (1.0 - pow((double)a.beta2, t_adam))) : 0.0f;
    int UF = U * F;
    if (owns_pixels)
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int k = 0; k < PIX; k++) s.grad_w1[group * UF + u * F + column * PIX + k] = acc[k][u];
    __syncthreads();
    for (int i = t; i < UF; i += blockDim.x) {
        float sum = 0.0f;
        for (int g = 0; g < groups; g++) sum += s.grad_w1[g * UF + i];
        float grad = a.scale * sum + a.shift * s.grad_b1[i / F];
        update(a, s.w1[i], &s.w1_state[i], &s.w1_state[UF + i], grad, m_correction, v_correction);
    }
    for (int i = t; i < U * C; i += blockDim.x)
        update(a, s.w2[i], &s.w2_state[i], &s.w2_state[U * C + i], s.grad_w2[i], m_correction, v_correction);
    if (t < U)
        update(a, s.b1[t], &s.b1_state[t], &s.b1_state[U + t], s.grad_b1[t], m_correction, v_correction);
    if (blockIdx.x == 0 && t < C) {
        size_t at = a.b2 + t;
        float *second = a.adam ? &a.state[1][at] : nullptr;
        float b2 = __ldcg(a.params + at);
        update(a, b2, &a.state[0][at], second, s.grad_b2[t], m_correction, v_correction);
        a.params[at] = b2;
    }
    __syncthreads();
    sum_w1_columns<U>(a, s);
}

template <int U> __global__ void __launch_bounds__(FUSED_THREADS, 1) fused_mlp_pass_kernel(fused_mlp_args a) {
    extern __shared__ float4 shared_raw[];
    block_slice<U> s = carve<U>(reinterpret_cast<float *>(shared_raw), a.features, a.classes, a.adam ? 2 : 1);
    cg::grid_group grid = cg::this_grid();

    move_slice<U>(a, s, true);
    __syncthreads();
    sum_w1_columns<U>(a, s);
    int steps_before = a.cursor->optimizer_steps;
    int steps = (a.samples + a.batch - 1) / a.batch;
    grid.sync(); /* everyone has read the cursor before block 0 moves it at the end */

    for (int step = 0; step < steps; step++) {
        int first = step * a.batch;
        int rows = min(a.batch, a.samples - first);
        forward<U>(a, s, first, rows);
        grid.sync();
        softmax(a, first, rows);
        grid.sync();
        backward_update<U>(a, s, first, rows, steps_before + step);
    }

    move_slice<U>(a, s, false);
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.cursor = pass_cursor{a.samples, steps_before + steps};
}

template <int U> void launch(cudaStream_t stream, const fused_mlp_args &args) {
    size_t shared = fused_mlp_shared_bytes(U, args.features, args.classes, args.adam ? 2 : 1);
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

size_t fused_mlp_shared_bytes(int U, int F, int C, int S) {
    int pixels_per_thread = U <= 2 ? backward_pixels<1>() : U == 4 ? backward_pixels<4>() : backward_pixels<8>();
    size_t floats = (size_t)U * F * (1 + S) + (size_t)U * C * (1 + S) + (size_t)U * (1 + S) + U +
                    (size_t)ROW_CHUNK * C + 2 * (size_t)U * ROW_CHUNK + ROW_CHUNK + (size_t)U * C + U +
                    C + (size_t)WARPS * U + (size_t)backward_groups(pixels_per_thread, F) * U * F;
    return floats * sizeof(float);
}

int fused_mlp_resident_blocks(int units_per_block, size_t shared_bytes) {
    cudaDeviceProp properties;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    if (shared_bytes > properties.sharedMemPerBlockOptin) return 0;
    switch (units_per_block) {
    case 1: return resident_blocks<1>(shared_bytes);
    case 2: return resident_blocks<2>(shared_bytes);
    case 4: return resident_blocks<4>(shared_bytes);
    case 8: return resident_blocks<8>(shared_bytes);
    default: return 0;
    }
}

size_t fused_mlp_scratch_floats(int batch, int units, int classes, int blocks) {
    return (size_t)units * batch + (size_t)batch * classes * blocks + (size_t)batch * classes;
}

void gpu_fused_mlp_pass(cudaStream_t stream, const fused_mlp_args &args) {
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
