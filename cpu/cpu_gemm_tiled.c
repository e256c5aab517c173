/* The CPU tiled GEMM (--device cpu --impl tiled): C = epilogue(alpha · op(A) · op(B) + beta · C),
 * row-major, any shape and transposes, the bias/ReLU/ReLU-mask epilogue of core/backend.h fused
 * into the store. GotoBLAS/BLIS blocking in portable C11: KC×NC panels of op(B) in L2, MR×KC
 * strips of op(A) in L1, an MR×NR register tile of vector FMAs; a narrow C is computed
 * transposed. OpenMP over the tiles of a panel; every element is summed by one thread in a
 * fixed order, so the bits do not depend on the thread count. The design, drawn:
 * docs/kernels.md, "Design notes: cpu/cpu_gemm_tiled.c". */
#include "cpu/cpu_gemm.h"
#include "util/host_memory.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu_tiles.h" /* before any function: its pragma covers them all */

/* Block sizes, in floats; the tuning knobs of this file.
 *   MR×NR  register tile: MR*NR/W accumulators, NR/W vectors of B and one broadcast of A must
 *          fit in the vector register file (W = floats per vector).
 *   KC     depth of a panel: an A strip, MR×KC, stays in L1 while the thread sweeps the panel;
 *          a deeper panel means fewer read-modify-writes of C, but a larger panel.
 *   NC     width of a panel: KC×NC (512 KiB) is meant to stay in each core's L2 next to the
 *          stream of A. With KC 1024 (a 784-deep panel, 784 KiB) the NN forward product ran at
 *          a third of the speed on a 1 MiB L2; 256 to 512 were within the noise.
 * Chosen by timing the MLP's products and 2048^3 on this project's 2-core AMD EPYC (Zen 5, 1 MiB
 * L2) machine (docs/kernels.md); beware when changing MR×NR: gcc must keep the tile in registers.
 * With AVX2 it does not for 6×16 (it interchanges the loops and runs 10x slower), hence 4×24
 * there; after any change, check the micro-kernel's loop in the assembly (no stack traffic)
 * and time it. */
#if CPU_TILES_AVX512
enum { MR = 6, NR = 64 }; /* 32 registers of 16 floats: 24 accumulators + 4 B + 1 A */
#else
/* AVX2: 16 registers of 8 floats: 12 accumulators + 3 B + 1 A. Also the tile for builds without
 * -march=native (SSE2): no tile tried there (4×8 .. 4×24) was clearly faster. */
enum { MR = 4, NR = 24 };
#endif
enum { KC_MAX = 512, NC_MAX = 256 / NR * NR };

/* Flops (2·M·N·K) a thread is given at least: ~2 µs of one core's FMAs, about what waking a
 * thread and waiting for it at the end of the parallel region cost. */
#define MIN_FLOPS_PER_THREAD 2.5e5

/* Rows of a B strip packed as one piece of work, so that even a 4-strip panel is shared out. */
enum { PACK_ROWS = 64 };

enum { BUFFER_ALIGNMENT = 64 }; /* one cache line; also the width of an AVX-512 vector */

/* The step that cuts total into as few pieces of at most max_step as possible, all about the
 * same size and a multiple of granule (when max_step is): K = 784 becomes 2 × 392, not
 * 512 + 272, which would leave a thin last slice with poor reuse. */
static int even_step(int total, int max_step, int granule) {
    int pieces = ceil_div(total, max_step);
    return min_int(max_step, round_up(ceil_div(total, pieces), granule));
}

/* The product as the micro-kernel sees it: C' = alpha · op(A') · op(B') + beta · C', with
 * op(A') M×K and op(B') K×N. Normally A' = A, B' = B, C' = C; when transposed_output, the
 * product computed is C^T = op(B)^T · op(A)^T, so A' is B, B' is A, M and N are swapped, and
 * tile (i, j) of C' is stored as tile (j, i) of C. */
