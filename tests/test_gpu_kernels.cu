/* The GPU kernels of mlp_bench's dot and maxpool benchmarks (bench/kernels/gpu_dot.cu,
 * gpu_maxpool.cu, libs/cublas_dot.cu) against the CPU: fresh random inputs, odd lengths and image sizes,
 * unaligned vectors (the warp-shuffle kernel's scalar path), outputs and scratch poisoned with
 * NaN before each launch, a guard after each output. Exits 77 (skipped) where there is no GPU. */
#include <cmath>
#include <cstring>
#include <vector>

#include "libs/cublas_dot.h"
#include "libs/cublas_gemm.h"
#include "libs/cuda_check.h"
#include "cuda/gpu_backend.h"
#include "gpu_test.h"
#include "device_buffer.cuh"
#include "bench/kernels/cpu_dot.h"
#include "bench/kernels/cpu_maxpool.h"
#include "bench/kernels/gpu_bench_kernels.h"
#include "core/rng.h"

namespace {

rng random_source;
cudaStream_t stream;
cublasHandle_t cublas;

std::vector<float> random_floats(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float &x : v) x = rng_uniform_range(&random_source, lo, hi);
    return v;
}

/* ---- dot ---- */

enum dot_kind { NAIVE, SHARED_TREE, WARP_SHUFFLE, CUBLAS };
const char *const DOT_NAMES[] = {"naive", "shared_tree", "warp_shuffle", "cublas"};

void launch_dot(dot_kind kind, const float *w, const float *x, size_t n, float *partials,
                float *dot) {
    switch (kind) {
    case NAIVE: gpu_dot_naive(stream, w, x, n, dot); break;
    case SHARED_TREE: gpu_dot_shared_tree(stream, w, x, n, partials, dot); break;
    case WARP_SHUFFLE: gpu_dot_warp_shuffle(stream, w, x, n, partials, dot); break;
    case CUBLAS: cublas_dot(cublas, w, x, n, dot); break;
    }
}

/* Float partial sums of random-signed terms: about 1e-7 of the size of the terms (Σ|w·x|). */
constexpr double DOT_BOUND = 1e-5;
/* The GPU's expf is within 2 ulp; the sigmoid is in (0, 1). */
constexpr double SIGMOID_TOLERANCE = 1e-6;

/* w·x of n floats starting `offset` floats into the buffers (1: not 16-byte aligned). */
void check_dot(size_t n, size_t offset, float lo, float hi, bool with_naive) {
    std::vector<float> w = random_floats(n + offset, lo, hi), x = random_floats(n + offset, lo, hi);
    double want = 0, scale = 0;
    for (size_t i = offset; i < n + offset; i++) {
        want += (double)w[i] * x[i];
        scale += std::fabs((double)w[i] * x[i]);
    }
    device_buffer<float> dw(w), dx(x), partials(GPU_DOT_MAX_BLOCKS), dot(1), y(1);
    for (dot_kind kind : {NAIVE, SHARED_TREE, WARP_SHUFFLE, CUBLAS}) {
        if (kind == NAIVE && !with_naive) continue;
        partials.poison(), dot.poison(), y.poison();
        launch_dot(kind, dw.ptr + offset, dx.ptr + offset, n, partials.ptr, dot.ptr);
        gpu_sigmoid_scalar(stream, dot.ptr, y.ptr);
        float got = dot.download()[0], got_y = y.download()[0];
        double error =
            std::isnan(got) ? INFINITY : std::fabs(got - want) / (scale > 0 ? scale : 1.0);
        CHECK(error <= DOT_BOUND, "dot %s n=%zu offset %zu: %.9g, want %.9g (error %.3g)",
              DOT_NAMES[kind], n, offset, got, want, error);
        CHECK(std::fabs(got_y - cpu_sigmoid(got)) <= SIGMOID_TOLERANCE,
              "sigmoid after dot %s n=%zu: %.9g, want %.9g", DOT_NAMES[kind], n, got_y,
              cpu_sigmoid(got));
        if (kind == SHARED_TREE || kind == WARP_SHUFFLE) { /* deterministic: same bits again */
            dot.poison();
            launch_dot(kind, dw.ptr + offset, dx.ptr + offset, n, partials.ptr, dot.ptr);
            float again = dot.download()[0];
            CHECK(std::memcmp(&again, &got, sizeof got) == 0, "dot %s n=%zu: %.9g then %.9g",
                  DOT_NAMES[kind], n, got, again);
        }
    }
}

