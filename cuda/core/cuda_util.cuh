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

// Checks the launch just made (bad configuration, missing kernel image for this GPU), and records its
// name so that a fault surfacing at a later synchronising call can name it.
#define CONV_LAUNCH_CHECK(kernel_name)            \
    do {                                          \
        conv_note_launch(#kernel_name);           \
        CONV_CUDA_CHECK(cudaGetLastError());      \
    } while (0)

// Maps a CUDA error to a conv status and sets the message.
int conv_cuda_status(cudaError_t err, const char* what);

static inline cudaStream_t conv_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

static inline int conv_ceil_div(int a, int b) { return (a + b - 1) / b; }

// The largest l with 2^l <= v (v >= 1): log2 of a power of two, for shifts and masks in place of divisions.
static inline int conv_floor_log2(int v) {
    int l = 0;
    while ((1 << (l + 1)) <= v) ++l;
    return l;
}

// Blocks for a grid-stride loop over n items: enough to fill the GPU, never more than needed.
static inline unsigned conv_grid_for(long long n, int threads) {
    long long blocks = (n + threads - 1) / threads;
    const long long cap = 65535LL * 32;
    return (unsigned)(blocks < cap ? blocks : cap);
}

// The fp32 operands' runner of a variant whose kernels take fp32 NCHW pointers (it declares f32 only),
// as a conv_run_fn for its configuration table.
typedef int (*conv_f32_runner)(const conv_problem*, const float*, const float*, float*, cudaStream_t);
template <conv_f32_runner RUN>
static int conv_f32_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return RUN(p, static_cast<const float*>(t->x), static_cast<const float*>(t->w), static_cast<float*>(t->y),
               conv_stream(stream));
}
