/* Ladder rung 11, Hopper only (sm_90a): rungs 8 and 9's wgmma, fed by the Tensor Memory
 * Accelerator and a producer warpgroup instead of every thread's cp.async. BF16 (rung 8's
 * contract: BF16 A and B) and TF32 (rung 9's: FP32 A and B, read by the tensor cores as TF32,
 * truncated); FP32 C and sums in both.
 *
 * Block tile 128×256, one 128-byte row of K per step (BK = 64 BF16 or 32 FP32), 4 stages of
 * 48 KB. Persistent: one block per multiprocessor takes tiles in turn, and its three warpgroups
 * run through them at their own pace:
 *   producer (warpgroup 0, one thread): for each step, waits until its stage is free (the
 *     stage's `empty` barrier), announces the stage's bytes on its `full` barrier and starts
 *     the TMA copies of the A and B tiles, which land in the 128-byte swizzle wgmma reads and
 *     complete that barrier themselves;
 *   consumers (warpgroups 1 and 2, rows 64c..64c+63 of the tile): for each step, wait on
 *     `full`, issue wgmma m64n256 over the stage and keep it in flight while they wait for the
 *     next, then free the stage (`empty`).
 * No thread copies, and no barrier joins the whole block inside the loop; the producer loads
 * the next tile's stages while the consumers store the last one.
 *
 * TF32 wgmma reads only K-major tiles from shared memory, but its A may come from registers. So
 * no layout needs rung 9's transposing pass but TN: an MN-major op(A) is read from its tile into
 * registers (TT), NN is computed as Cᵀ = op(B)ᵀ · op(A)ᵀ with op(B)ᵀ through registers and C
 * stored transposed, and TN lays B out K-major in the workspace first (transpose.cu).
 *
 * TMA needs what it reads described by a tensor map: a 16-byte aligned base and row stride. An
 * operand without them, K = 0, or TN without room in the workspace go to the rung before
 * (gemm_8_bf16_wgmma.cu, gemm_9_tf32_wgmma.cu), whose element-by-element paths take any layout.
 * No split-K: this rung is for products with a wave of tiles or more. The design and its
 * measurements: docs/kernels.md, rung 11 in "The GEMM ladder". */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda.h> /* CUtensorMap */
#include <cudaTypedefs.h>

#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_common.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "cuda/gemm/gemm_output.cuh"
#include "cuda/gemm/gemm_split_k.cuh" /* gemm_multiprocessor_count */
#include "cuda/gemm/wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int BM = 128, BN = 256, STAGES = 4;
constexpr int CONSUMERS = BM / 64, THREADS = 128 * (1 + CONSUMERS);
constexpr int ACCUMULATORS = BN / 2; /* per consumer thread: its warpgroup's 64×256 over 128 */
constexpr int A_TILE_BYTES = BM * ROW_BYTES, B_TILE_BYTES = BN * ROW_BYTES;
constexpr int STAGE_BYTES = A_TILE_BYTES + B_TILE_BYTES;
constexpr size_t SHARED_BYTES = (size_t)STAGES * STAGE_BYTES + SWIZZLE_BYTES; /* + alignment */
/* Registers: the producer gives most of its own back, so that each consumer thread can hold its
 * 128 accumulators (PTX ISA, setmaxnreg; 128·40 + 256·232 <= 65536). */
constexpr int PRODUCER_REGISTERS = 40, CONSUMER_REGISTERS = 232;

template <typename T> struct element {
    static constexpr int BK = ROW_BYTES / (int)sizeof(T); /* a K step: one 128-byte row */
    static constexpr int WGMMA_K = 32 / (int)sizeof(T);   /* 16 BF16, 8 TF32 */
    static constexpr int KSTEPS = BK / WGMMA_K;           /* wgmma per stage */
    static constexpr int ATOM_ROWS = ROW_BYTES / (int)sizeof(T); /* MN-major: i in a row */
    static constexpr int ATOM_BYTES = BK * ROW_BYTES;            /* MN-major: all BK k of them */
};

/* ---- the barriers: mbarrier objects in shared memory (PTX ISA, "Parallel Synchronization and
 * Communication Instructions: mbarrier"). A phase completes when its expected arrivals have
 * arrived and its expected bytes have landed; waiters ask for a phase by its parity. ---- */

