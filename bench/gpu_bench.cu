/* The GPU side of mlp_bench: device buffers for each case, the one-shot runs that verification
 * reads, and timing with CUDA events. The kernels themselves are the project's
 * (cuda/, bench/kernels/, libs/cublas_*.cu); nothing here computes. See gpu_bench.h. */
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "libs/cublas_dot.h"
#include "libs/cublas_gemm.h"
#include "libs/cuda_check.h"
#include "cuda/gpu_backend.h"
#include "bench/kernels/cpu_maxpool.h"
#include "cuda/gemm/gemm_ladder.h"
#include "bench/gemm_rungs.h"
#include "bench/gpu_bench.h"
#include "bench/kernels/gpu_bench_kernels.h"
#include "cuda/kernels/gpu_kernels.h"

namespace {

struct gpu_context {
    cudaStream_t stream;
    cublasHandle_t cublas;
    gpu_gemm_workspace gemm_workspace; /* split-K's partial sums, the TF32 wgmma's K-major copies */
    cudaEvent_t start, stop;
    char name[256];
};

gpu_context context;

/* Free device memory kept in reserve, for cuBLAS's workspace and the like. */
constexpr size_t DEVICE_RESERVE = size_t(256) << 20;

bool device_has_room(size_t bytes) {
    size_t free_bytes, total_bytes;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return bytes + DEVICE_RESERVE <= free_bytes;
}

float *device_floats(size_t count) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)));
    return static_cast<float *>(p);
}

/* Every copy goes through the run's stream and is waited for. (A plain cudaMemcpy would use the
 * legacy default stream, which does not order itself with a non-blocking stream; and from
 * pageable memory it may return before its copy to the device has landed.) */
void copy_and_wait(void *destination, const void *source, size_t bytes, cudaMemcpyKind kind) {
    CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, kind, context.stream));
    CUDA_CHECK(cudaStreamSynchronize(context.stream));
}

float *uploaded(const float *host, size_t count) {
    float *device = device_floats(count);
    copy_and_wait(device, host, count * sizeof(float), cudaMemcpyHostToDevice);
    return device;
}

/* All bits set: a NaN as float, so an element an implementation forgets to write fails. */
void poison(float *device, size_t count) {
    CUDA_CHECK(cudaMemsetAsync(device, 0xFF, count * sizeof(float), context.stream));
}

void download(float *host, const float *device, size_t count) {
    copy_and_wait(host, device, count * sizeof(float), cudaMemcpyDeviceToHost);
}

/* measure.h's rules with CUDA events: each launch between its own pair of events, waited for,
 * so a sample is the device time of one call (plus the gap before its first kernel starts). */
template <typename Launch> double time_ms(const bench_timing *timing, Launch launch) {
    for (int i = 0; i < timing->warmup; i++) launch();
    CUDA_CHECK(cudaStreamSynchronize(context.stream));
    std::vector<double> samples;
    double elapsed_s = 0.0;
    while (!timing_done(timing, (int)samples.size(), elapsed_s)) {
        CUDA_CHECK(cudaEventRecord(context.start, context.stream));
        launch();
        CUDA_CHECK(cudaEventRecord(context.stop, context.stream));
        CUDA_CHECK(cudaEventSynchronize(context.stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, context.start, context.stop));
        samples.push_back(ms);
        elapsed_s += ms * 1e-3;
    }
    return median_of(samples.data(), (int)samples.size());
}

} // namespace

/* ---- the device ---- */

extern "C" device_presence gpu_bench_open(char *why, size_t why_size) {
    device_presence presence = gpu_probe(why, why_size);
    if (presence != DEVICE_PRESENT) return presence;
    CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp properties;
    CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
    std::snprintf(context.name, sizeof context.name, "%s", properties.name);
    CUDA_CHECK(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking));
    context.cublas = cublas_gemm_handle(context.stream);
    context.gemm_workspace = {device_floats(GPU_GEMM_WORKSPACE_FLOATS), GPU_GEMM_WORKSPACE_FLOATS};
    CUDA_CHECK(cudaEventCreate(&context.start));
    CUDA_CHECK(cudaEventCreate(&context.stop));
    return DEVICE_PRESENT;
}

