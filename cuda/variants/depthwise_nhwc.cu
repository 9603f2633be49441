// depthwise_nhwc.cu — grouped_direct's kernel for depthwise layers stored NHWC (groups == C == M:
// y[b, oh, ow, c] = sum over kh, kw of x[b, ih, iw, c] * w[c, kh, kw]), exact fp32 FFMA on f32, f16
// or bf16 data (x, w, y and bias of one dtype).
//   dw_nhwc_kernel<K, S, PT, THREADS, T>: channels are contiguous in NHWC, so a thread takes a quad
//     of neighbouring channels (one 16-byte load in fp32, 8 bytes in fp16/bf16) for a strip of PT
//     neighbouring output pixels of one row, and a warp's lanes take neighbouring quads: every load
//     and store of a warp is one contiguous run, and no input is staged (neighbouring strips share
//     their input columns through L1). The block's weights (its channels x KH*KW taps, widened to
//     fp32) sit in shared memory as [tap][quad], one LDS.128 per tap and quad; blocks loop over
//     strips so that a grid of a few waves stages them once per block.
//     K, S > 0: K x K filter, stride S, dilation 1, all unrolled: for each filter row, the strip's
//     (PT-1)*S + K input quads are loaded once each and feed every tap of the strip that reads them
//     (K*PT FMA quads per row from that many loads, instead of one load per FMA quad).
//     K = S = 0: any KH x KW, stride, dilation; one load per tap and pixel (the fallback).
// A tap on padding loads zeros and still meets its weight, so an Inf or NaN weight there gives NaN,
// as in PyTorch.
#include <type_traits>

#include "conv_shape.cuh"
#include "grouped_direct.h"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

// Quads (4 channels) per block at most: 128 channels, whose weights fit 48 KB up to DW_NHWC_MAX_TAPS.
constexpr int DW_BLOCK_QUADS = 32;

// x is (B, H, W, C), w is (C, KH, KW) (MCKK and MKKC coincide with one channel per group), y is
// (B, OH, OW, C); every count < 2^31 (the dispatcher's batch chunks).
struct dw_nhwc_shape : ConvShape32 {
    int quads;             // C / 4
    int block_quads;       // quads per block (blockIdx.y: groups of them)
    int strips_per_block;  // THREADS / block_quads
    int ows;               // strips per output row: ceil(OW / PT)
    int strips;            // B * OH * ows
    int relu;
};

// Four neighbouring elements widened to fp32 / narrowed from it (round to nearest even).
__device__ __forceinline__ float4 dw_load4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 dw_load4(const __half* p) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));  // asm volatile: stays behind its guard
    const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&q.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&q.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ float4 dw_load4(const __nv_bfloat16* p) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__device__ __forceinline__ void dw_store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void dw_store4(__half* p, float4 v) {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const unsigned*>(&lo),
                                              *reinterpret_cast<const unsigned*>(&hi));
}
__device__ __forceinline__ void dw_store4(__nv_bfloat16* p, float4 v) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const unsigned*>(&lo),
                                              *reinterpret_cast<const unsigned*>(&hi));
}

// The quad at column iw of an input row (xr: the row's start at the thread's channel), or zeros
// where the tap lies on padding (the address is then never formed into a load).
template <class T>
__device__ __forceinline__ float4 dw_input(const T* xr, int iw, bool row_ok, const dw_nhwc_shape& s) {
    return row_ok && (unsigned)iw < (unsigned)s.W ? dw_load4(xr + iw * s.C) : make_float4(0.f, 0.f, 0.f, 0.f);
}

__device__ __forceinline__ void dw_fma4(float4& acc, float4 w, float4 v) {
    acc.x = fmaf(w.x, v.x, acc.x);
    acc.y = fmaf(w.y, v.y, acc.y);
    acc.z = fmaf(w.z, v.z, acc.z);
    acc.w = fmaf(w.w, v.w, acc.w);
}

