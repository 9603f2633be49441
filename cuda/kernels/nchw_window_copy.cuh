// nchw_window_copy.cuh — an input window of fp32 NCHW planes copied into shared memory by cp.async
// (sm_80 and newer) in copies of 4, 2 or 1 elements, none through registers: grouped_direct's tiles and
// implicit_gemm_f16's grouped tiles (fast path: f32 x rounded in shared memory) stage their windows so.
//   A staged row holds the window's columns from iw0a = iw0 - lead, lead = iw0 mod V (0..V-1), so that
//   every copy starts at a multiple of V columns; x's rows hold a multiple of V elements and x is V-element
//   aligned (nchw_copy_vector), so a copy lies wholly inside a row of the image or wholly off it (then
//   zero-filled).
#pragma once

#include <stdint.h>

#include "conv_internal.h"
#include "mma_sync.cuh"

// Elements per copy for x at address x (0: the most a layer's rows allow, for sizing shared memory before
// the operands are known): 4 where x's rows and x are 16-byte aligned, 2 where 8-byte, else 1; 1 for
// every other layout and dtype (their kernels stage through registers).
inline int nchw_copy_vector(const conv_problem* p, uintptr_t x) {
    if (p->x_dtype != CONV_F32 || p->x_layout != CONV_NCHW) return 1;
    if (p->W % 4 == 0 && x % 16 == 0) return 4;
    if (p->W % 2 == 0 && x % 8 == 0) return 2;
    return 1;
}

// Floats per staged row that hold in_w window columns after a lead of up to V - 1, in whole copies of V.
__host__ __device__ constexpr int nchw_copy_row_floats(int in_w, int V) { return (in_w + 2 * (V - 1)) / V * V; }

// The lead of a window whose first column is iw0 (negative left of the image).
__device__ __forceinline__ int nchw_copy_lead(int iw0, int V) { return iw0 & (V - 1); }

// Copies rows [ih0, ih0 + in_h) x columns [iw0a, iw0a + row_floats) of planes [0, planes) of xp (H x W
// planes, back to back) to dst[(c * in_h + i) * row_floats + j], zeros off the image and for planes from
// `valid` on (past x's channels); row_floats and iw0a multiples of V. In flight on return: the caller
// commits and waits. Copy q = (c * in_h + i) * per_row + k goes to dst + q * V, a thread's copies THREADS
// apart, so that every thread issues its share however few planes a window has (a depthwise tile: one; a
// thread walking one column down the rows left most threads idle there), and neighbouring lanes take
// neighbouring copies of a row: coalesced. A copy's (c, i, k): CARRY, carried from the thread's copy before
// (a few adds: implicit_gemm_f16's grp tiles, whose windows of 32 or 64 planes take thousands of copies,
// ran up to 28% faster on ResNeXt's layers than with divisions); else two divisions (grouped_direct's
// tiles: carried, their depthwise tiles took up to 15 more registers and ran 3-6% slower).
template <int V, int THREADS, bool CARRY>
__device__ __forceinline__ void nchw_copy_window(const float* xp, int H, int W, int planes, int valid, int ih0,
                                                 int iw0a, int in_h, int row_floats, float* dst) {
    const int per_row = row_floats / V, total = planes * in_h * per_row;
    // CARRY: this thread's first copy, and the step of THREADS copies, as (c, i, k)
    const int dk = CARRY ? THREADS % per_row : 0, dr = CARRY ? THREADS / per_row : 0;
    const int di = CARRY ? dr % in_h : 0, dc = CARRY ? dr / in_h : 0;
    int k = CARRY ? threadIdx.x % per_row : 0, i = CARRY ? threadIdx.x / per_row % in_h : 0;
    int c = CARRY ? threadIdx.x / per_row / in_h : 0;
#pragma unroll 1  // nothing to gain: no copy waits on another (unrolled, kernels took up to 128 registers)
    for (int q = threadIdx.x; q < total; q += THREADS) {
        if constexpr (!CARRY) {
            const int r = q / per_row;
            k = q - r * per_row;
            c = r / in_h;
            i = r - c * in_h;
        }
        const int col = iw0a + k * V, ih = ih0 + i;
        const bool ok = c < valid && (unsigned)ih < (unsigned)H && col >= 0 && col + V <= W;
        const float* src = xp + (ok ? (c * H + ih) * W + col : 0);
        if constexpr (V == 4) cp_async_16_zfill(dst + q * V, src, ok);  // through L2 only
        else cp_async_ca_zfill<4 * V>(dst + q * V, src, ok);
        if constexpr (CARRY) {
            k += dk;
            if (k >= per_row) { k -= per_row; ++i; }
            i += di;
            if (i >= in_h) { i -= in_h; ++c; }
            c += dc;
        }
    }
}

// The same with V chosen at run time (nchw_copy_vector's 4, 2 or 1).
template <int THREADS, bool CARRY>
__device__ __forceinline__ void nchw_copy_window(int V, const float* xp, int H, int W, int planes, int valid,
                                                 int ih0, int iw0a, int in_h, int row_floats, float* dst) {
    if (V == 4) nchw_copy_window<4, THREADS, CARRY>(xp, H, W, planes, valid, ih0, iw0a, in_h, row_floats, dst);
    else if (V == 2) nchw_copy_window<2, THREADS, CARRY>(xp, H, W, planes, valid, ih0, iw0a, in_h, row_floats, dst);
    else nchw_copy_window<1, THREADS, CARRY>(xp, H, W, planes, valid, ih0, iw0a, in_h, row_floats, dst);
}