__device__ __forceinline__ void barrier_init(uint64_t *barrier, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals));
}

/* Makes the initialized barriers visible to the TMA unit (the async proxy) and the other threads
 * (with the __syncthreads that follows). */
__device__ __forceinline__ void barrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}

/* One arrival that also announces `bytes` to come from TMA copies in this phase. */
__device__ __forceinline__ void barrier_arrive_expecting(uint64_t *barrier, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint64_t *barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

/* Until the phase of this parity has completed. A fresh barrier counts the phase before its
 * first (parity 1) as completed. */
__device__ __forceinline__ void barrier_wait(uint64_t *barrier, int parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred complete;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, complete;\n}\n"
                     : "=r"(done)
                     : "r"(shared_address(barrier)), "r"(parity)
                     : "memory");
    } while (!done);
}

/* A TMA copy of the box at (inner, outer) of the map's tensor into shared memory; the bytes
 * count towards `barrier`'s phase. Elements outside the tensor land as zeros. */
__device__ __forceinline__ void tma_load(void *to, const CUtensorMap *map, int inner, int outer,
                                         uint64_t *barrier) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(shared_address(to)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(barrier))
                 : "memory");
}

template <int REGISTERS> __device__ __forceinline__ void registers_down() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
template <int REGISTERS> __device__ __forceinline__ void registers_up() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}

/* ---- the tiles: X(i, k) for i < ROWS, k < BK, where X is op(A) (i: a row of C) or op(B)ᵀ
 * (i: a column of C), in the 128-byte swizzle (gemm_8_bf16_wgmma.cu's layouts, which TMA writes
 * when told SWIZZLE_128B). K-major: row i holds the BK k of i, one box of BK × ROWS. MN-major:
 * atom a (the ATOM_ROWS i from a·ATOM_ROWS) holds row k for each k, one box of ATOM_ROWS × BK
 * per atom. ---- */

template <typename T, int ROWS, bool MN_MAJOR> struct tile {
    static constexpr int ATOM_ROWS = element<T>::ATOM_ROWS, ATOM_BYTES = element<T>::ATOM_BYTES;

    __device__ static void load(char *to, const CUtensorMap *map, int i0, int k0, uint64_t *barrier) {
        if constexpr (MN_MAJOR) {
#pragma unroll
            for (int atom = 0; atom < ROWS / ATOM_ROWS; atom++)
                tma_load(to + atom * ATOM_BYTES, map, i0 + ATOM_ROWS * atom, k0, barrier);
        } else {
            tma_load(to, map, k0, i0, barrier);
        }
    }

    /* The descriptor of the 64 (A) or ROWS (B) rows from i (i % 64 == 0) for the k from kk. */
    __device__ static uint64_t slice(const char *tile_start, int i, int kk) {
        constexpr int LEADING_BYTES = MN_MAJOR ? ATOM_BYTES : 16; /* unused K-major */
        const int offset = MN_MAJOR ? i / ATOM_ROWS * ATOM_BYTES + kk * ROW_BYTES
                                    : i * ROW_BYTES + kk * (int)sizeof(T);
        return descriptor(tile_start + offset, LEADING_BYTES, SWIZZLE_BYTES);
    }

    /* Element (i, k) of an MN-major tile of 32-bit elements. */
    __device__ static uint32_t at(const char *tile_start, int i, int k) {
        static_assert(MN_MAJOR && sizeof(T) == 4, "read one by one: TF32 A fragments only");
        const int offset = i / ATOM_ROWS * ATOM_BYTES + k * ROW_BYTES + swizzled_chunk(i % ATOM_ROWS / 4, k);
        return *reinterpret_cast<const uint32_t *>(tile_start + offset + i % 4 * 4);
    }
};

/* TF32 wgmma reads only K-major tiles from shared memory, but A may come from registers: an
 * MN-major op(A) is read into them, per warp of the warpgroup 16 rows in mma.sync m16n8k8's A
 * layout (mma_sync.cuh): a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4), for
 * each 8 k of the stage. */
