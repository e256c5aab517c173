/* Cache-blocked GEMM in the style of GotoBLAS / BLIS, in portable C11.
 *
 * The naive triple loop does 2 flops per element loaded, so it runs at memory speed. Here every
 * element is reused from the fastest level of memory that can hold it:
 *
 *   for jc in steps of NC:                 columns of C and op(B)
 *     for pc in steps of KC:               depth: a KC×NC panel of op(B) is packed  -> L3
 *       for ic in steps of MC:             rows: an MC×KC block of op(A) is packed  -> L2
 *         for jr in steps of NR:           one KC×NR strip of the B panel      -> L1 (/L2)
 *           for ir in steps of MR:         one MR×KC strip of the A block (streams from L2)
 *             micro-kernel: MR×NR tile of C += A strip × B strip  (accumulators in registers)
 *
 * Packing copies op(A) and op(B) into strips laid out exactly in the order the micro-kernel
 * reads them (A: MR values of one column after another; B: NR values of one row after another),
 * so the micro-kernel reads both with unit stride. Packing also absorbs the transposes (one
 * micro-kernel serves all four cases) and the edges: strips are zero-padded to full MR/NR, the
 * micro-kernel always computes a full tile, and only the valid part is written back to C (the
 * padded lanes only ever meet accumulators that are discarded; zeros rather than leftover
 * memory keep them from holding NaN or slow denormals).
 *
 * The micro-kernel is plain C over fixed-size arrays; with -O3 gcc unrolls the MR×NR loops,
 * keeps the accumulators in vector registers and turns each row of NR floats into vector FMAs
 * with a broadcast A value. fmaf is used only where the target has a fused multiply-add
 * instruction (FP_FAST_FMAF): in ISO C mode gcc does not contract a*b+c on its own.
 *
 * Threads: one parallel region per call. For each (jc, pc) the threads pack the shared B panel
 * together; for each ic they pack the shared A block together, then split the MR×NR tiles of
 * the macro-kernel between them. Splitting tiles rather than whole MC blocks keeps all threads
 * busy when M is small (batch 16 gives one MC block). The one barrier per ic step sits between
 * packing and computing; the packed A block and B panel are double-buffered, so a thread that
 * finishes its tiles early can start packing the next ones while others still read the current
 * ones (the buffers it writes were last read before the previous barrier). On 16 cores that
 * single barrier gave 10-35% more than a barrier after every phase. Buffers are allocated per
 * call, so nothing is shared between calls or thread counts. */
#include "cpu_gemm.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Block sizes, in floats; the only tuning knobs of this file.
 *   MR×NR  register tile: MR*NR/W accumulators, NR/W vectors of B and one broadcast of A must
 *          fit in the vector register file (W = floats per vector).
 *   KC     depth of the strips: the KC×NR strip of B is reused for every A strip. At 6×64 it is
 *          64 KiB, more than L1, and is re-read from L2; halving KC to fit L1 was 15% slower
 *          (twice the C updates), so the tile's high FMA-to-load ratio is the better trade.
 *   MC     rows of the packed A block: MC*KC*4 bytes (192 KiB) is meant to stay in L2.
 *   NC     columns of the packed B panel: KC*NC*4 bytes (2 MiB) is meant for the shared L3.
 * How they were chosen: interleaved timing (each variant once per round, medians of 7-15
 * rounds) of 2048^3 and the MLP's layer shapes against OpenBLAS, on a 2-core Sapphire Rapids
 * VM (48 KiB L1d, 2 MiB L2 per core, gcc 12) and checked on a 16-core Emerald Rapids VM
 * (gcc 13). With AVX-512 the 6×64, 12×32, 14×32 and 8×48 tiles were within ~5% (6×64 best or
 * tied: 4 B loads and 6 broadcasts feed 24 FMAs); KC in 192..384 and MC in 96..384
 * were within the noise, so the values are the conventional middle ones, not fitted to this
 * machine. Beware when changing MR×NR: gcc must keep the tile in registers. With AVX2 it does
 * not for 6×16 (it interchanges the loops and runs 10x slower), hence 4×24 there; after any
 * change, check the micro-kernel's loop in the assembly (no stack traffic) and time it. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
