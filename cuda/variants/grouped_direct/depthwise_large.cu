// depthwise_large.cu — grouped_direct's kernel for depthwise layers with large filters (RepLKNet's 31x31,
// SLaK's 51x5 / 5x51 bands, UniRepLKNet's 13x13, InceptionNeXt's 1x11 / 11x1; any size, any stride, no
// dilation), the "lk_q*" configurations: exact fp32 FFMA on f32, f16 or bf16 x and w, y and bias in any
// dtype, NCHW or NHWC, bias + ReLU fused into the store.
//
// The work is arithmetic (KH*KW multiply-adds an output against one read of x), so the kernel is about
// feeding the FMA units from shared memory with as few loads as possible:
//   - A block stages an input window for CB channels of one image in shared memory as fp32 planes
//     (zeros on padding), and the CB channels' filters, a thread's loads issued GD_STAGE_LOADS at a time.
//   - A thread computes Q consecutive outputs along one direction of the plane (the "slide" direction:
//     along rows, or along columns where the filter is taller than wide, so that the long side of a band
//     slides). For one filter row it keeps Q input values in registers and walks the row's taps: each tap
//     is one broadcast weight (LDS.128 for four taps) and Q FMAs, then one new input value replaces the
//     one no output needs any more (a circular window, its slots named at compile time by unrolling the
//     walk Q taps at a time). Q FMAs a load, where a thread of one output loads a value for every FMA.
//   - Strides: the staged slide coordinate is stored split by phase (all positions = p mod stride, then
//     the next p), so that the taps of one phase walk consecutive words at any stride; each phase is a
//     walk of its own with its own taps (filter columns p, p + stride, ...).
//   - Taps that meet x's zero padding are skipped (whole filter rows, and a strip's columns) where the
//     block's weights are all finite; with an Inf or NaN weight every tap runs, so that one on padding
//     gives NaN (0 * Inf), as in PyTorch.
//   - Small grids: KS adjacent lanes share an output strip, each with every KS-th filter row, and add
//     their sums by a butterfly of shuffles (every lane gets the bitwise-same total: the same result on
//     every run). A warp's lanes are KS filter-row threads of 32 / KS consecutive output rows of one strip,
//     so that the rows and columns skipped on padding are skipped by most of a warp, not run for its union.
// One kernel per (x dtype, Q): the layouts, stride, filter size and y dtype are run-time values that only
// the staging and the store read. Blocks, tiles and channels a block are chosen per problem (dwl_plan).
// H200 figures and the steps that led here: bench/PERF_NOTES.md, "Large depthwise filters".

#include <algorithm>
#include <type_traits>

#include "conv_shape.cuh"
#include "depthwise_stage.cuh"
#include "depthwise_store.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "int_divider.cuh"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int DWL_THREADS = 256;
// Shared memory a block may take (at most what the device allows): two blocks an SM on the GPUs with
// 228 KB, so that one stages while the other multiplies.
constexpr int DWL_SMEM_BUDGET = 110 * 1024;

// The problem in slide coordinates: u across the slide direction (rows of the walk), v along it.
// Every count < 2^31 (the dispatcher's batch chunks).
struct DwlShape {
    int C, H, W, OH, OW;
    int KH, KW;                   // the filter
    int vertical;                 // 0: v runs along W (u = row); 1: v runs along H (u = column)
    int KU, KV, SU, SV, PU, PV;   // taps, strides and zeros before, across and along the slide
    int OUn, OVn;                 // outputs across and along the slide in a plane
    int IUn, IVn;                 // x's extent across and along the slide
    int x_nhwc, y_nhwc, y_dtype, relu;
    // the block's tile: OUt x (NS strips of Q) outputs for CB channels (a power of two, 2^cb_log) of one
    // image; KS adjacent lanes (a power of two up to 32, 2^ks_log) share an output strip, each taking every
    // KS-th filter row (small grids)
    int OUt, NS, CB, cb_log, KS, ks_log, tiles_u, tiles_v, cgroups;
    // staged: IU rows of SV phases of IVlen values (row stride IVrow); weights KU x SV phases of Apad taps in rows
    // of WS; IVrow and WS multiples of 4 with IVrow / 4 and WS / 4 odd (the 8 lanes of a quarter-warp's LDS.128 on
    // 8 consecutive rows hit distinct banks); phase p's A0 + (p < Ar) taps; sums [CB][OUt][NS * Q] in rows of OVst
    // (odd)
    int IU, IVlen, IVrow, plane, A0, Ar, Apad, WS, wplane, OVst, outs;
    // blockIdx.x, the walks' items and the staging and store loops' flat indices split by these (ConvDivider: no
    // division instructions; the block's and a thread's coordinates by division had been ~10% of the instructions
    // at batch 1, H200, 13x13 on 28x28)
    ConvDivider by_tiles_v, by_tiles_u, by_cgroups, by_per_c, by_ws, by_sv, by_ku, by_run, by_rows, by_tile, by_ovt,
        by_ou;
};

