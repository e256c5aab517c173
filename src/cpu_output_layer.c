/* The output layer of a training step in one parallel region; see cpu_output_layer.h.
 *
 * Shapes (row-major): h is R×H (the last hidden layer, after its ReLU), W is H×C, b is C.
 *
 *   Wt = Wᵀ (C×H), once, so that every loop below runs over k (H long, contiguous) and
 *   vectorizes, instead of over c (10 long).
 *   Thread t takes rows [R·t/T, R·(t+1)/T) and, for each row r:
 *     logit[c] = b[c] + h[r]·Wt[c]                          C dot products of length H
 *     softmax: loss, correctness, dl[c] = grad_scale·(p[c] − [c == label])
 *     dh[k] = Σc dl[c]·Wt[c][k], 0 where h[r][k] <= 0      written to hidden_delta
 *     into the thread's plane: dbh[k] += dh[k], dWt[c][k] += dl[c]·h[r][k], db[c] += dl[c]
 *   ── barrier ──
 *   Each output of the planes is the sum over threads in thread order (the threads split the
 *   outputs): hidden_bias_grad, weight_grad (transposed back) and bias_grad.
 *
 * The sums run in a fixed order for a given thread count, so a run gives the same bits every
 * time; with another thread count they differ by rounding, as the tiled GEMM's do. */
#include "cpu_output_layer.h"

#include <omp.h>

#include "cpu_ops.h"

/* [ dbh (H) | dWt (C×H) | db (C) ] */
static size_t plane_floats(int in, int classes) {
    return (size_t)in + (size_t)classes * in + (size_t)classes;
}

size_t cpu_output_layer_scratch_floats(int in, int classes, int threads) {
    return (size_t)classes * in + (size_t)threads * plane_floats(in, classes);
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

/* One row through the layer, its gradients added into the thread's plane; logits and dl are
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

/* Output o of the planes, summed in thread order, to where it belongs. */
static void reduce_output(const output_layer_step *p, const float *planes, int threads, size_t o) {
    int H = p->in, C = p->classes;
    size_t stride = plane_floats(H, C);
    float total = 0.0f;
    for (int t = 0; t < threads; t++) total += planes[(size_t)t * stride + o];
    if (o < (size_t)H) {
        p->hidden_bias_grad[o] = total;
    } else if (o < (size_t)H + (size_t)C * H) {
        size_t c = (o - H) / H, k = (o - H) % H;
        p->weight_grad[k * C + c] = total;
    } else {
        p->bias_grad[o - H - (size_t)C * H] = total;
    }
}

void cpu_output_layer(const output_layer_step *p, int threads, float *scratch) {
    int H = p->in, C = p->classes, rows = p->rows;
    int first_row = p->cursor ? p->cursor->first_row : 0;
    float *wt = scratch, *planes = scratch + (size_t)C * H;
    size_t stride = plane_floats(H, C);
    for (int k = 0; k < H; k++)
        for (int c = 0; c < C; c++) wt[(size_t)c * H + k] = p->weights[(size_t)k * C + c];
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        float *plane = planes + (size_t)t * stride;
        float logits[CPU_OUTPUT_LAYER_MAX_CLASSES], dl[CPU_OUTPUT_LAYER_MAX_CLASSES];
        for (size_t o = 0; o < stride; o++) plane[o] = 0.0f;
        int first = (int)((long)rows * t / team), end = (int)((long)rows * (t + 1) / team);
        for (int r = first; r < end; r++) output_row(p, wt, r, first_row, plane, logits, dl);
#pragma omp barrier
#pragma omp for schedule(static)
        for (size_t o = 0; o < stride; o++) reduce_output(p, planes, team, o);
    }
}
