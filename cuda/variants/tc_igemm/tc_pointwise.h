// tc_pointwise.h — implicit_gemm_f16's pointwise configuration (tc_pointwise.cu): a 1x1 convolution of few
// input channels (8 to 64) on fp16 / bf16 NHWC tensors, the layers that move far more bytes than they
// multiply (MobileNet's and EfficientNet's expansions, 16 -> 96 maps). TcVariant (tc_igemm_host.cuh) lists it
// beside the GEMM tiles.
#pragma once

#include "conv_internal.h"

// CONV_OK if configuration <WARPS> takes the problem (else CONV_ERR_UNSUPPORTED naming why): a 1x1 window at
// stride 1 without padding, ungrouped; x, w and y fp16 or bf16 of one dtype, x and y NHWC, w MKKC; C a
// multiple of 8 up to 64, M a multiple of 8; the filters and the warps' buffers fit the device's shared
// memory.
template <int WARPS>
int tc_pw_supports(const conv_problem* p);

// Runs it (a conv_config run function; no workspace). x, w and y must be 16-byte aligned.
template <int WARPS>
int tc_pw_run(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream);
