// mma_sync.cuh — the tensor-core pieces the mma.sync kernels share: fp16 pair packing and one
// m16n8k16 multiply-add (fp16 operands, fp32 accumulation; sm_80 and newer).
//   Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4), each register two fp16 values:
//   A (16 x 16, row-major): reg 0 = row g, k 2t and 2t+1; reg 1 = row g + 8, same k; regs 2, 3 = the
//   same rows at k + 8. B (16 x 8): reg 0 = k 2t, 2t+1 of column g; reg 1 = k + 8. D (16 x 8, fp32):
//   regs 0, 1 = row g, columns 2t, 2t+1; regs 2, 3 = row g + 8.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

// Two floats as one fp16 pair register, lo in the low 16 bits (the smaller k).
__device__ __forceinline__ uint32_t mma_pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// D += A * B for one m16n8k16 tile: a = A fragment (4 x f16x2), b0/b1 = B fragment (2 x f16x2).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
#endif
}

// Zeroes accumulators: A x B tiles of m16n8 fp32 fragments.
template <int A, int B>
__device__ __forceinline__ void mma_zero(float (&acc)[A][B][4]) {
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int j = 0; j < B; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}
