// depthwise_row_taps.cu — grouped_direct's "taps13" and "taps" configurations: depthwise layers whose filter rows
// fit a thread's registers a row at a time, on planes of 28 or more columns at small batches (the defaults for fp32 x
// NCHW: taps13 for filters 13 taps wide at batches 1-32, taps for wider rows at batch 1; grouped_direct.cu,
// DRT_MAX_BATCH). Exact fp32 FFMA on f32 x and w; y and bias in any dtype; NCHW or NHWC; bias + ReLU; any filter
// height, row stride and padding; column stride 1; no dilation.
//
// At batch 1 the other large-filter kernels leave the GPU waiting: a 13x13 layer on 28x28 planes of 160 channels is
// 320 blocks (a fraction of one wave), and `lk_q8`, the fastest of them there, executes 3.8 M warp instructions for
// 0.66 M warp FMAs of the layer (a strip's filter rows split between lanes and summed by shuffles, each filter row's
// set-up and its tail of taps, a window staged value by value; 8.45 us on the H200, 25% achieved occupancy). Here a
// thread sums 4 consecutive outputs of one row: for each filter row it reads the row's taps and the values of x
// they meet 16 bytes at a time and makes its multiply-adds from registers (taps13: four reads of each, then 52
// FMAs, fully unrolled, with no branch and no index arithmetic between them; taps: 16 FMAs a group of 4 taps, x
// sliding by one 16-byte vector). x is staged with its zeros of padding as a window of whole rows, so that every
// tap runs against a staged value, as PyTorch's sum does (an Inf or NaN weight over padding gives NaN): filter rows
// that fall on padding rows only are skipped where the block's weights are finite. A block takes a band of a
// plane's output rows (BR rows: bands of a plane where channels alone give too few blocks) for CB channels of one
// image; the window holds the band's rows of x and the filter's KH - 1 more.

#include <algorithm>

#include "conv_shape.cuh"
#include "depthwise_stage.cuh"
#include "depthwise_store.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "int_divider.cuh"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int DRT_THREADS = 256;
constexpr int DRT_RUN = 4;  // outputs a thread, consecutive along a row (one 16-byte vector of x a step)
constexpr int DRT_MIN_KW = 9;  // the narrowest rows "taps" takes (the large filters' side, DWL_MIN_FILTER)
// A block's filters and window: within the 48 KB a launch gets without opting in (several blocks an SM).
constexpr size_t DRT_SMEM_MAX = CONV_SMEM_NO_OPT_IN;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DrtShape : ConvShape32 {
    int B;
    int QW;           // output quads a row (4 QW outputs, those past OW computed and not stored)
    int WR, XSEG;     // floats a staged filter row (its taps, zeros to a multiple of 4); x values a thread reads
                      // a filter row (KW + 3 to a multiple of 4)
    int XR;           // a staged row of x: 4 (QW - 1) + XSEG values (column j is x's column j - pad_w), XR / 4 odd
    int BR, SR;       // output rows a band; x's rows its window holds, (BR - 1) * stride_h + KH
    int bands, CB;    // bands a plane; channels a block
    int WS, CS;       // floats a channel takes: its filter (KH rows of WR), its window (SR rows of XR)
    int items;        // threads' runs a channel: BR * QW
    int x_nhwc, y_nhwc, y_dtype, relu;
    // blockIdx.x split into channel group, band and image; staged flat indices; a block's runs
    ConvDivider by_cgroups, by_bands, by_ws, by_seg, by_cs, by_xr, by_items, by_qw, by_threads;
};

// acc[r] += sum over taps t < taps of w[t] * x[t + r]: one group of up to 4 taps against x0 (values 0-3) and x1
// (4-7). The zeros past a row's last tap are never multiplied (0 * Inf would make a NaN the sum does not have).
__device__ __forceinline__ void drt_group(float (&acc)[DRT_RUN], float4 w4, float4 x0, float4 x1, int taps = 4) {
    const float wv[4] = {w4.x, w4.y, w4.z, w4.w}, xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int t = 0; t < 4; ++t)
        if (t < taps)
