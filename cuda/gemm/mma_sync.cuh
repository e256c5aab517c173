/* The warp-level tensor-core operations of the mma.sync rungs (6, 7 and 10): the 16×8 products
 * in TF32 (m16n8k8) and BF16 (m16n8k16), FP32 accumulate; rounding to TF32; and ldmatrix,
 * which loads a BF16 tile's fragments from shared memory.
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16"; g = lane / 4,
 * t = lane % 4; A is 16×K, B is K×8, C is 16×8):
 * - m16n8k8 TF32: A a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4);
 *   B b0 = (t, g), b1 = (t + 4, g).
 * - m16n8k16 BF16, pairs along k (lower k in the low half): A (g, 2t), (g + 8, 2t), (g, 2t + 8),
 *   (g + 8, 2t + 8); B (2t, g), (2t + 8, g).
 * - C: c0, c1 = (g, 2t .. 2t + 1), c2, c3 = (g + 8, 2t .. 2t + 1). */
#ifndef MLP_MMA_SYNC_CUH
#define MLP_MMA_SYNC_CUH

#include <cstdint>
#include <cuda_bf16.h>

#include "cuda/gemm/gemm_async_copy.cuh"

/* x rounded to TF32 (cvt.rna: 10 mantissa bits, to nearest, ties away), as the register a TF32
 * mma reads: an FP32 pattern whose low 13 bits the tensor cores ignore. */
__device__ __forceinline__ uint32_t tf32_bits(float x) {
    uint32_t bits;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
    return bits;
}

/* d += a · b for one 16×8×8 tile in TF32. */
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* d += a · b for one 16×8×16 tile in BF16. */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Four 8×8 matrices of 16-bit values from shared memory, one instruction a warp: lane L gives
 * the address of row L % 8 of matrix L / 8 (16 bytes, aligned), and gets, of each matrix in
 * turn, elements (L / 4, 2·(L % 4)) and the next, or with TRANSPOSE (2·(L % 4), L / 4) and the
 * one below: a BF16 mma fragment either way. */
template <bool TRANSPOSE>
__device__ __forceinline__ void load_matrices(const __nv_bfloat16 *row, uint32_t (&m)[4]) {
    if constexpr (TRANSPOSE)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                     : "r"(shared_address(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                     : "r"(shared_address(row)));
}

/* The BF16 fragments of a tile in shared memory whose element (i, k) is tile[TILE::at(i, k)]:
 * i a row of C (A's tile) or a column (B's), lines along K where TILE::K_CONTIGUOUS (plain
 * ldmatrix), else along i (ldmatrix.trans). Each line starts 16-byte aligned.
 * A's fragment of the 16×16 tile at rows row.., k kk..: its matrices are rows +0 and +8 at
 * k +0, then at k +8 (a0 to a3). */
template <typename TILE>
__device__ __forceinline__ void bf16_a_fragment(const __nv_bfloat16 *tile, int row, int kk, uint32_t (&af)[4]) {
    const int lane = threadIdx.x % 32, matrix = lane / 8, r = lane % 8;
    const int i = row + matrix % 2 * 8 + (TILE::K_CONTIGUOUS ? r : 0);
    const int k = kk + matrix / 2 * 8 + (TILE::K_CONTIGUOUS ? 0 : r);
    load_matrices<!TILE::K_CONTIGUOUS>(tile + TILE::at(i, k), af);
}

/* B's fragments of the two 16×8 tiles at columns col.. col + 7 and col + 8.., k kk..: columns
 * +0 at k +0 and +8 (the first tile's b0, b1), then columns +8. */
template <typename TILE>
__device__ __forceinline__ void bf16_b_fragments(const __nv_bfloat16 *tile, int col, int kk, uint32_t (&bf)[2][2]) {
    const int lane = threadIdx.x % 32, matrix = lane / 8, r = lane % 8;
    const int j = col + matrix / 2 * 8 + (TILE::K_CONTIGUOUS ? r : 0);
    const int k = kk + matrix % 2 * 8 + (TILE::K_CONTIGUOUS ? 0 : r);
    load_matrices<!TILE::K_CONTIGUOUS>(tile + TILE::at(j, k), reinterpret_cast<uint32_t (&)[4]>(bf));
}

#endif
