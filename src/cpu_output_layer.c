/* The output layer of a training step in one parallel region; see cpu_output_layer.h.
 *
 * Shapes (row-major): h is R×H (the last hidden layer, after its ReLU), W is H×C, b is C.
 *
 *   Wt = Wᵀ (C×H), once, so that every loop below runs over k (H long, contiguous) and
 *   vectorizes, instead of over c (10 long).
 *   The rows go in chunks of CHUNK_ROWS, the chunks shared out among the threads; for each row r
 *   of a chunk, in order:
 *     logit[c] = b[c] + h[r]·Wt[c]                          C dot products of length H
 *     softmax: loss, correctness, dl[c] = grad_scale·(p[c] − [c == label])
 *     dh[k] = Σc dl[c]·Wt[c][k], 0 where h[r][k] <= 0      written to hidden_delta
 *     into the chunk's plane: dbh[k] += dh[k], dWt[c][k] += dl[c]·h[r][k], db[c] += dl[c]
 *   ── barrier ──
 *   Each output is the sum of the chunks' planes in chunk order (the threads split the
 *   outputs): hidden_bias_grad, weight_grad (transposed back) and bias_grad.
 *
 * Every sum runs in an order fixed by the rows alone, not by the threads, so the result has the
 * same bits for any thread count (as the tiled GEMM's has). */
#include "cpu_output_layer.h"

#include "cpu_ops.h"

enum { CHUNK_ROWS = 16 };

static int chunks_of(int rows) { return (rows + CHUNK_ROWS - 1) / CHUNK_ROWS; }

/* A chunk's partial sums: [ dbh (H) | dWt (C×H) | db (C) ] */
static size_t plane_floats(int in, int classes) {
    return (size_t)in + (size_t)classes * in + (size_t)classes;
}

size_t cpu_output_layer_scratch_floats(int max_rows, int in, int classes) {
    return (size_t)classes * in + (size_t)chunks_of(max_rows) * plane_floats(in, classes);
}

/* Sixteen floats: the width the loops below are written in, so that they vectorize (one AVX-512
 * register, two AVX2 ones) without reassociating any sum (ISO C forbids the compiler that). */
enum { LANES = 16 };

/* a·b with LANES partial sums, added in a fixed order at the end. */
static float dot(const float *restrict a, const float *restrict b, int n) {
    float lanes[LANES] = {0};
    int k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int j = 0; j < LANES; j++) lanes[j] += a[k + j] * b[k + j];
    float sum = 0.0f;
    for (; k < n; k++) sum += a[k] * b[k];
    for (int j = 0; j < LANES; j++) sum += lanes[j];
    return sum;
}

/* One row through the layer, its gradients added into its chunk's plane; logits and dl are
 * the thread's room for C floats each. */
static void output_row(const output_layer_step *p, const float *restrict wt, int row,
                       int first_row, float *restrict plane, float *logits, float *dl) {
    int H = p->in, C = p->classes;
    const float *restrict h = p->hidden + (size_t)row * H;
    float *restrict dh = p->hidden_delta + (size_t)row * H;
    float *restrict dbh = plane, *restrict dwt = plane + H, *restrict db = plane + H + (size_t)C * H;
    for (int c = 0; c < C; c++) logits[c] = p->bias[c] + dot(h, wt + (size_t)c * H, H);
    cpu_softmax_cross_entropy_row(logits, p->labels[row], C, p->grad_scale, dl,
                                  &p->row_loss[first_row + row], &p->row_correct[first_row + row],
                                  NULL);
    for (int c = 0; c < C; c++) db[c] += dl[c];
    /* LANES hidden units at a time: their dh in registers across the classes */
    for (int k0 = 0; k0 < H; k0 += LANES) {
        int n = H - k0 < LANES ? H - k0 : LANES;
        float d[LANES] = {0};
        for (int c = 0; c < C; c++) {
            const float *restrict wt_c = wt + (size_t)c * H + k0;
            float *restrict dwt_c = dwt + (size_t)c * H + k0;
            for (int j = 0; j < n; j++) {
                d[j] += dl[c] * wt_c[j];
                dwt_c[j] += dl[c] * h[k0 + j];
            }
        }
        for (int j = 0; j < n; j++) {
            dh[k0 + j] = h[k0 + j] > 0.0f ? d[j] : 0.0f;
            dbh[k0 + j] += dh[k0 + j];
        }
    }
}

/* Output o of the planes, summed in chunk order, to where it belongs. */
static void reduce_output(const output_layer_step *p, const float *planes, int chunks, size_t o) {
    int H = p->in, C = p->classes;
    size_t stride = plane_floats(H, C);
    float total = 0.0f;
    for (int chunk = 0; chunk < chunks; chunk++) total += planes[(size_t)chunk * stride + o];
    if (o < (size_t)H) {
        p->hidden_bias_grad[o] = total;
    } else if (o < (size_t)H + (size_t)C * H) {
        size_t c = (o - H) / H, k = (o - H) % H;
        p->weight_grad[k * C + c] = total;
    } else {
        p->bias_grad[o - H - (size_t)C * H] = total;
    }
}

void cpu_output_layer(const output_layer_step *p, float *scratch) {
    int H = p->in, C = p->classes, rows = p->rows, chunks = chunks_of(rows);
    int first_row = p->cursor ? p->cursor->first_row : 0;
    float *wt = scratch, *planes = scratch + (size_t)C * H;
    size_t stride = plane_floats(H, C);
    for (int k = 0; k < H; k++)
        for (int c = 0; c < C; c++) wt[(size_t)c * H + k] = p->weights[(size_t)k * C + c];
#pragma omp parallel
    {
        float logits[CPU_OUTPUT_LAYER_MAX_CLASSES], dl[CPU_OUTPUT_LAYER_MAX_CLASSES];
#pragma omp for schedule(static)
        for (int chunk = 0; chunk < chunks; chunk++) {
            float *plane = planes + (size_t)chunk * stride;
            for (size_t o = 0; o < stride; o++) plane[o] = 0.0f;
            int end = (chunk + 1) * CHUNK_ROWS < rows ? (chunk + 1) * CHUNK_ROWS : rows;
            for (int r = chunk * CHUNK_ROWS; r < end; r++)
                output_row(p, wt, r, first_row, plane, logits, dl);
        }
#pragma omp for schedule(static)
        for (size_t o = 0; o < stride; o++) reduce_output(p, planes, chunks, o);
    }
}
