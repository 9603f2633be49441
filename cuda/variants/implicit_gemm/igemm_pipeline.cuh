// igemm_pipeline.cuh — the double-buffered implicit-GEMM mainloop with split-K:
// conv_igemm_pipelined_kernel<Math, TX, XLoader>, and its host side (igemm_pipelined_run).
// Relative to igemm_mainloop.cuh's kernel (which stays for the 64 x 64 policies, fp16 and wmma):
//   - two shared stages: tile t+1 is fetched into registers, multiplied-over tile t, then stored
//     into the other stage: one barrier per k-tile instead of two;
//   - the W tile in k-quads (WeightQuadLoader: 16-byte loads where CKK % 4 == 0), the Xunroll tile by
//     one of five loaders chosen per problem (XLoader):
//       XunrollQuadLoader<.., true>   1x1 stride-1 unpadded NHWC, Cg % 4 == 0: a plain GEMM operand;
//       XunrollPixelQuadLoader        1x1 stride-1 unpadded NCHW: the GEMM operand along pixels, 16-byte
//                                     loads where H*W % 4 == 0;
//       XunrollQuadLoader<.., false>  NHWC x, MKKC w, Cg % 4 == 0: 16-byte loads of one tap's channels;
//       XunrollTapLoader              NCHW x, MCKK w, Cg % 8 == 0, no split-K: k in tap order, one
//                                     bounds test per pixel and k-tile; the filter staged in that order
//                                     into the workspace first (igemm_stage_taps_kernel);
//       XunrollTileLoader             anything else (scalar gather, NCHW or NHWC, MCKK or MKKC);
//   - split-K: gridDim.z splits of the k-tiles; each writes raw fp32 partial sums into the workspace
//     and conv_split_k_reduce (split_k.cuh) adds them up and applies the epilogue. Chosen when the
//     grid has fewer than two blocks per SM, so that batch-1 layers fill the GPU;
//   - groups: the group is folded into the M-tile axis (G * ceil(Mg/BM) tiles, GroupMTile): a tile
//     holds one group's maps, reads x from the group's first channel on and reduces over its
//     CKK = Cg*KH*KW (Cg = C/G channels: the quad loaders need Cg % 4 == 0). A tile's rows past its
//     group's last map (the next group's filters, loaded as any rows inside M) are not stored: their
//     sums mix the wrong channels. (Bounding the W loads by the group's end as well, zero-filling
//     those rows, made the kernels spill: ptxas -v, 40 to 112 bytes.)
// Math is an IgemmSimtOuterMath (igemm_math_simt.cuh): fp32 tiles, register output.
#pragma once

#include <stdint.h>

#include <algorithm>

#include "grid_dependency.cuh"
#include "igemm_epilogue.cuh"
#include "igemm_tile_loaders.cuh"
#include "launch_util.cuh"
#include "split_k.cuh"

// x is (B, C, H, W) or (B, H, W, C), w is (M, CKK) in k's order; epi stores y (or, split-K, the
// partials). Grid: (pixel tiles, group M tiles <= 65535, splits); split z runs k-tiles
// [z*tiles_per_split, min((z+1)*tiles_per_split, k_tiles)).
template <class Math, class TX, class XLoader>
__global__ void __launch_bounds__(Math::THREADS, Math::MIN_BLOCKS)
conv_igemm_pipelined_kernel(ConvGemmShape s, const TX* __restrict__ x, const TX* __restrict__ w, IgemmEpilogue epi,
                            int tiles_per_split, bool w_vec) {
    constexpr int BK = Math::BK;
    __shared__ __align__(16) float smem[2 * Math::STAGE_FLOATS];
    const int tid = threadIdx.x;
    const int n0 = blockIdx.x * Math::BN;
    const int k_tiles = conv_tiles(s.CKK, BK);
    const int kt0 = blockIdx.z * tiles_per_split;
    const int kt1 = min(kt0 + tiles_per_split, k_tiles);

    XLoader xl;
    WeightQuadLoader<TX, Math::BM, BK, Math::THREADS> wl;
    xl.init(s, n0, tid);
    wl.init(tid, w_vec);

    const int m_tiles = conv_group_m_tiles(s, Math::BM);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        // The tile's group as x at its first channel and the end of its maps. (Recomputing the end
        // for the store, or moving the loader's pixel offsets to the group instead of x, made more
        // of the kernels spill.)
        const GroupMTile tile(s, Math::BM, tm);
        const int m0 = tile.m0, m_end = tile.m_end;
        const TX* const xg = x + tile.g * s.x_group;  // g*x_group < C*H*W
        typename Math::Mma mma;
        mma.clear();
        // Stage 0 holds the first tile; the previous M tile's last barrier ended every read of it.
        xl.restart(s, kt0 * BK);
        wl.fetch(w, s, m0, kt0 * BK);
        xl.fetch(xg, s);
        wl.template store<IgemmFloatOperand, Math::LDA>(smem);
        xl.template store<IgemmFloatOperand, Math::LDB>(smem + Math::A_FLOATS);
        __syncthreads();
        for (int t = kt0; t < kt1; ++t) {
            float* const cur = smem + ((t - kt0) & 1) * Math::STAGE_FLOATS;
            float* const next = smem + (((t - kt0) & 1) ^ 1) * Math::STAGE_FLOATS;
            const bool more = t + 1 < kt1;
            if (more) {  // in flight while this tile is multiplied; (t+1)*BK < CKK
                wl.fetch(w, s, m0, (t + 1) * BK);
                xl.fetch(xg, s);
            }
            mma.multiply(cur, cur + Math::A_FLOATS);
            // `next` was last read in the previous step, before the barrier that ended it.
            if (more) {
                wl.template store<IgemmFloatOperand, Math::LDA>(next);
                xl.template store<IgemmFloatOperand, Math::LDB>(next + Math::A_FLOATS);
            }
            __syncthreads();
        }
        // The output's pixel offsets are set up here, not once per block: held through the mainloop,
        // their 8 registers made the 128 x 128 kernels spill.
        const IgemmEpilogue out_epi = epi.for_split(blockIdx.z);
        typename Math::Output out;
        out.init(s, out_epi, n0);
        grid_launch_dependents();  // the operands are read: the split-K reduction may launch during the stores
        igemm_store(out, out_epi, s, m0, m_end, mma, reinterpret_cast<unsigned char*>(smem));
    }
}

