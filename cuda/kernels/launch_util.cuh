// launch_util.cuh — the grid of a persistent launch, in one place: how many blocks of a kernel the
// current device (the operands' device: the dispatcher has set it) holds at once. Persistent kernels
// (direct_regblock's "wave" configurations, mma_fp16's banded kernel, mma_rowwin) launch at most that
// many blocks and loop over their work, so per-block set-up (staged weights, A fragments) is paid
// once per block rather than once per work item.
#pragma once

#include "cuda_util.cuh"

// Streaming multiprocessors of the current device.
static inline int conv_sm_count(int* sms) {
    int device;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device));
    return CONV_OK;
}

// Blocks of `kernel` (threads per block, dynamic shared memory) resident on the whole current device
// at once: one wave. At least one per SM, so that a kernel the occupancy query rejects still gets a
// grid and its launch reports the reason.
template <class Kernel>
static int conv_wave_blocks(Kernel kernel, int threads, size_t smem, int64_t* wave) {
    int sms, per_sm = 0;
    int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    CONV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    *wave = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    return CONV_OK;
}

// gridDim.x of a launch over `work` blocks' worth of items: all of them, or with `persistent` at most
// `wave` (the blocks loop over the rest); never more than gridDim.x allows.
static inline unsigned conv_wave_grid(int64_t work, int64_t wave, bool persistent) {
    const int64_t blocks = persistent && wave < work ? wave : work;
    const int64_t limit = ((int64_t)1 << 31) - 1;
    return (unsigned)(blocks < limit ? blocks : limit);
}
