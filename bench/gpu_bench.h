/* The GPU side of mlp_bench, behind a C interface (gpu_bench.cu is CUDA C++). One device
 * (device 0), one stream, one cuBLAS handle for the whole run (FP32 math: no TF32 unless an
 * implementation asks for it by name, as blas_tf32 does).
 *
 * Each benchmark's case uploads its inputs once, then:
 *   ..._run     poisons the output on the device with NaN, runs the implementation once, waits,
 *               and downloads the output for verification on the host;
 *   ..._time_ms times the implementation with CUDA events on the stream (measure.h's rules:
 *               warm-up, repeats, median), one event pair around each launch.
 * A case's create returns NULL when the device has too little free memory for it. Any CUDA or
 * cuBLAS error ends the process with a message naming the call (cuda/cuda_check.h). */
#ifndef MLP_BENCH_GPU_BENCH_H
#define MLP_BENCH_GPU_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h" /* device_presence */
#include "bench/gemm_rungs.h"
#include "bench/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets up the device where there is one (DEVICE_PRESENT); otherwise why not, in `why`. */
device_presence gpu_bench_open(char *why, size_t why_size);
void gpu_bench_close(void);
const char *gpu_bench_device_name(void);

/* Device-to-device cudaMemcpy of `bytes` (halved until it fits in free memory): GB/s counting
 * bytes read + written. */
double gpu_bench_copy_bandwidth(size_t bytes, const bench_timing *timing);

/* ---- GEMM: C = A·B (alpha 1, beta 0), dense row-major, op(A) M×K, op(B) K×N ----
 * The BF16 implementations multiply copies of A and B rounded to BF16 on the device, made once
 * per case at its first BF16 run (before verification, so never inside a timing), as a program
 * that keeps BF16 operands would; the others read the FP32 A and B. C is FP32 for all. */

typedef struct gpu_gemm_case gpu_gemm_case;

/* Whether the device can run the rung (the wgmma ones: Hopper only). */
bool gpu_gemm_available(const gpu_gemm_rung *rung);

/* a is stored (trans_a ? K×M : M×K), b (trans_b ? N×K : K×N), rows contiguous. */
gpu_gemm_case *gpu_gemm_case_create(int m, int n, int k, bool trans_a, bool trans_b, const float *a,
                                    const float *b);
/* The block tile (rows × cols) and K slices the rungs that take a plan use (mlp_bench --plan);
 * rows 0: their own choice. Whether the rung has that tile (gpu_gemm_rung.has_tile). */
void gpu_gemm_case_set_plan(gpu_gemm_case *c, int rows, int cols, int splits);
bool gpu_gemm_plan_fits(const gpu_gemm_rung *rung, int rows, int cols);
void gpu_gemm_run(gpu_gemm_case *c, const gpu_gemm_rung *rung, float *c_host);
double gpu_gemm_time_ms(gpu_gemm_case *c, const gpu_gemm_rung *rung, const bench_timing *timing);
/* Copies of A and B to the device and C back, from and to pinned host memory. */
double gpu_gemm_transfer_ms(gpu_gemm_case *c, const bench_timing *timing);
void gpu_gemm_case_destroy(gpu_gemm_case *c);

/* ---- dot: y = sigmoid(w·x) ---- */

typedef enum {
    GPU_DOT_NAIVE,
    GPU_DOT_SHARED_TREE,
    GPU_DOT_WARP_SHUFFLE,
    GPU_DOT_CUBLAS
} gpu_dot_impl;
typedef struct gpu_dot_case gpu_dot_case;

gpu_dot_case *gpu_dot_case_create(const float *w, const float *x, size_t n);
/* The dot product and y, both computed on the device. */
void gpu_dot_run(gpu_dot_case *c, gpu_dot_impl impl, float *dot, float *y);
double gpu_dot_time_ms(gpu_dot_case *c, gpu_dot_impl impl, const bench_timing *timing);
void gpu_dot_case_destroy(gpu_dot_case *c);

/* ---- max pooling (bench/kernels/cpu_maxpool.h's contract) ---- */

typedef struct gpu_maxpool_case gpu_maxpool_case;

gpu_maxpool_case *gpu_maxpool_case_create(const float *in, size_t planes, int height, int width,
                                          int kernel, int stride, int padding);
/* out_host holds planes × out_height × out_width floats. */
void gpu_maxpool_run(gpu_maxpool_case *c, float *out_host);
double gpu_maxpool_time_ms(gpu_maxpool_case *c, const bench_timing *timing);
void gpu_maxpool_case_destroy(gpu_maxpool_case *c);

#ifdef __cplusplus
}
#endif

#endif
