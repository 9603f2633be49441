// cuda_util.cuh — CUDA error handling and launch helpers shared by every kernel file.
#pragma once

#include <cuda_runtime.h>

#include "conv_internal.h"

// Turns a failed CUDA runtime call into a status with the call, the error's name and its text.
#define CONV_CUDA_CHECK(call)                                                                  \
    do {                                                                                       \
        cudaError_t conv_err_ = (call);                                                        \
        if (conv_err_ != cudaSuccess) return conv_cuda_status(conv_err_, #call);               \
    } while (0)

// Checks the launch just made (bad configuration, missing kernel image for this GPU).
#define CONV_LAUNCH_CHECK(kernel_name) CONV_CUDA_CHECK(cudaGetLastError())

// Maps a CUDA error to a conv status and sets the message.
int conv_cuda_status(cudaError_t err, const char* what);

static inline cudaStream_t conv_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

static inline int conv_ceil_div(int a, int b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items: enough to fill the GPU, never more than needed.
static inline unsigned conv_grid_for(long long n, int threads) {
    long long blocks = (n + threads - 1) / threads;
    const long long cap = 65535LL * 32;
    return (unsigned)(blocks < cap ? blocks : cap);
}
