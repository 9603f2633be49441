// tc_igemm_host.cuh — the host side of the tensor-core implicit GEMM (tc_igemm.cuh): which operands
// need staging, the split-K decision, the workspace, the launch, and one variant's table of launch
// configurations, shared by implicit_gemm_tf32 and implicit_gemm_f16 (a Family names the variant and
// the operand precision each input dtype runs on, and whether it has the wgmma configurations: Hopper's
// mainloop, tc_wgmma.cuh, on GPUs of compute capability 9.0 in builds with sm_90a code).
//   Groups: one GEMM per pack of `pack` neighbouring groups, side by side (gridDim.y = G/pack x map
//   tiles per GEMM). A pack's channels are contiguous in x, so it reads them as one group of pack*C/G
//   channels; its filters are staged block-diagonal (each map's C/G weights at its own group's place in
//   the pack, zeros elsewhere). Packing trades tensor-core work (x pack) for tiles that are not mostly
//   empty: ResNeXt's 4 maps per group fill a 32-map tile as 8 groups. Cp = pack*C/G rounded up to whole
//   16-byte chunks, each GEMM's channels padded on their own when staged.
//   Workspace, in order (each part 256-byte aligned, absent when not needed):
//     xs  x staged as (B, H, W, G*Cp) in the operand dtype: x in NCHW, in another dtype, or C/G not whole chunks
//         (never for the NCHW configurations, whose mainloop reads fp32 NCHW x in place: tc_nchw_feed.cuh);
//     ws  w staged as (M, KH, KW, Cp) likewise: w in MCKK, in another dtype, or C/G not whole chunks;
//     partial  split-K's fp32 [splits][P][M] (the largest any split-K configuration of the family uses).
//   Split-K: a configuration marked SPLIT cuts the k-tiles into ranges so that the grid reaches about
//   TC_SPLIT_TARGET_BLOCKS blocks (a fixed count, not the device's, so that the workspace a plan asked
//   for stays right whatever GPU runs it), each range at least TC_SPLIT_MIN_TILES k-tiles long; it
//   refuses problems whose grid needs no split. A CLUSTER configuration (sm_90) splits the same way
//   into at most TC_CLUSTER_MAX ranges of at least TC_CLUSTER_MIN_TILES k-tiles, each tile's ranges one
//   thread-block cluster that reduces its partial sums through distributed shared memory: no partial
//   workspace and no reduction launch, so it pays at shorter reductions.
#pragma once

#include <array>

#include "split_k.cuh"
#include "tc_depthwise.h"
#include "tc_grouped.h"
#include "tc_pointwise.h"
#include "tc_stem.h"
#include "tc_igemm_kernel.cuh"
#include "tc_staging.cuh"
#include "tc_wgmma_tma.cuh"
#include "tma_map.cuh"
#include "conv_kernel_util.cuh"
#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "tensor_core_check.cuh"

constexpr int TC_SPLIT_TARGET_BLOCKS = 264;  // two blocks per SM of a 132-SM H100
constexpr int TC_SPLIT_MIN_TILES = 4;
constexpr int TC_SPLIT_MAX = 16;
constexpr int TC_CLUSTER_MAX = 8;  // the portable cluster size
constexpr int TC_CLUSTER_MIN_TILES = 2;

// How a configuration covers K: in one pass per block, split with partial sums in the workspace and a
// reduction launch, or split within thread-block clusters; TC_PERSISTENT (TMA tiles only): in one pass
// per tile, by a wave of blocks that loop over the tiles (tc_wgmma_tma.cuh).
enum TcSplit { TC_WHOLE_K, TC_SPLIT_WORKSPACE, TC_SPLIT_CLUSTER, TC_PERSISTENT };
// Whether a configuration splits K between blocks (and so needs a grid that gives it two splits or more).
constexpr bool tc_splits_k(TcSplit split) { return split == TC_SPLIT_WORKSPACE || split == TC_SPLIT_CLUSTER; }
constexpr size_t TC_ALIGN = 256;

static inline size_t tc_align_up(size_t bytes) { return (bytes + TC_ALIGN - 1) / TC_ALIGN * TC_ALIGN; }

// ---- operands ----

// Packs hold at most TC_PACK_MAX groups and TC_PACK_MAPS maps. Only tiles of at most TC_PACK_MAPS maps
// pack (tc_packs): the others keep one GEMM per group, with no filter staging (a launch that batch-1
// layers feel) and no extra tensor-core work; the tuner picks between them.
constexpr int64_t TC_PACK_MAX = 8, TC_PACK_MAPS = 32;
template <class Shape>
constexpr bool tc_packs = Shape::BN <= TC_PACK_MAPS;

struct TcOperands {
    int dtype;                 // the operand dtype
    int64_t pack, gemms;       // groups per GEMM, and GEMMs (G / pack)
    int64_t Cg, Cp;            // channels of one GEMM, and per (pixel, tap, GEMM) as the mainloop reads them
    int64_t Mg;                // maps of one GEMM
    bool stage_x, stage_w;     // whether x / w go through the workspace first
    size_t xs_bytes, ws_bytes; // their workspace parts (0 when not staged)
};

// x_direct / w_direct: the configuration reads x / w as the caller's tensors, never staged (x: the NCHW
// tiles, tc_nchw_feed.cuh and tc_nchw_mma.cuh; w: the latter).
static inline TcOperands tc_operands(const conv_problem* p, int dtype, bool pack_groups, bool x_direct = false,
                                     bool w_direct = false) {
    TcOperands o;
    const int64_t vec = tc_chunk_elems(dtype);
    o.dtype = dtype;
    o.pack = 1;
    while (pack_groups && p->groups % (2 * o.pack) == 0 && 2 * o.pack <= TC_PACK_MAX && 2 * o.pack * (p->M / p->groups) <= TC_PACK_MAPS)
        o.pack *= 2;
    o.gemms = p->groups / o.pack;
    o.Cg = p->C / o.gemms;
    o.Mg = p->M / o.gemms;
    o.Cp = (o.Cg + vec - 1) / vec * vec;
    o.stage_x = !x_direct && (p->x_dtype != dtype || p->x_layout != CONV_NHWC || o.Cp != o.Cg);
    o.stage_w = !w_direct && (p->w_dtype != dtype || p->w_layout != CONV_MKKC || o.Cp != o.Cg || o.pack > 1);
    const size_t elem = conv_dtype_size(dtype);
    o.xs_bytes = o.stage_x ? tc_align_up((size_t)(p->B * p->H * p->W * o.gemms * o.Cp) * elem) : 0;
    o.ws_bytes = o.stage_w ? tc_align_up((size_t)(p->M * p->KH * p->KW * o.Cp) * elem) : 0;
    return o;
}

