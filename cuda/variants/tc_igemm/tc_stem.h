// tc_stem.h — implicit_gemm_f16's stem configuration (tc_stem.cu): convolutions of few input channels (1 to 8)
// on fp16 / bf16 NHWC tensors, the first layers of most networks (3 -> 32 maps, 3x3 at stride 2; 7x7 and 4x4
// stems; LeNet's C1 and C3, 1 -> 4 and 4 -> 16 at 7x7), whose channels are too few for the GEMM tiles'
// 16-byte copies of x. TcVariant (tc_igemm_host.cuh) lists it beside the GEMM tiles.
#pragma once

#include "conv_internal.h"

// CONV_OK if configuration <WARPS> takes the problem (else CONV_ERR_UNSUPPORTED naming why): ungrouped, C at
// most 8, KH * KW * C at most 256; x, w and y fp16 or bf16 of one dtype, x and y NHWC, w MKKC; the filters
// and the warps' buffers fit the device's shared memory.
template <int WARPS>
int tc_stem_supports(const conv_problem* p);

// Runs it (a conv_config run function; no workspace); any alignment of the operands.
template <int WARPS>
int tc_stem_run(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream);
