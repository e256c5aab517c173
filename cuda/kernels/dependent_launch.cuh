/* Programmatic dependent launch (Hopper, compute capability 9.0 on): the next kernel on the
 * stream is launched before this one has finished, and waits for it on the device.
 *
 * Without it, the GPU launches a kernel only once the kernel before it has finished and its
 * writes have been flushed, so every kernel boundary of a step pays the whole launch of the next
 * grid. A step of the tiled implementation is seven kernels, four of them one after the other.
 *
 * With it, the kernels of a step are launched with launch_dependent() and open with
 * wait_for_previous_kernel() (griddepcontrol.wait), before touching memory: the next grid is set
 * up while this one runs, its blocks are started as this one's last blocks exit, and each waits
 * there until the previous grid has completed and its writes are visible. Every kernel waits
 * before it reads or writes anything, so memory sees the stream's order, as without it. (Reading
 * what was written two kernels back before the wait would be safe, as the kernel just before has
 * passed its own wait by then; tried in output_layer.cu for the layer's weights, it was no
 * faster.)
 *
 * The kernels do not signal earlier than their exit (griddepcontrol.launch_dependents): tried on
 * an H200, the next kernel's blocks, started early and waiting beside the running kernel's, made
 * every batch-512 epoch slower (signalled after the GEMMs' main loop, 4.84 ms against 4.44 at
 * exit; in the gather alone, 5.11 against 4.06); docs/kernels.md has the measurements.
 *
 * A kernel that opens with the wait may also be launched the ordinary way (<<<>>>, or on a GPU
 * without the feature): the wait then returns at once. Stream capture keeps the relation as a
 * programmatic edge of the graph, so a recorded step replays it. */
#ifndef MLP_DEPENDENT_LAUNCH_CUH
#define MLP_DEPENDENT_LAUNCH_CUH

#include <utility>

#include "libs/cuda_check.h"

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* Whether this GPU has programmatic dependent launch (compute capability 9.0 on). */
inline bool dependent_launch_available() {
    static int major = -1;
    if (major < 0) {
        int device;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    }
    return major >= 9;
}

/* kernel<<<grid, block, shared_bytes, stream>>>(args...), launched before the previous kernel on
 * the stream has finished; the kernel must open with wait_for_previous_kernel(). `cluster`, when
 * more than 1, groups the grid's blocks into clusters of 1 × 1 × cluster. Checks the launch. */
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                      cudaStream_t stream, unsigned cluster, Args &&...args) {
    cudaLaunchAttribute attributes[2] = {};
    unsigned count = 0;
    if (dependent_launch_available()) {
        attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attributes[count++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        attributes[count].id = cudaLaunchAttributeClusterDimension;
        attributes[count++].val.clusterDim = {1, 1, cluster};
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = count;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

#endif
