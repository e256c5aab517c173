/* Every GPU operation against its CPU reference (cpu_ops.c, reference_gemm.c): fresh random
 * inputs, odd shapes (1, 17, 1000, not only multiples of a tile), device outputs poisoned with
 * NaN before each launch so an element a kernel forgets to write fails the comparison.
 * Exits 77 (skipped) where there is no GPU. */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "libs/cublas_gemm.h"
#include "libs/cuda_check.h"
#include "cuda/gpu_backend.h"
#include "cuda/gemm/gemm_ladder.h"
#include "gpu_test.h"
#include "device_buffer.cuh"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_ops.h"
#include "cuda/kernels/gpu_kernels.h"
#include "output_layer_reference.h"
#include "core/rng.h"
#include "util/tf32.h"

namespace {

rng random_source;
cudaStream_t stream;
cublasHandle_t cublas;

std::vector<float> random_floats(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float &x : v) x = rng_uniform_range(&random_source, lo, hi);
    return v;
}

/* ‖got − want‖ / ‖scale‖, where scale[i] is the size of the terms that make want[i] (for a sum,
 * the sum of their absolute values), so that cancellation cannot make a correct result look
 * wrong; infinite if anything is NaN (an unwritten element). */
double scaled_error(const std::vector<float> &got, const std::vector<double> &want,
                    const std::vector<double> &scale) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (std::isnan(got[i])) return INFINITY;
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += scale[i] * scale[i];
    }
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/* Largest |got − want| / (absolute + relative·|want|): at most 1 means within tolerance. */
double worst_deviation(const std::vector<float> &got, const std::vector<float> &want,
                       double absolute, double relative) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (std::isnan(got[i])) return INFINITY;
        worst = std::fmax(worst, std::fabs((double)got[i] - want[i]) / (absolute + relative * std::fabs(want[i])));
    }
    return worst;
}

/* ---- GEMM ---- */

/* Every GEMM under test, with the epilogue it applies (cuBLAS has none: the unfused kernels
 * follow it, as in the blas implementation). */
typedef void gemm_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue);

void naive_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_naive(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue);
}

void shared_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_shared(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (epilogue && (epilogue->bias || epilogue->relu))
        gpu_bias_activation(stream, c, epilogue->bias, m, n, ldc, epilogue->relu);
    if (epilogue && epilogue->relu_mask) gpu_relu_backward(stream, c, epilogue->relu_mask, m, n, ldc);
}

void cublas_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    (void)stream;
    cublas_gemm(cublas, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (epilogue && (epilogue->bias || epilogue->relu))
        gpu_bias_activation(stream, c, epilogue->bias, m, n, ldc, epilogue->relu);
    if (epilogue && epilogue->relu_mask) gpu_relu_backward(stream, c, epilogue->relu_mask, m, n, ldc);
}

struct gemm_impl {
    const char *name;
    gemm_launcher *launch;
};

gpu_gemm_workspace workspace; /* split-K's partial sums, for the tiled GEMM */

template <int TILE, int SPLITS> void blocked_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_blocked_with_plan(TILE, SPLITS, workspace, stream, trans_a, trans_b, m, n, k, alpha, a,
                             lda, b, ldb, beta, c, ldc, epilogue);
}

template <int ROWS, int COLS, int SPLITS> void tiled_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_tiled_with_plan(ROWS, COLS, SPLITS, stream, trans_a, trans_b, m, n, k, alpha,
                                 a, lda, b, ldb, beta, c, ldc, epilogue);
}

void tiled_auto_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_tiled(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                       ldc, epilogue);
}

void blocked_auto_launcher(GPU_GEMM_ARGS, const gemm_epilogue *epilogue) {
    gpu_gemm_blocked(workspace, stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc, epilogue);
}

/* Rungs 3 (blocked) and 5 (tiled) pick their tile and K slices by size; each tile is tested on
 * every shape here, whole and split into K slices (as many as K allows: slices are at least 32
 * deep, so K = 65 gets two, of 48 and 17, which ends off the tile grid). */
const gemm_impl GEMMS[] = {{"naive", naive_launcher},
                           {"shared", shared_launcher},
                           {"blocked(32)", blocked_launcher<32, 1>},
                           {"blocked(64)", blocked_launcher<64, 1>},
                           {"blocked(128)", blocked_launcher<128, 1>},
                           {"blocked(32, 3 K slices)", blocked_launcher<32, 3>},
                           {"blocked(64, 7 K slices)", blocked_launcher<64, 7>},
                           {"blocked(auto)", blocked_auto_launcher},
                           {"tiled(32, 3 K slices)", tiled_launcher<32, 32, 3>},
                           {"tiled(128)", tiled_launcher<128, 128, 1>},
                           {"tiled(64×128, 3 K slices)", tiled_launcher<64, 128, 3>},
                           {"tiled(auto)", tiled_auto_launcher},
                           {"cublas", cublas_launcher}};

/* FP32 dot products of K ≤ 2048 terms: rounding error grows like sqrt(K)·6e-8 ≈ 3e-6, measured
 * against the size of the terms (|A|·|B| + |beta|·|C|). */
constexpr double GEMM_BOUND = 1e-5;
constexpr float C_PADDING = 12345.0f; /* in C's padding columns and guard: must survive */
constexpr int GUARD = 64;             /* floats after each matrix, poisoned */

struct gemm_case {
    int m, n, k;
    int pad;     /* extra columns in each row stride */
    int offset;  /* floats to shift each matrix's start by: 1 breaks 16-byte alignment */
};

/* A stored matrix with `offset` floats before it and GUARD after, all set to `fill`, as are the
 * padding columns; the matrix itself gets random values. */
std::vector<float> padded_matrix(int rows, int cols, int ld, int offset, float fill) {
    std::vector<float> v(offset + (size_t)rows * ld + GUARD, fill);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) v[offset + (size_t)r * ld + c] = rng_uniform_range(&random_source, -1, 1);
    return v;
}

