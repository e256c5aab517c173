/* Ladder rung 3, blocked: shared-memory tiles plus register blocking and 16-byte loads.
 *
 * A block of THREADS = (BM/TM)·(BN/TN) threads computes a BM×BN tile of C; each thread owns a
 * TM×TN sub-tile held in registers. For each BK-deep slice of K:
 *   1. the block copies the BM×BK tile of op(A) and the BK×BN tile of op(B) into shared memory,
 *      as float4 loads along whichever dimension is contiguous in memory (so a transposed
 *      operand is read just as efficiently: the transpose happens on the way into shared memory);
 *      op(A) is stored k-major (a_tile[kk][i]) so a thread's TM values of a column are adjacent;
 *   2. for each kk, every thread reads TM values of op(A) and TN of op(B) from shared memory
 *      (float4 reads) and does TM·TN multiply-adds with them: TM+TN loads per TM·TN FMAs,
 *      against 2 loads per FMA in gemm_2_shared.cu.
 * Tiles that cross the matrix edge (any M, N, K) load zeros outside it and store only inside.
 * The store applies the epilogue (bias, ReLU, ReLU mask: core/backend.h) on the way out, so a
 * layer's forward pass or input gradient needs no second pass over C.
 *
 * The tile size is chosen per call: big tiles reuse data best, but a small matrix cut into big
 * tiles leaves most of the GPU's multiprocessors idle, so smaller tiles are used until there
 * are enough blocks to go round.
 *
 * Split-K, for outputs too small to fill the GPU even then (the MLP's layers: 512×256 is 32
 * tiles of 64×64 for 132 multiprocessors). With one block per tile, each block would walk all
 * of K alone, one slow round trip to memory per BK step, while most multiprocessors idle. So
 * K is cut into `splits` slices (grid z): block z multiplies only its slice and stores the raw
 * partial tile into a workspace (splits planes of M×N), then gemm_sum_slices adds the planes
 * in the order z = 0, 1, ... and applies alpha and beta. No atomics, so the result is the same
 * bits on every run. The workspace belongs to the caller (allocated once, outside any step);
 * a shape whose planes would not fit in it uses fewer splits. */
#include <cstdio>
#include <cstdlib>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_split_k.cuh"
#include "cuda/gemm/gemm_ladder.h"

namespace {

template <int BM, int BN, int BK, int TM, int TN> struct tile_shape {
    static constexpr int threads = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 access needs multiples of 4");
};

/* a_tile[kk][i] = op(A)[row0 + i][k0 + kk], zero outside the M×K matrix. */
template <int BM, int BK, int THREADS, bool TRANS_A>
__device__ __forceinline__ void load_a_tile(float (*a_tile)[BM], const float *a, int lda, int m,
                                            int k, int row0, int k0, bool vectors) {
    if (!TRANS_A) { /* A is M×K: rows of A are contiguous along k */
        constexpr int VECTORS = BM * BK / 4;
#pragma unroll
        for (int v = threadIdx.x; v < VECTORS; v += THREADS) {
            int i = v / (BK / 4), kk = (v % (BK / 4)) * 4;
            int row = row0 + i, col = k0 + kk;
            if (vectors && row < m && col + 3 < k) {
                float4 q = *reinterpret_cast<const float4 *>(a + (size_t)row * lda + col);
                a_tile[kk][i] = q.x, a_tile[kk + 1][i] = q.y;
                a_tile[kk + 2][i] = q.z, a_tile[kk + 3][i] = q.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    a_tile[kk + e][i] = (row < m && col + e < k) ? a[(size_t)row * lda + col + e] : 0.0f;
            }
        }
    } else { /* A is K×M: rows of A are contiguous along m */
        constexpr int VECTORS = BK * BM / 4;
#pragma unroll
        for (int v = threadIdx.x; v < VECTORS; v += THREADS) {
            int kk = v / (BM / 4), i = (v % (BM / 4)) * 4;
            int row = row0 + i, col = k0 + kk;
            const float *src = a + (size_t)col * lda + row;
            if (vectors && col < k && row + 3 < m) {
                *reinterpret_cast<float4 *>(&a_tile[kk][i]) = *reinterpret_cast<const float4 *>(src);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) a_tile[kk][i + e] = (col < k && row + e < m) ? src[e] : 0.0f;
            }
        }
    }
}

