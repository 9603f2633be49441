// implicit_gemm.cu — implicit GEMM in exact fp32 on the CUDA cores:
//   Y (M x B*OH*OW) = W (M x C*KH*KW) * Xunroll, Xunroll's tiles built in shared memory straight from x.
// Launch configurations (the tuner times every one; the default picks by shape):
//   simple64x64   the teaching kernel, kept beside the tuned ones: the single-buffered mainloop
//                 (kernels/igemm_mainloop.cuh) with IgemmSimtFp32Math: 64 x 64 block tiles, k in steps
//                 of 16, 256 threads of 4 x 4 outputs. Relative to `direct`:
//                 - each Xunroll tile is read from x once per block and reused by all 64 maps, each
//                   weight tile by all 64 pixels;
//                 - 16 FMAs per 2 LDS.128 from a register micro-tile;
//                 - the next tile's global loads are in flight while the current one is multiplied;
//                 - k's (c, kh, kw) digits carried incrementally, no division per element.
//                 Groups 1 only (simple_supports): it stays the plain GEMM to read beside `direct`.
//   simt128x128, simt128x64, simt64x128, simt32x256, simt32x128, quad64x64, quad64x32, quad32x64
//                 the tuned kernel (igemm_pipeline.cuh with IgemmSimtOuterMath): BM x BN block tiles, 8 x 8
//                 outputs per thread (64 FFMAs per four LDS.128) and k-steps of 8, or in the quad tiles 4 x 4
//                 and k-steps of 16 (small GEMMs: 1x1 and late 3x3 layers at batch 1, where a few dozen
//                 blocks each run a long serial k-loop), double-buffered shared tiles (one barrier per
//                 k-step), 16-byte loads of W (CKK % 4 == 0) and of x (NHWC, C % 4 == 0: one tap's channels),
//                 gather offsets precomputed per pixel, NCHW x with MCKK filters gathered in tap order where
//                 C/groups is a multiple of the k-step and k is not split (the filter staged in that order
//                 first: one bounds test per pixel and k-tile), 1x1 stride-1 unpadded layers as a plain GEMM
//                 (along channels in NHWC, along pixels in NCHW), and split-K over C*KH*KW when the grid has
//                 fewer than two blocks per SM (batch-1 layers), the partial sums reduced by
//                 kernels/split_k.cu. Any groups: one GEMM per group (its M/G maps x B*OH*OW pixels x
//                 C/G*KH*KW), the groups' tiles side by side in one grid (AlexNet's 2 groups of 192 channels,
//                 ResNeXt's 32 of 4 to 32). The 32-map tiles are for layers of few maps (squeeze and reduce
//                 1x1 layers of 16 to 48 maps), where a 64- or 128-map tile multiplies mostly zero rows.
// Workspace: split-K's partial sums, or the filter in tap order (never both in one call).
// simple64x64 and simt128x64 take x and w in f32, f16 or bf16 (widened exactly), the other tiles f32
// only (igemm_simt_tiles.h says why); every configuration takes x and y NCHW or NHWC, w
// MCKK or MKKC, bias and ReLU (fused into the store, or into the split-K reduction), y in f32, f16 or
// bf16. Same fp32 products as `direct` (fmaf), summed in another order (per split, then the splits in
// order): rel. L2 ~1e-7, within the 1e-5 bound.
#include "igemm_mainloop.cuh"
#include "igemm_math_simt.cuh"
#include "igemm_simt_tiles.h"

static const char SIMPLE[] = "simple64x64";
static const char TILE128x128[] = "simt128x128";
static const char TILE128x64[] = "simt128x64";
static const char TILE64x128[] = "simt64x128";
static const char TILE32x256[] = "simt32x256";
static const char TILE32x128[] = "simt32x128";
static const char QUAD64x64[] = "quad64x64";
static const char QUAD64x32[] = "quad64x32";
static const char QUAD32x64[] = "quad32x64";

// The single-buffered kernel (igemm_mainloop.cuh, shared with fp16 and wmma) tiles M as a whole.
static int simple_supports(const conv_problem* p) {
    if (p->groups == 1) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "launch configuration '%s' takes groups = 1 only, got groups = %lld (the simt "
                          "configurations take any groups)",
                          SIMPLE, (long long)p->groups);
}

// Each pipelined tile refuses, by name, the x dtypes its math does not take (simt128x64 takes all three).
template <class Math, const char* NAME>
static int tile_supports(const conv_problem* p) {
    return igemm_check_inputs<Math>(NAME, p);
}

// The pipelined tiles (igemm_simt_tiles.h) and their names: the configuration table and the workspace query
// walk this one list.
#define IGEMM_PIPELINED_TILES(X)                                                                                \
    X(TILE128x128, Simt128x128) X(TILE128x64, Simt128x64) X(TILE64x128, Simt64x128) X(TILE32x256, Simt32x256) \
    X(TILE32x128, Simt32x128) X(QUAD64x64, Quad64x64) X(QUAD64x32, Quad64x32) X(QUAD32x64, Quad32x64)
#define IGEMM_TILE_CONFIG(NAME, MATH) {NAME, igemm_pipelined_run<MATH>, tile_supports<MATH, NAME>},
#define IGEMM_TILE_WORKSPACE(NAME, MATH) igemm_pipelined_workspace<MATH>,

static const conv_config IMPLICIT_GEMM_CONFIGS[] = {
    {SIMPLE, igemm_run<IgemmSimtFp32Math>, simple_supports},
    IGEMM_PIPELINED_TILES(IGEMM_TILE_CONFIG)
};

// The workspace of whichever configuration runs (split-K partials or the staged filter): the largest
// any of them asks for.
static int implicit_gemm_workspace_size(const conv_problem* p, size_t* bytes) {
    int (*const each[])(const conv_problem*, size_t*) = {IGEMM_PIPELINED_TILES(IGEMM_TILE_WORKSPACE)};
    *bytes = 0;
    for (auto workspace : each) {
        size_t b = 0;
        const int status = workspace(p, &b);
        if (status != CONV_OK) return status;
        *bytes = std::max(*bytes, b);
    }
    return CONV_OK;
}

// For the calls that name no configuration and are not tuned. Few pixels (under 32 tiles of 128: batch 1,
// late layers at small batch): quad64x32, whatever the maps (on cnn5's 123 layers at batch 1, H200, it ran
// 1.045x the fastest configuration's time in geometric mean where the 8 x 8 tiles chosen by maps ran 1.37x:
// bench/results/nvidia-h200/implicit-gemm-configs-cnn5-b1.md). Else by maps per group: up to 32, the 32-map
// tiles (32 x 128 under 32 tiles of 256 pixels, else 32 x 256); up to 64, 64 x 128; more, 128 x 128.
// Half inputs: 128 x 64, the tile built for them.
static const char* implicit_gemm_default_config(const conv_problem* p) {
    if (p->x_dtype != CONV_F32) return TILE128x64;
    const int64_t pixels = p->B * conv_out_h(p) * conv_out_w(p);
    if (pixels < 32 * 128) return QUAD64x32;
    if (p->M / p->groups <= 32) return pixels < 32 * 256 ? TILE32x128 : TILE32x256;
    if (p->M / p->groups <= 64) return TILE64x128;
    return TILE128x128;
}

extern "C" const conv_impl conv_impl_implicit_gemm = {
    NULL, implicit_gemm_workspace_size, IMPLICIT_GEMM_CONFIGS,
    sizeof(IMPLICIT_GEMM_CONFIGS) / sizeof(IMPLICIT_GEMM_CONFIGS[0]), implicit_gemm_default_config};
