// depthwise_small_plane.cu — grouped_direct's kernel for depthwise layers whose planes fit shared memory
// beside their filters (UniRepLKNet's and RepLKNet's 13x13 filters on 7x7 planes, 27x27 on 14x14, up to
// RepLKNet's 31x31 and SLaK's bands on 56x56): the "plane" and "plane_r8" configurations (runs of 4 and 8
// outputs a thread). Exact fp32 FFMA on f32, f16 or bf16 x and w (plane_r8 from batch 4: f16 / bf16); y and
// bias in any dtype; NCHW or NHWC; bias + ReLU; any stride and padding; no dilation.
//
// With padding (K-1)/2, a 13x13 filter meets a 7x7 plane with 49 of its 169 taps at every output; the
// window-staging kernel (depthwise_large.cu) walks a strip's taps against staged zeros, 3.4x the
// multiply-adds, and spent 123 us where cuDNN spent 62 (fp32, batch 32, 768 channels, H200). Here a block
// stages whole planes of x (fp32, the images of a position side by side) and their filters in shared memory,
// and a thread sums R consecutive outputs of one row for NI images over the filter rows that meet x.
// Along a row it walks x's columns that meet any of its R outputs: each column is one load of NI images'
// values and one new weight, for R x NI multiply-adds; the R weights a column needs slide along the filter
// row in registers (stride 1: output r's tap is the next output's one step later). Filter rows are stored
// with R-1 zeros on each side, so that an output whose window ends before (or starts after) the column
// multiplies a zero weight. That is exact only where x and w are finite (0 * Inf = NaN): a block with an
// Inf or NaN in its planes or filters, or at column stride 2 or more, sums each output on its own over the
// taps that meet x (every tap where a weight is not finite, so that one on padding gives NaN, as in
// PyTorch).
//
// Where channels and images alone give a small grid (a batch-1 layer of 128 large planes), a block takes a
// band of a plane's output rows and stages only the rows of x the band meets (H200, batch 1, fp16: SLaK's
// 5x51 on 56x56 with plane_r8 22.3 us, against 36.0 for the best kernel before).

#include <algorithm>

#include "conv_shape.cuh"
#include "depthwise_every_tap.cuh"
#include "depthwise_stage.cuh"
#include "depthwise_store.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "int_divider.cuh"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int DWP_THREADS = 256;
// A block's planes of x and filters where it takes several channels: under the 48 KB a launch gets without
// opting in, so that small planes keep several blocks an SM.
constexpr int DWP_SMEM_BUDGET = 40 * 1024;
// One channel's planes and filter may take more (opted in): RepLKNet's 31x31 and SLaK's 51x5 on 56x56 planes
// take 55 KB for 4 images in fp32, four blocks an SM (as DWL_SMEM_BUDGET, depthwise_large.cu).
constexpr int DWP_SMEM_MAX = 110 * 1024;
// Channels a block takes in NHWC (x and y rows of 32 consecutive channels: whole sectors), where the grid
// keeps two blocks an SM.
constexpr int DWP_NHWC_PLANES = 32;
// Images a block (and a thread) takes where the batch has them.
constexpr int DWP_IMAGES = 4;
// Output rows a band of a plane has at least, where a plane is split over blocks (a band stages its rows and
// the filter's KH-1 more).
constexpr int DWP_MIN_BAND_ROWS = 8;

