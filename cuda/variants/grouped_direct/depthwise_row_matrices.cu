// depthwise_row_matrices.cu — grouped_direct's "rows_mm" configuration: depthwise layers as matrix products a
// row. Output row oh of channel c is
//     y_c[oh][ow][b] = sum over x's rows ih of  sum over iw of  T_kh[iw][ow] * x_c[ih][iw][b],  kh = ih - oh*sh + ph,
// where T_kh (W x OW) is filter row kh laid out as a Toeplitz matrix: T_kh[iw][ow] = w[kh][iw - ow*sw + pw], zero
// where that tap is off the filter. Exact fp32 FFMA on f32 x and w; y and bias in any dtype; NCHW or NHWC; bias +
// ReLU; any stride and padding; no dilation.
//
// What it is for: large filters at a column stride of 2 or more on planes up to 28x28, from batch 16. There `plane`
// (depthwise_small_plane.cu) sums each output alone and `lk_*` stage a window a strip; T folds the stride into its
// layout, so the sums are as regular as at stride 1 (H200, fp32 NCHW, batch 32: MixNet-M's 9x9 at stride 2 on
// 14x14 16.0 us against 21.2 for the best tile; 13x13 at stride 2 on 28x28 63.0 against lk_q8's 123). It was built
// for stride 1 (13x13 on 14x14 and 28x28, 27x27 on 14x14, 29x29 on 28x28), where it lost every layer to `plane`:
// T's zeros along a row (W columns a row for the KW that meet an output) and a grid of 1.2 waves (one block a
// channel of 32 images) cost more than plane's index arithmetic (13x13 on 14x14: 40.9 against 37.0 us; 8 images a
// lane instead of 4: 54, 115 registers, two blocks an SM; bench/results/nvidia-h200/rows-mm.md). f16 / bf16 x have
// faster kernels at stride 2 (implicit_gemm_f16's dw tiles, nhwc_narrow_p2_t128), so only f32 x is built.
//
// A block builds the KH Toeplitz rows once for up to 32 images; the lanes of an output row (a whole warp or half of
// one: one range of filter rows for all of them) each sum 4 outputs x 4 images with one 16-byte read of T and one
// of x per 16 FMAs.
//
// A zero of T times an Inf of x would be NaN where PyTorch's sum never meets that x, and taps on padding are not
// in T (an Inf weight there is NaN in PyTorch): a block whose x or filter holds an Inf or NaN sums each output over
// every tap of the filter instead (x = 0 on padding), as the oracle does.

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

// Images a block at most (T is built once for them); a lane sums 4.
constexpr int DWR_IMAGES = 32;
// Threads a block at most: rows of outputs a pass (a block loops over its plane's rows in passes).
constexpr int DWR_THREADS = 512;
// A block's filter, T and x: opted in past 48 KB (29x29 on 28x28 planes of 16 images: 157 KB, one block an SM).
constexpr int DWR_SMEM_MAX = 200 * 1024;

// Every count < 2^31 (the dispatcher's batch chunks).
struct DwrShape : ConvShape32 {
    int B;
    int P;        // x's positions a plane
    int NB, G;    // images a block (4 G) and their quads: the lanes of an output quad
    int QW;       // output quads a row (ceil(OW / 4)); T's rows hold 4 QW outputs, the last quad's past OW zero
    int RS;       // threads an output row: QW * G rounded up to 16 or to whole warps (a row's lanes share a range)
    int XS;       // x's staged row: the images of a position side by side (NB + 4: 16-byte aligned, banks spread)
    int x_nhwc, y_nhwc, y_dtype, relu;
    // blockIdx.x; x's staged items; T's items (by a matrix, by a row); a row's lanes
    ConvDivider by_C, by_P, by_WT, by_T, by_G;
};

// T's row: a filter row's Toeplitz matrix holds W rows of 4 QW outputs.
__host__ __device__ inline int dwr_ts(const DwrShape& s) { return 4 * s.QW; }