/* b_tile[kk][j] = op(B)[k0 + kk][col0 + j], zero outside the K×N matrix. */
template <int BN, int BK, int THREADS, bool TRANS_B>
__device__ __forceinline__ void load_b_tile(float (*b_tile)[BN], const float *b, int ldb, int k,
                                            int n, int k0, int col0, bool vectors) {
    if (!TRANS_B) { /* B is K×N: contiguous along n */
        constexpr int VECTORS = BK * BN / 4;
#pragma unroll
        for (int v = threadIdx.x; v < VECTORS; v += THREADS) {
            int kk = v / (BN / 4), j = (v % (BN / 4)) * 4;
            int row = k0 + kk, col = col0 + j;
            const float *src = b + (size_t)row * ldb + col;
            if (vectors && row < k && col + 3 < n) {
                *reinterpret_cast<float4 *>(&b_tile[kk][j]) = *reinterpret_cast<const float4 *>(src);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) b_tile[kk][j + e] = (row < k && col + e < n) ? src[e] : 0.0f;
            }
        }
    } else { /* B is N×K: contiguous along k */
        constexpr int VECTORS = BN * BK / 4;
#pragma unroll
        for (int v = threadIdx.x; v < VECTORS; v += THREADS) {
            int j = v / (BK / 4), kk = (v % (BK / 4)) * 4;
            int col = col0 + j, row = k0 + kk;
            const float *src = b + (size_t)col * ldb + row;
            if (vectors && col < n && row + 3 < k) {
                float4 q = *reinterpret_cast<const float4 *>(src);
                b_tile[kk][j] = q.x, b_tile[kk + 1][j] = q.y;
                b_tile[kk + 2][j] = q.z, b_tile[kk + 3][j] = q.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++) b_tile[kk + e][j] = (col < n && row + e < k) ? src[e] : 0.0f;
            }
        }
    }
}

/* Writes the thread's TM×TN accumulators to C (row0, col0 = its top-left element), through
 * the epilogue. */
template <int TM, int TN>
__device__ __forceinline__ void store_c_tile(const float (&acc)[TM][TN], float *c, int ldc, int m,
                                             int n, int row0, int col0, float alpha, float beta,
                                             const gemm_epilogue &epilogue, bool vectors) {
#pragma unroll
    for (int i = 0; i < TM; i++) {
        int row = row0 + i;
        if (row >= m) break;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            int col = col0 + j;
            float *out = c + (size_t)row * ldc + col;
            if (vectors && col + 3 < n) {
                float4 q = make_float4(alpha * acc[i][j], alpha * acc[i][j + 1],
                                       alpha * acc[i][j + 2], alpha * acc[i][j + 3]);
                if (beta != 0.0f) {
                    float4 old = *reinterpret_cast<const float4 *>(out);
                    q.x += beta * old.x, q.y += beta * old.y, q.z += beta * old.z, q.w += beta * old.w;
                }
                q.x = apply_epilogue(q.x, epilogue, row, col, ldc);
                q.y = apply_epilogue(q.y, epilogue, row, col + 1, ldc);
                q.z = apply_epilogue(q.z, epilogue, row, col + 2, ldc);
                q.w = apply_epilogue(q.w, epilogue, row, col + 3, ldc);
                *reinterpret_cast<float4 *>(out) = q;
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (col + e < n)
                        write_c(c, ldc, row, col + e, acc[i][j + e], alpha, beta, epilogue);
            }
        }
    }
}

/* C (M×N) = epilogue(alpha · op(A) (M×K) · op(B) (K×N) + beta · C); grid: ceil(N/BN) ×
 * ceil(M/BM) × splits. Block z covers K in [z·k_per_split, (z+1)·k_per_split). With
 * partials == NULL (one split) it writes C; otherwise it writes its raw sum to plane z of
 * partials (M×N, row stride N), and gemm_sum_slices (gemm_split_k.cu) finishes C.
 * C must not overlap A or B (the pointers are __restrict__); no caller of the table does that. */
template <int BM, int BN, int BK, int TM, int TN, bool TRANS_A, bool TRANS_B>
/* two blocks per multiprocessor: the register cap that implies (128) is what the 128×128 tile
 * uses anyway, and it keeps ptxas from spilling in the 64×64 one */
__global__ void __launch_bounds__(tile_shape<BM, BN, BK, TM, TN>::threads, 2)
gemm_blocked_kernel(int m, int n, int k, int k_per_split, float alpha, const float *__restrict__ a,
                    int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                    int ldc, gemm_epilogue epilogue, float *__restrict__ partials, bool vector_a,
                    bool vector_b, bool vector_out) {
    constexpr int THREADS = tile_shape<BM, BN, BK, TM, TN>::threads;
    __shared__ __align__(16) float a_tile[BK][BM];
    __shared__ __align__(16) float b_tile[BK][BN];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int thread_row = (threadIdx.x / (BN / TN)) * TM; /* the thread's sub-tile in the tile */
    const int thread_col = (threadIdx.x % (BN / TN)) * TN;

    /* this block's slice of K; the loads treat its end as the matrix's edge */
    const int k_begin = blockIdx.z * k_per_split;
    const int k_end = min(k, k_begin + k_per_split);

    float acc[TM][TN] = {};
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        load_a_tile<BM, BK, THREADS, TRANS_A>(a_tile, a, lda, m, k_end, row0, k0, vector_a);
        load_b_tile<BN, BK, THREADS, TRANS_B>(b_tile, b, ldb, k_end, n, k0, col0, vector_b);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float a_column[TM], b_row[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4 *>(&a_column[i]) =
                    *reinterpret_cast<const float4 *>(&a_tile[kk][thread_row + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4 *>(&b_row[j]) =
                    *reinterpret_cast<const float4 *>(&b_tile[kk][thread_col + j]);
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] += a_column[i] * b_row[j];
        }
        __syncthreads();
    }
    if (partials)
        store_c_tile<TM, TN>(acc, partials + (size_t)blockIdx.z * m * n, n, m, n, row0 + thread_row,
                             col0 + thread_col, 1.0f, 0.0f, gemm_epilogue{}, vector_out);
    else
        store_c_tile<TM, TN>(acc, c, ldc, m, n, row0 + thread_row, col0 + thread_col, alpha, beta,
                             epilogue, vector_out);
}

