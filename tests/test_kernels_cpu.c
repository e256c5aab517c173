/* The CPU kernels of mlp_bench's dot and maxpool benchmarks against straightforward references.
 *
 * Dot products (loop, OpenMP, OpenBLAS) against a sum in double, on 1 and 2 threads, lengths
 * from 0 to a million (odd ones, and around the size where OpenMP starts), aligned and not; the
 * sigmoid against the formula in double. Max pooling (sequential, OpenMP) against a direct
 * reference that builds the padded image explicitly (padding = -infinity) and takes each
 * window's maximum: odd image sizes, padding, stride different from the kernel, windows that
 * hang over the edge, one image and many; outputs poisoned with NaN and guarded at the end. */
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "bench/kernels/cpu_dot.h"
#include "bench/kernels/cpu_maxpool.h"
#include "libs/openblas_dot.h"
#include "libs/openblas_gemm.h"
#include "core/rng.h"

static rng random_source;

static float *random_floats(size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rng_uniform_range(&random_source, lo, hi);
    return v;
}

static void set_threads(int threads) {
    omp_set_num_threads(threads);
    openblas_threads(threads);
}

/* ---- dot ---- */

typedef float dot_fn(const float *w, const float *x, size_t n);

/* loop and openmp sum in double: only the final rounding to float remains (2^-24 of the
 * result, itself at most the size of the terms). OpenBLAS sums in float: its error grows with
 * n, about sqrt(n)·2^-24 relative to the terms for random signs; 1e-5 is the benchmark's bound. */
static const struct {
    const char *name;
    dot_fn *dot;
    double bound;
} DOTS[] = {
    {"loop", cpu_dot_loop, 1e-7},
    {"openmp", cpu_dot_openmp, 1e-7},
    {"blas", cpu_dot_blas, 1e-5},
};

static void check_dot(size_t n, size_t offset, int threads) {
    float *w = random_floats(n + offset, -1, 1), *x = random_floats(n + offset, -1, 1);
    double want = 0.0, scale = 0.0;
    for (size_t i = offset; i < n + offset; i++) {
        want += (double)w[i] * x[i];
        scale += fabs((double)w[i] * x[i]);
    }
    for (size_t d = 0; d < sizeof DOTS / sizeof *DOTS; d++) {
        float got = DOTS[d].dot(w + offset, x + offset, n);
        double error = fabs(got - want) / (scale > 0 ? scale : 1.0);
        CHECK(error <= DOTS[d].bound,
              "dot %s n=%zu offset %zu threads %d: %.9g, want %.9g (error %.3g)", DOTS[d].name, n,
              offset, threads, got, want, error);
    }
    free(w);
    free(x);
}

static void check_dots(void) {
    const size_t lengths[] = {0, 1, 2, 3, 17, 1000, 32767, 32768, 32771, 1000003};
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
            for (size_t offset = 0; offset < 2; offset++) check_dot(lengths[i], offset, threads);
    }
}

/* A sum that a float accumulator gets wrong (1e8 + 1 rounds to 1e8): the double ones do not. */
static void check_dot_accumulates_in_double(void) {
    const float w[] = {1e8f, 1.0f, -1e8f}, x[] = {1.0f, 1.0f, 1.0f};
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        CHECK(cpu_dot_loop(w, x, 3) == 1.0f, "dot loop: 1e8 + 1 - 1e8 gave %g",
              cpu_dot_loop(w, x, 3));
        CHECK(cpu_dot_openmp(w, x, 3) == 1.0f, "dot openmp: 1e8 + 1 - 1e8 gave %g",
              cpu_dot_openmp(w, x, 3));
    }
}

static void check_sigmoid(void) {
    CHECK(cpu_sigmoid(0.0f) == 0.5f, "sigmoid(0) = %g", cpu_sigmoid(0.0f));
    for (float z = -100.0f; z <= 100.0f; z += 0.37f) {
        double want = 1.0 / (1.0 + exp(-(double)z));
        float got = cpu_sigmoid(z);
        CHECK(fabs(got - want) <= 1e-6 * want + 1e-30, "sigmoid(%g) = %.9g, want %.9g", z, got,
              want);
    }
    CHECK(cpu_sigmoid(1000.0f) == 1.0f && cpu_sigmoid(-1000.0f) == 0.0f,
          "sigmoid(±1000) = %g, %g: should saturate, not overflow", cpu_sigmoid(1000.0f),
          cpu_sigmoid(-1000.0f));
}

/* ---- maxpool ---- */

typedef struct {
    size_t planes;
    int height, width;
    maxpool_window window;
} pool_case;

/* Output size straight from the formula, independently of maxpool_output_size. */
static int pooled(int extent, maxpool_window w) {
    return (extent + 2 * w.padding - w.kernel) / w.stride + 1;
}

/* The padded image, built explicitly, and the plain maximum of every window in it. */
static void reference_maxpool(const float *in, const pool_case *c, float *out) {
    maxpool_window w = c->window;
    int padded_h = c->height + 2 * w.padding, padded_w = c->width + 2 * w.padding;
    int out_h = pooled(c->height, w), out_w = pooled(c->width, w);
    float *padded = malloc((size_t)padded_h * padded_w * sizeof *padded);
    for (size_t plane = 0; plane < c->planes; plane++) {
        const float *image = in + plane * c->height * (size_t)c->width;
        for (int y = 0; y < padded_h; y++)
            for (int x = 0; x < padded_w; x++) {
                bool inside = y >= w.padding && y < w.padding + c->height && x >= w.padding &&
                              x < w.padding + c->width;
                padded[(size_t)y * padded_w + x] =
                    inside ? image[(size_t)(y - w.padding) * c->width + (x - w.padding)]
                           : -INFINITY;
            }
        for (int oy = 0; oy < out_h; oy++)
            for (int ox = 0; ox < out_w; ox++) {
                float best = -INFINITY;
                for (int dy = 0; dy < w.kernel; dy++)
                    for (int dx = 0; dx < w.kernel; dx++)
                        best = fmaxf(
                            best,
                            padded[(size_t)(oy * w.stride + dy) * padded_w + ox * w.stride + dx]);
                out[(plane * out_h + oy) * (size_t)out_w + ox] = best;
            }
    }
    free(padded);
}

