// implicit_gemm.cuh — the implicit-GEMM view of a convolution, shared by implicit_gemm, fp16, wmma and
// wmma_tf32:
//   Y[m, pixel] = sum_k W[m, k] * Xunroll[k, pixel],   k in [0, CKK = C*KH*KW),
//                                                      pixel = (b, oh, ow) in [0, NPIX = B*OH*OW),
//   Xunroll[k, pixel] = x[b, c, oh*stride_h - pad_h + kh*dilation_h, ow*stride_w - pad_w + kw*dilation_w]
//                       (0 outside the image), k = (c, kh, kw).
// With G groups it is G such GEMMs side by side: group g's maps [g*Mg, (g+1)*Mg) reduce over its
// channels [g*Cg, (g+1)*Cg) only (Mg = M/G, Cg = C/G), so CKK = Cg*KH*KW and c above is the channel
// within the group; the kernels shift x by the group's first channel (x_group) and keep block tiles
// inside one group's maps. Only the pipelined kernel (igemm_pipeline.cuh) takes G > 1.
// The digits of k follow the filter's own layout: k = (c, kh, kw) for MCKK, (kh, kw, c) for MKKC, so
// that W is the weight bank viewed as (M, CKK) row-major either way and its tiles load contiguously.
// Xunroll never exists in global memory: the tile loaders build tiles of it in shared memory from x.
//
// The layers, after CUTLASS's conv layering (tile iterators / mainloop / warp-level math / epilogue):
//   igemm_tile_loaders.cuh  register-staged loaders of the W and Xunroll tiles (x, w in f32/f16/bf16,
//                           x NCHW or NHWC; scalar or four-element quads), and the tiles' operand types;
//   igemm_math_simt.cuh     math policies on CUDA cores: fp32 4x4 and 8x8 thread tiles, half2 runs;
//   igemm_math_wmma.cuh     math policies on tensor cores: wmma fp16, bf16, tf32 fragments;
//   igemm_epilogue.cuh      the store: bias, ReLU, y's dtype, NCHW or NHWC;
//   igemm_mainloop.cuh      the single-buffered kernel that composes them (64 x 64 policies), and its launch;
//   igemm_pipeline.cuh      the double-buffered kernel of the 8 x 8 SIMT policy, with quad (16-byte) loaders,
//                           1x1 NHWC as a plain GEMM and split-K (split_k.cuh reduces the partial sums).
// A variant is then a table of launch configurations naming a math policy.
//
// Index math is int32: the dispatcher splits the batch so that one launch's x and y (and the
// unpooled conv output) have < 2^30 elements and w < 2^31, which bounds every product (see each one).
#pragma once

#include "conv_shape.cuh"

// The GEMM's view of the shape, beside the convolution's geometry.
struct ConvGemmShape : ConvShape32 {
    int OHW;    // OH*OW: pixels of one output map
    int CKK;    // Cg*KH*KW: the GEMM's reduction length (one group's)
    int NPIX;   // B*OH*OW: the GEMM's N (all images of the launch side by side)
    int image;  // C*H*W: elements of one input image
    // Groups: G of them, Cg channels and Mg maps each (C, M and 1, 1 without groups); x_group, the
    // elements from one group's first channel in x to the next's (Cg*H*W in NCHW, Cg in NHWC).
    int G, Cg, Mg, x_group;
    // k's digits, slowest first: (c, kh, kw) for MCKK filters, (kh, kw, c) for MKKC, c < Cg; how many
    // values each takes, and k_mid*k_lo, the k positions per value of the top digit.
    int k_top, k_mid, k_lo, k_mid_lo;
};

static inline ConvGemmShape conv_gemm_shape(const conv_problem* p) {
    ConvGemmShape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.OHW = s.OH * s.OW;                      // <= M*OH*OW <= 2^30
    s.G = (int)p->groups;                     // <= C
    s.Cg = s.C / s.G;
    s.Mg = s.M / s.G;
    s.CKK = s.Cg * s.KH * s.KW;               // <= M*Cg*KH*KW, the filter bank: <= 2^30
    s.NPIX = (int)(p->B * s.OHW);             // <= B*M*OH*OW <= 2^30 per launch
    s.image = (int)(p->C * p->H * p->W);
    s.x_group = p->x_layout == CONV_NHWC ? s.Cg : s.Cg * s.H * s.W;  // <= C*H*W
    const bool kkc = p->w_layout == CONV_MKKC;
    s.k_top = kkc ? s.KH : s.Cg;
    s.k_mid = kkc ? s.KW : s.KH;
    s.k_lo = kkc ? s.Cg : s.KW;
    s.k_mid_lo = s.k_mid * s.k_lo;            // <= CKK
    return s;
}

// ceil(n / tile) without the overflow of (n + tile - 1) near 2^31.
static __host__ __device__ inline int conv_tiles(int n, int tile) { return n / tile + (n % tile != 0); }

// Blocks along gridDim.y: the M tiles, which the kernels loop over when there are more than 65535.
static inline unsigned conv_grid_y(int m_tiles) { return (unsigned)(m_tiles < 65535 ? m_tiles : 65535); }

// The M tiles of BM maps when no tile straddles two groups: each group's Mg maps tiled on their own
// (G * ceil(Mg/BM) <= M tiles; the last of a group may be partly empty).
static __host__ __device__ inline int conv_group_m_tiles(const ConvGemmShape& s, int BM) {
    return s.G * conv_tiles(s.Mg, BM);
}

// M tile tm (of conv_group_m_tiles) as its group, its first map and the end of its group's maps.
struct GroupMTile {
    int g, m0, m_end;

    __device__ GroupMTile(const ConvGemmShape& s, int BM, int tm) {
        const int per_group = conv_tiles(s.Mg, BM);
        g = tm / per_group;
        m_end = (g + 1) * s.Mg;                     // <= M
        m0 = g * s.Mg + (tm - g * per_group) * BM;  // < m_end
    }
};