/* One GEMM problem with its inputs as stored (padding, offset and guards included), the
 * double-precision reference and the size of the terms behind each element of it. */
struct gemm_problem {
    bool ta, tb, accumulate;
    gemm_case g;
    int lda, ldb, ldc;
    float alpha, beta;
    std::vector<float> a, b, c;
    std::vector<double> want, scale;
};

gemm_problem make_gemm_problem(bool ta, bool tb, const gemm_case &g, bool accumulate) {
    gemm_problem p{ta, tb, accumulate, g};
    int a_rows = ta ? g.k : g.m, a_cols = ta ? g.m : g.k;
    int b_rows = tb ? g.n : g.k, b_cols = tb ? g.k : g.n;
    p.lda = a_cols + g.pad, p.ldb = b_cols + g.pad, p.ldc = g.n + g.pad;
    /* NaN around A and B: a read outside them reaches the result even when multiplied by 0 */
    p.a = padded_matrix(a_rows, a_cols, p.lda, g.offset, NAN);
    p.b = padded_matrix(b_rows, b_cols, p.ldb, g.offset, NAN);
    p.c = padded_matrix(g.m, g.n, p.ldc, g.offset, C_PADDING);
    p.alpha = accumulate ? 0.5f : 1.0f, p.beta = accumulate ? -1.5f : 0.0f;
    p.want.resize((size_t)g.m * p.ldc), p.scale.resize((size_t)g.m * p.ldc);
    std::vector<float> abs_a = p.a, abs_b = p.b, abs_c = p.c;
    for (float &x : abs_a) x = std::fabs(x);
    for (float &x : abs_b) x = std::fabs(x);
    for (float &x : abs_c) x = std::fabs(x);
    reference_gemm(ta, tb, g.m, g.n, g.k, p.alpha, p.a.data() + g.offset, p.lda, p.b.data() + g.offset,
                   p.ldb, p.beta, p.c.data() + g.offset, p.ldc, p.want.data());
    reference_gemm(ta, tb, g.m, g.n, g.k, std::fabs(p.alpha), abs_a.data() + g.offset, p.lda,
                   abs_b.data() + g.offset, p.ldb, std::fabs(p.beta), abs_c.data() + g.offset, p.ldc,
                   p.scale.data());
    return p;
}

void check_gemm(const gemm_impl &impl, const gemm_problem &p) {
    const gemm_case &g = p.g;
    device_buffer<float> da(p.a), db(p.b), dc(p.c);
    if (!p.accumulate) { /* beta == 0: C is write-only, so poison it (but keep padding and guard) */
        std::vector<float> poisoned = p.c;
        for (int r = 0; r < g.m; r++)
            for (int col = 0; col < g.n; col++) poisoned[g.offset + (size_t)r * p.ldc + col] = NAN;
        dc.upload(poisoned);
    }
    impl.launch(stream, p.ta, p.tb, g.m, g.n, g.k, p.alpha, da.ptr + g.offset, p.lda,
                db.ptr + g.offset, p.ldb, p.beta, dc.ptr + g.offset, p.ldc, nullptr);
    std::vector<float> got_full = dc.download();
    std::vector<float> got;
    std::vector<double> expected, sizes;
    bool outside_intact = true;
    for (size_t i = 0; i < got_full.size(); i++) {
        long inside = (long)i - g.offset;
        int r = (int)(inside / p.ldc), col = (int)(inside % p.ldc);
        if (inside >= 0 && r < g.m && col < g.n) {
            got.push_back(got_full[i]);
            expected.push_back(p.want[(size_t)r * p.ldc + col]);
            sizes.push_back(p.scale[(size_t)r * p.ldc + col]);
        } else if (got_full[i] != C_PADDING) {
            outside_intact = false;
        }
    }
    double error = scaled_error(got, expected, sizes);
    CHECK(error <= GEMM_BOUND && outside_intact,
          "gemm %s %c%c %dx%dx%d pad %d offset %d %s: error %.3g%s", impl.name, p.ta ? 'T' : 'N',
          p.tb ? 'T' : 'N', g.m, g.n, g.k, g.pad, g.offset, p.accumulate ? "beta=-1.5" : "beta=0",
          error, outside_intact ? "" : ", wrote outside C");
}

/* MLP_TEST_SHAPES=small or tiny: only GEMMs of up to 20M or 5M multiply-adds (M·N·K), for
 * compute-sanitizer, which is slow (racecheck on the small ones took over 420 s). */
long largest_gemm_volume() {
    const char *shapes = std::getenv("MLP_TEST_SHAPES");
    if (shapes && std::strcmp(shapes, "small") == 0) return 20000000L;
    if (shapes && std::strcmp(shapes, "tiny") == 0) return 5000000L;
    return LONG_MAX;
}

/* The GEMMs of GEMMS by family, so that compute-sanitizer's racecheck can take them a family at
 * a time: rung 5 (tiled), rung 3 (blocked), the rest (naive, shared, cuBLAS). */
enum gemm_family { FAMILY_TILED, FAMILY_BLOCKED, FAMILY_OTHERS };

gemm_family family_of(const gemm_impl &impl) {
    if (std::strncmp(impl.name, "tiled(", 6) == 0) return FAMILY_TILED;
    if (std::strncmp(impl.name, "blocked(", 8) == 0) return FAMILY_BLOCKED;
    return FAMILY_OTHERS;
}