// ---- grid and split-K ----

struct TcGrid {
    int k_tiles, tiles_per_split, splits;
    int64_t m_tiles, n_tiles;  // pixel tiles (gridDim.x), map tiles of all GEMMs (gridDim.y)
    int64_t group_tiles;       // map tiles per GEMM
};

// The grid of launch shape Shape on operands o (BK follows from the operand dtype), split or not.
template <class Shape>
static TcGrid tc_grid(const conv_problem* p, const TcOperands& o, TcSplit split) {
    TcGrid g;
    const int64_t P = p->B * conv_out_h(p) * conv_out_w(p), K = p->KH * p->KW * o.Cp;
    const int64_t bk = Shape::ROW_CHUNKS * tc_chunk_elems(o.dtype);
    // TMA tiles copy one tap per k-tile (tc_wgmma_tma.cuh): the channels' tiles, per tap.
    g.k_tiles = Shape::TMA ? (int)(p->KH * p->KW * ((o.Cp + bk - 1) / bk)) : (int)((K + bk - 1) / bk);
    g.m_tiles = (P + Shape::BM - 1) / Shape::BM;
    g.group_tiles = (o.Mg + Shape::BN - 1) / Shape::BN;
    g.n_tiles = o.gemms * g.group_tiles;
    int splits = 1;
    if (tc_splits_k(split)) {
        const bool cluster = split == TC_SPLIT_CLUSTER;
        const int64_t tiles = g.m_tiles * g.n_tiles;
        const int64_t want = (TC_SPLIT_TARGET_BLOCKS + tiles - 1) / tiles;
        const int64_t most = g.k_tiles / (cluster ? TC_CLUSTER_MIN_TILES : TC_SPLIT_MIN_TILES);
        const int cap = cluster ? TC_CLUSTER_MAX : TC_SPLIT_MAX;
        splits = (int)(want < most ? want : most);
        if (splits > cap) splits = cap;
        if (splits < 1) splits = 1;
    }
    // Even ranges, none empty: splits = ceil(k_tiles / tiles_per_split).
    g.tiles_per_split = (g.k_tiles + splits - 1) / splits;
    g.splits = (g.k_tiles + g.tiles_per_split - 1) / g.tiles_per_split;
    return g;
}

// ---- families: the variant's name and its operand precision per input dtype ----

// implicit_gemm_tf32: tf32 operands for every input dtype (f16 and bf16 values are exact in fp32).
// No wgmma configurations: wgmma reads tf32 operands from shared memory with the low 13 bits dropped (a
// truncation), where this family rounds them to nearest after ldmatrix.
struct TcFamilyTf32 {
    static constexpr const char* NAME = "implicit_gemm_tf32";
    static constexpr bool WGMMA = false;
    static constexpr bool NCHW_MMA = true;  // fp32 operands: NCHW x and w multiplied as they lie
    static constexpr bool DIRECT = false;  // the direct tensor-core kernels are built for 16-bit operands
    static int op_dtype(const conv_problem*) { return CONV_F32; }
    template <class F>
    static int with_op(const conv_problem*, F&& f) { return f(TcTf32{}); }
};

// implicit_gemm_f16: bf16 operands for bf16 inputs, fp16 for f16 and f32 ones (f32 rounded to fp16).
struct TcFamilyHalf {
    static constexpr const char* NAME = "implicit_gemm_f16";
    static constexpr bool WGMMA = true;
    static constexpr bool NCHW_MMA = false;  // its fp32 x needs converting: the wgmma NCHW tiles do that
    // depthwise layers as banded GEMMs per channel (tc_depthwise.cu), grouped ones as GEMMs per group from a
    // staged window (tc_grouped.cu)
    static constexpr bool DIRECT = true;
    static int op_dtype(const conv_problem* p) { return p->x_dtype == CONV_BF16 ? CONV_BF16 : CONV_F16; }
    template <class F>
    static int with_op(const conv_problem* p, F&& f) {
        if (p->x_dtype == CONV_BF16) return f(TcBf16{});
        return f(TcF16{});
    }
};

// ---- launching ----

static inline int tc_check_aligned(const char* variant, const char* what, const void* ptr) {
    if (((uintptr_t)ptr & 15) == 0) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "%s: %s at %p is not 16-byte aligned, which its cp.async copies need when it is read "
                          "in place (NHWC / MKKC in the operand dtype)", variant, what, ptr);
}

// Whether a TMA tile reads x through an im2col map: every layer but a 1x1 window at stride 1 without
// padding, whose x is a plain pixels x channels matrix.
static inline bool tc_tma_im2col(const conv_problem* p) {
    return p->KH != 1 || p->KW != 1 || p->stride_h != 1 || p->stride_w != 1 || p->pad_h || p->pad_w;
}

// Makes a launch of grid g one thread-block cluster per tile's splits (1 x 1 x splits): config has room
// for one more attribute.
static inline void tc_cluster_splits(cudaLaunchConfig_t& config, const TcGrid& g) {
    cudaLaunchAttribute& cluster = config.attrs[config.numAttrs++];
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 1;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = (unsigned)g.splits;
}

