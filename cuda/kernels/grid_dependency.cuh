// grid_dependency.cuh — programmatic dependent launch (sm_90): a kernel launched right after another
// in the same stream, as its programmatic dependent, may start while the first still runs, and waits
// for the first grid's memory only where it reads it. Used where one call launches two kernels, the
// second reading what the first wrote (the tensor-core GEMM after its operand staging): the second's
// launch, block scheduling and prologue overlap the first instead of following its last block, which
// batch-1 layers of a few microseconds feel.
//   The first kernel calls grid_launch_dependents() in every block; the second is launched with
//   grid_dependent_launch() and calls grid_wait_prior() before its first read of the first's output.
// Both device calls are no-ops before sm_90.
#pragma once

#include <cuda_runtime.h>

__device__ __forceinline__ void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until the grids this one depends on have completed and their writes are visible. Callers wait
// only where they were launched as a dependent (a kernel parameter says so), so that launches with
// nothing to wait for carry no wait on their first copies' path.
__device__ __forceinline__ void grid_wait_prior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Whether the current device runs dependents early (compute capability 9.0 on): elsewhere the caller
// launches as usual rather than rely on how an older driver treats the attribute.
static inline bool grid_dependency_supported() {
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

// The launch attribute that makes a cudaLaunchKernelEx launch the programmatic dependent of the
// previous kernel in its stream.
static inline cudaLaunchAttribute grid_dependent_launch() {
    cudaLaunchAttribute a = {};
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
    return a;
}