// Outputs of a row a thread sums (R, the kernel's run): the configuration's 4 ("plane") or 8 ("plane_r8")
// for 4 images (16 or 32 sums; 8 reads less shared memory an FMA, for R-1 more columns a row of zero-weight
// FMAs). For one image (batches of 1-3) plane sums one output a thread, since small planes have few outputs
// and a thread's serial work is their time (H200, batch 1, 13x13 on 7x7: fp32 5.5 us at 1, 7.0 at 2; fp16
// NHWC 6.6 at 1, 8.4 at 2), and plane_r8 runs of 8 (large planes: a weight and an x value read for 8 FMAs,
// where one output a thread reads both for each).
int dwp_run_for(int images, int run) { return images == 1 && run <= 4 ? 1 : run; }
// The longest run built for fp32 x: 8 won on no layer of the large_kernel suite in fp32 NCHW, some in fp16 /
// bf16 NHWC (H200, batch 32: 31x31 on 56x56 750 against 797 us, 5x51 329 against 378).
constexpr int DWP_FP32_RUN = 4;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DwpShape : ConvShape32 {
    int B;
    int PC;    // channels a block (its images: the kernel's NI)
    int runs;  // runs of R outputs in an output row
    // a block's band of output rows: BR rows (bands of them a plane: blocks along the rows, where channels
    // and images alone would leave SMs idle), from at most SR staged rows of x
    int BR, SR;
    // shared memory, in floats: a staged row (Wp positions, W | 1, of NI images: a warp's threads on
    // consecutive rows read distinct banks), a channel's planes (H rows; odd in NI-float units, so that a
    // warp's threads on 32 channels at one position read distinct banks), a filter row (R-1 zeros, KW taps,
    // R-1 zeros) and a channel's filter (KH rows; odd)
    int Wp, cstride, wrow, wstride;
    int rows_fastest;  // a channel's runs of outputs numbered down the columns, else along the rows
    int x_nhwc, y_nhwc, y_dtype, relu;
    // blockIdx.x split into channel group, group of images and band; flat indices split
    ConvDivider by_cgroups, by_iblocks, by_srw, by_w, by_pc, by_br, by_runs, by_wrow, by_wstride;
};

// x's NI images at one staged position.
template <int NI>
__device__ __forceinline__ void dwp_images_at(const float* at, float (&v)[NI]) {
    if constexpr (NI == 4) {
        const float4 q = *reinterpret_cast<const float4*>(at);
        v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    } else {
#pragma unroll
        for (int i = 0; i < NI; ++i) v[i] = at[i];
    }
}

// Column J of a group of R: the new weight into slot J, x's images, R x NI multiply-adds (output r's weight
// is the one that came in r columns ago).
template <int NI, int R, int J>
__device__ __forceinline__ void dwp_column(float (&acc)[R][NI], float (&wv)[R], const float* xr, const float* wr,
                                           int t) {
    wv[J] = wr[t + J];
    float xv[NI];
    dwp_images_at<NI>(xr + (t + J) * NI, xv);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < NI; ++i) acc[r][i] = fmaf(xv[i], wv[(J - r + R) % R], acc[r][i]);
}

template <int NI, int R, int J = 0>
__device__ __forceinline__ void dwp_columns(float (&acc)[R][NI], float (&wv)[R], const float* xr, const float* wr,
                                            int t, int n) {
    if constexpr (J < R) {
        if (n >= R || J < n) dwp_column<NI, R, J>(acc, wv, xr, wr, t);  // n >= R: a whole group
        dwp_columns<NI, R, J + 1>(acc, wv, xr, wr, t, n);
    }
}

// One filter row against one row of x, n >= 1 columns: xr at the first column, wr at output 0's tap for
// it (output r's is wr[-r]; the row's zeros keep every index in it).
template <int NI, int R>
__device__ __forceinline__ void dwp_row(float (&acc)[R][NI], const float* xr, const float* wr, int n) {
    float wv[R];
#pragma unroll
    for (int j = 1; j < R; ++j) wv[R - j] = wr[-j];  // slot (-j mod R): the tap j columns before the first
    if constexpr (R == 1) {
#pragma unroll 4
        for (int t = 0; t < n; ++t) dwp_columns<NI, R>(acc, wv, xr, wr, t, R);
    } else {
        int t = 0;
        for (; t + R <= n; t += R) dwp_columns<NI, R>(acc, wv, xr, wr, t, R);
        if (t < n) dwp_columns<NI, R>(acc, wv, xr, wr, t, n - t);
    }
}

