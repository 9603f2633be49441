// tc_staging.cuh — operand staging for the tensor-core implicit GEMM (tc_igemm.cuh): x or w rewritten
// into a workspace as the one form its mainloop reads, channels last and padded with zeros:
//   x (B, G*C, H, W) or (B, H, W, G*C), any dtype  ->  xs (B, H, W, G*Cp) in the operand dtype;
//   w (M, C, KH, KW) or (M, KH, KW, C)             ->  ws (M, KH, KW, Cp)   (G = 1),
// with C the channels of one group (of the GEMM) and Cp = C rounded up to a whole 16-byte chunk of the
// operand, each group padded on its own, so that every 16-byte cp.async of the mainloop holds channels
// of one (pixel, tap, group) and starts 16-byte aligned. Used where the caller's tensor is not already
// in that form (NCHW, MCKK, another dtype, C not a multiple of the chunk), and for packed groups' filters:
// row m's C values then go to channels [q*C, (q+1)*C) of its Cp, q = (m / rows) % pack, zeros elsewhere.
#pragma once

#include "cuda_util.cuh"

// The channels of one row of the copy: groups of C source channels, each to Cp destination channels;
// pack > 1 (groups = 1): row o's channels shifted to place (o / rows) % pack of the pack, as above.
struct TcStageChannels {
    int C, Cp, groups, pack, rows;
};

// One operand's copy: dst[o][i][g][q*C + c] = src[o][g*C + c][i] (channels_first) or src[o][i][g*C + c],
// c < C, q as above (0 unpacked), zeros elsewhere. outer: images or maps; inner: pixels H*W or taps KH*KW.
struct TcStageCopy {
    const void* src;
    void* dst;
    bool channels_first;
    int64_t outer, inner;
    TcStageChannels ch;
};

// Runs `count` (1 or 2: x and w) copies in one launch on `stream`, converting from src_dtype to dst_dtype
// (conv_dtype; to nearest even); no sync. One launch, not one per operand: batch-1 layers are
// launch-bound.
int tc_stage_channels_last(const TcStageCopy* copies, int count, int src_dtype, int dst_dtype, cudaStream_t stream);
