// tc_igemm_tma.cu — implicit_gemm_f16's Hopper configurations: the TMA-fed wgmma tiles (tc_igemm_host.cuh
// lists them and says why they are compiled apart).
#include "tc_igemm_host.cuh"

TC_TMA_CONFIGS(TC_HALF_DEFINE)
