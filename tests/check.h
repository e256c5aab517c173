/* A minimal test harness: CHECK records a failure with its location and goes on, so one run
 * reports every broken case; test_exit_status() turns the count into the process exit status.
 * Exit status 77 means "skipped" to CTest (SKIP_RETURN_CODE), used where no GPU is present. */
#ifndef MLP_TEST_CHECK_H
#define MLP_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TEST_SKIP_STATUS 77

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Fresh random inputs on every run: the seed comes from MLP_TEST_SEED when set (to replay a
 * failure), otherwise from the clock; it is printed so a failing run can be reproduced. */
static inline uint64_t test_seed(const char *name) {
    const char *fixed = getenv("MLP_TEST_SEED");
    uint64_t seed;
    if (fixed) {
        seed = strtoull(fixed, NULL, 10);
    } else {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        seed = (uint64_t)now.tv_sec * 1000000007ULL ^ (uint64_t)now.tv_nsec;
    }
    printf("%s: seed %llu (set MLP_TEST_SEED to replay)\n", name, (unsigned long long)seed);
    return seed;
}

static inline int test_exit_status(const char *name) {
    if (test_failures)
        fprintf(stderr, "%s: %d of %d checks failed\n", name, test_failures, test_checks);
    else
        printf("%s: all %d checks passed\n", name, test_checks);
    return test_failures ? 1 : 0;
}

#endif