typedef struct {
    int m, n, k;
    const float *a, *b;
    int lda, ldb;
    bool trans_a, trans_b;
    bool transposed_output;
    float alpha, beta;
    float *c; /* C itself, row stride ldc, whatever the orientation */
    int ldc;
    const gemm_epilogue *epilogue; /* NULL: none */
} gemm_problem;

/* Share of an m-row, n-column product that is padding for the micro-kernel. */
static double padded_fraction(int m, int n) {
    return 1.0 - (double)m * n / ((double)round_up(m, MR) * round_up(n, NR));
}

static gemm_problem orient(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc, const gemm_epilogue *epilogue) {
    gemm_problem p = {m, n, k, a, b, lda, ldb, trans_a, trans_b, false, alpha, beta, c, ldc,
                      epilogue};
    if (padded_fraction(n, m) < padded_fraction(m, n)) {
        /* C^T = op(B)^T op(A)^T: op(B)^T is B read with the opposite transpose flag */
        p = (gemm_problem){n, m, k, b, a, ldb, lda, !trans_b, !trans_a, true, alpha, beta, c, ldc,
                           epilogue};
    }
    return p;
}

static float *alloc_packed(size_t floats) {
    return aligned_alloc_or_exit(BUFFER_ALIGNMENT, floats * sizeof(float),
                                 "the tiled GEMM's packing buffer");
}

/* Copies a kc×width slice into a strip of kc rows of strip_width floats, zero-filling columns
 * width..strip_width. Element (p, t) of the slice is src[p * p_stride + t * t_stride]. The
 * source is read along its rows, whichever index runs along them. */
static void pack_strip(const float *src, size_t p_stride, size_t t_stride, int kc, int width,
                       int strip_width, float *restrict dst) {
    for (int p = 0; p < kc; p++)
        for (int t = width; t < strip_width; t++) dst[(size_t)p * strip_width + t] = 0.0f;
    if (p_stride == 1) { /* a transpose: source row t holds the strip's column t */
        for (int t = 0; t < width; t++)
            for (int p = 0; p < kc; p++) dst[(size_t)p * strip_width + t] = src[t * t_stride + p];
    } else {
        for (int p = 0; p < kc; p++)
            for (int t = 0; t < width; t++)
                dst[(size_t)p * strip_width + t] = src[p * p_stride + t * t_stride];
    }
}

/* A kc×NR strip of op(B') as the micro-kernel reads it: row p at values + p * depth_stride. */
typedef struct {
    const float *values;
    size_t depth_stride;
} b_strip;

/* Whether the strips of op(B') are read where B' is. Not when B' is transposed (the micro-
 * kernel reads rows of NR values), nor when its rows are a multiple of 4 KiB apart: then the kc
 * rows of a strip fall into a few sets of every cache and evict one another (2048³ ran at a
 * third of OpenBLAS's speed on the 16-core Xeon host); packed, they are contiguous. */
static bool b_read_in_place(const gemm_problem *g) {
    return !g->trans_b && (size_t)g->ldb * sizeof(float) % 4096 != 0;
}

/* The first NR-wide strip of an nc-wide panel that is packed: where B' is read in place, only a
 * last strip narrower than NR (the micro-kernel reads NR columns); otherwise all of them. */
static int first_packed_strip(const gemm_problem *g, int nc) {
    return b_read_in_place(g) ? nc / NR : 0;
}

static bool panel_is_packed(const gemm_problem *g, int nc) {
    return first_packed_strip(g, nc) < ceil_div(nc, NR);
}

/* How many of the panels (nc_step × kc_step) need packing: all where B' is not read in place,
 * otherwise those of the last column block when N is not a multiple of NR. */
static int panels_to_pack(const gemm_problem *g, int nc_step, int kc_step) {
    int column_blocks = ceil_div(g->n, nc_step), depth_steps = ceil_div(g->k, kc_step);
    if (!b_read_in_place(g)) return column_blocks * depth_steps;
    return g->n % NR ? depth_steps : 0;
}

