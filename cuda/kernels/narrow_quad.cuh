/* Four floats into a 16-bit copy as one 8-byte store (gpu_narrow_copies.h): the gather and the
 * optimizer write their copies four elements a thread. */
#ifndef MLP_NARROW_QUAD_CUH
#define MLP_NARROW_QUAD_CUH

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/gemm/mma_sync.cuh" /* tf32_bits */

/* copy[4q .. 4q + 3] = v rounded to BF16 (nearest even); copy + 4q must be 8-byte aligned. */
__device__ __forceinline__ void store_bf16_quad(__nv_bfloat16 *copy, size_t q, float4 v) {
    const __nv_bfloat162 low = __floats2bfloat162_rn(v.x, v.y), high = __floats2bfloat162_rn(v.z, v.w);
    uint2 bits;
    bits.x = *reinterpret_cast<const uint32_t *>(&low);
    bits.y = *reinterpret_cast<const uint32_t *>(&high);
    reinterpret_cast<uint2 *>(copy)[q] = bits;
}

/* x rounded to TF32 as rung 10 rounds its factors (cvt.rna: 10 mantissa bits, to nearest, ties
 * away from zero), as an FP16: exact where that is zero or from 2^-14 to 65504 in magnitude. */
__device__ __forceinline__ __half tf32_in_fp16(float x) {
    return __float2half_rn(__uint_as_float(tf32_bits(x) & 0xFFFFE000u)); /* only TF32's 19 bits */
}

/* copy[4q .. 4q + 3] = tf32_in_fp16(v); copy + 4q must be 8-byte aligned. */
__device__ __forceinline__ void store_tf32_in_fp16_quad(__half *copy, size_t q, float4 v) {
    const __half2 low = __halves2half2(tf32_in_fp16(v.x), tf32_in_fp16(v.y));
    const __half2 high = __halves2half2(tf32_in_fp16(v.z), tf32_in_fp16(v.w));
    uint2 bits;
    bits.x = *reinterpret_cast<const uint32_t *>(&low);
    bits.y = *reinterpret_cast<const uint32_t *>(&high);
    reinterpret_cast<uint2 *>(copy)[q] = bits;
}

#endif
