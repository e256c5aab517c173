/* cblas_sdot behind a size_t count. CBLAS counts in blasint (32 bits in the usual builds), so a
 * longer vector is taken in chunks whose float results are added in double. OpenBLAS's kernels
 * accumulate in vector registers of floats and split long vectors over its threads. */
#include "libs/openblas_dot.h"

#include "libs/openblas_library.h"

/* The largest count passed to one cblas_sdot call: fits any blasint. */
#define SDOT_CHUNK ((size_t)1 << 30)

float cpu_dot_blas(const float *w, const float *x, size_t n) {
    double total = 0.0;
    for (size_t start = 0; start < n; start += SDOT_CHUNK) {
        size_t count = n - start < SDOT_CHUNK ? n - start : SDOT_CHUNK;
        total += openblas_library()->sdot((blasint)count, w + start, 1, x + start, 1);
    }
    return (float)total;
}
