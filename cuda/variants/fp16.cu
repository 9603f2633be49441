// fp16.cu — implicit GEMM with half-precision arithmetic: the implicit-GEMM mainloop
// (kernels/igemm_mainloop.cuh) with the half2 math policy (kernels/igemm_math_simt.cuh).
//   The tiling of `implicit_gemm` (64 maps x 64 pixels per block, k in steps of 16, 4 x 4 outputs per
//   thread, register-staged tile loads), but the tiles hold fp16 (f16 inputs stored as they are, f32
//   rounded to fp16 as they are written to shared memory) and the products are accumulated
//   with __hfma2, two adjacent output pixels per half2, in runs of 16 flushed into fp32. Relative to
//   `implicit_gemm`:
//   - half the shared-memory footprint and traffic per tile;
//   - one HFMA2 does two multiply-adds: 8 instructions per k for the 16 outputs instead of 16.
//   Bias, ReLU, y's dtype and layout as in `implicit_gemm`. Error bound (2e-3) and range: see
//   IgemmHalf2Math. bf16 inputs are refused (variants.def): a bf16 activation of a real network may
//   be 1e-6 or 1e5, which fp16 flushes to its subnormals or to infinity (a random-init MobileNetV2 in
//   bf16 lost all its bits that way); wmma and implicit_gemm_f16 take bf16 on bf16 tensor cores.
#include "igemm_mainloop.cuh"
#include "igemm_math_simt.cuh"

static const conv_config FP16_CONFIGS[] = {{"default", igemm_run<IgemmHalf2Math>, NULL}};
extern "C" const conv_impl conv_impl_fp16 = {NULL, NULL, FP16_CONFIGS, 1, NULL};
