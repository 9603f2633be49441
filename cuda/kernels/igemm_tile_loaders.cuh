// igemm_tile_loaders.cuh — the implicit GEMM's tile iterators: they build the W tile (BM x BK) and the
// Xunroll tile (BK x BN) of each reduction step in shared memory, and the operand types those tiles
// hold.
//
// The loaders are register-staged: fetch() issues the global loads of the next tile into registers
// (so they are in flight while the current tile is being multiplied), store() converts them to the
// operand type and writes them into shared memory. Registers hold x's own element type TX (f32, f16 or
// bf16), so an f16 input reaches an fp16 tile (and bf16 a bf16 one) without an fp32 round trip. Tiles
// are zero-filled past every edge (k >= CKK, m >= M, pixel >= NPIX, padding), so the math needs no
// guards; a padded tap is a 0 multiplied like any other value (0 * Inf = NaN, as PyTorch gives).
// XunrollTileLoader and WeightTileLoader move one element per load; XunrollQuadLoader and
// WeightQuadLoader four consecutive k per load (16 bytes of f32) where layout and alignment allow.
// Groups: the Xunroll loaders read one group's channels (c < Cg) from x shifted to the group's first
// channel (the caller passes x + g*x_group); channel strides stay those of the whole x (C in NHWC,
// H*W in NCHW). W's rows are the group's maps of the (M, CKK) bank as they are: no shift.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits.h>
#include <stdint.h>

#include <type_traits>

#include "implicit_gemm.cuh"

// ---- element types ----

template <class T>
__device__ __forceinline__ T igemm_zero();
template <>
__device__ __forceinline__ float igemm_zero<float>() { return 0.0f; }
template <>
__device__ __forceinline__ __half igemm_zero<__half>() { return __ushort_as_half((unsigned short)0); }
template <>
__device__ __forceinline__ __nv_bfloat16 igemm_zero<__nv_bfloat16>() {
    return __ushort_as_bfloat16((unsigned short)0);
}

// Exact: f16 and bf16 values are all fp32 values.
__device__ __forceinline__ float igemm_widen(float v) { return v; }
__device__ __forceinline__ float igemm_widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float igemm_widen(__nv_bfloat16 v) { return __bfloat162float(v); }


// Operand types: the element of the shared-memory tiles (type) and how a loaded TX value becomes one
// (from). Each declares only the inputs it takes; a math policy's INPUTS mask keeps the others away.
struct IgemmFloatOperand {
    using type = float;
    template <class TX>
    static __device__ __forceinline__ float from(TX v) { return igemm_widen(v); }
};
struct IgemmHalfOperand {
    using type = __half;
    static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ __half from(__half v) { return v; }
    // bf16's 8 significant bits fit fp16's 11: exact inside fp16's range, as for f32 inputs.
    static __device__ __forceinline__ __half from(__nv_bfloat16 v) { return __float2half_rn(__bfloat162float(v)); }
};
struct IgemmBf16Operand {
    using type = __nv_bfloat16;
    static __device__ __forceinline__ __nv_bfloat16 from(__nv_bfloat16 v) { return v; }
};

// Calls run(TX()) with TX the problem's x/w dtype, among those Math takes: only those are instantiated
// (igemm_check_inputs refuses the others first).
template <class Math, class Run>
static int igemm_with_input_type(const conv_problem* p, Run&& run) {
    if constexpr ((Math::INPUTS & CONV_DT_F32) != 0)
        if (p->x_dtype == CONV_F32) return run(float());
    if constexpr ((Math::INPUTS & CONV_DT_F16) != 0)
        if (p->x_dtype == CONV_F16) return run(__half());
    if constexpr ((Math::INPUTS & CONV_DT_BF16) != 0)
        if (p->x_dtype == CONV_BF16) return run(__nv_bfloat16());
    return conv_set_error(CONV_ERR_INTERNAL, "implicit GEMM launched on x_dtype = %s, which its math does not take",
                          conv_dtype_name(p->x_dtype));
}

// CONV_OK when Math takes the problem's x/w dtype; else UNSUPPORTED naming the configuration.
template <class Math>
static int igemm_check_inputs(const char* config, const conv_problem* p) {
    if (Math::INPUTS & (1u << p->x_dtype)) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED, "launch configuration '%s' does not take x_dtype = %s", config,
                          conv_dtype_name(p->x_dtype));
}

