/* A typed device allocation for the GPU test programs: filled from a host vector, poisoned with
 * all bits set (NaN as a float, -1 as an integer) so an element a kernel forgets to write fails
 * its comparison, and read back once all queued work is done. */
#ifndef MLP_TEST_DEVICE_BUFFER_CUH
#define MLP_TEST_DEVICE_BUFFER_CUH

#include <vector>

#include "libs/cuda_check.h"

template <typename T> struct device_buffer {
    T *ptr = nullptr;
    size_t count = 0;
    explicit device_buffer(size_t n) : count(n) { CUDA_CHECK(cudaMalloc(&ptr, (n ? n : 1) * sizeof(T))); }
    explicit device_buffer(const std::vector<T> &host) : device_buffer(host.size()) { upload(host); }
    ~device_buffer() { cudaFree(ptr); }
    device_buffer(const device_buffer &) = delete;
    void upload(const std::vector<T> &host) {
        CUDA_CHECK(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
    }
    void poison() { CUDA_CHECK(cudaMemset(ptr, 0xFF, count * sizeof(T))); }
    /* Waits for every stream, then copies the contents to the host. */
    std::vector<T> download() const {
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<T> host(count);
        CUDA_CHECK(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }
};

#endif
