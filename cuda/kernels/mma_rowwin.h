// mma_rowwin.h — the row-window tensor-core kernel (mma_rowwin.cu), one family of mma_fp16's
// launch configurations, and the operand packing both of mma_fp16's kernel families share.
#pragma once

#include <cuda_runtime.h>

#include "conv_internal.h"
#include "mma_sync.cuh"

// Two operands as one fp16 pair register, lo in the low 16 bits (the smaller k): fp32 operands are
// rounded to fp16, fp16 ones are taken as they are (no round trip through fp32).
__device__ __forceinline__ uint32_t mma_pair(float lo, float hi) { return mma_pack_half2(lo, hi); }
__device__ __forceinline__ uint32_t mma_pair(__half lo, __half hi) {
    return (uint32_t)__half_as_ushort(lo) | (uint32_t)__half_as_ushort(hi) << 16;
}

// rows: output rows per strip, 8, 12 or 16 (half as many for 17..32 maps).
// CONV_OK if the kernel with strips of `rows` output rows runs this shape; else
// CONV_ERR_UNSUPPORTED and a message naming the reason. Assumes mma_fp16 supports the shape.
int mma_rowwin_fits(const conv_problem* p, int rows);

// Runs it (fits() must have said CONV_OK); TX, the element type of x and w: float or __half.
template <class TX>
int mma_rowwin_run(const conv_problem* p, const TX* x, const TX* w, float* y, cudaStream_t stream, int rows);
