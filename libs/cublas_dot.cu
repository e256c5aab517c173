/* cublasSdot with its result left in device memory. In cuBLAS's default (host) pointer mode a
 * dot product copies its result to the host, so the call waits for the GPU; in device pointer
 * mode it is queued like any kernel, which is what timing with CUDA events needs and what the
 * hand-written kernels do. The handle's previous mode is restored, since other users of the
 * handle (cublas_gemm) pass alpha and beta as host pointers. The 64-bit interface takes n as is. */
#include "libs/cuda_check.h"
#include "libs/cublas_dot.h"

void cublas_dot(cublasHandle_t handle, const float *w, const float *x, size_t n, float *dot) {
    const cublas_functions &cublas = cublas_library();
    if (n == 0) { /* BLAS returns 0 for an empty vector; written here so it is never in doubt */
        cudaStream_t stream;
        CUBLAS_CHECK(cublas.get_stream(handle, &stream));
        CUDA_CHECK(cudaMemsetAsync(dot, 0, sizeof(float), stream));
        return;
    }
    cublasPointerMode_t previous;
    CUBLAS_CHECK(cublas.get_pointer_mode(handle, &previous));
    CUBLAS_CHECK(cublas.set_pointer_mode(handle, CUBLAS_POINTER_MODE_DEVICE));
    CUBLAS_CHECK(cublas.sdot_64(handle, (int64_t)n, w, 1, x, 1, dot));
    CUBLAS_CHECK(cublas.set_pointer_mode(handle, previous));
}