// Launches the TMA GEMM (tc_wgmma_tma.cuh) of tile Tile on x (B, H, W, Cx) and w (M, KH, KW, Cp), as k
// says (config: grid, stream and attributes; under cluster split-K its splits a cluster, config having
// room for one more attribute; persistent: a wave of blocks, at most one a tile).
template <class Tile, TcSplit SPLIT>
static int tc_launch_tma(const char* variant, const conv_problem* p, TcParams k, const TcGrid& g,
                         cudaLaunchConfig_t config, int dtype) {
    constexpr bool PERSISTENT = SPLIT == TC_PERSISTENT;
    CUtensorMap x_map, w_map;
    k.x_im2col = tc_tma_im2col(p);
    int status = k.x_im2col ? tma_map_im2col(&x_map, variant, k.x, dtype, p, k.Cx, Tile::BM)
                            : tma_map_rows(&x_map, variant, k.x, dtype, k.P, k.Cx, Tile::BM);
    if (status == CONV_OK) status = tma_map_filters(&w_map, variant, k.w, dtype, k.M, p->KH * p->KW, k.Cp, Tile::BN);
    if (status != CONV_OK) return status;
    // y by TMA stores where the staged epilogue would run (y NHWC in whole 16-byte rows) and no split reduces.
    CUtensorMap y_map = {};
    const int y_tma = (SPLIT == TC_WHOLE_K || PERSISTENT) && k.staged_store && !k.partial;
    if (y_tma) status = tma_map_y(&y_map, variant, k.y, p->y_dtype, k.P, k.M, Tile::BM);
    if (status != CONV_OK) return status;
    const auto kernel = tc_wgmma_tma_kernel<Tile, SPLIT == TC_SPLIT_CLUSTER, PERSISTENT>;
    config.blockDim = dim3(Tile::THREADS + 32);  // the math warpgroups, then the producer warp
    if constexpr (SPLIT == TC_SPLIT_CLUSTER) tc_cluster_splits(config, g);
    config.dynamicSmemBytes = PERSISTENT ? tc_tma_persistent_smem_bytes<Tile>(p->y_dtype, y_tma)
                                         : tc_wgmma_launch_smem_bytes<Tile, SPLIT == TC_WHOLE_K>(k);
    CONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)config.dynamicSmemBytes));
    if constexpr (PERSISTENT) {
        int64_t wave;
        status = conv_wave_blocks(kernel, (int)config.blockDim.x, config.dynamicSmemBytes, &wave);
        if (status != CONV_OK) return status;
        config.gridDim = dim3(conv_wave_grid(g.m_tiles * g.n_tiles, wave, true), 1, 1);
    }
    conv_note_launch("tc_wgmma_tma_kernel");
    CONV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, k, x_map, w_map, y_map, y_tma));
    return CONV_OK;
}

// Launches tc_igemm_kernel of tile Tile as k and config say (its splits a cluster under cluster split-K:
// config has room for one more attribute).
template <class Tile, TcSplit SPLIT>
static int tc_launch_igemm(const TcParams& k, const TcGrid& g, cudaLaunchConfig_t config) {
    const auto kernel = tc_igemm_kernel<Tile, SPLIT == TC_SPLIT_CLUSTER>;
    if constexpr (Tile::WGMMA) {  // the pipeline in dynamic shared memory, past the default 48 KB limit
        config.dynamicSmemBytes = tc_wgmma_launch_smem_bytes<Tile, SPLIT == TC_WHOLE_K>(k);
        CONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)config.dynamicSmemBytes));
    }
    if constexpr (SPLIT == TC_SPLIT_CLUSTER) tc_cluster_splits(config, g);
    conv_note_launch("tc_igemm_kernel");
    CONV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, k));
    return CONV_OK;
}

// Launches the GEMM of configuration (Tile, SPLIT), as the programmatic dependent of the stream's previous
// kernel (grid_dependency.cuh): the operand staging where there is one, else whatever ran before.
template <class Tile, TcSplit SPLIT>
static int tc_launch(const char* variant, const conv_problem* p, const TcOperands& o, const TcGrid& g,
                     const void* x, const void* w, const conv_tensors* t, float* partial, cudaStream_t stream) {
    TcParams k;
    k.x = x;
    k.w = w;
    k.H = (int)p->H; k.W = (int)p->W; k.Cp = (int)o.Cp; k.KW = (int)p->KW;
    k.Cx = (int)(Tile::NCHW ? p->C : o.gemms * o.Cp);  // x's channels per pixel (NCHW tiles: the caller's C)
    k.stride_h = (int)p->stride_h; k.stride_w = (int)p->stride_w;
    k.pad_h = (int)p->pad_h; k.pad_w = (int)p->pad_w;
    k.dil_h = (int)p->dilation_h; k.dil_w = (int)p->dilation_w;
    k.OW = (int)conv_out_w(p);
    k.OHW = (int)(conv_out_h(p) * conv_out_w(p));
    k.P = (int)(p->B * k.OHW);
    k.M = (int)p->M;
    k.Mg = (int)o.Mg;
    k.map_tiles = (int)g.group_tiles;
    k.K = (int)(p->KH * p->KW * o.Cp);
    k.k_tiles = g.k_tiles;
    k.tiles_per_split = g.tiles_per_split;
    k.y = t->y;
    k.bias = p->bias ? t->bias : nullptr;
    k.y_dtype = p->y_dtype;
    k.y_nhwc = p->y_layout == CONV_NHWC;
    k.relu = p->epilogue == CONV_EPILOGUE_RELU;
    k.x_im2col = false;
    k.partial = partial;
    // Rows of y (NHWC) or of the partials, and each group's first map, start on 16-byte boundaries.
    const size_t out_elem = partial ? sizeof(float) : conv_dtype_size(p->y_dtype);
    const uintptr_t out = partial ? (uintptr_t)partial : (uintptr_t)t->y;
    k.staged_store = (partial || k.y_nhwc) && (size_t)k.Mg * out_elem % 16 == 0 && out % 16 == 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)g.m_tiles, (unsigned)g.n_tiles, (unsigned)g.splits);
    config.blockDim = dim3(Tile::THREADS);
    config.stream = stream;
    cudaLaunchAttribute attrs[2];
    config.attrs = attrs;
    grid_dependent_launch(config);
    if constexpr (Tile::TMA) {
        return tc_launch_tma<Tile, SPLIT>(variant, p, k, g, config, o.dtype);
    } else {
        (void)variant;
        return tc_launch_igemm<Tile, SPLIT>(k, g, config);
    }
}

