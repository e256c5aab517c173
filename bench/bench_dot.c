/* mlp_bench dot: y = sigmoid(w·x) for vectors of n floats: a sequential loop, an OpenMP
 * reduction and OpenBLAS's cblas_sdot on the CPU; the naive (atomic), shared-memory tree and
 * warp-shuffle kernels and cublasSdot on the GPU. A timed call is the dot product and the
 * sigmoid, on the GPU with the result left in device memory.
 *
 * Throughput is in GB/s of input read (8n bytes: nothing else moves), and as a fraction of the
 * device's copy bandwidth measured at the start of the run: a dot product reads at the speed
 * memory can stream, so that fraction says how close to the hardware it gets.
 *
 * Verification: the dot product against the sum in double, its error measured against the size
 * of the terms (Σ|w_i·x_i|), bound 1e-5; and y against the sigmoid of the dot product it came
 * with (within 1e-6: the GPU's expf may differ from the CPU's by an ulp or two). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "bench/kernels/cpu_dot.h"
#include "bench/gpu_bench.h"
#include "libs/openblas_dot.h"

#define DOT_BOUND 1e-5
#define SIGMOID_TOLERANCE 1e-6

typedef float cpu_dot_fn(const float *w, const float *x, size_t n);

typedef struct {
    const char *device;
    const char *name;
    cpu_dot_fn *cpu;
    gpu_dot_impl gpu;
} dot_impl;

static const dot_impl DOT_IMPLS[] = {
    {"cpu", "loop", cpu_dot_loop, 0},
    {"cpu", "openmp", cpu_dot_openmp, 0},
    {"cpu", "blas", cpu_dot_blas, 0},
    {"gpu", "naive", NULL, GPU_DOT_NAIVE},
    {"gpu", "shared", NULL, GPU_DOT_SHARED_TREE},
    {"gpu", "shuffle", NULL, GPU_DOT_WARP_SHUFFLE},
    {"gpu", "blas", NULL, GPU_DOT_CUBLAS},
};

typedef struct {
    size_t n;
    float *w, *x;
    double want, scale; /* w·x in double and Σ|w_i·x_i| */
} dot_problem;

static dot_problem problem_create(size_t n, uint64_t seed) {
    dot_problem p = {.n = n, .w = host_floats(n), .x = host_floats(n)};
    fill_random(p.w, n, 2 * seed);
    fill_random(p.x, n, 2 * seed + 1);
    for (size_t i = 0; i < n; i++) {
        double term = (double)p.w[i] * p.x[i];
        p.want += term;
        p.scale += fabs(term);
    }
    return p;
}

/* Verifies the dot product, then y; false (the row FAILED) if either is off. */
static bool dot_verified(const bench_options *o, result_row *row, const dot_problem *p, float dot,
                         float y) {
    maybe_corrupt(o, row->impl, &dot, p->scale);
    double error = isnan(dot) ? INFINITY : fabs(dot - p->want) / (p->scale > 0 ? p->scale : 1.0);
    if (!verified(row, error, DOT_BOUND)) return false;
    float expected_y = cpu_sigmoid(dot);
    if (fabsf(y - expected_y) <= SIGMOID_TOLERANCE) return true; /* false for NaN */
    row->status = ROW_FAILED;
    snprintf(row->note, sizeof row->note, "y = %.9g but sigmoid(dot) = %.9g", y, expected_y);
    return false;
}

typedef struct {
    const dot_problem *p;
    cpu_dot_fn *dot_fn;
    float dot, y;
} cpu_dot_call;

static void call_cpu_dot(void *context) {
    cpu_dot_call *call = context;
    call->dot = call->dot_fn(call->p->w, call->p->x, call->p->n);
    call->y = cpu_sigmoid(call->dot);
}

static void run_cpu_dot(const bench_options *o, result_row *row, const dot_problem *p,
                        const dot_impl *impl) {
    cpu_dot_call call = {p, impl->cpu, NAN, NAN};
    call_cpu_dot(&call);
    if (dot_verified(o, row, p, call.dot, call.y))
        row->median_ms = cpu_time_ms(call_cpu_dot, &call, &o->cpu_timing);
}

#ifdef MLP_HAVE_CUDA
/* The case's device buffers, made at its first GPU implementation. */
typedef struct {
    bool tried;
    gpu_dot_case *device; /* NULL if the device had no room */
} gpu_side;

static void run_gpu_dot(const bench_options *o, result_row *row, const dot_problem *p,
                        const dot_impl *impl, gpu_side *gpu) {
    if (!gpu->tried) gpu->tried = true, gpu->device = gpu_dot_case_create(p->w, p->x, p->n);
    if (!gpu->device) {
        skip_row(row, "too little free device memory");
        return;
    }
    float dot, y;
    gpu_dot_run(gpu->device, impl->gpu, &dot, &y);
    if (dot_verified(o, row, p, dot, y))
        row->median_ms = gpu_dot_time_ms(gpu->device, impl->gpu, &o->gpu_timing);
}
#endif

static bool wanted(const bench_options *o, const dot_impl *impl) {
    return (impl->cpu ? o->run_cpu : o->run_gpu) && impl_selected(o, impl->name);
}

static void bench_length(const bench_options *o, results *r, size_t n, uint64_t seed) {
    char text[32];
    snprintf(text, sizeof text, "n=%zu", n);
    dot_problem p = {0};
    bool made = false;
#ifdef MLP_HAVE_CUDA
    gpu_side gpu = {0};
#endif
    for (size_t i = 0; i < sizeof DOT_IMPLS / sizeof *DOT_IMPLS; i++) {
        const dot_impl *impl = &DOT_IMPLS[i];
        if (!wanted(o, impl)) continue;
        result_row *row = results_add(r, impl->device, impl->name, text, (double)n, 8.0 * n);
        if (fits_memory(o, row, 8.0 * n)) {
            if (!made) p = problem_create(n, seed), made = true;
            if (impl->cpu) run_cpu_dot(o, row, &p, impl);
#ifdef MLP_HAVE_CUDA
            else
                run_gpu_dot(o, row, &p, impl, &gpu);
#endif
        }
        report_progress(o, "dot", row);
    }
#ifdef MLP_HAVE_CUDA
    gpu_dot_case_destroy(gpu.device);
#endif
    if (made) free(p.w), free(p.x);
}

void bench_dot(const bench_options *o, results *r) {
    measure_copy_bandwidth(o, r);
    if (o->size_count == 0)
        for (size_t n = 1024; n <= ((size_t)64 << 20); n *= 2) bench_length(o, r, n, n);
    for (int i = 0; i < o->size_count; i++)
        bench_length(o, r, (size_t)o->sizes[i], 2000 + (uint64_t)i);
}
