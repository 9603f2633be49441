// grouped_direct.cu — direct convolution for depthwise and grouped layers (few input channels per
// group: MobileNet / EfficientNet / ConvNeXt depthwise, ResNeXt's 32 groups), exact fp32 FFMA on f32,
// f16 or bf16 data, NCHW or NHWC x and y, MCKK or MKKC w, bias + ReLU fused into the store.
//   gd_tile_kernel<K, S, MT, PT, TW, TR, MS, KS, TX, TY>: a block computes an output tile of TW columns x
//     TR*PT rows for MS*MT maps of one (image, group). It stages the tile's input window with its halo
//     (zeros on padding) for a chunk of the group's channels in shared memory, widened to fp32, beside
//     those channels' weights of its maps as [channel][tap][map] (an LDS.128 gives 4 maps); fp32 NCHW
//     on sm_80 and newer by cp.async (16-byte copies where x's rows allow), else through registers. A thread
//     computes PT rows of one column for MT maps: as in direct_regblock, each input column segment
//     ((PT-1)*S + K values) is read once per filter column and feeds K*MT*PT FMAs. Consecutive threads
//     take consecutive columns: conflict-free shared reads at stride 1, and coalesced NCHW stores. The
//     block's MS map slices (MS groups of TW*TR threads, MT maps each) share one staged window: with MS = 1
//     a group of Mg maps stages its window Mg/MT times over, which on ResNeXt's 16- and 32-map groups was
//     most of the traffic. One block per (tile, image, group, MS*MT maps), so a batch-1 layer still gives
//     C/(C/groups) * tiles blocks to fill the SMs, and a large plane many of them; where those are few (a
//     batch-1 layer on a 7- or 14-pixel plane: 1-2 warps per scheduler, each instruction's latency
//     exposed), KS channel slices of threads split each fill's channels and add their sums at the end.
//     K, S > 0: K x K filter, stride S, dilation 1, fully unrolled with compile-time shared-memory
//     strides (3x3 and 5x5 at strides 1 and 2, 7x7 at stride 1; same dtype in and out).
//     K = S = 0: any KH x KW, stride and dilation, run-time filter loops (every other shape and the
//     mixed-dtype pairs).
//   depthwise_nhwc.cu: the kernel of the "nhwc_*" configurations, depthwise layers with channels
//     contiguous (vector loads over channels, no staging).
//   depthwise_nchw.cu: the kernel of the "nchw_*" configurations, depthwise layers with planes
//     contiguous (threads over many planes' columns, no staging: small planes, stride 2).
// A tap on padding multiplies a staged zero by its weight: an Inf or NaN weight there gives NaN, as
// in PyTorch. The layers are memory bound: the input is read from DRAM about once (halo re-reads of
// neighbouring tiles hit L2), the output written once.

#include "conv_kernel_util.cuh"
#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "mma_sync.cuh"
#include "nchw_window_copy.cuh"
#include "tensor_io.cuh"

