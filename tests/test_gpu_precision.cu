/* The GPU implementations' GEMMs in TF32 and BF16 (--precision), called through the backend's
 * table as the model calls them (the epilogues included): against reference_gemm in double, on
 * fresh random inputs, odd shapes (1, 17, 1000), all four transposes, row strides wider than the
 * rows, beta = 0 with C poisoned with NaN first (an element left unwritten fails) and beta != 0.
 * Exits 77 (skipped) where there is no GPU.
 *
 * The bound, per element, is relative to the size of the terms behind it (sum of |alpha·a·b|,
 * plus |beta·c| and |bias|), so that cancellation cannot make a correct result look wrong and K
 * needs no factor of its own: rounding both factors of a product to TF32 (10 mantissa bits, by
 * truncation in the wgmma rung) errs by at most 2^-9 of it, to BF16 (7 bits) by 2^-7 rounded to
 * nearest, 2^-6 truncated (cuBLAS's conversion is not documented), and FP32 sums of K terms add
 * at most K·2^-24. The bounds are twice the rounding terms, as in test_gpu_gemm_ladder.cu. A
 * transposed, shifted or missing product errs by about the whole size of the terms.
 *
 * And the other way: the tiled kernels must show the rounding (an RMS error well above FP32's),
 * so that a backend silently multiplying in FP32 fails too. cuBLAS is not held to that: its
 * FAST compute types allow reduced precision and do not promise it. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/gpu_backend.h"
#include "gpu_test.h"
#include "cpu/cpu_gemm.h"
#include "core/rng.h"

namespace {

rng random_source;

constexpr double TF32_BOUND = 0x1p-8;  /* twice 2^-9 */
constexpr double BF16_BOUND = 0x1p-5;  /* twice 2^-6 */
/* RMS error relative to the terms' size that FP32 stays far below (~1e-8 at these K) and
 * TF32 rounding far above (~1e-5 at K = 1000, more for smaller K) */
constexpr double ROUNDING_VISIBLE = 1e-6;

struct gemm_case {
    int m, n, k;
    int pad; /* extra columns in each row stride */
};

enum epilogue_kind { NO_EPILOGUE, BIAS_RELU, BIAS_ONLY, RELU_MASK, EPILOGUE_KINDS };

std::vector<float> random_floats(size_t n) {
    std::vector<float> v(n);
    for (float &x : v) x = rng_uniform_range(&random_source, -1, 1);
    return v;
}

/* A device copy of host, allocated and filled through the backend (its stream, its waits). */
float *to_device(backend *be, const std::vector<float> &host) {
    float *p = static_cast<float *>(be->alloc(be, host.size() * sizeof(float)));
    be->upload(be, p, host.data(), host.size() * sizeof(float));
    return p;
}

struct outcome {
    double worst;     /* largest |got − want| / (bound · size): at most 1 passes */
    double rms;       /* RMS of |got − want| / size */
    bool outside_ok;  /* C's padding columns untouched */
};

outcome run_case(backend *be, bool ta, bool tb, const gemm_case &g, bool accumulate,
                 epilogue_kind kind, double bound) {
    int a_rows = ta ? g.k : g.m, a_cols = ta ? g.m : g.k;
    int b_rows = tb ? g.n : g.k, b_cols = tb ? g.k : g.n;
    int lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
    float alpha = accumulate ? 0.5f : 1.0f, beta = accumulate ? -1.5f : 0.0f;
    std::vector<float> a = random_floats((size_t)a_rows * lda), b = random_floats((size_t)b_rows * ldb);
    std::vector<float> c = random_floats((size_t)g.m * ldc), bias = random_floats(g.n);
    std::vector<float> mask = random_floats((size_t)g.m * ldc);
    std::vector<double> want((size_t)g.m * ldc), size((size_t)g.m * ldc);
    std::vector<float> abs_a = a, abs_b = b, abs_c = c;
    for (float &x : abs_a) x = std::fabs(x);
    for (float &x : abs_b) x = std::fabs(x);
    for (float &x : abs_c) x = std::fabs(x);
    reference_gemm(ta, tb, g.m, g.n, g.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
                   want.data());
    reference_gemm(ta, tb, g.m, g.n, g.k, std::fabs(alpha), abs_a.data(), lda, abs_b.data(), ldb,
                   std::fabs(beta), abs_c.data(), ldc, size.data());
    for (int r = 0; r < g.m; r++)
        for (int col = 0; col < g.n; col++) {
            size_t i = (size_t)r * ldc + col;
            if (kind == BIAS_RELU || kind == BIAS_ONLY) want[i] += bias[col], size[i] += std::fabs(bias[col]);
            if (kind == BIAS_RELU) want[i] = std::fmax(want[i], 0.0);
            if (kind == RELU_MASK && mask[i] <= 0) want[i] = 0.0;
        }

    /* beta == 0: C is write-only, so its elements start as NaN; padding columns hold a marker */
    constexpr float PADDING = 12345.0f;
    std::vector<float> c_start = c;
    for (int r = 0; r < g.m; r++)
        for (int col = 0; col < ldc; col++)
            if (col >= g.n) c_start[(size_t)r * ldc + col] = PADDING;
            else if (!accumulate) c_start[(size_t)r * ldc + col] = NAN;
    float *da = to_device(be, a), *db = to_device(be, b), *dc = to_device(be, c_start);
    float *dbias = to_device(be, bias), *dmask = to_device(be, mask);
    gemm_epilogue epilogue{};
    if (kind == BIAS_RELU || kind == BIAS_ONLY) epilogue.bias = dbias;
    epilogue.relu = kind == BIAS_RELU;
    if (kind == RELU_MASK) epilogue.relu_mask = dmask;
    be->gemm(be, ta, tb, g.m, g.n, g.k, alpha, da, lda, db, ldb, beta, dc, ldc,
             kind == NO_EPILOGUE ? nullptr : &epilogue);
    std::vector<float> got(c.size());
    be->download(be, got.data(), dc, got.size() * sizeof(float));
    for (float *p : {da, db, dc, dbias, dmask}) be->release(be, p);

    double element_bound = bound + 2.0 * (g.k + 2) * 0x1p-24;
    outcome o{0.0, 0.0, true};
    double squares = 0.0;
    for (int r = 0; r < g.m; r++)
        for (int col = 0; col < ldc; col++) {
            size_t i = (size_t)r * ldc + col;
            if (col >= g.n) {
                o.outside_ok = o.outside_ok && got[i] == PADDING;
                continue;
            }
            double error = std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want[i]);
            o.worst = std::fmax(o.worst, error / (element_bound * size[i] + 1e-30));
            double relative = size[i] > 0 ? error / size[i] : error;
            squares += relative * relative;
        }
    o.rms = std::sqrt(squares / ((double)g.m * g.n));
    return o;
}

