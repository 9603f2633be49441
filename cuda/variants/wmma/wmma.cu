// wmma.cu — implicit GEMM on tensor cores through nvcuda::wmma: variants `wmma` (fp16 or bf16
// operands) and `wmma_tf32` (tf32 operands), both with fp32 accumulation. The implicit-GEMM mainloop
// (kernels/igemm_mainloop.cuh) with the wmma math policies (kernels/igemm_math_wmma.cuh): the tiles
// of `implicit_gemm`, stored in the operand precision as wmma's row-major A and B operands, each warp
// multiplying its fragments with mma_sync; the block tile leaves through a shared staging tile.
// Relative to `implicit_gemm`: the multiply-adds run on tensor cores (one warp-wide mma_sync does
// FM*FN*FK of them), and 16-bit operands halve the shared-memory footprint of the tiles.
//   Configurations, by operand type:
//   - wmma, f32 or f16 inputs, M > 8:  m16n16k16 fp16, 2 x 2 warps of 2 x 2 fragments: 64 x 64 per block;
//   - wmma, f32 or f16 inputs, M <= 8: m8n32k16 fp16, 8 warps of one 8 x 32 fragment: 8 maps x 256
//     pixels, so that small layers (LeNet's first, M = 4) waste at most half of each fragment;
//   - wmma, bf16 inputs:               m16n16k16 bf16 (sm_80+), 64 x 64 like the first;
//   - wmma_tf32, any inputs:           m16n16k8 tf32 (sm_80+), 64 x 64.
//   f16 inputs reach fp16 operands and bf16 inputs bf16 ones as they are; each configuration takes
//   only the input dtypes of its operands, so the tuner never runs one on the wrong operands. Error
//   bounds and ranges: see igemm_math_wmma.cuh.
#include "igemm_mainloop.cuh"
#include "igemm_math_wmma.cuh"
#include "tensor_core_check.cuh"

using WmmaFp16Tile64x64 = IgemmWmmaMath<IgemmHalfOperand, 700, CONV_DT_F32 | CONV_DT_F16, 16, 16, 2, 2, 2, 2>;
using WmmaFp16Tile8x256 = IgemmWmmaMath<IgemmHalfOperand, 700, CONV_DT_F32 | CONV_DT_F16, 8, 32, 1, 8, 1, 1>;
using WmmaBf16Tile64x64 = IgemmWmmaMath<IgemmBf16Operand, 800, CONV_DT_BF16, 16, 16, 2, 2, 2, 2>;
using WmmaTf32Tile64x64 = IgemmWmmaMath<IgemmTf32Operand, 800, CONV_DT_ALL, 16, 16, 2, 2, 2, 2>;

template <class Math, class TX>
static const void* wmma_kernel() {
    return reinterpret_cast<const void*>(&conv_igemm_kernel<Math, TX, false, false>);
}

// ---- wmma: fp16 operands, or bf16 ones for bf16 inputs ----

// The device check of the operands the problem's inputs use, whichever configuration runs.
static int wmma_supports(const conv_problem* p) {
    if (p->x_dtype == CONV_BF16) {
        static ConvDeviceMask passed{0};
        return conv_check_tensor_cores("wmma with bf16 inputs", WmmaBf16Tile64x64::MIN_ARCH,
                                 wmma_kernel<WmmaBf16Tile64x64, __nv_bfloat16>(), passed);
    }
    static ConvDeviceMask passed{0};
    return conv_check_tensor_cores("wmma", WmmaFp16Tile64x64::MIN_ARCH, wmma_kernel<WmmaFp16Tile64x64, float>(), passed);
}

static const char FP16_TILE64[] = "m16n16k16_tile64x64";
static const char FP16_TILE8x256[] = "m8n32k16_tile8x256";
static const char BF16_TILE64[] = "bf16_m16n16k16_tile64x64";

template <class Math, const char* NAME>
static int wmma_config_supports(const conv_problem* p) {
    return igemm_check_inputs<Math>(NAME, p);
}

// Tunable configurations; the default picks by operand type, then by M: M <= 8, one 8-map fragment
// row covers every map; otherwise 16 x 16 fragments.
static const conv_config WMMA_CONFIGS[] = {
    {FP16_TILE64, igemm_run<WmmaFp16Tile64x64>, wmma_config_supports<WmmaFp16Tile64x64, FP16_TILE64>},
    {FP16_TILE8x256, igemm_run<WmmaFp16Tile8x256>, wmma_config_supports<WmmaFp16Tile8x256, FP16_TILE8x256>},
    {BF16_TILE64, igemm_run<WmmaBf16Tile64x64>, wmma_config_supports<WmmaBf16Tile64x64, BF16_TILE64>},
};

static const char* wmma_default_config(const conv_problem* p) {
    if (p->x_dtype == CONV_BF16) return BF16_TILE64;
    return p->M <= 8 ? FP16_TILE8x256 : FP16_TILE64;
}

extern "C" const conv_impl conv_impl_wmma = {wmma_supports, NULL, WMMA_CONFIGS, 3, wmma_default_config};

// ---- wmma_tf32: tf32 operands ----

static int wmma_tf32_supports(const conv_problem*) {
    static ConvDeviceMask passed{0};
    return conv_check_tensor_cores("wmma_tf32", WmmaTf32Tile64x64::MIN_ARCH, wmma_kernel<WmmaTf32Tile64x64, float>(),
                             passed);
}

static const conv_config WMMA_TF32_CONFIGS[] = {{"default", igemm_run<WmmaTf32Tile64x64>, NULL}};
extern "C" const conv_impl conv_impl_wmma_tf32 = {wmma_tf32_supports, NULL, WMMA_TF32_CONFIGS, 1, NULL};
