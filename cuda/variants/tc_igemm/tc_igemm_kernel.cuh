// tc_igemm_kernel.cuh — the tensor-core implicit GEMM's kernel: one block tile's mainloop (mma.sync,
// tc_igemm.cuh or, on fp32 NCHW x, tc_nchw_mma.cuh; or wgmma, tc_wgmma.cuh, as the tile's shape says)
// and its epilogue (y, split-K's partial sums, or the cluster reduction).
#pragma once

#include "grid_dependency.cuh"
#include "tc_igemm.cuh"
#include "tc_nchw_mma.cuh"
#include "tc_wgmma.cuh"

// Whether this compilation pass has the instructions of Tile's mainloop and epilogue: mma.sync and
// cp.async from sm_80, clusters from sm_90, wgmma only in sm_90a code.
template <class Tile, bool CLUSTER>
__device__ constexpr bool tc_kernel_compiled() {
#if defined(CONV_WGMMA)
    return true;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return !Tile::WGMMA;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return !Tile::WGMMA && !CLUSTER;
#else
    return false;
#endif
}

// The pipeline's shared memory: static for mma.sync tiles (<= 48 KB), dynamic for wgmma ones (the
// launch asks for tc_wgmma_smem_bytes), its start rounded up to the 1024 bytes the swizzle needs.
template <class Tile>
__device__ __forceinline__ unsigned char* tc_pipeline_smem() {
    if constexpr (Tile::WGMMA) {
        extern __shared__ unsigned char tc_dynamic_smem[];
        const unsigned start = (unsigned)__cvta_generic_to_shared(tc_dynamic_smem);
        return tc_dynamic_smem + ((1024 - (start & 1023)) & 1023);
    } else {
        __shared__ __align__(128) unsigned char smem[Tile::SMEM_BYTES];
        return smem;
    }
}

// Block (x, y, z) of a grid (pixel tiles, G x map tiles per group, splits): the mainloop, then y or,
// under workspace split-K (p.partial), its partial sums; CLUSTER: each (x, y) tile's splits are one
// thread-block cluster (dimensions 1 x 1 x gridDim.z <= 8, p.partial NULL) that reduces them. Launched as
// a programmatic dependent (grid_dependency.cuh). Empty where the architecture lacks the instructions
// (the host checks before it launches).
template <class Tile, bool CLUSTER>
__global__ void __launch_bounds__(Tile::THREADS) tc_igemm_kernel(TcParams p) {
    if constexpr (tc_kernel_compiled<Tile, CLUSTER>()) {
        grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
        unsigned char* smem = tc_pipeline_smem<Tile>();
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const TcBlock blk = tc_block<Tile>(p);
        const int wm = warp / Tile::WARPS_N * Tile::WM, wn = warp % Tile::WARPS_N * Tile::WN;
        float acc[Tile::MI][Tile::NJ][4];
        if constexpr (Tile::WGMMA) tc_wgmma_mainloop<Tile>(p, smem, acc, blk.m0, blk.group, blk.n0, warp / 4);
        else if constexpr (Tile::NCHW_MMA) tc_nchw_mma_mainloop<Tile>(p, smem, acc, blk.m0, blk.n0, wm, wn, lane);
        else tc_mainloop<Tile>(p, smem, acc, blk.m0, blk.group, blk.n0, wm, wn, lane);
        grid_launch_dependents();  // the operands are read: the next kernel may launch during the stores
        if constexpr (CLUSTER) {
            tc_with_y_type(p.y_dtype, [&](auto ty) {
                tc_cluster_store<decltype(ty), Tile>(p, acc, smem, blk.m0, blk.nb, blk.n_end, wm, wn, lane);
            });
        } else {
            tc_with_y_type(p.partial ? CONV_F32 : p.y_dtype, [&](auto ty) {
                tc_epilogue<decltype(ty), Tile>(p, acc, smem, blk.m0, blk.nb, blk.n_end, wm, wn, lane);
            });
        }
    } else {
        (void)p;
    }
}