void check_gemms(gemm_family family) {
    const gemm_case cases[] = {
        {1, 1, 1, 0, 0},        {2, 3, 4, 0, 0},        {17, 33, 65, 0, 0},     {1000, 3, 7, 0, 0},
        {7, 1000, 3, 0, 0},     {64, 784, 256, 0, 0},   {129, 257, 513, 0, 0},  {512, 256, 784, 0, 0},
        {784, 256, 512, 0, 0},  {512, 10, 256, 0, 0},   {16, 256, 784, 0, 0},   {2048, 1152, 64, 0, 0},
        {100, 200, 300, 1, 0},  {64, 64, 64, 3, 0},     {130, 66, 34, 0, 1},    {1000, 1000, 1000, 0, 0},
        /* row strides that are multiples of 4 around widths that are not: partial float4 edges */
        {17, 17, 17, 3, 0},     {18, 22, 26, 2, 0},     {150, 138, 142, 2, 0},  {1001, 999, 9, 0, 0},
        /* long K over a small output: what split-K is for */
        {10, 7, 4099, 0, 0},    {33, 65, 2001, 1, 1},
        /* deep K over fewer 64×64 tiles than an H200 has multiprocessors: tiled(auto) takes
         * 64×128 tiles in 2 and 8 K slices (layer 1 at batch 2048, off the tile grid) */
        {2047, 255, 783, 0, 0}, {784, 255, 2049, 0, 0},
    };
    long largest = largest_gemm_volume();
    for (const gemm_case &g : cases) {
        long volume = (long)g.m * g.n * g.k;
        if (volume > largest) continue;
        for (int t = 0; t < 4; t++)
            for (bool accumulate : {false, true}) {
                gemm_problem problem = make_gemm_problem(t & 1, t & 2, g, accumulate);
                for (const gemm_impl &impl : GEMMS) {
                    if (family_of(impl) != family) continue;
                    if (impl.launch == naive_launcher && t != 0 && volume > 100000000L) continue; /* slow */
                    check_gemm(impl, problem);
                }
            }
    }
}

/* The fused epilogues against the unfused reference: C = epilogue(A·B), with a bias and ReLU
 * (forward), a bias alone, and a ReLU mask (backward), on shapes that split K and that end off
 * the tile grid, with a row stride wider than C. */
void check_gemm_epilogues() {
    const gemm_case cases[] = {{1, 1, 1, 0, 0},       {17, 10, 33, 3, 0},  {10, 7, 4099, 0, 0},
                               {512, 256, 784, 0, 0}, {130, 66, 34, 2, 0}, {2047, 255, 783, 1, 0}};
    long largest = largest_gemm_volume();
    for (const gemm_case &g : cases)
        for (int kind = 0; kind < 3 && (long)g.m * g.n * g.k <= largest; kind++) {
            int ldc = g.n + g.pad;
            std::vector<float> a = random_floats((size_t)g.m * g.k, -1, 1);
            std::vector<float> b = random_floats((size_t)g.k * g.n, -1, 1);
            std::vector<float> bias = random_floats(g.n, -1, 1);
            std::vector<float> mask = random_floats((size_t)g.m * ldc, -1, 1);
            std::vector<double> want((size_t)g.m * ldc), size((size_t)g.m * ldc);
            std::vector<float> abs_a = a, abs_b = b;
            for (float &x : abs_a) x = std::fabs(x);
            for (float &x : abs_b) x = std::fabs(x);
            reference_gemm(false, false, g.m, g.n, g.k, 1.0f, a.data(), g.k, b.data(), g.n, 0.0f,
                           nullptr, ldc, want.data());
            reference_gemm(false, false, g.m, g.n, g.k, 1.0f, abs_a.data(), g.k, abs_b.data(), g.n,
                           0.0f, nullptr, ldc, size.data());
            gemm_epilogue epilogue{};
            for (int r = 0; r < g.m; r++)
                for (int c = 0; c < g.n; c++) {
                    size_t i = (size_t)r * ldc + c;
                    if (kind < 2) want[i] += bias[c], size[i] += std::fabs(bias[c]);
                    if (kind == 0) want[i] = std::fmax(want[i], 0.0);
                    if (kind == 2 && mask[i] <= 0) want[i] = 0.0;
                }
            device_buffer<float> da(a), db(b), dbias(bias), dmask(mask), dc((size_t)g.m * ldc);
            if (kind < 2) epilogue.bias = dbias.ptr;
            epilogue.relu = kind == 0;
            if (kind == 2) epilogue.relu_mask = dmask.ptr;
            for (const gemm_impl &impl : GEMMS) {
                dc.poison();
                impl.launch(stream, false, false, g.m, g.n, g.k, 1.0f, da.ptr, g.k, db.ptr, g.n,
                            0.0f, dc.ptr, ldc, &epilogue);
                std::vector<float> got_full = dc.download(), got;
                std::vector<double> expected, sizes;
                for (int r = 0; r < g.m; r++)
                    for (int c = 0; c < g.n; c++) {
                        size_t i = (size_t)r * ldc + c;
                        got.push_back(got_full[i]);
                        expected.push_back(want[i]);
                        sizes.push_back(size[i]);
                    }
                double error = scaled_error(got, expected, sizes);
                CHECK(error <= GEMM_BOUND, "gemm %s %dx%dx%d with %s epilogue: error %.3g",
                      impl.name, g.m, g.n, g.k,
                      kind == 0 ? "bias+relu" : kind == 1 ? "bias" : "relu mask", error);
            }
        }
}

/* ---- the other operations ---- */

const int ROWS[] = {1, 17, 1000};
const int COLS[] = {1, 10, 33, 256};

void check_bias_activation() {
    for (int rows : ROWS)
        for (int cols : COLS)
            for (int relu = 0; relu < 2; relu++) {
                std::vector<float> z = random_floats((size_t)rows * cols, -2, 2);
                std::vector<float> bias = random_floats(cols, -1, 1);
                device_buffer<float> dz(z), dbias(bias);
                gpu_bias_activation(stream, dz.ptr, dbias.ptr, rows, cols, cols, relu);
                cpu_bias_activation(z.data(), bias.data(), rows, cols, cols, relu);
                CHECK(dz.download() == z, "bias_activation %dx%d relu=%d differs from the CPU", rows,
                      cols, relu);
            }
}

