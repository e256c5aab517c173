/* The output layer of a training step in one parallel region; see cpu_output_layer.h.
 *
 * Shapes (row-major): h is R×H (the last hidden layer, after its ReLU), W is H×C, b is C.
 * The layer is three thin products (C is 10 for MNIST) around a softmax. Each product is
 * computed on register tiles of GROUP × LANES sums, as cpu_gemm_tiled.c's micro-kernel does:
 * every multiply-add is one lane of a vector FMA, and a tile's sums stay in registers.
 *
 *   once:  Wp = W, its rows padded to CP = C rounded up to LANES (H×CP, zeros past C)
 *          Wt = Wᵀ, its rows padded to HP = H rounded up to LANES (C×HP, zeros past H)
 *   The rows go in chunks of CHUNK_ROWS, the chunks shared out among the threads; per chunk:
 *     logits = b + h·Wp          tiles of GROUP rows × LANES classes, summed over k in order
 *     per row: softmax → loss, correctness, dl[c] = grad_scale·(p[c] − target[c]) (backend.h)
 *     dh = dl·Wt, 0 where h <= 0 tiles of GROUP rows × LANES hidden units, over c in order;
 *                                written to hidden_delta
 *     the chunk's plane:  db = Σ dl,  dbh = Σ dh,  dW = hᵀ·dl   (rows in order; dW in tiles of
 *                                GROUP hidden units × LANES classes)
 *   ── barrier ──
 *   Each output is the sum of the chunks' planes in chunk order (the threads split the
 *   outputs): hidden_bias_grad, weight_grad and bias_grad.
 *
 * Every sum runs in an order fixed by the rows alone, not by the threads, so the result has the
 * same bits for any thread count (as the tiled GEMM's has). Rows or hidden units that do not
 * fill a last tile of GROUP go one at a time; dl is padded with zero rows to CHUNK_ROWS.
 *
 * Measured (docs/performance.md): 445 → 198 µs a step at batch 512 on one core of this
 * project's 2-core machine, where the earlier version of this file took a dot product per
 * logit (one vector's sums, added up lane by lane: a chain of dependent adds), 0.87 µs a row. */
#include "cpu/cpu_output_layer.h"

#include "cpu/cpu_ops.h"
#include "cpu/cpu_tiles.h" /* before any function: its pragma covers them all */

#if CPU_TILES_AVX512
enum { GROUP = 8 }; /* 8 accumulators of one 512-bit vector: enough to keep two FMA units busy */
#else
enum { GROUP = 4 }; /* 4 × 2 vectors of 256 bits: 8 of the 16 registers */
#endif

/* Sixteen floats: the width the tiles are written in (one AVX-512 register, two AVX2 ones). */
enum { LANES = 16 };

enum { CHUNK_ROWS = 16 };

enum { MAX_CLASSES = CPU_OUTPUT_LAYER_MAX_CLASSES };
_Static_assert(MAX_CLASSES % LANES == 0, "a chunk's rows of logits hold whole tiles of classes");

static int chunks_of(int rows) { return (rows + CHUNK_ROWS - 1) / CHUNK_ROWS; }

/* The layer's sizes and the padded widths of the scratch arrays. */
typedef struct {
    int H, C, HP, CP;
} layer_size;

static layer_size size_of(int in, int classes) {
    return (layer_size){in, classes, round_up(in, LANES), round_up(classes, LANES)};
}

/* A chunk's partial sums: [ dbh (HP) | dW (H×CP) | db (CP) ], a multiple of LANES floats. */
static size_t plane_floats(layer_size s) {
    return (size_t)s.HP + (size_t)s.H * s.CP + (size_t)s.CP;
}

size_t cpu_output_layer_scratch_floats(int max_rows, int in, int classes) {
    layer_size s = size_of(in, classes);
    return (size_t)s.H * s.CP + (size_t)s.C * s.HP + (size_t)chunks_of(max_rows) * plane_floats(s);
}

/* ---- the three register tiles ----
 * Each is written for `group` rows or hidden units (GROUP, or 1 at an edge) and inlined where
 * it is called with a constant, so that gcc unrolls the group and the lanes and keeps the sums
 * in vector registers (as in cpu_gemm_tiled.c: fixed strides, no table of pointers). Without
 * `unroll` on the group's loop, gcc 12 vectorized across the group instead (a gather per row
 * of the tile), and the layer ran 4× slower than the version before the tiles. */

/* sums[g][j] = Σ_k a[g·group_stride + k·depth_stride] · b[k·b_stride + j], k = 0..depth−1 in
 * order: the one tile of the three products, which differ only in their strides. */
