// tensor_io.cuh — how kernels read and write the tensors a conv_problem describes, in one place:
//   - element types: conv_load<T>() widens f32 / f16 / bf16 to float, conv_store_as<T>() narrows with
//     round-to-nearest-even (what PyTorch's .half() / .bfloat16() do);
//   - layouts: ConvLayout gives the offset of x[b, c, h, w] / y[b, m, h, w] in NCHW or NHWC, and of
//     w[m, c, kh, kw] in MCKK or MKKC;
//   - the epilogue: conv_epilogue_value() adds the bias and applies ReLU; conv_max_nan() is the
//     NaN-propagating max of the max-pool (PyTorch's max_pool2d propagates NaN; fmaxf would drop it).
// Kernels that take several dtypes are templated on them and instantiated by conv_dispatch_dtypes().
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_util.cuh"

// ---- element types ----
template <class T>
__device__ __forceinline__ float conv_load(const T* p, long long i);
template <>
__device__ __forceinline__ float conv_load<float>(const float* p, long long i) { return p[i]; }
template <>
__device__ __forceinline__ float conv_load<__half>(const __half* p, long long i) { return __half2float(p[i]); }
template <>
__device__ __forceinline__ float conv_load<__nv_bfloat16>(const __nv_bfloat16* p, long long i) {
    return __bfloat162float(p[i]);
}

// A loaded element widened to float (conv_load without the load: for loads issued ahead of their use).
__device__ __forceinline__ float conv_to_float(float v) { return v; }
__device__ __forceinline__ float conv_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float conv_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T conv_store_as(float v);
template <>
__device__ __forceinline__ float conv_store_as<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half conv_store_as<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 conv_store_as<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// ---- guarded loads ----
// The read-only global load (__ldg) for every element type. Not __ldg() itself for f16 and bf16:
// cuda_fp16.hpp and cuda_bf16.hpp write those overloads as non-volatile asm, which the compiler takes for a pure value
// and may compute ahead of the bounds test that guards it (nvcc 13 hoisted the first Xunroll load of
// the SIMT policies out of the M-tile loop: x[-13] at a padded corner, memcheck on the H100). The
// unsigned short overload, like the float one, is asm volatile: it stays behind its guard.
__device__ __forceinline__ float conv_ldg(const float* p) { return __ldg(p); }
__device__ __forceinline__ __half conv_ldg(const __half* p) {
    return __ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p)));
}
__device__ __forceinline__ __nv_bfloat16 conv_ldg(const __nv_bfloat16* p) {
    return __ushort_as_bfloat16(__ldg(reinterpret_cast<const unsigned short*>(p)));
}

// ---- layouts (int64 offsets: callers that index in int32 convert where the dispatcher's chunking
// guarantees the range) ----
struct ConvLayout {
    int x_nhwc, y_nhwc, w_mkkc;
    long long C, H, W, M, OH, OW, Cg, KH, KW;  // Cg = C / groups: channels per filter

    __host__ static ConvLayout of(const conv_problem* p, long long OH, long long OW) {
        ConvLayout l;
        l.x_nhwc = p->x_layout == CONV_NHWC;
        l.y_nhwc = p->y_layout == CONV_NHWC;
        l.w_mkkc = p->w_layout == CONV_MKKC;
        l.C = p->C; l.H = p->H; l.W = p->W; l.M = p->M; l.OH = OH; l.OW = OW;
        l.Cg = p->C / p->groups; l.KH = p->KH; l.KW = p->KW;
        return l;
    }
    __device__ __forceinline__ long long x_at(long long b, long long c, long long h, long long w) const {
        return x_nhwc ? ((b * H + h) * W + w) * C + c : ((b * C + c) * H + h) * W + w;
    }
    // y at the stored (pooled where pooling) size OH x OW.
    __device__ __forceinline__ long long y_at(long long b, long long m, long long h, long long w) const {
        return y_nhwc ? ((b * OH + h) * OW + w) * M + m : ((b * M + m) * OH + h) * OW + w;
    }
    // c is the channel within the group (0 <= c < Cg).
    __device__ __forceinline__ long long w_at(long long m, long long c, long long kh, long long kw) const {
        return w_mkkc ? ((m * KH + kh) * KW + kw) * Cg + c : ((m * Cg + c) * KH + kh) * KW + kw;
    }
};

// ---- epilogue ----
// bias (already widened to float; 0 without one), then the activation of a conv_epilogue: ReLU
// (RELU_MAXPOOL's too) max(v, 0) with NaN kept (v < 0 is false for NaN), or SiLU v * 1 / (1 + exp(-v))
// with the hardware exponential and reciprocal (MUFU.EX2 and MUFU.RCP): a memory-bound kernel in fp16 /
// bf16 has ~15 instructions an output, which expf and an IEEE division would take whole. Both in their
// flush-to-zero forms: __expf's and __frcp_rn's handling of results below 2^-126 cost 3 and ~8 more
// instructions an output (and a divergent branch for the reciprocal), and changes nothing here, as
// 1 + 2^-126 rounds to 1 and a reciprocal that small multiplies a v whose SiLU is 0 anyway. Relative
// error ~1e-6 where v is moderate; +Inf -> +Inf, -Inf -> NaN (as PyTorch's: 1 + exp(Inf) = Inf, whose
// reciprocal is 0), large -v -> -0.
__device__ __forceinline__ float conv_rcp_approx(float d) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    return r;
}
__device__ __forceinline__ float conv_exp2_approx(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// The activation alone, for kernels that start their sums at the bias (one addition fewer an output).
__device__ __forceinline__ float conv_activate(float v, int act) {
    if (act == CONV_EPILOGUE_SILU) return v * conv_rcp_approx(1.0f + conv_exp2_approx(v * -1.4426950408889634f));
    return act != CONV_EPILOGUE_NONE && v < 0.0f ? 0.0f : v;
}

__device__ __forceinline__ float conv_activation_value(float acc, float bias, int act) {
    return conv_activate(acc + bias, act);
}

// The same for the kernels that fuse ReLU or nothing.
__device__ __forceinline__ float conv_epilogue_value(float acc, float bias, bool relu) {
    return conv_activation_value(acc, bias, relu ? CONV_EPILOGUE_RELU : CONV_EPILOGUE_NONE);
}

// max with NaN propagation: once a NaN is seen the result stays NaN.
__device__ __forceinline__ float conv_max_nan(float m, float v) {
    return (m != m || v > m || v != v) ? (m != m ? m : v) : m;
}

// The element types of a problem as template arguments: calls F::template run<TX, TY>(args...) with
// TX the type of x and w, TY the type of y and bias.
template <class TX, class F, class... Args>
static int conv_dispatch_out(int y_dtype, Args&&... args) {
    switch (y_dtype) {
    case CONV_F16: return F::template run<TX, __half>(args...);
    case CONV_BF16: return F::template run<TX, __nv_bfloat16>(args...);
    default: return F::template run<TX, float>(args...);
    }
}

template <class F, class... Args>
static int conv_dispatch_dtypes(const conv_problem* p, Args&&... args) {
    switch (p->x_dtype) {
    case CONV_F16: return conv_dispatch_out<__half, F>(p->y_dtype, args...);
    case CONV_BF16: return conv_dispatch_out<__nv_bfloat16, F>(p->y_dtype, args...);
    default: return conv_dispatch_out<float, F>(p->y_dtype, args...);
    }
}
