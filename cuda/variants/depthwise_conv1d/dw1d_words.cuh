// dw1d_words.cuh — the memory words depthwise_conv1d's kernels move: the widest word that divides a run
// of bytes, and whether a pointer sits on a word's boundary.
#pragma once

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