// ---- the Xunroll tile ----

// One column of Xunroll (one output pixel): where its image starts and its window's top-left corner.
struct UnrollColumn {
    bool valid;      // pixel < NPIX
    int x_base;      // b*C*H*W
    int ih0, iw0;    // oh*stride_h - pad_h, ow*stride_w - pad_w: in [-pad, H+pad-1], fits int32

    __device__ void init(const ConvGemmShape& s, int n0, int n) {
        valid = n < s.NPIX - n0;  // n0 + n may pass 2^31 when NPIX is close to it
        const int pixel = valid ? n0 + n : 0;
        const int b = pixel / s.OHW, r = pixel - b * s.OHW;
        const int oh = r / s.OW, ow = r - oh * s.OW;
        x_base = b * s.image;
        // oh*stride_h alone can pass 2^31 (H + 2*pad_h up to 3*2^30); the difference cannot.
        ih0 = (int)((long long)oh * s.stride_h - s.pad_h);
        iw0 = (int)((long long)ow * s.stride_w - s.pad_w);
    }
};

// Position k in Xunroll as its three digits (top, mid, lo) (see ConvGemmShape), advanced by a fixed
// step with carries instead of divisions: the step is split once into (d_top, d_mid, d_lo) with
// d_mid < k_mid, d_lo < k_lo, so each digit overflows at most once per step. Past the end of k, top
// simply grows past k_top.
struct UnrollRow {
    int top, mid, lo;
    int d_top, d_mid, d_lo;

    __device__ void init(const ConvGemmShape& s, int k, int step) {
        top = k / s.k_mid_lo; mid = (k - top * s.k_mid_lo) / s.k_lo; lo = k - top * s.k_mid_lo - mid * s.k_lo;
        d_top = step / s.k_mid_lo; d_mid = (step - d_top * s.k_mid_lo) / s.k_lo;
        d_lo = step - d_top * s.k_mid_lo - d_mid * s.k_lo;
    }
    __device__ void advance(const ConvGemmShape& s) {
        lo += d_lo;
        if (lo >= s.k_lo) { lo -= s.k_lo; ++mid; }
        mid += d_mid;
        if (mid >= s.k_mid) { mid -= s.k_mid; ++top; }
        top += d_top;
    }
};

// The k-tile in tap order (XunrollTapLoader, Cg % BK == 0): k = (c / BK, kh, kw, c % BK), so that a tile's BK rows are BK consecutive channels at one tap (kh, kw), and
// the KH*KW tiles after it the same channels at the other taps (their windows overlap: x stays in L1;
// with the channels outermost, (kh, kw, c), a channel's next tap came Cg/BK tiles later and the 3x3
// layers ran 11% slower on the H100). Carried from tile to tile with no division.
template <int BK>
struct TapCursor {
    int c, kh, kw;  // the tile's first channel and its tap

    // The tile at k0 (a multiple of BK).
    __device__ void init(const ConvGemmShape& s, int k0) {
        const int taps = s.KH * s.KW, tile = k0 / BK;
        const int block = tile / taps, tap = tile - block * taps;
        c = block * BK;
        kh = tap / s.KW;
        kw = tap - kh * s.KW;
    }
    __device__ void advance(const ConvGemmShape& s) {
        if (++kw == s.KW) {
            kw = 0;
            if (++kh == s.KH) {
                kh = 0;
                c += BK;
            }
        }
    }
};

// Xunroll[k, pixel] from x (NCHW (B, C, H, W) or NHWC (B, H, W, C), shifted to the group's first
// channel); k's digits are (kh, kw, c) when
// KKC, else (c, kh, kw). 0 for padding and past the edges.
template <class TX, bool X_NHWC, bool KKC>
__device__ __forceinline__ TX conv_unroll_load(const TX* __restrict__ x, const ConvGemmShape& s,
                                               const UnrollColumn& col, const UnrollRow& row) {
    const int c = KKC ? row.lo : row.top, kh = KKC ? row.top : row.mid, kw = KKC ? row.mid : row.lo;
    // kh*dil_h can pass 2^31 on its own while ih stays in [-pad_h, H+pad_h-1]: add as unsigned
    // (defined wrap-around) and compare as unsigned, which also rejects negative ih.
    const unsigned ih = (unsigned)col.ih0 + (unsigned)kh * (unsigned)s.dil_h;
    const unsigned iw = (unsigned)col.iw0 + (unsigned)kw * (unsigned)s.dil_w;
    if (!col.valid || row.top >= s.k_top || ih >= (unsigned)s.H || iw >= (unsigned)s.W) return igemm_zero<TX>();
    const int offset = X_NHWC ? ((int)ih * s.W + (int)iw) * s.C + c : (c * s.H + (int)ih) * s.W + (int)iw;
    return conv_ldg(&x[col.x_base + offset]);  // < B*C*H*W
}