namespace {

// Floats of shared memory a block aims at (32 KB: several blocks per SM), and the most it may take
// for a single channel (48 KB, the limit without opting in): the channel chunk is sized to the first.
constexpr int GD_SMEM_FLOATS = 8192;
constexpr int GD_SMEM_MAX_FLOATS = 12288;
// 16-byte vectors over the output (the threads of a wide configuration at one pixel each) below which a
// grid is small: about eight warps per SM of a large GPU (132 SMs), too few to hide the loads' latency.
constexpr int64_t DW_SMALL_GRID = 32768;
// Most channels per group: ResNeXt's widest groups are 32 (64 leaves room for others).
constexpr int GD_MAX_CG = 64;
// The largest tile side (TR*PT rows, TW columns): a tile runs up to one less past the output's edge.
constexpr int GD_MAX_TILE = 32;
// Depthwise filters this long on a side or longer, with this many taps or more, go to depthwise_large.cu by
// default (the unrolled kernels stop at 7x7; InceptionNeXt's 1x11 and 11x1 bands, 11 taps over 12-96
// channels, ran 2-4x faster on the tiles: H200, batch 1 and 32).
constexpr int64_t DWL_MIN_FILTER = 9, DWL_MIN_TAPS = 64;
// Of those, planes of at most DWP_SMALL_PLANE values (7x7, 8x8), DWP_SMALL_PLANE_BATCHED (14x14, 16x16)
// from batch 4 or in NHWC, and from batch 4 DWP_MID_PLANE (28x28, 32x32) or any that fits where filter rows
// are DWP_MID_ROW taps or longer go to the small-plane kernel, which sums only the taps that meet x, in runs
// of outputs along rows (on large planes, numbered down the columns: 31x31 on 56x56 694 / 793 us against
// lk_q16's 841 / 1021, SLaK's 5x51 265 / 375 against 332 / 577, 49x5 on 28x28 143 against 185; its 51x5 on
// 56x56 388 against 325 stays on lk_q16). H200, batch 32, fp32 / fp16 NHWC (lk_* in brackets, us): RepLKNet-31B's 13x13 on 7x7 26 / 28
// (125 / 104; cuDNN 62 / 395), 27x27 on 14x14 69 / 81 (296 / 267), 29x29 on 28x28 329 / 296 (590 / 587);
// UniRepLKNet-S's 13x13 on 14x14 47 / 50 (86 / 100), on 28x28 114 / 118 (121 / 150); SLaK's 5x49 on 28x28 86
// (190) but 49x5 189 (185: rows of 5 taps, 3 zeros each side). Batch 1 (one output a thread), fp32: 13x13
// on 7x7 5.5 against 7.2, on 14x14 8.8 against 6.7; fp16 NHWC on 14x14 9.7 against 16.8.
constexpr int64_t DWP_SMALL_PLANE = 64, DWP_SMALL_PLANE_BATCHED = 256, DWP_MID_PLANE = 1024, DWP_MID_ROW = 9;
// Of the small planes, those of at most 64 positions in and out with x NCHW from batch DWM_MIN_BATCH go to the
// plane-matrix kernel instead (a channel's taps as a matrix built once for 32 images). H200, fp32, batch 32:
// 13x13 on 7x7 12.7-17.4 us against plane's 20.5-25.7 (cuDNN 42-62); at batch 1 8.8-9.0 against 5.1-5.5, and
// in fp16 NHWC (a block's one channel reads one value a sector) 27-39 against 19-23.
constexpr int64_t DWM_MIN_BATCH = 32;
// Large filters at a column stride of 2 or more (where `plane` sums each output alone) with fp32 x NCHW from batch
// DWR_MIN_BATCH go to the row-matrix kernel where it fits, not to lk_q8 (planes above DWP_SMALL_PLANE positions:
// the smaller stay with plane, not timed against it). H200, fp32: MixNet-M's 9x9 at stride 2 on
// 14x14, batch 32, 16.0 us against m1_t8x8's 21.2 and lk_q8's 24.6 (cuDNN 28.3), 13x13 at stride 2 on 28x28 63.0
// against lk_q8's 123 (cuDNN 137); batch 16 13.3 / 35.4 against lk_q8's 14.8 / 62.6, batch 64 18.8 / 123 against
// 57.8 / 244; batch 8 12.3 / 32.4 against 9.9 / 26.7. At stride 1 it lost every layer of the large_kernel suite
// to plane / plane_mm (bench/results/nvidia-h200/rows-mm.md).
constexpr int64_t DWR_MIN_BATCH = 16;
// Row-taps kernels (depthwise_row_taps.cu), for depthwise filters at a column stride of 1 with fp32 x NCHW on planes of
// DRT_MIN_OW output columns or more, where they fit. Filters 13 taps wide (UniRepLKNet's 13x13) up to batch
// DRT_MAX_BATCH: taps13. H200, 13x13 on 28x28 to 56x56 (bench/results/nvidia-h200/row-taps.md): batch 1 7.7-8.5 us
// against lk_q8's 8.4-11.7, batch 4 9.9-22.3 against 11.5-27.0 (the best of lk_q8, lk_q16, plane), batch 8
// 15.1-41.9 against 17.8-42.4; with the staging walked instead of split (row-taps-staging.md) batch 16 23.6-69.5
// against plane / lk_q16's 30.1-77.4 and batch 32 45.0-133.6 against 52.0-148.9 (UniRepLKNet-T's 28x28: 71.4 against
// plane's 77.2; -S's: 85.6 against 88.3); at batch 64 plane took 3 of 6 (UniRepLKNet-T's 136.5 against 140.4). At
// batch 1 on 28x28 with 96 channels 6.83 against lk_q8's 6.31. On 14x14 and 7x7 planes it lost at batches 1, 4 and
// 32 (batch 1: 7.0-8.4 against lk_q16's 5.5 and plane's 3.8). Wider rows of at most DRT_MAX_ROWS_ANY rows at batch
// 1: taps (any width). SLaK's 5x51 on 56x56 14.4 against lk_q8's 15.2, 5x49 on 28x28 9.3 against 9.8; it lost the
// 27x27-31x31 filters (26.0 against lk_q16's 16.2 on the 29x29), and from batch 4 the bands to plane (5x49: 25.6
// against 14.8). (taps on 13x13 at batch 1: 7.7 against taps13's 7.9, within the spread of runs on different GPUs;
// at batch 4 16.0 against 13.4.)
constexpr int64_t DRT_MAX_BATCH = 32, DRT_MIN_OW = 28, DRT_MAX_ROWS_ANY = 13;
// Loads a thread issues together when it stages x (NHWC: window rows a warp takes).
constexpr int GD_STAGE_ROWS = 4;

// x is (B, C, H, W) or (B, H, W, C); w (M, Cg, KH, KW) or (M, KH, KW, Cg); y (B, M, OH, OW) or
// (B, OH, OW, M); every element count < 2^31 (the dispatcher's batch chunks).
struct gd_shape : ConvShape32 {
    int Cg, Mg, G;     // channels and maps per group, groups
    int tiles_w;       // tiles across an output row
    int tiles;         // tiles per plane
    int mchunks;       // ceil(Mg / (MS*MT)): blocks per (tile, image, group)
    int chunk_c;       // channels per shared-memory fill
    int in_h, in_w;    // a tile's input window
    int in_ws;         // floats per staged window row (gd_row_stride)
    int vec;           // elements per copy of the NCHW fp32 staging: 4, 2 or 1 (nchw_copy_window)
    int x_nhwc, y_nhwc, w_mkkc, relu;
};

// n rounded up to a multiple of 4 (a 16-byte boundary in floats).
__host__ __device__ constexpr int gd_round4(int n) { return (n + 3) / 4 * 4; }

// Floats per staged window row: room for in_w columns after a lead of up to 3 (the copies start at a
// multiple of 4 columns), a multiple of 4 (16-byte copies), and where it can be, such that the rows
// that a warp's lane groups read (row_step = rows per thread x stride apart, tw lanes per group) fall
// in different banks: with 8-lane groups on rows 16 floats apart (in_w = 10 rounded up), four groups
// read 2 banks' worth of the same 8 banks.
__host__ __device__ constexpr int gd_row_stride(int in_w, int row_step, int tw) {
    const int least = nchw_copy_row_floats(in_w, 4);
    for (int ws = least; ws < least + 32; ws += 4)
        if (tw >= 32 || (row_step * ws) % 32 == tw) return ws;
    return least;
}

// Stages channels [c_first, c_first + cn) of the tile's input window (rows from ih0, columns from
// iw0) into s_x as [c][in_h][in_ws], window column j at lead + j, zeros outside the image. A thread issues
// GD_STAGE_ROWS loads before their stores (one at a time, the warps spent most of the kernel waiting on
// each load before its store). NCHW: the window flattened, element e = (c * in_h + i) * in_w + j, lanes on
// consecutive elements: coalesced along a row, and no lane idle where a row is not a multiple of 32
// wide. NHWC: a warp takes GD_STAGE_ROWS window rows, channels fastest, so that a lane run covers the
// group's contiguous channels of neighbouring columns. (fp32 NCHW on sm_80 and newer: nchw_copy_window.)
template <int THREADS, class TX>
__device__ __forceinline__ void gd_stage_input(const gd_shape& s, const TX* x, int b, int c_first, int cn, int ih0,
                                               int iw0, int in_h, int in_w, int in_ws, int lead, float* s_x) {
    constexpr int RB = GD_STAGE_ROWS;
    if (s.x_nhwc) {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        for (int i0 = warp * RB; i0 < in_h; i0 += THREADS / 32 * RB) {
            const TX* xr[RB];  // the rows' starts at channel c_first (clamped into x)
            bool row_ok[RB];
#pragma unroll
            for (int k = 0; k < RB; ++k) {
                const int ih = ih0 + i0 + k;
                row_ok[k] = i0 + k < in_h && (unsigned)ih < (unsigned)s.H;
                xr[k] = x + (b * s.H + (row_ok[k] ? ih : 0)) * s.W * s.C + c_first;
            }
            for (int e = lane; e < in_w * cn; e += 32) {
                const int j = e / cn, c = e - j * cn, iw = iw0 + j;
                const bool col_ok = (unsigned)iw < (unsigned)s.W;
                float v[RB];
#pragma unroll
                for (int k = 0; k < RB; ++k) v[k] = conv_load(xr[k], (col_ok ? iw : 0) * s.C + c);
#pragma unroll
                for (int k = 0; k < RB; ++k)
                    if (i0 + k < in_h) s_x[(c * in_h + i0 + k) * in_ws + lead + j] = row_ok[k] && col_ok ? v[k] : 0.0f;
            }
        }
        return;
    }
    const int total = cn * in_h * in_w;
    const TX* xb = x + (b * s.C + c_first) * s.H * s.W;  // the chunk's first plane
    for (int e0 = threadIdx.x; e0 < total; e0 += THREADS * RB) {
        float v[RB];
        bool ok[RB];
        int at[RB];
#pragma unroll
        for (int k = 0; k < RB; ++k) {
            const int e = e0 + k * THREADS, row = e / in_w, j = e - row * in_w, c = row / in_h;
            const int ih = ih0 + row - c * in_h, iw = iw0 + j;
            ok[k] = e < total && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W;
            at[k] = row * in_ws + lead + j;
            v[k] = conv_load(xb, ok[k] ? (c * s.H + ih) * s.W + iw : 0);  // always: issued together
        }
#pragma unroll
        for (int k = 0; k < RB; ++k)
            if (e0 + k * THREADS < total) s_x[at[k]] = ok[k] ? v[k] : 0.0f;
    }
}

// Whether the kernels of this build stage fp32 NCHW windows with cp.async (sm_80 and newer).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr bool GD_ASYNC_COPY = true;
#else
constexpr bool GD_ASYNC_COPY = false;
#endif

// Stages the tile's window for channels [c_first, c_first + cn): by cp.async where the build and the
// operands allow (fp32 NCHW, sm_80 and newer), else through registers.
template <int THREADS, class TX>
__device__ __forceinline__ void gd_fill_window(const gd_shape& s, const TX* x, int b, int c_first, int cn, int ih0,
                                               int iw0, int lead, int in_h, int in_w, int in_ws, float* s_x) {
    if constexpr (GD_ASYNC_COPY && std::is_same<TX, float>::value) {
        if (s.x_nhwc) gd_stage_input<THREADS>(s, x, b, c_first, cn, ih0, iw0, in_h, in_w, in_ws, lead, s_x);
        else nchw_copy_window<THREADS, false>(s.vec, x + (b * s.C + c_first) * s.H * s.W, s.H, s.W, cn, cn, ih0,
                                              iw0 - lead, in_h, in_ws, s_x);
        cp_async_commit();  // with the weights' copies (gd_stage_weights)
        cp_async_wait<0>();
    } else {
        gd_stage_input<THREADS>(s, x, b, c_first, cn, ih0, iw0, in_h, in_w, in_ws, lead, s_x);
    }
}

// Stages the weights of channels [c0, c0 + cn) of the group for its maps [m0, m0 + maps) into s_w as
// [c][tap][MB], zeros for the maps past `maps` (the last chunk of a group). MB divides the block's threads,
// so a thread keeps one map j and steps over (channel, tap) pairs ct: in MCKK those are one contiguous run
// of the map's filter (an index per map, where one per element took 29 instructions an element). A warp's
// copies still read as many filters as it has maps (one sector each). fp32 on sm_80 and newer: by
// cp.async, which gd_fill_window's wait covers (no load waited on before its store).
template <int MB, int THREADS, class TX>
__device__ __forceinline__ void gd_stage_weights(const gd_shape& s, const TX* w, int m0, int maps, int c0, int cn,
                                                 int KK, float* s_w) {
    static_assert(THREADS % MB == 0, "a thread's map stays the same");
    const int j = threadIdx.x % MB, m = m0 + (j < maps ? j : 0);
    const bool ok = j < maps;
    const TX* wm = w + (s.w_mkkc ? m * KK * s.Cg + c0 : (m * s.Cg + c0) * KK);  // the map's first channel
#pragma unroll 1
    for (int ct = threadIdx.x / MB; ct < cn * KK; ct += THREADS / MB) {
        int at = ct;  // MCKK
        if (s.w_mkkc) {
            const int c = ct / KK;
            at = (ct - c * KK) * s.Cg + c;
        }
        if constexpr (GD_ASYNC_COPY && std::is_same<TX, float>::value) cp_async_4_zfill(s_w + ct * MB + j, wm + at, ok);
        else s_w[ct * MB + j] = ok ? conv_load(wm, at) : 0.0f;
    }
}

// The MT weights of one tap (one LDS.128 per 4 maps).
template <int MT>
__device__ __forceinline__ void gd_tap_weights(const float* ws, float (&wv)[MT]) {
    if constexpr (MT % 4 == 0) {
#pragma unroll
        for (int q = 0; q < MT / 4; ++q) {
            const float4 v = reinterpret_cast<const float4*>(ws)[q];
            wv[4 * q] = v.x; wv[4 * q + 1] = v.y; wv[4 * q + 2] = v.z; wv[4 * q + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < MT; ++j) wv[j] = ws[j];
    }
}

// One block = a TW x TR*PT output tile of MS*MT maps of one (image, group); one thread = PT rows x MT maps
// of one column (map slice q of the block's threads takes the block's maps [q*MT, (q+1)*MT)) over every KS-th
// channel of a fill from its channel slice on; with KS > 1 the channel slices' sums meet in shared memory at
// the end (KS times the warps, for batch-1 layers whose blocks are too few to fill the GPU).
template <int K, int S, int MT, int PT, int TW, int TR, int MS, int KS, class TX, class TY>
__global__ void __launch_bounds__(TW * TR * MS * KS) gd_tile_kernel(gd_shape s, const TX* __restrict__ x,
                                                                    const TX* __restrict__ w,
                                                                    const TY* __restrict__ bias, TY* __restrict__ y) {
    static_assert((K == 0) == (S == 0), "fast path: both K and S; generic: neither");
    static_assert(MS == 1 || MT % 4 == 0, "a slice's weights start on a 16-byte boundary");
    constexpr int SLICE = TW * TR * MS, THREADS = SLICE * KS, TH = TR * PT, MB = MT * MS;
    const int KH = K ? K : s.KH, KW = K ? K : s.KW, KK = KH * KW;
    const int sh = S ? S : s.stride_h, sw = S ? S : s.stride_w;
    const int dh = K ? 1 : s.dil_h, dw = K ? 1 : s.dil_w;
    const int in_h = K ? (TH - 1) * S + K : s.in_h, in_w = K ? (TW - 1) * S + K : s.in_w;
    // The host's s.in_ws (gd_staged_row), as a constant where the filter is: the same function on the
    // same window and row step (mod 32).
    constexpr int IN_WS = K ? gd_row_stride((TW - 1) * S + K, PT * S, TW) : 0;
    const int in_ws = K ? IN_WS : s.in_ws;
    extern __shared__ float4 gd_smem4[];
    float* s_w = reinterpret_cast<float*>(gd_smem4);      // [c][tap][MB]: float4-aligned
    float* s_x = s_w + gd_round4(s.chunk_c * KK * MB);     // [c][in_h][in_ws]: float4-aligned
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)

    // blockIdx.x = ((b * G + g) * mchunks + mc) * tiles + tile: neighbouring tiles run together.
    const int tile = blockIdx.x % s.tiles;
    int plane = blockIdx.x / s.tiles;
    const int mc = plane % s.mchunks;
    plane /= s.mchunks;
    const int g = plane % s.G, b = plane / s.G;
    const int oh0 = tile / s.tiles_w * TH, ow0 = tile % s.tiles_w * TW;
    const int ih0 = oh0 * sh - s.pad_h, iw0 = ow0 * sw - s.pad_w;
    const int lead = nchw_copy_lead(iw0, s.vec);  // window column 0 at s_x column lead: the copies start at iw0 - lead
    const int mg0 = mc * MB, m0 = g * s.Mg + mg0, maps = min(MB, s.Mg - mg0);
    const int tx = threadIdx.x % TW, ty = threadIdx.x / TW % TR, slice = threadIdx.x / (TW * TR) % MS;
    const int cslice = threadIdx.x / SLICE;

    float acc[MT][PT];
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int r = 0; r < PT; ++r) acc[j][r] = 0.0f;