// The conv_run_fn of configuration (Shape, SPLIT) of a family: stages x and w where needed, runs the
// mainloop, and under workspace split-K reduces the partial sums into y.
template <class Family, class Shape, TcSplit SPLIT>
int tc_run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                  void* stream_) {
    const cudaStream_t stream = conv_stream(stream_);
    const TcOperands o = tc_operands(p, Family::op_dtype(p), tc_packs<Shape>, Shape::NCHW, Shape::NCHW_MMA);
    return Family::with_op(p, [&](auto op) -> int {
        using Tile = TcTile<decltype(op), Shape>;
        const TcGrid g = tc_grid<Shape>(p, o, SPLIT);
        const bool partials = SPLIT == TC_SPLIT_WORKSPACE && g.splits > 1;
        const size_t partial_bytes = partials ? conv_split_k_workspace(p, g.splits) : 0;
        const size_t need = o.xs_bytes + o.ws_bytes + partial_bytes;
        if (workspace_bytes < need || (need && !workspace))
            return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL, "%s: needs %zu bytes of workspace, got %zu",
                                  Family::NAME, need, workspace_bytes);
        unsigned char* ws = static_cast<unsigned char*>(workspace);
        const void* x = t->x;
        const void* w = t->w;
        TcStageCopy copies[2];
        int count = 0;
        if (o.stage_x) {
            copies[count++] = {t->x, ws, p->x_layout == CONV_NCHW, p->B, p->H * p->W,
                               TcStageChannels{(int)o.Cg, (int)o.Cp, (int)o.gemms, 1, 1}};
            x = ws;
        }
        if (o.stage_w) {
            // Block-diagonal within a pack: map m's weights at its group's place, (m / (M/G)) % pack.
            copies[count++] = {t->w, ws + o.xs_bytes, p->w_layout == CONV_MCKK, p->M, p->KH * p->KW,
                               TcStageChannels{(int)(p->C / p->groups), (int)o.Cp, 1, (int)o.pack,
                                               (int)(p->M / p->groups)}};
            w = ws + o.xs_bytes;
        }
        int status = o.stage_x || Shape::NCHW ? CONV_OK : tc_check_aligned(Family::NAME, "x", x);
        // (NCHW mma.sync tiles read unaligned w by 4-byte copies.)
        if (status == CONV_OK && !o.stage_w && !Shape::NCHW_MMA) status = tc_check_aligned(Family::NAME, "w", w);
        // x and w share one dtype (the problem's check), so one launch converts both.
        if (status == CONV_OK && count) status = tc_stage_channels_last(copies, count, p->x_dtype, o.dtype, stream);
        if (status != CONV_OK) return status;
        float* partial = partials ? reinterpret_cast<float*>(ws + o.xs_bytes + o.ws_bytes) : nullptr;
        status = tc_launch<Tile, SPLIT>(Family::NAME, p, o, g, x, w, t, partial, stream);
        if (status != CONV_OK || !partial) return status;
        return conv_split_k_reduce(p, partial, g.splits, p->bias ? t->bias : nullptr, t->y, stream);
    });
}

// The kernel of configuration (Shape, SPLIT) on p's operand precision, for the device checks.
template <class Family, class Shape, TcSplit SPLIT>
static const void* tc_kernel_of(const conv_problem* p) {
    const void* kernel = nullptr;
    Family::with_op(p, [&](auto op) -> int {
        using Tile = TcTile<decltype(op), Shape>;
        if constexpr (Shape::TMA)
            kernel = reinterpret_cast<const void*>(
                &tc_wgmma_tma_kernel<Tile, SPLIT == TC_SPLIT_CLUSTER, SPLIT == TC_PERSISTENT>);
        else
            kernel = reinterpret_cast<const void*>(&tc_igemm_kernel<Tile, SPLIT == TC_SPLIT_CLUSTER>);
        return CONV_OK;
    });
    return kernel;
}

// Limits of configuration (Shape, SPLIT) beyond the variant's: the NCHW ones' x (and the nchw_mma ones'
// 1x1 window), the map tiles fit gridDim.y, a split-K configuration takes only problems whose grid it
// splits, a cluster one needs sm_90 and code built for it, a wgmma one a GPU of compute capability 9.0
// and this build's sm_90a code.
template <class Family, class Shape, TcSplit SPLIT>
int tc_config_supports(const conv_problem* p) {
    if constexpr (Shape::NCHW) {
        if (p->x_layout != CONV_NCHW || p->x_dtype != CONV_F32 || p->groups != 1)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "%s: the NCHW configurations read x as fp32 NCHW in an ungrouped convolution; this "
                                  "one has x %s %s and %lld groups", Family::NAME, conv_dtype_name(p->x_dtype),
                                  p->x_layout == CONV_NCHW ? "NCHW" : "NHWC", (long long)p->groups);
    }
    if constexpr (Shape::NCHW_MMA) {
        if (p->KH != 1 || p->KW != 1)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "%s: the nchw_mma configurations run 1x1 windows (x read as a channels x pixels "
                                  "matrix); this one is %lldx%lld", Family::NAME, (long long)p->KH, (long long)p->KW);
    }
    const TcOperands o = tc_operands(p, Family::op_dtype(p), tc_packs<Shape>, Shape::NCHW, Shape::NCHW_MMA);
    const TcGrid g = tc_grid<Shape>(p, o, SPLIT);
    if (g.n_tiles > 65535)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: M=%lld maps in %lld GEMMs make %lld tiles of %d, more than gridDim.y allows",
                              Family::NAME, (long long)p->M, (long long)o.gemms, (long long)g.n_tiles, Shape::BN);
    if (tc_splits_k(SPLIT) && g.splits < 2)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: split-K not used here: %lld block tiles and %d k-tiles need no split", Family::NAME,
                              (long long)(g.m_tiles * g.n_tiles), g.k_tiles);
    static_assert(SPLIT != TC_PERSISTENT || Shape::TMA, "only the TMA kernel loops over tiles");
    if constexpr (SPLIT == TC_PERSISTENT) {
        // A block's tiles and pipeline positions count in 32 bits (tc_wgmma_tma_kernel).
        if (g.m_tiles * g.n_tiles * g.k_tiles >= ((int64_t)1 << 31))
            return conv_set_error(CONV_ERR_UNSUPPORTED, "%s: %lld output tiles of %d x %d by %d k-tiles each pass "
                                  "the persistent configurations' 2^31", Family::NAME,
                                  (long long)(g.m_tiles * g.n_tiles), Shape::BM, Shape::BN, g.k_tiles);
    }
    if constexpr (Shape::TMA) {
        if (p->groups != 1)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "%s: the TMA configurations run ungrouped convolutions (one GEMM); this one has %lld "
                                  "groups", Family::NAME, (long long)p->groups);
        int status = tma_check_driver(Family::NAME);
        if (status == CONV_OK && tc_tma_im2col(p)) status = tma_im2col_supports(Family::NAME, p);
        if (status != CONV_OK) return status;
    }
    if constexpr (Shape::WGMMA) {
        static ConvDeviceMask passed{0};
        const int status = conv_check_sm90a(Family::NAME, passed);
        if (status != CONV_OK) return status;
    }
    if constexpr (SPLIT == TC_SPLIT_CLUSTER) {
        static ConvDeviceMask passed{0};
        return conv_check_tensor_cores(Family::NAME, 900, tc_kernel_of<Family, Shape, SPLIT>(p), passed);
    }
    return CONV_OK;
}