void check_relu_backward() {
    for (int rows : ROWS)
        for (int cols : COLS) {
            size_t n = (size_t)rows * cols;
            std::vector<float> grad = random_floats(n, -1, 1), act = random_floats(n, -1, 1);
            for (size_t i = 0; i < n; i += 7) act[i] = 0.0f; /* the boundary: masked */
            device_buffer<float> dgrad(grad), dact(act);
            gpu_relu_backward(stream, dgrad.ptr, dact.ptr, rows, cols, cols);
            cpu_relu_backward(grad.data(), act.data(), rows, cols, cols);
            CHECK(dgrad.download() == grad, "relu_backward %zu differs from the CPU", n);
        }
}

/* expf/logf differ by an ulp or two between CPU and GPU libraries, and the warp adds the
 * exponentials in another order: relative 1e-5, plus 1e-6 absolute for values near zero. */
constexpr double SOFTMAX_BOUND = 1e-5;

gpu_softmax_scratch softmax_scratch;

/* A pass cursor in device memory, for the operations that read their place in the pass. */
device_buffer<pass_cursor> cursor_at(int first_row, int optimizer_steps) {
    return device_buffer<pass_cursor>(std::vector<pass_cursor>{{first_row, optimizer_steps}});
}

/* The rows' metrics land at the cursor's row (offset) of the pass's arrays; the bias gradient is
 * the column sums of the gradient. */
void check_softmax(int rows, int classes, float spread, float smoothing) {
    const int offset = 5;
    std::vector<float> logits = random_floats((size_t)rows * classes, -spread, spread);
    std::vector<uint8_t> labels(rows);
    for (uint8_t &l : labels) l = (uint8_t)rng_below(&random_source, classes);
    float scale = 1.0f / rows;
    std::vector<float> grad(logits.size()), loss(rows), correct(rows);
    std::vector<int32_t> prediction(rows);
    cpu_softmax_cross_entropy(logits.data(), labels.data(), rows, classes, scale, smoothing,
                              grad.data(), loss.data(), correct.data(), prediction.data());
    std::vector<double> bias_want(classes, 0.0), bias_size(classes, 0.0);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < classes; c++) {
            bias_want[c] += grad[(size_t)r * classes + c];
            bias_size[c] += std::fabs(grad[(size_t)r * classes + c]);
        }
    device_buffer<float> dlogits(logits), dgrad(grad.size()), dbias(classes);
    device_buffer<float> dloss(offset + rows), dcorrect(offset + rows);
    device_buffer<uint8_t> dlabels(labels);
    device_buffer<int32_t> dprediction(offset + rows);
    device_buffer<pass_cursor> cursor = cursor_at(offset, 0);
    dgrad.poison(), dbias.poison(), dloss.poison(), dcorrect.poison(), dprediction.poison();
    gpu_softmax_cross_entropy(stream, dlogits.ptr, dlabels.ptr, rows, classes, scale, smoothing,
                              dgrad.ptr, dbias.ptr, dloss.ptr, dcorrect.ptr, dprediction.ptr,
                              cursor.ptr, softmax_scratch);
    std::vector<float> got_loss = dloss.download(), got_correct = dcorrect.download();
    std::vector<int32_t> got_prediction = dprediction.download();
    got_loss.erase(got_loss.begin(), got_loss.begin() + offset);
    got_correct.erase(got_correct.begin(), got_correct.begin() + offset);
    got_prediction.erase(got_prediction.begin(), got_prediction.begin() + offset);
    double grad_error = worst_deviation(dgrad.download(), grad, 1e-6 * scale, SOFTMAX_BOUND);
    /* the GPU and the CPU each round the smoothed sum, in their own orders: twice one sum's
     * bound, over the logits' whole range (2·spread) */
    double smoothed_sum_rounding =
        smoothing != 0.0f ? 2.0 * smoothed_loss_rounding(classes, 2.0 * spread) : 0.0;
    double loss_error = worst_deviation(got_loss, loss, 1e-6 + smoothed_sum_rounding, SOFTMAX_BOUND);
    /* each term of a bias gradient carries the gradient's own tolerance, absolute part included
     * (a confident row's p − 1 is a difference of nearly equal numbers) */
    std::vector<float> got_bias = dbias.download();
    double bias_error = 0;
    for (int c = 0; c < classes; c++) {
        double e = std::fabs(got_bias[c] - bias_want[c]) / (rows * 1e-6 * scale + SOFTMAX_BOUND * bias_size[c]);
        bias_error = std::fmax(bias_error, std::isnan(e) ? INFINITY : e); /* poison is NaN */
    }
    CHECK(grad_error <= 1 && loss_error <= 1 && bias_error <= 1,
          "softmax %dx%d spread %g smoothing %g: grad off by %.3g, loss by %.3g, bias grad by "
          "%.3g tolerances",
          rows, classes, spread, smoothing, grad_error, loss_error, bias_error);
    CHECK(got_correct == correct && got_prediction == prediction,
          "softmax %dx%d: predictions differ from the CPU", rows, classes);
}

void check_softmax_without_outputs() {
    int rows = 17, classes = 10;
    std::vector<float> logits = random_floats((size_t)rows * classes, -3, 3);
    std::vector<uint8_t> labels(rows, 3);
    device_buffer<float> dlogits(logits), dloss(rows), dcorrect(rows);
    device_buffer<uint8_t> dlabels(labels);
    dloss.poison(), dcorrect.poison();
    gpu_softmax_cross_entropy(stream, dlogits.ptr, dlabels.ptr, rows, classes, 1.0f, 0.0f, nullptr,
                              nullptr, dloss.ptr, dcorrect.ptr, nullptr, nullptr, softmax_scratch);
    std::vector<float> loss = dloss.download();
    bool finite = true;
    for (float l : loss) finite = finite && std::isfinite(l);
    CHECK(finite, "softmax without gradient/prediction outputs left the loss unwritten");
}