// ---- host side ----

// Split-K: the grid of one split has fewer blocks than IGEMM_SPLIT_TARGET_WAVES per SM → split k so
// that it reaches about that many, keeping at least IGEMM_SPLIT_MIN_K of the reduction per split (the
// partials' round trip must stay small beside the math: 8 k-tiles of 8, 4 of the quad tiles' 16) and at
// most IGEMM_SPLIT_MAX splits.
constexpr int IGEMM_SPLIT_TARGET_WAVES = 2, IGEMM_SPLIT_MIN_K = 64, IGEMM_SPLIT_MAX = 16;

struct IgemmSplit {
    int splits;           // 1: no split-K
    int tiles_per_split;  // k-tiles of each split (all of them without split-K)
};

// The split of problem p for a BM x BN x BK tiling on a GPU with `sms` SMs, within `max_splits`
// (what the workspace holds). Every split gets at least one k-tile.
static inline IgemmSplit igemm_split_for(const conv_problem* p, int BM, int BN, int BK, int sms, int64_t max_splits) {
    const ConvGemmShape s = conv_gemm_shape(p);
    const int k_tiles = conv_tiles(s.CKK, BK);
    const int64_t blocks = (int64_t)conv_tiles(s.NPIX, BN) * conv_grid_y(conv_group_m_tiles(s, BM));
    const int64_t target = (int64_t)IGEMM_SPLIT_TARGET_WAVES * sms;
    int64_t splits = blocks >= target ? 1 : (target + blocks - 1) / blocks;
    const int min_tiles = IGEMM_SPLIT_MIN_K / BK > 1 ? IGEMM_SPLIT_MIN_K / BK : 1;
    splits = std::min<int64_t>({splits, k_tiles / min_tiles, IGEMM_SPLIT_MAX, max_splits});
    if (splits < 2) return IgemmSplit{1, k_tiles};
    const int per = conv_tiles(k_tiles, (int)splits);
    return IgemmSplit{conv_tiles(k_tiles, per), per};  // no empty last split
}

template <class Math>
static int igemm_pipelined_split(const conv_problem* p, size_t workspace_bytes, IgemmSplit* split) {
    int sms = 0;
    const int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    const size_t one = conv_split_k_workspace(p, 1);
    *split = igemm_split_for(p, Math::BM, Math::BN, Math::BK, sms, one ? (int64_t)(workspace_bytes / one) : 0);
    return CONV_OK;
}

// The tap-order gather (XunrollTapLoader): NCHW x, MCKK filters, every k-tile inside one tap.
static inline bool igemm_taps(const conv_problem* p, int BK) {
    return p->x_layout == CONV_NCHW && p->w_layout == CONV_MCKK && (p->C / p->groups) % BK == 0;
}