/* gcc's tuning for recent Intel cores (gcc 13 -march=native on Sapphire/Emerald Rapids) prefers
 * 256-bit vectors even where AVX-512 exists; this file is all FMAs, and they do twice the work
 * at 512 bits. Only a hint for the vectorizer: no intrinsics, and the code stays plain C. */
#pragma GCC target("prefer-vector-width=512")
enum { MR = 6, NR = 64 }; /* 32 registers of 16 floats: 24 accumulators + 4 B + 1 A */
#else
/* AVX2: 16 registers of 8 floats: 12 accumulators + 3 B + 1 A. Also the tile for builds without
 * -march=native (SSE2): no tile tried there (4×8 .. 4×24) was clearly faster. */
enum { MR = 4, NR = 24 };
#endif
enum { KC = 256, MC = 192, NC = 2048 / NR * NR };
_Static_assert(MC % MR == 0 && NC % NR == 0, "MC and NC must be multiples of the register tile");

enum { BUFFER_ALIGNMENT = 64 }; /* one cache line; also the width of an AVX-512 vector */

static inline float multiply_add(float x, float y, float sum) {
#ifdef FP_FAST_FMAF
    return fmaf(x, y, sum);
#else
    return sum + x * y;
#endif
}

static inline int min_int(int x, int y) { return x < y ? x : y; }

static inline int round_up(int x, int step) { return (x + step - 1) / step * step; }

/* The step that cuts total into as few pieces of at most max_step as possible, all about the
 * same size and a multiple of granule (when max_step is): K = 784 becomes 4 × 196, not
 * 3 × 256 + 16, which would leave a thin last slice with poor reuse. */
static int even_step(int total, int max_step, int granule) {
    int pieces = (total + max_step - 1) / max_step;
    return min_int(max_step, round_up((total + pieces - 1) / pieces, granule));
}

static float *alloc_packed(size_t floats) {
    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t bytes = (floats * sizeof(float) + BUFFER_ALIGNMENT - 1) / BUFFER_ALIGNMENT;
    bytes *= BUFFER_ALIGNMENT;
    float *p = aligned_alloc(BUFFER_ALIGNMENT, bytes);
    if (!p) {
        fprintf(stderr, "cpu_gemm_tiled: out of memory allocating %zu bytes of packing buffer\n",
                bytes);
        exit(1);
    }
    return p;
}

/* C = beta * C over the M×N window; beta == 0 writes zeros without reading. Rows are shared out
 * among the threads of the enclosing parallel region, without waiting at the end. */