static inline void tile(const float *restrict a, size_t group_stride, size_t depth_stride,
                        int depth, int group, const float *restrict b, size_t b_stride,
                        float sums[GROUP][LANES]) {
    float acc[GROUP][LANES] = {{0.0f}};
    for (int k = 0; k < depth; k++) {
        const float *restrict ak = a + (size_t)k * depth_stride;
        const float *restrict bk = b + (size_t)k * b_stride;
#pragma GCC unroll 8
        for (int g = 0; g < group; g++) {
            float value = ak[(size_t)g * group_stride];
            for (int j = 0; j < LANES; j++) acc[g][j] = multiply_add(value, bk[j], acc[g][j]);
        }
    }
    for (int g = 0; g < group; g++)
        for (int j = 0; j < LANES; j++) sums[g][j] = acc[g][j];
}

/* logits: sums[g][j] = Σ_k h[g][k] · wp[k][j] (h: row stride in; wp: cp). */
static inline void logits_tile(const float *h, int in, int group, const float *wp, int cp,
                               float sums[GROUP][LANES]) {
    tile(h, (size_t)in, 1, in, group, wp, (size_t)cp, sums);
}

/* dh: sums[g][j] = Σ_c dl[g][c] · wt[c][j] (wt: row stride hp). */
static inline void delta_tile(const float (*dl)[MAX_CLASSES], int classes, const float *wt,
                              int hp, float sums[GROUP][LANES]) {
    tile(dl[0], MAX_CLASSES, 1, classes, GROUP, wt, (size_t)hp, sums);
}

/* dW: sums[g][j] = Σ_r h[r][g] · dl[r][cb + j] (h: row stride in). */
static inline void weight_grad_tile(const float *h, int in, int rows, int group,
                                    const float (*dl)[MAX_CLASSES], int cb,
                                    float sums[GROUP][LANES]) {
    tile(h, 1, (size_t)in, rows, group, dl[0] + cb, MAX_CLASSES, sums);
}

/* ---- one chunk of rows ---- */

/* The chunk's rows (h: rows×H) through the logits, bias included, into logits: GROUP rows at a
 * time, the last few one by one. */
static void chunk_logits(const output_layer_step *p, layer_size s, const float *wp,
                         const float *h, int rows, float (*logits)[MAX_CLASSES]) {
    for (int g0 = 0; g0 < rows;) {
        int group = rows - g0 >= GROUP ? GROUP : 1;
        const float *first = h + (size_t)g0 * s.H;
        for (int cb = 0; cb < s.CP; cb += LANES) {
            float sums[GROUP][LANES];
            if (group == GROUP)
                logits_tile(first, s.H, GROUP, wp + cb, s.CP, sums);
            else
                logits_tile(first, s.H, 1, wp + cb, s.CP, sums);
            for (int g = 0; g < group; g++)
                for (int j = 0; j < LANES; j++) logits[g0 + g][cb + j] = sums[g][j];
        }
        g0 += group;
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < s.C; c++) logits[r][c] += p->bias[c];
}

/* hidden_delta of the chunk's rows (starting at row `first`), and its column sums into dbh.
 * dl has CHUNK_ROWS rows, zeros past `rows`, so that every tile has GROUP of them. */
static void chunk_hidden_delta(const output_layer_step *p, layer_size s, const float *wt,
                               int first, int rows, const float (*dl)[MAX_CLASSES],
                               float *restrict dbh) {
    for (int k0 = 0; k0 < s.H; k0 += LANES) {
        int width = min_int(LANES, s.H - k0);
        /* the next block's lines of hidden_delta, fetched for writing while this one is
         * computed: every thread read all of them in the last step's weight-gradient GEMM, so
         * other cores' caches hold them (as for the update's W1: cpu_ops.c) */
        if (k0 + LANES < s.H)
            for (int r = 0; r < rows; r++)
                __builtin_prefetch(p->hidden_delta + (size_t)(first + r) * s.H + k0 + LANES, 1);
        float column_sum[LANES] = {0.0f};
        for (int g0 = 0; g0 < rows; g0 += GROUP) {
            float sums[GROUP][LANES];
            delta_tile(dl + g0, s.C, wt + k0, s.HP, sums);
            for (int g = 0; g < min_int(GROUP, rows - g0); g++) {
                size_t at = (size_t)(first + g0 + g) * s.H + k0;
                const float *restrict h = p->hidden + at;
                float *restrict dh = p->hidden_delta + at;
                for (int j = 0; j < width; j++) {
                    dh[j] = h[j] > 0.0f ? sums[g][j] : 0.0f;
                    column_sum[j] += dh[j];
                }
            }
        }
        for (int j = 0; j < width; j++) dbh[k0 + j] = column_sum[j];
    }
}

/* dW (H×CP) = hᵀ·dl over the chunk's rows (h: rows×H): GROUP hidden units at a time, the
 * last few one by one. */
