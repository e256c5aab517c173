/* Four floats into a BF16 copy as one 8-byte store, each rounded to nearest even: the gather
 * and the optimizer write their BF16 copies (gpu_bf16_copies.h) four elements a thread. */
#ifndef MLP_BF16_QUAD_CUH
#define MLP_BF16_QUAD_CUH

#include <cstdint>
#include <cuda_bf16.h>

/* copy[4q .. 4q + 3] = v rounded; copy + 4q must be 8-byte aligned. */
__device__ __forceinline__ void store_bf16_quad(__nv_bfloat16 *copy, size_t q, float4 v) {
    const __nv_bfloat162 low = __floats2bfloat162_rn(v.x, v.y), high = __floats2bfloat162_rn(v.z, v.w);
    uint2 bits;
    bits.x = *reinterpret_cast<const uint32_t *>(&low);
    bits.y = *reinterpret_cast<const uint32_t *>(&high);
    reinterpret_cast<uint2 *>(copy)[q] = bits;
}

#endif
