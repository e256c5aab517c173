#define _POSIX_C_SOURCE 200809L
#include "profiling/wall_clock.h"

#include <time.h>

double wall_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}
