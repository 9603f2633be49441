// tc_depthwise.h — implicit_gemm_f16's depthwise configurations (tc_depthwise.cu): a depthwise layer
// (groups == C == M) on fp16 / bf16 tensor cores, each channel's filter as KH banded (Toeplitz) B
// matrices, so that one mma.sync m16n8k16 multiplies 16 output rows x 8 output columns of a channel by
// one filter row. TcVariant (tc_igemm_host.cuh) lists them beside the GEMM tiles.
#pragma once

#include "conv_internal.h"

// A block computes an output tile of 16*MT rows x 8*NT columns for CB channels of one image, with WARPS
// warps (CB / WARPS channels each).
// CONV_OK if configuration <MT, NT, CB> takes the problem (else CONV_ERR_UNSUPPORTED naming why):
// depthwise, y in x's dtype, a row of 8 outputs reads at most 32 input columns, the staged tile fits
// the device's shared memory.
template <int MT, int NT, int CB, int WARPS>
int tc_dw_supports(const conv_problem* p);

// Runs it (a conv_config run function; no workspace).
template <int MT, int NT, int CB, int WARPS>
int tc_dw_run(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream);