    for (int c0 = 0; c0 < s.Cg; c0 += s.chunk_c) {
        const int cn = min(s.chunk_c, s.Cg - c0);
        if (c0 > 0) __syncthreads();  // nobody still reads the previous fill
        gd_stage_weights<MB, THREADS>(s, w, m0, maps, c0, cn, KK, s_w);
        gd_fill_window<THREADS>(s, x, b, g * s.Cg + c0, cn, ih0, iw0, lead, in_h, in_w, in_ws, s_x);
        __syncthreads();
#pragma unroll 1
        for (int c = cslice; c < cn; c += KS) {
            // The thread's window: rows from ty*PT*sh, columns from tx*sw (within in_h x in_w).
            const float* xs = s_x + (c * in_h + ty * PT * sh) * in_ws + lead + tx * sw;
            const float* ws = s_w + c * KK * MB + slice * MT;
            if constexpr (K > 0) {
                constexpr int ROWS = (PT - 1) * S + K;
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    float col[ROWS];
#pragma unroll
                    for (int i = 0; i < ROWS; ++i) col[i] = xs[i * in_ws + kw];
#pragma unroll
                    for (int kh = 0; kh < K; ++kh) {
                        float wv[MT];
                        gd_tap_weights<MT>(ws + (kh * K + kw) * MB, wv);
#pragma unroll
                        for (int j = 0; j < MT; ++j)
#pragma unroll
                            for (int r = 0; r < PT; ++r) acc[j][r] = fmaf(wv[j], col[r * S + kh], acc[j][r]);
                    }
                }
            } else {
                for (int kh = 0; kh < KH; ++kh)
                    for (int kw = 0; kw < KW; ++kw) {
                        float wv[MT];
                        gd_tap_weights<MT>(ws + (kh * KW + kw) * MB, wv);
                        const float* xp = xs + kh * dh * in_ws + kw * dw;
#pragma unroll
                        for (int r = 0; r < PT; ++r) {
                            const float v = xp[r * sh * in_ws];
#pragma unroll
                            for (int j = 0; j < MT; ++j) acc[j][r] = fmaf(wv[j], v, acc[j][r]);
                        }
                    }
            }
        }
    }

    grid_launch_dependents();  // the inputs are read: the next kernel may launch during the stores
    if constexpr (KS > 1) {  // the channel slices' sums into slice 0's, through the fills' shared memory
        __syncthreads();     // every read of the last fill is done
        if (cslice > 0) {  // as [channel slice - 1][map][row][thread of the slice]
            float* s_sum = s_w + (cslice - 1) * MT * PT * SLICE + threadIdx.x % SLICE;
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int r = 0; r < PT; ++r) s_sum[(j * PT + r) * SLICE] = acc[j][r];
        }
        __syncthreads();
        if (cslice > 0) return;
        for (int k = 1; k < KS; ++k) {
            const float* sk = s_w + (k - 1) * MT * PT * SLICE + threadIdx.x;
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int r = 0; r < PT; ++r) acc[j][r] += sk[(j * PT + r) * SLICE];
        }
    }
    const int ow = ow0 + tx;
    if (ow >= s.OW) return;