using a_fragments = uint32_t[element<float>::KSTEPS][4];

__device__ __forceinline__ void load_a_fragments(a_fragments &a, const char *a_tile, int consumer) {
    using a_tile_t = tile<float, BM, true>;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int i = 64 * consumer + 16 * (threadIdx.x / 32 % 4) + g;
#pragma unroll
    for (int step = 0; step < element<float>::KSTEPS; step++) {
        const int k = 8 * step + t;
        a[step][0] = a_tile_t::at(a_tile, i, k), a[step][1] = a_tile_t::at(a_tile, i + 8, k);
        a[step][2] = a_tile_t::at(a_tile, i, k + 4), a[step][3] = a_tile_t::at(a_tile, i + 8, k + 4);
    }
}

/* ---- d (64×256, the warpgroup's) += A (64×K) · B (K×256) from shared memory: BF16 k16 with
 * the transpose bits (1: MN-major), TF32 k8 (K-major only). Accumulator layout as m64n128's
 * (gemm_8_bf16_wgmma.cu), 32 column groups of 8. ---- */

#define D_OPERANDS_8(i)                                                                            \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define D_OPERANDS                                                                                 \
    D_OPERANDS_8(0), D_OPERANDS_8(8), D_OPERANDS_8(16), D_OPERANDS_8(24), D_OPERANDS_8(32),        \
        D_OPERANDS_8(40), D_OPERANDS_8(48), D_OPERANDS_8(56), D_OPERANDS_8(64), D_OPERANDS_8(72),  \
        D_OPERANDS_8(80), D_OPERANDS_8(88), D_OPERANDS_8(96), D_OPERANDS_8(104), D_OPERANDS_8(112), \
        D_OPERANDS_8(120)
#define D_REGISTERS                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "       \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "        \
    "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "        \
    "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "        \
    "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "        \
    "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, "    \
    "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "         \
    "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "

template <int MN_MAJOR_A, int MN_MAJOR_B>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[ACCUMULATORS], uint64_t a, uint64_t b) {
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " D_REGISTERS
                 "%128, %129, accumulate, 1, 1, %131, %132;\n}\n"
                 : D_OPERANDS
                 : "l"(a), "l"(b), "r"(1), "n"(MN_MAJOR_A), "n"(MN_MAJOR_B));
}

__device__ __forceinline__ void wgmma_m64n256k8(float (&d)[ACCUMULATORS], uint64_t a, uint64_t b) {
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " D_REGISTERS
                 "%128, %129, accumulate, 1, 1;\n}\n"
                 : D_OPERANDS
                 : "l"(a), "l"(b), "r"(1));
}

__device__ __forceinline__ void wgmma_m64n256k8_a_registers(float (&d)[ACCUMULATORS], const uint32_t (&a)[4],
                                                            uint64_t b) {
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " D_REGISTERS
                 "{%128, %129, %130, %131}, %132, accumulate, 1, 1;\n}\n"
                 : D_OPERANDS
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

#undef D_REGISTERS
#undef D_OPERANDS
#undef D_OPERANDS_8

/* One step of a consumer: its 64 rows of the stage's A tile (or of `a`, its fragments in
 * registers, for an MN-major TF32 A) times the whole B tile. */
template <typename T, bool MN_MAJOR_A, bool MN_MAJOR_B>
__device__ __forceinline__ void multiply_stage(float (&acc)[ACCUMULATORS], const a_fragments &a,
                                               const char *a_tile, const char *b_tile, int consumer) {
    using a_tile_t = tile<T, BM, MN_MAJOR_A>;
    using b_tile_t = tile<T, BN, MN_MAJOR_B>;
    constexpr bool A_IN_REGISTERS = sizeof(T) == 4 && MN_MAJOR_A;
    static_assert(sizeof(T) == 2 || !MN_MAJOR_B, "TF32 wgmma: B K-major");
#pragma unroll
    for (int step = 0; step < element<T>::KSTEPS; step++) {
        const int kk = step * element<T>::WGMMA_K;
        const uint64_t b = b_tile_t::slice(b_tile, 0, kk);
        if constexpr (A_IN_REGISTERS) {
            wgmma_m64n256k8_a_registers(acc, a[step], b);
        } else {
            const uint64_t a_slice = a_tile_t::slice(a_tile, 64 * consumer, kk);
            if constexpr (sizeof(T) == 2) wgmma_m64n256k16<MN_MAJOR_A, MN_MAJOR_B>(acc, a_slice, b);
            else wgmma_m64n256k8(acc, a_slice, b);
        }
    }
}

/* Stores the consumer's 64×256 of the tile at (row0, col0): C(row, col), or with C_TRANSPOSED
 * C(col, row), = alpha · acc + beta · C, inside the m×n product only. */
template <bool C_TRANSPOSED>
__device__ __forceinline__ void store_tile(const float (&acc)[ACCUMULATORS], const gemm_output &out, int m,
                                           int n, int row0, int col0) {
    if constexpr (!C_TRANSPOSED) {
        store_accumulators<BN>(acc, out, m, n, row0, col0);
    } else { /* wgmma.cuh's fragment order; lanes g: 8 consecutive floats of a row of C */
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int row = row0 + 16 * (threadIdx.x / 32 % 4) + g;
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = row + e / 2 * 8, cc = col0 + 8 * j + 2 * t + e % 2;
                if (r < m && cc < n) write_c(out.c, out.ldc, cc, r, acc[4 * j + e], out.alpha, out.beta);
            }
    }
}

