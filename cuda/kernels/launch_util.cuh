// launch_util.cuh — the grid of a persistent launch, in one place: how many blocks of a kernel the
// current device (the operands' device: the dispatcher has set it) holds at once. Persistent kernels
// (direct_regblock's "wave" configurations, mma_fp16's banded kernel, mma_rowwin) launch at most that
// many blocks and loop over their work, so per-block set-up (staged weights, A fragments) is paid
// once per block rather than once per work item.
#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "cuda_util.cuh"

// Streaming multiprocessors of the current device.
static inline int conv_sm_count(int* sms) {
    int device;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device));
    return CONV_OK;
}

// Shared memory a launch gets without opting in (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr int CONV_SMEM_NO_OPT_IN = 48 * 1024;

// Shared memory a block of the current device may take (its opt-in maximum, beyond the default 48 KB).
static inline int conv_smem_per_block_optin(int* bytes) {
    int device;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return CONV_OK;
}

// Lets `kernel` (dynamic shared memory only, as every caller's) take `smem` bytes of shared memory a block on the
// current device. Up to the 48 KB every launch gets it costs nothing; past it the kernel opts in (an attribute of
// the kernel on the device: set on every such launch, a host call) where the device allows that much, and
// refuses in words naming `what` where it does not.
template <class Kernel>
static int conv_allow_smem(Kernel kernel, size_t smem, const char* what) {
    if (smem <= (size_t)CONV_SMEM_NO_OPT_IN) return CONV_OK;
    int most = 0;
    const int status = conv_smem_per_block_optin(&most);
    if (status != CONV_OK) return status;
    if (smem > (size_t)most)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "%s needs %zu bytes of shared memory a block; this GPU gives %d",
                              what, smem, most);
    CONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return CONV_OK;
}

// Blocks of `kernel` (threads per block, dynamic shared memory) resident on the whole current device
// at once: one wave. At least one per SM, so that a kernel the occupancy query rejects still gets a
// grid and its launch reports the reason. The occupancy query costs microseconds and persistent
// kernels ask on every launch: answers are kept per (device, kernel, threads, shared memory) for the
// process's life (a few dozen entries).
struct ConvWaveKey {
    int device;
    const void* kernel;
    int threads;
    size_t smem;
    bool operator<(const ConvWaveKey& o) const {
        return std::tie(device, kernel, threads, smem) < std::tie(o.device, o.kernel, o.threads, o.smem);
    }
};

template <class Kernel>
static int conv_wave_blocks(Kernel kernel, int threads, size_t smem, int64_t* wave) {
    static std::mutex lock;
    static std::map<ConvWaveKey, int64_t> waves;
    int device;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    const ConvWaveKey key{device, reinterpret_cast<const void*>(kernel), threads, smem};
    {
        std::lock_guard<std::mutex> guard(lock);
        const auto found = waves.find(key);
        if (found != waves.end()) {
            *wave = found->second;
            return CONV_OK;
        }
    }
    int sms, per_sm = 0;
    int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    CONV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    *wave = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    std::lock_guard<std::mutex> guard(lock);
    waves[key] = *wave;
    return CONV_OK;
}

// gridDim.x of a launch over `work` blocks' worth of items: all of them, or with `persistent` at most
// `wave` (the blocks loop over the rest); never more than gridDim.x allows.
static inline unsigned conv_wave_grid(int64_t work, int64_t wave, bool persistent) {
    const int64_t blocks = persistent && wave < work ? wave : work;
    const int64_t limit = ((int64_t)1 << 31) - 1;
    return (unsigned)(blocks < limit ? blocks : limit);
}