void check_dots() {
    const size_t lengths[] = {0,       1, 3, 4, 5, 17, 1000, 4097, 65539, 1 << 20, (1 << 22) + 1,
                              10000000};
    for (size_t n : lengths)
        for (size_t offset : {0, 1, 4}) check_dot(n, offset, -1.0f, 1.0f, true);
    /* all terms positive: no cancellation, every rounding adds up. The naive kernel's long
     * chain of atomic additions into one float loses more than 1e-5 here, so it sits out. */
    check_dot(10000000, 0, 0.0f, 1.0f, false);
}

void check_sigmoid_extremes() {
    device_buffer<float> z(std::vector<float>{1000.0f}), z_negative(std::vector<float>{-1000.0f}),
        y(1);
    gpu_sigmoid_scalar(stream, z.ptr, y.ptr);
    float high = y.download()[0];
    gpu_sigmoid_scalar(stream, z_negative.ptr, y.ptr);
    float low = y.download()[0];
    CHECK(high == 1.0f && low == 0.0f, "sigmoid(±1000) = %g, %g: should saturate", high, low);
}

/* ---- maxpool ---- */

constexpr int GUARD = 64;
constexpr float GUARD_VALUE = 12345.0f;

void check_pool(size_t planes, int height, int width, maxpool_window window, float lo, float hi) {
    int out_h, out_w;
    if (!maxpool_output_size(height, width, window, &out_h, &out_w)) {
        CHECK(false, "maxpool test case %dx%d k%d s%d p%d has no output", height, width,
              window.kernel, window.stride, window.padding);
        return;
    }
    size_t in_count = planes * height * (size_t)width, out_count = planes * out_h * (size_t)out_w;
    std::vector<float> in = random_floats(in_count, lo, hi), want(out_count);
    cpu_maxpool_sequential(in.data(), planes, height, width, window, want.data());
    std::vector<float> initial(out_count + GUARD, NAN);
    for (size_t i = out_count; i < initial.size(); i++) initial[i] = GUARD_VALUE;
    device_buffer<float> din(in), dout(initial);
    gpu_maxpool(stream, din.ptr, planes, height, width, window.kernel, window.stride,
                window.padding, dout.ptr);
    std::vector<float> got = dout.download();
    size_t differ = 0, guard_hit = 0;
    for (size_t i = 0; i < out_count; i++) differ += !(got[i] == want[i]);
    for (size_t i = out_count; i < got.size(); i++) guard_hit += got[i] != GUARD_VALUE;
    CHECK(differ == 0 && guard_hit == 0,
          "maxpool %zux%dx%d k%d s%d p%d: %zu of %zu outputs differ from the CPU, %zu written past "
          "the end",
          planes, height, width, window.kernel, window.stride, window.padding, differ, out_count,
          guard_hit);
}

void check_pools() {
    struct pool_case {
        size_t planes;
        int height, width;
        maxpool_window window;
    };
    const pool_case cases[] = {
        {1, 1, 1, {1, 1, 0}},       {1, 4, 4, {2, 2, 0}},       {3, 17, 17, {2, 2, 0}},
        {2, 17, 13, {3, 2, 1}},     {1, 1000, 3, {2, 2, 0}},    {2, 5, 7, {3, 1, 2}},
        {1, 9, 9, {2, 3, 0}},       {4, 33, 31, {5, 4, 4}},     {1000, 5, 5, {2, 2, 1}},
        {3, 1000, 1000, {2, 2, 0}}, {2, 2049, 2047, {3, 2, 1}}, {1, 4096, 4096, {2, 2, 0}},
        {2, 3, 1000, {3, 5, 2}},    {70000, 2, 2, {2, 2, 0}},
        /* 2×2 windows, stride 2, even width: the float2 kernel; odd heights leave a row out */
        {5, 7, 10, {2, 2, 0}},      {3, 33, 2, {2, 2, 0}},      {2, 2, 4098, {2, 2, 0}},
    };
    for (const pool_case &c : cases) {
        check_pool(c.planes, c.height, c.width, c.window, -1.0f, 1.0f);
        check_pool(c.planes, c.height, c.width, c.window, -2.0f,
                   -1.0f); /* zero padding would win */
    }
}

} // namespace

int main() {
    random_source = rng_create(gpu_test_start("test_gpu_kernels"), 0);
    CUDA_CHECK(cudaStreamCreate(&stream));
    cublas = cublas_gemm_handle(stream);
    check_dots();
    check_sigmoid_extremes();
    check_pools();
    cublas_gemm_handle_destroy(cublas);
    CUDA_CHECK(cudaStreamDestroy(stream));
    return test_exit_status("test_gpu_kernels");
}