extern "C" void gpu_bench_close(void) {
    CUDA_CHECK(cudaEventDestroy(context.start));
    CUDA_CHECK(cudaEventDestroy(context.stop));
    cublas_gemm_handle_destroy(context.cublas);
    CUDA_CHECK(cudaFree(context.gemm_workspace.data));
    CUDA_CHECK(cudaStreamDestroy(context.stream));
}

extern "C" const char *gpu_bench_device_name(void) { return context.name; }

extern "C" double gpu_bench_copy_bandwidth(size_t bytes, const bench_timing *timing) {
    constexpr size_t SMALLEST = size_t(16) << 20;
    while (bytes > SMALLEST && !device_has_room(2 * bytes)) bytes /= 2;
    float *source = device_floats(bytes / sizeof(float));
    float *destination = device_floats(bytes / sizeof(float));
    CUDA_CHECK(cudaMemsetAsync(source, 0, bytes, context.stream));
    double ms = time_ms(timing, [&] {
        CUDA_CHECK(
            cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, context.stream));
    });
    CUDA_CHECK(cudaFree(source));
    CUDA_CHECK(cudaFree(destination));
    return 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
}

/* ---- GEMM ---- */

struct gpu_gemm_case {
    int m, n, k;
    bool trans_a, trans_b;
    float *a = nullptr, *b = nullptr, *c = nullptr; /* device */
    size_t a_count = 0, b_count = 0, c_count = 0;
    __nv_bfloat16 *a_bf16 = nullptr, *b_bf16 = nullptr; /* made at the first BF16 run */
    __half *a_fp16 = nullptr;                           /* at the first run that reads it */
    int plan_rows = 0, plan_cols = 0, plan_splits = 0; /* mlp_bench --plan; 0: the kernel's own choice */
};

/* Room in the workspace for a copy of both operands, where the device has it: the TF32 wgmma
 * rung lays large operands out K-major there (as cuBLAS has a workspace of its own). */
static void grow_workspace(size_t floats) {
    gpu_gemm_workspace &w = context.gemm_workspace;
    if (floats <= w.floats || !device_has_room((floats - w.floats) * sizeof(float))) return;
    CUDA_CHECK(cudaFree(w.data));
    w = {device_floats(floats), floats};
}

extern "C" gpu_gemm_case *gpu_gemm_case_create(int m, int n, int k, bool trans_a, bool trans_b,
                                               const float *a, const float *b) {
    size_t a_count = (size_t)m * k, b_count = (size_t)k * n, c_count = (size_t)m * n;
    size_t copy_bytes = (2 * a_count + b_count) * sizeof(uint16_t); /* BF16 A and B, FP16 A */
    if (!device_has_room((a_count + b_count + c_count) * sizeof(float) + copy_bytes)) return nullptr;
    grow_workspace(a_count + b_count);
    gpu_gemm_case *g = new gpu_gemm_case{m, n, k, trans_a, trans_b};
    g->a = uploaded(a, a_count), g->a_count = a_count;
    g->b = uploaded(b, b_count), g->b_count = b_count;
    g->c = device_floats(c_count), g->c_count = c_count;
    return g;
}

extern "C" void gpu_gemm_case_set_plan(gpu_gemm_case *g, int rows, int cols, int splits) {
    g->plan_rows = rows, g->plan_cols = cols, g->plan_splits = splits;
}

extern "C" bool gpu_gemm_plan_fits(const gpu_gemm_rung *rung, int rows, int cols) {
    return !rung->has_tile || rung->has_tile(rows, cols); /* the others have no tile to force */
}

extern "C" bool gpu_gemm_available(const gpu_gemm_rung *rung) {
    return !rung->hopper_only || gpu_gemm_wgmma_available();
}

/* The 16-bit copies a rung reads, rounded on the device the first time they are needed: A and B
 * to BF16 (nearest even), or A to TF32 in FP16 (exact but for the few of mlp_bench's random
 * inputs under 2^-14 in magnitude, an error far inside the TF32 bound). */
