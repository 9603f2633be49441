// depthwise_plane_matrix.cu — grouped_direct's "plane_mm" configuration: depthwise layers on planes of at most
// 64 positions (the 7x7 planes of RepLKNet's and UniRepLKNet's last stages, 8x8, 4x16) as one small matrix
// product per channel: y_c[o][b] = sum over x's positions i of A_c[i][o] * x_c[i][b], where A_c[i][o] is the
// filter's tap that puts x's position i under output o (zero where none does). Exact fp32 FFMA on f32, f16 or
// bf16 x and w; y and bias in any dtype; NCHW or NHWC; bias + ReLU; any stride and padding; no dilation.
//
// Why a matrix: `plane` (depthwise_small_plane.cu) stages a channel's filter once for every 4 images and walks
// filter rows with the index arithmetic of each run; on 7x7 planes under 13x13 filters that staging and
// arithmetic were most of its instructions (H200, fp32 batch 32: 20-26 us against a floor of a few). Here a
// block builds A_c once for up to 32 images (every tap of it met, on a plane the filter covers), and a thread
// sums 4 outputs x 4 images with one 16-byte read of A and one of x per 16 FMAs.
//
// A zero of A times an Inf of x would be NaN where PyTorch's sum never meets that x, and taps on padding are
// not in A at all (an Inf weight there gives NaN in PyTorch): a block whose x or filter holds an Inf or NaN
// sums each output over every tap of the filter instead (x = 0 on padding), as the oracle does.

#include <algorithm>

#include "conv_shape.cuh"
#include "depthwise_every_tap.cuh"
#include "depthwise_matrix.cuh"
#include "depthwise_store.cuh"
#include "grouped_direct.h"
#include "int_divider.cuh"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

// x's and y's positions a plane (A holds one row of y's positions per x position).
constexpr int DWM_MAX_POSITIONS = 64;
// The filter's taps a block stages (63 x 63): with A and x of 64 positions, under the 48 KB a launch gets.
constexpr int DWM_MAX_TAPS = 63 * 63;
// Images a block: the batch's, up to 32 (A is built once for them); a thread sums 4 of them.
constexpr int DWM_IMAGES = 32;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DwmShape : ConvShape32 {
    int B;
    int P, OP;    // x's and y's positions a plane
    int AS;       // A's row: y's positions rounded up to 4 (16-byte reads of 4 outputs: a thread's quad)
    int NB, XS;   // images a block (a multiple of 4) and x's staged row of them (NB + 4: 16-byte aligned)
    int YS;       // y's staged row (an image's outputs; odd)
    int x_nhwc, y_nhwc, y_dtype, relu;
    ConvDivider by_C, by_P, by_OP, by_AS, by_OW;  // blockIdx.x and flat indices split
};

// A block: channel c, images b0 .. b0 + NB - 1. Shared memory: the filter (KH*KW), A (P rows of AS), then x
// (P rows of XS: position-major, the images of a position side by side), whose space y's staged rows reuse.
template <class TX>
__global__ void __launch_bounds__(128) dwm_kernel(DwmShape s, const TX* __restrict__ x, const TX* __restrict__ w,
                                                  const void* __restrict__ bias, void* __restrict__ y) {
    extern __shared__ float4 dwm_smem[];
    float* ws = reinterpret_cast<float*>(dwm_smem);
    float* as = ws + (s.KH * s.KW + 3) / 4 * 4;
    float* xs = as + s.P * s.AS;
    // blockIdx.x: channels fastest (in NHWC, blocks that run together read the same sectors of x)
    uint32_t c_u;
    const int b0 = (int)s.by_C.divmod(blockIdx.x, &c_u) * s.NB, c = (int)c_u;
    const int nb = min(s.NB, s.B - b0);
    const bool finite = gd_stage_channel_planes<TX>(s, x, w, s.x_nhwc, c, b0, nb, s.NB, s.XS, s.by_P, ws, xs);
    if (finite) {
        // A[i][o]: the tap that puts x's position i under output o; a thread takes one output (o fastest across
        // the block: distinct banks) and an x row at a time, walking its columns.
        for (int e = threadIdx.x; e < s.H * s.AS; e += blockDim.x) {
            uint32_t o;
            const int ih = (int)s.by_AS.divmod(e, &o);
            uint32_t ow;
            const int oh = (int)s.by_OW.divmod(o, &ow);
            // the tap of (ih, iw) under output (oh, ow) is (kh, kw0 + iw)
            const int kh = ih - oh * s.stride_h + s.pad_h, kw0 = -(int)ow * s.stride_w + s.pad_w;
            const bool row = (int)o < s.OP && kh >= 0 && kh < s.KH;
            float* a = as + ih * s.W * s.AS + o;
            for (int iw = 0; iw < s.W; ++iw) {
                const int kw = kw0 + iw;
                a[iw * s.AS] = row && kw >= 0 && kw < s.KW ? ws[kh * s.KW + kw] : 0.0f;
            }
        }
        __syncthreads();
    }
    // A thread: outputs 4 * quad .. + 3 for images 4 * ib .. + 3 (images fastest across a warp: one 16-byte
    // read of x per lane, distinct banks; the read of A a broadcast to the lanes of a quad).
    const int groups = s.NB / 4, t = threadIdx.x;
    const bool active = t < s.AS / 4 * groups;
    const int quad = t / groups, ib = t - quad * groups;
    float acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[r][j] = 0.0f;
    if (active && finite) {
        const float* a = as + 4 * quad;
        const float* xv = xs + 4 * ib;
#pragma unroll 4
        for (int i = 0; i < s.P; ++i) {
            gd_outer4(acc, *reinterpret_cast<const float4*>(a + i * s.AS),
                      *reinterpret_cast<const float4*>(xv + i * s.XS));
        }
    } else if (active) {  // every tap, x = 0 on padding (0 * Inf in A would be NaN where no tap is)
        for (int r = 0; r < 4 && 4 * quad + r < s.OP; ++r) {
            const int o = 4 * quad + r, oh = o / s.OW;
            gd_every_tap<4>(acc[r], s, xs + 4 * ib, s.W, s.XS, ws, s.KW, oh, o - oh * s.OW, true);
        }
    }
    // y through shared memory (an image's outputs in a row of YS, over x's space), then stored with
    // consecutive threads on consecutive positions (NCHW: an image's plane is contiguous).
    __syncthreads();
    float* ys = xs;
    if (active)
#pragma unroll
        for (int r = 0; r < 4; ++r)
            if (4 * quad + r < s.OP)  // the last quad's outputs past y's: a row of YS holds only y's
#pragma unroll
                for (int j = 0; j < 4; ++j) ys[(4 * ib + j) * s.YS + 4 * quad + r] = acc[r][j];
    __syncthreads();
    const float bv = gd_bias_as_float(bias, s.y_dtype, c);
    for (int i = threadIdx.x; i < nb * s.OP; i += blockDim.x) {
        uint32_t o;
        const int bl = (int)s.by_OP.divmod(i, &o);
        const long long b = b0 + bl;
        const long long at = s.y_nhwc ? (b * s.OP + o) * s.C + c : (b * s.C + c) * s.OP + o;
        gd_store_in_dtype(y, s.y_dtype, at, conv_epilogue_value(ys[bl * s.YS + o], bv, s.relu));
    }
}

