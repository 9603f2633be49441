// hopper_sync.cuh — Hopper's asynchronous copies and their barriers, for the TMA-fed wgmma GEMM
// (tc_wgmma_tma.cuh): shared-memory mbarriers (arrive, expect a byte count, wait for a phase), the tensor
// memory accelerator's 2-D tile copy that completes on such a barrier. Like wgmma.cuh, everything here is
// empty unless compiled for sm_90a (CONV_WGMMA): its only user is a wgmma kernel.
//   An mbarrier counts arrivals and, after expect_tx, bytes; when both reach zero its phase completes
//   and the count starts over. Waiting names the parity of the phase waited for: a barrier starts in
//   phase 0, so the k-th use (k = 0, 1, ...) of a barrier completes phase k, parity k & 1.
#pragma once

#include <cstdint>

#include "wgmma.cuh"

__device__ __forceinline__ unsigned smem_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// One thread sets up a barrier that completes after `count` arrivals; the block then fences and syncs
// (mbar_fence_init, __syncthreads) before anyone uses it.
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
#ifdef CONV_WGMMA
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count) : "memory");
#else
    (void)bar; (void)count;
#endif
}

// Makes the initialised barriers visible to the asynchronous proxy (the TMA unit completes on them).
__device__ __forceinline__ void mbar_fence_init() {
#ifdef CONV_WGMMA
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef CONV_WGMMA
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_address(bar))
                 : "memory");
#else
    (void)bar;
#endif
}

// Arrives and adds `bytes` to what the current phase waits for (the copies that complete_tx on it).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
#ifdef CONV_WGMMA
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                     smem_address(bar)),
                 "r"(bytes)
                 : "memory");
#else
    (void)bar; (void)bytes;
#endif
}

// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
#ifdef CONV_WGMMA
    asm volatile(
        "{\n.reg .pred done;\nwait:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait;\n}\n" ::"r"(smem_address(bar)),
        "r"(parity)
        : "memory");
#else
    (void)bar; (void)parity;
#endif
}

// The tile of a 2-D tensor map at element coordinates (inner, outer) into shared memory at dst, in the
// map's swizzle, with zeros where it lies outside the tensor; its bytes complete_tx on `bar`. `map`: a
// __grid_constant__ kernel parameter (or global memory).
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, uint64_t* bar, int inner, int outer) {
#ifdef CONV_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
        "[%2];\n" ::"r"(smem_address(dst)),
        "l"(map), "r"(smem_address(bar)), "r"(inner), "r"(outer)
        : "memory");
#else
    (void)dst; (void)map; (void)bar; (void)inner; (void)outer;
#endif
}
