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

// ---- the multistage tensor-core pieces (sm_80+): other mma shapes, ldmatrix, cp.async ----
//   m16n8k8 tf32 (g = lane / 4, t = lane % 4), each register one fp32 holding a tf32 value:
//   A (16 x 8, row-major): reg 0 = (row g, k t), 1 = (g + 8, t), 2 = (g, t + 4), 3 = (g + 8, t + 4);
//   B (8 x 8): reg 0 = (k t, column g), reg 1 = (k t + 4, column g); D as for m16n8k16.
//   ldmatrix reads 8 x 8 matrices of 16-bit values from 8 row addresses (lanes 8i .. 8i+7 give the rows
//   of matrix i); lane l receives row l / 4, values 2 (l % 4) and +1 of each matrix. Viewed as 32-bit
//   values, a 16-byte row is 4 fp32 and lane l receives (row l / 4, value l % 4): the tf32 fragments
//   above, so one ldmatrix serves both operand widths.
// Every asm below is empty on older architectures: kernels built on them guard with __CUDA_ARCH__ and
// their variants refuse older GPUs in supports().

// D += A * B for one m16n8k16 tile with bf16 operands (registers as in mma_m16n8k16).
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// D += A * B for one m16n8k16 tile with fp16 operands, A as four registers.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16(d, make_uint4(a[0], a[1], a[2], a[3]), b0, b1);
}

// D += A * B for one m16n8k8 tile with tf32 operands (fp32 bit patterns already rounded to tf32).
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// An fp32 bit pattern rounded to tf32, to nearest with ties away from zero (what cuBLAS and cuDNN do;
// the tensor cores would otherwise drop the low 13 bits, a truncation with a one-sided bias).
__device__ __forceinline__ uint32_t mma_round_tf32(uint32_t bits) {
    uint32_t r = bits;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(bits)));
#endif
    return r;
}

// Four 8 x 8 matrices of 16-bit values (or 8 x 4 of 32-bit ones) from shared memory; `addr` is this lane's
// row's shared-window address (lanes 8i .. 8i+7: matrix i), 16-byte aligned.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#else
    (void)addr;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
// The same from a generic pointer to the row.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    ldmatrix_x4(r, (uint32_t)__cvta_generic_to_shared(row));
#else
    ldmatrix_x4(r, 0u);
    (void)row;
#endif
}

// Copies 16 bytes from global to shared memory asynchronously (cp.async.cg: through L2 only), or
// writes 16 zero bytes and reads nothing when !valid (padding, edges). Both addresses 16-byte aligned;
// src must be a valid global address even when !valid.
__device__ __forceinline__ void cp_async_16_zfill(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
#else
    (void)dst; (void)src; (void)valid;
#endif
}

// Copies BYTES (4, 8 or 16) from global to shared memory asynchronously through L1 (cp.async.ca), or
// writes BYTES zero bytes and reads nothing when !valid. Both addresses BYTES-aligned; src must be a valid
// global address even when !valid.
template <int BYTES>
__device__ __forceinline__ void cp_async_ca_zfill(void* dst, const void* src, bool valid) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async.ca copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(addr), "l"(src), "n"(BYTES),
                 "r"(valid ? BYTES : 0)
                 : "memory");
#else
    (void)dst; (void)src; (void)valid;
#endif
}

// The 4-byte copy, as the fp32 staging kernels call it.
__device__ __forceinline__ void cp_async_4_zfill(void* dst, const void* src, bool valid) {
    cp_async_ca_zfill<4>(dst, src, valid);
}

// Closes the group of cp.async copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
