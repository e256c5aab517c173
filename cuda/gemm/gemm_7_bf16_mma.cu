/* Ladder rung 7: tensor cores in BF16, FP32 accumulate (after gemm_tf32_mma.cu).
 *
 * BF16 keeps FP32's 8-bit exponent and 7 bits of mantissa: half the bytes of TF32's FP32
 * storage to move, and the tensor cores do twice as many BF16 multiply-adds per cycle. The
 * caller rounds A and B to BF16 once (gpu_round_to_bf16) and keeps them so; the products and
 * sums stay FP32, C is FP32.
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D (16×8) = A (16×16) · B (16×8) + C.
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane / 4, t = lane % 4, each register holding two BF16 of consecutive k:
 *   A: a0 = A[g][2t, 2t+1]   a1 = A[g+8][2t, 2t+1]   a2 = A[g][2t+8, +9]   a3 = A[g+8][2t+8, +9]
 *   B: b0 = B[2t, 2t+1][g]   b1 = B[2t+8, 2t+9][g]
 *   C, D: as for m16n8k8: c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
 * These are exactly what ldmatrix delivers: ldmatrix.x4 reads four 8×8 matrices of 16-bit
 * elements from shared memory, each row 16 contiguous bytes whose address one lane supplies
 * (lanes 0-7 the rows of matrix 0, 8-15 of matrix 1, ...), and gives lane l the elements
 * [l / 4][2(l % 4), 2(l % 4) + 1] of each matrix, one register per matrix; with .trans, the
 * elements [2(l % 4), 2(l % 4) + 1][l / 4]. So a fragment whose pairs run along a row in shared
 * memory is a plain ldmatrix, one whose pairs run down a column is ldmatrix.trans:
 *   A not transposed (rows along K), B transposed (rows along K):      ldmatrix
 *   A transposed (rows along M), B not transposed (rows along N):      ldmatrix.trans
 * One ldmatrix.x4 fetches a whole A fragment (16×16) or the B fragments of two mma tiles.
 *
 * Structure as in gemm_tf32_mma.cu: block tile 128×128, 3 cp.async stages, 4 warps as 2×2
 * with 64×64 warp tiles (4×8 mma tiles); BK = 64, the same bytes per stage as TF32's 32. Per
 * 16-deep K step a warp issues 4 + 4 ldmatrix.x4 and 32 mma. The rows of the tiles are padded by
 * 8 BF16 (16 bytes), so that the 8 rows one ldmatrix phase reads fall in 8 different 16-byte
 * bank groups: rows of 72 BF16 are 144 bytes apart, rows of 136 are 272 (both 16 mod 128).
 *
 * Small C: split-K (gemm_split_k.cuh), as in the other rungs.
 *
 * Shapes: op(A) is M×K, op(B) is K×N, C is M×N, all row-major; A (BF16) is stored M×K (K×M when
 * transposed), B (BF16) K×N (N×K when transposed), C FP32. Any M, N, K and strides: chunks of
 * 8 BF16 that cross the edge or are not 16-byte aligned are copied element by element. */
#include <cstdint>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_async_copy.cuh"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_split_k.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int BM = 128, BN = 128, BK = 64; /* block tile and K step */
constexpr int WARPS_M = 2, WARPS_N = 2, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N; /* warp tile 64×64 */
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 16;
constexpr int TILES_M = WM / MMA_M, TILES_N = WN / MMA_N; /* mma tiles per warp: 4×8 */
constexpr int STAGES = 3;
constexpr int MIN_SLICE = 64; /* split-K: the thinnest K slice worth a block */

/* An operand's tile in shared memory, X(i, kk) for i < ROWS, kk < BK, where X is op(A) (i: a
 * row of C) or op(B)ᵀ (i: a column of C), kept in the layout it has in global memory: lines
 * along K (K_CONTIGUOUS: X(i, kk) at i·LINE + kk) or along i (kk·LINE + i). */
