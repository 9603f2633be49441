// implicit_gemm_tf32.cu — variant `implicit_gemm_tf32`: the tensor-core implicit GEMM of
// kernels/tc_igemm.cuh on tf32 operands (mma.sync m16n8k8, fp32 accumulation; sm_80+), any input dtype.
// Relative to `wmma_tf32`: ldmatrix from swizzled shared memory instead of wmma fragment loads, a 3-4
// stage cp.async pipeline (16-byte copies, zero-filled at padding and edges) instead of register-staged
// tiles and two barriers per step, channels-last operands (x NHWC and w MKKC are read in place; other
// layouts, dtypes and channel counts are staged once into the workspace), block tiles up to 128 x 128,
// and split-K for grids too small to fill the GPU. For 1x1 layers on fp32 NCHW x the nchw_mma
// configurations (tc_nchw_mma.cuh) read x and w in place, with no staging launch. Configurations and
// workspace: tc_igemm_host.cuh.
// Error: fp32 values are rounded to tf32 (to nearest, 11 significant bits: u = 2^-11) after ldmatrix
// (nchw_mma: after the shared-memory read);
// products are exact and summed in fp32, so uniform data gives ~3e-4 relative L2 whatever C*KH*KW
// (as wmma_tf32); bound 1e-3. f16 and bf16 inputs are exact in tf32. Range: fp32's.
#include "tc_igemm_host.cuh"

extern "C" const conv_impl conv_impl_implicit_gemm_tf32 = tc_impl<TcFamilyTf32>();