// A block takes PC channels of NI images: their filters are staged once for the NI images, and a thread
// sums a run of R outputs of one channel for all NI at once. Flat indices run channel fastest where the
// layout is NHWC (whole sectors of x and y), position fastest in NCHW; a channel's runs of outputs along
// the rows, or down the columns where s.rows_fastest (dwp_rows_fastest).
template <class TX, int NI, int R>
__global__ void __launch_bounds__(DWP_THREADS) dwp_kernel(DwpShape s, const TX* __restrict__ x,
                                                          const TX* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float4 dwp_smem[];
    const int hw = s.H * s.W, taps = s.KH * s.KW, ohw = s.OH * s.OW, items = s.BR * s.runs;
    // blockIdx.x: channel group fastest, then group of images, then band (split by multiplication: a
    // division's ~20 instructions showed on 7x7 planes at batch 1, where a thread sums one output)
    uint32_t cg, ib;
    const int band = (int)s.by_iblocks.divmod(s.by_cgroups.divmod(blockIdx.x, &cg), &ib);
    const int c0 = (int)cg * s.PC, b0 = (int)ib * NI;
    const int nc = min(s.PC, s.C - c0), nb = min(NI, s.B - b0);
    // the band's output rows [oh0, oh1) and the rows of x they meet, [r0, r1): at most SR
    const int oh0 = band * s.BR, oh1 = min(s.OH, oh0 + s.BR);
    const int r0 = max(0, oh0 * s.stride_h - s.pad_h), r1 = min(s.H, (oh1 - 1) * s.stride_h - s.pad_h + s.KH);
    float* xs = reinterpret_cast<float*>(dwp_smem);  // PC channels of SR rows of Wp positions x NI images
    float* ws = xs + s.PC * s.cstride;               // PC filters of KH rows of wrow
    // The filters, rows of R-1 zeros, KW taps, R-1 zeros (depthwise (C, 1, KH, KW): MCKK and MKKC alike).
    // x: PC channels x NI images x SR*W positions from row r0, channel fastest in NHWC, position fastest in
    // NCHW; channels past C and rows past r1 are neither loaded nor stored, images past B are zeros (never
    // stored to y). Batches 1-3 (NI = 1: one wave of blocks, every block staging at once, none computing)
    // stage both in one pass, one memory latency a block instead of two, indices from xs; larger batches in
    // two (one pass cost them 1-3%; H200, bench/results/nvidia-h200/large_kernel-programmatic-launch.md,
    // large_kernel-plane-onepass-b1.md).
    constexpr bool ONE_PASS = NI == 1;
    const int w_at = ONE_PASS ? (int)(ws - xs) : 0;
    bool w_bad = false, x_bad = false;
    auto load_w = [&](int i, int& at) {
        uint32_t j, col;
        const int cl = (int)s.by_wstride.divmod(i, &j);
        const int kh = (int)s.by_wrow.divmod(j, &col), kw = (int)col - (R - 1);
        at = w_at + i;
        return kh < s.KH && kw >= 0 && kw < s.KW ? w[(long long)(c0 + cl) * taps + kh * s.KW + kw] : TX{};
    };
    const int q0 = r0 * s.W;  // x's position at the staged rows' start
    // batches 1-3 (NI = 1): value by value, in one pass with the filters
    auto load_x = [&](int i, int& at) {
        uint32_t a, ql;
        int bi;
        if (s.x_nhwc) {
            bi = (int)s.by_srw.divmod(s.by_pc.divmod(i, &a), &ql);
        } else {
            bi = (int)s.by_pc.divmod(s.by_srw.divmod(i, &ql), &a);
        }
        const int cl = (int)a;
        uint32_t iw;
        const int rl = (int)s.by_w.divmod(ql, &iw);  // the staged row, x's row r0 + rl
        if (cl >= nc || r0 + rl >= r1) return TX{};
        at = cl * s.cstride + (rl * s.Wp + (int)iw) * NI + bi;
        if (bi >= nb) return TX{};
        const int b = b0 + bi, c = c0 + cl, q = q0 + (int)ql;
        return x[s.x_nhwc ? ((long long)b * hw + q) * s.C + c : ((long long)b * s.C + c) * hw + q];
    };
    grid_wait_prior();  // launched as a dependent of the stream's previous kernel (grid_dependency.cuh)
    if constexpr (ONE_PASS) {
        gd_stage<TX>(nc * s.wstride, s.PC * NI * s.SR * s.W, xs, w_bad, x_bad, load_w, load_x);
    } else {
        // A position's four images at once (gd_stage4): item j, channel fastest in NHWC, position fastest in NCHW.
        static_assert(NI == 4, "plane stages x four images at a time from batch 4");
        gd_stage<TX>(nc * s.wstride, ws, w_bad, load_w);
        const long long image_step = (long long)s.C * hw;
        gd_stage4<TX>(s.PC * s.SR * s.W, xs, x_bad, [&](int j, int& at, TX (&v)[4]) {
            uint32_t a, ql, iw;
            if (s.x_nhwc) ql = s.by_pc.divmod(j, &a);
            else a = s.by_srw.divmod(j, &ql);
            const int cl = (int)a, rl = (int)s.by_w.divmod(ql, &iw);
            if (cl >= nc || r0 + rl >= r1) return;
            at = cl * s.cstride + (rl * s.Wp + (int)iw) * NI;
            const int c = c0 + cl, q = q0 + (int)ql;
            const TX* xp = x + (s.x_nhwc ? ((long long)b0 * hw + q) * s.C + c : b0 * image_step + (long long)c * hw + q);
            gd_load4(v, xp, image_step, 0, nb);
        });
    }
    // finite: every tap may run against zero weights (the runs); else each output alone, on the taps that
    // meet x where the weights are finite, all of them where one is not
    const bool w_finite = !__syncthreads_or(w_bad);
    const bool all_finite = !__syncthreads_or(x_bad) && w_finite;
    grid_launch_dependents();  // inputs read: the next kernel may launch while this one sums and stores
    for (int i = threadIdx.x; i < nc * items; i += blockDim.x) {
        int cl, it;
        if (s.y_nhwc) {
            it = i / nc;
            cl = i - it * nc;
        } else {
            cl = i / items;
            it = i - cl * items;
        }
        uint32_t r;
        int oh, ow0;
        if (s.rows_fastest) {
            ow0 = (int)s.by_br.divmod(it, &r) * R;
            oh = oh0 + (int)r;
        } else {
            oh = oh0 + (int)s.by_runs.divmod(it, &r);
            ow0 = (int)r * R;
        }
        if (oh >= oh1) continue;  // the last band's rows past OH
        // where x's row 0 would be staged: the sums index x's rows as they are, the band's offset is paid once
        // here (offsetting each row's address inside the loops cost 2-6% at batch 32)
        const float* xp = xs + cl * s.cstride - r0 * s.Wp * NI;
        const float* wp = ws + cl * s.wstride + (R - 1);  // tap (0, 0)
        float acc[R][NI];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int j = 0; j < NI; ++j) acc[r][j] = 0.0f;
        if (all_finite && s.stride_w == 1) {
            const int ih0 = oh * s.stride_h - s.pad_h;
            const int kh0 = max(0, -ih0), kh1 = min(s.KH, s.H - ih0);
            // x's columns that meet one of the run's outputs, and output 0's tap for the first
            const int iw0 = max(0, ow0 - s.pad_w), iw1 = min(s.W, ow0 + R - 1 - s.pad_w + s.KW);
            if (iw1 > iw0)
                for (int kh = kh0; kh < kh1; ++kh)
                    dwp_row<NI, R>(acc, xp + ((ih0 + kh) * s.Wp + iw0) * NI, wp + kh * s.wrow + iw0 - ow0 + s.pad_w,
                                   iw1 - iw0);
        } else {
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (ow0 + r < s.OW) gd_every_tap<NI>(acc[r], s, xp, s.Wp, NI, wp, s.wrow, oh, ow0 + r, !w_finite);
        }
        const int c = c0 + cl;
        const float bv = gd_bias_as_float(bias, s.y_dtype, c);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int q = oh * s.OW + ow0 + r;
            if (ow0 + r >= s.OW) break;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                if (j >= nb) break;
                const int b = b0 + j;
                const long long at = s.y_nhwc ? ((long long)b * ohw + q) * s.C + c : ((long long)b * s.C + c) * ohw + q;
                gd_store_in_dtype(y, s.y_dtype, at, conv_epilogue_value(acc[r][j], bv, s.relu));
            }
        }
    }
}