typedef void maxpool_fn(const float *in, size_t planes, int height, int width,
                        maxpool_window window, float *out);

#define GUARD 16
#define GUARD_VALUE 12345.0f

static void check_pool_implementation(const char *name, maxpool_fn *pool, const float *in,
                                      const pool_case *c, const float *want, size_t out_count) {
    float *got = malloc((out_count + GUARD) * sizeof *got);
    for (size_t i = 0; i < out_count; i++) got[i] = NAN;
    for (size_t i = out_count; i < out_count + GUARD; i++) got[i] = GUARD_VALUE;
    pool(in, c->planes, c->height, c->width, c->window, got);
    size_t differ = 0, guard_hit = 0;
    for (size_t i = 0; i < out_count; i++) differ += !(got[i] == want[i]);
    for (size_t i = out_count; i < out_count + GUARD; i++) guard_hit += got[i] != GUARD_VALUE;
    CHECK(differ == 0 && guard_hit == 0,
          "maxpool %s %zux%dx%d k%d s%d p%d: %zu of %zu outputs differ, %zu written past the end",
          name, c->planes, c->height, c->width, c->window.kernel, c->window.stride,
          c->window.padding, differ, out_count, guard_hit);
    free(got);
}

static void check_pool(const pool_case *c, float lo, float hi) {
    int out_h, out_w;
    bool has_output = maxpool_output_size(c->height, c->width, c->window, &out_h, &out_w);
    CHECK(has_output && out_h == pooled(c->height, c->window) &&
              out_w == pooled(c->width, c->window),
          "maxpool_output_size %dx%d k%d s%d p%d: %dx%d", c->height, c->width, c->window.kernel,
          c->window.stride, c->window.padding, out_h, out_w);
    if (!has_output) return;
    size_t in_count = c->planes * c->height * (size_t)c->width,
           out_count = c->planes * out_h * (size_t)out_w;
    float *in = random_floats(in_count, lo, hi), *want = malloc(out_count * sizeof *want);
    reference_maxpool(in, c, want);
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        check_pool_implementation("sequential", cpu_maxpool_sequential, in, c, want, out_count);
        check_pool_implementation("openmp", cpu_maxpool_openmp, in, c, want, out_count);
    }
    free(in);
    free(want);
}

static void check_pools(void) {
    const pool_case cases[] = {
        {1, 1, 1, {1, 1, 0}},    {1, 4, 4, {2, 2, 0}},       {3, 17, 17, {2, 2, 0}},
        {2, 17, 13, {3, 2, 1}},  {1, 1000, 3, {2, 2, 0}},    {2, 5, 7, {3, 1, 2}},
        {1, 9, 9, {2, 3, 0}},    {1, 8, 8, {3, 3, 1}},       {4, 33, 31, {5, 4, 4}},
        {64, 6, 6, {2, 2, 1}},   {1, 1000, 1000, {2, 2, 0}}, {5, 64, 128, {3, 2, 1}},
        {2, 3, 1000, {3, 5, 2}}, {1, 1, 7, {2, 1, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_pool(&cases[i], -1.0f, 1.0f);
        check_pool(&cases[i], -2.0f,
                   -1.0f); /* all negative: zero padding would win, -inf must not */
    }
}

static void check_pool_geometry(void) {
    const maxpool_window invalid[] = {{0, 1, 0}, {2, 0, 0}, {2, 2, 2}, {2, 2, -1}, {1, 1, 1}};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        int h, w;
        CHECK(!maxpool_window_valid(invalid[i]) && !maxpool_output_size(8, 8, invalid[i], &h, &w),
              "window k%d s%d p%d accepted", invalid[i].kernel, invalid[i].stride,
              invalid[i].padding);
    }
    int h = 0, w = 0;
    CHECK(!maxpool_output_size(1, 1, (maxpool_window){2, 2, 0}, &h, &w),
          "a 2x2 window over a 1x1 image should have no output");
    CHECK(!maxpool_output_size(5, 1, (maxpool_window){3, 1, 0}, &h, &w),
          "a 3-wide window over a 1-wide image should have no output");
    CHECK(maxpool_output_size(7, 3, (maxpool_window){3, 2, 1}, &h, &w) && h == 4 && w == 2,
          "7x3 k3 s2 p1: %dx%d, want 4x2", h, w);
    CHECK(maxpool_output_size(5, 5, (maxpool_window){2, 2, 0}, &h, &w) && h == 2 && w == 2,
          "5x5 k2 s2: %dx%d, want 2x2 (rounded down)", h, w);
}

int main(void) {
    random_source = rng_create(test_seed("test_kernels_cpu"), 0);
    check_dots();
    check_dot_accumulates_in_double();
    check_sigmoid();
    check_pool_geometry();
    check_pools();
    return test_exit_status("test_kernels_cpu");
}
