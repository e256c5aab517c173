/* The GEMM ladder (cuda/gemm/gemm_ladder.h, as bench/gemm_rungs.h lists it) against the double-precision CPU reference
 * (reference_gemm): fresh random inputs, odd shapes (1, 17, 1000, not multiples of any tile),
 * all four transposes, alpha and beta with and without reading C, row strides with padding and
 * matrices shifted off 16-byte alignment (the rungs' element-by-element paths), NaN around A
 * and B (a read outside them poisons the result), C poisoned with NaN before each launch and
 * its padding checked after. The rungs that pick a tile and K slices by size are also run with
 * each plan forced, so every kernel meets every shape.
 *
 * The tensor-core rungs round A and B (to TF32 inside the kernel: to nearest with ties away
 * from zero with mma.sync, truncated with wgmma; to BF16 before it, ties to even). Each result is held to two references: the
 * product of the inputs rounded the same way, within the FP32 bound (all that is left is FP32
 * summation, so a wrong index or a lost K step shows), and the product of the FP32 inputs,
 * within the bound of the precision (mlp_bench's bounds). Errors are per element, against the
 * size of the terms: |got − want| / (|alpha|·Σ|a·b| + |beta·c|).
 *
 * MLP_TEST_SHAPES=small skips the large shapes, =tiny all but the smallest and beta = 0 only
 * (for the compute-sanitizer tools, which are slow); MLP_TEST_RUNGS=TEXT runs only the rungs whose name
 * contains TEXT. Exits 77 (skipped) where there is no GPU. */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "libs/cuda_check.h"
#include "cuda/gpu_backend.h"
#include "gpu_test.h"
#include "cpu/cpu_gemm.h"
#include "device_buffer.cuh"
#include "cuda/gemm/gemm_ladder.h"
#include "bench/gemm_rungs.h"
#include "core/rng.h"
#include "util/tf32.h" /* round_tf32 */

namespace {

rng random_source;
cudaStream_t stream;
gpu_gemm_workspace workspace;

using bf16 = __nv_bfloat16;

/* ---- how a rung rounds its inputs, and the bounds ---- */

enum rounding { AS_IS, TF32, TF32_TRUNCATED, BF16, ROUNDINGS };
const char *const ROUNDING_NAMES[] = {"fp32", "tf32", "tf32 (truncated)", "bf16"};

/* Against the reference of the inputs rounded as the rung rounds them: FP32 summation of up
 * to ~4000 random-signed terms stays near 1e-7 of their size. */
constexpr double SUMMATION_BOUND = 1e-5;
/* Against the reference of the FP32 inputs: rounding both factors of a product to a p-bit
 * mantissa moves it by at most 2·2^-p of its size; twice that (as mlp_bench). */
const double PRECISION_BOUND[] = {1e-5, 4e-3, 4e-3, 1.6e-2};

/* To TF32 as the tensor cores read FP32 bits from shared memory: the low 13 bits dropped. */
float truncate_tf32(float x) {
    if (!std::isfinite(x)) return x;
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits &= 0xFFFFE000u;
    std::memcpy(&x, &bits, sizeof bits);
    return x;
}

float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

std::vector<float> rounded(std::vector<float> v, rounding how) {
    if (how == TF32) std::transform(v.begin(), v.end(), v.begin(), round_tf32);
    if (how == TF32_TRUNCATED) std::transform(v.begin(), v.end(), v.begin(), truncate_tf32);
    if (how == BF16) std::transform(v.begin(), v.end(), v.begin(), round_bf16);
    return v;
}

/* ---- problems ---- */

constexpr float C_PADDING = 12345.0f; /* in C's padding columns and guard: must survive */
constexpr int GUARD = 64;             /* floats after each matrix */

struct gemm_case {
    int m, n, k;
    int pad;    /* extra columns in each row stride */
    int offset; /* elements to shift each matrix's start by: 1 breaks 16-byte alignment */
};

/* A random value from (-1, 1), at least 2^-13 in magnitude: its TF32 rounding is then an FP16
 * value, as tiled_tf32_fp16_a's contract asks of A. */
float random_element() {
    const float x = rng_uniform_range(&random_source, -1, 1);
    return std::fabs(x) < 0x1p-13f ? std::copysign(0x1p-13f, x) : x;
}

/* A stored matrix with `offset` elements before it and GUARD after, all `fill`, as are the
 * padding columns; the matrix itself gets random values. */
std::vector<float> padded_matrix(int rows, int cols, int ld, int offset, float fill) {
    std::vector<float> v(offset + (size_t)rows * ld + GUARD, fill);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) v[offset + (size_t)r * ld + c] = random_element();
    return v;
}