static void round_operands_once(gpu_gemm_case *g, gemm_operands operands) {
    const bool bf16 = operands == OPERANDS_BF16 && !g->a_bf16;
    const bool fp16_a = operands == OPERANDS_FP16_A && !g->a_fp16;
    if (!bf16 && !fp16_a) return;
    if (bf16) {
        CUDA_CHECK(cudaMalloc(&g->a_bf16, std::max<size_t>(g->a_count, 1) * sizeof(__nv_bfloat16)));
        CUDA_CHECK(cudaMalloc(&g->b_bf16, std::max<size_t>(g->b_count, 1) * sizeof(__nv_bfloat16)));
        gpu_round_to_bf16(context.stream, g->a, g->a_count, g->a_bf16);
        gpu_round_to_bf16(context.stream, g->b, g->b_count, g->b_bf16);
    }
    if (fp16_a) {
        CUDA_CHECK(cudaMalloc(&g->a_fp16, std::max<size_t>(g->a_count, 1) * sizeof(__half)));
        gpu_round_to_tf32_in_fp16(context.stream, g->a, g->a_count, g->a_fp16);
    }
    CUDA_CHECK(cudaStreamSynchronize(context.stream));
}

static gpu_gemm_call call_of(const gpu_gemm_case *g) {
    gpu_gemm_call x = {};
    x.stream = context.stream, x.cublas = context.cublas;
    x.workspace = context.gemm_workspace.data, x.workspace_floats = context.gemm_workspace.floats;
    x.trans_a = g->trans_a, x.trans_b = g->trans_b, x.m = g->m, x.n = g->n, x.k = g->k;
    x.alpha = 1.0f, x.beta = 0.0f, x.a = g->a, x.b = g->b, x.a_bf16 = g->a_bf16, x.b_bf16 = g->b_bf16;
    x.a_fp16 = g->a_fp16;
    x.lda = g->trans_a ? g->m : g->k, x.ldb = g->trans_b ? g->k : g->n, x.c = g->c, x.ldc = g->n;
    x.plan_rows = g->plan_rows, x.plan_cols = g->plan_cols, x.plan_splits = g->plan_splits;
    return x;
}

extern "C" void gpu_gemm_run(gpu_gemm_case *g, const gpu_gemm_rung *rung, float *c_host) {
    round_operands_once(g, rung->operands);
    poison(g->c, g->c_count);
    gpu_gemm_call call = call_of(g);
    rung->launch(&call);
    download(c_host, g->c, g->c_count);
}

extern "C" double gpu_gemm_time_ms(gpu_gemm_case *g, const gpu_gemm_rung *rung,
                                   const bench_timing *timing) {
    round_operands_once(g, rung->operands);
    gpu_gemm_call call = call_of(g);
    return time_ms(timing, [&] { rung->launch(&call); });
}

/* The pinned buffer is filled from the case's own A and B, so copying them up again leaves the
 * device's A and B as they were; C is only read. */