DwmShape dwm_shape(const conv_problem* p) {
    DwmShape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.B = (int)p->B;
    s.P = s.H * s.W;
    s.OP = s.OH * s.OW;
    s.AS = (s.OP + 3) / 4 * 4;
    s.NB = std::min(DWM_IMAGES, (s.B + 3) / 4 * 4);
    s.XS = s.NB + 4;
    s.YS = s.OP | 1;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    return s;
}

// Shared memory: the filter (rounded to 16 bytes), A, and x's staged rows or y's, whichever is larger.
size_t dwm_bytes(const DwmShape& s) {
    const size_t xy = std::max<size_t>((size_t)s.P * s.XS, (size_t)s.NB * s.YS);
    return ((size_t)(s.KH * s.KW + 3) / 4 * 4 + (size_t)s.P * s.AS + xy) * sizeof(float);
}

template <class TX>
int dwm_launch(const conv_tensors* t, const DwmShape& s, unsigned blocks, int threads, size_t smem,
               cudaStream_t stream) {
    // A plain launch: as a programmatic dependent (grid_dependency.cuh) it lost up to 24% on most of the batch-32
    // layers it runs and 2-4% over them, fp32 and fp16 (H200, bench/results/nvidia-h200/
    // large_kernel-programmatic-launch.md, large_kernel-plane-matrix-plain-launch.md).
    dwm_kernel<TX><<<blocks, threads, smem, stream>>>(s, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                                                      t->bias, t->y);
    CONV_LAUNCH_CHECK(dwm_kernel);
    return CONV_OK;
}

}  // namespace

int dwm_fits(const conv_problem* p, int report) {
    const int status = dw_undilated_fits(p, "plane_mm", report);
    if (status != CONV_OK) return status;
    const int64_t in = p->H * p->W, out = conv_out_h(p) * conv_out_w(p);
    if (in > DWM_MAX_POSITIONS || out > DWM_MAX_POSITIONS || p->KH * p->KW > DWM_MAX_TAPS) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: plane_mm holds a channel's plane as a matrix: planes of at most %d "
                              "positions in and out and filters of at most 63x63 taps, got %lldx%lld -> %lldx%lld "
                              "positions, a %lldx%lld filter", DWM_MAX_POSITIONS, (long long)p->H, (long long)p->W,
                              (long long)conv_out_h(p), (long long)conv_out_w(p), (long long)p->KH, (long long)p->KW);
    }
    return CONV_OK;
}

int dwm_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    DwmShape s = dwm_shape(p);
    const int64_t image_blocks = (s.B + s.NB - 1) / s.NB, blocks = image_blocks * s.C;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: plane_mm's blocks of this batch pass int range");
    s.by_C = ConvDivider::of((uint32_t)s.C);
    s.by_P = ConvDivider::of((uint32_t)s.P);
    s.by_OP = ConvDivider::of((uint32_t)s.OP);
    s.by_AS = ConvDivider::of((uint32_t)s.AS);
    s.by_OW = ConvDivider::of((uint32_t)s.OW);
    const int threads = (s.AS / 4 * (s.NB / 4) + 31) / 32 * 32;  // <= 16 quads x 8 image groups = 128
    const size_t smem = dwm_bytes(s);                           // <= 41 KB: no opt-in
    switch (p->x_dtype) {
    case CONV_F16: return dwm_launch<__half>(t, s, (unsigned)blocks, threads, smem, stream);
    case CONV_BF16: return dwm_launch<__nv_bfloat16>(t, s, (unsigned)blocks, threads, smem, stream);
    default: return dwm_launch<float>(t, s, (unsigned)blocks, threads, smem, stream);
    }
}