/* reference_gemm (single-threaded by design) on blocks of rows, one thread per block. */
void reference(bool ta, bool tb, int m, int n, int k, double alpha, const float *a, int lda,
               const float *b, int ldb, double beta, const float *c, int ldc, double *out) {
    const int threads = (int)std::max(1u, std::thread::hardware_concurrency());
    const int rows = (m + threads - 1) / threads;
    std::vector<std::thread> pool;
    for (int i0 = 0; i0 < m; i0 += rows)
        pool.emplace_back([=] {
            const float *a_rows = ta ? a + i0 : a + (size_t)i0 * lda; /* op(A)'s rows i0... */
            reference_gemm(ta, tb, std::min(rows, m - i0), n, k, alpha, a_rows, lda, b, ldb, beta,
                           c + (size_t)i0 * ldc, ldc, out + (size_t)i0 * ldc);
        });
    for (std::thread &t : pool) t.join();
}

/* One GEMM problem: the inputs as stored (padding, offset and guards included), the
 * reference for each rounding of A and B, and the size of the terms behind each element. */
struct gemm_problem {
    bool ta, tb, accumulate;
    gemm_case g;
    int lda, ldb, ldc;
    float alpha, beta;
    std::vector<float> a, b, c;
    std::vector<double> want[ROUNDINGS], scale;
};

gemm_problem make_problem(bool ta, bool tb, const gemm_case &g, bool accumulate) {
    gemm_problem p{ta, tb, accumulate, g};
    const int a_rows = ta ? g.k : g.m, a_cols = ta ? g.m : g.k;
    const int b_rows = tb ? g.n : g.k, b_cols = tb ? g.k : g.n;
    p.lda = a_cols + g.pad, p.ldb = b_cols + g.pad, p.ldc = g.n + g.pad;
    p.a = padded_matrix(a_rows, a_cols, p.lda, g.offset, NAN);
    p.b = padded_matrix(b_rows, b_cols, p.ldb, g.offset, NAN);
    p.c = padded_matrix(g.m, g.n, p.ldc, g.offset, C_PADDING);
    p.alpha = accumulate ? 0.5f : 1.0f, p.beta = accumulate ? -1.5f : 0.0f;
    const size_t out = (size_t)g.m * p.ldc;
    const float *c = p.c.data() + g.offset;
    for (int r = 0; r < ROUNDINGS; r++) {
        std::vector<float> a = rounded(p.a, rounding(r)), b = rounded(p.b, rounding(r));
        p.want[r].resize(out);
        reference(ta, tb, g.m, g.n, g.k, p.alpha, a.data() + g.offset, p.lda, b.data() + g.offset,
                  p.ldb, p.beta, c, p.ldc, p.want[r].data());
    }
    std::vector<float> abs_a = p.a, abs_b = p.b, abs_c = p.c;
    for (std::vector<float> *v : {&abs_a, &abs_b, &abs_c})
        for (float &x : *v) x = std::fabs(x);
    p.scale.resize(out);
    reference(ta, tb, g.m, g.n, g.k, std::fabs(p.alpha), abs_a.data() + g.offset, p.lda,
              abs_b.data() + g.offset, p.ldb, std::fabs(p.beta), abs_c.data() + g.offset, p.ldc,
              p.scale.data());
    return p;
}

std::vector<bf16> to_bf16(const std::vector<float> &v) {
    std::vector<bf16> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](float x) { return __float2bfloat16_rn(x); });
    return out;
}

/* v rounded to TF32, held as FP16 (exactly, for random_element's values). */
std::vector<__half> to_tf32_in_fp16(const std::vector<float> &v) {
    std::vector<__half> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](float x) { return __float2half_rn(round_tf32(x)); });
    return out;
}

/* A problem's operands on the device: as FP32, and as the 16-bit copies some rungs read. */
struct device_operands {
    device_buffer<float> a, b;
    device_buffer<bf16> a_bf16, b_bf16;
    device_buffer<__half> a_fp16;
    explicit device_operands(const gemm_problem &p)
        : a(p.a), b(p.b), a_bf16(to_bf16(p.a)), b_bf16(to_bf16(p.b)), a_fp16(to_tf32_in_fp16(p.a)) {}
};