// Which elements of a BK x BN Xunroll tile (tile[k*LD + n]) a thread loads, for the gathers that
// load one element at a time: with THREADS >= BN, column n = tid % BN and rows r0 + i*STEP (r0 =
// tid / BN); with BN > THREADS (the thin-map tiles, whose blocks have fewer threads than pixels)
// columns n + j*THREADS (n = tid) and every row. Either way consecutive threads read consecutive
// pixels (coalesced along ow in NCHW). The loader keeps the loaded values in v and stores them.
template <class TX, int BK, int BN, int THREADS>
struct XunrollElementOwnership {
    static constexpr bool WIDE = BN > THREADS;
    static_assert(WIDE ? BN % THREADS == 0 : THREADS % BN == 0, "every column owned by whole threads");
    static constexpr int COLS = WIDE ? BN / THREADS : 1;
    static constexpr int STEP = WIDE ? 1 : THREADS / BN;
    static_assert(BK % STEP == 0, "every row of the tile is owned");
    static constexpr int ROWS = BK / STEP;

    int n, r0;
    TX v[ROWS][COLS];

    __device__ void own(int tid) {
        n = WIDE ? tid : tid % BN;
        r0 = WIDE ? 0 : tid / BN;
    }
    template <class Operand, int LD>
    __device__ void store(typename Operand::type* tile) const {
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
            for (int j = 0; j < COLS; ++j) tile[(r0 + i * STEP) * LD + n + j * THREADS] = Operand::from(v[i][j]);
    }
};

// Loads BK x BN tiles of Xunroll (rows k0..k0+BK-1, columns n0..n0+BN-1), one element per load
// (XunrollElementOwnership). A thread's k sequence is one arithmetic progression (step STEP) across all
// tiles: one UnrollRow walks it with no division.
template <class TX, bool X_NHWC, bool KKC, int BK, int BN, int THREADS>
struct XunrollTileLoader : XunrollElementOwnership<TX, BK, BN, THREADS> {
    using Own = XunrollElementOwnership<TX, BK, BN, THREADS>;
    using Own::COLS;
    using Own::ROWS;
    using Own::STEP;
    using Own::n;
    using Own::r0;
    using Own::v;

    UnrollColumn col[COLS];
    UnrollRow row;

    // Once per block: the columns (pixels) this thread loads.
    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        Own::own(tid);
#pragma unroll
        for (int j = 0; j < COLS; ++j) col[j].init(s, n0, n + j * THREADS);
    }
    // Back to the tile at k0 (0, or the first k of a split-K range), for the next M tile of the block.
    __device__ void restart(const ConvGemmShape& s, int k0) { row.init(s, k0 + r0, STEP); }
    // Reads the next tile (the one after the previous fetch) into registers.
    __device__ void fetch(const TX* __restrict__ x, const ConvGemmShape& s) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
#pragma unroll
            for (int j = 0; j < COLS; ++j) v[i][j] = conv_unroll_load<TX, X_NHWC, KKC>(x, s, col[j], row);
            row.advance(s);
        }
    }
};

// ---- four consecutive elements in one load ----

