// wgmma.cuh — Hopper's warpgroup tensor-core instructions (wgmma, sm_90a only) for the tensor-core
// implicit GEMM (tc_wgmma.cuh): shared-memory matrix descriptors, the m64nNk16 multiply-add with fp16 or
// bf16 operands and fp32 accumulation, and the fences and waits around it.
//   A warpgroup (4 consecutive warps, the first one's index a multiple of 4) issues one wgmma together:
//   D (64 x N) += A (64 x 16) * B^T (16 x N), A and B read from shared memory through descriptors, D in
//   registers: warp w of the group holds rows 16w .. 16w + 15, thread (g = lane / 4, t = lane % 4) the
//   values d[4j + 2h + e] = D[16w + g + 8h, 8j + 2t + e] — per n8 column block j the layout of an
//   mma.sync m16n8 accumulator, so the mma.sync epilogues store wgmma results unchanged.
//   Operand layout (both "K-major": a row of A is a pixel, a row of B a map, k contiguous): rows of 128
//   bytes, 16-byte chunk c of row r at chunk c ^ (r % 8) — the 128-byte swizzle, which is also the
//   layout tc_igemm.cuh's loader writes for 8-chunk rows — with each tile 1024-byte aligned (the
//   swizzle is a function of address bits 4-9). The k-step j of a 128-byte row starts 32j bytes in.
// Everything here is empty unless compiled for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL): the kernels guard
// with the same macro and their configurations refuse GPUs and builds without it.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONV_WGMMA 1
#endif

// The descriptor of a K-major, 128-byte-swizzled tile at `tile` (+ 32j bytes for k-step j): start
// address / 16 in bits 0-13, the leading-dimension offset (unused by swizzled K-major layouts: 1) in
// bits 16-29, the stride between 8-row groups (1024 bytes) / 16 in bits 32-45, swizzle mode 1 (128
// bytes) in bits 62-63.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* tile) {
    const uint64_t addr = (uint64_t)__cvta_generic_to_shared(tile);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

// Before the first wgmma of a batch: orders this warpgroup's earlier register accesses (the zeroed
// accumulators) before the wgmma reads them.
__device__ __forceinline__ void wgmma_fence() {
#ifdef CONV_WGMMA
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

// Closes the batch of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
#ifdef CONV_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Waits until at most N of this warpgroup's committed batches are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef CONV_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Shared memory written by ordinary stores or cp.async (the generic proxy) and read next by wgmma (the
// async proxy): each writing thread fences after its writes land, before the barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
#ifdef CONV_WGMMA
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Keeps the compiler from moving accesses to the accumulators across a wgmma fence, commit or wait
// (the asm above does not name the registers the running wgmma writes).
template <int R>
__device__ __forceinline__ void wgmma_pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The instruction, its accumulators written out (asm takes no register arrays; CONV_WGMMA_D8(i) names
// d[i .. i+7]); TYPES: the operand types.
#define CONV_WGMMA_D8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define CONV_WGMMA_M64N64K16(TYPES) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" TYPES " {" \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
                 : CONV_WGMMA_D8(0), CONV_WGMMA_D8(8), CONV_WGMMA_D8(16), CONV_WGMMA_D8(24) \
                 : "l"(desc_a), "l"(desc_b), "r"(1))

#define CONV_WGMMA_M64N128K16(TYPES) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" TYPES " {" \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                 : CONV_WGMMA_D8(0), CONV_WGMMA_D8(8), CONV_WGMMA_D8(16), CONV_WGMMA_D8(24), \
                   CONV_WGMMA_D8(32), CONV_WGMMA_D8(40), CONV_WGMMA_D8(48), CONV_WGMMA_D8(56) \
                 : "l"(desc_a), "l"(desc_b), "r"(1))

#define CONV_WGMMA_M64N256K16(TYPES) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32" TYPES " {" \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n" \
                 : CONV_WGMMA_D8(0), CONV_WGMMA_D8(8), CONV_WGMMA_D8(16), CONV_WGMMA_D8(24), \
                   CONV_WGMMA_D8(32), CONV_WGMMA_D8(40), CONV_WGMMA_D8(48), CONV_WGMMA_D8(56), \
                   CONV_WGMMA_D8(64), CONV_WGMMA_D8(72), CONV_WGMMA_D8(80), CONV_WGMMA_D8(88), \
                   CONV_WGMMA_D8(96), CONV_WGMMA_D8(104), CONV_WGMMA_D8(112), CONV_WGMMA_D8(120) \
                 : "l"(desc_a), "l"(desc_b), "r"(1))

// d += A * B^T for one k16 step: N = 64, 128 or 256 columns, bf16 or fp16 operands.
template <int N, bool BF16>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b) {
    static_assert(N == 64 || N == 128 || N == 256, "the m64nNk16 shapes written out above");
#ifdef CONV_WGMMA
    if constexpr (N == 64) {
        if constexpr (BF16) CONV_WGMMA_M64N64K16(".bf16.bf16");
        else CONV_WGMMA_M64N64K16(".f16.f16");
    } else if constexpr (N == 128) {
        if constexpr (BF16) CONV_WGMMA_M64N128K16(".bf16.bf16");
        else CONV_WGMMA_M64N128K16(".f16.f16");
    } else {
        if constexpr (BF16) CONV_WGMMA_M64N256K16(".bf16.bf16");
        else CONV_WGMMA_M64N256K16(".f16.f16");
    }
#else
    (void)d; (void)desc_a; (void)desc_b;
#endif
}

#undef CONV_WGMMA_D8
#undef CONV_WGMMA_M64N64K16
#undef CONV_WGMMA_M64N128K16
#undef CONV_WGMMA_M64N256K16
