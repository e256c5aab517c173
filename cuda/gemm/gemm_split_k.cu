/* The host side of split-K (gemm_split_k.cuh): how many K slices, and the kernel that adds
 * the slices' partial products in a fixed order. */
#include "libs/cuda_check.h"
#include "cuda/gemm/gemm_split_k.cuh"

namespace {

/* C (M×N) = epilogue(alpha · (partials[0] + ... + partials[splits-1]) + beta · C), the planes
 * (each M×N, row stride N) added in that order. One thread per element of C, grid-stride. */
__global__ void sum_slices_kernel(const float *__restrict__ partials, int splits, int m, int n,
                                  float alpha, float beta, float *__restrict__ c, int ldc,
                                  gemm_epilogue epilogue) {
    const size_t plane = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < plane;
         i += (size_t)gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int z = 0; z < splits; z++) sum += partials[z * plane + i];
        write_c(c, ldc, (int)(i / n), (int)(i % n), sum, alpha, beta, epilogue);
    }
}

} // namespace

int gemm_multiprocessor_count() {
    static int count = 0;
    if (count == 0) {
        int device;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    }
    return count;
}

gemm_k_split gemm_k_slices(int wanted, int k, int k_step, int min_slice) {
    long splits = wanted;
    if (splits > k / min_slice) splits = k / min_slice;
    if (splits < 2) return {1, k > 0 ? k : 1};
    int slice = (int)((k + splits - 1) / splits);
    slice = (slice + k_step - 1) / k_step * k_step;
    return {(k + slice - 1) / slice, slice}; /* rounding the slice up may leave fewer slices */
}

gemm_k_split gemm_slices(int wanted, int m, int n, int k, int k_step, int min_slice,
                         gpu_gemm_workspace workspace) {
    const size_t plane = (size_t)m * n;
    if (plane && wanted > (long)(workspace.floats / plane)) wanted = (int)(workspace.floats / plane);
    return gemm_k_slices(wanted, k, k_step, min_slice);
}

gemm_k_split gemm_choose_slices(long tiles, int m, int n, int k, int k_step, int min_slice,
                                gpu_gemm_workspace workspace) {
    const int sms = gemm_multiprocessor_count();
    if (tiles >= sms) return {1, k > 0 ? k : 1};
    const long wanted = (2L * sms + tiles - 1) / tiles;
    return gemm_slices((int)wanted, m, n, k, k_step, min_slice, workspace);
}

void gemm_sum_slices(cudaStream_t stream, const float *partials, gemm_k_split split, int m, int n,
                     float alpha, float beta, float *c, int ldc, const gemm_epilogue &epilogue) {
    constexpr unsigned THREADS = 256, MAX_BLOCKS = 4096;
    const unsigned blocks = blocks_for((size_t)m * n, THREADS);
    sum_slices_kernel<<<blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS, THREADS, 0, stream>>>(
        partials, split.splits, m, n, alpha, beta, c, ldc, epilogue);
    CUDA_CHECK_LAUNCH();
}
