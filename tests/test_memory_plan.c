/* Tests for memory_plan: the footprint of a known model item by item, the refusal of a run
 * that does not fit (with a message naming the model, the memory and every item), the border
 * between fitting and not on random shapes, saturation instead of wrap-around, and
 * host_memory_available under an address-space limit (in a child process). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "check.h"
#include "core/memory_plan.h"
#include "core/rng.h"

#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERR_SIZE 1024

static mlp_shape shape_of(const int *hidden, int hidden_count) {
    mlp_shape shape;
    char err[256];
    if (!mlp_shape_make(&shape, 784, hidden, hidden_count, 10, err, sizeof err)) {
        fprintf(stderr, "mlp_shape_make: %s\n", err);
        exit(1);
    }
    return shape;
}

static size_t item_bytes(const memory_plan *plan, const char *what) {
    for (int i = 0; i < plan->count; i++)
        if (strcmp(plan->items[i].what, what) == 0) return plan->items[i].bytes;
    return 0;
}

/* 784-256-10, batch 64 (test batches of EVAL_ROWS = 2048 rows), SGD, MNIST's 60000 + 10000. */
static void test_known_model(void) {
    mlp_shape shape = shape_of((const int[]){256}, 1);
    memory_plan plan = {0};
    memory_plan_trainer(&plan, &shape, 64, 1, 60000, 10000);
    size_t params = (784 * 256 + 256 + 256 * 10 + 10) * 4;
    CHECK(item_bytes(&plan, "parameters") == params, "parameters %zu", item_bytes(&plan, "parameters"));
    CHECK(item_bytes(&plan, "gradients") == params, "gradients");
    CHECK(item_bytes(&plan, "momentum") == params, "momentum");
    CHECK(item_bytes(&plan, "activations") == 2048 * (256 + 10) * 4, "activations");
    CHECK(item_bytes(&plan, "layer gradients") == 2 * 2048 * 256 * 4, "layer gradients");
    CHECK(item_bytes(&plan, "batch inputs") == (64 + 2048) * 784 * 4, "batch inputs");
    CHECK(item_bytes(&plan, "per-sample metrics") == 2 * 70000 * 4, "per-sample metrics");
    memory_plan adam = {0};
    memory_plan_trainer(&adam, &shape, 64, 2, 60000, 10000);
    CHECK(item_bytes(&adam, "Adam moments") == 2 * params, "Adam moments");
}

static void test_refusal_message(void) {
    mlp_shape shape = shape_of((const int[]){60000, 60000}, 2);
    memory_plan plan = {0};
    memory_plan_trainer(&plan, &shape, 512, 1, 60000, 10000);
    memory_plan_add(&plan, "initial parameters", shape.param_count * sizeof(float));
    char err[ERR_SIZE] = "";
    CHECK(!memory_plan_fits(&plan, 4000000000u, "the model 784-60000-60000-10", "host memory", err,
                            sizeof err),
          "a 60.3 GB plan fits in 4 GB");
    const char *needles[] = {"the model 784-60000-60000-10 needs about 60.3 GB", "of host memory",
                             "parameters 14.6 GB", "gradients 14.6 GB", "momentum 14.6 GB",
                             "initial parameters 14.6 GB", "and 4.0 GB is available"};
    for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
        CHECK(strstr(err, needles[i]) != NULL, "message lacks \"%s\": %s", needles[i], err);
}

/* Random shapes: the total is the sum of the items, the plan fits in exactly its total and not
 * in one byte less, and the refusal names every item. */
static void test_random_borders(rng *r) {
    for (int trial = 0; trial < 200; trial++) {
        int hidden[4], count = (int)rng_below(r, 5);
        for (int i = 0; i < count; i++) hidden[i] = 1 + (int)rng_below(r, 65536);
        mlp_shape shape = shape_of(hidden, count);
        memory_plan plan = {0};
        memory_plan_trainer(&plan, &shape, 1 + (int)rng_below(r, 65536), 1 + (int)rng_below(r, 2),
                            (int)rng_below(r, 100000), (int)rng_below(r, 100000));
        size_t sum = 0;
        for (int i = 0; i < plan.count; i++) sum += plan.items[i].bytes;
        CHECK(sum == plan.total, "trial %d: items add up to %zu, total %zu", trial, sum, plan.total);
        char err[ERR_SIZE] = "";
        CHECK(memory_plan_fits(&plan, plan.total, "m", "host memory", err, sizeof err),
              "trial %d: a plan does not fit in its own total", trial);
        CHECK(!memory_plan_fits(&plan, plan.total - 1, "m", "host memory", err, sizeof err),
              "trial %d: a plan fits in one byte less than its total", trial);
        for (int i = 0; i < plan.count; i++)
            CHECK(strstr(err, plan.items[i].what) != NULL, "trial %d: message lacks %s: %s", trial,
                  plan.items[i].what, err);
    }
}

static void test_saturation(void) {
    memory_plan plan = {0};
    memory_plan_add(&plan, "a", SIZE_MAX - 1);
    memory_plan_add(&plan, "b", 2);
    CHECK(plan.total == SIZE_MAX, "the total wrapped around to %zu", plan.total);
    char err[ERR_SIZE];
    CHECK(!memory_plan_fits(&plan, SIZE_MAX - 1, "m", "host memory", err, sizeof err),
          "a saturated plan fits");
}

/* In a child: with the address space limited to 64 MB more than is mapped now, at most 64 MB
 * is reported available. Exit status 0 if so. */
static int available_under_limit(void) {
    struct rlimit limit;
    size_t before = host_memory_available();
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long vm_kb = 0;
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmSize: %llu kB", &vm_kb) == 1) break;
    if (status) fclose(status);
    limit.rlim_cur = limit.rlim_max = (rlim_t)(vm_kb * 1024 + (64u << 20));
    if (vm_kb == 0 || setrlimit(RLIMIT_AS, &limit) != 0) return 2;
    size_t after = host_memory_available();
    if (after > (64u << 20) || after == 0) {
        fprintf(stderr, "under a limit of VmSize + 64 MB: %zu bytes available (%zu before)\n",
                after, before);
        return 1;
    }
    return 0;
}

static void test_available(void) {
    size_t available = host_memory_available();
    CHECK(available > 0 && available != SIZE_MAX, "host_memory_available() = %zu", available);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) _exit(available_under_limit());
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "host_memory_available ignores an address-space limit (child status %d)", status);
}

int main(void) {
    rng r = rng_create(test_seed("test_memory_plan"), 0);
    test_known_model();
    test_refusal_message();
    test_random_borders(&r);
    test_saturation();
    test_available();
    return test_exit_status("test_memory_plan");
}