#pragma unroll
            for (int r = 0; r < DRT_RUN; ++r) acc[r] = fmaf(wv[t], xv[t + r], acc[r]);
}

__device__ __forceinline__ float4 drt_load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// One filter row: acc[r] += sum over the row's taps k of w[k] * x[r + k], x and w 16 bytes at a time. KW > 0: a
// row of exactly KW taps, unrolled whole (13: 52 FMAs from four 16-byte reads of x and four of taps, every value
// in registers before the first FMA); KW == 0: `kw` taps, a group of 4 a step, sliding x by one vector (two 16-byte
// reads for 16 FMAs), the last group's kw % 4 taps alone.
template <int KW>
__device__ __forceinline__ void drt_row(float (&acc)[DRT_RUN], const float* xrow, const float* wrow, int kw) {
    if constexpr (KW > 0) {
        constexpr int G = (KW + 3) / 4;  // groups of taps, the last with KW % 4 (or 4)
        float4 xv[G + 1], wv[G];
#pragma unroll
        for (int g = 0; g <= G; ++g)
            if (4 * g < KW + 3) xv[g] = drt_load4(xrow + 4 * g);  // x values up to KW + 2
#pragma unroll
        for (int g = 0; g < G; ++g) wv[g] = drt_load4(wrow + 4 * g);
#pragma unroll
        for (int g = 0; g < G; ++g)
            drt_group(acc, wv[g], xv[g], 4 * (g + 1) < KW + 3 ? xv[g + 1] : float4{}, min(4, KW - 4 * g));
    } else {
        const int groups = kw / 4, tail = kw % 4;
        float4 x0 = drt_load4(xrow);
#pragma unroll 2
        for (int g = 0; g < groups; ++g) {
            const float4 x1 = drt_load4(xrow + 4 * g + 4);
            drt_group(acc, drt_load4(wrow + 4 * g), x0, x1);
            x0 = x1;
        }
        if (tail)  // its taps reach x values up to 4 groups + tail + 2: past x0 from 2 taps on
            drt_group(acc, drt_load4(wrow + 4 * groups), x0, tail >= 2 ? drt_load4(xrow + 4 * groups + 4) : float4{},
                      tail);
    }
}

