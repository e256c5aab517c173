/* Checked host allocations; see host_memory.h. */
#include "util/host_memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static void *checked(void *p, size_t bytes, const char *what) {
    if (!p) {
        fprintf(stderr, "%s: out of host memory for %s (%zu bytes)\n",
                program_invocation_short_name, what, bytes);
        exit(1);
    }
    return p;
}

void *alloc_or_exit(size_t bytes, const char *what) {
    return checked(malloc(bytes ? bytes : 1), bytes, what);
}

void *zalloc_or_exit(size_t bytes, const char *what) {
    return checked(calloc(1, bytes ? bytes : 1), bytes, what);
}

void *aligned_alloc_or_exit(size_t alignment, size_t bytes, const char *what) {
    size_t rounded = (bytes + alignment - 1) / alignment * alignment; /* aligned_alloc wants it */
    return checked(aligned_alloc(alignment, rounded ? rounded : alignment), bytes, what);
}
