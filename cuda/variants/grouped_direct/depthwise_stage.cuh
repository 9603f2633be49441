// depthwise_stage.cuh — how grouped_direct's large-filter depthwise kernels (depthwise_large.cu,
// depthwise_small_plane.cu, depthwise_plane_matrix.cu) copy x's window and the filters into shared memory.
#pragma once

#include "tensor_io.cuh"

// Values a thread loads at once, so that their latencies overlap: a block that stages one value at a time waits
// out the memory's latency on every one, and where every block of the grid stages at once (batch 1, one wave),
// none computes meanwhile. H200: UniRepLKNet-S's 13x13 on 7x7, fp32 batch 32, 28.2 us one at a time, 20.7 four,
// 20.3 eight.
constexpr int GD_STAGE_LOADS = 8;

// Stages a block's filters (nw values, load_w) and x (nx values, load_x) into dst as floats, in one pass: a thread
// loads GD_STAGE_LOADS values of either (load(i, at): the element, and where it goes in dst, or at < 0 for nowhere)
// before it stores any, so that each value's index is split once, the loads' latencies overlap, and a block waits
// out the memory's latency once for both arrays (batch 1: one wave, every block staging at once, none computing).
// They are widened at the store: a conversion beside its load waits for it (f16 / bf16: 3-12% slower than one load
// at a time, H200). w_bad / x_bad: a staged value of that array is not finite. (Rows of contiguous values a warp
// each, with no index to split a value, were slower: NHWC rows are a block's few channels, most lanes idle; H200,
// 27x27 on 14x14 fp16 NHWC 80 -> 125 us.)
template <class T, class LoadW, class LoadX>
__device__ __forceinline__ void gd_stage(int nw, int nx, float* dst, bool& w_bad, bool& x_bad, LoadW load_w,
                                         LoadX load_x) {
    const int n = nw + nx;
    for (int i0 = threadIdx.x; i0 < n; i0 += GD_STAGE_LOADS * blockDim.x) {
        T v[GD_STAGE_LOADS];
        int at[GD_STAGE_LOADS];
#pragma unroll
        for (int u = 0; u < GD_STAGE_LOADS; ++u) {
            const int i = i0 + u * (int)blockDim.x;
            at[u] = -1;
            v[u] = i < nw ? load_w(i, at[u]) : i < n ? load_x(i - nw, at[u]) : T{};
        }
#pragma unroll
        for (int u = 0; u < GD_STAGE_LOADS; ++u) {
            if (at[u] < 0) continue;
            const float f = conv_to_float(v[u]);
            (i0 + u * (int)blockDim.x < nw ? w_bad : x_bad) |= !isfinite(f);
            dst[at[u]] = f;
        }
    }
}

// One array (n values), for kernels that stage the filters and x in two passes: lk_*, whose filters' finiteness
// decides which of x's rows are read (one pass read every row of x's window and lost 5-15% at batch 32, and 2-14% on
// grids of one wave at batch 1; H200, bench/results/nvidia-h200/large_kernel-lk-onepass-dropped.md), plane from
// batch 4 and plane_mm (one pass lost 1-3% there: a grid of several waves hides the latency anyway).
template <class T, class Load>
__device__ __forceinline__ void gd_stage(int n, float* dst, bool& bad, Load load) {
    gd_stage<T>(n, 0, dst, bad, bad, load, load);  // (no x: the compiler drops the x half)
}

// x's values of four images at once, for kernels that keep four images side by side in shared memory (plane from
// batch 4): a thread loads one position's four values (four loads, each coalesced across the warp) and stores them
// as one float4, the position's index split once for the four. load4(j, at, v): the four values of item j (zeros
// for images past the batch) and where they go in dst (a multiple of 4), or at < 0 for nowhere. Value by value,
// each split its own index and stored a word: ~60 instructions a value, 15% of plane's instructions and a
// barrier stall of 12% more at UniRepLKNet-T's 13x13 on 28x28, fp32 batch 32; four at once, that layer 85.7 ->
// 77.1 us and the large_kernel suite's plane +15% (fp32) / +10% (fp16) at batch 32; plane_mm's 7x7 planes +4-10% at
// batches 8-64 (H200, bench/results/nvidia-h200/large_kernel-plane-stage4.md).
// An item's four values for gd_stage4, images b .. b + 3 of n: xp[0], xp[step], xp[2 step], xp[3 step], zeros for
// images past the batch (their addresses are never read).
template <class T>
__device__ __forceinline__ void gd_load4(T (&v)[4], const T* xp, long long step, int b, int n) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = b + k < n ? xp[k * step] : T{};
}

template <class T, class Load4>
__device__ __forceinline__ void gd_stage4(int n, float* dst, bool& bad, Load4 load4) {
    constexpr int QUADS = GD_STAGE_LOADS / 4;
    for (int j0 = threadIdx.x; j0 < n; j0 += QUADS * blockDim.x) {
        T v[QUADS][4];
        int at[QUADS];
#pragma unroll
        for (int u = 0; u < QUADS; ++u) {
            const int j = j0 + u * (int)blockDim.x;
            at[u] = -1;
            if (j < n) load4(j, at[u], v[u]);
        }
#pragma unroll
        for (int u = 0; u < QUADS; ++u) {
            if (at[u] < 0) continue;
            const float4 f = make_float4(conv_to_float(v[u][0]), conv_to_float(v[u][1]), conv_to_float(v[u][2]),
                                         conv_to_float(v[u][3]));
            bad |= !(isfinite(f.x) && isfinite(f.y) && isfinite(f.z) && isfinite(f.w));
            *reinterpret_cast<float4*>(dst + at[u]) = f;
        }
    }
}
