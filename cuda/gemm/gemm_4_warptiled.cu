/* Ladder rung 4, after gemm_3_blocked.cu: warp tiling.
 *
 * gemm_3_blocked.cu gives each thread an 8×8 block of C and lays the threads out row by row, so
 * the 32 threads of a warp read b_tile[kk][thread_col .. +7] at 32-byte steps: every float4
 * load of B from shared memory hits the same banks as another thread's (a 2-way bank
 * conflict), and the warp's results are scattered over a wide stripe of the block tile.
 *
 * Here the block tile is cut first among warps, then among the lanes of each warp:
 *
 *   block tile 128×128 of C (BM×BN), 8 warps as 4×2   -> a warp owns a 32×64 warp tile
 *   warp tile 32×64, the 32 lanes as a 4×8 grid       -> a lane owns 2×2 patches of 4×4,
 *                                                        16 rows and 32 columns apart
 *
 * For each kk, a lane loads one float4 of op(A) per patch row and one of op(B) per patch
 * column (4 loads for 64 multiply-adds, as before), but now the 8 lanes of a row of the lane
 * grid read 8 consecutive float4 of B (128 contiguous bytes: no bank conflict) and the lanes
 * that read A read the same float4 (a broadcast). A warp also works on a compact 32×64 area,
 * which is what the tensor-core rungs (gemm_6_tf32_mma.cu) build on.
 *
 * Also changed: BK = 16 (half the barriers per FLOP of BK = 8) and the shared rows are padded
 * by 4 floats, so the scalar stores that transpose an operand on its way in (one float at a
 * time, as in gemm_3_blocked.cu) spread over the banks. What stays: loading a tile, then a
 * barrier, then computing on it, so the load's latency is not hidden; gemm_5_tiled.cu fixes
 * that. No split-K here either: small products leave most of the GPU idle.
 *
 * Shapes: op(A) is M×K, op(B) is K×N, C is M×N, all row-major in memory; A is stored M×K
 * (K×M when transposed), B is stored K×N (N×K when transposed). Any M, N, K: tiles that cross
 * the edge load zeros and store only inside; float4 loads where aligned, scalars otherwise. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_output.cuh"

namespace {

constexpr int BM = 128, BN = 128, BK = 16;       /* block tile of C, and the K step */
constexpr int WARPS_M = 4, WARPS_N = 2;          /* warps of the block, as a grid */
constexpr int THREADS = 32 * WARPS_M * WARPS_N;  /* 256 */
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N; /* warp tile: 32×64 */
constexpr int LANES_M = 4, LANES_N = 8;          /* lanes of a warp, as a grid */
constexpr int TM = 4, TN = 4;                    /* a lane's patch: one float4 wide */
constexpr int REPEAT_M = WM / (LANES_M * TM);    /* patches per lane, down: 2 */
constexpr int REPEAT_N = WN / (LANES_N * TN);    /* and across: 2 */
constexpr int PAD = 4;                           /* floats after each shared row */
static_assert(REPEAT_M * LANES_M * TM == WM && REPEAT_N * LANES_N * TN == WN, "tiles must nest");

/* Four floats from `from`, of which only the first `inside` are in the matrix (zeros for the
 * rest): one float4 load when all four are in and the address is 16-byte aligned. */
__device__ __forceinline__ float4 load_four(const float *from, int inside, bool vectors) {
    if (vectors && inside >= 4) return *reinterpret_cast<const float4 *>(from);
    float e[4];
#pragma unroll
    for (int t = 0; t < 4; t++) e[t] = t < inside ? from[t] : 0.0f;
    return make_float4(e[0], e[1], e[2], e[3]);
}

/* tile[kk][i] = X(i0 + i, k0 + kk) for kk < BK, i < WIDTH, zero outside the matrix, where X is
 * op(A) (i: a row of C) or op(B)ᵀ (i: a column of C). K_CONTIGUOUS says how X is stored:
 * element (i, k) at x[i·ld + k] (A not transposed, B transposed) or at x[k·ld + i] (the other
 * two). Loads are float4 along whichever of i and k is contiguous; along k, the four values
 * are transposed into four rows of the tile. */