// Images a block takes: four where the batch has them (the filters staged once for four), else one.
int dwp_images(const conv_problem* p) { return p->B >= DWP_IMAGES ? DWP_IMAGES : 1; }

// Shared memory, in floats (DwpShape), for `images` images and runs of `run` outputs: a staged row, a
// channel's planes, a filter row with its zeros, a channel's filter.
int64_t dwp_row_positions(const conv_problem* p) { return p->W | 1; }
int64_t dwp_cstride(const conv_problem* p, int images, int64_t rows) {
    return images * (rows * dwp_row_positions(p) | 1);
}
int64_t dwp_wrow(const conv_problem* p, int run) { return p->KW + 2 * (run - 1); }
int64_t dwp_wstride(const conv_problem* p, int run) { return p->KH * dwp_wrow(p, run) | 1; }

// Shared memory of PC channels' filters and their planes of NI images, runs of R.
size_t dwp_bytes(const conv_problem* p, int64_t channels, int images, int run, int64_t rows) {
    return (size_t)channels * (size_t)(dwp_cstride(p, images, rows) + dwp_wstride(p, run)) * sizeof(float);
}

// Whether a channel's runs of R outputs are numbered down the columns. Along a row, a warp's threads read x
// R*NI floats apart (4-way conflicts of the 16-byte reads at R = 4: 31x31 on 56x56 spent 1108 us with shared
// memory 95% busy and FMA 38%), unless every run walks the same columns (a filter as wide as the plane: the
// reads are broadcasts); down the columns they read rows Wp*NI floats apart, distinct banks, but their
// filter rows start apart near the top and bottom edges and their y stores are a row apart. Down the columns
// where a row has 24 outputs or more, filters of 64 taps or more and the runs' columns differ (H200, fp32
// batch 32: 31x31 on 56x56 1108 -> 694 us, 51x5 606 -> 388, 29x29 on 28x28 329 -> 300, 13x13 on 28x28
// 93 -> 82; along the rows: 13x13 on 14x14 39 against 43, 5x49 on 28x28 86 against 98, 1x11 on 56x56 23
// against 35).
bool dwp_rows_fastest(const DwpShape& s, int R) {
    const bool same_columns = (s.runs - 1) * R <= s.pad_w && R - 1 - s.pad_w + s.KW >= s.W;
    return R > 1 && s.stride_w == 1 && s.OW >= 24 && s.KH * s.KW >= 64 && !same_columns;
}