// ---- the variant ----

// Launch shapes: 128 x 128 blocks of 8 warps (64 x 32 each), 3 stages; 128 x 64 and 64 x 128 blocks of
// 4 warps, 4 stages; 64 x 64 blocks of 4 warps (32 x 32), plain, split-K and cluster split-K, 6 stages
// (48 KB: 4 blocks per SM, one fewer than the registers allow; measured on the H100 1-2% faster than 4
// stages on cnn5, and nowhere slower); 128 x 32 blocks of 4 warps (32 x 32) for GEMMs of few maps
// (packed groups, narrow layers).
using TcShape128x128 = TcShape<128, 128, 64, 32, 3>;
using TcShape128x64 = TcShape<128, 64, 64, 32, 4>;
using TcShape64x128 = TcShape<64, 128, 32, 64, 4>;
using TcShape64x64 = TcShape<64, 64, 32, 32, 6>;
using TcShape128x32 = TcShape<128, 32, 32, 32, 4>;
// wgmma (sm_90a, fp16 / bf16 operands): a warpgroup per 64 pixels; stages of (BM + BN) x 128 bytes.
// Kept for what the tuner picked on the H100 (cnn5 at batch 1 and 32, fp16 and bf16, 476 tunings):
// 64 x 64 with 4 stages (64 KB, three blocks per SM) is the best on 109 and within 5% of the best
// on 219, 6 stages on 84; 128 x 64 with 4 stages (96 KB, two per SM) and 128 x 128 with 3 win the larger
// grids (45, 48), 128 x 64 with 6 and 64 x 128 the long reductions of many maps (13, 19); the cluster
// split-K 64 x 64 the small grids (34). Dropped as never or seldom best: 128 x 128 with 4 stages, 64 x 64
// with 3, 256 x 128, a 128 x 64 cluster split, and 128 x 256 fed by cp.async, which the TMA-fed 128 x 256
// replaced (the tuner picked it on no suite shape of the committed tables, bench/results/).
using TcWgmma128x128 = TcWgmmaShape<128, 128, 3>;
using TcWgmma128x64 = TcWgmmaShape<128, 64, 4>;
using TcWgmma128x64s6 = TcWgmmaShape<128, 64, 6>;
using TcWgmma64x128 = TcWgmmaShape<64, 128, 4>;
using TcWgmma64x64 = TcWgmmaShape<64, 64, 4>;
using TcWgmma64x64s6 = TcWgmmaShape<64, 64, 6>;
// TMA-fed wgmma (ungrouped layers, tc_wgmma_tma.cuh): the same tiles plus a producer warp, every stage
// filling ahead of the math. The 128 x 64 and 128 x 128 ones also persistent (a wave of blocks looping
// over the tiles, the next tile's copies under this one's stores): for the 1x1 layers of a few k-tiles at
// production batch, where a block per tile waits on its first copies and its stores in turn.
using TcTma128x256 = TcTmaShape<128, 256, 4>;
using TcTma128x128 = TcTmaShape<128, 128, 4>;
using TcTma128x64 = TcTmaShape<128, 64, 4>;
using TcTma64x128 = TcTmaShape<64, 128, 4>;
using TcTma64x64 = TcTmaShape<64, 64, 4>;
using TcTma64x64s6 = TcTmaShape<64, 64, 6>;
// NCHW (fp32 NCHW x read in place, tc_nchw_feed.cuh): the wgmma tiles the tuner picked most for fp32 I/O.
// On the H100's cnn5 fast runs (batch 1 and 32, 246 tunings) 128 x 64 won 18, 64 x 64 and 128 x 128 4
// each, mostly 1x1 layers at batch 32, where x's traffic is the layer's time.
using TcNchw128x128 = TcNchwShape<128, 128, 3>;
using TcNchw128x64 = TcNchwShape<128, 64, 4>;
using TcNchw64x64 = TcNchwShape<64, 64, 4>;
// NCHW mma.sync (implicit_gemm_tf32, 1x1 windows: fp32 NCHW x and w read in place, tc_nchw_mma.cuh): one
// launch where the other fast-path configurations stage x and w first. 64 x 64 with 4 stages (38 KB),
// 128 x 64 of 8 warps with 3 (41 KB), 128 x 32 with 4 (44 KB) for layers of few maps; cluster split-K
// of the 64 x 64 and 128 x 32 tiles for batch-1 grids. (Deeper pipelines, 8 stages of 16 channels and 6
// of 32 in dynamic shared memory, were not picked on one of 64 cnn5 1x1 layers at batch 1: dropped.)
using TcNchwMma64x64 = TcNchwMmaShape<64, 64, 4>;
using TcNchwMma128x64 = TcNchwMmaShape<128, 64, 3>;
using TcNchwMma128x32 = TcNchwMmaShape<128, 32, 4>;