/* Where tile t of the ceil(M/BM) × ceil(N/BN) grid starts. Tiles go column by column through
 * bands of BAND_ROWS tile rows, so that the blocks at work at one time share few rows of A and
 * columns of B, and L2 holds them, even where B alone would not fit. */
constexpr int BAND_ROWS = 8;
struct tile_origin {
    int row0, col0;
};
__device__ __forceinline__ tile_origin origin_of(int t, int tile_rows, int tile_cols) {
    const int band = t / (BAND_ROWS * tile_cols), in_band = t % (BAND_ROWS * tile_cols);
    const int band_rows = min(BAND_ROWS, tile_rows - band * BAND_ROWS);
    return {(band * BAND_ROWS + in_band % band_rows) * BM, in_band / band_rows * BN};
}

/* The M×N product alpha · op(A) · op(B) + beta · C, stored as C (M×N), or with C_TRANSPOSED as
 * its transpose (C is N×M); A and B read through their tensor maps (T: bf16, or float read as
 * TF32: then B K-major, and an MN-major A through registers). Persistent: block b takes tiles
 * b, b + gridDim.x, ... (origin_of), so the producer loads the next tile's stages while the
 * consumers store the last one. THREADS threads, SHARED_BYTES of dynamic shared memory. */
template <typename T, bool MN_MAJOR_A, bool MN_MAJOR_B, bool C_TRANSPOSED>
__global__ void __launch_bounds__(THREADS, 1)
gemm_wgmma_tma_kernel(const __grid_constant__ CUtensorMap a_map,
                      const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                      float beta, float *__restrict__ c, int ldc) {
    constexpr int BK = element<T>::BK;
    constexpr bool A_IN_REGISTERS = sizeof(T) == 4 && MN_MAJOR_A;
    /* A step's wgmma stay in flight while the next waits for its tiles; not with A in registers,
     * which ptxas would serialize (the next step's fragments are loaded while they run). */
    constexpr int IN_FLIGHT = A_IN_REGISTERS ? 0 : 1;
    extern __shared__ __align__(16) char shared_bytes[]; /* STAGES × (A tile, B tile) */
    char *tiles =
        shared_bytes + (SWIZZLE_BYTES - shared_address(shared_bytes) % SWIZZLE_BYTES) % SWIZZLE_BYTES;
    __shared__ uint64_t full[STAGES], empty[STAGES]; /* a stage's tiles landed / no longer read */
    const int warpgroup = threadIdx.x / 128, steps = (k + BK - 1) / BK;
    const int tile_rows = (m + BM - 1) / BM, tile_cols = (n + BN - 1) / BN;
    const int tile_count = tile_rows * tile_cols;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) barrier_init(&full[s], 1), barrier_init(&empty[s], CONSUMERS);
        barrier_init_fence();
    }
    __syncthreads();

    /* `done` counts the steps of the block's earlier tiles: step number done + step uses stage
     * (done + step) % STAGES in round (done + step) / STAGES. */
    if (warpgroup == 0) { /* the producer */
        registers_down<PRODUCER_REGISTERS>();
        if (threadIdx.x != 0) return;
        for (int t = blockIdx.x, done = 0; t < tile_count; t += gridDim.x, done += steps) {
            const tile_origin at = origin_of(t, tile_rows, tile_cols);
            for (int step = 0; step < steps; step++) {
                const int s = (done + step) % STAGES, round = (done + step) / STAGES;
                barrier_wait(&empty[s], (round & 1) ^ 1); /* round 0: free from the start */
                char *a_tile = tiles + s * STAGE_BYTES, *b_tile = a_tile + A_TILE_BYTES;
                barrier_arrive_expecting(&full[s], STAGE_BYTES);
                tile<T, BM, MN_MAJOR_A>::load(a_tile, &a_map, at.row0, step * BK, &full[s]);
                tile<T, BN, MN_MAJOR_B>::load(b_tile, &b_map, at.col0, step * BK, &full[s]);
            }
        }
        return;
    }

    registers_up<CONSUMER_REGISTERS>();
    const int consumer = warpgroup - 1;
    const gemm_output out = output_to_c(c, ldc, alpha, beta);
    auto free_stage = [&](int step_number) {
        if (threadIdx.x % 128 == 0) barrier_arrive(&empty[step_number % STAGES]);
    };
    a_fragments a; /* A's, where it comes through registers */
    for (int t = blockIdx.x, done = 0; t < tile_count; t += gridDim.x, done += steps) {
        float acc[ACCUMULATORS];
#pragma unroll
        for (int i = 0; i < ACCUMULATORS; i++) acc[i] = 0.0f;
        for (int step = 0; step < steps; step++) {
            const int s = (done + step) % STAGES;
            barrier_wait(&full[s], ((done + step) / STAGES) & 1);
            const char *a_tile = tiles + s * STAGE_BYTES;
            if constexpr (A_IN_REGISTERS) load_a_fragments(a, a_tile, consumer);
            wgmma_fence();
            multiply_stage<T, MN_MAJOR_A, MN_MAJOR_B>(acc, a, a_tile, a_tile + A_TILE_BYTES, consumer);
            wgmma_commit();
            wgmma_wait<IN_FLIGHT>(); /* then step − IN_FLIGHT has been multiplied: its stage is free */
            if (step >= IN_FLIGHT) free_stage(done + step - IN_FLIGHT);
        }
        wgmma_wait<0>();
        fence_accumulators<ACCUMULATORS>(acc);
        if (IN_FLIGHT > 0) free_stage(done + steps - 1);
        const tile_origin at = origin_of(t, tile_rows, tile_cols);
        store_tile<C_TRANSPOSED>(acc, out, m, n, at.row0 + 64 * consumer, at.col0);
    }
}

