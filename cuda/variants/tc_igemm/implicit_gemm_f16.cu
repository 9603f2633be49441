// implicit_gemm_f16.cu — variant `implicit_gemm_f16`: the tensor-core implicit GEMM of
// kernels/tc_igemm.cuh on 16-bit operands (mma.sync m16n8k16, fp32 accumulation; sm_80+): bf16 operands
// for bf16 inputs, fp16 for f16 inputs and for f32 ones (rounded to fp16 when staged).
// Relative to `wmma`: ldmatrix from swizzled shared memory, a 3-4 stage cp.async pipeline (16-byte
// copies, zero-filled at padding and edges), channels-last operands (x NHWC and w MKKC in the operand
// dtype are read in place; anything else is staged once into the workspace), block tiles up to 128 x 128,
// split-K for small grids. On Hopper (compute capability 9.0, sm_90a code) the wgmma configurations run
// the same tiles through warpgroup wgmma (tc_wgmma.cuh). Configurations and workspace: tc_igemm_host.cuh.
// Error: f16 inputs on fp16 operands and bf16 on bf16 are not rounded at all (fp32 summation only);
// f32 inputs are rounded to fp16 (u = 2^-11): ~3e-4 relative L2 for uniform data whatever C*KH*KW,
// bound 2e-3 as for wmma's 16-bit paths. Range for f32 inputs: |x|, |w| < 65504, fp16 subnormals below 6.1e-5.
#include "tc_igemm_host.cuh"

extern "C" const conv_impl conv_impl_implicit_gemm_f16 = tc_impl<TcFamilyHalf>();
