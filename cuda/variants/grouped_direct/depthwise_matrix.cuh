// depthwise_matrix.cuh — what grouped_direct's matrix kernels share (depthwise_plane_matrix.cu's plane_mm,
// depthwise_row_matrices.cu's rows_mm): staging one channel's filter and the planes of a run of images,
// position-major, and the 4 outputs x 4 images a lane adds at each position of x.
#pragma once

#include "conv_shape.cuh"
#include "depthwise_stage.cuh"
#include "int_divider.cuh"

// Stages channel c's depthwise filter (its KH*KW taps, as floats) at ws and the planes of images b0 .. b0 + nb - 1
// of x at xs, position-major: a position's NB images side by side in a row of XS floats (NB a multiple of 4; zeros
// for the images past the batch, whose addresses are never read). A thread loads a position's four images at once
// (gd_stage4), positions fastest (NCHW: contiguous); by_P splits an item's index by the plane's H * W positions.
// Returns whether every staged value is finite, the same in every thread (a barrier).
template <class TX>
__device__ __forceinline__ bool gd_stage_channel_planes(const ConvShape32& s, const TX* __restrict__ x,
                                                        const TX* __restrict__ w, bool x_nhwc, int c, int b0, int nb,
                                                        int NB, int XS, ConvDivider by_P, float* ws, float* xs) {
    const int taps = s.KH * s.KW, P = s.H * s.W;
    bool w_bad = false, x_bad = false;
    gd_stage<TX>(taps, ws, w_bad, [&](int i, int& at) {
        at = i;
        return w[(long long)c * taps + i];  // depthwise (C, 1, KH, KW): MCKK and MKKC alike
    });
    const long long image_step = (long long)s.C * P;
    gd_stage4<TX>(NB / 4 * P, xs, x_bad, [&](int j, int& at, TX (&v)[4]) {
        uint32_t pos;
        const int bl = 4 * (int)by_P.divmod(j, &pos);
        at = (int)pos * XS + bl;
        const long long b = b0 + bl;
        const TX* xp = x + (x_nhwc ? (b * P + pos) * s.C + c : (b * s.C + c) * P + pos);
        gd_load4(v, xp, image_step, bl, nb);
    });
    return !__syncthreads_or(w_bad || x_bad);
}

// acc[r][j] += a[r] * b[j]: a lane's 4 outputs (a, a 16-byte read of the matrix) x 4 images (b, of x).
__device__ __forceinline__ void gd_outer4(float (&acc)[4][4], float4 a, float4 b) {
    const float ar[4] = {a.x, a.y, a.z, a.w}, br[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[r][j] = fmaf(ar[r], br[j], acc[r][j]);
}