#pragma unroll
    for (int j = 0; j < MT; ++j) {
        if (slice * MT + j >= maps) break;
        const int m = m0 + slice * MT + j;
        const float bm = bias ? conv_load(bias, m) : 0.0f;
#pragma unroll
        for (int r = 0; r < PT; ++r) {
            const int oh = oh0 + ty * PT + r;
            if (oh >= s.OH) break;
            const int at = s.y_nhwc ? ((b * s.OH + oh) * s.OW + ow) * s.M + m : ((b * s.M + m) * s.OH + oh) * s.OW + ow;
            y[at] = conv_store_as<TY>(conv_epilogue_value(acc[j][r], bm, s.relu));
        }
    }
}

// Input rows (columns) a tile of `tile` output rows (columns) reads.
static int64_t gd_window(int64_t tile, int64_t stride, int64_t k, int64_t dilation) {
    return (tile - 1) * stride + (k - 1) * dilation + 1;
}

// Floats per staged window row of a tile TW columns wide, PT rows a thread (gd_row_stride; a window too
// wide for shared memory in any case counts unpadded).
static int64_t gd_staged_row(const conv_problem* p, int PT, int TW) {
    const int64_t in_w = gd_window(TW, p->stride_w, p->KW, p->dilation_w);
    const int row_step = PT * (int)(p->stride_h % 32);  // only its residue mod 32 (the banks) matters
    return in_w <= GD_SMEM_MAX_FLOATS ? gd_row_stride((int)in_w, row_step, TW) : in_w;
}

