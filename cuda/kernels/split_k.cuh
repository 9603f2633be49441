// split_k.cuh — split-K for implicit GEMMs whose grid is too small to fill the GPU (batch-1 layers:
// a few dozen block tiles for 132 SMs). The reduction over k = C*KH*KW is cut into `splits` ranges;
// each range's blocks write raw fp32 partial sums (no bias, no ReLU, no rounding) into a workspace,
// and conv_split_k_reduce() (split_k.cu) adds them up and applies the real epilogue:
//   partial is fp32 [splits][P][M], P = B*OH*OW pixels in (b, oh, ow) order, M fastest;
//   y[b, m, oh, ow] = epilogue(sum_s partial[s][pixel][m] + bias[m]), stored in y's dtype and layout.
// The splits are summed in order 0, 1, ..., splits-1 in fp32: deterministic, and within a few ulps
// of any other summation order (rel. L2 ~1e-7 for fp32 math).
// Used by implicit_gemm (SIMT fp32) and the tensor-core implicit GEMM.
#pragma once

#include "cuda_util.cuh"

// Sums the splits, adds bias (if p->bias; M values in y's dtype), applies ReLU (epilogue RELU), stores
// y in p's dtype/layout. p is the launch's problem (the dispatcher's batch chunk); partial holds
// conv_split_k_workspace(p, splits) bytes. Launches on `stream`; no sync. Returns CONV_OK, an error
// from the launch, or CONV_ERR_UNSUPPORTED for the max-pool epilogue (its output is not one value per
// pixel).
int conv_split_k_reduce(const conv_problem* p, const float* partial, int splits, const void* bias, void* y,
                        cudaStream_t stream);

// Workspace bytes for `splits` partial outputs of p (fp32): splits * B*OH*OW * M * 4.
size_t conv_split_k_workspace(const conv_problem* p, int splits);