// Configuration (Shape, SPLIT) of a family, under `name`.
template <class Family, class Shape, TcSplit SPLIT>
constexpr conv_config tc_config(const char* name) {
    return conv_config{name, tc_run<Family, Shape, SPLIT>, tc_config_supports<Family, Shape, SPLIT>};
}

// implicit_gemm_f16's Hopper configurations, compiled in translation units of their own so that the
// library builds in parallel (tc_igemm_wgmma.cu: the cp.async-fed wgmma tiles, tc_igemm_nchw.cu: the
// NCHW ones, tc_igemm_tma.cu: the TMA-fed ones); every other file only declares them.
#define TC_WGMMA_CONFIGS(X)                                                                                     \
    X(TcWgmma128x128, TC_WHOLE_K) X(TcWgmma128x64, TC_WHOLE_K) X(TcWgmma128x64s6, TC_WHOLE_K)                  \
    X(TcWgmma64x128, TC_WHOLE_K) X(TcWgmma64x64, TC_WHOLE_K) X(TcWgmma64x64s6, TC_WHOLE_K)                     \
    X(TcWgmma64x64, TC_SPLIT_CLUSTER)
#define TC_NCHW_CONFIGS(X) X(TcNchw128x128, TC_WHOLE_K) X(TcNchw128x64, TC_WHOLE_K) X(TcNchw64x64, TC_WHOLE_K)
#define TC_TMA_CONFIGS(X)                                                                                       \
    X(TcTma128x256, TC_WHOLE_K) X(TcTma128x128, TC_WHOLE_K) X(TcTma128x64, TC_WHOLE_K)                         \
    X(TcTma64x128, TC_WHOLE_K) X(TcTma64x64, TC_WHOLE_K) X(TcTma64x64s6, TC_WHOLE_K)                           \
    X(TcTma64x64, TC_SPLIT_CLUSTER) X(TcTma128x128, TC_PERSISTENT) X(TcTma128x64, TC_PERSISTENT)
#define TC_HALF_CONFIG(EXTERN, SHAPE, SPLIT)                                                                     \
    EXTERN template int tc_run<TcFamilyHalf, SHAPE, SPLIT>(const conv_problem*, const conv_tensors*, void*,     \
                                                           size_t, void*);                                     \
    EXTERN template int tc_config_supports<TcFamilyHalf, SHAPE, SPLIT>(const conv_problem*);
#define TC_HALF_DECLARE(SHAPE, SPLIT) TC_HALF_CONFIG(extern, SHAPE, SPLIT)
#define TC_HALF_DEFINE(SHAPE, SPLIT) TC_HALF_CONFIG(, SHAPE, SPLIT)
TC_WGMMA_CONFIGS(TC_HALF_DECLARE)
TC_NCHW_CONFIGS(TC_HALF_DECLARE)
TC_TMA_CONFIGS(TC_HALF_DECLARE)

template <class Family>
struct TcVariant {
    static constexpr const char* TILE_128x128 = "tile128x128_s3";
    static constexpr const char* TILE_128x64 = "tile128x64_s4";
    static constexpr const char* TILE_64x128 = "tile64x128_s4";
    static constexpr const char* TILE_64x64 = "tile64x64_s6";
    static constexpr const char* SPLIT_64x64 = "tile64x64_s6_splitk";
    static constexpr const char* TILE_128x32 = "tile128x32_s4";
    static constexpr const char* CLUSTER_64x64 = "tile64x64_s6_cluster";
    static constexpr const char* WGMMA_128x128 = "wgmma128x128_s3";
    static constexpr const char* WGMMA_128x64 = "wgmma128x64_s4";
    static constexpr const char* WGMMA_128x64s6 = "wgmma128x64_s6";
    static constexpr const char* WGMMA_64x128 = "wgmma64x128_s4";
    static constexpr const char* WGMMA_64x64 = "wgmma64x64_s4";
    static constexpr const char* WGMMA_64x64s6 = "wgmma64x64_s6";
    static constexpr const char* WGMMA_CLUSTER_64x64 = "wgmma64x64_s4_cluster";
    static constexpr const char* TMA_128x256 = "tma128x256_s4";
    static constexpr const char* TMA_128x128 = "tma128x128_s4";
    static constexpr const char* TMA_128x64 = "tma128x64_s4";
    static constexpr const char* TMA_64x128 = "tma64x128_s4";
    static constexpr const char* TMA_64x64 = "tma64x64_s4";
    static constexpr const char* TMA_64x64s6 = "tma64x64_s6";
    static constexpr const char* TMA_CLUSTER_64x64 = "tma64x64_s4_cluster";
    static constexpr const char* TMA_PERSISTENT_128x128 = "tma128x128_s4_persistent";
    static constexpr const char* TMA_PERSISTENT_128x64 = "tma128x64_s4_persistent";
    static constexpr const char* NCHW_128x128 = "nchw128x128_s3";
    static constexpr const char* NCHW_128x64 = "nchw128x64_s4";
    static constexpr const char* NCHW_64x64 = "nchw64x64_s4";
    static constexpr const char* NCHW_MMA_64x64 = "nchw_mma64x64_s4";
    static constexpr const char* NCHW_MMA_128x64 = "nchw_mma128x64_s3";
    static constexpr const char* NCHW_MMA_128x32 = "nchw_mma128x32_s4";
    static constexpr const char* NCHW_MMA_CLUSTER_64x64 = "nchw_mma64x64_s4_cluster";
    static constexpr const char* DW_32x32_C16 = "dw32x32_c16";
    static constexpr const char* DW_16x16_C32 = "dw16x16_c32";
    static constexpr const char* GRP_128_C64 = "grp128_c64";
    static constexpr const char* GRP_128_C32 = "grp128_c32";
    static constexpr const char* GRP_64_C32 = "grp64_c32";
    static constexpr const char* PW_32x64 = "pw32x64";
    static constexpr const char* STEM_32x64 = "stem32x64";