// p[0..3] as one 16-byte (f32) or 8-byte (f16, bf16) read-only load; p must be aligned to 4 elements.
// The __ldg overloads used are asm volatile: the load stays behind the bounds test that guards it.
__device__ __forceinline__ void igemm_ldg4(const float* p, float (&v)[4]) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void igemm_ldg4(const __half* p, __half (&v)[4]) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));  // element 0 in the low half (little endian)
    v[0] = __ushort_as_half((unsigned short)q.x); v[1] = __ushort_as_half((unsigned short)(q.x >> 16));
    v[2] = __ushort_as_half((unsigned short)q.y); v[3] = __ushort_as_half((unsigned short)(q.y >> 16));
}
__device__ __forceinline__ void igemm_ldg4(const __nv_bfloat16* p, __nv_bfloat16 (&v)[4]) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    v[0] = __ushort_as_bfloat16((unsigned short)q.x); v[1] = __ushort_as_bfloat16((unsigned short)(q.x >> 16));
    v[2] = __ushort_as_bfloat16((unsigned short)q.y); v[3] = __ushort_as_bfloat16((unsigned short)(q.y >> 16));
}
template <class TX>
__device__ __forceinline__ void igemm_zero4(TX (&v)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = igemm_zero<TX>();
}

// ---- the Xunroll tile in k-quads (x NHWC, Cg % 4 == 0, x aligned to 4 elements) ----

// Loads BK x BN tiles of Xunroll into tile[k*LD + n] four k at a time. Where k's lowest digit is c and
// x is NHWC, four consecutive k (c % 4 == 0, Cg % 4 == 0: one filter tap) are four consecutive
// channels of one input pixel: one 16-byte load (8 for f16, bf16) instead of four scattered ones.
// Thread tid owns quad tid % KQ of every tile row group and columns tid / KQ + i*STEP; the KQ threads of
// a column are adjacent, so they read one pixel's BK channels together (32 contiguous bytes at BK = 8).
// Per column the pixel's base offset is computed once (init); per tile the filter tap (kh, kw, c) is
// one digit carry (UnrollRow, no division) and one tap offset shared by all the thread's columns.
//   GEMM = false: any NHWC problem with MKKC filters, k = (kh, kw, c); padding and edges zero-filled.
//   GEMM = true:  1x1, stride 1, no padding: Xunroll[k, pixel] = x[pixel*C + k], a plain GEMM operand
//                 (no taps, no bounds but pixel < NPIX and k < Cg); any filter layout (1x1: k = c).
template <class TX, int BK, int BN, int THREADS, bool GEMM>
struct XunrollQuadLoader {
    static constexpr int KQ = BK / 4;
    static_assert(BK % 4 == 0 && THREADS % KQ == 0 && (BN * KQ) % THREADS == 0, "whole quads, every one owned");
    static constexpr int STEP = THREADS / KQ, COUNT = BN * KQ / THREADS;

    int kq4, n;           // the thread's k offset in the tile (0, 4, ..), its first column
    int k;                // GEMM: the next fetch's first k
    UnrollRow row;        // gather: the next fetch's (kh, kw, c)
    bool valid[COUNT];    // pixel < NPIX
    int ih0[COUNT], iw0[COUNT];  // gather: the pixel's window corner (see UnrollColumn)
    unsigned base[COUNT];  // x offset of (b, ih0, iw0, 0), or (GEMM) of (pixel, 0); mod 2^32 (see init)
    TX v[COUNT][4];

    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        kq4 = tid % KQ * 4;
        n = tid / KQ;
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            UnrollColumn col;
            col.init(s, n0, n + i * STEP);
            valid[i] = col.valid;
            ih0[i] = col.ih0;
            iw0[i] = col.iw0;
            // ih0 * W * C can pass 2^31 or be negative (padding): wrap-around unsigned arithmetic, exact
            // mod 2^32, so base + tap below is the true offset (< 2^30) wherever the tap is inside x.
            base[i] = (unsigned)col.x_base +
                      ((unsigned)col.ih0 * (unsigned)s.W + (unsigned)col.iw0) * (unsigned)s.C;
        }
    }
    __device__ void restart(const ConvGemmShape& s, int k0) {
        if constexpr (GEMM) k = k0 + kq4;
        else row.init(s, k0 + kq4, BK);
    }
    __device__ void fetch(const TX* __restrict__ x, const ConvGemmShape& s) {
        if constexpr (GEMM) {
#pragma unroll
            for (int i = 0; i < COUNT; ++i) {
                if (valid[i] && k < s.CKK) igemm_ldg4(&x[(int)base[i] + k], v[i]);  // k < CKK = Cg; < B*H*W*C
                else igemm_zero4(v[i]);
            }
            k += BK;
            return;
        }
        // k = (kh, kw, c) with digits (top, mid, lo); c % 4 == 0, so the quad is one tap's channels.
        const bool k_ok = row.top < s.k_top;
        const unsigned dh = (unsigned)row.top * (unsigned)s.dil_h, dw = (unsigned)row.mid * (unsigned)s.dil_w;
        const unsigned tap = (dh * (unsigned)s.W + dw) * (unsigned)s.C + (unsigned)row.lo;
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            // As in conv_unroll_load: unsigned sums and compares also reject negative rows and columns.
            const unsigned ih = (unsigned)ih0[i] + dh, iw = (unsigned)iw0[i] + dw;
            if (k_ok && valid[i] && ih < (unsigned)s.H && iw < (unsigned)s.W) igemm_ldg4(&x[(int)(base[i] + tap)], v[i]);
            else igemm_zero4(v[i]);
        }
        row.advance(s);
    }
    template <class Operand, int LD>
    __device__ void store(typename Operand::type* tile) const {
#pragma unroll
        for (int i = 0; i < COUNT; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) tile[(kq4 + j) * LD + n + i * STEP] = Operand::from(v[i][j]);
    }
};

