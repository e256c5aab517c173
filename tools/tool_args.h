/* Argument parsing shared by the small stand-alone tools (cpu_step_ops, cpu_fma_peak). */
#ifndef MLP_TOOL_ARGS_H
#define MLP_TOOL_ARGS_H

#include <stdbool.h>
#include <stdlib.h>

/* *out = text as a whole number in low..high; false (and *out unchanged) for anything else. */
static inline bool parse_count(const char *text, int low, int high, int *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < low || v > high) return false;
    *out = (int)v;
    return true;
}

#endif
