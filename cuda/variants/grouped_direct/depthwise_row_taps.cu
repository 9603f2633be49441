// depthwise_row_taps.cu — grouped_direct's "taps13" configuration: depthwise layers with filters 13 taps wide
// (UniRepLKNet's 13x13) on planes of 28 or more columns, batch 1-16 (the default there for fp32 x NCHW: grouped_direct.cu,
// DRT_MAX_BATCH). Exact fp32 FFMA on f32 x and w; y and bias in any dtype; NCHW or NHWC; bias + ReLU; any filter
// height, row stride and padding; column stride 1; no dilation.
//
// At batch 1 the other large-filter kernels leave the GPU waiting: a 13x13 layer on 28x28 planes of 160 channels is
// 320 blocks (a fraction of one wave), and `lk_q8`, the fastest of them there, executes 3.8 M warp instructions for
// 0.66 M warp FMAs of the layer (a strip's filter rows split between lanes and summed by shuffles, each filter row's
// set-up and its tail of taps, a window staged value by value; 8.45 us on the H200, 25% achieved occupancy). Here a
// thread sums 4 consecutive outputs of one row: for each filter row it reads the row's 13 taps (four 16-byte
// broadcasts) and the 16 staged values of x they meet (four 16-byte reads), then makes its 52 multiply-adds, fully
// unrolled, with no branch and no index arithmetic between them. x is staged with its zeros of padding as a window
// of whole rows, so that every tap runs against a staged value, as PyTorch's sum does (an Inf or NaN weight over
// padding gives NaN): filter rows that fall on padding rows only are skipped where the block's weights are finite.
// A block takes a band of a plane's output rows (BR rows: bands of a plane where channels alone give too few
// blocks) for CB channels of one image; the window holds the band's rows of x and the filter's KH - 1 more.

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
constexpr int DRT_KW = 13;   // taps a filter row: the width this configuration is built for
constexpr int DRT_RUN = 4;   // outputs a thread, consecutive along a row
constexpr int DRT_SEG = 16;  // x values a thread reads a filter row: DRT_RUN + DRT_KW - 1, whole 16-byte vectors
static_assert(DRT_SEG % 4 == 0 && DRT_SEG >= DRT_RUN + DRT_KW - 1, "a thread's segment of x is whole float4s");
// A block's filters and window: within the 48 KB a launch gets without opting in (several blocks an SM).
constexpr size_t DRT_SMEM_MAX = CONV_SMEM_NO_OPT_IN;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DrtShape : ConvShape32 {
    int B;
    int QW;           // output quads a row (4 QW outputs, those past OW computed and not stored)
    int XR;           // a staged row of x: 4 (QW - 1) + DRT_SEG values (column j is x's column j - pad_w), XR / 4 odd
    int BR, SR;       // output rows a band; x's rows its window holds, (BR - 1) * stride_h + KH
    int bands, CB;    // bands a plane; channels a block
    int WS, CS;       // floats a channel takes: its filter (KH rows of DRT_SEG), its window (SR rows of XR)
    int items;        // threads' runs a channel: BR * QW
    int x_nhwc, y_nhwc, y_dtype, relu;
    // blockIdx.x split into channel group, band and image; staged flat indices; a block's runs
    ConvDivider by_cgroups, by_bands, by_ws, by_seg, by_cs, by_xr, by_items, by_qw;
};

// acc[r] += sum over the row's taps k of w[k] * x[r + k]: 52 FMAs from 16 values of x and 13 taps (w[13..15] are
// never read), all in registers.
__device__ __forceinline__ void drt_row(float (&acc)[DRT_RUN], const float* xrow, const float* wrow) {
    float xv[DRT_SEG], wv[DRT_SEG];
#pragma unroll
    for (int j = 0; j < DRT_SEG; j += 4) {
        const float4 a = *reinterpret_cast<const float4*>(xrow + j);
        const float4 b = *reinterpret_cast<const float4*>(wrow + j);
        xv[j] = a.x; xv[j + 1] = a.y; xv[j + 2] = a.z; xv[j + 3] = a.w;
        wv[j] = b.x; wv[j + 1] = b.y; wv[j + 2] = b.z; wv[j + 3] = b.w;
    }
#pragma unroll
    for (int k = 0; k < DRT_KW; ++k)
#pragma unroll
        for (int r = 0; r < DRT_RUN; ++r) acc[r] = fmaf(wv[k], xv[r + k], acc[r]);
}