// ---- the Xunroll tile in pixel quads (x NCHW, 1x1, stride 1, no padding) ----

// Loads BK x BN tiles of Xunroll into tile[k*LD + n] four pixels at a time, for 1x1 stride-1 unpadded
// layers on NCHW x: there Xunroll[k, pixel] = x[b*C*H*W + k*H*W + p] for pixel = b*H*W + p (x shifted to
// the group's first channel, k < Cg), a plain GEMM operand whose rows run along the pixels of one image.
// Thread tid owns the 4 pixels of quad tid % QN (consecutive threads, consecutive quads: coalesced) and
// rows tid / QN + i*STEP. Where H*W % 4 == 0 and x is aligned to 4 elements (no quad straddles two
// images, every quad starts aligned) a quad of one row is one 16-byte (8 for f16, bf16) load; else four
// scalar loads, each pixel at its own image's offset. A quad goes into the tile as one 16-byte shared
// store for fp32 tiles.
template <class TX, int BK, int BN, int THREADS>
struct XunrollPixelQuadLoader {
    static constexpr int QN = BN / 4;
    static_assert(BN % 4 == 0 && THREADS % QN == 0 && BK % (THREADS / QN) == 0, "whole quads, every one owned");
    static constexpr int STEP = THREADS / QN, ROWS = BK / STEP;

    int n, r0;        // the quad's first column in the tile, the thread's first row
    int k;            // the next fetch's first row's k
    int b, p;         // the quad's first pixel as (image, pixel within the image)
    int valid;        // pixels of the quad before NPIX (0 to 4)
    TX v[ROWS][4];

    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        n = tid % QN * 4;
        r0 = tid / QN;
        valid = min(max(s.NPIX - n0 - n, 0), 4);  // n0 + n may pass 2^31 near the end
        const int pixel = valid > 0 ? n0 + n : 0;
        b = pixel / s.OHW;  // OH*OW = H*W
        p = pixel - b * s.OHW;
    }
    __device__ void restart(const ConvGemmShape&, int k0) { k = k0 + r0; }
    __device__ void fetch(const TX* __restrict__ x, const ConvGemmShape& s) {
        // x is the group's first channel; the test is loop-invariant.
        const bool vec = s.OHW % 4 == 0 && reinterpret_cast<uintptr_t>(x) % (4 * sizeof(TX)) == 0;
        const int base = b * s.image + p;  // < B*C*H*W
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int kr = k + i * STEP;
            const bool k_ok = kr < s.CKK;
            const int channel = k_ok ? kr * s.OHW : 0;  // < C*H*W
            if (vec) {
                // H*W % 4 == 0: the quad is wholly inside one image, wholly valid or wholly past NPIX.
                if (k_ok && valid > 0) igemm_ldg4(&x[base + channel], v[i]);
                else igemm_zero4(v[i]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    // Pixel j of the quad may lie in a later image (H*W < 4: more than one later).
                    int bj = b, pj = p + j;
                    if (pj >= s.OHW) {
                        bj += pj / s.OHW;
                        pj -= pj / s.OHW * s.OHW;
                    }
                    v[i][j] = k_ok && j < valid ? conv_ldg(&x[bj * s.image + pj + channel]) : igemm_zero<TX>();
                }
            }
        }
        k += BK;
    }
    template <class Operand, int LD>
    __device__ void store(typename Operand::type* tile) const {
        using T = typename Operand::type;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            T* const dst = &tile[(r0 + i * STEP) * LD + n];
            if constexpr (std::is_same<T, float>::value) {
                static_assert(LD % 4 == 0, "16-byte aligned rows");
                *reinterpret_cast<float4*>(dst) = make_float4(Operand::from(v[i][0]), Operand::from(v[i][1]),
                                                              Operand::from(v[i][2]), Operand::from(v[i][3]));
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) dst[j] = Operand::from(v[i][j]);
            }
        }
    }
};