template <int WIDTH, bool K_CONTIGUOUS>
__device__ __forceinline__ void load_tile(float (*tile)[WIDTH + PAD], const float *x, int ld,
                                          int i0, int k0, int i_end, int k_end, bool vectors) {
    constexpr int VECTORS = BK * WIDTH / 4;
    static_assert(VECTORS % THREADS == 0, "every thread loads the same number of float4");
#pragma unroll
    for (int round = 0; round < VECTORS / THREADS; round++) {
        const int v = threadIdx.x + round * THREADS;
        if (K_CONTIGUOUS) { /* consecutive threads: consecutive float4 along k of one i */
            const int i = v / (BK / 4), kk = (v % (BK / 4)) * 4;
            const int inside = i0 + i < i_end ? k_end - (k0 + kk) : 0;
            const float4 q = load_four(x + (size_t)(i0 + i) * ld + (k0 + kk), inside, vectors);
            tile[kk][i] = q.x, tile[kk + 1][i] = q.y, tile[kk + 2][i] = q.z, tile[kk + 3][i] = q.w;
        } else { /* consecutive threads: consecutive float4 along i of one k */
            const int kk = v / (WIDTH / 4), i = (v % (WIDTH / 4)) * 4;
            const int inside = k0 + kk < k_end ? i_end - (i0 + i) : 0;
            *reinterpret_cast<float4 *>(&tile[kk][i]) =
                load_four(x + (size_t)(k0 + kk) * ld + (i0 + i), inside, vectors);
        }
    }
}

/* acc += a ⊗ b: the 4×4 outer product of a column piece of op(A) and a row piece of op(B). */
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], float4 a, float4 b) {
    const float av[TM] = {a.x, a.y, a.z, a.w}, bv[TN] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] += av[i] * bv[j];
}

/* C (M×N) = alpha · op(A) · op(B) + beta · C; grid ceil(N/BN) × ceil(M/BM), THREADS threads. */
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(THREADS, 2)
gemm_warptiled_kernel(int m, int n, int k, float alpha, const float *__restrict__ a, int lda,
                      const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
                      int ldc, bool vector_a, bool vector_b) {
    __shared__ __align__(16) float a_tile[BK][BM + PAD]; /* a_tile[kk][i] = op(A)[row0 + i][k0 + kk] */
    __shared__ __align__(16) float b_tile[BK][BN + PAD]; /* b_tile[kk][j] = op(B)[k0 + kk][col0 + j] */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* where this lane's first patch starts in the block tile; the others are 16 rows and 32
     * columns further (LANES_M·TM, LANES_N·TN) */
    const int patch_row = (warp / WARPS_N) * WM + (lane / LANES_N) * TM;
    const int patch_col = (warp % WARPS_N) * WN + (lane % LANES_N) * TN;

    float acc[REPEAT_M][REPEAT_N][TM][TN] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        load_tile<BM, !TRANS_A>(a_tile, a, lda, row0, k0, m, k, vector_a);
        load_tile<BN, TRANS_B>(b_tile, b, ldb, col0, k0, n, k, vector_b);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 a_piece[REPEAT_M], b_piece[REPEAT_N];
#pragma unroll
            for (int rm = 0; rm < REPEAT_M; rm++)
                a_piece[rm] = *reinterpret_cast<const float4 *>(&a_tile[kk][patch_row + rm * LANES_M * TM]);
#pragma unroll
            for (int rn = 0; rn < REPEAT_N; rn++)
                b_piece[rn] = *reinterpret_cast<const float4 *>(&b_tile[kk][patch_col + rn * LANES_N * TN]);
#pragma unroll
            for (int rm = 0; rm < REPEAT_M; rm++)
#pragma unroll
                for (int rn = 0; rn < REPEAT_N; rn++) outer_product(acc[rm][rn], a_piece[rm], b_piece[rn]);
        }
        __syncthreads();
    }

    const gemm_output out = output_to_c(c, ldc, alpha, beta);
    for_each_quad<LANES_M, LANES_N>(acc, patch_row, patch_col, [&](int row, int col, float4 quad) {
        store_quad(out, m, n, row0 + row, col0 + col, quad);
    });
}

} // namespace

void gpu_gemm_warptiled(GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    const dim3 blocks(blocks_for(n, BN), blocks_for(m, BM));
    const bool va = vectors_aligned(a, lda), vb = vectors_aligned(b, ldb);
#define GEMM_WARPTILED_LAUNCH(TA, TB)                                                              \
    gemm_warptiled_kernel<TA, TB><<<blocks, THREADS, 0, stream>>>(m, n, k, alpha, a, lda, b, ldb,  \
                                                                  beta, c, ldc, va, vb)
    if (!trans_a && !trans_b) GEMM_WARPTILED_LAUNCH(false, false);
    else if (trans_a && !trans_b) GEMM_WARPTILED_LAUNCH(true, false);
    else if (!trans_a && trans_b) GEMM_WARPTILED_LAUNCH(false, true);
    else GEMM_WARPTILED_LAUNCH(true, true);
#undef GEMM_WARPTILED_LAUNCH
    CUDA_CHECK_LAUNCH();
}