// Floats of shared memory one channel of a fill takes: its staged input window (TH output rows' input rows
// of staged_row floats, gd_staged_row) and its weights of MB maps. A fill of n channels takes n times that
// and up to 3 more (the window starts on a 16-byte boundary).
static int64_t gd_channel_floats(const conv_problem* p, int MB, int TH, int64_t staged_row) {
    return gd_window(TH, p->stride_h, p->KH, p->dilation_h) * staged_row + p->KH * p->KW * MB;
}

template <int MT, int PT, int TW, int TR, int MS = 1, int KS = 1>
struct GdTileLaunch {
    static constexpr int TH = TR * PT, THREADS = TW * TR * MS * KS, MB = MT * MS;
    // Floats the channel slices' sums take at the end (in the fills' shared memory; << GD_SMEM_FLOATS).
    static constexpr int SUM_FLOATS = (KS - 1) * MT * PT * TW * TR * MS;
    static_assert(SUM_FLOATS <= GD_SMEM_FLOATS, "the slices' sums fit where the fills were");
    static_assert(TH <= GD_MAX_TILE && TW <= GD_MAX_TILE && THREADS % 32 == 0, "gd_supports' slack; whole warps");

    template <class TX, class TY>
    struct Kernels {
        template <int K, int S>
        struct At {
            static constexpr auto kernel = gd_tile_kernel<K, S, MT, PT, TW, TR, MS, KS, TX, TY>;
        };
    };

    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        gd_shape s;
        static_cast<ConvShape32&>(s) = conv_shape32(p);
        s.G = (int)p->groups;
        s.Cg = s.C / s.G;
        s.Mg = s.M / s.G;
        s.tiles_w = conv_ceil_div(s.OW, TW);
        s.tiles = s.tiles_w * conv_ceil_div(s.OH, TH);
        s.mchunks = conv_ceil_div(s.Mg, MB);
        s.in_h = (int)gd_window(TH, p->stride_h, p->KH, p->dilation_h);
        s.in_w = (int)gd_window(TW, p->stride_w, p->KW, p->dilation_w);
        s.in_ws = (int)gd_staged_row(p, PT, TW);
        s.vec = nchw_copy_vector(p, (uintptr_t)t->x);
        const int64_t per_c = gd_channel_floats(p, MB, TH, s.in_ws);  // + 3 <= GD_SMEM_MAX_FLOATS: supports()
        const int64_t fit = (GD_SMEM_FLOATS - 3) / per_c;
        s.chunk_c = (int)(fit < 1 ? 1 : fit < s.Cg ? fit : s.Cg);
        s.x_nhwc = p->x_layout == CONV_NHWC;
        s.y_nhwc = p->y_layout == CONV_NHWC;
        s.w_mkkc = p->w_layout == CONV_MKKC;
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        // Blocks: one per tile of each (image, group, map chunk); fewer than the outputs (< 2^31).
        const int64_t blocks = (int64_t)s.tiles * p->B * s.G * s.mchunks;
        const int64_t fill = gd_round4(s.chunk_c * s.KH * s.KW * MB) + (int64_t)s.chunk_c * s.in_h * s.in_ws;
        const size_t smem = (size_t)(fill > SUM_FLOATS ? fill : SUM_FLOATS) * sizeof(float);
        const auto kernel = gd_kernel_for<Kernels<TX, TY>::template At, TX, TY>(p);
        CONV_LAUNCH_DEPENDENT("gd_tile_kernel", kernel, (unsigned)blocks, THREADS, smem, stream, s,
                              static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                              static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
        return CONV_OK;
    }

    // Maps per group the tile takes at least: the several-map tiles leave at most half of a block's maps
    // (FMA columns) idle (a quad at least 2 maps; 8 maps a thread 4; 4 slices of 8, 16).
    static constexpr int MIN_MAPS = MT == 1 ? 1 : MB / 2 > 2 ? MB / 2 : 2;

    // Shared memory a channel of this tile's fills takes (run computes it from the staged row it keeps).
    static int64_t channel_floats(const conv_problem* p) {
        return gd_channel_floats(p, MB, TH, gd_staged_row(p, PT, TW));
    }
    // Limits of this tile: one channel's window and weights must fit the shared memory of a block,
    // and a group must have MIN_MAPS maps.
    static bool fits(const conv_problem* p) {
        return channel_floats(p) + 3 <= GD_SMEM_MAX_FLOATS && p->M / p->groups >= MIN_MAPS;
    }
    // f16 / bf16 and mixed dtypes in the small one-map tiles (m1_t16x16, m1_t8x8: the fallbacks every
    // problem reaches) and in m4_t16x16 (the fastest on LeNet's C1, 4 maps, in f16 and bf16 NHWC: 2.6x
    // m1_t16x16 there on an H200). On the suites the other tiles won fp32 layers alone (half-precision
    // grouped layers went to implicit_gemm_f16's grp* tiles, depthwise ones to the NHWC kernels), and each
    // dtype pair a tile takes costs up to six kernels (one per unrolled filter).
    static constexpr bool ALL_DTYPES = (MT == 1 && TW <= 16) || (MT == 4 && TW == 16 && MS == 1 && KS == 1);

    static int supports(const conv_problem* p) {
        if (!ALL_DTYPES && (p->x_dtype != CONV_F32 || p->y_dtype != CONV_F32))
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "grouped_direct: the %dx%d tile of %d maps takes fp32 x and y only, got x %s, y %s "
                                  "(m1_t16x16, m1_t8x8 and m4_t16x16 take every dtype)",
                                  TW, TH, MB, conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
        if (fits(p)) return CONV_OK;
        const int64_t per_c = channel_floats(p) + 3;
        if (per_c > GD_SMEM_MAX_FLOATS)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "grouped_direct: a %dx%d tile's input window and weights take %lld floats of "
                                  "shared memory per channel (KH=%lld, KW=%lld, stride %lldx%lld, dilation "
                                  "%lldx%lld), more than %d",
                                  TW, TH, (long long)per_c, (long long)p->KH, (long long)p->KW,
                                  (long long)p->stride_h, (long long)p->stride_w, (long long)p->dilation_h,
                                  (long long)p->dilation_w, GD_SMEM_MAX_FLOATS);
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the %d-map tiles need at least %d maps per group (M/groups=%lld)", MB,
                              MIN_MAPS, (long long)(p->M / p->groups));
    }
};

