/* The first step of every GPU test program (C and CUDA): exits 77 (skipped) where this machine
 * has no GPU, fails (exit 1) where it has one that CUDA cannot use, and otherwise returns the
 * run's random seed (check.h's test_seed). A broken driver must never read as "no GPU". */
#ifndef MLP_TEST_GPU_TEST_H
#define MLP_TEST_GPU_TEST_H

#include "cuda/gpu_backend.h"
#include "check.h"

static inline uint64_t gpu_test_start(const char *name) {
    char why[256];
    switch (gpu_probe(why, sizeof why)) {
    case DEVICE_PRESENT: break;
    case DEVICE_ABSENT:
        printf("%s: skipped: %s\n", name, why);
        exit(TEST_SKIP_STATUS);
    case DEVICE_BROKEN:
        fprintf(stderr, "FAIL %s: a GPU is here but unusable: %s\n", name, why);
        exit(1);
    }
    return test_seed(name);
}

#endif
