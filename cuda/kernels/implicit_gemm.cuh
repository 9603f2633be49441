// implicit_gemm.cuh — the implicit-GEMM view of a convolution, shared by fused, fp16, wmma and
// wmma_tf32:
//   Y[m, pixel] = sum_k W[m, k] * Xunroll[k, pixel],   k = (c, kh, kw) in [0, CKK),
//                                                      pixel = (b, oh, ow) in [0, NPIX),
//   Xunroll[k, pixel] = x[b, c, oh*stride_h - pad_h + kh*dilation_h, ow*stride_w - pad_w + kw*dilation_w]
//                       (0 outside the image).
// W is simply the weight bank viewed as (M, CKK) row-major. Xunroll never exists in global memory:
// the loaders below build BK x BN tiles of it in shared memory straight from x.
//
// The loaders are register-staged: fetch() issues the global loads of the next tile into registers
// (so they are in flight while the current tile is being multiplied), store() converts and writes
// them into shared memory. Tiles are zero-filled past every edge (k >= CKK, m >= M, pixel >= NPIX,
// padding), so the multiply loops need no guards; only the final store to y checks bounds.
//
// Index math is int32: the dispatcher guarantees that one launch's x, y and w each have < 2^31
// elements, which bounds every product below (see the comments at each one).
#pragma once

#include <cuda_fp16.h>

#include "cuda_util.cuh"

// The GEMM's view of the shape, in the int32 the kernels index with.
struct ConvGemmShape {
    int C, H, W, KH, KW;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int M, OH, OW;
    int OHW;    // OH*OW: pixels of one output map
    int KK;     // KH*KW
    int CKK;    // C*KH*KW: the GEMM's reduction length
    int NPIX;   // B*OH*OW: the GEMM's N (all images of the launch side by side)
    int image;  // C*H*W: elements of one input image
};

static inline ConvGemmShape conv_gemm_shape(const conv_problem* p) {
    ConvGemmShape s;
    s.C = (int)p->C; s.H = (int)p->H; s.W = (int)p->W; s.KH = (int)p->KH; s.KW = (int)p->KW;
    s.stride_h = (int)p->stride_h; s.stride_w = (int)p->stride_w;
    s.pad_h = (int)p->pad_h; s.pad_w = (int)p->pad_w;
    s.dil_h = (int)p->dilation_h; s.dil_w = (int)p->dilation_w;
    s.M = (int)p->M; s.OH = (int)conv_out_h(p); s.OW = (int)conv_out_w(p);
    s.OHW = s.OH * s.OW;                      // <= M*OH*OW < 2^31
    s.KK = s.KH * s.KW;
    s.CKK = (int)(p->C * p->KH * p->KW);      // <= M*C*KH*KW < 2^31
    s.NPIX = (int)(p->B * s.OHW);             // <= B*M*OH*OW < 2^31 per launch
    s.image = (int)(p->C * p->H * p->W);
    return s;
}

// ceil(n / tile) without the overflow of (n + tile - 1) near 2^31.
static __host__ __device__ inline int conv_tiles(int n, int tile) { return n / tile + (n % tile != 0); }

// Blocks along gridDim.y: the M tiles, which the kernels loop over when there are more than 65535.
static inline unsigned conv_grid_y(int m_tiles) { return (unsigned)(m_tiles < 65535 ? m_tiles : 65535); }

// Offset of y[b, 0, oh, ow] for pixel = (b, oh, ow); add m*OHW for map m. b*M*OHW + r < B*M*OHW.
__device__ inline int conv_y_offset(const ConvGemmShape& s, int pixel) {
    const int b = pixel / s.OHW;
    return b * s.M * s.OHW + (pixel - b * s.OHW);
}