// Four taps a0 + j .. a0 + j + 3 of the walk (j a multiple of 4 below Q): one LDS.128 of weights, 4 x Q FMAs,
// and the four spent window slots refilled from one LDS.128 (xin + a0 + J + Q is 16-byte aligned: rows of IVrow
// values, a multiple of 4). One load each had made 4 of every 37 instructions of the walk (H200, 31x31 on 56x56
// at batch 1: lk_q16 37.2 -> 35.2 us, lk_q8 36.4 -> 36.1).
template <int Q, int J>
__device__ __forceinline__ void dwl_taps4(float (&acc)[Q], float (&win)[Q], const float* xin, const float* wrow,
                                          int a0) {
    const float4 w4 = *reinterpret_cast<const float4*>(wrow + a0 + J);
    const float4 x4 = *reinterpret_cast<const float4*>(xin + a0 + J + Q);
    const float wj[4] = {w4.x, w4.y, w4.z, w4.w}, xn[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
        for (int q = 0; q < Q; ++q) acc[q] = fmaf(win[(J + jj + q) % Q], wj[jj], acc[q]);
        win[J + jj] = xn[jj];  // slot J + jj's value x[a0 + J + jj] is spent: x[a0 + J + jj + Q] takes it
    }
}

// One tap a0 + J (J below Q): a broadcast weight, Q FMAs, the spent window slot refilled.
template <int Q, int J>
__device__ __forceinline__ void dwl_tap1(float (&acc)[Q], float (&win)[Q], const float* xin, const float* wrow,
                                         int a0) {
    const float wj = wrow[a0 + J];
#pragma unroll
    for (int q = 0; q < Q; ++q) acc[q] = fmaf(win[(J + q) % Q], wj, acc[q]);
    win[J] = xin[a0 + J + Q];
}

// Taps a0 + J .. a0 + Q - 1: all of them in groups of four (FULL), or those below A: whole groups of four,
// then the last one to three alone. Never a tap past A: its zero weight would meet a real input (another
// output's), and 0 * Inf is NaN.
template <int Q, bool FULL, int J = 0>
__device__ __forceinline__ void dwl_taps(float (&acc)[Q], float (&win)[Q], const float* xin, const float* wrow,
                                         int a0, int A) {
    if constexpr (J < Q) {
        if (!FULL && a0 + J + 4 > A) {
            if (a0 + J < A) dwl_tap1<Q, J>(acc, win, xin, wrow, a0);
            if (a0 + J + 1 < A) dwl_tap1<Q, J + 1>(acc, win, xin, wrow, a0);
            if (a0 + J + 2 < A) dwl_tap1<Q, J + 2>(acc, win, xin, wrow, a0);
            return;
        }
        dwl_taps4<Q, J>(acc, win, xin, wrow, a0);
        dwl_taps<Q, FULL, J + 4>(acc, win, xin, wrow, a0, A);
    }
}

// acc[q] += sum_a w[a] * x[q + a] for a < A: xin holds the walk's inputs (x[0] first), wrow its taps,
// zero-padded to whole float4s. win[s] holds x[a0 + s] at the start of each group of Q taps. Branches only
// between groups of four taps (and in the last three), on a block-uniform count, so that each group's
// loads are issued ahead of its FMAs.
template <int Q>
__device__ __forceinline__ void dwl_walk(float (&acc)[Q], const float* xin, const float* wrow, int A) {
    float win[Q];
#pragma unroll
    for (int q = 0; q < Q; q += 4) {
        const float4 x4 = *reinterpret_cast<const float4*>(xin + q);
        win[q] = x4.x; win[q + 1] = x4.y; win[q + 2] = x4.z; win[q + 3] = x4.w;
    }
    int a0 = 0;
    for (; a0 + Q <= A; a0 += Q) dwl_taps<Q, true>(acc, win, xin, wrow, a0, A);
    dwl_taps<Q, false>(acc, win, xin, wrow, a0, A);  // the last A % Q taps
}

