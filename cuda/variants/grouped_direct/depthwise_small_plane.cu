// depthwise_small_plane.cu — grouped_direct's kernel for depthwise layers whose planes are small beside
// their filters (UniRepLKNet's and RepLKNet's 13x13 filters on 7x7 planes, 27x27 on 14x14): the "plane"
// configuration. Exact fp32 FFMA on f32, f16 or bf16 x and w; y and bias in any dtype; NCHW or NHWC;
// bias + ReLU; any stride and padding; no dilation.
//
// With padding (K-1)/2, a 13x13 filter meets a 7x7 plane with 49 of its 169 taps at every output; the
// window-staging kernel (depthwise_large.cu) walks a strip's taps against staged zeros, 3.4x the
// multiply-adds, and spent 123 us where cuDNN spent 62 (fp32, batch 32, 768 channels, H200). Here a block
// stages whole planes of x and their filters in shared memory (fp32), and a thread sums one output over
// the taps that meet x only: for output (oh, ow) the filter rows kh with 0 <= oh*SH - PH + kh < H, and the
// columns likewise, with no test inside the loops.
// Taps on padding are skipped where the block's weights are all finite; with an Inf or NaN weight every
// tap runs (x = 0 outside the plane), so that one on padding gives NaN (0 * Inf), as in PyTorch.

#include <algorithm>

#include "conv_shape.cuh"
#include "depthwise_store.cuh"
#include "grouped_direct.h"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int DWP_THREADS = 256;
// A block's planes of x and filters: under the 48 KB a launch gets without opting in.
constexpr int DWP_SMEM_BUDGET = 40 * 1024;
// Channels a block takes in NHWC (x and y rows of 32 consecutive channels: whole sectors), where the grid
// keeps two blocks an SM.
constexpr int DWP_NHWC_PLANES = 32;
// Images a block (and a thread) takes where the batch has them.
constexpr int DWP_IMAGES = 4;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DwpShape {
    int B, C, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
    int PC;       // channels a block (its images: the kernel's NI)
    int cgroups;  // blocks along C
    // shared-memory strides of a channel's filter (taps, odd) and planes (NI planes, 1 mod 32): a warp's
    // threads on 32 channels at one position read 32 banks
    int wstride, cstride;
    int x_nhwc, y_nhwc, y_dtype, relu;
};

