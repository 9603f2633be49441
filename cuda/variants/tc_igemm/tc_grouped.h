// tc_grouped.h — implicit_gemm_f16's grouped configurations (tc_grouped.cu): a grouped layer (ResNeXt's
// 32 groups of 4 to 32 channels) as small GEMMs per group on fp16 / bf16 tensor cores, fed from an input
// window staged once per block, instead of one packed GEMM whose block-diagonal filter wastes most of
// its products and whose operand tiles re-read x from L2 for every tap. TcVariant (tc_igemm_host.cuh)
// lists them beside the GEMM tiles.
#pragma once

#include "conv_internal.h"

// A block computes up to TP output pixels of one image for CS input channels (the maps of their groups),
// with WARPS warps; a warp task is every m16 pixel tile (TP / 16) x one n8 map tile of one pack of groups (or
// half of them x two n8 tiles, where a group has an even number of n8 tiles), so that a k-step's B fragment
// and piece offset are loaded once for TP / 16 mmas.
// CONV_OK if configuration <TP, CS, WARPS> takes the problem (else CONV_ERR_UNSUPPORTED naming why):
// 2 or more groups of 1, 2, 4 or a multiple of 8 channels (at most CS), the staged window and filters fit
// the device's shared memory, the grid fits gridDim.x.
template <int TP, int CS, int WARPS>
int tc_grouped_supports(const conv_problem* p);

// Runs it (a conv_config run function; no workspace).
template <int TP, int CS, int WARPS>
int tc_grouped_run(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream);