// Bytes of the filter staged in tap order (igemm_stage_taps_kernel): w's own dtype.
static inline size_t igemm_staged_taps_bytes(const conv_problem* p) {
    return (size_t)p->M * (size_t)(p->C / p->groups) * (size_t)(p->KH * p->KW) * conv_dtype_size(p->x_dtype);
}

// Bytes of workspace configuration Math asks for on p: its split-K partials, or (the tap-order gather,
// which runs only without split-K) the staged filter; 0 for neither.
template <class Math>
static int igemm_pipelined_workspace(const conv_problem* p, size_t* bytes) {
    IgemmSplit split;
    const int status = igemm_pipelined_split<Math>(p, SIZE_MAX, &split);
    *bytes = 0;
    if (status != CONV_OK) return status;
    if (split.splits > 1) *bytes = conv_split_k_workspace(p, split.splits);
    else if (igemm_taps(p, Math::BK)) *bytes = igemm_staged_taps_bytes(p);
    return CONV_OK;
}

static inline bool igemm_aligned(const void* ptr, size_t bytes) { return (uintptr_t)ptr % bytes == 0; }

template <class Math, class TX, class XLoader>
static int igemm_pipelined_launch(const conv_problem* p, const conv_tensors* t, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream) {
    const ConvGemmShape s = conv_gemm_shape(p);
    IgemmSplit split;
    int status = igemm_pipelined_split<Math>(p, workspace ? workspace_bytes : 0, &split);
    if (status != CONV_OK) return status;
    const bool w_vec = s.CKK % 4 == 0 && igemm_aligned(t->w, 4 * sizeof(TX));
    const IgemmEpilogue epi = split.splits > 1 ? IgemmEpilogue::partial(static_cast<float*>(workspace), s)
                                               : IgemmEpilogue::of(p, t);
    const dim3 grid((unsigned)conv_tiles(s.NPIX, Math::BN), conv_grid_y(conv_group_m_tiles(s, Math::BM)),
                    (unsigned)split.splits);
    // A plain launch, not a programmatic dependent (grid_dependency.cuh): as a dependent this kernel ran
    // up to 45% slower on some grids (H100, cnn5 fp32: resnet50/res4a_branch2b at batch 32 224 -> 274 us,
    // vgg19/conv5_1 at batch 1 53 -> 77 us; not profiled) and gained 2-12% on small batch-1 ones, a net
    // loss (exact batch 32 0.84x -> 0.79x cuDNN). Its split-K reduction still goes as its dependent: the
    // kernel signals (grid_launch_dependents) before its stores.
    conv_igemm_pipelined_kernel<Math, TX, XLoader><<<grid, Math::THREADS, 0, stream>>>(
        s, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w), epi, split.tiles_per_split, w_vec);
    CONV_LAUNCH_CHECK(conv_igemm_pipelined_kernel);
    if (split.splits > 1)
        status = conv_split_k_reduce(p, static_cast<const float*>(workspace), split.splits, t->bias, t->y, stream);
    return status;
}

// The MCKK filter w (M, Cg, KH, KW) rewritten as (M, Cg*KH*KW) in the tap order of XunrollTapLoader,
// k = (c / BK, kh, kw, c % BK) (TapCursor), so that WeightQuadLoader reads it in 16-byte quads: read in
// place, the same order is four 4-byte loads KH*KW apart per quad, and the kernel ran 5-19% slower for it.
template <class TX, int BK>
__global__ void igemm_stage_taps_kernel(const TX* __restrict__ w, TX* __restrict__ staged, int M, int Cg, int taps) {
    grid_dependency_enter();  // a copy: wait for the previous kernel, then let the GEMM launch
    const int ckk = Cg * taps;
    const long long n = (long long)M * ckk;
    for (long long d = blockIdx.x * (long long)blockDim.x + threadIdx.x; d < n; d += (long long)gridDim.x * blockDim.x) {
        const int m = (int)(d / ckk), k = (int)(d - (long long)m * ckk);
        const int block = k / (BK * taps), rest = k - block * BK * taps;
        const int tap = rest / BK, c = block * BK + (rest - tap * BK);
        staged[d] = w[(long long)m * ckk + c * taps + tap];
    }
}