// A block takes PC channels of NI images: their filters are staged once for the NI images, and a thread
// sums one output position of one channel for all NI at once (one weight load for NI multiply-adds, NI
// independent sums). Flat indices run channel fastest where the layout is NHWC (whole sectors of x and y),
// position fastest in NCHW.
template <class TX, int NI>
__global__ void __launch_bounds__(DWP_THREADS) dwp_kernel(DwpShape s, const TX* __restrict__ x,
                                                          const TX* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float dwp_smem[];
    const int hw = s.H * s.W, taps = s.KH * s.KW, ohw = s.OH * s.OW;
    const int c0 = (int)(blockIdx.x % (unsigned)s.cgroups) * s.PC, b0 = (int)(blockIdx.x / (unsigned)s.cgroups) * NI;
    const int nc = min(s.PC, s.C - c0), nb = min(NI, s.B - b0);
    float* ws = dwp_smem;                // PC filters of KH x KW
    float* xs = ws + s.PC * s.wstride;   // PC x NI planes of H x W, channel-major
    int nonfinite = 0;
    for (int i = threadIdx.x; i < nc * taps; i += blockDim.x) {
        const int cl = i / taps, k = i - cl * taps;  // depthwise filters (C, 1, KH, KW): MCKK and MKKC alike
        const float v = conv_load(w, (long long)(c0 + cl) * taps + k);
        ws[cl * s.wstride + k] = v;
        nonfinite |= !isfinite(v);
    }
    for (int i = threadIdx.x; i < nc * NI * hw; i += blockDim.x) {
        int cl, bi, q;
        if (s.x_nhwc) {
            cl = i % nc;
            const int r = i / nc;
            bi = r / hw;
            q = r - bi * hw;
        } else {
            q = i % hw;
            const int r = i / hw;
            bi = r / nc;
            cl = r - bi * nc;
        }
        const int b = b0 + bi, c = c0 + cl;
        float v = 0.0f;  // images past B: zeros, never stored
        if (bi < nb) v = conv_load(x, s.x_nhwc ? ((long long)b * hw + q) * s.C + c : ((long long)b * s.C + c) * hw + q);
        xs[cl * s.cstride + bi * hw + q] = v;
    }
    const bool all_taps = __syncthreads_or(nonfinite);
    for (int i = threadIdx.x; i < nc * ohw; i += blockDim.x) {
        int cl, q;
        if (s.y_nhwc) {
            q = i / nc;
            cl = i - q * nc;
        } else {
            cl = i / ohw;
            q = i - cl * ohw;
        }
        const int oh = q / s.OW, ow = q - oh * s.OW;
        const int ih0 = oh * s.SH - s.PH, iw0 = ow * s.SW - s.PW;  // x under tap (0, 0)
        const float* xp = xs + cl * s.cstride;
        const float* wp = ws + cl * s.wstride;
        float acc[NI];
#pragma unroll
        for (int j = 0; j < NI; ++j) acc[j] = 0.0f;
        if (!all_taps) {
            const int kh0 = max(0, -ih0), kh1 = min(s.KH, s.H - ih0);
            const int kw0 = max(0, -iw0), kw1 = min(s.KW, s.W - iw0);
            for (int kh = kh0; kh < kh1; ++kh) {
                const float* xr = xp + (ih0 + kh) * s.W + iw0;
                const float* wr = wp + kh * s.KW;
#pragma unroll 2
                for (int kw = kw0; kw < kw1; ++kw) {
                    const float wv = wr[kw];
#pragma unroll
                    for (int j = 0; j < NI; ++j) acc[j] = fmaf(xr[j * hw + kw], wv, acc[j]);
                }
            }
        } else {
            for (int kh = 0; kh < s.KH; ++kh) {
                const int ih = ih0 + kh;
                const bool row_in = ih >= 0 && ih < s.H;
                for (int kw = 0; kw < s.KW; ++kw) {
                    const int iw = iw0 + kw;
                    const bool in = row_in && iw >= 0 && iw < s.W;
                    const float wv = wp[kh * s.KW + kw];
#pragma unroll
                    for (int j = 0; j < NI; ++j) acc[j] = fmaf(in ? xp[j * hw + ih * s.W + iw] : 0.0f, wv, acc[j]);
                }
            }
        }
        const int c = c0 + cl;
        const float bv = gd_bias_as_float(bias, s.y_dtype, c);
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            if (j >= nb) break;
            const int b = b0 + j;
            const long long at = s.y_nhwc ? ((long long)b * ohw + q) * s.C + c : ((long long)b * s.C + c) * ohw + q;
            gd_store_in_dtype(y, s.y_dtype, at, conv_epilogue_value(acc[j], bv, s.relu));
        }
    }
}

// Images a block takes: four where the batch has them (the filters staged once for four), else one.
int dwp_images(const conv_problem* p) { return p->B >= DWP_IMAGES ? DWP_IMAGES : 1; }

// A channel's filter and planes of `images` images in shared memory, in floats (DwpShape's strides).
int64_t dwp_wstride(const conv_problem* p) { return p->KH * p->KW | 1; }
int64_t dwp_cstride(const conv_problem* p, int images) { return (images * p->H * p->W + 31) / 32 * 32 + 1; }

// Shared memory of PC channels' filters and their planes of NI images.
size_t dwp_bytes(const conv_problem* p, int64_t channels, int images) {
    return (size_t)channels * (size_t)(dwp_wstride(p) + dwp_cstride(p, images)) * sizeof(float);
}

