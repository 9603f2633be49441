// hopper_sync.cuh — Hopper's asynchronous copies and their barriers, for the TMA-fed wgmma GEMM
// (tc_wgmma_tma.cuh): shared-memory mbarriers (arrive, expect a byte count, wait for a phase), the tensor
// memory accelerator's tile and im2col copies that complete on such a barrier. Like wgmma.cuh,
// everything here is empty unless compiled for sm_90a (CONV_WGMMA): its only user is a wgmma kernel.
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

// The tile of a 2-D or 3-D tensor map at element coordinates (innermost first) into shared memory at dst,
// in the map's swizzle, with zeros where it lies outside the tensor; its bytes complete_tx on `bar`.
// `map`: a __grid_constant__ kernel parameter (or global memory).
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, uint64_t* bar, int c0, int c1) {
#ifdef CONV_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
        "[%2];\n" ::"r"(smem_address(dst)),
        "l"(map), "r"(smem_address(bar)), "r"(c0), "r"(c1)
        : "memory");
#else
    (void)dst; (void)map; (void)bar; (void)c0; (void)c1;
#endif
}

__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, uint64_t* bar, int c0, int c1, int c2) {
#ifdef CONV_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];\n" ::"r"(smem_address(dst)),
        "l"(map), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
#else
    (void)dst; (void)map; (void)bar; (void)c0; (void)c1; (void)c2;
#endif
}

// Shared memory at src (the box's layout in the map's swizzle, 1024-byte aligned) into a 2-D tensor map's box at
// element coordinates (innermost first), clipped to the tensor; the copy joins the thread's open bulk group
// (tma_store_commit). Writes of src by other threads are made visible to the copy engine first
// (fence_proxy_async_shared by each writer, then a barrier).
__device__ __forceinline__ void tma_store_2d(const void* map, const void* src, int c0, int c1) {
#ifdef CONV_WGMMA
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
                 "r"(smem_address(src)), "r"(c0), "r"(c1)
                 : "memory");
#else
    (void)map; (void)src; (void)c0; (void)c1;
#endif
}

// The thread's bulk groups of stores: close the open one; wait until every closed one has read its shared
// memory (the buffer may be written again); wait until every closed one is done (its writes performed).
__device__ __forceinline__ void tma_store_commit() {
#ifdef CONV_WGMMA
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void tma_store_wait_read() {
#ifdef CONV_WGMMA
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void tma_store_wait_all() {
#ifdef CONV_WGMMA
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// An im2col column of a 4-D (N, H, W, C) tensor map: channels c.. of the map's pixels-per-column pixels,
// the first at (n, h + off_h, w + off_w), the next ones stepping through the map's bounding box (shifted by
// the offsets) at its traversal strides, W fastest, then H, then N; zeros outside the tensor.
__device__ __forceinline__ void tma_load_im2col(void* dst, const void* map, uint64_t* bar, int c, int w, int h, int n,
                                                unsigned short off_w, unsigned short off_h) {
#ifdef CONV_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
        "%6}], [%2], {%7, %8};\n" ::"r"(smem_address(dst)),
        "l"(map), "r"(smem_address(bar)), "r"(c), "r"(w), "r"(h), "r"(n), "h"(off_w), "h"(off_h)
        : "memory");
#else
    (void)dst; (void)map; (void)bar; (void)c; (void)w; (void)h; (void)n; (void)off_w; (void)off_h;
#endif
}
