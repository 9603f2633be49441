// grouped_direct.h — what grouped_direct.cu (the variant: tiled kernels for any grouped layer) and
// depthwise_nhwc.cu (its kernel for depthwise layers in NHWC) share: the NHWC kernel's eligibility
// test and its launch configurations, which the variant's configuration table lists beside its own.
#pragma once

#include <cuda_runtime.h>

#include "conv_internal.h"

// Largest KH * KW of the NHWC depthwise kernel: its block's weights (KH*KW taps x 128 channels, fp32)
// must fit the 48 KB of shared memory a launch gets without opting in.
#define DW_NHWC_MAX_TAPS 96

// CONV_OK if the NHWC depthwise kernel takes the problem: x and y NHWC, one input channel and one map
// per group (groups == C == M), C a multiple of 4, x and y of one dtype, KH*KW <= DW_NHWC_MAX_TAPS;
// else CONV_ERR_UNSUPPORTED, naming the reason where `report` (silent otherwise: a default choice asks).
// Operand alignment is checked at run time.
int dw_nhwc_fits(const conv_problem* p, int report);

// 1 if the operands are aligned for its vector loads and stores (4 elements: 16 bytes in fp32, 8 in
// fp16 and bf16); a configuration falls back to the tiled kernel where they are not.
int dw_nhwc_aligned(const conv_problem* p, const conv_tensors* t);

// Runs it on a problem it fits (dw_nhwc_fits and dw_nhwc_aligned): a thread computes PT neighbouring
// output pixels of one row for 4 neighbouring channels; THREADS per block.
template <int PT, int THREADS>
int dw_nhwc_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);