void check_softmax_extremes() {
    const float extremes[] = {1e4f, -1e4f, 0.0f, 1e4f, -1e4f, 5.0f, -5.0f, 0.0f, 1e4f, 1e4f};
    int rows = 4, classes = 10;
    std::vector<float> logits;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < classes; c++) logits.push_back(extremes[(r + c) % 10] * (r % 2 ? -1 : 1));
    std::vector<uint8_t> labels = {0, 1, 2, 3};
    device_buffer<float> dlogits(logits), dgrad(logits.size()), dloss(rows), dcorrect(rows);
    device_buffer<uint8_t> dlabels(labels);
    for (float smoothing : {0.0f, 0.3f}) {
        gpu_softmax_cross_entropy(stream, dlogits.ptr, dlabels.ptr, rows, classes, 1.0f, smoothing,
                                  dgrad.ptr, nullptr, dloss.ptr, dcorrect.ptr, nullptr, nullptr,
                                  softmax_scratch);
        bool finite = true;
        for (float v : dgrad.download()) finite = finite && std::isfinite(v);
        for (float v : dloss.download()) finite = finite && std::isfinite(v);
        CHECK(finite, "softmax of logits ±1e4, smoothing %g, is not finite", smoothing);
    }
}

/* Whether copy holds x rounded to BF16 (nearest even), bit for bit. */
bool is_bf16_copy(const std::vector<__nv_bfloat16> &copy, const std::vector<float> &x) {
    for (size_t i = 0; i < x.size(); i++)
        if (__bfloat16_as_ushort(copy[i]) != __bfloat16_as_ushort(__float2bfloat16_rn(x[i]))) return false;
    return copy.size() == x.size();
}

/* Whether copy holds x rounded to TF32, each value exactly, as FP16. */
bool is_tf32_in_fp16_copy(const std::vector<__half> &copy, const std::vector<float> &x, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (__half2float(copy[i]) != round_tf32(x[i])) return false;
    return true;
}

/* ---- the fused output layer (output_layer.cu) against output_layer_reference.c ---- */

constexpr double OUTPUT_LAYER_BOUND = 1e-5;

/* h is a ReLU's output (about half zeros); the metrics land at the cursor's row. For half the
 * shapes (rows + in even), with and without label smoothing, the rows' launch and the sums'
 * apart, the rows' with a BF16 copy of the hidden delta. */
void check_output_layer(int rows, int in, int classes, float smoothing) {
    const int offset = 5;
    std::vector<float> h = random_floats((size_t)rows * in, -1, 1);
    for (float &v : h) v = std::fmax(v, 0.0f);
    std::vector<float> w = random_floats((size_t)in * classes, -0.5f, 0.5f);
    std::vector<float> b = random_floats(classes, -0.5f, 0.5f);
    std::vector<uint8_t> labels(rows);
    for (uint8_t &l : labels) l = (uint8_t)rng_below(&random_source, classes);
    float scale = rows > 0 ? 1.0f / rows : 1.0f;
    output_layer_reference ref;
    output_layer_reference_compute(&ref, h.data(), w.data(), b.data(), labels.data(), rows, in,
                                   classes, scale, smoothing);

    device_buffer<float> dh(h), dw(w), db(b), dweight_grad(w.size()), dbias_grad(classes);
    device_buffer<float> ddelta(h.size()), dhidden_bias_grad(in), dloss(offset + rows), dcorrect(offset + rows);
    device_buffer<uint8_t> dlabels(labels);
    device_buffer<pass_cursor> cursor = cursor_at(offset, 0);
    device_buffer<float> scratch(gpu_output_layer_scratch_floats(rows, in, classes));
    dweight_grad.poison(), dbias_grad.poison(), ddelta.poison(), dhidden_bias_grad.poison();
    dloss.poison(), dcorrect.poison(), scratch.poison();
    output_layer_step step = {dh.ptr, dw.ptr, db.ptr, dlabels.ptr, rows, in, classes, scale,
                              smoothing, dweight_grad.ptr, dbias_grad.ptr, ddelta.ptr, dhidden_bias_grad.ptr,
                              dloss.ptr, dcorrect.ptr, cursor.ptr};
    device_buffer<__nv_bfloat16> ddelta16(h.size());
    ddelta16.poison();
    const bool with_copy = (rows + in) % 2 == 0;
    if (with_copy) {
        gpu_output_layer_rows(stream, step, scratch.ptr, ddelta16.ptr);
        gpu_output_layer_sums(stream, step, scratch.ptr);
        CHECK(is_bf16_copy(ddelta16.download(), ddelta.download()),
              "output layer %dx%d->%d: the hidden delta's BF16 copy is not the delta rounded", rows, in, classes);
    } else {
        gpu_output_layer(stream, step, scratch.ptr);
    }

    std::vector<float> loss = dloss.download(), correct = dcorrect.download();
    output_layer_errors e = output_layer_compare(
        &ref, loss.data() + offset, correct.data() + offset, dweight_grad.download().data(),
        dbias_grad.download().data(), ddelta.download().data(), dhidden_bias_grad.download().data());
    output_layer_reference_free(&ref);
    CHECK(output_layer_worst_error(&e) <= OUTPUT_LAYER_BOUND,
          "output layer %dx%d->%d, smoothing %g: loss %.3g, dW %.3g, db %.3g, hidden delta %.3g, "
          "hidden db %.3g (bound %g)",
          rows, in, classes, smoothing, e.loss, e.weight_grad, e.bias_grad, e.hidden_delta, e.hidden_bias_grad,
          OUTPUT_LAYER_BOUND);
    CHECK(e.flipped == 0, "output layer %dx%d->%d: %d rows' correctness differs from the reference",
          rows, in, classes, e.flipped);
}

void check_output_layers() {
    CHECK(!gpu_output_layer_fits(OUTPUT_LAYER_MAX_IN + 1, 10) && !gpu_output_layer_fits(256, 33),
          "gpu_output_layer_fits accepts shapes past the kernel's limits");
    for (int rows : {0, 1, 17, 1000}) /* 0: a rank's share of a batch shorter than the ranks */
        for (int in : {1, 17, 256, 1000})
            for (int classes : {1, 10, 13, 17, 32}) { /* each padding: 10, 16, 32 */
                if (!gpu_output_layer_fits(in, classes)) continue; /* too large for shared memory */
                for (float smoothing : {0.0f, 0.25f}) check_output_layer(rows, in, classes, smoothing);
            }
    CHECK(gpu_output_layer_fits(256, 10) && gpu_output_layer_fits(1000, 10),
          "gpu_output_layer_fits refuses the default output layer");
}