template <class TX, int NI, int R>
int dwp_launch(const conv_tensors* t, DwpShape s, unsigned blocks, int threads, size_t smem, cudaStream_t stream) {
    const auto kernel = dwp_kernel<TX, NI, R>;
    const int opt_in = conv_allow_smem(kernel, smem, "grouped_direct: plane (a channel's planes and its filter)");
    if (opt_in != CONV_OK) return opt_in;
    CONV_LAUNCH_DEPENDENT_BY_WAVE("dwp_kernel", kernel, blocks, threads, smem, stream, s, static_cast<const TX*>(t->x),
                                  static_cast<const TX*>(t->w), static_cast<const void*>(t->bias), t->y);
    return CONV_OK;
}

template <int NI, int R>
int dwp_run_images(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    int sms = 0;
    const int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    DwpShape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.B = (int)p->B;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    // Channels a block: enough runs of outputs for its threads (NHWC: at least a sector's channels), fewer
    // while they would not fit shared memory or the grid would have fewer than two blocks an SM.
    s.runs = (s.OW + R - 1) / R;
    const int64_t items = (int64_t)s.OH * s.runs, image_blocks = (s.B + NI - 1) / NI;
    int64_t pc = std::max<int64_t>(s.x_nhwc || s.y_nhwc ? DWP_NHWC_PLANES : 1, DWP_THREADS / items);
    pc = std::min<int64_t>(pc, s.C);
    while (pc > 1 &&
           (dwp_bytes(p, pc, NI, R, s.H) > DWP_SMEM_BUDGET || (s.C + pc - 1) / pc * image_blocks < 2 * (int64_t)sms))
        pc = (pc + 1) / 2;
    s.PC = (int)pc;
    const int64_t cgroups = (s.C + pc - 1) / pc;
    // Bands of output rows where channels and images give fewer than two blocks an SM (one channel of one
    // image a block, RepLKNet's 128 planes at batch 1), of at least DWP_MIN_BAND_ROWS rows.
    int64_t bands = 1;
    while (cgroups * image_blocks * bands < 2 * (int64_t)sms && (s.OH + bands) / (bands + 1) >= DWP_MIN_BAND_ROWS)
        ++bands;
    s.BR = (int)((s.OH + bands - 1) / bands);
    bands = (s.OH + s.BR - 1) / s.BR;  // the last band may have fewer rows; none is empty
    s.SR = std::min(s.H, (s.BR - 1) * s.stride_h + s.KH);
    s.Wp = (int)dwp_row_positions(p);
    s.cstride = (int)dwp_cstride(p, NI, s.SR);
    s.wrow = (int)dwp_wrow(p, R);
    s.wstride = (int)dwp_wstride(p, R);
    s.by_cgroups = ConvDivider::of((uint32_t)cgroups);
    s.by_iblocks = ConvDivider::of((uint32_t)image_blocks);
    s.by_srw = ConvDivider::of((uint32_t)(s.SR * s.W));
    s.by_w = ConvDivider::of((uint32_t)s.W);
    s.by_pc = ConvDivider::of((uint32_t)s.PC);
    s.by_br = ConvDivider::of((uint32_t)s.BR);
    s.by_runs = ConvDivider::of((uint32_t)s.runs);
    s.rows_fastest = dwp_rows_fastest(s, R);
    s.by_wrow = ConvDivider::of((uint32_t)s.wrow);
    s.by_wstride = ConvDivider::of((uint32_t)s.wstride);
    const int64_t blocks = cgroups * image_blocks * bands;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: plane's blocks of this batch pass int range");
    const int threads = (int)std::min<int64_t>(DWP_THREADS, (pc * s.BR * s.runs + 31) / 32 * 32);
    const size_t smem = dwp_bytes(p, pc, NI, R, s.SR);  // past 48 KB: one channel of a large plane (<= DWP_SMEM_MAX)
    switch (p->x_dtype) {
    case CONV_F16: return dwp_launch<__half, NI, R>(t, s, (unsigned)blocks, threads, smem, stream);
    case CONV_BF16: return dwp_launch<__nv_bfloat16, NI, R>(t, s, (unsigned)blocks, threads, smem, stream);
    default:
        if constexpr (NI > 1 && R > DWP_FP32_RUN)  // dwp_fits refused it
            return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: plane_r%d takes f16 / bf16 x only", R);
        else
            return dwp_launch<float, NI, R>(t, s, (unsigned)blocks, threads, smem, stream);
    }
}

}  // namespace