template <class TX, int NI>
void dwp_launch(const conv_tensors* t, DwpShape s, unsigned blocks, int threads, size_t smem, cudaStream_t stream) {
    dwp_kernel<TX, NI><<<blocks, threads, smem, stream>>>(s, static_cast<const TX*>(t->x),
                                                          static_cast<const TX*>(t->w), t->bias, t->y);
}

template <int NI>
int dwp_run_images(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    int sms = 0;
    const int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    const ConvShape32 g = conv_shape32(p);
    DwpShape s;
    s.B = (int)p->B; s.C = g.C; s.H = g.H; s.W = g.W; s.OH = g.OH; s.OW = g.OW; s.KH = g.KH; s.KW = g.KW;
    s.SH = g.stride_h; s.SW = g.stride_w; s.PH = g.pad_h; s.PW = g.pad_w;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    // Channels a block: enough output positions for its threads (NHWC: at least a sector's channels),
    // fewer while they would not fit shared memory or the grid would have fewer than two blocks an SM.
    const int64_t ohw = (int64_t)s.OH * s.OW, image_blocks = (s.B + NI - 1) / NI;
    int64_t pc = std::max<int64_t>(s.x_nhwc || s.y_nhwc ? DWP_NHWC_PLANES : 1, DWP_THREADS / ohw);
    pc = std::min<int64_t>(pc, s.C);
    while (pc > 1 && (dwp_bytes(p, pc, NI) > DWP_SMEM_BUDGET || (s.C + pc - 1) / pc * image_blocks < 2 * (int64_t)sms))
        pc = (pc + 1) / 2;
    s.PC = (int)pc;
    s.cgroups = (int)((s.C + pc - 1) / pc);
    s.wstride = (int)dwp_wstride(p);
    s.cstride = (int)dwp_cstride(p, NI);
    const int64_t blocks = s.cgroups * image_blocks;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: plane's blocks of this batch pass int range");
    const int threads = (int)std::min<int64_t>(DWP_THREADS, (pc * ohw + 31) / 32 * 32);
    const size_t smem = dwp_bytes(p, pc, NI);
    switch (p->x_dtype) {
    case CONV_F16: dwp_launch<__half, NI>(t, s, (unsigned)blocks, threads, smem, stream); break;
    case CONV_BF16: dwp_launch<__nv_bfloat16, NI>(t, s, (unsigned)blocks, threads, smem, stream); break;
    default: dwp_launch<float, NI>(t, s, (unsigned)blocks, threads, smem, stream); break;
    }
    CONV_LAUNCH_CHECK(dwp_kernel);
    return CONV_OK;
}

}  // namespace

int dwp_fits(const conv_problem* p, int report) {
    const int status = dw_undilated_fits(p, "the plane configuration", report);
    if (status != CONV_OK) return status;
    const int images = dwp_images(p);
    if (dwp_bytes(p, 1, images) > DWP_SMEM_BUDGET) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the plane configuration stages whole planes (%d images) and their filter "
                              "in %d KB of shared memory: %d*H*W + KH*KW = %d*%lld + %lld values are too many", images,
                              DWP_SMEM_BUDGET / 1024, images, images, (long long)(p->H * p->W),
                              (long long)(p->KH * p->KW));
    }
    return CONV_OK;
}

double dwp_tap_share(const conv_problem* p) {
    auto along = [](int64_t n, int64_t outs, int64_t k, int64_t stride, int64_t pad) {
        int64_t met = 0;
        for (int64_t o = 0; o < outs; ++o) {
            const int64_t i0 = o * stride - pad;
            met += std::max<int64_t>(0, std::min(k, n - i0) - std::max<int64_t>(0, -i0));
        }
        return (double)met / ((double)outs * (double)k);
    };
    return along(p->H, conv_out_h(p), p->KH, p->stride_h, p->pad_h) *
           along(p->W, conv_out_w(p), p->KW, p->stride_w, p->pad_w);
}

int dwp_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    return dwp_images(p) > 1 ? dwp_run_images<DWP_IMAGES>(p, t, stream) : dwp_run_images<1>(p, t, stream);
}