/* ---- the rungs (bench/gemm_rungs.h), each with plans forced ---- */

/* The plans forced on a rung besides its own choice: block tile rows × cols (0: its own) and K
 * slices (0: its own). Split-K slices are at least 32 (tiled) or 64 (tensor cores) deep, so
 * small K gets fewer slices than asked for, and K = 65 two uneven ones. The tiled rung sums its
 * slices in a cluster of at most 8 blocks: asked for 12, it makes 8. */
struct plan {
    const char *rung;
    int rows, cols, splits;
};
const plan PLANS[] = {
    {"tiled", 32, 32, 3},   {"tiled", 64, 64, 1},    {"tiled", 128, 128, 1}, {"tiled", 64, 64, 5},
    {"tiled", 64, 64, 8},   {"tiled", 32, 32, 12},   {"tiled", 128, 128, 3}, {"tiled", 128, 256, 1},
    {"tiled", 128, 256, 3}, {"tiled", 64, 128, 1},   {"tiled", 64, 128, 8},  {"tf32_mma", 0, 0, 1},
    {"tf32_mma", 0, 0, 3},  {"tf32_wgmma", 0, 0, 1}, {"tf32_wgmma", 0, 0, 3}, {"bf16_mma", 0, 0, 1},
    {"bf16_mma", 0, 0, 4},  {"bf16_wgmma", 0, 0, 1}, {"bf16_wgmma", 0, 0, 4},
    {"tiled_tf32", 32, 32, 3}, {"tiled_tf32", 64, 64, 1}, {"tiled_tf32", 64, 64, 5},
    {"tiled_tf32", 128, 128, 1}, {"tiled_tf32", 128, 128, 3}, {"tiled_bf16", 32, 32, 12},
    {"tiled_bf16", 64, 64, 8}, {"tiled_bf16", 128, 128, 1}, {"tiled_bf16_stored", 32, 32, 12},
    {"tiled_bf16_stored", 64, 64, 8}, {"tiled_bf16_stored", 128, 128, 1},
    {"tiled_tf32_fp16_a", 32, 32, 3}, {"tiled_tf32_fp16_a", 64, 64, 5},
    {"tiled_tf32_fp16_a", 128, 128, 1}, {"tiled_tf32_fp16_a", 128, 128, 3},
};

/* A rung that must give another's bits, with the same plan: tiled_bf16_stored on BF16 copies
 * (rounded to nearest even) of the FP32 operands that tiled_bf16 rounds as it reads them, and
 * tiled_tf32_fp16_a on FP16 copies of A's TF32 values, which tiled_tf32 rounds as it reads. */
struct twin {
    const char *rung, *same_bits_as;
};
const twin TWINS[] = {{"tiled_bf16_stored", "tiled_bf16"}, {"tiled_tf32_fp16_a", "tiled_tf32"}};

const gpu_gemm_rung *rung_named(const char *name) {
    for (int i = 0; i < GPU_GEMM_RUNG_COUNT; i++)
        if (std::strcmp(GPU_GEMM_RUNGS[i].name, name) == 0) return &GPU_GEMM_RUNGS[i];
    return nullptr;
}

/* A rung with one plan: what check_rung runs. */
struct variant {
    const gpu_gemm_rung *rung;
    plan forced;
    rounding inputs;
    char name[64];
};

rounding inputs_of(const gpu_gemm_rung &r) {
    if (r.precision == PRECISION_BF16) return BF16;
    if (r.precision == PRECISION_TF32) return r.truncates_tf32 ? TF32_TRUNCATED : TF32;
    return AS_IS;
}

/* The ladder past rung 3 (rungs 1 to 3 are tested with their epilogues in test_gpu_ops.cu),
 * each with its plans and then its own choice ("auto"). */