// A tiled configuration as a conv_config run function.
template <int MT, int PT, int TW, int TR, int MS = 1, int KS = 1>
int gd_tile_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    using Launch = GdTileLaunch<MT, PT, TW, TR, MS, KS>;
    if constexpr (Launch::ALL_DTYPES) return conv_dispatch_dtypes<Launch>(p, p, t, conv_stream(stream));
    else return Launch::template run<float, float>(p, t, conv_stream(stream));  // supports() refused the rest
}

// An NHWC depthwise configuration: its kernel where the operands are aligned for its vectors, else
// the tiled kernel that suits depthwise planes of this width (same results within the bound).
template <int PR, int PT, int THREADS, bool NARROW, int MINB = 1>
int gd_nhwc_run(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    if (dw_nhwc_aligned(p, t)) return dw_nhwc_run<PR, PT, THREADS, NARROW, MINB>(p, t, conv_stream(stream));
    return gd_tile_run<1, 2, 16, 8>(p, t, ws, ws_bytes, stream);
}

template <int PR, int PT, bool NARROW>
int gd_nhwc_supports(const conv_problem* p) {
    int status = dw_nhwc_fits(p, 1);
    if (status == CONV_OK) status = dw_nhwc_dtype_fits<PR, PT, NARROW>(p);
    return status != CONV_OK ? status : GdTileLaunch<1, 2, 16, 8>::supports(p);
}

// An NCHW depthwise configuration (no staging, no alignment needs).
template <int PR>
int gd_nchw_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dw_nchw_run<PR>(p, t, conv_stream(stream));
}

// A register-blocked NCHW depthwise configuration (depthwise_nchw_tiled.cu).
template <int TH, int TW>
int gd_nchw_tiled_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dwt_run<TH, TW>(p, t, conv_stream(stream));
}

int gd_nchw_supports(const conv_problem* p) { return dw_nchw_fits(p, 1); }

// A large-filter depthwise configuration (depthwise_large.cu).
template <int Q>
int gd_large_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dwl_run<Q>(p, t, conv_stream(stream));
}

int gd_large_supports(const conv_problem* p) { return dwl_fits(p, 1); }

// The small-plane depthwise configurations (depthwise_small_plane.cu), runs of RUN outputs a thread.
template <int RUN>
int gd_plane_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dwp_run(p, t, RUN, conv_stream(stream));
}

template <int RUN>
int gd_plane_supports(const conv_problem* p) { return dwp_fits(p, RUN, 1); }

// The plane-matrix depthwise configuration (depthwise_plane_matrix.cu).
int gd_plane_mm_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dwm_run(p, t, conv_stream(stream));
}

int gd_plane_mm_supports(const conv_problem* p) { return dwm_fits(p, 1); }

// The row-matrix depthwise configuration (depthwise_row_matrices.cu).
int gd_rows_mm_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dwr_run(p, t, conv_stream(stream));
}

int gd_rows_mm_supports(const conv_problem* p) { return dwr_fits(p, 1); }

// The row-taps depthwise configurations (depthwise_row_taps.cu): rows of 13 taps unrolled whole, or of any width.
template <int ANY_WIDTH>
int gd_taps_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return drt_run(p, ANY_WIDTH, t, conv_stream(stream));
}

template <int ANY_WIDTH>
int gd_taps_supports(const conv_problem* p) { return drt_fits(p, ANY_WIDTH, 1); }