// ---- the Xunroll tile in tap order (x NCHW, Cg % BK == 0) ----

// Loads BK x BN tiles of Xunroll from NCHW x with k in tap order (TapCursor); the filter is staged in
// the same order (igemm_pipeline.cuh: igemm_stage_taps_kernel). Every row of a tile has the same tap
// (kh, kw) and the rows are consecutive channels: whether a pixel's tap is inside the image is one test
// per column and tile, and each element one add of (c + r)*H*W to the column's offset, where the
// gather of XunrollTileLoader carries three digits and bounds every element.
// Elements owned as in XunrollTileLoader (XunrollElementOwnership).
template <class TX, int BK, int BN, int THREADS>
struct XunrollTapLoader : XunrollElementOwnership<TX, BK, BN, THREADS> {
    using Own = XunrollElementOwnership<TX, BK, BN, THREADS>;
    using Own::COLS;
    using Own::ROWS;
    using Own::STEP;
    using Own::n;
    using Own::r0;
    using Own::v;

    TapCursor<BK> tap;       // the next tile's channels and tap
    int ih0[COLS], iw0[COLS];  // the window's corner (see UnrollColumn); ih0 = INT_MIN / 2 past NPIX
    unsigned base[COLS];     // x offset of (b, 0, ih0, iw0), mod 2^32 (see XunrollQuadLoader)

    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        Own::own(tid);
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
            UnrollColumn col;
            col.init(s, n0, n + j * THREADS);
            ih0[j] = col.valid ? col.ih0 : INT_MIN / 2;  // fails every row test below
            iw0[j] = col.iw0;
            // The thread's first row's channel offset r0*H*W too.
            base[j] = (unsigned)col.x_base + (unsigned)col.ih0 * (unsigned)s.W + (unsigned)col.iw0 +
                      (unsigned)(r0 * s.H * s.W);
        }
    }
    __device__ void restart(const ConvGemmShape& s, int k0) { tap.init(s, k0); }
    __device__ void fetch(const TX* __restrict__ x, const ConvGemmShape& s) {
        const int hw = s.H * s.W;
        const bool k_ok = tap.c < s.Cg;  // a tile past CKK (split-K's last, never read) loads zeros
        const unsigned dh = (unsigned)tap.kh * (unsigned)s.dil_h, dw = (unsigned)tap.kw * (unsigned)s.dil_w;
        const unsigned offset = (dh * (unsigned)s.W + dw) + (unsigned)(tap.c * hw);  // tap + channel
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
            // As in conv_unroll_load: unsigned sums and compares also reject negative rows and columns.
            const bool ok = k_ok && (unsigned)ih0[j] + dh < (unsigned)s.H && (unsigned)iw0[j] + dw < (unsigned)s.W;
            const TX* const at = x + (int)(base[j] + offset);  // < B*C*H*W where ok
#pragma unroll
            for (int i = 0; i < ROWS; ++i) v[i][j] = ok ? conv_ldg(at + i * STEP * hw) : igemm_zero<TX>();
        }
        tap.advance(s);
    }
};

// ---- the W tile ----