// One column of Xunroll (one output pixel): where its image starts and its window's top-left corner.
struct UnrollColumn {
    bool valid;      // pixel < NPIX
    int x_base;      // b*C*H*W
    int y_base;      // conv_y_offset(pixel)
    int ih0, iw0;    // oh*stride_h - pad_h, ow*stride_w - pad_w: in [-pad, H+pad-1], fits int32

    __device__ void init(const ConvGemmShape& s, int n0, int n) {
        valid = n < s.NPIX - n0;  // n0 + n may pass 2^31 when NPIX is close to it
        const int pixel = valid ? n0 + n : 0;
        const int b = pixel / s.OHW, r = pixel - b * s.OHW;
        const int oh = r / s.OW, ow = r - oh * s.OW;
        x_base = b * s.image;
        y_base = conv_y_offset(s, pixel);
        // oh*stride_h alone can pass 2^31 (H + 2*pad_h up to 3*2^30); the difference cannot.
        ih0 = (int)((long long)oh * s.stride_h - s.pad_h);
        iw0 = (int)((long long)ow * s.stride_w - s.pad_w);
    }
};

// Position k = (c, kh, kw) in Xunroll, advanced by a fixed step with carries instead of divisions:
// the step is split once into (dc, dkh, dkw) with step = dc*KK + dkh*KW + dkw, dkh < KH, dkw < KW,
// so each digit overflows at most once per step. Past the end of k, c simply grows past C.
struct UnrollRow {
    int c, kh, kw;
    int dc, dkh, dkw;

    __device__ void init(const ConvGemmShape& s, int k, int step) {
        c = k / s.KK; kh = (k - c * s.KK) / s.KW; kw = k - c * s.KK - kh * s.KW;
        dc = step / s.KK; dkh = (step - dc * s.KK) / s.KW; dkw = step - dc * s.KK - dkh * s.KW;
    }
    __device__ void advance(const ConvGemmShape& s) {
        kw += dkw;
        if (kw >= s.KW) { kw -= s.KW; ++kh; }
        kh += dkh;
        if (kh >= s.KH) { kh -= s.KH; ++c; }
        c += dc;
    }
};

// Xunroll[k, pixel] from x (B, C, H, W), 0 for padding and past the edges.
__device__ inline float conv_unroll_load(const float* __restrict__ x, const ConvGemmShape& s,
                                         const UnrollColumn& col, const UnrollRow& row) {
    // kh*dil_h can pass 2^31 on its own while ih stays in [-pad_h, H+pad_h-1]: add as unsigned
    // (defined wrap-around) and compare as unsigned, which also rejects negative ih.
    const unsigned ih = (unsigned)col.ih0 + (unsigned)row.kh * (unsigned)s.dil_h;
    const unsigned iw = (unsigned)col.iw0 + (unsigned)row.kw * (unsigned)s.dil_w;
    if (!col.valid || row.c >= s.C || ih >= (unsigned)s.H || iw >= (unsigned)s.W) return 0.0f;
    return __ldg(&x[col.x_base + (row.c * s.H + (int)ih) * s.W + (int)iw]);  // < B*C*H*W
}

// How a loaded fp32 value is stored into a shared-memory tile.
struct StoreFloat {
    using type = float;
    static __device__ float apply(float v) { return v; }
};
struct StoreHalf {
    using type = __half;
    static __device__ __half apply(float v) { return __float2half_rn(v); }
};

// Loads BK x BN tiles of Xunroll (rows k0..k0+BK-1, columns n0..n0+BN-1) into tile[k*LD + n].
// Thread tid owns column tid % BN and rows tid / BN + i*STEP, so consecutive threads read
// consecutive pixels (coalesced along ow), and its k sequence is one arithmetic progression
// (step STEP) across all tiles: one UnrollRow walks it with no division.
template <int BK, int BN, int THREADS>
struct UnrollTileLoader {
    static_assert(THREADS % BN == 0, "a thread owns one column");
    static constexpr int STEP = THREADS / BN;
    static_assert(BK % STEP == 0, "every row of the tile is owned");
    static constexpr int ROWS = BK / STEP;