// One thread = PT output pixels of one row x one channel quad; blockIdx.y picks the block's quads.
template <int K, int S, int PT, int THREADS, class T>
__global__ void __launch_bounds__(THREADS) dw_nhwc_kernel(dw_nhwc_shape s, const T* __restrict__ x,
                                                          const T* __restrict__ w, const T* __restrict__ bias,
                                                          T* __restrict__ y) {
    static_assert((K == 0) == (S == 0), "fast path: both K and S; generic: neither");
    const int KH = K ? K : s.KH, KW = K ? K : s.KW, KK = KH * KW;
    const int sh = S ? S : s.stride_h, sw = S ? S : s.stride_w;
    const int dh = K ? 1 : s.dil_h, dwid = K ? 1 : s.dil_w;
    extern __shared__ float4 s_w4[];  // [tap][block quad]
    const int q0 = blockIdx.y * s.block_quads, nq = min(s.block_quads, s.quads - q0);

    // Weights of channels [4*q0, 4*(q0 + nq)): channel fastest, so that the shared-memory writes do
    // not conflict; the strided global reads of a warp hit lines the block's other taps read too (L1).
    float* s_w = reinterpret_cast<float*>(s_w4);
    const int nc = 4 * nq, row = 4 * s.block_quads;
    for (int e = threadIdx.x; e < KK * nc; e += THREADS) {
        const int t = e / nc, cl = e - t * nc;
        s_w[t * row + cl] = conv_load(w, (long long)(4 * q0 + cl) * KK + t);
    }
    __syncthreads();  // the only barrier: threads without work may leave after it

    const int ql = threadIdx.x % s.block_quads, sl = threadIdx.x / s.block_quads;
    if (sl >= s.strips_per_block || ql >= nq) return;
    const int c = 4 * (q0 + ql);
    const float4* wq = s_w4 + ql;  // tap t of this quad: wq[t * block_quads]
    float4 bq = make_float4(0.f, 0.f, 0.f, 0.f);
    if (bias) bq = make_float4(conv_load(bias, c), conv_load(bias, c + 1), conv_load(bias, c + 2), conv_load(bias, c + 3));

    for (int st = blockIdx.x * s.strips_per_block + sl; st < s.strips; st += gridDim.x * s.strips_per_block) {
        const int owq = st % s.ows, rest = st / s.ows;
        const int oh = rest % s.OH, b = rest / s.OH;
        const int ow0 = owq * PT;
        float4 acc[PT];
#pragma unroll
        for (int r = 0; r < PT; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);

#pragma unroll
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * sh - s.pad_h + kh * dh;
            const bool row_ok = (unsigned)ih < (unsigned)s.H;
            const T* xr = x + ((b * s.H + (row_ok ? ih : 0)) * s.W) * s.C + c;  // never outside x
            if constexpr (K > 0) {
                float4 wr[K];
#pragma unroll
                for (int kw = 0; kw < K; ++kw) wr[kw] = wq[(kh * K + kw) * s.block_quads];
                const int iw0 = ow0 * S - s.pad_w;
                // Input column j of the strip's window feeds output r at tap kw = j - r*S.
#pragma unroll
                for (int j = 0; j < (PT - 1) * S + K; ++j) {
                    const float4 v = dw_input(xr, iw0 + j, row_ok, s);
#pragma unroll
                    for (int r = 0; r < PT; ++r)
                        if (j - r * S >= 0 && j - r * S < K) dw_fma4(acc[r], wr[j - r * S], v);
                }
            } else {
                for (int kw = 0; kw < KW; ++kw) {
                    const float4 wv = wq[(kh * KW + kw) * s.block_quads];
#pragma unroll
                    for (int r = 0; r < PT; ++r)
                        dw_fma4(acc[r], wv, dw_input(xr, (ow0 + r) * sw - s.pad_w + kw * dwid, row_ok, s));
                }
            }
        }

        T* yp = y + ((b * s.OH + oh) * s.OW + ow0) * s.C + c;
#pragma unroll
        for (int r = 0; r < PT; ++r) {
            if (ow0 + r >= s.OW) break;
            const float4 v = make_float4(conv_epilogue_value(acc[r].x, bq.x, s.relu),
                                         conv_epilogue_value(acc[r].y, bq.y, s.relu),
                                         conv_epilogue_value(acc[r].z, bq.z, s.relu),
                                         conv_epilogue_value(acc[r].w, bq.w, s.relu));
            dw_store4(yp + r * s.C, v);
        }
    }
}

// The kernel for the problem's filter and stride: unrolled for 3x3, 5x5 (strides 1, 2) and 7x7
// (stride 1) at dilation 1, the generic one elsewhere.
template <int PT, int THREADS, class T>
static void (*dw_kernel_for(const conv_problem* p))(dw_nhwc_shape, const T*, const T*, const T*, T*) {
    const bool square = p->KH == p->KW && p->stride_h == p->stride_w && p->dilation_h == 1 && p->dilation_w == 1;
    const int64_t k = p->KH, st = p->stride_h;
    if (square && st == 1 && k == 3) return dw_nhwc_kernel<3, 1, PT, THREADS, T>;
    if (square && st == 2 && k == 3) return dw_nhwc_kernel<3, 2, PT, THREADS, T>;
    if (square && st == 1 && k == 5) return dw_nhwc_kernel<5, 1, PT, THREADS, T>;
    if (square && st == 2 && k == 5) return dw_nhwc_kernel<5, 2, PT, THREADS, T>;
    if (square && st == 1 && k == 7) return dw_nhwc_kernel<7, 1, PT, THREADS, T>;
    return dw_nhwc_kernel<0, 0, PT, THREADS, T>;
}

