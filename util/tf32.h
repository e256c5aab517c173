/* FP32 to TF32 on the host, as the GPU's cvt.rna.tf32.f32 rounds (rung 10's factors): 10 mantissa
 * bits, to nearest, ties away from zero; the result is an FP32 value with the low 13 bits zero.
 * Infinities and NaN are returned as they are. */
#ifndef MLP_TF32_H
#define MLP_TF32_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float round_tf32(float x) {
    if (!isfinite(x)) return x;
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits = (bits + 0x1000u) & 0xFFFFE000u; /* half of the last kept bit added to the magnitude */
    memcpy(&x, &bits, sizeof bits);
    return x;
}

#endif
