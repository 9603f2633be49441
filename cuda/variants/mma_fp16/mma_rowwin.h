// mma_rowwin.h — the row-window tensor-core kernel (mma_rowwin.cu), one family of mma_fp16's
// launch configurations, and the operand packing and output epilogue (bias, ReLU, max-pool from a
// shared tile) both of mma_fp16's kernel families share.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "conv_internal.h"
#include "mma_sync.cuh"
#include "tensor_io.cuh"

// Two operands as one 16-bit pair register, lo in the low 16 bits (the smaller k): fp32 operands are
// rounded to fp16, fp16 and bf16 ones are taken as they are (no round trip through fp32).
__device__ __forceinline__ uint32_t mma_pair(float lo, float hi) { return mma_pack_half2(lo, hi); }
__device__ __forceinline__ uint32_t mma_pair(__half lo, __half hi) {
    return (uint32_t)__half_as_ushort(lo) | (uint32_t)__half_as_ushort(hi) << 16;
}
__device__ __forceinline__ uint32_t mma_pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | (uint32_t)__bfloat16_as_ushort(hi) << 16;
}

// D += A * B for one m16n8k16 tile in the operand type of x of type TX: bf16 pairs for bf16 x (fp16
// holds neither bf16's range nor its values), fp16 pairs for fp32 and fp16 x.
template <class TX>
__device__ __forceinline__ void mma_multiply(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same_v<TX, __nv_bfloat16>) {
        const uint32_t regs[4] = {a.x, a.y, a.z, a.w};
        mma_m16n8k16_bf16(d, regs, b0, b1);
    } else {
        mma_m16n8k16(d, a, b0, b1);
    }
}

// The ReLU + max-pool epilogue's window, stride and y's pooled plane; h == 0: no pooling.
struct mma_pool {
    int h, w, stride_h, stride_w;
    int YH, YW;  // y's plane: the pooled size (floor or ceil mode, as conv_y_h / conv_y_w)
};

// Element strides of x and w in their layouts (NCHW or NHWC; MCKK or MKKC): both kernel families
// index them through these, so one kernel instance serves every layout. An image of x is C*H*W
// values in either layout.
struct mma_strides {
    int xc, xh, xw;        // x: a channel, a row, a column
    int wm, wc, wkh, wkw;  // w: a map, a channel, a kernel row, a kernel column
};
static inline mma_strides mma_strides_of(const conv_problem* p) {
    const int C = (int)p->C, W = (int)p->W, KH = (int)p->KH, KW = (int)p->KW;
    mma_strides st;
    if (p->x_layout == CONV_NHWC) st.xc = 1, st.xh = W * C, st.xw = C;
    else st.xc = (int)(p->H * p->W), st.xh = W, st.xw = 1;
    if (p->w_layout == CONV_MKKC) st.wm = KH * KW * C, st.wc = 1, st.wkh = KW * C, st.wkw = C;
    else st.wm = C * KH * KW, st.wc = KH * KW, st.wkh = KW, st.wkw = 1;
    return st;
}

// y of both kernel families and the epilogue: TY (float, __half or __nv_bfloat16) is y's and bias's type.
// Values go through conv_epilogue_value and conv_store_as, as in every other variant, so the fused
// epilogue equals conv + bias followed by ReLU (and the max-pool) and the rounding to y's type;
// without bias and ReLU the accumulator is stored as it is.
template <class TY>
struct mma_out {
    TY* y;            // (B, M, OH, OW), or (B, M, pool.YH, pool.YW) under the max-pool epilogue, NCHW or NHWC
    const TY* bias;   // M values, or NULL
    bool relu;
    mma_pool pool;
    int image, map, pixel;  // y's element strides: an image (M*YH*YW), a map and a pixel of the plane (p = r*YW + c)

    // y's element (b, m, pixel p of the plane).
    __device__ __forceinline__ TY* at(int b, int m, int p) const { return y + b * image + m * map + p * pixel; }

    __device__ __forceinline__ float bias_at(int m) const { return bias ? conv_load(bias, m) : 0.0f; }
    __device__ __forceinline__ TY value(float acc, float bias_m) const {
        return conv_store_as<TY>(bias || relu ? conv_epilogue_value(acc, bias_m, relu) : acc);
    }
    // y[i], y[i + 1] in one store (i even, y 8-byte aligned; NCHW: pixels p, p + 1 of one map).
    __device__ __forceinline__ void store_pair(TY* at, float v0, float v1, float bias_m) const;
    // Pixels p, p + 1 of one map at `at` (pixel p): one store where pair (NCHW, aligned), else two.
    __device__ __forceinline__ void store_two(TY* at, float v0, float v1, float bias_m, bool pair) const {
        if (pair) {
            store_pair(at, v0, v1, bias_m);
        } else {
            at[0] = value(v0, bias_m);
            at[pixel] = value(v1, bias_m);
        }
    }

