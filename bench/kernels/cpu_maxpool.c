/* Max pooling on the CPU; see cpu_maxpool.h for the contract.
 *
 * Both versions compute one output row at a time. Instead of taking each window's maximum in
 * turn (a k×k loop per output element, too short to vectorize), the row is built up one window
 * offset (dy, dx) at a time: out[ox] = max(out[ox], in[y][ox·stride − padding + dx]) over the
 * whole row, a long branch-free loop the compiler vectorizes. Padding is handled by limiting
 * each pass to the output columns whose input lies inside the image (padded positions would be
 * -infinity and never win, so leaving them out gives the same maximum). The output row stays in
 * L1 across its k² passes, and with the default 2×2 windows of stride 2 each input element is
 * read exactly once, in row order: the work is streaming the image through the cache, bounded
 * by memory bandwidth once the loop is vectorized, and the OpenMP version gains by having
 * several cores pull from memory at once. Output rows are independent, so the threads share
 * them with no synchronization and the results do not depend on the thread count. */
#include "bench/kernels/cpu_maxpool.h"

#include <math.h>
#include <stddef.h>

bool maxpool_window_valid(maxpool_window window) {
    return window.kernel >= 1 && window.stride >= 1 && window.padding >= 0 &&
           window.padding < window.kernel;
}

static long pooled_extent(int extent, maxpool_window window) {
    long padded = (long)extent + 2L * window.padding - window.kernel;
    return padded < 0 ? 0 : padded / window.stride + 1;
}

bool maxpool_output_size(int height, int width, maxpool_window window, int *out_height,
                         int *out_width) {
    if (!maxpool_window_valid(window) || height < 1 || width < 1) return false;
    long rows = pooled_extent(height, window), cols = pooled_extent(width, window);
    if (rows < 1 || cols < 1) return false;
    *out_height = (int)rows;
    *out_width = (int)cols;
    return true;
}

/* Below this many input elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

static int clamp_to(int value, int lo, int hi) { return value < lo ? lo : value > hi ? hi : value; }

/* The output columns [*begin, *end) whose window column dx falls inside the image:
 * 0 <= ox·stride − padding + dx < width. */
static void columns_inside(int width, maxpool_window window, int dx, int out_width, int *begin,
                           int *end) {
    int lowest = window.padding - dx;              /* ox·stride >= lowest */
    int highest = width - 1 + window.padding - dx; /* ox·stride <= highest */
    *begin = lowest <= 0 ? 0 : (lowest + window.stride - 1) / window.stride;
    *end = highest < 0 ? 0 : highest / window.stride + 1;
    if (*end > out_width) *end = out_width;
}

/* out[0..out_width) = output row oy of one plane (height × width). The window is walked one
 * (row, column) offset at a time across the whole output row, so the inner loop runs over ox
 * with no branches: the compiler turns it into vector max instructions (`a > b ? a : b` is
 * exactly what x86's maxps computes). */
static void pool_row(const float *plane, int height, int width, maxpool_window window, int oy,
                     int out_width, float *out) {
    for (int ox = 0; ox < out_width; ox++) out[ox] = -INFINITY;
    int y0 = oy * window.stride - window.padding;
    int y_begin = clamp_to(y0, 0, height), y_end = clamp_to(y0 + window.kernel, 0, height);
    for (int y = y_begin; y < y_end; y++) {
        const float *row = plane + (size_t)y * width;
        for (int dx = 0; dx < window.kernel; dx++) {
            int begin, end;
            columns_inside(width, window, dx, out_width, &begin, &end);
            const float *column = row + dx - window.padding; /* column[ox·stride] */
            for (int ox = begin; ox < end; ox++) {
                float value = column[(ptrdiff_t)ox * window.stride];
                out[ox] = value > out[ox] ? value : out[ox];
            }
        }
    }
}

/* Output row `row` of all planes × out_height rows. */
static void pool_output_row(const float *in, int height, int width, maxpool_window window,
                            int out_height, int out_width, size_t row, float *out) {
    size_t plane = row / (size_t)out_height;
    int oy = (int)(row % (size_t)out_height);
    pool_row(in + plane * height * (size_t)width, height, width, window, oy, out_width,
             out + row * (size_t)out_width);
}

void cpu_maxpool_sequential(const float *in, size_t planes, int height, int width,
                            maxpool_window window, float *out) {
    int out_height, out_width;
    if (!maxpool_output_size(height, width, window, &out_height, &out_width)) return;
    size_t rows = planes * (size_t)out_height;
    for (size_t row = 0; row < rows; row++)
        pool_output_row(in, height, width, window, out_height, out_width, row, out);
}

void cpu_maxpool_openmp(const float *in, size_t planes, int height, int width,
                        maxpool_window window, float *out) {
    int out_height, out_width;
    if (!maxpool_output_size(height, width, window, &out_height, &out_width)) return;
    size_t rows = planes * (size_t)out_height;
#pragma omp parallel for schedule(static) if (planes * height * (size_t)width >=                   \
                                              PARALLEL_MIN_ELEMENTS)
    for (size_t row = 0; row < rows; row++)
        pool_output_row(in, height, width, window, out_height, out_width, row, out);
}