static void chunk_weight_grad(layer_size s, const float *h, int rows,
                              const float (*dl)[MAX_CLASSES], float *restrict dw) {
    for (int k0 = 0; k0 < s.H;) {
        int group = s.H - k0 >= GROUP ? GROUP : 1;
        for (int cb = 0; cb < s.CP; cb += LANES) {
            float sums[GROUP][LANES];
            if (group == GROUP)
                weight_grad_tile(h + k0, s.H, rows, GROUP, dl, cb, sums);
            else
                weight_grad_tile(h + k0, s.H, rows, 1, dl, cb, sums);
            for (int g = 0; g < group; g++)
                for (int j = 0; j < LANES; j++) dw[(size_t)(k0 + g) * s.CP + cb + j] = sums[g][j];
        }
        k0 += group;
    }
}

/* Rows [first, first + rows) of the batch through the layer, their sums into plane. */
static void run_chunk(const output_layer_step *p, layer_size s, const float *wp, const float *wt,
                      int first, int rows, float *plane) {
    float logits[CHUNK_ROWS][MAX_CLASSES], dl[CHUNK_ROWS][MAX_CLASSES];
    const float *h = p->hidden + (size_t)first * s.H;
    int metrics_row = (p->cursor ? p->cursor->first_row : 0) + first;
    smoothed_targets targets = label_targets(p->label_smoothing, s.C);
    chunk_logits(p, s, wp, h, rows, logits);
    for (int r = 0; r < CHUNK_ROWS; r++) {
        if (r < rows)
            cpu_softmax_cross_entropy_row(logits[r], p->labels[first + r], s.C, p->grad_scale,
                                          targets, dl[r],
                                          p->row_loss ? &p->row_loss[metrics_row + r] : NULL,
                                          p->row_correct ? &p->row_correct[metrics_row + r] : NULL,
                                          NULL);
        for (int c = r < rows ? s.C : 0; c < s.CP; c++) dl[r][c] = 0.0f;
    }
    float *dbh = plane, *dw = plane + s.HP, *db = plane + s.HP + (size_t)s.H * s.CP;
    for (int c = 0; c < s.CP; c++) {
        float total = 0.0f;
        for (int r = 0; r < rows; r++) total += dl[r][c];
        db[c] = total;
    }
    chunk_hidden_delta(p, s, wt, first, rows, (const float(*)[MAX_CLASSES])dl, dbh);
    chunk_weight_grad(s, h, rows, (const float(*)[MAX_CLASSES])dl, dw);
}

/* ---- the whole layer ---- */

/* Wp and Wt from W (H×C). */
static void prepare_weights(const output_layer_step *p, layer_size s, float *wp, float *wt) {
    for (int k = 0; k < s.H; k++)
        for (int c = 0; c < s.CP; c++)
            wp[(size_t)k * s.CP + c] = c < s.C ? p->weights[(size_t)k * s.C + c] : 0.0f;
    for (int c = 0; c < s.C; c++)
        for (int k = 0; k < s.HP; k++)
            wt[(size_t)c * s.HP + k] = k < s.H ? p->weights[(size_t)k * s.C + c] : 0.0f;
}

/* Output o of a plane (a total over the chunks) to where it belongs; padding goes nowhere. */
static void deliver(const output_layer_step *p, layer_size s, size_t o, float total) {
    size_t weights = (size_t)s.H * s.CP;
    if (o < (size_t)s.HP) {
        if (o < (size_t)s.H) p->hidden_bias_grad[o] = total;
    } else if (o - s.HP < weights) {
        size_t k = (o - s.HP) / s.CP, c = (o - s.HP) % s.CP;
        if (c < (size_t)s.C) p->weight_grad[k * s.C + c] = total;
    } else {
        size_t c = o - s.HP - weights;
        if (c < (size_t)s.C) p->bias_grad[c] = total;
    }
}

/* Outputs [o, o + LANES) of the planes, summed in chunk order. */
static void reduce_block(const output_layer_step *p, layer_size s, const float *planes,
                         int chunks, size_t o) {
    size_t stride = plane_floats(s);
    float total[LANES] = {0.0f};
    for (int chunk = 0; chunk < chunks; chunk++) {
        const float *restrict plane = planes + (size_t)chunk * stride + o;
        for (int j = 0; j < LANES; j++) total[j] += plane[j];
    }
    for (int j = 0; j < LANES; j++) deliver(p, s, o + j, total[j]);
}

void cpu_output_layer(const output_layer_step *p, float *scratch) {
    layer_size s = size_of(p->in, p->classes);
    int rows = p->rows, chunks = chunks_of(rows);
    float *wp = scratch, *wt = wp + (size_t)s.H * s.CP, *planes = wt + (size_t)s.C * s.HP;
    size_t stride = plane_floats(s);
    prepare_weights(p, s, wp, wt);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int chunk = 0; chunk < chunks; chunk++) {
            int first = chunk * CHUNK_ROWS;
            run_chunk(p, s, wp, wt, first, min_int(CHUNK_ROWS, rows - first),
                      planes + (size_t)chunk * stride);
        }
#pragma omp for schedule(static)
        for (size_t o = 0; o < stride; o += LANES) reduce_block(p, s, planes, chunks, o);
    }
}