    // The mma.sync configurations, then (Family::WGMMA) the wgmma ones, then (Family::NCHW_MMA) the NCHW
    // mma.sync ones, then (Family::DIRECT) the depthwise and grouped ones.
    static constexpr conv_config MMA_SYNC[] = {
        tc_config<Family, TcShape128x128, TC_WHOLE_K>(TILE_128x128),
        tc_config<Family, TcShape128x64, TC_WHOLE_K>(TILE_128x64),
        tc_config<Family, TcShape64x128, TC_WHOLE_K>(TILE_64x128),
        tc_config<Family, TcShape64x64, TC_WHOLE_K>(TILE_64x64),
        tc_config<Family, TcShape64x64, TC_SPLIT_WORKSPACE>(SPLIT_64x64),
        tc_config<Family, TcShape128x32, TC_WHOLE_K>(TILE_128x32),
        tc_config<Family, TcShape64x64, TC_SPLIT_CLUSTER>(CLUSTER_64x64),
    };
    // An explicit bound: sizeof(WGMMA) would instantiate the initializer (the wgmma kernels) for the tf32
    // family too.
    static constexpr int NUM_WGMMA = 19;
    static constexpr conv_config WGMMA[NUM_WGMMA] = {
        tc_config<Family, TcWgmma128x128, TC_WHOLE_K>(WGMMA_128x128),
        tc_config<Family, TcWgmma128x64, TC_WHOLE_K>(WGMMA_128x64),
        tc_config<Family, TcWgmma128x64s6, TC_WHOLE_K>(WGMMA_128x64s6),
        tc_config<Family, TcWgmma64x128, TC_WHOLE_K>(WGMMA_64x128),
        tc_config<Family, TcWgmma64x64, TC_WHOLE_K>(WGMMA_64x64),
        tc_config<Family, TcWgmma64x64s6, TC_WHOLE_K>(WGMMA_64x64s6),
        tc_config<Family, TcWgmma64x64, TC_SPLIT_CLUSTER>(WGMMA_CLUSTER_64x64),
        tc_config<Family, TcTma128x256, TC_WHOLE_K>(TMA_128x256),
        tc_config<Family, TcTma128x128, TC_WHOLE_K>(TMA_128x128),
        tc_config<Family, TcTma128x64, TC_WHOLE_K>(TMA_128x64),
        tc_config<Family, TcTma64x128, TC_WHOLE_K>(TMA_64x128),
        tc_config<Family, TcTma64x64, TC_WHOLE_K>(TMA_64x64),
        tc_config<Family, TcTma64x64s6, TC_WHOLE_K>(TMA_64x64s6),
        tc_config<Family, TcTma64x64, TC_SPLIT_CLUSTER>(TMA_CLUSTER_64x64),
        tc_config<Family, TcTma128x128, TC_PERSISTENT>(TMA_PERSISTENT_128x128),
        tc_config<Family, TcTma128x64, TC_PERSISTENT>(TMA_PERSISTENT_128x64),
        tc_config<Family, TcNchw128x128, TC_WHOLE_K>(NCHW_128x128),
        tc_config<Family, TcNchw128x64, TC_WHOLE_K>(NCHW_128x64),
        tc_config<Family, TcNchw64x64, TC_WHOLE_K>(NCHW_64x64),
    };
    // (Family::NCHW_MMA) The tf32 mma.sync tiles on fp32 NCHW x and w in place; the same explicit bound.
    static constexpr int NUM_NCHW_MMA = 4;
    static constexpr conv_config NCHW_MMA[NUM_NCHW_MMA] = {
        tc_config<Family, TcNchwMma64x64, TC_WHOLE_K>(NCHW_MMA_64x64),
        tc_config<Family, TcNchwMma128x64, TC_WHOLE_K>(NCHW_MMA_128x64),
        tc_config<Family, TcNchwMma128x32, TC_WHOLE_K>(NCHW_MMA_128x32),
        tc_config<Family, TcNchwMma64x64, TC_SPLIT_CLUSTER>(NCHW_MMA_CLUSTER_64x64),
    };
    // (Family::DIRECT) Depthwise layers as banded GEMMs per channel (tc_depthwise.cu): output tile rows x
    // columns, channels per block (taken by 16 warps: dw32x32_c16, else 8). Grouped layers as GEMMs per
    // group from a staged window (tc_grouped.cu): output pixels, input channels per block (8 warps:
    // grp128_c64, else 4). Ungrouped 1x1 layers of up to 64 channels streamed by warps of 32-pixel tiles
    // (tc_pointwise.cu); ungrouped layers of up to 8 channels (the stems) likewise, each tile's windows
    // gathered as the GEMM's reduction (tc_stem.cu).
    static constexpr int NUM_DIRECT = 7;
    static constexpr conv_config DIRECT[NUM_DIRECT] = {
        {DW_32x32_C16, tc_dw_run<2, 4, 16, 16>, tc_dw_supports<2, 4, 16, 16>},
        {DW_16x16_C32, tc_dw_run<1, 2, 32, 8>, tc_dw_supports<1, 2, 32, 8>},
        {GRP_128_C64, tc_grouped_run<128, 64, 8>, tc_grouped_supports<128, 64, 8>},
        {GRP_128_C32, tc_grouped_run<128, 32, 4>, tc_grouped_supports<128, 32, 4>},
        {GRP_64_C32, tc_grouped_run<64, 32, 4>, tc_grouped_supports<64, 32, 4>},
        {PW_32x64, tc_pw_run<4>, tc_pw_supports<4>},
        {STEM_32x64, tc_stem_run<4>, tc_stem_supports<4>},
    };
    static constexpr int NUM_MMA_SYNC = sizeof(MMA_SYNC) / sizeof(MMA_SYNC[0]);
    static constexpr int NUM_WGMMA_USED = Family::WGMMA ? NUM_WGMMA : 0;
    static constexpr int NUM_NCHW_MMA_USED = Family::NCHW_MMA ? NUM_NCHW_MMA : 0;
    static constexpr int NUM_CONFIGS =
        NUM_MMA_SYNC + NUM_WGMMA_USED + NUM_NCHW_MMA_USED + (Family::DIRECT ? NUM_DIRECT : 0);
    static constexpr std::array<conv_config, NUM_CONFIGS> CONFIGS = [] {
        std::array<conv_config, NUM_CONFIGS> all{};
        for (int i = 0; i < NUM_MMA_SYNC; ++i) all[i] = MMA_SYNC[i];
        if constexpr (Family::WGMMA)  // else never instantiated: no wgmma kernels for the family
            for (int i = 0; i < NUM_WGMMA; ++i) all[NUM_MMA_SYNC + i] = WGMMA[i];
        if constexpr (Family::NCHW_MMA)  // likewise
            for (int i = 0; i < NUM_NCHW_MMA; ++i) all[NUM_MMA_SYNC + NUM_WGMMA_USED + i] = NCHW_MMA[i];
        if constexpr (Family::DIRECT)
            for (int i = 0; i < NUM_DIRECT; ++i) all[NUM_MMA_SYNC + NUM_WGMMA_USED + NUM_NCHW_MMA_USED + i] = DIRECT[i];
        return all;
    }();