static void scale_c(float beta, int m, int n, float *c, int ldc) {
    if (beta == 1.0f) return;
#pragma omp for schedule(static) nowait
    for (int i = 0; i < m; i++) {
        float *row = c + (size_t)i * ldc;
        for (int j = 0; j < n; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
}

/* Copies a kc×width slice into a strip of kc rows of strip_width floats, zero-filling columns
 * width..strip_width. Element (p, t) of the slice is src[p * p_stride + t * t_stride]. */
static void pack_strip(const float *src, size_t p_stride, size_t t_stride, int kc, int width,
                       int strip_width, float *restrict dst) {
    for (int p = 0; p < kc; p++) {
        const float *row = src + p * p_stride;
        for (int t = 0; t < width; t++) dst[t] = row[t * t_stride];
        for (int t = width; t < strip_width; t++) dst[t] = 0.0f;
        dst += strip_width;
    }
}

/* The kc×nc panel of op(B) at (p0, j0), as NR-wide strips (strip s holds columns s*NR..).
 * Strips are shared out among the threads, without waiting at the end. */
static void pack_b_panel(bool trans_b, const float *b, int ldb, int p0, int j0, int kc, int nc,
                         float *packed) {
    size_t p_stride = trans_b ? 1 : (size_t)ldb; /* op(B)[p][j] = trans_b ? B[j][p] : B[p][j] */
    size_t j_stride = trans_b ? (size_t)ldb : 1;
    int strips = (nc + NR - 1) / NR;
#pragma omp for schedule(static) nowait
    for (int s = 0; s < strips; s++) {
        int j = j0 + s * NR;
        pack_strip(b + p0 * p_stride + j * j_stride, p_stride, j_stride, kc,
                   min_int(NR, j0 + nc - j), NR, packed + (size_t)s * kc * NR);
    }
}

/* The mc×kc block of op(A) at (i0, p0), as MR-tall strips stored column by column.
 * Strips are shared out among the threads, without waiting at the end. */
static void pack_a_block(bool trans_a, const float *a, int lda, int i0, int p0, int mc, int kc,
                         float *packed) {
    size_t i_stride = trans_a ? 1 : (size_t)lda; /* op(A)[i][p] = trans_a ? A[p][i] : A[i][p] */
    size_t p_stride = trans_a ? (size_t)lda : 1;
    int strips = (mc + MR - 1) / MR;
#pragma omp for schedule(static) nowait
    for (int s = 0; s < strips; s++) {
        int i = i0 + s * MR;
        pack_strip(a + i * i_stride + p0 * p_stride, p_stride, i_stride, kc,
                   min_int(MR, i0 + mc - i), MR, packed + (size_t)s * kc * MR);
    }
}

/* C tile (rows×cols of it valid, rows <= MR, cols <= NR) += alpha * A strip × B strip. */
static void micro_kernel(int kc, const float *restrict a_strip, const float *restrict b_strip,
                         float alpha, float *restrict c, int ldc, int rows, int cols) {
    float acc[MR][NR] = {{0.0f}};
#pragma GCC unroll 4 /* fewer loop-counter instructions between the FMAs (gcc and clang) */
    for (int p = 0; p < kc; p++) {
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++)
                acc[i][j] = multiply_add(a_strip[i], b_strip[j], acc[i][j]);
        a_strip += MR;
        b_strip += NR;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) c[(size_t)i * ldc + j] += alpha * acc[i][j];
}

/* C block (mc×nc at c) += alpha * packed A block × packed B panel. Tiles are shared out among the
 * threads (each thread's run of tiles mostly shares one B strip), without waiting at the end. */
static void macro_kernel(int mc, int nc, int kc, float alpha, const float *a_block,
                         const float *b_panel, float *c, int ldc) {
    int row_strips = (mc + MR - 1) / MR;
    int col_strips = (nc + NR - 1) / NR;
#pragma omp for collapse(2) schedule(static) nowait
    for (int js = 0; js < col_strips; js++) {
        for (int is = 0; is < row_strips; is++) {
            int i = is * MR, j = js * NR;
            const float *a_strip = a_block + (size_t)is * kc * MR;
            const float *b_strip = b_panel + (size_t)js * kc * NR;
            micro_kernel(kc, a_strip, b_strip, alpha, c + (size_t)i * ldc + j, ldc,
                         min_int(MR, mc - i), min_int(NR, nc - j));
        }
    }
}

void cpu_gemm_tiled(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) { /* nothing to add: as in BLAS, A and B are not read */
#pragma omp parallel
        scale_c(beta, m, n, c, ldc);
        return;
    }
    int nc_step = even_step(n, NC, NR);
    int kc_step = even_step(k, KC, 1);
    int mc_step = even_step(m, MC, MR);
    float *b_panels[2], *a_blocks[2];
    for (int i = 0; i < 2; i++) {
        b_panels[i] = alloc_packed((size_t)kc_step * round_up(nc_step, NR));
        a_blocks[i] = alloc_packed((size_t)kc_step * round_up(mc_step, MR));
    }
#pragma omp parallel
    {
        scale_c(beta, m, n, c, ldc); /* finished by everyone at the first barrier below */
        int panels_packed = 0, blocks_packed = 0;
        for (int jc = 0; jc < n; jc += nc_step) {
            int nc = min_int(nc_step, n - jc);
            for (int pc = 0; pc < k; pc += kc_step) {
                int kc = min_int(kc_step, k - pc);
                float *b_panel = b_panels[panels_packed++ % 2];
                pack_b_panel(trans_b, b, ldb, pc, jc, kc, nc, b_panel);
                for (int ic = 0; ic < m; ic += mc_step) {
                    int mc = min_int(mc_step, m - ic);
                    float *a_block = a_blocks[blocks_packed++ % 2];
                    pack_a_block(trans_a, a, lda, ic, pc, mc, kc, a_block);
#pragma omp barrier
                    macro_kernel(mc, nc, kc, alpha, a_block, b_panel, c + (size_t)ic * ldc + jc,
                                 ldc);
                }
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        free(b_panels[i]);
        free(a_blocks[i]);
    }
}