/* Strip s of the kc×nc panel of op(B') at (p0, j0): in place, or in the packed panel. */
static b_strip b_strip_at(const gemm_problem *g, const float *panel, int p0, int j0, int kc,
                          int nc, int s) {
    int packed_from = first_packed_strip(g, nc);
    if (s < packed_from)
        return (b_strip){g->b + (size_t)p0 * g->ldb + j0 + (size_t)s * NR, (size_t)g->ldb};
    return (b_strip){panel + (size_t)(s - packed_from) * kc * NR, NR};
}

/* Packs the strips of the kc×nc panel of op(B') at (p0, j0) that are not read in place, into
 * panel (kc rows of NR floats per strip). Pieces of PACK_ROWS rows of a strip are shared out
 * among the threads of the enclosing parallel region, without waiting at the end. */
static void pack_b_panel(const gemm_problem *g, int p0, int j0, int kc, int nc, float *panel) {
    size_t p_stride = g->trans_b ? 1 : (size_t)g->ldb; /* op(B)[p][j] = trans_b ? B[j][p] : B[p][j] */
    size_t j_stride = g->trans_b ? (size_t)g->ldb : 1;
    int packed_from = first_packed_strip(g, nc);
    int pieces_per_strip = ceil_div(kc, PACK_ROWS);
    int pieces = (ceil_div(nc, NR) - packed_from) * pieces_per_strip;
#pragma omp for schedule(static) nowait
    for (int piece = 0; piece < pieces; piece++) {
        int s = piece / pieces_per_strip, p = piece % pieces_per_strip * PACK_ROWS;
        int j = j0 + (packed_from + s) * NR;
        pack_strip(g->b + (size_t)(p0 + p) * p_stride + (size_t)j * j_stride, p_stride, j_stride,
                   min_int(PACK_ROWS, kc - p), min_int(NR, j0 + nc - j), NR,
                   panel + (size_t)s * kc * NR + (size_t)p * NR);
    }
}

/* An MR×kc strip of op(A') as the micro-kernel reads it: element (i, p) at
 * a[i * row_stride + p * depth_stride]. */
typedef struct {
    const float *a;
    size_t row_stride, depth_stride;
} a_strip;

/* The strip of op(A') at rows i0.., depth p0..p0+kc: read in place when it has all MR rows
 * (MR row streams when A' is row-major, MR adjacent values of each row of A' when it is
 * transposed), otherwise, at the bottom edge, packed into buffer (the MR values of column p
 * after one another, rows past M zero). */
static a_strip prepare_a_strip(const gemm_problem *g, int i0, int p0, int kc, float *buffer) {
    size_t i_stride = g->trans_a ? 1 : (size_t)g->lda; /* op(A)[i][p] = trans_a ? A[p][i] : A[i][p] */
    size_t p_stride = g->trans_a ? (size_t)g->lda : 1;
    const float *strip = g->a + (size_t)i0 * i_stride + (size_t)p0 * p_stride;
    int rows = min_int(MR, g->m - i0);
    if (rows == MR) return (a_strip){strip, i_stride, p_stride};
    pack_strip(strip, p_stride, i_stride, kc, rows, MR, buffer);
    return (a_strip){buffer, 1, MR};
}

/* acc = A strip (MR×kc) × B strip (kc×NR). Inlined into micro_kernel three times, each with
 * one of A's strides a constant, so that each gets a loop with fixed offsets. */
