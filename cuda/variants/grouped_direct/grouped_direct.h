// grouped_direct.h — what grouped_direct.cu (the variant: tiled kernels for any grouped layer) shares
// with its depthwise kernels, depthwise_nhwc.cu (channels contiguous), depthwise_nchw.cu and
// depthwise_nchw_tiled.cu (planes contiguous): their eligibility tests and launch configurations, which the variant's
// configuration table lists beside its own.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "conv_internal.h"

// Largest KH * KW of the NHWC depthwise kernel: its block's staged weights (KH*KW taps x 128 channels
// plus 4 of padding, fp32) must fit the 48 KB of shared memory a launch gets without opting in.
#define DW_NHWC_MAX_TAPS 93

// CONV_OK if the NHWC depthwise kernel takes the problem: x and y NHWC, one input channel and one map
// per group (groups == C == M), C a multiple of 4, x and y of one dtype, KH*KW <= DW_NHWC_MAX_TAPS;
// else CONV_ERR_UNSUPPORTED, naming the reason where `report` (silent otherwise: a default choice asks).
// Operand alignment is checked at run time.
int dw_nhwc_fits(const conv_problem* p, int report);

// 1 if the operands are aligned to 4 elements (16 bytes in fp32, 8 in fp16 and bf16: the wide
// configurations' narrowest vectors; the narrow ones need less but take the same test); a configuration
// falls back to the tiled kernel where they are not.
int dw_nhwc_aligned(const conv_problem* p, const conv_tensors* t);

// Runs it on a problem it fits (dw_nhwc_fits and dw_nhwc_aligned): a thread computes PR x PT output
// pixels (rows x neighbouring columns) for a vector of neighbouring channels, THREADS per block.
// Wide (NARROW false), for grids of several waves: 16-byte vectors (4 fp32 channels; 8 f16 / bf16 where
// C % 8 == 0 and x, y are 16-byte aligned, else 4). Narrow: 4-byte vectors (1 fp32 channel, 2 f16 /
// bf16), so that the grid has 4x the threads (small grids, batch 1), or so that a tall tile's taps fit
// registers (large f16 / bf16 grids). MINB: blocks an SM its registers must allow (__launch_bounds__).
template <int PR, int PT, int THREADS, bool NARROW, int MINB>
int dw_nhwc_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// The dtypes a configuration is built for, each a dozen kernels (two vector widths, six filters): the
// wide (16-byte) ones fp32 only, the untuned choice for fp32 NHWC layers (the tuner picked the narrow
// ones for every f16 / bf16 suite layer); the narrow ones f16 / bf16, and fp32 too in the one-pixel
// tile, the untuned choice for small fp32 grids.
template <int PR, int PT, bool NARROW>
constexpr bool dw_nhwc_takes_f32 = !NARROW || (PR == 1 && PT == 1);
template <bool NARROW>
constexpr bool dw_nhwc_takes_half = NARROW;

// CONV_OK if the configuration is built for the problem's dtype; else CONV_ERR_UNSUPPORTED saying which.
template <int PR, int PT, bool NARROW>
int dw_nhwc_dtype_fits(const conv_problem* p) {
    const bool f32 = p->x_dtype == CONV_F32;
    if (f32 ? dw_nhwc_takes_f32<PR, PT, NARROW> : dw_nhwc_takes_half<NARROW>) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "grouped_direct: the %s NHWC depthwise configurations take %s only, got %s (%s)",
                          NARROW ? "narrow" : "wide", f32 ? "f16 and bf16" : "fp32", conv_dtype_name(p->x_dtype),
                          f32 ? "nhwc_narrow_p1_t128 and the wide nhwc_* take fp32" : "the narrow nhwc_narrow_* take f16 / bf16");
}

// CONV_OK if the NCHW depthwise kernel takes the problem: x and y NCHW, one input channel per group
// (C == groups, any number of maps per group), any dtypes; else CONV_ERR_UNSUPPORTED, naming the
// reason where `report`.
int dw_nchw_fits(const conv_problem* p, int report);

// Runs it on a problem it fits: a thread computes PR output rows of one column of one plane.
template <int PR>
int dw_nchw_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// Runs the register-blocked NCHW depthwise kernel (depthwise_nchw_tiled.cu) on a problem dw_nchw_fits
// takes: TH x TW output tiles, 4 x 4 outputs a thread; filters without a kernel of their own there and
// mixed dtypes take dw_nchw_run<4>.
template <int TH, int TW>
int dwt_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// 1 if dwt_run has a kernel of its own for the problem's filter and dtypes (else it takes dw_nchw_run<4>).
int dwt_unrolled(const conv_problem* p);

// CONV_OK if the problem is depthwise (groups == C == M) without dilation, what the large-filter kernels
// take; else CONV_ERR_UNSUPPORTED, naming `configs` and the reason where `report`.
int dw_undilated_fits(const conv_problem* p, const char* configs, int report);

