// tc_warp_tile.cuh — what implicit_gemm_f16's warp-tile kernels share (tc_pointwise.cu, tc_stem.cu): a warp
// owns a tile of 32 output pixels of a 16-bit NHWC y and all its maps; its fp32 sums (two m16 tiles by eight
// n8 tiles, one pass of 64 maps) take the bias and ReLU, are staged in the warp's shared memory as y's dtype
// and written by stores of up to 16 bytes (pw: four pixels' 128-byte runs of maps an instruction).
#pragma once

#include <type_traits>

#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_operand16.cuh"
#include "tensor_io.cuh"

constexpr int TWT_PIX = 32;                   // pixels a warp tile: two m16 tiles
constexpr int TWT_MAPS = 64;                  // maps an epilogue pass: eight n8 tiles
constexpr int TWT_Y_ROW = 2 * TWT_MAPS + 16;  // bytes a staged output pixel (odd 16-byte chunks: no conflicts)

// The word of VEC 16-bit values (8: 16 bytes, 4: 8, 2: 4, 1: 2).
template <int VEC>
using TwtWord = typename std::conditional<
    VEC == 8, uint4,
    typename std::conditional<VEC == 4, uint2,
                              typename std::conditional<VEC == 2, uint32_t, unsigned short>::type>::type>::type;

// Pass m0's sums acc (the m16n8k16 accumulator layout: pixel mt * 16 + lane / 4 (+ 8), maps 8j + 2 * (lane % 4)
// and + 1; NT n8 tiles, 8 * NT <= TWT_MAPS maps a pass) into y: bias and ReLU, staged in s_y (TWT_PIX rows of
// TWT_Y_ROW bytes), then pixels p0 .. of P and maps m0 .. of M (a multiple of VEC; y on a boundary of VEC values)
// by stores of VEC values (8: 16 bytes). Returns with s_y free for the next pass.
template <int VEC, int NT, class T>
__device__ __forceinline__ void twt_store_pass(const float (&acc)[2][NT][4], const T* __restrict__ bias, int relu,
                                               int m0, int M, long long p0, long long P, unsigned char* s_y,
                                               T* __restrict__ y, int lane) {
    using Word = TwtWord<VEC>;
    static_assert(8 * NT <= TWT_MAPS, "a pass's maps fit a staged row");
    constexpr int CHUNKS = 8 * NT / VEC;  // words a staged pixel
    const int g4 = lane / 4, t2 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        const int m = m0 + 8 * j + t2;
        if (m0 + 8 * j >= M) break;  // the same for the whole warp (a pair past M is staged, never stored)
        const float b0 = bias && m < M ? conv_load(bias, m) : 0.0f;
        const float b1 = bias && m + 1 < M ? conv_load(bias, m + 1) : 0.0f;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                mma16_store_pair(reinterpret_cast<T*>(s_y + (mt * 16 + g4 + 8 * h) * TWT_Y_ROW) + 8 * j + t2,
                                 conv_epilogue_value(acc[mt][j][2 * h], b0, relu),
                                 conv_epilogue_value(acc[mt][j][2 * h + 1], b1, relu));
    }
    __syncwarp();
    const int pass_chunks = min(8 * NT, M - m0) / VEC;
    if constexpr (VEC == 8) {  // a pixel's words on consecutive lanes: four pixels' 128 bytes an instruction
#pragma unroll
        for (int e = lane; e < TWT_PIX * CHUNKS; e += 32) {
            const int r = e / CHUNKS, c = e % CHUNKS;
            if (c < pass_chunks && p0 + r < P)
                *reinterpret_cast<Word*>(y + (p0 + r) * M + m0 + c * VEC) =
                    *reinterpret_cast<const Word*>(s_y + r * TWT_Y_ROW + c * VEC * 2);
        }
    } else if (p0 + lane < P) {  // narrower words (few maps, as LeNet's 4): a lane stores its pixel's
        for (int c = 0; c < pass_chunks; ++c)
            *reinterpret_cast<Word*>(y + (p0 + lane) * M + m0 + c * VEC) =
                *reinterpret_cast<const Word*>(s_y + lane * TWT_Y_ROW + c * VEC * 2);
    }
    __syncwarp();  // the staging read before the next pass writes it
}

// Launches a warp-tile kernel over `tiles` tiles: a wave of blocks of `warps` warps (at most one tile a warp), each
// warp looping over the tiles, as a programmatic dependent of the work before it.
template <class Kernel, class... Args>
static int twt_launch(const char* name, Kernel kernel, long long tiles, int warps, size_t smem, cudaStream_t stream,
                      Args... args) {
    int status = conv_allow_smem(kernel, smem, name);
    if (status != CONV_OK) return status;
    int64_t wave = 0;
    status = conv_wave_blocks(kernel, 32 * warps, smem, &wave);
    if (status != CONV_OK) return status;
    const long long need = (tiles + warps - 1) / warps;
    const dim3 grid((unsigned)(wave < need ? wave : need));
    CONV_LAUNCH_DEPENDENT(name, kernel, grid, 32 * warps, smem, stream, args...);
    return CONV_OK;
}