    UnrollColumn col;
    UnrollRow row;
    int n, r0;
    float v[ROWS];

    // Once per block: the column (pixel) this thread loads and, for the y stores, owns.
    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        n = tid % BN;
        r0 = tid / BN;
        col.init(s, n0, n);
    }
    // Back to the first tile (k0 = 0), for the next M tile of the block.
    __device__ void restart(const ConvGemmShape& s) { row.init(s, r0, STEP); }
    // Reads the next tile (the one after the previous fetch) into registers.
    __device__ void fetch(const float* __restrict__ x, const ConvGemmShape& s) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            v[i] = conv_unroll_load(x, s, col, row);
            row.advance(s);
        }
    }
    template <class Store, int LD>
    __device__ void store(typename Store::type* tile) const {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) tile[(r0 + i * STEP) * LD + n] = Store::apply(v[i]);
    }
};

// Loads BM x BK tiles of W (M, CKK) (rows m0.., columns k0..) into shared memory, either
// k-major (tile[k*LD + m], for register-tiled SIMT kernels that read several m at once) or
// m-major (tile[m*LD + k], the row-major A operand of wmma). Consecutive threads read
// consecutive k, i.e. consecutive addresses of one filter.
template <int BM, int BK, int THREADS>
struct WeightTileLoader {
    static_assert(THREADS % BK == 0, "a thread owns one column of the tile");
    static constexpr int STEP = THREADS / BK;
    static constexpr int COUNT = (BM + STEP - 1) / STEP;
    // With BM % STEP != 0 (tiles smaller than the block) some threads own fewer or no rows.
    static __device__ bool owns(int mm) { return BM % STEP == 0 || mm < BM; }

    int kk, mm0;
    float v[COUNT];

    __device__ void init(int tid) {
        kk = tid % BK;
        mm0 = tid / BK;
    }
    __device__ void fetch(const float* __restrict__ w, const ConvGemmShape& s, int m0, int k0) {
        const bool k_ok = kk < s.CKK - k0;  // k0 < CKK always; k0 + kk may not fit int32
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            const int mm = mm0 + i * STEP;
            v[i] = k_ok && owns(mm) && mm < s.M - m0 ? __ldg(&w[(m0 + mm) * s.CKK + k0 + kk])  // < M*CKK
                                                     : 0.0f;
        }
    }
    template <class Store, bool K_MAJOR, int LD>
    __device__ void store(typename Store::type* tile) const {
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            const int mm = mm0 + i * STEP;
            if (owns(mm)) tile[K_MAJOR ? kk * LD + mm : mm * LD + kk] = Store::apply(v[i]);
        }
    }
};

// For register-tiled kernels whose thread owns TM maps x TN consecutive pixels of the block tile:
// the y offsets of its pixels n0+n .. n0+n+TN-1 (-1 past the last pixel).
template <int TN>
__device__ void conv_micro_tile_pixels(const ConvGemmShape& s, int n0, int n, int (&y_pix)[TN]) {
#pragma unroll
    for (int j = 0; j < TN; ++j) y_pix[j] = n + j < s.NPIX - n0 ? conv_y_offset(s, n0 + n + j) : -1;
}

// Writes acc[i][j] to y[map m0+mm+i, pixel j], skipping maps >= M and pixels past the end.
template <int TM, int TN>
__device__ void conv_micro_tile_store(float* __restrict__ y, const ConvGemmShape& s, int m0, int mm,
                                      const int (&y_pix)[TN], const float (&acc)[TM][TN]) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        if (mm + i >= s.M - m0) break;
        const int m_off = (m0 + mm + i) * s.OHW;  // < M*OH*OW
#pragma unroll
        for (int j = 0; j < TN; ++j)
            if (y_pix[j] >= 0) y[y_pix[j] + m_off] = acc[i][j];
    }
}
