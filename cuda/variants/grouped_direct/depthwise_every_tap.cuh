// depthwise_every_tap.cuh — one depthwise output's sum over its filter's taps, read from x staged in shared
// memory: the simple loop beside grouped_direct's tuned plane kernels (depthwise_small_plane.cu's rows of taps,
// depthwise_plane_matrix.cu's matrix product), and their path for blocks that hold an Inf or NaN (plane's also
// for column strides of 2 or more).
#pragma once

#include "conv_shape.cuh"

// acc[i] += w[kh][kw] * x_i[oh * stride_h - pad_h + kh][ow * stride_w - pad_w + kw] over the taps, for NI images
// side by side: x's position (ih, iw) staged at xp[(ih * x_row + iw) * x_pos + i] (x = 0 outside the plane), the
// tap at wp[kh * w_row + kw]. all_taps: every tap (an Inf or NaN weight on padding then gives NaN, as in
// PyTorch); else only the taps that meet x. Taps in row-major order: the same sum on every path that calls it.
template <int NI>
__device__ void gd_every_tap(float (&acc)[NI], const ConvShape32& g, const float* xp, int x_row, int x_pos,
                             const float* wp, int w_row, int oh, int ow, bool all_taps) {
    const int ih0 = oh * g.stride_h - g.pad_h, iw0 = ow * g.stride_w - g.pad_w;  // x under tap (0, 0)
    const int kh0 = all_taps ? 0 : max(0, -ih0), kh1 = all_taps ? g.KH : min(g.KH, g.H - ih0);
    const int kw0 = all_taps ? 0 : max(0, -iw0), kw1 = all_taps ? g.KW : min(g.KW, g.W - iw0);
    for (int kh = kh0; kh < kh1; ++kh) {
        const int ih = ih0 + kh;
        for (int kw = kw0; kw < kw1; ++kw) {
            const int iw = iw0 + kw;
            const bool in = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
            const float wv = wp[kh * w_row + kw];
#pragma unroll
            for (int i = 0; i < NI; ++i) acc[i] = fmaf(in ? xp[(ih * x_row + iw) * x_pos + i] : 0.0f, wv, acc[i]);
        }
    }
}
