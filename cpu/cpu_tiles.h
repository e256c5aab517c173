/* What the CPU's register-tiled kernels (cpu_gemm_tiled.c, cpu_output_layer.c) share: the choice
 * of vector width, the multiply-add, and small integer helpers. Include it before any function
 * of the file: its pragma applies to the code that follows. */
#ifndef MLP_CPU_TILES_H
#define MLP_CPU_TILES_H

#include <math.h>

#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
/* gcc's tuning for recent Intel cores (gcc 13 -march=native on Sapphire/Emerald Rapids) prefers
 * 256-bit vectors even where AVX-512 exists; the tiled kernels are all FMAs, and they do twice
 * the work at 512 bits. Only a hint for the vectorizer: no intrinsics, and the code stays plain
 * C. CPU_TILES_AVX512 tells the kernels to size their tiles for 32 registers of 16 floats. */
#pragma GCC target("prefer-vector-width=512")
#define CPU_TILES_AVX512 1
#else
#define CPU_TILES_AVX512 0
#endif

/* sum + x·y, fused where the target has the instruction (FP_FAST_FMAF): in ISO C mode gcc does
 * not contract a*b+c on its own. */
static inline float multiply_add(float x, float y, float sum) {
#ifdef FP_FAST_FMAF
    return fmaf(x, y, sum);
#else
    return sum + x * y;
#endif
}

static inline int min_int(int x, int y) { return x < y ? x : y; }

static inline int max_int(int x, int y) { return x > y ? x : y; }

static inline int round_up(int x, int step) { return (x + step - 1) / step * step; }

static inline int ceil_div(int x, int y) { return (x + y - 1) / y; }

#endif