/* How one call is cut up: the tile side, and K in `splits` slices of k_per_split. */
struct gemm_plan {
    int tile;
    int splits;
    int k_per_split;
};

template <int BM, int BN, int BK, int TM, int TN>
void launch(const gemm_plan &plan, gpu_gemm_workspace workspace, const gemm_epilogue &epilogue,
            GPU_GEMM_ARGS) {
    constexpr int THREADS = tile_shape<BM, BN, BK, TM, TN>::threads;
    dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), plan.splits);
    float *partials = plan.splits > 1 ? workspace.data : nullptr;
    bool va = vectors_aligned(a, lda), vb = vectors_aligned(b, ldb);
    bool vout = partials ? n % 4 == 0 : vectors_aligned(c, ldc);
#define GEMM_BLOCKED_LAUNCH(TA, TB)                                                                \
    gemm_blocked_kernel<BM, BN, BK, TM, TN, TA, TB><<<blocks, THREADS, 0, stream>>>(               \
        m, n, k, plan.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, epilogue, partials, va, vb, \
        vout)
    if (!trans_a && !trans_b) GEMM_BLOCKED_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_BLOCKED_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_BLOCKED_LAUNCH(false, true);
    else GEMM_BLOCKED_LAUNCH(true, true);
#undef GEMM_BLOCKED_LAUNCH
    CUDA_CHECK_LAUNCH();
    if (partials)
        gemm_sum_slices(stream, partials, {plan.splits, plan.k_per_split}, m, n, alpha, beta, c,
                        ldc, epilogue);
}

long tiles(int m, int n, int tile) { return (long)((m + tile - 1) / tile) * ((n + tile - 1) / tile); }

int depth_of(int tile) { return tile == 32 ? 16 : 8; } /* BK of each tile's kernel, below */

/* Slices of K for `splits` wanted (gemm_slices): whole BK steps, each at least 32 deep (a thinner
 * slice would spend more on its partial tile than on multiplying). */
gemm_plan split_k(int tile, int wanted, int m, int n, int k, gpu_gemm_workspace workspace) {
    constexpr int MIN_SLICE = 32;
    gemm_k_split split = gemm_slices(wanted, m, n, k, depth_of(tile), MIN_SLICE, workspace);
    return {tile, split.splits, split.k_per_split};
}

/* The largest tile that still gives every multiprocessor a block; failing that, split K until
 * there are about two blocks per multiprocessor, on 64×64 tiles (32×32 when M or N is under
 * 64, where a 64-wide tile would be mostly padding). */
gemm_plan choose_plan(int m, int n, int k, gpu_gemm_workspace workspace) {
    int sms = gemm_multiprocessor_count();
    if (tiles(m, n, 128) >= sms) return {128, 1, k};
    if (tiles(m, n, 64) >= sms) return {64, 1, k};
    int tile = (m < 64 || n < 64) ? 32 : 64;
    long wanted = (2L * sms + tiles(m, n, tile) - 1) / tiles(m, n, tile);
    return split_k(tile, (int)wanted, m, n, k, workspace);
}

void run_plan(const gemm_plan &plan, gpu_gemm_workspace workspace, const gemm_epilogue &epilogue,
              GPU_GEMM_ARGS) {
#define GEMM_TILED_ARGS stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    if (plan.tile == 128) launch<128, 128, 8, 8, 8>(plan, workspace, epilogue, GEMM_TILED_ARGS);
    else if (plan.tile == 64) launch<64, 64, 8, 4, 4>(plan, workspace, epilogue, GEMM_TILED_ARGS);
    else launch<32, 32, 16, 4, 4>(plan, workspace, epilogue, GEMM_TILED_ARGS);
#undef GEMM_TILED_ARGS
}

} // namespace

void gpu_gemm_blocked_with_plan(int tile, int splits, gpu_gemm_workspace workspace, GPU_GEMM_ARGS,
                              const gemm_epilogue *epilogue) {
    if (m == 0 || n == 0) return;
    if (tile != 32 && tile != 64 && tile != 128) {
        std::fprintf(stderr, "gpu_gemm_blocked_with_plan: no %d×%d tile (32, 64 or 128)\n", tile, tile);
        std::exit(1);
    }
    gemm_plan plan = split_k(tile, splits, m, n, k, workspace);
    run_plan(plan, workspace, epilogue ? *epilogue : gemm_epilogue{}, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_blocked(gpu_gemm_workspace workspace, GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    if (m == 0 || n == 0) return;
    gemm_plan plan = choose_plan(m, n, k, workspace);
    run_plan(plan, workspace, epilogue ? *epilogue : gemm_epilogue{}, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
