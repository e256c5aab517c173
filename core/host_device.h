/* MLP_HOST_DEVICE marks an inline function that C and CUDA code share: one definition of a
 * formula for the CPU's implementations and the GPU's kernels. */
#ifndef MLP_HOST_DEVICE_H
#define MLP_HOST_DEVICE_H

#ifdef __CUDACC__
#define MLP_HOST_DEVICE __host__ __device__
#else
#define MLP_HOST_DEVICE
#endif

#endif