// Stages a block's filters (CB x WS values at dst) and windows (CB x CS after them) in one pass (batch 1: a grid of
// less than a wave, every block staging at once): a thread loads GD_STAGE_LOADS values before it stores any, so
// that their latencies overlap. The filters' few values split their index as gd_stage does; the windows' (nine in
// ten of the values on UniRepLKNet's 28x28 planes) walk it: a thread's next value is blockDim.x further on, so its
// column, row and channel advance by constants, with a carry, and the channel's base pointer moves only when the
// channel does. (gd_stage's split index and 64-bit offsets, ~60 instructions a value, were a third of the kernel's
// instructions at batch 32: ncu, 13x13 on 28x28.) Channels past C are zeros, never stored. Returns whether this
// thread staged a weight that is not finite.
__device__ __forceinline__ bool drt_stage(const DrtShape& s, const float* __restrict__ x, const float* __restrict__ w,
                                          float* dst, int b, int c0, int nc, int in_r0) {
    const int nw = s.CB * s.WS, n = nw + s.CB * s.CS, step = blockDim.x, t = threadIdx.x;
    // The window walker, at this thread's first value of the windows: channel cl, row r, column col of it (the
    // launch's dividers: a division by a run-time value is ~20 instructions).
    const int first = t >= nw ? t : t + (int)s.by_threads.div(nw - t + step - 1) * step;
    uint32_t rest, c_u, dc_u;
    int cl = (int)s.by_cs.divmod(first - nw, &rest), r = (int)s.by_xr.divmod(rest, &c_u), col = (int)c_u;
    const int drow = (int)s.by_xr.divmod(step, &dc_u), dcol = (int)dc_u;
    const long long hw = (long long)s.H * s.W, cstep = s.x_nhwc ? 1 : hw, pstep = s.x_nhwc ? s.C : 1;
    const float* ximg = x + (long long)b * s.C * hw;
    const float* xc = ximg + (c0 + cl) * cstep;  // channel c0 + cl of image b
    float check = 0.0f;  // + 0 x each weight: NaN once a weight is Inf or NaN (cheaper than a flag a value)
    for (int i0 = t; i0 < n; i0 += GD_STAGE_LOADS * step) {
        float v[GD_STAGE_LOADS];
#pragma unroll
        for (int u = 0; u < GD_STAGE_LOADS; ++u) {
            const int i = i0 + u * step;
            v[u] = 0.0f;
            if (i < nw) {
                uint32_t rest, kw;
                const int fl = (int)s.by_ws.divmod(i, &rest), kh = (int)s.by_seg.divmod(rest, &kw);
                if (fl < nc && (int)kw < s.KW) v[u] = w[((long long)(c0 + fl) * s.KH + kh) * s.KW + kw];
            } else if (i < n) {
                const int ih = in_r0 + r, iw = col - s.pad_w;
                if (cl < nc && ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) v[u] = xc[(long long)(ih * s.W + iw) * pstep];
                col += dcol;
                r += drow;
                if (col >= s.XR) {
                    col -= s.XR;
                    ++r;
                }
                if (r >= s.SR) {
                    do {
                        r -= s.SR;
                        ++cl;
                    } while (r >= s.SR);
                    xc = ximg + (c0 + cl) * cstep;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < GD_STAGE_LOADS; ++u) {
            const int i = i0 + u * step;
            if (i >= n) break;
            if (i < nw) check = fmaf(v[u], 0.0f, check);
            dst[i] = v[u];
        }
    }
    return check != check;
}

template <int KW>
__global__ void __launch_bounds__(DRT_THREADS) drt_kernel(DrtShape s, const float* __restrict__ x,
                                                          const float* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float4 drt_smem[];
    float* ws = reinterpret_cast<float*>(drt_smem);  // CB filters of KH rows of WR (taps, then zeros)
    float* xs = ws + s.CB * s.WS;                    // CB windows of SR rows of XR
    uint32_t cg, band_u;
    const int b = (int)s.by_bands.divmod(s.by_cgroups.divmod(blockIdx.x, &cg), &band_u);
    const int c0 = (int)cg * s.CB, band = (int)band_u, nc = min(s.CB, s.C - c0);
    const int oh0 = band * s.BR, in_r0 = oh0 * s.stride_h - s.pad_h;  // x's row at the window's row 0
    grid_wait_prior();  // launched as a dependent of the stream's previous kernel (grid_dependency.cuh)
    const bool w_bad = drt_stage(s, x, w, ws, b, c0, nc, in_r0);
    // With finite weights a filter row over padding rows only adds zeros: skipped. With an Inf or NaN weight every
    // row runs, so that it meets the padding's zeros (NaN), as in PyTorch.
    const bool skip = !__syncthreads_or(w_bad);  // (its barrier also orders the staging before the reads)
    grid_launch_dependents();  // inputs read: the next kernel may launch while this one sums and stores
    for (int i = threadIdx.x; i < s.CB * s.items; i += blockDim.x) {
        uint32_t it, q;
        const int cl = (int)s.by_items.divmod(i, &it);
        const int ohl = (int)s.by_qw.divmod(it, &q), oh = oh0 + ohl;
        if (cl >= nc || oh >= s.OH) continue;  // past C, or the last band's rows past OH
        const int ih0 = in_r0 + ohl * s.stride_h;  // x's row under filter row 0
        const int kh0 = skip ? max(0, -ih0) : 0, kh1 = skip ? min(s.KH, s.H - ih0) : s.KH;
        const float* xrow = xs + cl * s.CS + (ohl * s.stride_h) * s.XR + 4 * (int)q;
        const float* wrow = ws + cl * s.WS;
        float acc[DRT_RUN] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
        for (int kh = kh0; kh < kh1; ++kh) drt_row<KW>(acc, xrow + kh * s.XR, wrow + kh * s.WR, s.KW);
        const int c = c0 + cl, ow0 = 4 * (int)q;
        const float bv = gd_bias_as_float(bias, s.y_dtype, c);
#pragma unroll
        for (int r = 0; r < DRT_RUN; ++r) {
            if (ow0 + r >= s.OW) break;
            const long long o = (long long)oh * s.OW + ow0 + r, ohw = (long long)s.OH * s.OW;
            const long long at = s.y_nhwc ? ((long long)b * ohw + o) * s.C + c : ((long long)b * s.C + c) * ohw + o;
            gd_store_in_dtype(y, s.y_dtype, at, conv_epilogue_value(acc[r], bv, s.relu));
        }
    }
}

// The problem's geometry at CB channels and bands of BR output rows.
void drt_set_tile(DrtShape& s, int cb, int br) {
    s.CB = cb;
    s.BR = br;
    s.bands = (s.OH + br - 1) / br;  // the last band may have fewer rows; none is empty
    s.SR = (br - 1) * s.stride_h + s.KH;
    s.CS = s.SR * s.XR;
    s.items = br * s.QW;
}

size_t drt_bytes(const DrtShape& s) { return (size_t)s.CB * (s.WS + s.CS) * sizeof(float); }

// Blocks a grid should have at least: two an SM, so that one stages while another sums (four, in bands of half
// the rows, were slower: 13x13 on 28x28 at batch 1 8.6 -> 9.6 us, H200).
constexpr int DRT_BLOCKS_PER_SM = 2;
// Output rows a band has at least where a plane is split (each band stages the filter's KH - 1 rows more).
constexpr int DRT_MIN_BAND_ROWS = 4;

// The tile for `sms` SMs: a channel's whole plane a block where its runs fit a block's threads, else bands of
// equal rows; then more bands while the grid has fewer than DRT_BLOCKS_PER_SM blocks an SM (batch 1), or more
// channels a block while it keeps them and the block has threads to spare (larger batches). The smallest tile
// (one row of one channel) where none fits the shared memory (drt_fits refuses that in words).
DrtShape drt_shape(const conv_problem* p, int sms) {
    DrtShape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.B = (int)p->B;
    s.QW = (s.OW + DRT_RUN - 1) / DRT_RUN;
    s.WR = (s.KW + 3) / 4 * 4;
    s.XSEG = (s.KW + 6) / 4 * 4;
    s.XR = 4 * (s.QW - 1) + s.XSEG;
    if (s.XR / 4 % 2 == 0) s.XR += 4;  // a quarter-warp's 16-byte reads on 8 rows fall in distinct banks
    s.WS = s.KH * s.WR;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    auto rows_of = [&](int bands) { return (s.OH + bands - 1) / bands; };  // equal bands
    auto blocks = [&](int cb, int rows) { return (int64_t)s.B * ((s.C + cb - 1) / cb) * ((s.OH + rows - 1) / rows); };
    int bands = (s.OH + std::max(1, DRT_THREADS / s.QW) - 1) / std::max(1, DRT_THREADS / s.QW);
    const int64_t want = (int64_t)DRT_BLOCKS_PER_SM * sms;
    while (rows_of(bands) > DRT_MIN_BAND_ROWS && blocks(1, rows_of(bands)) < want) ++bands;
    int br = rows_of(bands);
    drt_set_tile(s, 1, br);
    while (br > 1 && drt_bytes(s) > DRT_SMEM_MAX) drt_set_tile(s, 1, br = (br + 1) / 2);
    int cb = 1;
    while (cb * 2 <= s.C && cb * 2 * s.items <= DRT_THREADS && blocks(cb * 2, br) >= want) {
        DrtShape t = s;
        drt_set_tile(t, cb * 2, br);
        if (drt_bytes(t) > DRT_SMEM_MAX) break;
        cb *= 2;
        s = t;
    }
    return s;
}

}  // namespace

// The configuration's name: rows of exactly 13 taps, unrolled whole, or of any width from DRT_MIN_KW.
static const char* drt_name(int any_width) { return any_width ? "taps" : "taps13"; }

int drt_fits(const conv_problem* p, int any_width, int report) {
    const char* name = drt_name(any_width);
    const int status = dw_undilated_fits(p, name, report);
    if (status != CONV_OK) return status;
    const char* why = nullptr;
    if (p->x_dtype != CONV_F32) why = "f32 x only (built for the fp32 layers it won)";
    else if (!any_width && p->KW != 13) why = "filters 13 taps wide only";
    else if (any_width && p->KW < DRT_MIN_KW) why = "filters 9 taps wide or wider only";
    else if (p->stride_w != 1) why = "a column stride of 1 only (a thread's 4 outputs share its values of x)";
    if (why) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: %s takes %s, got x %s, a %lldx%lld filter at "
                              "stride %lldx%lld", name, why, conv_dtype_name(p->x_dtype),
                              (long long)p->KH, (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w);
    }
    const DrtShape s = drt_shape(p, 1);  // host arithmetic only: the same answer without a GPU
    if (drt_bytes(s) > DRT_SMEM_MAX) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: %s stages a band of x's rows (the filter's %lld rows for one output "
                              "row, each of about 4*ceil(OW/4) + KW values) and the filter in %zu KB of shared "
                              "memory: %lldx%lld -> %lldx%lld positions need %zu bytes", name, (long long)p->KH,
                              DRT_SMEM_MAX / 1024, (long long)p->H, (long long)p->W, (long long)conv_out_h(p),
                              (long long)conv_out_w(p), drt_bytes(s));
    }
    return CONV_OK;
}