// CONV_OK if the large-filter depthwise kernel (depthwise_large.cu) takes the problem: depthwise
// (groups == C == M), no dilation, a filter whose one-row window fits a block's shared memory; any stride,
// layouts and dtypes. Else CONV_ERR_UNSUPPORTED, naming the reason where `report`.
int dwl_fits(const conv_problem* p, int report);

// Runs it: a thread computes Q consecutive outputs along the filter's longer side from a circular window of
// Q staged inputs (the "lk_q*" configurations).
template <int Q>
int dwl_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// CONV_OK if the small-plane depthwise kernel (depthwise_small_plane.cu) takes the problem with runs of
// `run` outputs a thread (4: "plane", 8: "plane_r8", which needs batch 4 or more): depthwise
// (groups == C == M), no dilation, one channel's planes (of 4 images from batch 4, else 1) and its filter
// within a block's shared memory (110 KB of fp32); any stride, padding, layouts and dtypes. Else
// CONV_ERR_UNSUPPORTED, naming the reason where `report`.
int dwp_fits(const conv_problem* p, int run, int report);

// Runs it: a block stages whole planes and their filters, a thread sums a run of `run` outputs of one row
// for 4 images (one output, one image below batch 4) over the columns that meet x.
int dwp_run(const conv_problem* p, const conv_tensors* t, int run, cudaStream_t stream);

// CONV_OK if the plane-matrix depthwise kernel (depthwise_plane_matrix.cu, "plane_mm") takes the problem:
// depthwise (groups == C == M), no dilation, planes of at most 64 positions in and out, filters of at most
// 63x63; any stride, padding, layouts and dtypes. Else CONV_ERR_UNSUPPORTED, naming the reason where `report`.
int dwm_fits(const conv_problem* p, int report);

// Runs it: a block builds a channel's plane-to-plane matrix of filter taps once for up to 32 images, and a
// thread sums 4 outputs x 4 images as a small matrix product.
int dwm_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// CONV_OK if the row-matrix depthwise kernel (depthwise_row_matrices.cu, "rows_mm") takes the problem: depthwise
// (groups == C == M), no dilation, a channel's filter rows as Toeplitz matrices (KH x W x 4*ceil(OW/4) values)
// and the planes of up to 32 images within 200 KB of shared memory; f32 x and w, y in any dtype; any stride,
// padding and layouts.
// Else CONV_ERR_UNSUPPORTED, naming the reason where `report`.
int dwr_fits(const conv_problem* p, int report);

// Runs it: a block builds a channel's filter rows as matrices once for up to 32 images, and a lane sums 4 outputs
// of a row x 4 images as small matrix products over x's rows.
int dwr_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream);

// CONV_OK if the row-taps depthwise kernel (depthwise_row_taps.cu) takes the problem: depthwise (groups == C ==
// M), no dilation, f32 x, filters exactly 13 taps wide ("taps13", any_width 0) or 9 or more ("taps", any_width 1),
// any height, column stride 1, a band of x's rows within 48 KB of shared memory; y in any dtype, any layouts, row
// stride and padding. Else CONV_ERR_UNSUPPORTED, naming the reason where `report`.
int drt_fits(const conv_problem* p, int any_width, int report);

// Runs it: a block stages a band of x's rows with their padding and its channels' filters, a thread sums 4
// consecutive outputs of a row, each filter row's taps and x 16 bytes at a time in registers (taps13: a row's 13
// taps and 16 values of x at once).
int drt_run(const conv_problem* p, int any_width, const conv_tensors* t, cudaStream_t stream);

// The filters every kernel family of grouped_direct unrolls, chosen in one place: At<K, S>::kernel for
// square 3x3 and 5x5 filters at strides 1 and 2 and 7x7 at stride 1, dilation 1; At<0, 0>::kernel (the
// generic kernel, run-time filter loops) for every other shape.
template <template <int, int> class At>
static inline std::remove_const_t<decltype(At<0, 0>::kernel)> gd_kernel_for_filter(const conv_problem* p) {
    const bool square = p->KH == p->KW && p->stride_h == p->stride_w && p->dilation_h == 1 && p->dilation_w == 1;
    const int64_t k = p->KH, st = p->stride_h;
    if (square && st == 1 && k == 3) return At<3, 1>::kernel;
    if (square && st == 2 && k == 3) return At<3, 2>::kernel;
    if (square && st == 1 && k == 5) return At<5, 1>::kernel;
    if (square && st == 2 && k == 5) return At<5, 2>::kernel;
    if (square && st == 1 && k == 7) return At<7, 1>::kernel;
    return At<0, 0>::kernel;
}

// The same for a kernel family over dtypes TX (x, w) and TY (y, bias): the unrolled filters only where
// the two are one dtype (the only ones built unrolled), else the generic kernel.
template <template <int, int> class At, class TX, class TY>
static inline auto gd_kernel_for(const conv_problem* p) {
    if constexpr (std::is_same<TX, TY>::value) return gd_kernel_for_filter<At>(p);
    return At<0, 0>::kernel;
}