extern "C" double gpu_gemm_transfer_ms(gpu_gemm_case *g, const bench_timing *timing) {
    size_t a_bytes = g->a_count * sizeof(float), b_bytes = g->b_count * sizeof(float);
    size_t c_bytes = g->c_count * sizeof(float);
    void *pinned;
    CUDA_CHECK(cudaMallocHost(&pinned, a_bytes + b_bytes + c_bytes));
    char *a_host = static_cast<char *>(pinned), *b_host = a_host + a_bytes,
         *c_host = b_host + b_bytes;
    copy_and_wait(a_host, g->a, a_bytes, cudaMemcpyDeviceToHost);
    copy_and_wait(b_host, g->b, b_bytes, cudaMemcpyDeviceToHost);
    poison(g->c, g->c_count); /* C has not been written yet: give the copy defined bytes */
    cudaStream_t s = context.stream;
    double ms = time_ms(timing, [&] {
        CUDA_CHECK(cudaMemcpyAsync(g->a, a_host, a_bytes, cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(g->b, b_host, b_bytes, cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(c_host, g->c, c_bytes, cudaMemcpyDeviceToHost, s));
    });
    CUDA_CHECK(cudaFreeHost(pinned));
    return ms;
}

extern "C" void gpu_gemm_case_destroy(gpu_gemm_case *g) {
    if (!g) return;
    CUDA_CHECK(cudaFree(g->a));
    CUDA_CHECK(cudaFree(g->b));
    CUDA_CHECK(cudaFree(g->c));
    CUDA_CHECK(cudaFree(g->a_bf16)); /* cudaFree(nullptr) is a no-op */
    CUDA_CHECK(cudaFree(g->b_bf16));
    CUDA_CHECK(cudaFree(g->a_fp16));
    delete g;
}

/* ---- dot ---- */

struct gpu_dot_case {
    size_t n;
    float *w = nullptr, *x = nullptr;   /* device, n each */
    float *partials = nullptr;          /* GPU_DOT_MAX_BLOCKS: the two-pass kernels' scratch */
    float *dot = nullptr, *y = nullptr; /* one each */
};

extern "C" gpu_dot_case *gpu_dot_case_create(const float *w, const float *x, size_t n) {
    if (!device_has_room((2 * n + GPU_DOT_MAX_BLOCKS + 2) * sizeof(float))) return nullptr;
    gpu_dot_case *d = new gpu_dot_case{n};
    d->w = uploaded(w, n), d->x = uploaded(x, n);
    d->partials = device_floats(GPU_DOT_MAX_BLOCKS);
    d->dot = device_floats(1), d->y = device_floats(1);
    return d;
}

static void launch_dot(const gpu_dot_case *d, gpu_dot_impl impl) {
    cudaStream_t s = context.stream;
    switch (impl) {
    case GPU_DOT_NAIVE: gpu_dot_naive(s, d->w, d->x, d->n, d->dot); break;
    case GPU_DOT_SHARED_TREE: gpu_dot_shared_tree(s, d->w, d->x, d->n, d->partials, d->dot); break;
    case GPU_DOT_WARP_SHUFFLE:
        gpu_dot_warp_shuffle(s, d->w, d->x, d->n, d->partials, d->dot);
        break;
    case GPU_DOT_CUBLAS: cublas_dot(context.cublas, d->w, d->x, d->n, d->dot); break;
    }
    gpu_sigmoid_scalar(s, d->dot, d->y);
}

extern "C" void gpu_dot_run(gpu_dot_case *d, gpu_dot_impl impl, float *dot, float *y) {
    poison(d->partials, GPU_DOT_MAX_BLOCKS);
    poison(d->dot, 1);
    poison(d->y, 1);
    launch_dot(d, impl);
    download(dot, d->dot, 1);
    download(y, d->y, 1);
}

extern "C" double gpu_dot_time_ms(gpu_dot_case *d, gpu_dot_impl impl, const bench_timing *timing) {
    return time_ms(timing, [&] { launch_dot(d, impl); });
}

extern "C" void gpu_dot_case_destroy(gpu_dot_case *d) {
    if (!d) return;
    for (float *p : {d->w, d->x, d->partials, d->dot, d->y}) CUDA_CHECK(cudaFree(p));
    delete d;
}

/* ---- max pooling ---- */

struct gpu_maxpool_case {
    size_t planes;
    int height, width, kernel, stride, padding;
    float *in = nullptr, *out = nullptr; /* device */
    size_t out_count = 0;
};

extern "C" gpu_maxpool_case *gpu_maxpool_case_create(const float *in, size_t planes, int height,
                                                     int width, int kernel, int stride,
                                                     int padding) {
    int out_height, out_width;
    if (!maxpool_output_size(height, width, maxpool_window{kernel, stride, padding}, &out_height,
                             &out_width))
        return nullptr;
    size_t in_count = planes * height * (size_t)width;
    size_t out_count = planes * out_height * (size_t)out_width;
    if (!device_has_room((in_count + out_count) * sizeof(float))) return nullptr;
    gpu_maxpool_case *p = new gpu_maxpool_case{planes, height, width, kernel, stride, padding};
    p->in = uploaded(in, in_count);
    p->out = device_floats(out_count), p->out_count = out_count;
    return p;
}

static void launch_maxpool(const gpu_maxpool_case *p) {
    gpu_maxpool(context.stream, p->in, p->planes, p->height, p->width, p->kernel, p->stride,
                p->padding, p->out);
}

extern "C" void gpu_maxpool_run(gpu_maxpool_case *p, float *out_host) {
    poison(p->out, p->out_count);
    launch_maxpool(p);
    download(out_host, p->out, p->out_count);
}

extern "C" double gpu_maxpool_time_ms(gpu_maxpool_case *p, const bench_timing *timing) {
    return time_ms(timing, [&] { launch_maxpool(p); });
}

extern "C" void gpu_maxpool_case_destroy(gpu_maxpool_case *p) {
    if (!p) return;
    CUDA_CHECK(cudaFree(p->in));
    CUDA_CHECK(cudaFree(p->out));
    delete p;
}