// Register caps, without spills: the 16-output walk needs 79 unbounded, 72 lets four blocks of 224 threads
// share an SM instead of three; the 8-output walk needs 66, 64 lets four blocks of 256 threads share one instead
// of three (H200: fp16 +2.1% at batches 1 and 32 over the large-kernel suite, fp32 batch 32 +0.7%, batch 1 even).
template <class TX, int Q>
__global__ void __maxnreg__(Q == 8 ? 64 : 72) dwl_kernel(DwlShape s, const TX* __restrict__ x, const TX* __restrict__ w,
                                                         const void* __restrict__ bias, void* __restrict__ y) {
    extern __shared__ float4 dwl_smem[];
    float* ws = reinterpret_cast<float*>(dwl_smem);  // [CB][KU][SV][WS]
    float* xs = ws + s.CB * s.wplane;                // [CB][IU][IVrow]: [phase][IVlen] in a row
    float* part = xs + s.CB * s.plane;               // [CB][OUt][OVst]
    uint32_t tv, tu, cg;
    const int b = (int)s.by_cgroups.divmod(s.by_tiles_u.divmod(s.by_tiles_v.divmod(blockIdx.x, &tv), &tu), &cg);
    const int c0 = (int)cg * s.CB;
    const int u0 = tu * s.OUt, v0 = tv * s.NS * Q;
    const int in_u0 = u0 * s.SU - s.PU, in_v0 = v0 * s.SV - s.PV;

    grid_wait_prior();
    // The filters: phase p's taps a are filter columns kv = p + SV * a (rows where vertical), zeros after.
    // w is (C, KH, KW): MCKK and MKKC coincide at one channel a map.
    bool w_bad = false, x_bad = false;  // a weight of the block's channels is not finite; x's is unused
    gd_stage<TX>(s.CB * s.wplane, ws, w_bad, [&](int i, int& at) {
        uint32_t a, p = 0, ku;
        uint32_t line = s.by_ws.divmod(i, &a);  // (c, ku, p)
        if (s.SV > 1) line = s.by_sv.divmod(line, &p);
        const int c = (int)s.by_ku.divmod(line, &ku);
        const int kv = (int)(p + s.SV * a);
        const int kh = s.vertical ? kv : (int)ku, kw = s.vertical ? (int)ku : kv;
        at = i;
        return kv < s.KV && c0 + c < s.C ? w[((c0 + c) * s.KH + kh) * s.KW + kw] : TX{};
    });
    // With finite weights, taps that meet x's zero padding add nothing (0 * w = 0) and are skipped: filter
    // rows outside x for an output row, and columns outside x for a whole strip (from a multiple of four,
    // for the aligned weight loads). Half the taps of RepLKNet's 27x27 filters on 14x14 planes. An Inf or
    // NaN weight on padding gives NaN, as in PyTorch, so then every tap runs. Skipping,
    // the window's rows outside x are never read, and are not staged (most of a 7x7 plane's 19-row window
    // at 13x13).
    const bool skip = !__syncthreads_or(w_bad);
    // The input window, zeros outside x, consecutive threads along x's contiguous dimension: a plane's
    // columns (NCHW: lines of (channel, row)), or a row's pixels with their CB channels (NHWC: lines of rows).
    // Where the slide runs down columns (vertical), x's rows are u lines and its columns v positions. The
    // slide position iv is stored split by phase: iv % SV, then iv / SV. PLAIN: x NCHW, sliding along rows
    // at stride 1 (RepLKNet's and UniRepLKNet's square filters), known at compile time, so that a value's
    // index is a few instructions, not the general case's ~70 (H200, 31x31 at batch 1: the staging was 28% of
    // the kernel's stall samples, most of them issuing index arithmetic, every block staging at once).
    auto stage_x = [&](auto plain) {
        constexpr bool PLAIN = decltype(plain)::value;
        const bool nhwc = !PLAIN && s.x_nhwc, vertical = !PLAIN && s.vertical;
        const int SV = PLAIN ? 1 : s.SV;
        const int per_row = SV * s.IVlen;
        const int rows = vertical ? per_row : s.IU;  // of x's window
        const int run = nhwc ? (vertical ? s.IU : per_row) << s.cb_log : (vertical ? s.IU : per_row);
        const int total = (nhwc ? rows : s.CB * rows) * run;
        gd_stage<TX>(total, xs, x_bad, [&](int i, int& at) {
            uint32_t j, r = 0;
            const uint32_t line = s.by_run.divmod(i, &j);
            int c, col;
            if (nhwc) {
                r = line;
                c = (int)(j & (s.CB - 1));
                col = (int)(j >> s.cb_log);
            } else {
                c = (int)s.by_rows.divmod(line, &r);
                col = (int)j;
            }
            const int iu = vertical ? col : (int)r, iv = vertical ? (int)r : col;
            const int gu = in_u0 + iu, gv = in_v0 + iv;
            if (skip && (gu < 0 || gu >= s.IUn)) return TX{};  // at < 0: not staged
            uint32_t pos = (uint32_t)iv, phase = 0;
            if (SV > 1) pos = s.by_sv.divmod((uint32_t)iv, &phase);
            at = c * s.plane + iu * s.IVrow + (int)(phase * s.IVlen + pos);
            const int gh = vertical ? gv : gu, gw = vertical ? gu : gv;
            return c0 + c < s.C && gh >= 0 && gh < s.H && gw >= 0 && gw < s.W
                       ? x[nhwc ? ((b * s.H + gh) * s.W + gw) * s.C + c0 + c : ((b * s.C + c0 + c) * s.H + gh) * s.W + gw]
                       : TX{};
        });
    };
    if (!s.x_nhwc && !s.vertical && s.SV == 1) stage_x(std::true_type{});
    else stage_x(std::false_type{});
    __syncthreads();
    grid_launch_dependents();

    // The walks: thread (c, strip, ou, k), k fastest, then u (rows IVrow apart: a quarter-warp's 16-byte loads
    // on 8 rows fall in distinct banks); filter rows k, k + KS, ...; the KS sums of a strip added by shuffles, to
    // shared memory.
    // Every lane of a KS group runs the same trips of this loop (KS divides 32 and blockDim.x).
    const int per_c = s.OUt * s.NS, items = s.CB * per_c;
    const unsigned lane = threadIdx.x & 31;
    const unsigned group = s.KS == 32 ? 0xffffffffu : ((1u << s.KS) - 1) << (lane & ~(unsigned)(s.KS - 1));
    for (int it = threadIdx.x; it < items * s.KS; it += blockDim.x) {
        uint32_t r, row;
        const int k = it & (s.KS - 1), c = (int)s.by_per_c.divmod((uint32_t)(it >> s.ks_log), &r);
        const int strip = (int)s.by_ou.divmod(r, &row), ou = (int)row;
        float acc[Q];
#pragma unroll
        for (int q = 0; q < Q; ++q) acc[q] = 0.0f;
        const float* xc = xs + c * s.plane + ou * s.SU * s.IVrow + strip * Q;
        const float* wc = ws + c * s.wplane;
        const int in_u = (u0 + ou) * s.SU - s.PU, in_v = (v0 + strip * Q) * s.SV - s.PV;  // tap 0's input
        const int ku_lo = skip ? max(0, -in_u) : 0, ku_hi = skip ? min(s.KU, s.IUn - in_u) : s.KU;
        // Phase p's taps a read x at in_v + p + SV * (q + a), q < Q: those of the strip that meet x, from a
        // multiple of four. Worked out once here at stride 1, per filter row at other strides.
        auto taps_of = [&](int p, int* a_lo, int* a_hi) {
            *a_lo = 0;
            *a_hi = s.A0 + (p < s.Ar);
            if (!skip) return;
            const int first = in_v + p, last = first + s.SV * (Q - 1);
            if (last < 0) *a_lo = (int)s.by_sv.div((uint32_t)(-last + s.SV - 1)) / 4 * 4;
            *a_hi = min(*a_hi, first < s.IVn ? (int)s.by_sv.div((uint32_t)(s.IVn - first + s.SV - 1)) : 0);
        };
        int a_lo1, a_hi1;
        taps_of(0, &a_lo1, &a_hi1);
        for (int ku = ku_lo + ((k - ku_lo) & (s.KS - 1)); ku < ku_hi; ku += s.KS) {
            if (s.SV == 1) {
                if (a_lo1 < a_hi1)
                    dwl_walk<Q>(acc, xc + ku * s.IVrow + a_lo1, wc + ku * s.WS + a_lo1, a_hi1 - a_lo1);
                continue;
            }
            for (int p = 0; p < s.SV; ++p) {
                int a_lo, a_hi;
                taps_of(p, &a_lo, &a_hi);
                if (a_lo < a_hi)
                    dwl_walk<Q>(acc, xc + ku * s.IVrow + p * s.IVlen + a_lo, wc + (ku * s.SV + p) * s.WS + a_lo,
                                a_hi - a_lo);
            }
        }
        for (int m = 1; m < s.KS; m <<= 1) {
#pragma unroll
            for (int q = 0; q < Q; ++q) acc[q] += __shfl_xor_sync(group, acc[q], m);
        }
        float* out = part + (c * s.OUt + ou) * s.OVst + strip * Q;
#pragma unroll
        for (int q = 0; q < Q; ++q)
            if ((q & (s.KS - 1)) == k) out[q] = acc[q];  // the group's lanes share the stores
    }
    __syncthreads();
    // The store: bias and ReLU, y's dtype; consecutive threads on y's contiguous dimension (channels in NHWC).
    for (int i = threadIdx.x; i < s.outs; i += blockDim.x) {
        uint32_t c, pix, ou, ov;
        if (s.y_nhwc) {  // channels, then w, then h
            c = i & (s.CB - 1);
            pix = i >> s.cb_log;
        } else {  // w, then h, then channels
            c = s.by_tile.divmod(i, &pix);
        }
        if (s.vertical) ov = s.by_ou.divmod(pix, &ou);  // w is u
        else ou = s.by_ovt.divmod(pix, &ov);
        const int ou_g = u0 + (int)ou, ov_g = v0 + (int)ov;
        if (c0 + (int)c >= s.C || ou_g >= s.OUn || ov_g >= s.OVn) continue;
        const float acc = part[(c * s.OUt + ou) * s.OVst + ov];
        const int oh = s.vertical ? ov_g : ou_g, ow = s.vertical ? ou_g : ov_g;
        const int yi = s.y_nhwc ? ((b * s.OH + oh) * s.OW + ow) * s.C + c0 + c : ((b * s.C + c0 + c) * s.OH + oh) * s.OW + ow;
        gd_store_in_dtype(y, s.y_dtype, yi, conv_epilogue_value(acc, gd_bias_as_float(bias, s.y_dtype, c0 + c), s.relu));
    }
}