// Names: maps per thread (m1: depthwise, one map per group; m4, m8: grouped, LDS.128 of 4 maps) and map
// slices per block where more than one (m8x4: 4 slices of 8 maps share a window), the output tile
// (columns x rows), rows per thread where not the tile's default, channel slices where more than one
// (k4: 4 slices of threads take every fourth channel of a fill). The nhwc_* ones: output
// rows (r, where more than 1) x pixels per thread, threads per block of depthwise_nhwc.cu, with
// 16-byte vectors, or with "narrow" the 1- and 2-channel vectors for small grids, and with b4 registers
// capped so that 4 blocks fit an SM. The nchw_r* ones:
// output rows per thread of depthwise_nchw.cu; the nchw_t* ones: the output tile (columns x rows) of
// depthwise_nchw_tiled.cu; the lk_q* ones: outputs a thread of depthwise_large.cu; plane, plane_r8: whole
// planes a block of depthwise_small_plane.cu, runs of 4 or 8 outputs a thread; plane_mm: a plane of at most 64
// positions as a matrix product a channel (depthwise_plane_matrix.cu); rows_mm: a plane's rows as matrix products
// with the filter's rows laid out as Toeplitz matrices (depthwise_row_matrices.cu).
const conv_config GD_CONFIGS[] = {
    {"m1_t32x32", gd_tile_run<1, 4, 32, 8>, GdTileLaunch<1, 4, 32, 8>::supports},
    {"m1_t32x32_p8", gd_tile_run<1, 8, 32, 4>, GdTileLaunch<1, 8, 32, 4>::supports},
    {"m1_t16x16", gd_tile_run<1, 2, 16, 8>, GdTileLaunch<1, 2, 16, 8>::supports},
    {"m1_t8x8", gd_tile_run<1, 1, 8, 8>, GdTileLaunch<1, 1, 8, 8>::supports},
    {"m4_t32x16", gd_tile_run<4, 2, 32, 8>, GdTileLaunch<4, 2, 32, 8>::supports},
    {"m4_t16x16", gd_tile_run<4, 4, 16, 4>, GdTileLaunch<4, 4, 16, 4>::supports},
    {"m4_t8x8", gd_tile_run<4, 1, 8, 8>, GdTileLaunch<4, 1, 8, 8>::supports},
    {"m8_t32x16", gd_tile_run<8, 4, 32, 4>, GdTileLaunch<8, 4, 32, 4>::supports},
    {"m8_t16x16", gd_tile_run<8, 4, 16, 4>, GdTileLaunch<8, 4, 16, 4>::supports},
    {"m8_t8x8", gd_tile_run<8, 2, 8, 4>, GdTileLaunch<8, 2, 8, 4>::supports},
    {"m8x2_t16x16", gd_tile_run<8, 4, 16, 4, 2>, GdTileLaunch<8, 4, 16, 4, 2>::supports},
    {"m8x4_t8x8", gd_tile_run<8, 2, 8, 4, 4>, GdTileLaunch<8, 2, 8, 4, 4>::supports},
    {"m4_t8x8_k4", gd_tile_run<4, 1, 8, 8, 1, 4>, GdTileLaunch<4, 1, 8, 8, 1, 4>::supports},
    {"m8_t8x8_k4", gd_tile_run<8, 2, 8, 4, 1, 4>, GdTileLaunch<8, 2, 8, 4, 1, 4>::supports},
    {"nhwc_p4_t128", gd_nhwc_run<1, 4, 128, false>, gd_nhwc_supports<1, 4, false>},
    {"nhwc_p2_t128", gd_nhwc_run<1, 2, 128, false>, gd_nhwc_supports<1, 2, false>},
    {"nhwc_r2p2_t128", gd_nhwc_run<2, 2, 128, false>, gd_nhwc_supports<2, 2, false>},
    {"nhwc_narrow_p1_t128", gd_nhwc_run<1, 1, 128, true>, gd_nhwc_supports<1, 1, true>},
    {"nhwc_narrow_p2_t128", gd_nhwc_run<1, 2, 128, true>, gd_nhwc_supports<1, 2, true>},
    {"nhwc_narrow_r2p2_t128", gd_nhwc_run<2, 2, 128, true>, gd_nhwc_supports<2, 2, true>},
    {"nhwc_narrow_r4p2_t128", gd_nhwc_run<4, 2, 128, true>, gd_nhwc_supports<4, 2, true>},
    {"nhwc_narrow_r8p2_t128", gd_nhwc_run<8, 2, 128, true>, gd_nhwc_supports<8, 2, true>},
    {"nhwc_narrow_r4p4_t128", gd_nhwc_run<4, 4, 128, true>, gd_nhwc_supports<4, 4, true>},
    {"nhwc_narrow_r8p2_t128_b4", gd_nhwc_run<8, 2, 128, true, 4>, gd_nhwc_supports<8, 2, true>},
    {"nhwc_narrow_r4p4_t128_b4", gd_nhwc_run<4, 4, 128, true, 4>, gd_nhwc_supports<4, 4, true>},
    {"nchw_r2", gd_nchw_run<2>, gd_nchw_supports},
    {"nchw_r4", gd_nchw_run<4>, gd_nchw_supports},
    {"nchw_r7", gd_nchw_run<7>, gd_nchw_supports},
    {"nchw_t32x32", gd_nchw_tiled_run<32, 32>, gd_nchw_supports},
    {"lk_q16", gd_large_run<16>, gd_large_supports},
    {"lk_q8", gd_large_run<8>, gd_large_supports},
    {"plane", gd_plane_run<4>, gd_plane_supports<4>},
    {"plane_r8", gd_plane_run<8>, gd_plane_supports<8>},
    {"plane_mm", gd_plane_mm_run, gd_plane_mm_supports},
    {"rows_mm", gd_rows_mm_run, gd_rows_mm_supports},
    {"taps13", gd_taps_run<0>, gd_taps_supports<0>},
    {"taps", gd_taps_run<1>, gd_taps_supports<1>},
};

