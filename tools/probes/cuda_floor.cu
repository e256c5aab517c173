/* cuda_floor: what every CUDA program pays on this machine, whatever it computes: creating the
 * CUDA context (printed, in ms) and, around the whole process as the caller times it, starting
 * and exiting (at exit the driver tears the context down). `tools/device_run.sh startup` runs it
 * beside mlp_train, so that mlp_train's whole-process time can be read against this floor. */
#include <cstdio>
#include <ctime>

#include <cuda_runtime.h>

static double seconds() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main() {
    double start = seconds();
    cudaError_t status = cudaFree(nullptr); /* creates the context */
    double created = seconds();
    if (status != cudaSuccess) {
        std::fprintf(stderr, "cuda_floor: cannot create a CUDA context: %s\n", cudaGetErrorString(status));
        return 1;
    }
    std::printf("CUDA context created in %.1f ms\n", 1e3 * (created - start));
    return 0;
}