// Blocks of one launch along x: at most a few waves (the blocks loop over the rest of the strips),
// so that each block's weight staging is paid for by several strips.
constexpr int DW_WAVES = 4;

template <int PT, int THREADS>
struct DwNhwcLaunch {
    template <class T>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        dw_nhwc_shape s;
        static_cast<ConvShape32&>(s) = conv_shape32(p);
        s.quads = s.C / 4;
        s.block_quads = s.quads < DW_BLOCK_QUADS ? s.quads : DW_BLOCK_QUADS;
        if (s.block_quads > THREADS) s.block_quads = THREADS;
        s.strips_per_block = THREADS / s.block_quads;
        s.ows = conv_ceil_div(s.OW, PT);
        s.strips = (int)(p->B * s.OH * s.ows);  // <= B*OH*OW < 2^31
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        const auto kernel = dw_kernel_for<PT, THREADS, T>(p);
        const size_t smem = (size_t)s.KH * s.KW * s.block_quads * sizeof(float4);
        int64_t wave = 0;
        int status = conv_wave_blocks(kernel, THREADS, smem, &wave);
        if (status != CONV_OK) return status;
        const unsigned gy = (unsigned)conv_ceil_div(s.quads, s.block_quads);
        const int64_t need = ((int64_t)s.strips + s.strips_per_block - 1) / s.strips_per_block;
        const int64_t cap = (DW_WAVES * wave + gy - 1) / gy;
        const unsigned gx = conv_wave_grid(need, cap, true);
        kernel<<<dim3(gx, gy), THREADS, smem, stream>>>(s, static_cast<const T*>(t->x), static_cast<const T*>(t->w),
                                                        static_cast<const T*>(t->bias), static_cast<T*>(t->y));
        CONV_LAUNCH_CHECK(dw_nhwc_kernel);
        return CONV_OK;
    }
};

}  // namespace

int dw_nhwc_fits(const conv_problem* p, int report) {
    const bool ok = p->groups == p->C && p->M == p->C && p->x_layout == CONV_NHWC && p->y_layout == CONV_NHWC &&
                    p->C % 4 == 0 && p->x_dtype == p->y_dtype && p->KH * p->KW <= DW_NHWC_MAX_TAPS;
    if (ok) return CONV_OK;
    if (!report) return CONV_ERR_UNSUPPORTED;
    if (p->groups != p->C || p->M != p->C)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs groups == C == M (groups=%lld, "
                              "C=%lld, M=%lld)", (long long)p->groups, (long long)p->C, (long long)p->M);
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: the NHWC depthwise kernel needs x_layout and "
                                                    "y_layout NHWC");
    if (p->C % 4 != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs C a multiple of 4 (C=%lld)",
                              (long long)p->C);
    if (p->x_dtype != p->y_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs x_dtype == y_dtype (%s, %s)",
                              conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    return conv_set_error(CONV_ERR_UNSUPPORTED,  // the one condition left
                          "grouped_direct: the NHWC depthwise kernel takes KH*KW <= %d (KH=%lld, KW=%lld)",
                          DW_NHWC_MAX_TAPS, (long long)p->KH, (long long)p->KW);
}

int dw_nhwc_aligned(const conv_problem* p, const conv_tensors* t) {
    const size_t x_bytes = 4 * conv_dtype_size(p->x_dtype), y_bytes = 4 * conv_dtype_size(p->y_dtype);
    return (uintptr_t)t->x % x_bytes == 0 && (uintptr_t)t->y % y_bytes == 0;
}

template <int PT, int THREADS>
int dw_nhwc_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    using L = DwNhwcLaunch<PT, THREADS>;
    switch (p->x_dtype) {
        case CONV_F16: return L::template run<__half>(p, t, stream);
        case CONV_BF16: return L::template run<__nv_bfloat16>(p, t, stream);
        default: return L::template run<float>(p, t, stream);
    }
}

// grouped_direct's configurations (grouped_direct.cu).
template int dw_nhwc_run<4, 128>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<2, 128>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<1, 64>(const conv_problem*, const conv_tensors*, cudaStream_t);
