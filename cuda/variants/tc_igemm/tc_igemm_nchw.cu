// tc_igemm_nchw.cu — implicit_gemm_f16's Hopper configurations: the wgmma tiles that read fp32 NCHW x in place (tc_igemm_host.cuh
// lists them and says why they are compiled apart).
#include "tc_igemm_host.cuh"

TC_NCHW_CONFIGS(TC_HALF_DEFINE)
