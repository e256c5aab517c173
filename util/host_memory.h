/* Host memory a program cannot go on without: on failure the process ends with status 1 and a
 * message naming the program, what the memory was for and how much was asked. */
#ifndef MLP_HOST_MEMORY_H
#define MLP_HOST_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *alloc_or_exit(size_t bytes, const char *what);  /* malloc */
void *zalloc_or_exit(size_t bytes, const char *what); /* calloc: zeroed */
/* aligned to `alignment` (a power of two), the size rounded up to a multiple of it */
void *aligned_alloc_or_exit(size_t alignment, size_t bytes, const char *what);

#ifdef __cplusplus
}
#endif

#endif