static inline void multiply_strips(int kc, const float *restrict a, size_t row_stride,
                                   size_t depth_stride, const float *restrict b,
                                   size_t b_depth_stride, float acc[restrict MR][NR]) {
    float sums[MR][NR] = {{0.0f}};
#pragma GCC unroll 4 /* fewer loop-counter instructions between the FMAs (gcc and clang) */
    for (int p = 0; p < kc; p++) {
        for (int i = 0; i < MR; i++) {
            float a_ip = a[i * row_stride];
            for (int j = 0; j < NR; j++) sums[i][j] = multiply_add(a_ip, b[j], sums[i][j]);
        }
        a += depth_stride;
        b += b_depth_stride;
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = sums[i][j];
}

static void micro_kernel(int kc, a_strip a, b_strip b, float acc[MR][NR]) {
    if (a.row_stride == 1 && a.depth_stride == MR) /* packed */
        multiply_strips(kc, a.a, 1, MR, b.values, b.depth_stride, acc);
    else if (a.depth_stride == 1) /* in place, A' row-major */
        multiply_strips(kc, a.a, a.row_stride, 1, b.values, b.depth_stride, acc);
    else /* in place, A' transposed */
        multiply_strips(kc, a.a, 1, a.depth_stride, b.values, b.depth_stride, acc);
}

/* A window of C, rows×cols at (i0, j0), from the sums of one KC step (values: rows×cols, row
 * stride ld). first: the first KC step (C = alpha·sum + beta·C; beta 0 does not read C);
 * otherwise C += alpha·sum. last: the last KC step, which applies the epilogue. */
static void store_window(const gemm_problem *g, const float *values, int ld, int i0, int j0,
                         int rows, int cols, bool first, bool last) {
    const gemm_epilogue *e = last ? g->epilogue : NULL;
    float alpha = g->alpha, beta = g->beta;
    for (int i = 0; i < rows; i++) {
        const float *restrict v = values + (size_t)i * ld;
        size_t at = (size_t)(i0 + i) * g->ldc + j0;
        float *restrict c = g->c + at;
        if (!first)
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] += alpha * v[j];
        else if (beta == 0.0f)
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] = alpha * v[j];
        else
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] = alpha * v[j] + beta * c[j];
        if (!e) continue;
        if (e->bias) {
            const float *restrict bias = e->bias + j0;
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] += bias[j];
        }
        if (e->relu)
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] = c[j] < 0.0f ? 0.0f : c[j];
        if (e->relu_mask) {
            const float *restrict mask = e->relu_mask + at;
#pragma omp simd
            for (int j = 0; j < cols; j++) c[j] = mask[j] <= 0.0f ? 0.0f : c[j];
        }
    }
}

/* Stores tile (i0, j0) of C' (rows×cols valid), transposing it if C' is C^T. */
static void store_tile(const gemm_problem *g, float acc[MR][NR], int i0, int j0, int rows,
                       int cols, bool first, bool last) {
    if (!g->transposed_output) {
        store_window(g, &acc[0][0], NR, i0, j0, rows, cols, first, last);
        return;
    }
    float transposed[NR][MR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) transposed[j][i] = acc[i][j];
    store_window(g, &transposed[0][0], MR, j0, i0, cols, rows, first, last);
}

/* This thread's share of the tiles of the m×nc block of C' at column j0, multiplied by the
 * kc-deep panel of op(B') at depth p0: threads 0..workers-1 share them, the rest have none. */
static void multiply_panel(const gemm_problem *g, const float *panel, int p0, int kc, int j0,
                           int nc, int workers, float *a_buffer) {
    int col_strips = ceil_div(nc, NR);
    long tiles = (long)ceil_div(g->m, MR) * col_strips;
    int thread = omp_get_thread_num();
    if (thread >= workers) return;
    long first_tile = tiles * thread / workers, end_tile = tiles * (thread + 1) / workers;
    bool first_step = p0 == 0, last_step = p0 + kc == g->k;
    a_strip a = {0};
    int current_row_strip = -1;
    for (long t = first_tile; t < end_tile; t++) {
        int row_strip = (int)(t / col_strips), col_strip = (int)(t % col_strips);
        int i0 = row_strip * MR, j = col_strip * NR;
        if (row_strip != current_row_strip) {
            a = prepare_a_strip(g, i0, p0, kc, a_buffer);
            current_row_strip = row_strip;
        }
        float acc[MR][NR];
        micro_kernel(kc, a, b_strip_at(g, panel, p0, j0, kc, nc, col_strip), acc);
        store_tile(g, acc, i0, j0 + j, min_int(MR, g->m - i0), min_int(NR, nc - j), first_step,
                   last_step);
    }
}

