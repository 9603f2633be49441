// mma_operand16.cuh — the 16-bit operand pieces of the tensor-core kernels (tc_depthwise.cu, tc_grouped.cu,
// tc_nchw_feed.cuh): an x or w value as an fp16 / bf16 operand, its bits for a fragment register, f32 values
// rounded to operand pairs and 16-byte chunks, and one m16n8k16 mma (fp32 accumulation) picked by the operand
// type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "mma_sync.cuh"
#include "tensor_io.cuh"

template <class T>
__device__ __forceinline__ T mma16_zero() { return conv_store_as<T>(0.0f); }

// An x or w value as an operand: itself in the operand dtype, else (f32) rounded to it (fp16).
template <class TO, class TX>
__device__ __forceinline__ TO mma16_operand(TX v) {
    static_assert(std::is_same<TX, TO>::value || std::is_same<TX, float>::value, "16-bit x has its own operands");
    if constexpr (std::is_same<TX, TO>::value) return v;
    else return conv_store_as<TO>(v);
}

__device__ __forceinline__ uint32_t mma16_bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ uint32_t mma16_bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// Two f32 values rounded (to nearest even) to one 32-bit pair of TO operands, v0 in the low half: one paired
// conversion.
template <class TO>
__device__ __forceinline__ uint32_t mma16_pair_bits(float v0, float v1) {
    if constexpr (std::is_same<TO, __half>::value) {
        const __half2 h = __floats2half2_rn(v0, v1);
        return *reinterpret_cast<const uint32_t*>(&h);
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
        return *reinterpret_cast<const uint32_t*>(&h);
    }
}

// 8 f32 values rounded to one 16-byte chunk of TO operands (an ldmatrix row, a k-chunk of a staged tile).
template <class TO>
__device__ __forceinline__ uint4 mma16_pack8(const float (&v)[8]) {
    return make_uint4(mma16_pair_bits<TO>(v[0], v[1]), mma16_pair_bits<TO>(v[2], v[3]),
                      mma16_pair_bits<TO>(v[4], v[5]), mma16_pair_bits<TO>(v[6], v[7]));
}

// D += A * B for one m16n8k16 tile of TO operands.
template <class TO>
__device__ __forceinline__ void mma16_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same<TO, __half>::value) mma_m16n8k16_f16(d, a, b0, b1);
    else mma_m16n8k16_bf16(d, a, b0, b1);
}

// Two neighbouring outputs (a fragment's pair of columns) as one write of 4 (16-bit TY) or 8 bytes (f32),
// to shared or global memory; `at` aligned to two elements.
template <class TY>
__device__ __forceinline__ void mma16_store_pair(TY* at, float v0, float v1) {
    if constexpr (std::is_same<TY, float>::value) {
        *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
    } else {
        const uint32_t u = mma16_bits(conv_store_as<TY>(v0)) | (mma16_bits(conv_store_as<TY>(v1)) << 16);
        *reinterpret_cast<uint32_t*>(at) = u;
    }
}