void check_column_sums() {
    for (int rows : {1, 17, 1000, 2048})
        for (int cols : COLS) {
            std::vector<float> m = random_floats((size_t)rows * cols, -1, 1);
            std::vector<double> want(cols, 0.0), size(cols, 0.0);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) {
                    want[c] += m[(size_t)r * cols + c];
                    size[c] += std::fabs(m[(size_t)r * cols + c]);
                }
            device_buffer<float> dm(m), dsums(cols);
            dsums.poison();
            gpu_column_sums(stream, dm.ptr, rows, cols, dsums.ptr);
            double error = scaled_error(dsums.download(), want, size);
            CHECK(error <= 1e-6, "column_sums %dx%d: error %.3g", rows, cols, error);
        }
}

void check_sum() {
    for (size_t n : {(size_t)0, (size_t)1, (size_t)17, (size_t)1000, (size_t)60000, (size_t)1000003}) {
        std::vector<float> x = random_floats(n, 0, 3);
        double want = 0;
        for (float v : x) want += v;
        device_buffer<float> dx(x), dresult(1);
        dresult.poison();
        gpu_sum(stream, dx.ptr, n, dresult.ptr);
        float got = dresult.download()[0];
        CHECK(std::fabs(got - want) <= 1e-6 * std::fabs(want) + 1e-6, "sum of %zu: %.9g, want %.9g",
              n, got, want);
    }
}

/* One rounding per multiply-add either way, but the GPU fuses them (FMA) and the CPU does not:
 * each value within 1e-6 relative of the sum of its size and its change's, plus 1e-7 absolute
 * for values near zero. Where a sum of two terms cancels (a parameter and its update, a moment
 * and its new share) the rounding is relative to the terms, not to what is left: Adam divides
 * by sqrt(v̂), which may be small, so an update can be far larger than the parameter it leaves
 * (1.12 tolerances of the result alone on an H100, seed 1795687980470270118). */
constexpr double UPDATE_RELATIVE = 1e-6, UPDATE_ABSOLUTE = 1e-7;

/* worst_deviation for parameters updated from `before`: relative to |want| + |want − before|. */
double worst_update_deviation(const std::vector<float> &got, const std::vector<float> &want,
                              const std::vector<float> &before) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (std::isnan(got[i])) return INFINITY;
        double scale = std::fabs(want[i]) + std::fabs((double)want[i] - before[i]);
        worst = std::fmax(worst, std::fabs((double)got[i] - want[i]) /
                                     (UPDATE_ABSOLUTE + UPDATE_RELATIVE * scale));
    }
    return worst;
}

/* The update ends the step: the cursor has moved on by the step's rows and counted the update,
 * and the kernel's count of finished blocks is back at 0 for the next launch. */
void check_step_end(const device_buffer<pass_cursor> &cursor, pass_cursor want,
                    const device_buffer<unsigned> &blocks_done, const char *what, size_t n) {
    pass_cursor got = cursor.download()[0];
    CHECK(got.first_row == want.first_row && got.optimizer_steps == want.optimizer_steps,
          "%s n=%zu: cursor at (%d, %d) after the update, want (%d, %d)", what, n, got.first_row,
          got.optimizer_steps, want.first_row, want.optimizer_steps);
    CHECK(blocks_done.download()[0] == 0, "%s n=%zu: the block count was left at %u", what, n,
          blocks_done.download()[0]);
}

/* Weight decay at `rate` over two spans of n parameters: [n/5, n/3) is a gap between them, so
 * that a float4 of the update holds weights and biases for most n (SGD updates four parameters
 * a thread), and the second ends before n. */
weight_decay decay_of(float rate, size_t n) {
    weight_decay decay = {rate, 2, {0, (int64_t)n / 3}, {(int64_t)n / 5, (int64_t)(n - n / 7)}};
    return decay;
}

/* Each update, with a BF16 copy of the parameters written beside them (SGD: at both alignments;
 * the copy poisoned first) and, for Adam, without one. */
