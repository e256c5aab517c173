/* Loading OpenBLAS at run time (see openblas_library.h). */
#define _POSIX_C_SOURCE 200809L
#include "libs/openblas_library.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define FALLBACK_NAME "libopenblas.so.0"

/* Address space OpenBLAS's start-up takes (about 300 MB on a 2-core machine, mostly its
 * buffers), with room to spare for more threads. */
#define STARTUP_BYTES ((uint64_t)512 << 20)

static uint64_t address_space_in_use(void) {
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Under a small address-space limit OpenBLAS's start-up never returns: refused here instead. */
static void check_address_space(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
    uint64_t in_use = address_space_in_use();
    if ((uint64_t)limit.rlim_cur >= in_use + STARTUP_BYTES) return;
    fprintf(stderr,
            "mlp_train: OpenBLAS needs about %llu MB of address space to start, and the limit "
            "(ulimit -v) leaves %llu MB: raise the limit, or use --impl tiled or naive\n",
            (unsigned long long)(STARTUP_BYTES >> 20),
            (unsigned long long)(((uint64_t)limit.rlim_cur > in_use ? limit.rlim_cur - in_use : 0) >> 20));
    exit(1);
}

static const char *loaded_file; /* the name it was loaded by */

static void *open_library(void) {
    check_address_space();
    void *library = NULL;
#ifdef MLP_OPENBLAS_LIBRARY
    library = dlopen(loaded_file = MLP_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!library) library = dlopen(loaded_file = FALLBACK_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        fprintf(stderr, "mlp_train: cannot load OpenBLAS (%s): %s\n", FALLBACK_NAME, dlerror());
        exit(1);
    }
    return library;
}

/* function = the library's `name` (a function pointer of any type, through memcpy: ISO C has
 * no conversion from dlsym's void * to a function pointer). */
static void resolve(void *library, const char *name, void *function, size_t size) {
    void *symbol = dlsym(library, name);
    if (!symbol) {
        fprintf(stderr, "mlp_train: OpenBLAS has no %s: %s\n", name, dlerror());
        exit(1);
    }
    memcpy(function, &symbol, size);
}

#define RESOLVE(library, name, field) resolve(library, name, &(field), sizeof(field))

static openblas_functions functions;

static void load(void) {
    void *library = open_library();
    RESOLVE(library, "cblas_sgemm", functions.sgemm);
    RESOLVE(library, "cblas_sdot", functions.sdot);
    RESOLVE(library, "openblas_set_num_threads", functions.set_num_threads);
    RESOLVE(library, "openblas_get_parallel", functions.get_parallel);
    RESOLVE(library, "openblas_get_config", functions.get_config);
    RESOLVE(library, "openblas_get_corename", functions.get_corename);
}

const char *openblas_library_file(void) {
    openblas_library();
    return loaded_file;
}

const openblas_functions *openblas_library(void) {
    static pthread_once_t loaded = PTHREAD_ONCE_INIT;
    pthread_once(&loaded, load);
    return &functions;
}