/* ---- on the host ---- */

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (!encode) {
        cudaDriverEntryPointQueryResult found;
        CUDA_CHECK(cudaGetDriverEntryPointByVersion(
            "cuTensorMapEncodeTiled", reinterpret_cast<void **>(&encode), 12000, cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess) {
            std::fprintf(stderr, "gpu_gemm_*_wgmma_tma: the driver has no cuTensorMapEncodeTiled\n");
            std::exit(1);
        }
    }
    return encode;
}

/* The tensor map of an operand: X(i, k) at x[i·ld + k] (K-major) or x[k·ld + i] (MN-major), i
 * < rows, k < depth, read in boxes of one tile of box_rows (K-major) or one atom (MN-major). */
template <typename T>
CUtensorMap operand_map(const T *x, int ld, int rows, int depth, int box_rows, bool mn_major) {
    const cuuint64_t extent[2] = {(cuuint64_t)(mn_major ? rows : depth),
                                  (cuuint64_t)(mn_major ? depth : rows)};
    const cuuint64_t row_stride[1] = {(cuuint64_t)ld * sizeof(T)};
    const cuuint32_t box[2] = {(cuuint32_t)(mn_major ? element<T>::ATOM_ROWS : element<T>::BK),
                               (cuuint32_t)(mn_major ? element<T>::BK : box_rows)};
    const cuuint32_t element_stride[2] = {1, 1};
    const CUtensorMapDataType type =
        sizeof(T) == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    CUtensorMap map;
    const CUresult status = tensor_map_encoder()(
        &map, type, 2, const_cast<T *>(x), extent, row_stride, box, element_stride,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (status != CUDA_SUCCESS) {
        std::fprintf(stderr, "gpu_gemm_*_wgmma_tma: cuTensorMapEncodeTiled failed (%d) for a %d×%d operand, "
                     "row stride %d\n", (int)status, rows, depth, ld);
        std::exit(1);
    }
    return map;
}

/* The product of the M×N tile grid, stored as C or, with C_TRANSPOSED, as Cᵀ (ldc: its row
 * stride either way). */
template <typename T, bool MN_MAJOR_A, bool MN_MAJOR_B, bool C_TRANSPOSED = false>
void launch(cudaStream_t stream, int m, int n, int k, float alpha, const T *a, int lda, const T *b, int ldb,
            float beta, float *c, int ldc) {
    const auto kernel = gemm_wgmma_tma_kernel<T, MN_MAJOR_A, MN_MAJOR_B, C_TRANSPOSED>;
    static bool allowed = false; /* above 48 KB, the limit must be raised once per kernel */
    if (!allowed) {
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SHARED_BYTES));
        allowed = true;
    }
    const CUtensorMap a_map = operand_map(a, lda, m, k, BM, MN_MAJOR_A);
    const CUtensorMap b_map = operand_map(b, ldb, n, k, BN, MN_MAJOR_B);
    const long tiles = (long)blocks_for(n, BN) * blocks_for(m, BM);
    /* persistent: at most one block per multiprocessor */
    const unsigned blocks = (unsigned)std::min<long>(tiles, gemm_multiprocessor_count());
    kernel<<<blocks, THREADS, SHARED_BYTES, stream>>>(a_map, b_map, m, n, k, alpha, beta, c, ldc);
    CUDA_CHECK_LAUNCH();
}

} // namespace

