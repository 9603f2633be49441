// implicit_gemm.cu — implicit GEMM in exact fp32, register-tiled: the implicit-GEMM mainloop
// (kernels/igemm_mainloop.cuh) with the SIMT fp32 math policy (kernels/igemm_math_simt.cuh).
//   Y (M x B*OH*OW) = W (M x C*KH*KW) * Xunroll, one 64 (maps) x 64 (pixels) block tile per block, the
//   reduction in steps of 16. Relative to `direct`:
//   - each Xunroll tile is built in shared memory straight from x and reused by all 64 output maps,
//     each weight tile by all 64 pixels, instead of every thread re-reading global memory for every
//     product;
//   - each of the 256 threads keeps a 4 (maps) x 4 (pixels) tile of accumulators in registers and
//     reads its operands as two float4 per k: 16 FMAs per 2 shared-memory loads;
//   - the next tile's global loads are issued into registers before the current tile is multiplied,
//     so their latency overlaps the math;
//   - the (c, kh, kw) decomposition of k is carried incrementally, with no division per element.
//   x and w in f32, f16 or bf16 (widened exactly), x and y NCHW or NHWC, w MCKK or MKKC; bias and ReLU
//   fused into the store, y in f32, f16 or bf16. Same fp32 products as `direct`, summed in a
//   different order: exact (rel. L2 ~1e-7).
#include "igemm_mainloop.cuh"
#include "igemm_math_simt.cuh"

static const conv_config IMPLICIT_GEMM_CONFIGS[] = {{"default", igemm_run<IgemmSimtFp32Math>, NULL}};
extern "C" const conv_impl conv_impl_implicit_gemm = {NULL, NULL, IMPLICIT_GEMM_CONFIGS, 1, NULL};