void check_optimizers_at(lr_schedule schedule, float decay_rate) {
    device_buffer<unsigned> blocks_done(std::vector<unsigned>{0});
    float sgd_lr = schedule_lr(schedule, 4), adam_lr = schedule_lr(schedule, 2); /* the cursors' steps */
    for (size_t n : {(size_t)0, (size_t)1, (size_t)1000, (size_t)203530}) {
        weight_decay decay = decay_of(decay_rate, n);
        device_buffer<weight_decay> device_decay(std::vector<weight_decay>{decay});
        const weight_decay *decaying = decay_rate != 0.0f ? device_decay.ptr : nullptr; /* NULL: none */
        std::vector<float> param = random_floats(n, -1, 1), velocity = random_floats(n, -1, 1);
        std::vector<float> m = random_floats(n, -1, 1), v = random_floats(n, 0, 1);
        std::vector<float> grad = random_floats(n, -1, 1);
        device_buffer<float> dgrad(grad);
        std::vector<float> p_sgd = param, v_sgd = velocity;
        if (decaying) cpu_decay_weights(p_sgd.data(), &decay, sgd_lr);
        cpu_sgd_momentum_step(p_sgd.data(), v_sgd.data(), grad.data(), n, sgd_lr, 0.9f);
        for (int offset : {0, 1}) { /* 1: param off 16-byte alignment, one parameter a thread */
            std::vector<float> padded(offset, 0.0f);
            padded.insert(padded.end(), param.begin(), param.end());
            device_buffer<float> dparam(padded), dvelocity(velocity);
            device_buffer<__nv_bfloat16> dcopy(padded.size());
            dcopy.poison();
            device_buffer<pass_cursor> sgd_cursor = cursor_at(7, 4);
            gpu_sgd_momentum_step(stream, dparam.ptr + offset, dvelocity.ptr, dgrad.ptr, n, schedule, 0.9f,
                                  decaying, dcopy.ptr + offset, gpu_step_end{sgd_cursor.ptr, 13, blocks_done.ptr});
            std::vector<float> got = dparam.download();
            got.erase(got.begin(), got.begin() + offset);
            std::vector<__nv_bfloat16> copy = dcopy.download();
            copy.erase(copy.begin(), copy.begin() + offset);
            double error = std::fmax(worst_update_deviation(got, p_sgd, param),
                                     worst_update_deviation(dvelocity.download(), v_sgd, velocity));
            CHECK(error <= 1 && is_bf16_copy(copy, got),
                  "sgd_momentum_step n=%zu, param offset %d, decay %g: off by %.3g tolerances, or its "
                  "BF16 copy not the parameters rounded", n, offset, decay_rate, error);
            check_step_end(sgd_cursor, {20, 5}, blocks_done, "sgd_momentum_step", n);
        }

        device_buffer<float> dparam2(param), dm(m), dv(v);
        device_buffer<__nv_bfloat16> dcopy(n);
        dcopy.poison();
        device_buffer<pass_cursor> cursor = cursor_at(0, 2); /* two updates made: this is step 3 */
        gpu_adam_step(stream, dparam2.ptr, dm.ptr, dv.ptr, dgrad.ptr, n, schedule, 0.9f, 0.999f, 1e-8f,
                      decaying, dcopy.ptr, gpu_step_end{cursor.ptr, 5, blocks_done.ptr});
        std::vector<float> p_adam = param, m_adam = m, v_adam = v;
        if (decaying) cpu_decay_weights(p_adam.data(), &decay, adam_lr);
        cpu_adam_step(p_adam.data(), m_adam.data(), v_adam.data(), grad.data(), n, adam_lr, 0.9f,
                      0.999f, 1e-8f, 3);
        double error = std::fmax(worst_update_deviation(dparam2.download(), p_adam, param),
                                 std::fmax(worst_update_deviation(dm.download(), m_adam, m),
                                           worst_update_deviation(dv.download(), v_adam, v)));
        CHECK(error <= 1 && is_bf16_copy(dcopy.download(), dparam2.download()),
              "adam_step n=%zu, decay %g: off by %.3g tolerances, or its BF16 copy not the "
              "parameters rounded", n, decay_rate, error);
        check_step_end(cursor, {5, 3}, blocks_done, "adam_step", n);
        if (n != 1000) continue;
        device_buffer<float> dparam3(param), dm3(m), dv3(v); /* and without a copy */
        device_buffer<pass_cursor> cursor3 = cursor_at(0, 2);
        gpu_adam_step(stream, dparam3.ptr, dm3.ptr, dv3.ptr, dgrad.ptr, n, schedule, 0.9f, 0.999f,
                      1e-8f, decaying, nullptr, gpu_step_end{cursor3.ptr, 5, blocks_done.ptr});
        CHECK(dparam3.download() == dparam2.download(), "adam_step n=%zu without a copy: other parameters", n);
    }
}

/* Each update at a constant rate, and on a schedule (cosine after 2 warm-up steps of 10: the
 * kernels read the rate's step from the cursor, and SGD then moves it from its last block);
 * without weight decay and with it. */
void check_optimizers() {
    const lr_schedule schedules[] = {{SCHEDULE_CONSTANT, 0.1f, 0, 0}, {SCHEDULE_COSINE, 0.1f, 2, 10}};
    for (const lr_schedule &schedule : schedules)
        for (float decay_rate : {0.0f, 0.3f}) check_optimizers_at(schedule, decay_rate);
}

std::vector<int32_t> identity_indices(int n) {
    std::vector<int32_t> v(n);
    for (int i = 0; i < n; i++) v[i] = i;
    return v;
}

/* The batch `ahead` rows past the cursor's (offset) in a pass of pass_rows samples, whose last
 * `cut` rows are past the pass's end: gathered up to it, the rest of x and y left as it was;
 * in at most max_blocks blocks (0: no cap). features 784 and 20: four pixels a thread; odd
 * ones: one a thread. */