int dwp_fits(const conv_problem* p, int run, int report) {
    const int status = dw_undilated_fits(p, "the plane configurations", report);
    if (status != CONV_OK) return status;
    const int images = dwp_images(p);
    if (run > DWP_FP32_RUN && images > 1 && p->x_dtype == CONV_F32) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: plane_r%d takes f16 / bf16 x only from batch 4 (built where its runs "
                              "won), got x %s; plane takes every dtype", run, conv_dtype_name(p->x_dtype));
    }
    const int r = dwp_run_for(images, run);
    if (dwp_bytes(p, 1, images, r, p->H) > DWP_SMEM_MAX) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the plane configuration stages whole planes (%d images, rows of %lld "
                              "positions) and their filter (rows of %lld: taps and zeros) in %d KB of shared memory: "
                              "%d*H*%lld + KH*%lld = %d*%lld + %lld values are too many", images,
                              (long long)dwp_row_positions(p), (long long)dwp_wrow(p, r), DWP_SMEM_MAX / 1024, images,
                              (long long)dwp_row_positions(p), (long long)dwp_wrow(p, r), images,
                              (long long)(p->H * dwp_row_positions(p)), (long long)(p->KH * dwp_wrow(p, r)));
    }
    return CONV_OK;
}

int dwp_run(const conv_problem* p, const conv_tensors* t, int run, cudaStream_t stream) {
    if (dwp_images(p) == 1) return run > 4 ? dwp_run_images<1, 8>(p, t, stream) : dwp_run_images<1, 1>(p, t, stream);
    return run > 4 ? dwp_run_images<DWP_IMAGES, 8>(p, t, stream) : dwp_run_images<DWP_IMAGES, 4>(p, t, stream);
}