/* The loops over panels, run by every thread of the parallel region. Where part of a panel is
 * packed, the threads wait for it at a barrier. Packed panels alternate between two buffers: a
 * thread that finishes its tiles early packs the next one into the other buffer while the rest
 * still read this one (which nobody writes before everyone passed the next barrier). */
static void multiply_all_panels(const gemm_problem *g, int nc_step, int kc_step, int workers,
                                float *buffers[2]) {
    _Alignas(BUFFER_ALIGNMENT) float a_buffer[MR * KC_MAX];
    int panels_packed = 0;
    for (int jc = 0; jc < g->n; jc += nc_step) {
        int nc = min_int(nc_step, g->n - jc);
        for (int pc = 0; pc < g->k; pc += kc_step) {
            int kc = min_int(kc_step, g->k - pc);
            float *panel = NULL;
            if (panel_is_packed(g, nc)) {
                panel = buffers[panels_packed++ % 2];
                pack_b_panel(g, pc, jc, kc, nc, panel);
#pragma omp barrier
            }
            multiply_panel(g, panel, pc, kc, jc, nc, workers, a_buffer);
        }
    }
}

/* k == 0 or alpha == 0: nothing to add, and, as in BLAS, A and B are not read. */
static void scale_and_finish(gemm_problem g) {
    g.alpha = 0.0f; /* the stores below then compute beta·C (or 0), then the epilogue */
    float zero[NR] = {0.0f};
    for (int i = 0; i < g.m; i++)
        for (int j = 0; j < g.n; j += NR)
            store_window(&g, zero, 0, i, j, 1, min_int(NR, g.n - j), true, true);
}

/* Threads that multiply tiles in a product: no more than the tiles, nor than its flops keep
 * busy. */
static int workers_for(const gemm_problem *g) {
    double flops = 2.0 * g->m * g->n * g->k;
    long tiles = (long)ceil_div(g->m, MR) * ceil_div(min_int(g->n, NC_MAX), NR);
    long useful = (long)(flops / MIN_FLOPS_PER_THREAD);
    long threads = omp_get_max_threads();
    if (threads > tiles) threads = tiles;
    if (threads > useful) threads = useful;
    return max_int(1, (int)threads);
}

void cpu_gemm_tiled_fused(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc, const gemm_epilogue *epilogue) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {
        scale_and_finish((gemm_problem){m, n, k, a, b, lda, ldb, trans_a, trans_b, false, alpha,
                                        beta, c, ldc, epilogue});
        return;
    }
    gemm_problem g = orient(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                            epilogue);
    int nc_step = even_step(g.n, NC_MAX, NR);
    int kc_step = even_step(g.k, KC_MAX, 1);
    int buffer_count = min_int(2, panels_to_pack(&g, nc_step, kc_step));
    float *buffers[2] = {NULL, NULL};
    for (int i = 0; i < buffer_count; i++)
        buffers[i] = alloc_packed((size_t)kc_step * round_up(nc_step, NR));
    if (buffer_count == 1) buffers[1] = buffers[0];
    int workers = workers_for(&g);
    if (workers == 1) {
        multiply_all_panels(&g, nc_step, kc_step, 1, buffers); /* a team of one: no region */
    } else {
        /* The whole team, whatever the workers: libgomp ends the threads that a smaller team
         * leaves out and starts new ones for the next larger team, which cost the MLP's step
         * about a millisecond at 16 threads. Threads past the workers only help pack. */
#pragma omp parallel
        {
            /* OpenMP may give fewer threads than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT, a call
             * from inside a parallel region): the tiles go to the threads there are. */
            int team = omp_get_num_threads();
            multiply_all_panels(&g, nc_step, kc_step, workers < team ? workers : team, buffers);
        }
    }
    for (int i = 0; i < buffer_count; i++) free(buffers[i]);
}

void cpu_gemm_tiled(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    cpu_gemm_tiled_fused(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}
