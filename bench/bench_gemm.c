/* mlp_bench gemm: C = A·B (alpha 1, beta 0, dense row-major, with or without the transposes),
 * by every GEMM of the project: naive, tiled and OpenBLAS on the CPU; on the GPU the ladder of
 * cuda/kernels/ (naive, the textbook shared-memory tiles, the register-blocked tiles, warp
 * tiles, the cp.async pipeline) and cuBLAS in FP32 (no TF32), then the tensor-core rungs next to
 * cuBLAS in their own precision: TF32 (FP32 operands rounded to TF32 inside) and BF16 (A and B
 * rounded to BF16 once, outside the timing; FP32 accumulate), each with mma.sync and, on
 * Hopper, wgmma. vs_blas compares each with the
 * library in the same precision: blas, blas_tf32 or blas_bf16.
 *
 * Verification, before any timing: each implementation's C (NaN beforehand, so an unwritten
 * element fails) is compared with double-precision values. Small cases (M·N·K up to 256³)
 * compare every element against reference_gemm; larger ones a random sample of SAMPLES
 * elements (and the first and last), each a dot product in double on the host. The error of an
 * element is |c − exact| / Σ_p |a_ip|·|b_pj|: measured against the size of the terms, so that
 * cancellation cannot make a correct FP32 result look wrong. FP32 rounding gives about 1e-7 on
 * that scale (random-signed terms); the bound is 1e-5, while a wrong index or a missed edge
 * gives 1e-2 or more. The reference is the exact product of the FP32 inputs for every
 * precision; rounding both factors of each product to a p-bit mantissa moves it by up to
 * 2·2^-p of its size, so the bounds are twice that: TF32 (p = 10 when truncated, as tf32_wgmma
 * and perhaps cuBLAS do; 11 rounded to nearest) 4e-3,
 * BF16 (p = 8 counting the implicit bit, rounded to nearest) 1.6e-2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "util/host_memory.h"
#include "cpu/cpu_gemm.h"
#include "bench/gpu_bench.h"
#include "libs/openblas_gemm.h"
#include "core/rng.h"

#define FULL_CHECK_MAX_VOLUME (1L << 24) /* M·N·K: every element compared */
#define FULL_CHECK_MAX_OUTPUT (1L << 20) /* M·N: every element compared */
#define SAMPLES 256
#define MAX_SHAPES (3 * BENCH_MAX_LIST)