__global__ void __launch_bounds__(DRT_THREADS) drt_kernel(DrtShape s, const float* __restrict__ x,
                                                          const float* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float4 drt_smem[];
    float* ws = reinterpret_cast<float*>(drt_smem);  // CB filters of KH rows of DRT_SEG (taps, then zeros)
    float* xs = ws + s.CB * s.WS;                    // CB windows of SR rows of XR
    uint32_t cg, band_u;
    const int b = (int)s.by_bands.divmod(s.by_cgroups.divmod(blockIdx.x, &cg), &band_u);
    const int c0 = (int)cg * s.CB, band = (int)band_u, nc = min(s.CB, s.C - c0);
    const int oh0 = band * s.BR, in_r0 = oh0 * s.stride_h - s.pad_h;  // x's row at the window's row 0
    grid_wait_prior();  // launched as a dependent of the stream's previous kernel (grid_dependency.cuh)
    // The filters and the window in one pass (batch 1: a grid of less than a wave, every block staging at once).
    // Channels past C are zeros, never stored.
    bool w_bad = false, x_bad = false;
    auto load_w = [&](int i, int& at) {
        uint32_t rest, kw;
        const int cl = (int)s.by_ws.divmod(i, &rest), kh = (int)s.by_seg.divmod(rest, &kw);
        at = i;
        return cl < nc && (int)kw < DRT_KW ? w[((long long)(c0 + cl) * s.KH + kh) * DRT_KW + kw] : 0.0f;
    };
    const long long hw = (long long)s.H * s.W;
    auto load_x = [&](int i, int& at) {
        uint32_t rest, j;
        const int cl = (int)s.by_cs.divmod(i, &rest), ih = in_r0 + (int)s.by_xr.divmod(rest, &j);
        const int iw = (int)j - s.pad_w, c = c0 + cl;
        at = s.CB * s.WS + i;
        if (cl >= nc || ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) return 0.0f;
        const long long q = (long long)ih * s.W + iw;
        return x[s.x_nhwc ? ((long long)b * hw + q) * s.C + c : ((long long)b * s.C + c) * hw + q];
    };
    // (Rows a warp each, four rows' loads at once, with no index split a value, were slower: fewer loads in
    // flight. 13x13 on 28x28 at batch 1 7.5-7.9 -> 8.6 us, H200.)
    gd_stage<float>(s.CB * s.WS, s.CB * s.CS, ws, w_bad, x_bad, load_w, load_x);
    // With finite weights a filter row over padding rows only adds zeros: skipped. With an Inf or NaN weight every
    // row runs, so that it meets the padding's zeros (NaN), as in PyTorch.
    const bool skip = !__syncthreads_or(w_bad);
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
        for (int kh = kh0; kh < kh1; ++kh) drt_row(acc, xrow + kh * s.XR, wrow + kh * DRT_SEG);
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
    s.XR = 4 * (s.QW - 1) + DRT_SEG;
    if (s.XR / 4 % 2 == 0) s.XR += 4;  // a quarter-warp's 16-byte reads on 8 rows fall in distinct banks
    s.WS = s.KH * DRT_SEG;
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

int drt_fits(const conv_problem* p, int report) {
    const int status = dw_undilated_fits(p, "taps13", report);
    if (status != CONV_OK) return status;
    const char* why = nullptr;
    if (p->x_dtype != CONV_F32) why = "f32 x only (built for the fp32 layers it won)";
    else if (p->KW != DRT_KW) why = "filters 13 taps wide only";
    else if (p->stride_w != 1) why = "a column stride of 1 only (a thread's 4 outputs share its 16 values of x)";
    if (why) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: taps13 takes %s, got x %s, a %lldx%lld filter at "
                              "stride %lldx%lld", why, conv_dtype_name(p->x_dtype),
                              (long long)p->KH, (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w);
    }
    const DrtShape s = drt_shape(p, 1);  // host arithmetic only: the same answer without a GPU
    if (drt_bytes(s) > DRT_SMEM_MAX) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: taps13 stages a band of x's rows (the filter's %lld rows for one output "
                              "row, each of 4*ceil(OW/4) + 12 values and more) and the filter in %zu KB of shared "
                              "memory: %lldx%lld -> %lldx%lld positions need %zu bytes", (long long)p->KH,
                              DRT_SMEM_MAX / 1024, (long long)p->H, (long long)p->W, (long long)conv_out_h(p),
                              (long long)conv_out_w(p), drt_bytes(s));
    }
    return CONV_OK;
}

int drt_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    int sms = 0;
    const int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    DrtShape s = drt_shape(p, sms);
    const int64_t cgroups = (s.C + s.CB - 1) / s.CB, blocks = cgroups * s.bands * s.B;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: taps13's blocks of this batch pass int range");
    s.by_cgroups = ConvDivider::of((uint32_t)cgroups);
    s.by_bands = ConvDivider::of((uint32_t)s.bands);
    s.by_ws = ConvDivider::of((uint32_t)s.WS);
    s.by_seg = ConvDivider::of((uint32_t)DRT_SEG);
    s.by_cs = ConvDivider::of((uint32_t)s.CS);
    s.by_xr = ConvDivider::of((uint32_t)s.XR);
    s.by_items = ConvDivider::of((uint32_t)s.items);
    s.by_qw = ConvDivider::of((uint32_t)s.QW);
    const int threads = (int)std::min<int64_t>(DRT_THREADS, ((int64_t)s.CB * s.items + 31) / 32 * 32);
    const size_t smem = drt_bytes(s);
    CONV_LAUNCH_DEPENDENT_BY_WAVE("drt_kernel", drt_kernel, (unsigned)blocks, threads, smem, stream, s,
                                  static_cast<const float*>(t->x), static_cast<const float*>(t->w),
                                  static_cast<const void*>(t->bias), t->y);
    return CONV_OK;
}
