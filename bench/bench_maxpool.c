/* mlp_bench maxpool: 2-D max pooling of `planes` square images (batch × channels), window,
 * stride and padding from the options: sequential and OpenMP on the CPU, one thread per output
 * on the GPU (bench/kernels/cpu_maxpool.c, bench/kernels/gpu_maxpool.cu).
 *
 * Throughput is in GB/s of the least traffic the operation needs, the input read once and the
 * output written once (overlapping windows read some input twice, but from cache), and as a
 * fraction of the device's copy bandwidth measured at the start of the run.
 *
 * Verification: a maximum is exact, so every output element must equal the sequential CPU
 * version's (computed once per case, apart from the timed runs) bit for bit; the error column
 * counts the elements that differ. The tests check the sequential version itself against a
 * direct reference that pads the image explicitly (tests/test_kernels_cpu.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/kernels/cpu_maxpool.h"
#include "bench/gpu_bench.h"

typedef void cpu_maxpool_fn(const float *in, size_t planes, int height, int width,
                            maxpool_window window, float *out);

typedef struct {
    const char *device;
    const char *name;
    cpu_maxpool_fn *cpu; /* NULL: the GPU kernel */
} maxpool_impl;

static const maxpool_impl MAXPOOL_IMPLS[] = {
    {"cpu", "sequential", cpu_maxpool_sequential},
    {"cpu", "openmp", cpu_maxpool_openmp},
    {"gpu", "cuda", NULL},
};

typedef struct {
    size_t planes;
    int side, out_height, out_width;
    maxpool_window window;
    float *in, *want, *got;
    size_t in_count, out_count;
} maxpool_problem;

static maxpool_problem problem_create(const bench_options *o, int side, int out_height,
                                      int out_width, uint64_t seed) {
    maxpool_problem p = {.planes = (size_t)o->planes,
                         .side = side,
                         .out_height = out_height,
                         .out_width = out_width,
                         .window = o->window};
    p.in_count = p.planes * side * (size_t)side;
    p.out_count = p.planes * out_height * (size_t)out_width;
    p.in = host_floats(p.in_count);
    p.want = host_floats(p.out_count);
    p.got = host_floats(p.out_count);
    fill_random(p.in, p.in_count, seed);
    cpu_maxpool_sequential(p.in, p.planes, side, side, p.window, p.want);
    return p;
}

static void problem_free(maxpool_problem *p) {
    free(p->in);
    free(p->want);
    free(p->got);
}

/* Counts the elements of `got` that differ from the sequential version's (NaN differs). */
static bool maxpool_verified(const bench_options *o, result_row *row, maxpool_problem *p) {
    maybe_corrupt(o, row->impl, &p->got[0], 1.0);
    size_t differ = 0;
    for (size_t i = 0; i < p->out_count; i++) differ += !(p->got[i] == p->want[i]);
    if (verified(row, (double)differ, 0.0)) return true;
    snprintf(row->note, sizeof row->note, "%zu of %zu outputs differ from cpu sequential", differ,
             p->out_count);
    return false;
}

typedef struct {
    maxpool_problem *p;
    cpu_maxpool_fn *pool;
} cpu_maxpool_call;

static void call_cpu_maxpool(void *context) {
    const cpu_maxpool_call *call = context;
    maxpool_problem *p = call->p;
    call->pool(p->in, p->planes, p->side, p->side, p->window, p->got);
}

static void run_cpu_maxpool(const bench_options *o, result_row *row, maxpool_problem *p,
                            const maxpool_impl *impl) {
    for (size_t i = 0; i < p->out_count; i++) p->got[i] = NAN;
    cpu_maxpool_call call = {p, impl->cpu};
    call_cpu_maxpool(&call);
    if (maxpool_verified(o, row, p))
        row->median_ms = cpu_time_ms(call_cpu_maxpool, &call, &o->cpu_timing);
}

#ifdef MLP_HAVE_CUDA
static void run_gpu_maxpool(const bench_options *o, result_row *row, maxpool_problem *p) {
    gpu_maxpool_case *device = gpu_maxpool_case_create(
        p->in, p->planes, p->side, p->side, p->window.kernel, p->window.stride, p->window.padding);
    if (!device) {
        skip_row(row, "too little free device memory");
        return;
    }
    gpu_maxpool_run(device, p->got);
    if (maxpool_verified(o, row, p)) row->median_ms = gpu_maxpool_time_ms(device, &o->gpu_timing);
    gpu_maxpool_case_destroy(device);
}
#endif

static bool wanted(const bench_options *o, const maxpool_impl *impl) {
    return (impl->cpu ? o->run_cpu : o->run_gpu) && impl_selected(o, impl->name);
}

static void bench_side(const bench_options *o, results *r, int side, uint64_t seed) {
    maxpool_window w = o->window;
    char text[64];
    snprintf(text, sizeof text, "%ldx%dx%d k%ds%dp%d", o->planes, side, side, w.kernel, w.stride,
             w.padding);
    int out_height = 0, out_width = 0;
    bool has_output = maxpool_output_size(side, side, w, &out_height, &out_width);
    double in_count = (double)o->planes * side * side,
           out_count = (double)o->planes * out_height * out_width;
    maxpool_problem p = {0};
    bool made = false;
    for (size_t i = 0; i < sizeof MAXPOOL_IMPLS / sizeof *MAXPOOL_IMPLS; i++) {
        const maxpool_impl *impl = &MAXPOOL_IMPLS[i];
        if (!wanted(o, impl)) continue;
        result_row *row =
            results_add(r, impl->device, impl->name, text, side, 4 * (in_count + out_count));
        if (!has_output)
            skip_row(row, "window larger than the padded image");
        else if (fits_memory(o, row, 4 * (in_count + 2 * out_count))) {
            if (!made) p = problem_create(o, side, out_height, out_width, seed), made = true;
            if (impl->cpu) run_cpu_maxpool(o, row, &p, impl);
#ifdef MLP_HAVE_CUDA
            else
                run_gpu_maxpool(o, row, &p);
#endif
        }
        report_progress(o, "maxpool", row);
    }
    if (made) problem_free(&p);
}

void bench_maxpool(const bench_options *o, results *r) {
    measure_copy_bandwidth(o, r);
    if (o->image_size_count == 0)
        for (int side = 4; side <= 8192; side *= 2) bench_side(o, r, side, (uint64_t)side);
    for (int i = 0; i < o->image_size_count; i++)
        bench_side(o, r, (int)o->image_sizes[i], 3000 + (uint64_t)i);
}
