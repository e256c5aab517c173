/* The GPU implementations as whole trainers: finite-difference gradient checks, agreement with
 * the CPU blas implementation after 50 training steps from the same seed (SGD and Adam),
 * bit-for-bit repeatability (no floating-point atomics anywhere), and identical results from
 * every batch feed. Exits 77 without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "../cuda/gpu_backend.h"
#include "check.h"
#include "cpu_backend.h"
#include "model_checks.h"

static const char *const IMPLS[] = {"naive", "tiled", "blas"};

/* As in test_training_cpu.c: float32 in a different order, carried through 50 steps. The GPU
 * adds fused multiply-adds and its own expf, still ~1e-6; a wrong kernel is off by far more. */
#define AGREEMENT_BOUND 1e-4

static void check_implementation(const char *impl, uint64_t seed) {
    backend *be = gpu_backend_create(impl);
    double error = gradient_check_error(be, seed, 1.0f);
    CHECK(error < GRADIENT_CHECK_BOUND, "gpu %s: gradient check error %.3g >= %.3g", impl, error,
          GRADIENT_CHECK_BOUND);
    for (int k = 0; k < 2; k++) {
        optimizer_kind kind = k ? OPTIMIZER_ADAM : OPTIMIZER_SGD;
        synthetic_run run = {kind, 32, 50, seed, {DATA_RESIDENT, false}};
        size_t n, n_cpu;
        synthetic_result result;
        backend *cpu = cpu_backend_create("blas");
        float *reference = train_synthetic(cpu, &run, &n_cpu, &result);
        cpu->destroy(cpu);
        float *params = train_synthetic(be, &run, &n, &result);
        float *again = train_synthetic(be, &run, &n, &result);
        double difference = relative_difference(params, reference, n);
        CHECK(n == n_cpu && difference < AGREEMENT_BOUND,
              "gpu %s vs cpu blas, %s: parameters differ by %.3g after 50 steps", impl,
              optimizer_name(kind), difference);
        CHECK(memcmp(params, again, n * sizeof(float)) == 0,
              "gpu %s, %s: two identical runs gave different parameters", impl, optimizer_name(kind));
        free(params);
        free(again);
        free(reference);
    }
    be->destroy(be);
}

/* Every way of feeding batches (device gather; host copies from pageable or pinned memory,
 * overlapped or not) delivers the same bytes through the same conversion, so training must give
 * the same parameters to the bit. */
static void check_feeds(uint64_t seed) {
    static const feed_options feeds[] = {{DATA_HOST_PAGEABLE, false}, {DATA_HOST_PINNED, false},
                                         {DATA_HOST_PINNED, true}};
    static const char *const names[] = {"host pageable", "host pinned", "host pinned overlapped"};
    backend *be = gpu_backend_create("tiled");
    synthetic_run run = {OPTIMIZER_SGD, 32, 50, seed, {DATA_RESIDENT, false}};
    size_t n;
    synthetic_result resident_result, result;
    float *resident = train_synthetic(be, &run, &n, &resident_result);
    for (int i = 0; i < 3; i++) {
        run.feed = feeds[i];
        float *params = train_synthetic(be, &run, &n, &result);
        CHECK(memcmp(params, resident, n * sizeof(float)) == 0 &&
                  result.test_accuracy == resident_result.test_accuracy,
              "batches from %s gave other parameters or test accuracy than resident data", names[i]);
        free(params);
    }
    free(resident);
    be->destroy(be);
}

int main(void) {
    char why[256];
    if (!gpu_device_available(why, sizeof why)) {
        printf("test_gpu_training: skipped: %s\n", why);
        return TEST_SKIP_STATUS;
    }
    uint64_t seed = test_seed("test_gpu_training");
    for (int i = 0; i < 3; i++) check_implementation(IMPLS[i], seed);
    check_feeds(seed);
    return test_exit_status("test_gpu_training");
}
