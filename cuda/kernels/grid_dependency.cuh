// grid_dependency.cuh — programmatic dependent launch (sm_90): a kernel launched as the programmatic
// dependent of the previous kernel in its stream may be scheduled while that one still runs, and waits
// for it on the GPU where it must. The kernels of the performance families go this way (the tensor-core
// implicit GEMMs with their operand staging, the split-K reduction, implicit_gemm's simple64x64 kernel,
// grouped_direct's kernels but plane_mm and rows_mm, winograd's filter transform; not implicit_gemm's pipelined
// simt* kernel nor winograd's GEMM: igemm_pipeline.cuh says why; plane_mm lost at batch 32: its launcher says so;
// rows_mm, built for batch 32's grids of a wave or more, was not timed as a dependent;
// plane, lk_* and taps13 / taps (which follow their rule, not timed as plain launches) go plainly where their grid
// fills more than half of the GPU but less than 0.9 of it:
// grid_dependency_pays),
// so that a call's launch, block scheduling and set-up overlap the stream's previous kernel instead of
// following its last block: the few microseconds a batch-1 layer takes are otherwise half launch gap.
//   The contract, kept by each such kernel:
//   - grid_wait_prior() before its first read or write of global memory another kernel may touch (x, w,
//     bias, y, the workspace): the previous kernel (which may still read what this one overwrites, or
//     write what it reads) has then completed and its writes are visible. Work that touches no global
//     memory (shared-memory barriers, index arithmetic) may come first. A kernel waited for completes
//     only after its own wait, so each waits for everything before it in the stream.
//   - grid_launch_dependents() in every block, after its wait, once the block has read its inputs,
//     before its stores (CUTLASS's GEMMs signal there too); the copy kernels (operand staging, split-K
//     reduction) right after their wait. The next kernel then launches while this one stores. Signalled
//     at the start instead (tried first), dependents' blocks came in beside a running grid for its whole
//     run: batch-1 fp16 layers gained about half as much, and fp32 ones ran 15-24% slower (H100,
//     bench/PERF_NOTES.md, "Programmatic dependent launch"; the cause, likely where the waiting blocks
//     were placed, is not profiled).
//   Launches without the attribute (other libraries' kernels, ours before sm_90) follow the stream as
//   usual, and the wait is a no-op in a kernel that is not a dependent.
// Both device calls are no-ops before sm_90.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "cuda_util.cuh"

__device__ __forceinline__ void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until the grid this one depends on has completed and its writes are visible.
__device__ __forceinline__ void grid_wait_prior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// The start of a copy kernel: waits for the previous kernel, then lets the next one launch, so that no
// more than two grids overlap (signalled before its wait, a reduction would let the next call's GEMM
// launch while this call's GEMM still ran).
__device__ __forceinline__ void grid_dependency_enter() {
    grid_wait_prior();
    grid_launch_dependents();
}

// Whether launches go as dependents: on devices that run dependents early (compute capability 9.0 on;
// elsewhere launches go as usual rather than rely on how an older driver treats the attribute), unless
// PYCONV_DEPENDENT_LAUNCH=0 (read once per process) turns it off, e.g. to time or profile each call on
// its own.
static inline bool grid_dependency_supported() {
    static const bool enabled = [] {
        const char* env = getenv("PYCONV_DEPENDENT_LAUNCH");
        return !(env && env[0] == '0' && env[1] == '\0');
    }();
    int device = 0, major = 0;
    return enabled && cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

// Adds the attribute that makes a cudaLaunchKernelEx launch the programmatic dependent of the previous
// kernel in its stream, where the device supports it; config.attrs has room for one more.
static inline void grid_dependent_launch(cudaLaunchConfig_t& config) {
    if (!grid_dependency_supported()) return;
    cudaLaunchAttribute& a = config.attrs[config.numAttrs++];
    a = cudaLaunchAttribute{};
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
}

// Whether a grid of `blocks`, `wave` of them resident at once (conv_wave_blocks), gains by launching as a
// dependent. Not where it fills more than half of the GPU but clearly less than all of it: the next call's
// blocks, launched once this grid's have read their inputs, cannot all fit beside it, so they take the slots it
// leaves, unevenly (more of them on the SMs that hold fewer of its blocks), and that grid ends later than one
// launched on an idle GPU. H200, `plane` in fp16 (one kernel after another of the same layer): UniRepLKNet-S's
// 13x13 on 14x14 at batch 32, 0.73 of a wave, 50.1 us as a dependent and 39.8 launched plainly; RepLKNet's 27x27
// at batch 1, 0.55 of a wave, 17.0 against 13.8; `lk_q8`, 13x13 on 28x28 at batch 1, 0.61 of a wave, 9.6 against
// 8.8; grids of up to half a wave, or of 0.95 or more, 1-25% faster as dependents
// (bench/results/nvidia-h200/dependent-launch-grouped-direct.md; with this choice, dependent-launch-by-wave.md).
static inline bool grid_dependency_pays(int64_t blocks, int64_t wave) {
    return 2 * blocks <= wave || 10 * blocks >= 9 * wave;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent where `dependent` (the kernel
// keeps the contract above either way). Returns the launch's error.
template <class... Params, class... Args>
static cudaError_t grid_launch(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                               cudaStream_t stream, Args... args) {
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attr;
    if (dependent) grid_dependent_launch(config);
    return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// Launches kernel(args...) on (grid, block, smem, stream) as a programmatic dependent, recording its name
// (kernel_name) for a later fault's message, and returns the launch's error status from the enclosing
// function if it fails.
#define CONV_LAUNCH_DEPENDENT(kernel_name, kernel, grid, block, smem, stream, ...)                       \
    CONV_LAUNCH_DEPENDENT_IF(true, kernel_name, kernel, grid, block, smem, stream, __VA_ARGS__)

// The same, as a dependent only where `dependent` (grid_dependency_pays).
#define CONV_LAUNCH_DEPENDENT_IF(dependent, kernel_name, kernel, grid, block, smem, stream, ...)          \
    do {                                                                                               \
        conv_note_launch(kernel_name);                                                                 \
        CONV_CUDA_CHECK(grid_launch(dependent, kernel, grid, block, smem, stream, __VA_ARGS__));       \
    } while (0)

// The same, as a dependent where grid_dependency_pays for `grid` blocks against the current device's wave of
// `kernel` at `block` threads and `smem` bytes (conv_wave_blocks: include launch_util.cuh); returns a failed
// query's status from the enclosing function.
#define CONV_LAUNCH_DEPENDENT_BY_WAVE(kernel_name, kernel, grid, block, smem, stream, ...)               \
    do {                                                                                               \
        int64_t conv_wave_ = 0;                                                                        \
        const int conv_waved_ = conv_wave_blocks(kernel, block, smem, &conv_wave_);                    \
        if (conv_waved_ != CONV_OK) return conv_waved_;                                                \
        CONV_LAUNCH_DEPENDENT_IF(grid_dependency_pays(grid, conv_wave_), kernel_name, kernel, grid, block, smem, \
                                 stream, __VA_ARGS__);                                                 \
    } while (0)
