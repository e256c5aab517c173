/* Estimating a training run's memory and checking it against the machine; see memory_plan.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "core/memory_plan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "core/trainer.h"

static size_t saturating_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static size_t saturating_multiply(size_t a, size_t b) {
    return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

void memory_plan_add(memory_plan *plan, const char *what, size_t bytes) {
    if (plan->count < MEMORY_PLAN_MAX_ITEMS) plan->items[plan->count++] = (memory_item){what, bytes};
    plan->total = saturating_add(plan->total, bytes);
}

void memory_plan_trainer(memory_plan *plan, const mlp_shape *shape, int batch, int state_arrays,
                         int train_count, int test_count) {
    size_t rows = (size_t)trainer_max_rows(batch);
    size_t floats = sizeof(float);
    size_t params = saturating_multiply(shape->param_count, floats);
    size_t activation_floats = 0;
    int widest = 0;
    for (int l = 1; l <= shape->layers; l++) {
        activation_floats += (size_t)shape->width[l];
        if (shape->width[l] > widest) widest = shape->width[l];
    }
    memory_plan_add(plan, "parameters", params);
    memory_plan_add(plan, "gradients", params);
    memory_plan_add(plan, state_arrays == 2 ? "Adam moments" : "momentum",
                    saturating_multiply(params, (size_t)state_arrays));
    memory_plan_add(plan, "activations", saturating_multiply(rows * activation_floats, floats));
    memory_plan_add(plan, "layer gradients", saturating_multiply(2 * rows * (size_t)widest, floats));
    memory_plan_add(plan, "batch inputs",
                    saturating_multiply((size_t)(batch + (int)rows) * shape->width[0], floats));
    memory_plan_add(plan, "per-sample metrics",
                    2 * ((size_t)train_count + (size_t)test_count) * floats);
}

/* "14.6 GB", "512.0 MB", "3.0 KB": decimal units, one decimal. */
static void format_bytes(size_t bytes, char *out, size_t out_size) {
    static const char *const units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1000.0 && unit < 6) {
        value /= 1000.0;
        unit++;
    }
    if (unit == 0) snprintf(out, out_size, "%zu bytes", bytes);
    else snprintf(out, out_size, "%.1f %s", value, units[unit]);
}

bool memory_plan_fits(const memory_plan *plan, size_t available, const char *what,
                      const char *where, char *err, size_t err_size) {
    if (plan->total <= available) return true;
    char total[32], free_bytes[32], item[32];
    format_bytes(plan->total, total, sizeof total);
    format_bytes(available, free_bytes, sizeof free_bytes);
    size_t used = (size_t)snprintf(err, err_size, "%s needs about %s of %s (", what, total, where);
    for (int i = 0; i < plan->count && used < err_size; i++) {
        format_bytes(plan->items[i].bytes, item, sizeof item);
        used += (size_t)snprintf(err + used, err_size - used, "%s%s %s", i ? ", " : "",
                                 plan->items[i].what, item);
    }
    if (used < err_size)
        snprintf(err + used, err_size - used, "), and %s is available", free_bytes);
    return false;
}

/* The value of a "Name:  N kB" line of a /proc file, in bytes; SIZE_MAX if absent. */
static size_t proc_kilobytes(const char *path, const char *name) {
    FILE *f = fopen(path, "r");
    if (!f) return SIZE_MAX;
    char line[256];
    size_t bytes = SIZE_MAX, length = strlen(name);
    unsigned long long kilobytes;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, length) == 0 && line[length] == ':' &&
            sscanf(line + length + 1, "%llu", &kilobytes) == 1)
            bytes = saturating_multiply((size_t)kilobytes, 1024);
    fclose(f);
    return bytes;
}

size_t host_memory_available(void) {
    size_t available = proc_kilobytes("/proc/meminfo", "MemAvailable");
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        size_t mapped = proc_kilobytes("/proc/self/status", "VmSize");
        size_t left = mapped == SIZE_MAX || mapped >= limit.rlim_cur ? 0 : limit.rlim_cur - mapped;
        if (left < available) available = left;
    }
    return available;
}