    // The GPU (sm_80+: mma.sync, ldmatrix, cp.async) and the code this build runs on it; the coordinates'
    // int32 range; K and the staged operands' sizes.
    static int supports(const conv_problem* p) {
        int status = conv_check_coords(Family::NAME, p, 0, 0);
        if (status != CONV_OK) return status;
        // K of the packed GEMM, the longer one (the index math's bound holds for both).
        const TcOperands o = tc_operands(p, Family::op_dtype(p), true);
        if (p->KH * p->KW * o.Cp > CONV_INDEX_LIMIT)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "%s: K = KH*KW*C' = %lld (C' = %lld channels of a GEMM, padded) passes 2^30",
                                  Family::NAME, (long long)(p->KH * p->KW * o.Cp), (long long)o.Cp);
        static ConvDeviceMask passed{0};
        return conv_check_tensor_cores(Family::NAME, 800, tc_kernel_of<Family, TcShape64x64, TC_WHOLE_K>(p), passed);
    }

    // Staged operands (packed or not, whichever needs more) plus the largest split-K partial of the
    // split-K configuration (SPLIT_64x64, which does not pack) for this problem or any smaller batch: the
    // dispatcher's last batch chunk may be smaller than the one it asks about, and a smaller grid may split
    // more. The scan ends at the first batch whose grid needs no split.
    static int workspace(const conv_problem* p, size_t* bytes) {
        const TcOperands o = tc_operands(p, Family::op_dtype(p), false);
        const TcOperands packed = tc_operands(p, Family::op_dtype(p), true);
        conv_problem q = *p;
        size_t partial = 0;
        for (q.B = 1; q.B <= p->B; ++q.B) {
            const TcGrid grid = tc_grid<TcShape64x64>(&q, o, TC_SPLIT_WORKSPACE);
            const size_t need = grid.splits > 1 ? conv_split_k_workspace(&q, grid.splits) : 0;
            if (need > partial) partial = need;
            if (grid.m_tiles * grid.n_tiles >= TC_SPLIT_TARGET_BLOCKS) break;
        }
        const size_t staged = o.xs_bytes + o.ws_bytes, staged_packed = packed.xs_bytes + packed.ws_bytes;
        *bytes = (staged > staged_packed ? staged : staged_packed) + partial;
        return CONV_OK;
    }

    // On Hopper (wgmma families), unless groups pack: the tuner's most frequent wgmma choices, cluster
    // split-K for small grids, 128 x 64 where it gives two blocks per SM, else 64 x 64. Elsewhere: groups of
    // up to 8 channels (and few maps) on the grouped direct tiles; small grids split-K where it applies; GEMMs
    // of at most 32 maps: the 32-map tile; else the largest tile that still gives about a wave of blocks.
    static const char* default_config(const conv_problem* p) {
        const TcOperands o = tc_operands(p, Family::op_dtype(p), false);
        const bool packed = tc_operands(p, Family::op_dtype(p), true).Mg <= TC_PACK_MAPS;
        if constexpr (Family::WGMMA) {
            static ConvDeviceMask hopper{0};
            if (!packed && conv_has_sm90a(hopper)) {
                if (tc_grid<TcWgmma64x64>(p, o, TC_SPLIT_CLUSTER).splits > 1) return WGMMA_CLUSTER_64x64;
                const TcGrid mid = tc_grid<TcWgmma128x64>(p, o, TC_WHOLE_K);
                return mid.m_tiles * mid.n_tiles >= TC_SPLIT_TARGET_BLOCKS ? WGMMA_128x64 : WGMMA_64x64;
            }
        }
        // Groups of at most 8 channels: GEMMs per group from a staged window (grp64_c32 was the fastest on
        // ResNeXt's 4- and 8-channel layers at batch 1 and within 3% at batch 32, H100), else the packed tile.
        if constexpr (Family::DIRECT)
            if (packed && p->C / p->groups <= 8 && tc_grouped_supports<64, 32, 4>(p) == CONV_OK) return GRP_64_C32;
        if (tc_grid<TcShape64x64>(p, o, TC_SPLIT_WORKSPACE).splits > 1) return SPLIT_64x64;
        if (packed) return TILE_128x32;
        const TcGrid big = tc_grid<TcShape128x128>(p, o, TC_WHOLE_K), mid = tc_grid<TcShape128x64>(p, o, TC_WHOLE_K);
        if (big.m_tiles * big.n_tiles >= TC_SPLIT_TARGET_BLOCKS / 2) return TILE_128x128;
        return mid.m_tiles * mid.n_tiles >= TC_SPLIT_TARGET_BLOCKS / 2 ? TILE_128x64 : TILE_64x64;
    }
};

// The conv_impl of a family, for its variant file.
template <class Family>
constexpr conv_impl tc_impl() {
    return conv_impl{TcVariant<Family>::supports, TcVariant<Family>::workspace, TcVariant<Family>::CONFIGS.data(),
                     TcVariant<Family>::NUM_CONFIGS, TcVariant<Family>::default_config};
}
