// igemm_simt_tiles.h — implicit_gemm's tuned tiles (IgemmSimtOuterMath through igemm_pipeline.cuh), each
// compiled in one of the translation units igemm_tiles_*.cu, so that the library builds in
// parallel: implicit_gemm.cu, which holds the configuration table, only declares them.
//
// Only simt128x64 takes f16 / bf16 x and w (exact fp32 products of widened values): no suite shape ran
// them faster on another tile (half inputs take the tensor-core variants in every timed table), and each
// dtype a tile takes is 8 more kernels to compile (one per Xunroll loader). The others take fp32 x only
// and refuse half inputs with CONV_ERR_UNSUPPORTED (igemm_check_inputs), so the tuner passes them by.
#pragma once
#include "igemm_math_simt.cuh"
#include "igemm_pipeline.cuh"

// x and w in fp32 only (see above): Math with its INPUTS mask narrowed.
template <class Math>
struct IgemmFp32Inputs : Math {
    static constexpr unsigned INPUTS = CONV_DT_F32;
};

using Simt128x128 = IgemmFp32Inputs<IgemmSimtOuterMath<128, 128, 2, 4>>;
using Simt128x64 = IgemmSimtOuterMath<128, 64, 2, 2>;
using Simt64x128 = IgemmFp32Inputs<IgemmSimtOuterMath<64, 128, 1, 4>>;
// 384 threads per SM (170 registers each): each thread stages 16 elements of x per k-step, four times
// as many as in 128 x 128; at 128 registers they spilled (ptxas -v).
using Simt32x256 = IgemmFp32Inputs<IgemmSimtOuterMath<32, 256, 1, 4, 3>>;
using Simt32x128 = IgemmFp32Inputs<IgemmSimtOuterMath<32, 128, 1, 2, 6>>;
// 4 x 4 outputs per thread, k in steps of 16 (the teaching kernel's thread tile and k-step, which won the
// small 1x1 layers at batch 1 on the H100: squeezenet's expand1x1, resnet50's res2a_branch2a), here with the
// double-buffered mainloop, the quad loaders and split-K: for GEMMs of a few dozen blocks, where a thread's
// 8 x 8 tile makes a long serial k-loop.
using Quad64x64 = IgemmFp32Inputs<IgemmSimtOuterMath<64, 64, 2, 4, 2, 1, 16>>;
using Quad64x32 = IgemmFp32Inputs<IgemmSimtOuterMath<64, 32, 2, 2, 4, 1, 16>>;
using Quad32x64 = IgemmFp32Inputs<IgemmSimtOuterMath<32, 64, 1, 4, 4, 1, 16>>;

#define IGEMM_TILE_RUN(MATH) int igemm_pipelined_run<MATH>(const conv_problem*, const conv_tensors*, void*, size_t, void*)
extern template IGEMM_TILE_RUN(Simt128x128);
extern template IGEMM_TILE_RUN(Simt128x64);
extern template IGEMM_TILE_RUN(Simt64x128);
extern template IGEMM_TILE_RUN(Simt32x256);
extern template IGEMM_TILE_RUN(Simt32x128);
extern template IGEMM_TILE_RUN(Quad64x64);
extern template IGEMM_TILE_RUN(Quad64x32);
extern template IGEMM_TILE_RUN(Quad32x64);