// The geometry of one problem for outputs of Q along the slide: the tile, channels a block, the filter-row
// split and the staged sizes. Returns the shared memory bytes, or 0 where even one output row of one
// channel does not fit.
size_t dwl_plan(const conv_problem* p, int Q, int sms, int most, DwlShape* out) {
    const size_t budget = std::min<size_t>(DWL_SMEM_BUDGET, (size_t)most);
    DwlShape s;
    const ConvShape32 g = conv_shape32(p);
    s.C = g.C; s.H = g.H; s.W = g.W; s.OH = g.OH; s.OW = g.OW;
    s.KH = g.KH; s.KW = g.KW;
    s.vertical = g.KH > g.KW;  // the long side of the filter slides
    s.KU = s.vertical ? g.KW : g.KH; s.KV = s.vertical ? g.KH : g.KW;
    s.SU = s.vertical ? g.stride_w : g.stride_h; s.SV = s.vertical ? g.stride_h : g.stride_w;
    s.PU = s.vertical ? g.pad_w : g.pad_h; s.PV = s.vertical ? g.pad_h : g.pad_w;
    s.OUn = s.vertical ? g.OW : g.OH; s.OVn = s.vertical ? g.OH : g.OW;
    s.IUn = s.vertical ? g.W : g.H; s.IVn = s.vertical ? g.H : g.W;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    s.A0 = s.KV / s.SV;  // taps of phase p: A0 + (p < Ar)
    s.Ar = s.KV % s.SV;
    s.Apad = (s.A0 + (s.Ar > 0) + 3) / 4 * 4;
    s.WS = s.Apad / 4 % 2 ? s.Apad : s.Apad + 4;
    s.wplane = s.KU * s.SV * s.WS;
    // Along the slide: up to 4 strips a tile (64 outputs at Q = 16), tiles of equal length.
    const int strips = conv_ceil_div(s.OVn, Q);
    s.tiles_v = conv_ceil_div(strips, 4);
    s.NS = conv_ceil_div(strips, s.tiles_v);
    // A phase holds the tile's outputs, the walk's taps and the one value it reads past its last tap.
    s.IVlen = s.NS * Q + s.Apad;
    // A multiple of 4 (the walk's 16-byte loads) with IVrow / 4 odd: the 8 rows a quarter-warp's LDS.128 reads fall in
    // distinct banks. Not so where a quarter-warp spans two strips (Q words apart) of few rows: a row and a strip can
    // meet in one bank, 2-way (SLaK's 5x51 / 51x5 on 56x56, fp16 NHWC batch 1, lk_q8 30.3 -> 35.2 us with this layout,
    // H200; the scalar loads on odd rows had no conflict there).
    s.IVrow = s.SV * s.IVlen / 4 % 2 ? s.SV * s.IVlen : s.SV * s.IVlen + 4;
    auto bytes = [&](int cb, int out_rows) {
        const size_t iu = (size_t)(out_rows - 1) * s.SU + s.KU;
        return (size_t)cb * (s.wplane + iu * s.IVrow + (size_t)out_rows * (s.NS * Q + 1)) * sizeof(float);
    };
    // Channels a block: NHWC, up to 32 bytes of them (staging reads whole sectors of x), fewer where a window
    // of the filter's height would not fit; NCHW, planes, one to start.
    int cb = 1;
    if (s.x_nhwc)
        while (cb * 2 <= s.C && cb * 2 * (int)conv_dtype_size(p->x_dtype) <= 32 && bytes(cb * 2, s.KU) <= budget)
            cb *= 2;
    // Rows a tile: the whole plane where a block's threads cover it in one pass, else equal parts; fewer
    // where the window would not fit.
    const int tiles_u = conv_ceil_div(s.OUn * s.NS * cb, DWL_THREADS);
    s.OUt = conv_ceil_div(s.OUn, tiles_u);
    while (s.OUt > 1 && bytes(cb, s.OUt) > budget) s.OUt = conv_ceil_div(s.OUt, 2);
    if (bytes(cb, s.OUt) > budget) return 0;
    // More channels a block while a block has threads to spare, its window fits, and the grid keeps two
    // blocks an SM.
    const int64_t planes = p->B * (int64_t)s.C;
    s.tiles_u = conv_ceil_div(s.OUn, s.OUt);
    auto blocks = [&](int c) { return (planes + c - 1) / c * s.tiles_u * s.tiles_v; };
    while (cb * 2 * s.OUt * s.NS <= DWL_THREADS && cb * 2 <= s.C && bytes(cb * 2, s.OUt) <= budget &&
           blocks(cb * 2) >= 2 * (int64_t)sms)
        cb *= 2;
    // Small grids (batch 1): rows split while blocks are fewer than two an SM, then the filter's rows split
    // between adjacent lanes up to 32 warps an SM or a block of one pass.
    while (s.OUt > 1 && blocks(cb) < 2 * (int64_t)sms && cb * s.OUt * s.NS > 64) {
        s.OUt = conv_ceil_div(s.OUt, 2);
        s.tiles_u = conv_ceil_div(s.OUn, s.OUt);
    }
    const int items = cb * s.OUt * s.NS;
    const int64_t threads = blocks(cb) * items, want = (int64_t)sms * 1024;
    s.KS = 1;
    while (s.KS * 2 <= std::min(s.KU, 32) && threads * s.KS * 2 <= want && items * s.KS * 2 <= DWL_THREADS)
        s.KS *= 2;
    s.ks_log = conv_floor_log2(s.KS);
    s.CB = cb;
    s.cb_log = conv_floor_log2(cb);
    s.cgroups = conv_ceil_div(s.C, s.CB);
    s.IU = (s.OUt - 1) * s.SU + s.KU;
    s.plane = s.IU * s.IVrow;
    s.OVst = s.NS * Q + 1;
    s.outs = s.CB * s.OUt * s.NS * Q;
    const int per_row = s.SV * s.IVlen, rows = s.vertical ? per_row : s.IU;
    const int run = s.vertical ? s.IU : per_row;
    s.by_tiles_v = ConvDivider::of(s.tiles_v);
    s.by_tiles_u = ConvDivider::of(s.tiles_u);
    s.by_cgroups = ConvDivider::of(s.cgroups);
    s.by_per_c = ConvDivider::of(s.OUt * s.NS);
    s.by_ws = ConvDivider::of(s.WS);
    s.by_sv = ConvDivider::of(s.SV);
    s.by_ku = ConvDivider::of(s.KU);
    s.by_run = ConvDivider::of(s.x_nhwc ? run << s.cb_log : run);
    s.by_rows = ConvDivider::of(rows);
    s.by_tile = ConvDivider::of(s.OUt * s.NS * Q);
    s.by_ovt = ConvDivider::of(s.NS * Q);
    s.by_ou = ConvDivider::of(s.OUt);
    *out = s;
    return bytes(s.CB, s.OUt);
}