void gpu_gemm_bf16_wgmma_tma(gpu_gemm_workspace workspace, GPU_GEMM_BF16_ARGS) {
    if (m == 0 || n == 0) return;
    require_wgmma("gpu_gemm_bf16_wgmma_tma");
    if (k == 0 || !vectors_aligned(a, lda) || !vectors_aligned(b, ldb)) { /* no tensor map for it */
        gpu_gemm_bf16_wgmma(workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* op(A) is K-major when A is not transposed; op(B)ᵀ when B is */
    if (!trans_a && trans_b) launch<bf16, false, false>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (!trans_a) launch<bf16, false, true>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (trans_b) launch<bf16, true, false>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else launch<bf16, true, true>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gpu_gemm_tf32_wgmma_tma(gpu_gemm_workspace workspace, GPU_GEMM_ARGS) {
    if (m == 0 || n == 0) return;
    require_wgmma("gpu_gemm_tf32_wgmma_tma");
    /* TF32 wgmma takes B K-major, and A K-major or from registers. So NT runs as it is, TT with
     * A through registers, NN as Cᵀ = op(B)ᵀ · op(A)ᵀ with op(B)ᵀ through registers, and TN first
     * lays B out K-major in the workspace (rows of K floats), then runs as TT. */
    const bool move_b = trans_a && !trans_b;
    const bool movable = !move_b || ((size_t)k * n <= workspace.floats && k % 4 == 0);
    if (k == 0 || !movable || !vectors_aligned(a, lda) || !(move_b || vectors_aligned(b, ldb))) {
        gpu_gemm_tf32_wgmma(workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (move_b) { /* B (K×N) → Bᵀ (N×K) */
        gpu_transpose(stream, k, n, b, ldb, workspace.data);
        b = workspace.data, ldb = k, trans_b = true;
    }
    if (!trans_a && trans_b) launch<float, false, false>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (trans_a) launch<float, true, false>(stream, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else launch<float, true, false, true>(stream, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