// Untuned choice: depthwise filters DWL_MIN_FILTER or longer on a side and DWL_MIN_TAPS taps or more
// (without dilation) at a column stride of 1 with fp32 x NCHW on planes of DRT_MIN_OW output columns or more to
// the row-taps kernels where they fit (13 taps wide, up to batch DRT_MAX_BATCH: taps13; wider rows of at most
// DRT_MAX_ROWS_ANY filter rows at batch 1: taps); else on planes of at most 64 positions with x NCHW from batch 32
// to the plane-matrix kernel;
// on small planes (DWP_*_PLANE; at stride 2, only the smallest, or NHWC ones at batches 1-3) to the
// small-plane kernel; at a column stride of 2 or more with fp32 x NCHW from batch 16, to the row-matrix kernel
// where it fits (planes above 64 positions: the smallest were not timed against plane); larger planes to the
// large-filter kernel, 8 outputs a thread, or 16 where the filter is 13 or more on
// both sides, the plane 28 or more along its sliding side and the grid has 64K such threads or more
// (RepLKNet's 31x31 and 29x29, fp16 UniRepLKNet's 13x13 on 28x28 at batch 32 on the H200; 8 elsewhere, batch
// 1 everywhere); else the NHWC kernel for depthwise NHWC, with 4-byte vectors, one pixel each where 16-byte
// ones would leave the GPU mostly idle (fewer than DW_SMALL_GRID of them over the output); else, f16 /
// bf16, in tall tiles, which read each input vector for more outputs (the fastest on most of the depthwise
// suite's batch-32 layers on the H100): 4 rows x 4 columns for 5x5 and
// larger filters, 4 x 2 at stride 1, 2 x 2 at stride 2; fp32 (not timed that way) 16-byte vectors in strips
// that waste the fewest pixels (small planes: 2 x 2 tiles, which read each input vector for 4 outputs
// instead of 1); the NCHW depthwise kernel for depthwise NCHW planes that a tile leaves mostly empty or
// reads at stride 2, with bands of 7 rows where they divide the plane (MobileNet's 56, 28, 14, 7), but the
// register-blocked 32 x 32 tiles for its 5x5 and 7x7 filters on planes of 24 output columns or more
// (ConvNeXt's 56 and 28 columns, EfficientNet's 28 at strides 1 and 2: 14-33% faster than m1_t32x32_p8 and
// nchw_r4 in fp32 on the H100); else, where a group has several maps, 8 maps a
// thread (16 or more maps a group: slices sharing a window) or map quads (2 to 7 maps), in the tile that
// fits the output plane (the fastest of the m4 / m8 tiles on ResNeXt's grouped layers at batch 32, fp32,
// H100); one map (wide planes: 32 columns; 5x5 and 7x7 filters: 8 rows per
// thread, so each loaded value feeds more taps). A tile whose window does not fit shared memory falls back
// to the smallest, which gd_supports checked.
const char* gd_default_config(const conv_problem* p) {
    const int64_t OW = conv_out_w(p);
    const bool large_filter = std::max(p->KH, p->KW) >= DWL_MIN_FILTER && p->KH * p->KW >= DWL_MIN_TAPS;
    if (large_filter) {
        const int64_t plane = p->H * p->W;
        // At stride 2 the small-plane kernel sums a row's outputs one at a time (gd_every_tap): from batch 4
        // the large-filter kernel beat it on every such layer timed, and at batch 1 on all but NHWC planes of
        // at most DWP_SMALL_PLANE_BATCHED positions (H200: MixNet-M's 9x9 at stride 2, 13x13 and 31x31 at
        // stride 2; 31x31 on 56x56, batch 32: 601 us against 2571; bench/results/nvidia-h200/stride2.md).
        const bool batched = p->B >= 4 && p->stride_w == 1;
        const bool nhwc_few = p->x_layout == CONV_NHWC && (p->B < 4 || p->stride_w == 1);
        const bool small = plane <= DWP_SMALL_PLANE || (plane <= DWP_SMALL_PLANE_BATCHED && (batched || nhwc_few)) ||
                           (batched && (plane <= DWP_MID_PLANE || p->KW >= DWP_MID_ROW));
        if (p->stride_w == 1 && p->x_dtype == CONV_F32 && p->x_layout == CONV_NCHW && OW >= DRT_MIN_OW) {
            if (p->KW == 13 && p->B <= DRT_MAX_BATCH && drt_fits(p, 0, 0) == CONV_OK) return "taps13";
            if (p->KW > 13 && p->KH <= DRT_MAX_ROWS_ANY && p->B == 1 && drt_fits(p, 1, 0) == CONV_OK) return "taps";
        }
        if (p->B >= DWM_MIN_BATCH && p->x_layout == CONV_NCHW && dwm_fits(p, 0) == CONV_OK) return "plane_mm";
        if (small && dwp_fits(p, 4, 0) == CONV_OK) return "plane";
        if (p->stride_w > 1 && p->B >= DWR_MIN_BATCH && p->x_layout == CONV_NCHW && dwr_fits(p, 0) == CONV_OK)
            return "rows_mm";
    }
    if (large_filter && dwl_fits(p, 0) == CONV_OK) {
        const bool tall = p->KH > p->KW;  // the longer side slides
        const int64_t along = tall ? conv_out_h(p) : OW, across = tall ? OW : conv_out_h(p);
        const int64_t strips16 = p->B * p->C * across * ((along + 15) / 16);
        return std::min(p->KH, p->KW) >= 13 && along >= 28 && strips16 >= 65536 ? "lk_q16" : "lk_q8";
    }
    if (dw_nhwc_fits(p, 0) == CONV_OK && GdTileLaunch<1, 2, 16, 8>::fits(p)) {
        const int64_t vectors16 = p->B * conv_out_h(p) * OW * p->C / (16 / (int64_t)conv_dtype_size(p->x_dtype));
        if (vectors16 < DW_SMALL_GRID) return "nhwc_narrow_p1_t128";
        if (p->x_dtype == CONV_F32)
            return OW >= 28 ? "nhwc_p4_t128" : OW >= 12 ? "nhwc_p2_t128" : "nhwc_r2p2_t128";
        if (p->KH >= 5) return "nhwc_narrow_r4p4_t128";
        return p->stride_h == 1 ? "nhwc_narrow_r4p2_t128" : "nhwc_narrow_r2p2_t128";
    }
    if (dw_nchw_fits(p, 0) == CONV_OK && OW >= 24 && p->KH >= 5 && dwt_unrolled(p)) return "nchw_t32x32";
    if (dw_nchw_fits(p, 0) == CONV_OK && (OW < 24 || p->stride_w > 1))
        return conv_out_h(p) % 7 == 0 ? "nchw_r7" : "nchw_r4";
    const int64_t maps = p->M / p->groups;
    // Other dtypes than fp32: the tiles built for them (map quads where a group has 2 or more maps).
    if (p->x_dtype != CONV_F32 || p->y_dtype != CONV_F32) {
        if (maps >= 2 && OW >= 12 && GdTileLaunch<4, 4, 16, 4>::fits(p)) return "m4_t16x16";
        return OW >= 12 && GdTileLaunch<1, 2, 16, 8>::fits(p) ? "m1_t16x16" : "m1_t8x8";
    }
    if (maps >= 16) {
        if (OW >= 12 && GdTileLaunch<8, 4, 16, 4, 2>::fits(p)) return "m8x2_t16x16";
        if (GdTileLaunch<8, 2, 8, 4, 4>::fits(p)) return "m8x4_t8x8";
    }
    if (maps >= 8) {
        if (OW >= 24 && GdTileLaunch<8, 4, 32, 4>::fits(p)) return "m8_t32x16";
        if (OW >= 12 && GdTileLaunch<8, 4, 16, 4>::fits(p)) return "m8_t16x16";
        if (GdTileLaunch<8, 2, 8, 4>::fits(p)) return "m8_t8x8";
    }
    if (maps >= 2) {
        if (OW >= 24 && GdTileLaunch<4, 2, 32, 8>::fits(p)) return "m4_t32x16";
        if (OW >= 12 && GdTileLaunch<4, 4, 16, 4>::fits(p)) return "m4_t16x16";
        if (GdTileLaunch<4, 1, 8, 8>::fits(p)) return "m4_t8x8";
    }
    if (OW >= 24 && p->KH >= 5 && GdTileLaunch<1, 8, 32, 4>::fits(p)) return "m1_t32x32_p8";
    if (OW >= 24 && GdTileLaunch<1, 4, 32, 8>::fits(p)) return "m1_t32x32";
    if (OW >= 12 && GdTileLaunch<1, 2, 16, 8>::fits(p)) return "m1_t16x16";
    return "m1_t8x8";
}

// Shapes any configuration takes: few channels per group (a dense layer re-reads its input once per
// map quad here: the implicit GEMMs own those), the smallest tile's window must fit (the default falls
// back to it) and the tiles' input coordinates must fit int32.
int gd_supports(const conv_problem* p) {
    if (p->C / p->groups > GD_MAX_CG)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: C/groups = %lld channels per group, more than %d (C=%lld, groups=%lld): "
                              "dense layers belong to the GEMM variants",
                              (long long)(p->C / p->groups), GD_MAX_CG, (long long)p->C, (long long)p->groups);
    const int status = GdTileLaunch<1, 1, 8, 8>::supports(p);
    if (status != CONV_OK) return status;
    return conv_check_coords("grouped_direct", p, GD_MAX_TILE - 1, GD_MAX_TILE - 1);
}

}  // namespace

extern "C" const conv_impl conv_impl_grouped_direct = {
    gd_supports, NULL, GD_CONFIGS, (int)(sizeof GD_CONFIGS / sizeof GD_CONFIGS[0]), gd_default_config};
