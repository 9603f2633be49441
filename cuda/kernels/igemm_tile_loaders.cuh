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
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// Xunroll[k, pixel] from x (NCHW (B, C, H, W) or NHWC (B, H, W, C)); k's digits are (kh, kw, c) when
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

// Loads BK x BN tiles of Xunroll (rows k0..k0+BK-1, columns n0..n0+BN-1) into tile[k*LD + n].
// Thread tid owns column tid % BN and rows tid / BN + i*STEP, so consecutive threads read
// consecutive pixels (coalesced along ow in NCHW), and its k sequence is one arithmetic progression
// (step STEP) across all tiles: one UnrollRow walks it with no division.
template <class TX, bool X_NHWC, bool KKC, int BK, int BN, int THREADS>
struct XunrollTileLoader {
    static_assert(THREADS % BN == 0, "a thread owns one column");
    static constexpr int STEP = THREADS / BN;
    static_assert(BK % STEP == 0, "every row of the tile is owned");
    static constexpr int ROWS = BK / STEP;

    UnrollColumn col;
    UnrollRow row;
    int n, r0;
    TX v[ROWS];

    // Once per block: the column (pixel) this thread loads.
    __device__ void init(const ConvGemmShape& s, int n0, int tid) {
        n = tid % BN;
        r0 = tid / BN;
        col.init(s, n0, n);
    }
    // Back to the first tile (k0 = 0), for the next M tile of the block.
    __device__ void restart(const ConvGemmShape& s) { row.init(s, r0, STEP); }
    // Reads the next tile (the one after the previous fetch) into registers.
    __device__ void fetch(const TX* __restrict__ x, const ConvGemmShape& s) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            v[i] = conv_unroll_load<TX, X_NHWC, KKC>(x, s, col, row);
            row.advance(s);
        }
    }
    template <class Operand, int LD>
    __device__ void store(typename Operand::type* tile) const {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) tile[(r0 + i * STEP) * LD + n] = Operand::from(v[i]);
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