template <int ROWS, bool K_CONTIGUOUS> struct operand_tile {
    static constexpr int LINE = K_CONTIGUOUS ? BK + 8 : ROWS + 8; /* BF16, padding included */
    static constexpr int ELEMENTS = (K_CONTIGUOUS ? ROWS : BK) * LINE;

    __device__ static const bf16 *address(const bf16 *tile, int i, int kk) {
        return K_CONTIGUOUS ? tile + i * LINE + kk : tile + kk * LINE + i;
    }

    __device__ static void start_copy(bf16 *tile, const bf16 *x, int ld, int i0, int k0, int i_end,
                                      int k_end, bool vectors) {
        if (K_CONTIGUOUS)
            copy_tile_async<bf16, ROWS, BK, LINE, THREADS>(tile, x + (size_t)i0 * ld + k0, ld, i0, k0,
                                                           i_end, k_end, vectors);
        else
            copy_tile_async<bf16, BK, ROWS, LINE, THREADS>(tile, x + (size_t)k0 * ld + i0, ld, k0, i0,
                                                           k_end, i_end, vectors);
    }
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16 *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16 *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
}

/* The A fragment of the 16×16 tile at (row, kk) of op(A): matrix q of the four (lanes 8q to
 * 8q + 7 give its rows) is a0..a3's 8×8 quarter: rows +8 for q = 1, 3; k +8 for q = 2, 3. */
template <typename TILE, bool K_CONTIGUOUS>
__device__ __forceinline__ void load_a_fragment(uint32_t (&a)[4], const bf16 *tile, int row, int kk, int lane) {
    const int q = lane / 8, r = lane % 8;
    const int i = row + (q % 2) * 8, k = kk + (q / 2) * 8; /* the quarter's top-left */
    if (K_CONTIGUOUS) ldmatrix_x4(a, TILE::address(tile, i + r, k));    /* lane's row: row i + r */
    else ldmatrix_x4_trans(a, TILE::address(tile, i, k + r));          /* lane's row: k + r */
}

/* The B fragments of the two 16×8 tiles at (kk, col) and (kk, col + 8) of op(B): matrix q is
 * register q % 2 of the left (q < 2) or right tile; columns +8 for q = 2, 3, k +8 for q = 1, 3. */
template <typename TILE, bool K_CONTIGUOUS>
__device__ __forceinline__ void load_b_fragments(uint32_t (&left)[2], uint32_t (&right)[2],
                                                 const bf16 *tile, int col, int kk, int lane) {
    const int q = lane / 8, r = lane % 8;
    const int j = col + (q / 2) * 8, k = kk + (q % 2) * 8;
    uint32_t regs[4];
    if (K_CONTIGUOUS) ldmatrix_x4(regs, TILE::address(tile, j + r, k));
    else ldmatrix_x4_trans(regs, TILE::address(tile, j, k + r));
    left[0] = regs[0], left[1] = regs[1], right[0] = regs[2], right[1] = regs[3];
}

/* d += a · b for one 16×8×16 tile, in the fragment layouts of the comment at the top. */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* C (M×N) = alpha · op(A) · op(B) + beta · C, or with partials != nullptr the raw product of
 * K slice blockIdx.z into plane z of partials. Grid ceil(N/BN) × ceil(M/BM) × slices,
 * THREADS threads, shared_bytes() of dynamic shared memory. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS)