template <int Q>
struct DwlLaunch {
    template <class TX>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        int sms = 0, most = 0;
        int status = conv_sm_count(&sms);
        if (status == CONV_OK) status = conv_smem_per_block_optin(&most);
        if (status != CONV_OK) return status;
        DwlShape s;
        const size_t smem = dwl_plan(p, Q, sms, most, &s);
        if (smem == 0)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "grouped_direct: the lk_q%d window of one output row (KH=%lld, KW=%lld) takes more "
                                  "shared memory than a block gets", Q, (long long)p->KH, (long long)p->KW);
        const int64_t blocks = p->B * (int64_t)s.cgroups * s.tiles_u * s.tiles_v;
        if (blocks >= (1ll << 31))
            return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: lk_q%d's blocks of this batch pass int range", Q);
        const auto kernel = dwl_kernel<TX, Q>;
        const int opt_in = conv_allow_smem(kernel, smem, "grouped_direct: the lk_* window");
        if (opt_in != CONV_OK) return opt_in;
        const int threads = (int)std::min<int64_t>(DWL_THREADS, (s.KS * s.CB * s.OUt * s.NS + 31) / 32 * 32);
        CONV_LAUNCH_DEPENDENT_BY_WAVE("dwl_kernel", kernel, (unsigned)blocks, threads, smem, stream, s,
                                      static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                                      static_cast<const void*>(t->bias), t->y);
        return CONV_OK;
    }
};

}  // namespace

