// tc_staging.cuh — operand staging for the tensor-core implicit GEMM (tc_igemm.cuh): x or w rewritten
// into a workspace as the one form its mainloop reads, channels last and padded with zeros:
//   x (B, G*C, H, W) or (B, H, W, G*C), any dtype  ->  xs (B, H, W, G*Cp) in the operand dtype;
//   w (M, C, KH, KW) or (M, KH, KW, C)             ->  ws (M, KH, KW, Cp)   (G = 1),
// with C the channels of one group and Cp = C rounded up to a whole 16-byte chunk of the operand, each
// group padded on its own, so that every 16-byte cp.async of the mainloop holds channels of one
// (pixel, tap, group) and starts 16-byte aligned. Used only where the caller's tensor is not already in
// that form (NCHW, MCKK, another dtype, C not a multiple of the chunk).
#pragma once

#include "cuda_util.cuh"

// dst[o][i][g][c] = src[o][g*C + c][i] (channels_first) or src[o][i][g*C + c], c < C, converted from
// src_dtype to dst_dtype (conv_dtype; to nearest even); dst[o][i][g][c] = 0 for C <= c < Cp. outer:
// images or maps; inner: pixels H*W or taps KH*KW; groups: G. Launches on `stream`; no sync.
int tc_stage_channels_last(const void* src, int src_dtype, bool channels_first, void* dst, int dst_dtype,
                           int64_t outer, int64_t inner, int64_t C, int64_t Cp, int64_t groups, cudaStream_t stream);