// A block: channel c, images b0 .. b0 + NB - 1, every output row. Shared memory: the filter (KH*KW, rounded to
// 16 bytes), T (KH matrices of W x 4 QW), then x (P rows of XS).
__global__ void __launch_bounds__(DWR_THREADS) dwr_kernel(DwrShape s, const float* __restrict__ x,
                                                          const float* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float4 dwr_smem[];
    const int TS = dwr_ts(s);
    float* ws = reinterpret_cast<float*>(dwr_smem);
    float* ts = ws + (s.KH * s.KW + 3) / 4 * 4;
    float* xs = ts + s.KH * s.W * TS;
    // blockIdx.x: channels fastest (in NHWC, blocks that run together read the same sectors of x)
    uint32_t c_u;
    const int b0 = (int)s.by_C.divmod(blockIdx.x, &c_u) * s.NB, c = (int)c_u;
    const int nb = min(s.NB, s.B - b0);
    const bool finite = gd_stage_channel_planes<float>(s, x, w, s.x_nhwc, c, b0, nb, s.NB, s.XS, s.by_P, ws, xs);
    if (finite) {
        // T_kh[iw][ow] = w[kh][iw - ow * stride_w + pad_w]; outputs fastest (consecutive threads, distinct banks)
        for (int e = threadIdx.x; e < s.KH * s.W * TS; e += blockDim.x) {
            uint32_t rest, ow;
            const int kh = (int)s.by_WT.divmod(e, &rest), iw = (int)s.by_T.divmod(rest, &ow);
            const int kw = iw - (int)ow * s.stride_w + s.pad_w;
            ts[e] = (int)ow < s.OW && kw >= 0 && kw < s.KW ? ws[kh * s.KW + kw] : 0.0f;
        }
        __syncthreads();
    }
    // A lane: output row oh, outputs 4 q .. 4 q + 3, images 4 ib .. 4 ib + 3 (image quads fastest: a quarter-warp's
    // reads of x are contiguous, its reads of T one or two quads of one row of T).
    const int rows = blockDim.x / s.RS, slot = threadIdx.x / s.RS;
    uint32_t ib_u;
    const int q = (int)s.by_G.divmod(threadIdx.x - slot * s.RS, &ib_u), ib = (int)ib_u;
    const bool active = q < s.QW;
    const float bv = gd_bias_as_float(bias, s.y_dtype, c);
    for (int oh = slot; oh < s.OH; oh += rows) {
        float acc[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[r][j] = 0.0f;
        if (active && finite) {
            const int ih0 = oh * s.stride_h - s.pad_h;  // x's row under filter row 0
            const int kh0 = max(0, -ih0), kh1 = min(s.KH, s.H - ih0);
            for (int kh = kh0; kh < kh1; ++kh) {
                const float* tp = ts + kh * s.W * TS + 4 * q;
                const float* xp = xs + (ih0 + kh) * s.W * s.XS + 4 * ib;
#pragma unroll 4
                for (int iw = 0; iw < s.W; ++iw)
                    gd_outer4(acc, *reinterpret_cast<const float4*>(tp + iw * TS),
                              *reinterpret_cast<const float4*>(xp + iw * s.XS));
            }
        } else if (active) {  // every tap, x = 0 on padding (0 * Inf in T would be NaN where no tap is)
#pragma unroll
            for (int r = 0; r < 4; ++r)  // (unrolled: acc stays in registers)
                if (4 * q + r < s.OW) gd_every_tap<4>(acc[r], s, xs + 4 * ib, s.W, s.XS, ws, s.KW, oh, 4 * q + r, true);
        }
        // y from registers: an image's 4 outputs are contiguous in NCHW (the L2 merges a warp's partial sectors)
        if (active)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (4 * ib + j >= nb) break;
                const long long b = b0 + 4 * ib + j;
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int ow = 4 * q + r;
                    if (ow >= s.OW) break;
                    const long long o = (long long)oh * s.OW + ow;
                    const long long at = s.y_nhwc ? (b * s.OH * s.OW + o) * s.C + c : (b * s.C + c) * s.OH * s.OW + o;
                    gd_store_in_dtype(y, s.y_dtype, at, conv_epilogue_value(acc[r][j], bv, s.relu));
                }
            }
    }
}

// Shared memory: the filter (rounded to 16 bytes), T and x's staged rows.
size_t dwr_bytes(const DwrShape& s) {
    return ((size_t)(s.KH * s.KW + 3) / 4 * 4 + (size_t)s.KH * s.W * dwr_ts(s) + (size_t)s.P * s.XS) * sizeof(float);
}

// s with `lanes` lanes an output quad (4 images each).
DwrShape dwr_with_images(DwrShape s, int lanes) {
    s.G = lanes;
    s.NB = 4 * lanes;
    const int row = s.QW * lanes;
    s.RS = row <= 16 ? 16 : (row + 31) / 32 * 32;
    s.XS = s.NB + 4;
    return s;
}

