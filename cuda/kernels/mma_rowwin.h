// mma_rowwin.h — the row-window tensor-core kernel (mma_rowwin.cu), one family of mma_fp16's
// launch configurations.
#pragma once

#include <cuda_runtime.h>

#include "conv_internal.h"

// rows: output rows per strip, 8, 12 or 16 (half as many for 17..32 maps).
// CONV_OK if the kernel with strips of `rows` output rows runs this shape; else
// CONV_ERR_UNSUPPORTED and a message naming the reason. Assumes mma_fp16 supports the shape.
int mma_rowwin_fits(const conv_problem* p, int rows);

// Runs it (fits() must have said CONV_OK).
int mma_rowwin_run(const conv_problem* p, const float* x, const float* w, float* y, cudaStream_t stream, int rows);
