// dw1d_words.cuh — the memory words depthwise_conv1d's kernels move: the widest word that divides a run
// of bytes, whether a pointer sits on a word's boundary, and the words' elements widened to float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

// The widest of 16, 8 and 4 bytes that divides Bytes (Narrow where none does).
template <int Bytes, class Narrow = unsigned>
using Dw1dWord = typename std::conditional<
    Bytes % 16 == 0, uint4,
    typename std::conditional<Bytes % 8 == 0, uint2,
                              typename std::conditional<Bytes % 4 == 0, unsigned, Narrow>::type>::type>::type;

// p on a boundary of `bytes` (a power of two).
inline bool dw1d_aligned(const void* p, int bytes) {
    return (reinterpret_cast<uintptr_t>(p) & (uintptr_t)(bytes - 1)) == 0;
}

// The elements of T packed in a 32-bit word, widened to float: one instruction an element (bf16 is the
// upper half of a float: a shift or a mask; fp16 pairs convert together).
template <class T>
__device__ __forceinline__ void dw1d_widen(uint32_t word, float* v);
template <>
__device__ __forceinline__ void dw1d_widen<float>(uint32_t word, float* v) { v[0] = __uint_as_float(word); }
template <>
__device__ __forceinline__ void dw1d_widen<__half>(uint32_t word, float* v) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&word));
    v[0] = f.x;
    v[1] = f.y;
}
template <>
__device__ __forceinline__ void dw1d_widen<__nv_bfloat16>(uint32_t word, float* v) {
    v[0] = __uint_as_float(word << 16);
    v[1] = __uint_as_float(word & 0xffff0000u);
}

// N 32-bit words of T elements, widened: v gets N * 4 / sizeof(T) floats.
template <class T, int N>
__device__ __forceinline__ void dw1d_widen_words(const uint32_t* words, float* v) {
#pragma unroll
    for (int i = 0; i < N; ++i) dw1d_widen<T>(words[i], v + i * (4 / (int)sizeof(T)));
}