std::vector<variant> variants() {
    std::vector<variant> out;
    for (int i = 0; i < GPU_GEMM_RUNG_COUNT; i++) {
        const gpu_gemm_rung &r = GPU_GEMM_RUNGS[i];
        if (r.rung < 4) continue;
        std::vector<plan> plans;
        for (const plan &p : PLANS)
            if (std::strcmp(p.rung, r.name) == 0) plans.push_back(p);
        plans.push_back({r.name, 0, 0, 0});
        for (const plan &p : plans) {
            variant v{&r, p, inputs_of(r), ""};
            if (p.rows)
                std::snprintf(v.name, sizeof v.name, "%s(%dx%d, %d K slices)", r.name, p.rows, p.cols, p.splits);
            else if (p.splits)
                std::snprintf(v.name, sizeof v.name, "%s(%d K slices)", r.name, p.splits);
            else
                std::snprintf(v.name, sizeof v.name, "%s(auto)", r.name);
            out.push_back(v);
        }
    }
    return out;
}

/* Largest |got − want| / scale over C's elements; infinite for a NaN (an unwritten element). */
double worst_error(const std::vector<float> &got, const std::vector<double> &want,
                   const std::vector<double> &scale, const gemm_problem &p) {
    double worst = 0;
    for (int r = 0; r < p.g.m; r++)
        for (int col = 0; col < p.g.n; col++) {
            const size_t at = (size_t)r * p.ldc + col;
            const float value = got[p.g.offset + at];
            if (std::isnan(value)) return INFINITY;
            const double size = scale[at] > 0 ? scale[at] : 1.0;
            worst = std::max(worst, std::fabs(value - want[at]) / size);
        }
    return worst;
}

/* Whether everything in C's buffer outside the M×N matrix still holds C_PADDING. */
bool outside_intact(const std::vector<float> &got, const gemm_problem &p) {
    for (size_t i = 0; i < got.size(); i++) {
        const long inside = (long)i - p.g.offset;
        const bool in_matrix = inside >= 0 && inside / p.ldc < p.g.m && inside % p.ldc < p.g.n;
        if (!in_matrix && got[i] != C_PADDING) return false;
    }
    return true;
}

/* C after one launch of `rung` with the plan `forced`, C poisoned first where beta is 0. */
std::vector<float> run_rung(const gpu_gemm_rung &rung, const plan &forced, const gemm_problem &p,
                            const device_operands &d) {
    const gemm_case &g = p.g;
    device_buffer<float> dc(p.c);
    if (!p.accumulate) { /* beta == 0: C is write-only, so poison it (but keep padding and guard) */
        std::vector<float> poisoned = p.c;
        for (int row = 0; row < g.m; row++)
            for (int col = 0; col < g.n; col++) poisoned[g.offset + (size_t)row * p.ldc + col] = NAN;
        dc.upload(poisoned);
    }
    gpu_gemm_call x = {};
    x.stream = stream, x.workspace = workspace.data, x.workspace_floats = workspace.floats;
    x.trans_a = p.ta, x.trans_b = p.tb, x.m = g.m, x.n = g.n, x.k = g.k;
    x.alpha = p.alpha, x.beta = p.beta;
    x.a = d.a.ptr + g.offset, x.b = d.b.ptr + g.offset, x.lda = p.lda, x.ldb = p.ldb;
    x.a_bf16 = d.a_bf16.ptr + g.offset, x.b_bf16 = d.b_bf16.ptr + g.offset;
    x.a_fp16 = d.a_fp16.ptr + g.offset;
    x.c = dc.ptr + g.offset, x.ldc = p.ldc;
    x.plan_rows = forced.rows, x.plan_cols = forced.cols, x.plan_splits = forced.splits;
    rung.launch(&x);
    CUDA_CHECK_LAUNCH();
    return dc.download();
}

void check_rung(const variant &r, const gemm_problem &p, const device_operands &d) {
    const gemm_case &g = p.g;
    const std::vector<float> got = run_rung(*r.rung, r.forced, p, d);
    for (const twin &t : TWINS) {
        if (std::strcmp(t.rung, r.rung->name) != 0) continue;
        const std::vector<float> other = run_rung(*rung_named(t.same_bits_as), r.forced, p, d);
        CHECK(std::memcmp(got.data(), other.data(), got.size() * sizeof(float)) == 0,
              "%s %c%c %dx%dx%d pad %d offset %d %s: not the bits of %s", r.name, p.ta ? 'T' : 'N',
              p.tb ? 'T' : 'N', g.m, g.n, g.k, g.pad, g.offset, p.accumulate ? "beta=-1.5" : "beta=0",
              t.same_bits_as);
    }
    const double summation = worst_error(got, p.want[r.inputs], p.scale, p);
    const double total = worst_error(got, p.want[AS_IS], p.scale, p);
    const bool intact = outside_intact(got, p);
    CHECK(summation <= SUMMATION_BOUND && total <= PRECISION_BOUND[r.inputs] && intact,
          "%s %c%c %dx%dx%d pad %d offset %d %s: error %.3g against the %s-rounded inputs (bound "
          "%.0e), %.3g against FP32 (bound %.0e)%s",
          r.name, p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', g.m, g.n, g.k, g.pad, g.offset,
          p.accumulate ? "beta=-1.5" : "beta=0", summation, ROUNDING_NAMES[r.inputs],
          SUMMATION_BOUND, total, PRECISION_BOUND[r.inputs], intact ? "" : ", wrote outside C");
}