int drt_run(const conv_problem* p, int any_width, const conv_tensors* t, cudaStream_t stream) {
    int sms = 0;
    const int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    DrtShape s = drt_shape(p, sms);
    const int64_t cgroups = (s.C + s.CB - 1) / s.CB, blocks = cgroups * s.bands * s.B;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: %s's blocks of this batch pass int range",
                              drt_name(any_width));
    s.by_cgroups = ConvDivider::of((uint32_t)cgroups);
    s.by_bands = ConvDivider::of((uint32_t)s.bands);
    s.by_ws = ConvDivider::of((uint32_t)s.WS);
    s.by_seg = ConvDivider::of((uint32_t)s.WR);
    s.by_cs = ConvDivider::of((uint32_t)s.CS);
    s.by_xr = ConvDivider::of((uint32_t)s.XR);
    s.by_items = ConvDivider::of((uint32_t)s.items);
    s.by_qw = ConvDivider::of((uint32_t)s.QW);
    const int threads = (int)std::min<int64_t>(DRT_THREADS, ((int64_t)s.CB * s.items + 31) / 32 * 32);
    s.by_threads = ConvDivider::of((uint32_t)threads);
    const size_t smem = drt_bytes(s);
    const auto kernel = any_width ? drt_kernel<0> : drt_kernel<13>;
    CONV_LAUNCH_DEPENDENT_BY_WAVE(any_width ? "drt_kernel<0>" : "drt_kernel<13>", kernel, (unsigned)blocks, threads,
                                  smem, stream, s, static_cast<const float*>(t->x), static_cast<const float*>(t->w),
                                  static_cast<const void*>(t->bias), t->y);
    return CONV_OK;
}