int dw_undilated_fits(const conv_problem* p, const char* configs, int report) {
    if (p->groups != p->C || p->M != p->C) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: %s: depthwise layers (groups = C = M) only, got C=%lld M=%lld groups=%lld",
                              configs, (long long)p->C, (long long)p->M, (long long)p->groups);
    }
    if (p->dilation_h != 1 || p->dilation_w != 1) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: %s: no dilation, got %lldx%lld", configs,
                              (long long)p->dilation_h, (long long)p->dilation_w);
    }
    return CONV_OK;
}

int dwl_fits(const conv_problem* p, int report) {
    const int status = dw_undilated_fits(p, "the lk_* configurations", report);
    if (status != CONV_OK) return status;
    DwlShape s;
    if (dwl_plan(p, 16, 1, DWL_SMEM_BUDGET, &s) == 0) {  // host arithmetic only: the same answer without a GPU
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the lk_* configurations' window of one output row (KH=%lld, KW=%lld) "
                              "and its filter take more than %d KB of shared memory",
                              (long long)p->KH, (long long)p->KW, DWL_SMEM_BUDGET / 1024);
    }
    return CONV_OK;
}

template <int Q>
int dwl_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    switch (p->x_dtype) {
    case CONV_F16: return DwlLaunch<Q>::template run<__half>(p, t, stream);
    case CONV_BF16: return DwlLaunch<Q>::template run<__nv_bfloat16>(p, t, stream);
    default: return DwlLaunch<Q>::template run<float>(p, t, stream);
    }
}

// grouped_direct's configurations (grouped_direct.cu).
template int dwl_run<8>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dwl_run<16>(const conv_problem*, const conv_tensors*, cudaStream_t);