// Loads BM x BK tiles of W (M, CKK) (rows m0.., columns k0..) into shared memory, either k-major
// (tile[k*LD + m], for register-tiled SIMT math that reads several m at once) or m-major
// (tile[m*LD + k], the row-major A operand of wmma). Consecutive threads read consecutive k, i.e.
// consecutive addresses of one filter, in either filter layout (k follows it).
template <class TX, int BM, int BK, int THREADS>
struct WeightTileLoader {
    static_assert(THREADS % BK == 0, "a thread owns one column of the tile");
    static constexpr int STEP = THREADS / BK;
    static constexpr int COUNT = (BM + STEP - 1) / STEP;
    // With BM % STEP != 0 (tiles smaller than the block) some threads own fewer or no rows.
    static __device__ bool owns(int mm) { return BM % STEP == 0 || mm < BM; }

    int kk, mm0;
    TX v[COUNT];

    __device__ void init(int tid) {
        kk = tid % BK;
        mm0 = tid / BK;
    }
    __device__ void fetch(const TX* __restrict__ w, const ConvGemmShape& s, int m0, int k0) {
        const bool k_ok = kk < s.CKK - k0;  // k0 < CKK always; k0 + kk may not fit int32
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            const int mm = mm0 + i * STEP;
            v[i] = k_ok && owns(mm) && mm < s.M - m0 ? conv_ldg(&w[(m0 + mm) * s.CKK + k0 + kk])  // < M*CKK
                                                     : igemm_zero<TX>();
        }
    }
    template <class Operand, bool K_MAJOR, int LD>
    __device__ void store(typename Operand::type* tile) const {
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            const int mm = mm0 + i * STEP;
            if (owns(mm)) tile[K_MAJOR ? kk * LD + mm : mm * LD + kk] = Operand::from(v[i]);
        }
    }
};

// Loads BM x BK tiles of W (M, CKK) k-major (tile[k*LD + m]) four k at a time: thread tid owns quad
// tid % KQ of rows tid / KQ + i*STEP (in tiles of fewer quads than threads, the thin-map ones, the last
// threads own none). With vec (CKK % 4 == 0 and w aligned to 4 elements: every row and
// every quad starts aligned) a quad is one 16-byte (8 for f16, bf16) load, else four scalar ones with
// the tail of k zero-filled. The transposed stores of a warp's 2 quads x 16 rows hit 32 different banks
// when LD % 32 == 4 (the math policies' padding).
template <class TX, int BM, int BK, int THREADS>
struct WeightQuadLoader {
    static constexpr int KQ = BK / 4;
    static_assert(BK % 4 == 0 && THREADS % KQ == 0, "whole quads");
    static_assert((BM * KQ) % THREADS == 0 || THREADS % (BM * KQ) == 0, "every quad owned, by one thread");
    static constexpr int STEP = THREADS / KQ, COUNT = (BM * KQ + THREADS - 1) / THREADS;
    static __device__ bool owns(int mm) { return BM * KQ >= THREADS || mm < BM; }

    int kq4, mm0;
    bool vec;
    TX v[COUNT][4];

    __device__ void init(int tid, bool vec_) {
        kq4 = tid % KQ * 4;
        mm0 = tid / KQ;
        vec = vec_;
    }
    __device__ void fetch(const TX* __restrict__ w, const ConvGemmShape& s, int m0, int k0) {
        const int k_left = s.CKK - k0 - kq4;  // k0 < CKK (or a whole tile past it): no overflow
#pragma unroll
        for (int i = 0; i < COUNT; ++i) {
            const int mm = mm0 + i * STEP;
            const bool row_ok = owns(mm) && mm < s.M - m0;
            if (vec) {
                // CKK % 4 == 0 and k0 + kq4 % 4 == 0: the quad is wholly inside k or wholly past it.
                if (row_ok && k_left > 0) igemm_ldg4(&w[(m0 + mm) * s.CKK + k0 + kq4], v[i]);  // < M*CKK
                else igemm_zero4(v[i]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    v[i][j] = row_ok && j < k_left ? conv_ldg(&w[(m0 + mm) * s.CKK + k0 + kq4 + j]) : igemm_zero<TX>();
            }
        }
    }
    template <class Operand, int LD>
    __device__ void store(typename Operand::type* tile) const {
#pragma unroll
        for (int i = 0; i < COUNT; ++i)
            if (owns(mm0 + i * STEP))
#pragma unroll
                for (int j = 0; j < 4; ++j) tile[(kq4 + j) * LD + mm0 + i * STEP] = Operand::from(v[i][j]);
    }
};
