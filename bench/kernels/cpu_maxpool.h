/* 2-D max pooling on the CPU, as in a CNN's pooling layer: `planes` images (batch × channels)
 * of height×width floats, row-major and one after another; each output element is the maximum
 * of a kernel×kernel window of its plane, windows `stride` apart, the image surrounded by
 * `padding` rows and columns that never win (they count as -infinity, so they are never the
 * maximum: the window always holds at least one real pixel when padding < kernel).
 *
 *   out_height = (height + 2·padding − kernel) / stride + 1   (rounded down), out_width likewise
 *   out[plane][oy][ox] = max of in[plane][oy·stride − padding + dy][ox·stride − padding + dx]
 *                        over 0 <= dy, dx < kernel, inside the image
 *
 * Comparisons are `value > best`, so a NaN pixel never wins (the GPU kernel does the same, and
 * the results are compared for exact equality). */
#ifndef MLP_CPU_MAXPOOL_H
#define MLP_CPU_MAXPOOL_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int kernel;  /* window side, >= 1 */
    int stride;  /* distance between windows, >= 1 */
    int padding; /* rows and columns added on each side, 0 <= padding < kernel */
} maxpool_window;

/* Whether kernel >= 1, stride >= 1 and 0 <= padding < kernel. */
bool maxpool_window_valid(maxpool_window window);

/* The output size by the formula above; false if the window is invalid or the output would be
 * empty (the window larger than the padded image). height, width >= 1. */
bool maxpool_output_size(int height, int width, maxpool_window window, int *out_height,
                         int *out_width);

/* out (planes × out_height × out_width) from in (planes × height × width); the geometry must
 * have passed maxpool_output_size. One thread. */
void cpu_maxpool_sequential(const float *in, size_t planes, int height, int width,
                            maxpool_window window, float *out);

/* The same, output rows shared among the OpenMP threads: the same results, bit for bit. */
void cpu_maxpool_openmp(const float *in, size_t planes, int height, int width,
                        maxpool_window window, float *out);

#ifdef __cplusplus
}
#endif

#endif