void check_backend(const char *impl, gemm_precision precision) {
    const gemm_case cases[] = {
        {1, 1, 1, 0},      {17, 17, 17, 0},   {1000, 17, 1, 0},  {1, 1000, 17, 0},
        {17, 1, 1000, 0},  {1000, 10, 256, 0}, {64, 256, 784, 0}, {256, 10, 1000, 0},
        {17, 33, 65, 3},   {130, 66, 34, 1},  {1000, 1000, 17, 2},
    };
    backend *be = gpu_backend_create(impl, 0, precision);
    const char *name = gemm_precision_name(precision);
    CHECK(be && be->precision == precision, "gpu_backend_create(%s, %s) failed", impl, name);
    if (!be) return;
    double bound = precision == PRECISION_TF32 ? TF32_BOUND : BF16_BOUND;
    bool tensor_cores_promised = std::strcmp(impl, "blas") != 0;
    for (const gemm_case &g : cases)
        for (int t = 0; t < 4; t++)
            for (int kind = 0; kind < EPILOGUE_KINDS; kind++)
                for (bool accumulate : {false, true}) {
                    if (accumulate && kind != NO_EPILOGUE) continue; /* the model's calls: beta 0 */
                    bool ta = t & 1, tb = t & 2;
                    outcome o = run_case(be, ta, tb, g, accumulate, (epilogue_kind)kind, bound);
                    CHECK(o.worst <= 1.0 && o.outside_ok,
                          "%s %s %c%c %dx%dx%d pad %d, epilogue %d, %s: error %.3g of the bound%s",
                          impl, name, ta ? 'T' : 'N', tb ? 'T' : 'N', g.m, g.n, g.k, g.pad, kind,
                          accumulate ? "beta=-1.5" : "beta=0", o.worst,
                          o.outside_ok ? "" : ", wrote outside C");
                    /* a lone product can round by next to nothing: judged over 17 or more */
                    if (tensor_cores_promised && kind == NO_EPILOGUE && g.m * g.n >= 17)
                        CHECK(o.rms > ROUNDING_VISIBLE,
                              "%s %s %c%c %dx%dx%d: RMS error %.3g, as small as FP32's: the "
                              "products were not rounded to %s",
                              impl, name, ta ? 'T' : 'N', tb ? 'T' : 'N', g.m, g.n, g.k, o.rms, name);
                }
    be->destroy(be);
}

} // namespace

int main() {
    random_source = rng_create(gpu_test_start("test_gpu_precision"), 0);
    for (const char *impl : {"tiled", "blas", "fused"})
        for (gemm_precision p : {PRECISION_TF32, PRECISION_BF16}) check_backend(impl, p);
    /* the naive kernels have no tensor-core path: asked for one, there is no backend */
    for (gemm_precision p : {PRECISION_TF32, PRECISION_BF16}) {
        backend *be = gpu_backend_create("naive", 0, p);
        CHECK(be == nullptr, "gpu naive in %s: created, but it multiplies in FP32 only",
              gemm_precision_name(p));
        if (be) be->destroy(be);
    }
    return test_exit_status("test_gpu_precision");
}