// Sets the images a block takes (G lanes an output quad, NB = 4 G) and what follows from them: the batch's up to
// 32; fewer where they leave less of the row's lanes idle (QW * G rounded up to 16, or to whole warps past 16), or
// where the block's shared memory would pass DWR_SMEM_MAX or a row's lanes DWR_THREADS (29x29 on 28x28 at batch
// 32: 207 KB for 32 images, 157 KB for 16).
void dwr_set_images(DwrShape& s) {
    const int most = (int)std::min<int64_t>(DWR_IMAGES / 4, ((int64_t)s.B + 3) / 4);
    DwrShape best = dwr_with_images(s, most);  // where none fits, dwr_fits refuses it in words
    double best_used = -1.0;
    for (int g = most; g >= 1; --g) {
        const DwrShape t = dwr_with_images(s, g);
        const double used = (double)(s.QW * g) / t.RS;
        const bool fits = dwr_bytes(t) <= (size_t)DWR_SMEM_MAX && t.RS <= DWR_THREADS;
        if (fits && used > best_used + 1e-9) best = t, best_used = used;
    }
    s = best;
}

DwrShape dwr_shape(const conv_problem* p) {
    DwrShape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.B = (int)p->B;
    s.P = s.H * s.W;
    s.QW = (s.OW + 3) / 4;
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    dwr_set_images(s);
    return s;
}

int dwr_launch(const conv_tensors* t, const DwrShape& s, unsigned blocks, int threads, size_t smem,
               cudaStream_t stream) {
    const int opt_in = conv_allow_smem(dwr_kernel, smem, "grouped_direct: rows_mm (a channel's filter rows as "
                                                         "matrices and its planes)");
    if (opt_in != CONV_OK) return opt_in;
    dwr_kernel<<<blocks, threads, smem, stream>>>(s, static_cast<const float*>(t->x), static_cast<const float*>(t->w),
                                                  t->bias, t->y);
    CONV_LAUNCH_CHECK(dwr_kernel);
    return CONV_OK;
}

}  // namespace

int dwr_fits(const conv_problem* p, int report) {
    const int status = dw_undilated_fits(p, "rows_mm", report);
    if (status != CONV_OK) return status;
    if (p->x_dtype != CONV_F32) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: rows_mm takes f32 x only (built where it won: large filters at stride "
                              "2), got x %s", conv_dtype_name(p->x_dtype));
    }
    const DwrShape s = dwr_shape(p);
    const size_t bytes = dwr_bytes(s);
    if (bytes > (size_t)DWR_SMEM_MAX) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: rows_mm holds a channel's filter rows as matrices (KH x W x "
                              "4*ceil(OW/4) values) and %d images' planes in at most %d KB of shared memory: got "
                              "%lldx%lld -> %lldx%lld positions with a %lldx%lld filter, %zu bytes", s.NB,
                              DWR_SMEM_MAX / 1024, (long long)p->H, (long long)p->W, (long long)conv_out_h(p),
                              (long long)conv_out_w(p), (long long)p->KH, (long long)p->KW, bytes);
    }
    if (s.RS > DWR_THREADS) {  // a row's lanes run together, and a block holds at least one row
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: rows_mm takes a row of outputs a pass of one block (at most %d "
                              "threads, 4 outputs a thread): %lld outputs a row are too many", DWR_THREADS,
                              (long long)conv_out_w(p));
    }
    return CONV_OK;
}

int dwr_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    DwrShape s = dwr_shape(p);
    const int64_t image_blocks = (s.B + s.NB - 1) / s.NB, blocks = image_blocks * s.C;
    if (blocks >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: rows_mm's blocks of this batch pass int range");
    s.by_C = ConvDivider::of((uint32_t)s.C);
    s.by_P = ConvDivider::of((uint32_t)s.P);
    s.by_WT = ConvDivider::of((uint32_t)(s.W * dwr_ts(s)));
    s.by_T = ConvDivider::of((uint32_t)dwr_ts(s));
    s.by_G = ConvDivider::of((uint32_t)s.G);
    const int rows = (int)std::max<int64_t>(1, std::min<int64_t>(s.OH, DWR_THREADS / s.RS));
    const int threads = rows * s.RS;
    const size_t smem = dwr_bytes(s);
    return dwr_launch(t, s, (unsigned)blocks, threads, smem, stream);  // f32 x: dwr_fits
}