gemm_bf16_kernel(int m, int n, int k, int k_per_split, float alpha, const bf16 *__restrict__ a,
                 int lda, const bf16 *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                 int ldc, float *__restrict__ partials, bool vector_a, bool vector_b) {
    using a_tile = operand_tile<BM, !TRANS_A>;
    using b_tile = operand_tile<BN, TRANS_B>;
    constexpr int STAGE_ELEMENTS = a_tile::ELEMENTS + b_tile::ELEMENTS;
    extern __shared__ __align__(16) bf16 shared[]; /* STAGES × (A tile, B tile) */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const gemm_k_range range = block_k_range(k, k_per_split);
    const int steps = (range.end - range.begin + BK - 1) / BK;

    auto start_copying = [&](int step) {
        bf16 *stage = shared + (step % STAGES) * STAGE_ELEMENTS;
        const int k0 = range.begin + step * BK;
        a_tile::start_copy(stage, a, lda, row0, k0, m, range.end, vector_a);
        b_tile::start_copy(stage + a_tile::ELEMENTS, b, ldb, col0, k0, n, range.end, vector_b);
    };
    /* the pipeline of gemm_pipelined.cu: one commit group per step, empty ones included */
#pragma unroll
    for (int step = 0; step < STAGES - 1; step++) {
        if (step < steps) start_copying(step);
        cp_async_commit();
    }

    float acc[TILES_M][TILES_N][4] = {};
    for (int step = 0; step < steps; step++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (step + STAGES - 1 < steps) start_copying(step + STAGES - 1);
        cp_async_commit();

        const bf16 *as = shared + (step % STAGES) * STAGE_ELEMENTS, *bs = as + a_tile::ELEMENTS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            uint32_t af[TILES_M][4], bf[TILES_N][2];
#pragma unroll
            for (int i = 0; i < TILES_M; i++)
                load_a_fragment<a_tile, !TRANS_A>(af[i], as, warp_row + i * MMA_M, kk, lane);
#pragma unroll
            for (int j = 0; j < TILES_N; j += 2)
                load_b_fragments<b_tile, TRANS_B>(bf[j], bf[j + 1], bs, warp_col + j * MMA_N, kk, lane);
#pragma unroll
            for (int i = 0; i < TILES_M; i++)
#pragma unroll
                for (int j = 0; j < TILES_N; j++) mma_bf16(acc[i][j], af[i], bf[j]);
        }
    }

    const gemm_output out = block_output(c, ldc, alpha, beta, partials, m, n);
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < TILES_M; i++)
#pragma unroll
        for (int j = 0; j < TILES_N; j++) {
            const int row = row0 + warp_row + i * MMA_M + g, col = col0 + warp_col + j * MMA_N + 2 * t;
            store_pair(out, m, n, row, col, acc[i][j][0], acc[i][j][1]);
            store_pair(out, m, n, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* Whether 16-byte copies of a BF16 matrix are aligned: the base on 16 bytes and every row. */
bool bf16_chunks_aligned(const bf16 *x, int ld) {
    return reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld % 8 == 0;
}

template <bool TRANS_A, bool TRANS_B> constexpr size_t shared_bytes() {
    return STAGES * (operand_tile<BM, !TRANS_A>::ELEMENTS + operand_tile<BN, TRANS_B>::ELEMENTS) * sizeof(bf16);
}

template <bool TRANS_A, bool TRANS_B> void launch_kernel(gemm_k_split split, float *partials, GPU_GEMM_BF16_ARGS) {
    constexpr size_t bytes = shared_bytes<TRANS_A, TRANS_B>();
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(cudaFuncSetAttribute(gemm_bf16_kernel<TRANS_A, TRANS_B>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        allowed = true;
    }
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM), split.splits);
    gemm_bf16_kernel<TRANS_A, TRANS_B><<<blocks, THREADS, bytes, stream>>>(
        m, n, k, split.k_per_split, alpha, a, lda, b, ldb, beta, c, ldc, partials,
        bf16_chunks_aligned(a, lda), bf16_chunks_aligned(b, ldb));
    CUDA_CHECK_LAUNCH();
}

void run(gemm_k_split split, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    float *partials = split.splits > 1 ? workspace.data : nullptr;
#define GEMM_BF16_LAUNCH(TA, TB)                                                                   \
    launch_kernel<TA, TB>(split, partials, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b,    \
                          ldb, beta, c, ldc)
    if (!trans_a && !trans_b) GEMM_BF16_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_BF16_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_BF16_LAUNCH(false, true);
    else GEMM_BF16_LAUNCH(true, true);
#undef GEMM_BF16_LAUNCH
    if (partials) gemm_sum_slices(stream, partials, split, m, n, alpha, beta, c, ldc);
}

} // namespace

void gpu_gemm_bf16_mma_with_splits(int splits, gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const gemm_k_split split = gemm_slices(splits, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_bf16_mma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    const long tiles = (long)blocks_for(m, BM) * blocks_for(n, BN);
    const gemm_k_split split = gemm_choose_slices(tiles, m, n, k, BK, MIN_SLICE, workspace);
    run(split, workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