    // Pooled rows [pr0, pr0 + prows) of image b, every map, from a block's shared tile of the conv's
    // raw fp32 sums: tile[m * ystride + (oh - oy0) * OW + ow], holding every conv row their windows
    // touch. Each value gets + bias and ReLU, each window its max (rows and columns past the conv
    // output, a ceil-mode partial window's, enter no max: every window starts inside it), then the one
    // rounding to TY (monotonic, so the same as rounding first): the value of conv, bias, ReLU and
    // max-pool done one after another. The whole block, one pooled value per thread over (map, row,
    // column), consecutive threads consecutive in y (NCHW: along a map's rows; NHWC: along a pixel's
    // maps): the few values per map (C3: 27) keep every thread busy.
    __device__ void store_pooled(const float* tile, int ystride, int M, int OH, int OW, int b, int oy0, int pr0,
                                 int prows) const {
        const int n = prows * pool.YW;
        for (int e = threadIdx.x; e < M * n; e += blockDim.x) {
            int m, rc;
            if (pixel == 1) m = e / n, rc = e - m * n;
            else rc = e / M, m = e - rc * M;
            const int pr = rc / pool.YW, pc = rc - pr * pool.YW;
            const float bias_m = bias_at(m);
            const float* tm = tile + m * ystride;
            const int r0 = (pr0 + pr) * pool.stride_h, c0 = pc * pool.stride_w;
            const int r1 = min(r0 + pool.h, OH), c1 = min(c0 + pool.w, OW);
            float best = -INFINITY;
            for (int r = r0; r < r1; ++r)
                for (int c = c0; c < c1; ++c)
                    best = conv_max_nan(best, conv_epilogue_value(tm[(r - oy0) * OW + c], bias_m, true));
            *at(b, m, pr0 * pool.YW + rc) = conv_store_as<TY>(best);
        }
    }
};
template <>
__device__ __forceinline__ void mma_out<float>::store_pair(float* at, float v0, float v1, float bias_m) const {
    *reinterpret_cast<float2*>(at) = make_float2(value(v0, bias_m), value(v1, bias_m));
}
template <>
__device__ __forceinline__ void mma_out<__half>::store_pair(__half* at, float v0, float v1, float bias_m) const {
    *reinterpret_cast<__half2*>(at) = __halves2half2(value(v0, bias_m), value(v1, bias_m));
}
template <>
__device__ __forceinline__ void mma_out<__nv_bfloat16>::store_pair(__nv_bfloat16* at, float v0, float v1,
                                                                   float bias_m) const {
    *reinterpret_cast<__nv_bfloat162*>(at) = __halves2bfloat162(value(v0, bias_m), value(v1, bias_m));
}

// y whose type is chosen at run time (dtype: CONV_F32, CONV_F16 or CONV_BF16), for the banded kernel: its
// stores are a small share of its work, and an instance per y type would triple its kernels (x's type
// and the count of m16 tiles already multiply them). mma_with_y hands the stores the typed view.
struct mma_out_any {
    void* y;
    const void* bias;
    bool relu;
    mma_pool pool;
    int image, map, pixel;  // as mma_out's
    int dtype;              // y's and bias's
    template <class TY>
    __host__ __device__ __forceinline__ mma_out<TY> as() const {
        return {static_cast<TY*>(y), static_cast<const TY*>(bias), relu, pool, image, map, pixel};
    }
};
// f(out.as<TY>()) for y's type TY.
template <class F>
__device__ __forceinline__ void mma_with_y(const mma_out_any& out, F&& f) {
    if (out.dtype == CONV_F16) f(out.as<__half>());
    else if (out.dtype == CONV_BF16) f(out.as<__nv_bfloat16>());
    else f(out.as<float>());
}

static inline bool mma_pooled(const conv_problem* p) { return p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL; }

static inline mma_out_any mma_out_any_of(const conv_problem* p, const conv_tensors* t) {
    mma_pool pool = {0, 0, 1, 1, (int)conv_y_h(p), (int)conv_y_w(p)};
    if (mma_pooled(p))
        pool = {(int)p->pool_h, (int)p->pool_w, (int)p->pool_stride_h, (int)p->pool_stride_w, pool.YH, pool.YW};
    const int M = (int)p->M, plane = pool.YH * pool.YW;
    const bool nhwc = p->y_layout == CONV_NHWC;
    return {t->y, p->bias ? t->bias : nullptr, p->epilogue >= CONV_EPILOGUE_RELU, pool, M * plane,
            nhwc ? 1 : plane, nhwc ? M : 1, (int)p->y_dtype};
}
// y typed (the caller knows y's dtype is TY's).
template <class TY>
static inline mma_out<TY> mma_out_of(const conv_problem* p, const conv_tensors* t) {
    return mma_out_any_of(p, t).as<TY>();
}

// Both kernel families pool from a block's tile of conv rows whose windows they own: a unit (strip,
// band) of n pooled rows needs (n - 1) * pool_stride_h + pool_h conv rows (at most OH) and starts
// n * pool_stride_h conv rows after the previous one; without pooling it is n conv rows, n apart.
// Units per image: ceil(rows of y / n).
static inline int64_t mma_unit_rows(const conv_problem* p, int64_t n) {
    if (!mma_pooled(p)) return n;
    const int64_t rows = (n - 1) * p->pool_stride_h + p->pool_h, oh = conv_out_h(p);
    return rows < oh ? rows : oh;
}
static inline int64_t mma_unit_step(const conv_problem* p, int64_t n) {
    return mma_pooled(p) ? n * p->pool_stride_h : n;
}
static inline int64_t mma_units_per_image(const conv_problem* p, int64_t n) { return (conv_y_h(p) + n - 1) / n; }

// rows: output rows per strip, 12 or 16 (half as many for 17..32 maps).
// CONV_OK if the kernel with strips of `rows` output rows runs this shape; else
// CONV_ERR_UNSUPPORTED and a message naming the reason. Assumes mma_fp16 supports the shape.
int mma_rowwin_fits(const conv_problem* p, int rows);
// Conv rows one image's strips compute with `rows` (fits() must have said CONV_OK): what the default
// configuration minimises.
int64_t mma_rowwin_computed_rows(const conv_problem* p, int rows);

// Runs it (fits() must have said CONV_OK); TX, the element type of x and w (float, __half or
// __nv_bfloat16); TY, y's (the same, or float for __half x: fits() refuses other pairs).
template <class TX, class TY>
int mma_rowwin_run(const conv_problem* p, const TX* x, const TX* w, const mma_out<TY>& out, cudaStream_t stream,
                   int rows);
