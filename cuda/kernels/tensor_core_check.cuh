// tensor_core_check.cuh — whether the current GPU runs a tensor-core kernel family (wmma.cu,
// tc_igemm_host.cuh): its compute capability, and the code this build runs on it (sm_90a for wgmma).
#pragma once

#include <atomic>

#include "cuda_util.cuh"

// Devices whose check passed, one bit per device id (ids >= 64 are checked every time).
using ConvDeviceMask = std::atomic<unsigned long long>;

// CONV_OK when the current GPU has the tensor cores for `min_arch` (e.g. 800) and the code this
// build runs on it for `kernel` was compiled for such an architecture: a build whose newest code is
// compute_75 PTX, JIT-compiled on an sm_80 GPU, would have empty tf32 kernels. Every kernel of a
// family is compiled for the same architectures, so one (`kernel`) stands for all.
static inline int conv_check_tensor_cores(const char* name, int min_arch, const void* kernel, ConvDeviceMask& passed) {
    int device = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    const unsigned long long bit = device < 64 ? 1ull << device : 0;
    if (passed.load(std::memory_order_relaxed) & bit) return CONV_OK;
    int major = 0, minor = 0;
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major * 100 + minor * 10 < min_arch)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "%s needs compute capability %d.%d+, this GPU is %d.%d",
                              name, min_arch / 100, min_arch / 10 % 10, major, minor);
    cudaFuncAttributes attr;
    CONV_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    if (attr.ptxVersion * 10 < min_arch)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: this libconv runs code compiled for compute_%d on this GPU "
                              "(compute capability %d.%d), which has no tensor-core path; rebuild "
                              "with CMAKE_CUDA_ARCHITECTURES including %d%d",
                              name, attr.ptxVersion, major, minor, major, minor);
    passed.fetch_or(bit, std::memory_order_relaxed);
    return CONV_OK;
}

// Whether the current GPU runs this build's sm_90a code (wgmma): compute capability exactly 9.0, the
// only one arch-specific sm_90a code runs on, and a build whose architectures name 90a without plain
// sm_90 machine code beside it (CMake then defines CONV_HAVE_SM90A), so that the sm_90a code is what
// the GPU loads. Sets no error: for choices (default configurations) as well as checks.
static inline bool conv_has_sm90a(ConvDeviceMask& passed) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    const unsigned long long bit = device < 64 ? 1ull << device : 0;
    if (passed.load(std::memory_order_relaxed) & bit) return true;
#ifdef CONV_HAVE_SM90A
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major != 9 ||
        minor != 0)
        return false;
    passed.fetch_or(bit, std::memory_order_relaxed);
    return true;
#else
    return false;
#endif
}

// CONV_OK when conv_has_sm90a, else the reason: the GPU, or the build.
static inline int conv_check_sm90a(const char* name, ConvDeviceMask& passed) {
    if (conv_has_sm90a(passed)) return CONV_OK;
    int device = 0, major = 0, minor = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major != 9 || minor != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: wgmma configurations need a GPU of compute capability 9.0 (Hopper), this one "
                              "is %d.%d", name, major, minor);
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "%s: this libconv has no sm_90a code, which its wgmma configurations need; rebuild "
                          "with CMAKE_CUDA_ARCHITECTURES naming 90a-real instead of 90-real", name);
}