void check_ladder(bool hopper) {
    const gemm_case cases[] = {
        {1, 1, 1, 0, 0},       {2, 3, 4, 0, 0},        {17, 33, 65, 0, 0},     {1000, 3, 7, 0, 0},
        {7, 1000, 3, 0, 0},    {64, 784, 256, 0, 0},   {129, 257, 513, 0, 0},  {512, 256, 784, 0, 0},
        {784, 256, 512, 0, 0}, {512, 10, 256, 0, 0},   {16, 256, 784, 0, 0},   {2048, 1152, 64, 0, 0},
        {100, 200, 300, 1, 0}, {64, 64, 64, 3, 0},     {130, 66, 34, 0, 1},    {1000, 1000, 1000, 0, 0},
        /* strides that keep 16-byte (FP32) or not (BF16) alignment around widths that are not */
        {17, 17, 17, 3, 0},    {18, 22, 26, 2, 0},     {150, 138, 142, 2, 0},  {1001, 999, 9, 0, 0},
        {257, 129, 100, 4, 0}, {31, 127, 129, 8, 0},
        /* long K over a small output: what split-K is for; and the 128×128 tiles chosen by size */
        {10, 7, 4099, 0, 0},   {33, 65, 2001, 1, 1},   {1537, 1543, 97, 0, 0},
        {784, 256, 2048, 0, 0}, /* layer 1's weight gradient at batch 2048: BF16's deep tile */
        /* TF32 wgmma: operands laid out K-major in the workspace (alone; beside 3 K slices'
         * partial sums) */
        {1030, 1100, 4, 1, 0}, {1100, 1030, 300, 3, 1},
        /* TMA (rung 11): row strides 16-byte aligned in BF16 and FP32 in all four layouts, the
         * edges of the 128×256 tile and of a K step inside, or K shorter than one step */
        {136, 264, 72, 0, 0},  {8, 16, 24, 0, 0},
    };
    const char *shapes = std::getenv("MLP_TEST_SHAPES");
    const long max_volume = !shapes                          ? LONG_MAX
                            : std::strcmp(shapes, "small") == 0 ? 5000000L
                            : std::strcmp(shapes, "tiny") == 0  ? 300000L
                                                                : LONG_MAX;
    const char *only = std::getenv("MLP_TEST_RUNGS");
    const bool tiny = shapes && std::strcmp(shapes, "tiny") == 0; /* racecheck: beta = 0 only */
    const std::vector<variant> ladder = variants();
    for (const gemm_case &g : cases) {
        if ((long)g.m * g.n * g.k > max_volume) continue;
        for (int t = 0; t < 4; t++)
            for (bool accumulate : {false, true}) {
                if (tiny && accumulate) continue;
                const gemm_problem p = make_problem(t & 1, t & 2, g, accumulate);
                const device_operands d(p);
                for (const variant &v : ladder)
                    if ((hopper || !v.rung->hopper_only) && (!only || std::strstr(v.name, only)))
                        check_rung(v, p, d);
            }
    }
}

} // namespace

int main() {
    random_source = rng_create(gpu_test_start("test_gpu_gemm_ladder"), 0);
    CUDA_CHECK(cudaStreamCreate(&stream));
    workspace = {nullptr, GPU_GEMM_WORKSPACE_FLOATS};
    CUDA_CHECK(cudaMalloc(&workspace.data, workspace.floats * sizeof(float)));
    const bool hopper = gpu_gemm_wgmma_available();
    if (!hopper) std::printf("test_gpu_gemm_ladder: not a Hopper GPU: the wgmma rungs skipped\n");
    check_ladder(hopper);
    CUDA_CHECK(cudaFree(workspace.data));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return test_exit_status("test_gpu_gemm_ladder");
}