void check_gather(int rows, int features, int ahead, int cut, unsigned max_blocks) {
    int count = 1003;
    std::vector<uint8_t> pixels((size_t)count * features), labels(count);
    for (uint8_t &p : pixels) p = (uint8_t)rng_below(&random_source, 256);
    for (uint8_t &l : labels) l = (uint8_t)rng_below(&random_source, 10);
    std::vector<int32_t> indices(rows);
    for (int32_t &i : indices) i = (int32_t)rng_below(&random_source, count);
    float scale = 1.0f / (255 * 0.3081f), shift = -0.1307f / 0.3081f;
    const int gathered = rows - cut;
    std::vector<float> x((size_t)rows * features);
    std::vector<uint8_t> y(rows);
    cpu_gather_normalize(pixels.data(), labels.data(), indices.data(), gathered, features, scale,
                         shift, x.data(), y.data());
    std::fill(y.begin() + gathered, y.end(), (uint8_t)0xFF); /* poison() below: left as it is */
    /* the batch starts at the cursor's row of the pass's order, plus ahead */
    const int offset = 3, first = offset + ahead;
    std::vector<int32_t> order(first + rows, -1);
    std::copy(indices.begin(), indices.end(), order.begin() + first);
    device_buffer<uint8_t> dpixels(pixels), dlabels(labels), dy(rows);
    device_buffer<int32_t> dorder(order), pass_rows(std::vector<int32_t>{first + gathered});
    device_buffer<pass_cursor> cursor = cursor_at(offset, 0);
    device_buffer<float> dx(x.size());
    device_buffer<__nv_bfloat16> dx16(x.size()); /* the BF16 copy, beside x... */
    device_buffer<__half> dx_tf32(x.size());     /* ...and the TF32 one, in FP16 */
    dx.poison();
    dx16.poison();
    dx_tf32.poison();
    dy.poison();
    gpu_gather_normalize(stream, {dpixels.ptr, dlabels.ptr, dorder.ptr, pass_rows.ptr, cursor.ptr, ahead},
                         rows, features, scale, shift, dx.ptr, dx16.ptr, dx_tf32.ptr, dy.ptr, max_blocks);
    std::vector<float> gpu_x = dx.download();
    const std::vector<__nv_bfloat16> gpu_x16 = dx16.download();
    const std::vector<__half> gpu_x_tf32 = dx_tf32.download();
    const size_t past_end = (size_t)gathered * features;
    bool copied = is_tf32_in_fp16_copy(gpu_x_tf32, gpu_x, past_end);
    for (size_t i = 0; i < past_end; i++)
        copied = copied && __bfloat16_as_ushort(gpu_x16[i]) == __bfloat16_as_ushort(__float2bfloat16_rn(gpu_x[i]));
    const std::vector<uint8_t> poison((x.size() - past_end) * sizeof(float), 0xFF);
    bool untouched = std::memcmp(gpu_x.data() + past_end, poison.data(), poison.size()) == 0 &&
                     std::memcmp(gpu_x16.data() + past_end, poison.data(), poison.size() / 2) == 0 &&
                     std::memcmp(gpu_x_tf32.data() + past_end, poison.data(), poison.size() / 2) == 0;
    std::fill(gpu_x.begin() + past_end, gpu_x.end(), 0.0f); /* x is 0 there */
    double error = worst_deviation(gpu_x, x, 1e-6, 1e-6);
    CHECK(error <= 1 && dy.download() == y && untouched && copied,
          "gather_normalize %d rows of %d, %d ahead, %d past the end: off by %.3g tolerances, labels "
          "differ, rows past the end written or a copy not x rounded", rows, features, ahead,
          cut, error);

    /* order == NULL: the rows as they are (a batch the host already gathered) */
    cpu_gather_normalize(pixels.data(), labels.data(), identity_indices(rows).data(), rows, features,
                         scale, shift, x.data(), y.data());
    dx.poison();
    dy.poison();
    const bool with_copy = ahead == 0; /* and the other case without one */
    gpu_gather_normalize(stream, {dpixels.ptr, dlabels.ptr, nullptr, nullptr, nullptr, 0}, rows,
                         features, scale, shift, dx.ptr, with_copy ? dx16.ptr : nullptr,
                         with_copy ? dx_tf32.ptr : nullptr, dy.ptr, max_blocks);
    gpu_x = dx.download();
    error = worst_deviation(gpu_x, x, 1e-6, 1e-6);
    const bool copies = !with_copy || (is_bf16_copy(dx16.download(), gpu_x) &&
                                       is_tf32_in_fp16_copy(dx_tf32.download(), gpu_x, gpu_x.size()));
    CHECK(error <= 1 && dy.download() == y && copies,
          "gather_normalize %d rows of %d without an order: off by %.3g, labels differ or a copy "
          "not x rounded", rows, features, error);
}


/* Everything but the GEMMs and the output layer. */
void check_other_ops() {
    check_bias_activation();
    check_relu_backward();
    for (int rows : ROWS)
        for (int classes : {3, 10, 37})
            for (float smoothing : {0.0f, 0.1f}) check_softmax(rows, classes, 5.0f, smoothing);
    check_softmax(1000, 10, 50.0f, 0.0f);
    check_softmax(1000, 10, 50.0f, 0.3f);
    check_softmax_without_outputs();
    check_softmax_extremes();
    check_column_sums();
    check_sum();
    check_optimizers();
    for (int rows : ROWS)
        for (int features : {1, 17, 20, 784}) {
            check_gather(rows, features, 0, 0, 0);
            /* a batch gathered ahead, at the pass's end, in few blocks (each thread many rows) */
            check_gather(rows, features, 17, rows / 3, 3);
        }
}

/* The test in parts, which MLP_TEST_PART picks one of (compute-sanitizer's racecheck is slow:
 * tools/device_run.sh runs the parts side by side); unset or "all": every part. */
const struct {
    const char *name;
    void (*check)();
} PARTS[] = {{"gemm_tiled", [] { check_gemms(FAMILY_TILED); }},
             {"gemm_blocked", [] { check_gemms(FAMILY_BLOCKED); }},
             {"gemm_others", [] { check_gemms(FAMILY_OTHERS); }},
             {"gemm_epilogue", check_gemm_epilogues},
             {"output_layer", check_output_layers},
             {"other", check_other_ops}};

/* False if `part` names none of PARTS (nor "all"). */
bool check_parts(const char *part) {
    bool all = !part || std::strcmp(part, "all") == 0, found = all;
    for (const auto &p : PARTS)
        if (all || std::strcmp(part, p.name) == 0) {
            p.check();
            found = true;
        }
    return found;
}

} // namespace

int main() {
    random_source = rng_create(gpu_test_start("test_gpu_ops"), 0);
    CUDA_CHECK(cudaStreamCreate(&stream));
    cublas = cublas_gemm_handle(stream);
    workspace = {nullptr, GPU_GEMM_WORKSPACE_FLOATS};
    CUDA_CHECK(cudaMalloc(&workspace.data, workspace.floats * sizeof(float)));
    softmax_scratch = gpu_softmax_scratch_create();
    const char *part = std::getenv("MLP_TEST_PART");
    CHECK(check_parts(part), "MLP_TEST_PART=%s: no such part (gemm_tiled, gemm_blocked, gemm_others, "
                             "gemm_epilogue, output_layer, other, all)",
          part);
    cublas_gemm_handle_destroy(cublas);
    CUDA_CHECK(cudaFree(workspace.data));
    gpu_softmax_scratch_destroy(softmax_scratch);
    CUDA_CHECK(cudaStreamDestroy(stream));
    return test_exit_status("test_gpu_ops");
}