// The tap-order gather where it pays: without split-K (a grid that fills the GPU, where the staging
// launch is small beside the GEMM) and with the workspace to stage the filter in; else the scalar gather.
template <class Math, class TX>
static int igemm_pipelined_launch_taps(const conv_problem* p, const conv_tensors* t, void* workspace,
                                       size_t workspace_bytes, cudaStream_t stream) {
    constexpr int BK = Math::BK, BN = Math::BN, THREADS = Math::THREADS;
    IgemmSplit split;
    const int status = igemm_pipelined_split<Math>(p, workspace ? workspace_bytes : 0, &split);
    if (status != CONV_OK) return status;
    const size_t staged_bytes = igemm_staged_taps_bytes(p);
    if (split.splits > 1 || !workspace || workspace_bytes < staged_bytes)
        return igemm_pipelined_launch<Math, TX, XunrollTileLoader<TX, false, false, BK, BN, THREADS>>(
            p, t, workspace, workspace_bytes, stream);
    TX* const staged = static_cast<TX*>(workspace);
    const int Cg = (int)(p->C / p->groups), taps = (int)(p->KH * p->KW);
    const long long n = (long long)p->M * Cg * taps;
    const unsigned blocks = (unsigned)std::min<long long>((n + 255) / 256, 4096);
    CONV_LAUNCH_DEPENDENT("igemm_stage_taps_kernel", (igemm_stage_taps_kernel<TX, BK>), dim3(blocks), dim3(256), 0,
                          stream, static_cast<const TX*>(t->w), staged, (int)p->M, Cg, taps);
    conv_tensors staged_t = *t;
    staged_t.w = staged;
    // No split-K (the workspace holds the filter): the launch below sees no workspace.
    return igemm_pipelined_launch<Math, TX, XunrollTapLoader<TX, BK, BN, THREADS>>(p, &staged_t, nullptr, 0, stream);
}

// The Xunroll loader for the problem: for 1x1 stride-1 unpadded layers the GEMM operand, along channels
// (NHWC: only where Cg % 4 == 0 and x is aligned to 4 elements) or along pixels (NCHW); the quad gather
// for NHWC with MKKC filters, again only where Cg % 4 == 0 (C/groups: every group's first channel is a
// quad boundary too) and x is aligned (the batch chunks of the dispatcher start at whole images,
// multiples of C elements); for NCHW x with MCKK filters and Cg % 8 == 0 the tap-order gather where
// it runs without split-K (igemm_pipelined_launch_taps); else the scalar gather.
template <class Math, class TX>
static int igemm_pipelined_layouts(const conv_problem* p, const conv_tensors* t, void* workspace,
                                   size_t workspace_bytes, cudaStream_t stream) {
    constexpr int BK = Math::BK, BN = Math::BN, THREADS = Math::THREADS;
    const bool x_nhwc = p->x_layout == CONV_NHWC, kkc = p->w_layout == CONV_MKKC;
    const bool quads = x_nhwc && (p->C / p->groups) % 4 == 0 && igemm_aligned(t->x, 4 * sizeof(TX));
    const bool unit = p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_h == 0 &&
                      p->pad_w == 0 && conv_out_h(p) == p->H && conv_out_w(p) == p->W;  // Xunroll is x
    if (quads && unit)
        return igemm_pipelined_launch<Math, TX, XunrollQuadLoader<TX, BK, BN, THREADS, true>>(p, t, workspace,
                                                                                            workspace_bytes, stream);
    if (!x_nhwc && unit)
        return igemm_pipelined_launch<Math, TX, XunrollPixelQuadLoader<TX, BK, BN, THREADS>>(p, t, workspace,
                                                                                           workspace_bytes, stream);
    if (quads && kkc)
        return igemm_pipelined_launch<Math, TX, XunrollQuadLoader<TX, BK, BN, THREADS, false>>(p, t, workspace,
                                                                                             workspace_bytes, stream);
    if (igemm_taps(p, BK)) return igemm_pipelined_launch_taps<Math, TX>(p, t, workspace, workspace_bytes, stream);
    if (x_nhwc)
        return kkc ? igemm_pipelined_launch<Math, TX, XunrollTileLoader<TX, true, true, BK, BN, THREADS>>(
                         p, t, workspace, workspace_bytes, stream)
                   : igemm_pipelined_launch<Math, TX, XunrollTileLoader<TX, true, false, BK, BN, THREADS>>(
                         p, t, workspace, workspace_bytes, stream);
    return kkc ? igemm_pipelined_launch<Math, TX, XunrollTileLoader<TX, false, true, BK, BN, THREADS>>(
                     p, t, workspace, workspace_bytes, stream)
               : igemm_pipelined_launch<Math, TX, XunrollTileLoader<TX, false, false, BK, BN, THREADS>>(
                     p, t, workspace, workspace_bytes, stream);
}

// A conv_run_fn for a double-buffered configuration: x/w in f32, f16 or bf16 (widened exactly), among
// those Math takes.
template <class Math>
int igemm_pipelined_run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                        void* stream) {
    return igemm_with_input_type<Math>(p, [&](auto tx) {
        return igemm_pipelined_layouts<Math, decltype(tx)>(p, t, workspace, workspace_bytes, conv_stream(stream));
    });
}