typedef void cpu_gemm_fn(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

/* Per precision (gemm_precision): the library row vs_library compares with, and the
 * verification bound. */
static const struct {
    const char *library;
    double bound;
} PRECISIONS[] = {
    [PRECISION_FP32] = {"blas", 1e-5},
    [PRECISION_TF32] = {"blas_tf32", 4e-3},
    [PRECISION_BF16] = {"blas_bf16", 1.6e-2},
};

/* A row of the table: a CPU implementation, or a GPU one from the registry (gemm_rungs.h). */
typedef struct {
    const char *device;
    const char *name;
    cpu_gemm_fn *cpu;           /* CPU implementations */
    const gpu_gemm_rung *gpu;   /* GPU implementations */
    gemm_precision precision;
} gemm_impl;

static const gemm_impl CPU_GEMM_IMPLS[] = {
    {"cpu", "naive", cpu_gemm_naive, NULL, PRECISION_FP32},
    {"cpu", "tiled", cpu_gemm_tiled, NULL, PRECISION_FP32},
    {"cpu", "blas", cpu_gemm_blas, NULL, PRECISION_FP32},
};
enum { CPU_GEMM_IMPL_COUNT = sizeof CPU_GEMM_IMPLS / sizeof CPU_GEMM_IMPLS[0] };

/* The i-th row of the table: the CPU's, then the GPU's in the registry's order. */
static int gemm_impl_count(void) {
#ifdef MLP_HAVE_CUDA
    return CPU_GEMM_IMPL_COUNT + GPU_GEMM_RUNG_COUNT;
#else
    return CPU_GEMM_IMPL_COUNT;
#endif
}

static gemm_impl gemm_impl_at(int i) {
    if (i < CPU_GEMM_IMPL_COUNT) return CPU_GEMM_IMPLS[i];
#ifdef MLP_HAVE_CUDA
    const gpu_gemm_rung *rung = &GPU_GEMM_RUNGS[i - CPU_GEMM_IMPL_COUNT];
    return (gemm_impl){"gpu", rung->name, NULL, rung, rung->precision};
#else
    return (gemm_impl){0};
#endif
}

/* One shape's inputs, output buffer and the elements verification compares. */
typedef struct {
    gemm_shape shape;
    float *a, *b, *c; /* a stored (trans_a ? K×M : M×K), b (trans_b ? N×K : K×N), c M×N */
    int lda, ldb;
    size_t checks; /* elements compared; index[0] is always element 0 */
    size_t *index;
    double *want, *scale; /* exact value and Σ|a|·|b| of each compared element */
} gemm_problem;

/* ---- shapes ---- */

/* The GEMMs of one training step of the 784-256-10 MLP (core/model.c) at one batch size. */
static int mlp_shapes(int batch, gemm_shape *out) {
    const gemm_shape layer_gemms[] = {
        {batch, 256, 784, false, false, "L1 fwd"},  /* Z1 = X·W1 */
        {784, 256, batch, true, false, "L1 wgrad"}, /* dW1 = X^T·dZ1 */
        {batch, 10, 256, false, false, "L2 fwd"},   /* Z2 = A1·W2 */
        {256, 10, batch, true, false, "L2 wgrad"},  /* dW2 = A1^T·dZ2 */
        {batch, 256, 10, false, true, "L2 dgrad"},  /* dA1 = dZ2·W2^T */
    };
    int count = (int)(sizeof layer_gemms / sizeof *layer_gemms);
    for (int i = 0; i < count; i++) {
        out[i] = layer_gemms[i];
        snprintf(out[i].label, sizeof out[i].label, "%s b%d", layer_gemms[i].label, batch);
    }
    return count;
}

static gemm_shape square(long side) {
    return (gemm_shape){(int)side, (int)side, (int)side, false, false, ""};
}

/* --sizes, --mlp-shapes and --shape, in that order; the sizes 2..4096 when none is given. */
static int gemm_shapes(const bench_options *o, gemm_shape *out) {
    int count = 0;
    for (int i = 0; i < o->size_count; i++) out[count++] = square(o->sizes[i]);
    if (o->mlp_shapes) {
        count += mlp_shapes(16, out + count);
        count += mlp_shapes(512, out + count);
    }
    for (int i = 0; i < o->shape_count; i++) out[count++] = o->shapes[i];
    if (count == 0)
        for (long side = 2; side <= 4096; side *= 2) out[count++] = square(side);
    return count;
}

static void shape_text(const gemm_shape *s, char *text, size_t size) {
    int length = snprintf(text, size, "%dx%dx%d %c%c", s->m, s->n, s->k, s->trans_a ? 'T' : 'N',
                          s->trans_b ? 'T' : 'N');
    if (s->label[0] && length > 0 && (size_t)length < size)
        snprintf(text + length, size - (size_t)length, " (%s)", s->label);
}

static double volume(const gemm_shape *s) { return (double)s->m * s->n * s->k; }

/* ---- the problem and its reference ---- */

static bool checks_everything(const gemm_shape *s) {
    return volume(s) <= FULL_CHECK_MAX_VOLUME && (double)s->m * s->n <= FULL_CHECK_MAX_OUTPUT;
}

static double host_bytes(const gemm_shape *s) {
    double mk = (double)s->m * s->k, kn = (double)s->k * s->n, mn = (double)s->m * s->n;
    double checked = checks_everything(s) ? mn : SAMPLES + 2;
    /* A, B, C; |A| and |B| for the full reference; want, scale and index per checked element */
    return 4 * (2 * mk + 2 * kn + mn) + 24 * checked;
}

static float op_a(const gemm_problem *p, int i, int q) {
    return p->shape.trans_a ? p->a[(size_t)q * p->lda + i] : p->a[(size_t)i * p->lda + q];
}

static float op_b(const gemm_problem *p, int q, int j) {
    return p->shape.trans_b ? p->b[(size_t)j * p->ldb + q] : p->b[(size_t)q * p->ldb + j];
}

/* Element (i, j) of A·B in double, and the size of its terms. */
static void exact_element(const gemm_problem *p, int i, int j, double *want, double *scale) {
    double sum = 0.0, size = 0.0;
    for (int q = 0; q < p->shape.k; q++) {
        double term = (double)op_a(p, i, q) * op_b(p, q, j);
        sum += term;
        size += fabs(term);
    }
    *want = sum;
    *scale = size;
}

static float *absolute_copy(const float *x, size_t n) {
    float *copy = host_floats(n);
    for (size_t i = 0; i < n; i++) copy[i] = fabsf(x[i]);
    return copy;
}

/* Every element, from reference_gemm of A·B and of |A|·|B|. */
static void check_everything(gemm_problem *p) {
    const gemm_shape *s = &p->shape;
    size_t a_count = (size_t)s->m * s->k, b_count = (size_t)s->k * s->n;
    for (size_t e = 0; e < p->checks; e++) p->index[e] = e;
    reference_gemm(s->trans_a, s->trans_b, s->m, s->n, s->k, 1.0, p->a, p->lda, p->b, p->ldb, 0.0,
                   NULL, s->n, p->want);
    float *abs_a = absolute_copy(p->a, a_count), *abs_b = absolute_copy(p->b, b_count);
    reference_gemm(s->trans_a, s->trans_b, s->m, s->n, s->k, 1.0, abs_a, p->lda, abs_b, p->ldb, 0.0,
                   NULL, s->n, p->scale);
    free(abs_a);
    free(abs_b);
}

/* Element 0, the last element, and SAMPLES random ones. */
static void check_sample(gemm_problem *p, uint64_t seed) {
    const gemm_shape *s = &p->shape;
    rng generator = rng_create(seed, 2);
    for (size_t e = 0; e < p->checks; e++) {
        int i, j;
        if (e < 2) {
            i = e == 0 ? 0 : s->m - 1;
            j = e == 0 ? 0 : s->n - 1;
        } else {
            i = (int)rng_below(&generator, (uint32_t)s->m);
            j = (int)rng_below(&generator, (uint32_t)s->n);
        }
        p->index[e] = (size_t)i * s->n + j;
        exact_element(p, i, j, &p->want[e], &p->scale[e]);
    }
}

static gemm_problem problem_create(const gemm_shape *s, uint64_t seed) {
    gemm_problem p = {.shape = *s};
    size_t a_count = (size_t)s->m * s->k, b_count = (size_t)s->k * s->n;
    p.a = host_floats(a_count);
    p.b = host_floats(b_count);
    p.c = host_floats((size_t)s->m * s->n);
    p.lda = s->trans_a ? s->m : s->k;
    p.ldb = s->trans_b ? s->k : s->n;
    fill_random(p.a, a_count, 2 * seed);
    fill_random(p.b, b_count, 2 * seed + 1);
    p.checks = checks_everything(s) ? (size_t)s->m * s->n : SAMPLES + 2;
    p.index = alloc_or_exit(p.checks * sizeof *p.index, "the GEMM reference");
    p.want = alloc_or_exit(p.checks * sizeof *p.want, "the GEMM reference");
    p.scale = alloc_or_exit(p.checks * sizeof *p.scale, "the GEMM reference");
    if (checks_everything(s))
        check_everything(&p);
    else
        check_sample(&p, seed);
    return p;
}

static void problem_free(gemm_problem *p) {
    free(p->a);
    free(p->b);
    free(p->c);
    free(p->index);
    free(p->want);
    free(p->scale);
}

/* The largest |c − exact| / (size of the terms) over the compared elements; infinite for NaN. */
static double gemm_error(const gemm_problem *p) {
    double worst = 0.0;
    for (size_t e = 0; e < p->checks; e++) {
        double got = p->c[p->index[e]];
        if (isnan(got)) return INFINITY;
        double error = fabs(got - p->want[e]) / (p->scale[e] > 0 ? p->scale[e] : 1.0);
        if (error > worst) worst = error;
    }
    return worst;
}

/* ---- running an implementation ---- */

typedef struct {
    const gemm_problem *p;
    cpu_gemm_fn *gemm;
} cpu_gemm_call;

static void call_cpu_gemm(void *context) {
    const cpu_gemm_call *call = context;
    const gemm_problem *p = call->p;
    const gemm_shape *s = &p->shape;
    call->gemm(s->trans_a, s->trans_b, s->m, s->n, s->k, 1.0f, p->a, p->lda, p->b, p->ldb, 0.0f,
               p->c, s->n);
}

static void run_cpu_gemm(const bench_options *o, result_row *row, gemm_problem *p,
                         const gemm_impl *impl) {
    double limit = (double)o->naive_max;
    if (impl->cpu == cpu_gemm_naive && volume(&p->shape) > limit * limit * limit) {
        char reason[96];
        snprintf(reason, sizeof reason, "M*N*K > %ld^3 (slow; see --naive-max)", o->naive_max);
        skip_row(row, reason);
        return;
    }
    size_t c_count = (size_t)p->shape.m * p->shape.n;
    for (size_t i = 0; i < c_count; i++) p->c[i] = NAN;
    cpu_gemm_call call = {p, impl->cpu};
    call_cpu_gemm(&call);
    maybe_corrupt(o, impl->name, &p->c[0], p->scale[0]);
    if (verified(row, gemm_error(p), PRECISIONS[impl->precision].bound))
        row->median_ms = cpu_time_ms(call_cpu_gemm, &call, &o->cpu_timing);
}

#ifdef MLP_HAVE_CUDA
/* The shape's device buffers, made at its first GPU implementation. */
typedef struct {
    bool tried;
    gpu_gemm_case *device; /* NULL if the device had no room */
    double transfer_ms;
} gpu_side;

static void run_gpu_gemm(const bench_options *o, result_row *row, gemm_problem *p,
                         const gemm_impl *impl, gpu_side *gpu) {
    const gemm_shape *s = &p->shape;
    if (!gpu->tried) {
        gpu->tried = true;
        gpu->device = gpu_gemm_case_create(s->m, s->n, s->k, s->trans_a, s->trans_b, p->a, p->b);
        gpu->transfer_ms = NAN;
        if (gpu->device && o->with_transfer)
            gpu->transfer_ms = gpu_gemm_transfer_ms(gpu->device, &o->gpu_timing);
    }
    if (!gpu->device) {
        skip_row(row, "too little free device memory");
        return;
    }
    if (!gpu_gemm_available(impl->gpu)) {
        skip_row(row, "needs compute capability 9.0 (wgmma)");
        return;
    }
    if (o->plan_rows && !gpu_gemm_plan_fits(impl->gpu, o->plan_rows, o->plan_cols)) {
        skip_row(row, "--plan: this kernel has no such tile");
        return;
    }
    gpu_gemm_case_set_plan(gpu->device, o->plan_rows, o->plan_cols, o->plan_splits);
    row->transfer_ms = gpu->transfer_ms;
    gpu_gemm_run(gpu->device, impl->gpu, p->c);
    maybe_corrupt(o, impl->name, &p->c[0], p->scale[0]);
    if (verified(row, gemm_error(p), PRECISIONS[impl->precision].bound))
        row->median_ms = gpu_gemm_time_ms(gpu->device, impl->gpu, &o->gpu_timing);
}
#endif

static bool wanted(const bench_options *o, const gemm_impl *impl) {
    bool on_cpu = impl->cpu != NULL;
    return (on_cpu ? o->run_cpu : o->run_gpu) && impl_selected(o, impl->name);
}

/* OpenBLAS's pthreads build keeps its threads spinning for a while (about 0.1 s) after each
 * call, waiting for the next. The OpenMP threads of a tiled or naive GEMM measured in that time
 * share the cores with them: on 16 cores the tiled layer-1 product took 8 ms after a BLAS call
 * instead of 0.17. So with that build the BLAS rows are measured last, after every other CPU
 * row of the sweep (the rows keep their place in the table). */
static bool measured_last(const gemm_impl *impl) {
    return impl->cpu == cpu_gemm_blas && openblas_has_own_threads();
}

/* A row left for the end of the sweep: which, and the shape and seed to measure it with. */
typedef struct {
    int row;
    gemm_shape shape;
    uint64_t seed;
    gemm_impl impl;
} deferred_row;

typedef struct {
    deferred_row rows[MAX_SHAPES];
    int count;
} deferred_rows;

static void bench_shape(const bench_options *o, results *r, const gemm_shape *s, uint64_t seed,
                        deferred_rows *later) {
    char text[64];
    shape_text(s, text, sizeof text);
    gemm_problem p = {0};
    bool made = false;
#ifdef MLP_HAVE_CUDA
    gpu_side gpu = {0};
#endif
    for (int i = 0; i < gemm_impl_count(); i++) {
        const gemm_impl each = gemm_impl_at(i), *impl = &each;
        if (!wanted(o, impl)) continue;
        result_row *row =
            results_add(r, impl->device, impl->name, text, cbrt(volume(s)), 2 * volume(s));
        snprintf(row->library, sizeof row->library, "%s", PRECISIONS[impl->precision].library);
        if (!fits_memory(o, row, host_bytes(s))) {
            report_progress(o, "gemm", row);
            continue;
        }
        if (measured_last(impl)) {
            later->rows[later->count++] = (deferred_row){r->count - 1, *s, seed, *impl};
            continue;
        }
        if (!made) p = problem_create(s, seed), made = true;
        if (impl->cpu) run_cpu_gemm(o, row, &p, impl);
#ifdef MLP_HAVE_CUDA
        else
            run_gpu_gemm(o, row, &p, impl, &gpu);
#endif
        report_progress(o, "gemm", row);
    }
#ifdef MLP_HAVE_CUDA
    gpu_gemm_case_destroy(gpu.device);
#endif
    if (made) problem_free(&p);
}

const char *const *bench_gemm_names(void) {
    static const char *names[CPU_GEMM_IMPL_COUNT + 64];
    if (names[0]) return names;
    int count = 0;
    for (int i = 0; i < gemm_impl_count(); i++) {
        const char *name = gemm_impl_at(i).name;
        bool seen = false;
        for (int j = 0; j < count; j++) seen = seen || strcmp(names[j], name) == 0;
        if (!seen) names[count++] = name;
    }
    return names;
}

void bench_gemm(const bench_options *o, results *r) {
    gemm_shape shapes[MAX_SHAPES];
    int count = gemm_shapes(o, shapes);
    deferred_rows later = {.count = 0};
    for (int i = 0; i < count; i++) bench_shape(o, r, &shapes[i], 1000 + (uint64_t)i, &later);
    for (int i = 0; i < later.count; i++) {
        const deferred_row *d = &later.rows[i];
        gemm_problem p = problem_create(&d->shape, d->seed); /* the same inputs as the others' */
        run_cpu_gemm(o, &r->rows[d->row], &p, &d->impl);
        report_progress(o, "gemm", &r->rows[d->row]);
        problem_free(&p);
    }
}
