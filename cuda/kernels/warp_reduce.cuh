/* Reductions across the 32 lanes of a warp with shuffles (butterfly: every lane ends with the
 * result), shared by the softmax and fused kernels. dot.cu keeps its own: there the shuffle
 * reduction is the subject of the kernel. */
#ifndef MLP_WARP_REDUCE_CUH
#define MLP_WARP_REDUCE_CUH

constexpr unsigned WARP_FULL_MASK = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(WARP_FULL_MASK, value, offset);
    return value;
}

/* (value, index) to the warp's maximum value; the smallest index among ties (the first maximum
 * wins, as on the CPU). */
__device__ __forceinline__ void warp_argmax(float &value, int &index) {
    for (int offset = 16; offset > 0; offset /= 2) {
        float other_value = __shfl_xor_sync(WARP_FULL_MASK, value, offset);
        int other_index = __shfl_xor_sync(WARP_FULL_MASK, index, offset);
        if (other_value > value || (other_value == value && other_index < index)) {
            value = other_value;
            index = other_index;
        }
    }
}

#endif
