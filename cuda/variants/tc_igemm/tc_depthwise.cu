// tc_depthwise.cu — implicit_gemm_f16's depthwise configurations ("dw*"): a depthwise layer (groups ==
// C == M) as small GEMMs on fp16 / bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation).
//   For one channel, output row oh, columns ow0 .. ow0+7, and filter row kh:
//     y[oh, ow0 + n] += sum_k x[oh*S_h + kh*D_h, ow0*S_w + k] * T_kh[k][n],   T_kh[k][n] = w[kh, kw] where
//     k = n*S_w + kw*D_w (0 elsewhere),
//   a banded (Toeplitz) 16 x 8 matrix per filter row (32 x 8, two k-steps, where a row of 8 outputs reads
//   more than 16 input columns: stride 2, or wide dilated filters). The 16 rows of the mma's A are 16
//   output rows of the channel, so one mma applies a filter row to 16 x 8 outputs, and one channel's
//   K x K filter is K mmas per 128 outputs: compute is a few percent of the tensor cores' rate, and the
//   layer stays bound by moving x and y, which the grouped_direct kernels (fp32 FFMA, 2*K*K flops per
//   output) are not at 5x5 and 7x7.
//   A block computes a tile of 16*MT output rows x 8*NT columns for CB channels of one image:
//   1. stages the tile's input window with its halo for its CB channels in shared memory as
//      [channel][row][column] in the operand dtype (zeros on padding and past the image), from NHWC x by
//      16-byte loads of neighbouring channels where C and x allow (else element by element) or from
//      NCHW x along rows; f32 x rounded to fp16 here; and its channels' taps;
//   2. the warps take the channels in turn: per filter row, the B fragment built from the staged taps
//      (each lane's 4 (k, n) positions fixed per launch), per 16 x 8 output tile an ldmatrix.x4 of A
//      (rows at stride S_h from the staged window: any row stride and dilation cost nothing) and an
//      mma; then bias, ReLU and the conversion to y's dtype, staged in shared memory beside the window
//      (one channel's accumulators live at a time);
//   3. after a barrier, NHWC y is written as 16-byte runs of channels, NCHW y along rows.
//   Non-finite inputs: the zeros of T multiply every input column of the 16 (32) an output row's mma
//   reads, so an Inf or NaN input makes NaN of all outputs of its channel whose 8-column group reads it,
//   not only of those whose window holds it (as the packed-group GEMM tiles do with their block-diagonal
//   filters). Non-finite weights meet exactly the inputs a direct sum multiplies them by.
#include "tc_depthwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_operand16.cuh"
#include "tensor_io.cuh"

namespace {

// Output tile columns padded by this many in the y staging, so that the fragments' writes (8 rows x 4
// column pairs a warp) fall in distinct banks.
constexpr int TDW_Y_PAD = 8;
// Input columns an mma's A reads per k-step, and the most k-steps (a row of 8 outputs reading up to 32
// input columns: 3x3 and 5x5 at stride 2 take two).
constexpr int TDW_KSTEP_COLS = 16;
constexpr int TDW_MAX_KSTEPS = 2;

// x (B, H, W, C) or (B, C, H, W), w (C, KH, KW) (MCKK and MKKC coincide at one channel per group), y
// (B, OH, OW, C) or (B, C, OH, OW); every count < 2^31 (the dispatcher's batch chunks).
struct tdw_shape : ConvShape32 {
    int tiles_w, tiles_h;     // output tiles across and down a plane
    int in_rows, in_cols;     // the tile's input window (rows, columns read from x)
    int row_stride;           // staged elements per window row: the columns the mmas read, an odd number of
                              // 16-byte chunks (an ldmatrix's 8 rows then fall in distinct banks at stride 1)
    int plane_stride;         // staged elements per channel: in_rows * row_stride
    int y_offset, taps_offset;  // elements of TY / of the operand dtype from the start of shared memory
    int x_nhwc, y_nhwc;
    int x_vec, y_vec;         // 16-byte accesses to NHWC x / y: C a multiple of the vector, operand aligned
    int relu;
};

// Input columns a row of 8 outputs reads, and the k-steps of 16 that cover them.
static inline int64_t tdw_window_cols(const conv_problem* p) { return 7 * p->stride_w + (p->KW - 1) * p->dilation_w + 1; }
static inline int tdw_ksteps(const conv_problem* p) {
    return (int)((tdw_window_cols(p) + TDW_KSTEP_COLS - 1) / TDW_KSTEP_COLS);
}

// y staging per channel: TH rows of TW + TDW_Y_PAD, plus 2 elements so that consecutive channel vectors
// of the NHWC store (16 bytes of channels apart) start 32 bytes apart in the banks.
__host__ __device__ constexpr int tdw_y_plane(int TH, int TW) { return TH * (TW + TDW_Y_PAD) + 2; }

// Where channel cl (of the block) starts in the staged window: cl planes in, plus a shift that puts the
// channel vectors a warp's NHWC staging writes together (NVX vectors of VX channels of the same pixels,
// see tdw_stage_x) in different banks: 32 / NVX elements per vector (16 or 8: whole 16-byte chunks,
// as ldmatrix needs), none where a vector is all the block's channels or they are too many to shift.
template <int CB, class TX>
struct TdwPlanes {
    static constexpr int VX = 16 / sizeof(TX), NVX = CB / VX;
    static constexpr int SHIFT = NVX >= 2 && NVX <= 4 ? 32 / NVX : 0;
    static constexpr int SLACK = SHIFT * (NVX - 1);  // elements past CB planes
    static __host__ __device__ __forceinline__ int base(int cl, int plane_stride) {
        return cl * plane_stride + (cl / VX) * SHIFT;
    }
};

// A thread's share of an (outer, row, column) space, column fastest, STEP elements apart from `first`:
// the quotients are taken once, each step is two additions and carries, and the count of steps is known
// up front, so that an unrolled loop issues several steps' loads together.
template <int STEP>
struct TdwWalk {
    int j, r, a, dj, dr;
    __device__ __forceinline__ TdwWalk(int first, int cols, int rows) {
        j = first % cols;
        const int q = first / cols;
        r = q % rows;
        a = q / rows;
        dj = STEP % cols;
        dr = STEP / cols;
    }
    __device__ __forceinline__ void next(int cols, int rows) {
        j += dj;
        r += dr;
        if (j >= cols) { j -= cols; ++r; }
        while (r >= rows) { r -= rows; ++a; }
    }
    // Steps from `first` over `total` elements.
    static __device__ __forceinline__ int steps(int first, int total) {
        return total > first ? (total - first + STEP - 1) / STEP : 0;
    }
};

// Stages the window (rows from ih0, columns from iw0) of channels [c0, c0 + CB) as [channel][row][column]
// (TdwPlanes), zeros outside the image, past in_cols and past C; loads are at clamped addresses with the
// value zeroed afterwards, so that none waits behind a branch. NHWC: a thread takes one vector of VX
// channels of a pixel, the vectors of a pixel in neighbouring lanes (a warp reads whole 32-byte
// sectors), then the columns; NCHW: one channel of a pixel, the columns fastest (coalesced rows).
template <int CB, int THREADS, class TO, class TX>
__device__ __forceinline__ void tdw_stage_x(const tdw_shape& s, const TX* __restrict__ x, int b, int c0, int ih0,
                                            int iw0, TO* s_x) {
    using Planes = TdwPlanes<CB, TX>;
    constexpr int VX = Planes::VX, NVX = Planes::NVX;
    static_assert(CB % VX == 0 && THREADS % NVX == 0, "whole vectors of channels per block and per step");
    if (s.x_nhwc) {
        const int v = threadIdx.x % NVX, c = c0 + v * VX;
        TO* xv = s_x + Planes::base(v * VX, s.plane_stride);
        TdwWalk<THREADS / NVX> it(threadIdx.x / NVX, s.row_stride, s.in_rows);
        const int n = it.steps(threadIdx.x / NVX, s.in_rows * s.row_stride);
#pragma unroll 4
        for (int k = 0; k < n; ++k, it.next(s.row_stride, s.in_rows)) {
            const int ih = ih0 + it.r, iw = iw0 + it.j;
            const bool in = it.j < s.in_cols && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W && c < s.C;
            const TX* px = x + (in ? ((b * s.H + ih) * s.W + iw) * s.C + c : 0);
            TX vals[VX];
            if (s.x_vec) {  // C % VX == 0: the vector is whole where its first channel is in
                const uint4 q = __ldg(reinterpret_cast<const uint4*>(px));
                memcpy(vals, &q, 16);
#pragma unroll
                for (int i = 0; i < VX; ++i) vals[i] = in ? vals[i] : mma16_zero<TX>();
            } else {
#pragma unroll
                for (int i = 0; i < VX; ++i) {
                    const bool ok = in && c + i < s.C;
                    const TX e = conv_ldg(px + (ok ? i : 0));
                    vals[i] = ok ? e : mma16_zero<TX>();
                }
            }
            TO* dst = xv + it.r * s.row_stride + it.j;
#pragma unroll
            for (int i = 0; i < VX; ++i) dst[i * s.plane_stride] = mma16_operand<TO>(vals[i]);
        }
        return;
    }
    TdwWalk<THREADS> it(threadIdx.x, s.row_stride, s.in_rows);
    const int n = it.steps(threadIdx.x, CB * s.in_rows * s.row_stride);
#pragma unroll 4
    for (int k = 0; k < n; ++k, it.next(s.row_stride, s.in_rows)) {
        const int ih = ih0 + it.r, iw = iw0 + it.j, c = c0 + it.a;
        const bool in = it.j < s.in_cols && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W && c < s.C;
        const TX v = conv_ldg(x + (in ? ((b * s.C + c) * s.H + ih) * s.W + iw : 0));
        s_x[Planes::base(it.a, s.plane_stride) + it.r * s.row_stride + it.j] = in ? mma16_operand<TO>(v) : mma16_zero<TO>();
    }
}

// The B fragment of filter row kh, k-step ks, from the channel's staged taps: this lane's four (k, n)
// positions hold tap kw[i] of the row (-1: a zero of the band).
template <class TO>
__device__ __forceinline__ void tdw_b_fragment(const TO* taps, const int (&kw)[4], uint32_t& b0, uint32_t& b1) {
    uint32_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = mma16_bits(taps[kw[i] < 0 ? 0 : kw[i]]);
        h[i] = kw[i] < 0 ? 0u : v;
    }
    b0 = h[0] | (h[1] << 16);
    b1 = h[2] | (h[3] << 16);
}

// Writes the staged tile (s_y: [channel][row][column + pad]) to y: NHWC as VY channels per 16-byte store
// (element by element where C or y do not allow), NCHW along rows.
template <int TH, int TW, int CB, int THREADS, class TY>
__device__ __forceinline__ void tdw_store_y(const tdw_shape& s, TY* __restrict__ y, int b, int c0, int oh0, int ow0,
                                            const TY* s_y) {
    constexpr int YROW = TW + TDW_Y_PAD, YPLANE = tdw_y_plane(TH, TW);
    if (s.y_nhwc) {
        constexpr int VY = 16 / sizeof(TY), NV = CB / VY;
        static_assert(CB % VY == 0, "whole vectors of channels per block");
        for (int e = threadIdx.x; e < TH * TW * NV; e += THREADS) {
            const int v = e % NV, pix = e / NV, row = pix / TW, col = pix % TW;
            const int oh = oh0 + row, ow = ow0 + col, c = c0 + v * VY;
            if (oh >= s.OH || ow >= s.OW || c >= s.C) continue;
            TY vals[VY];
#pragma unroll
            for (int i = 0; i < VY; ++i) vals[i] = s_y[(v * VY + i) * YPLANE + row * YROW + col];
            TY* py = y + ((b * s.OH + oh) * s.OW + ow) * s.C + c;
            if (s.y_vec) {
                uint4 q;
                memcpy(&q, vals, 16);
                *reinterpret_cast<uint4*>(py) = q;
            } else {
#pragma unroll
                for (int i = 0; i < VY; ++i)
                    if (c + i < s.C) py[i] = vals[i];
            }
        }
        return;
    }
    for (int e = threadIdx.x; e < CB * TH * TW; e += THREADS) {
        const int col = e % TW, rest = e / TW, row = rest % TH, cl = rest / TH;
        const int oh = oh0 + row, ow = ow0 + col, c = c0 + cl;
        if (oh >= s.OH || ow >= s.OW || c >= s.C) continue;
        y[((b * s.C + c) * s.OH + oh) * s.OW + ow] = s_y[cl * YPLANE + row * YROW + col];
    }
}

// One block = 16*MT output rows x 8*NT columns x CB channels of one image (blockIdx.x: the tile and
// image, blockIdx.y: the channels), WARPS warps taking its channels in turn; KS k-steps of 16 input
// columns per 8 outputs.
template <int MT, int NT, int CB, int WARPS, int KS, class TO, class TX, class TY>
__global__ void __launch_bounds__(32 * WARPS) tc_dw_kernel(tdw_shape s, const TX* __restrict__ x,
                                                           const TX* __restrict__ w, const TY* __restrict__ bias,
                                                           TY* __restrict__ y) {
    constexpr int TH = 16 * MT, TW = 8 * NT, THREADS = 32 * WARPS;
    static_assert(CB % WARPS == 0, "whole channels per warp");
    extern __shared__ uint4 tdw_smem[];
    TO* s_x = reinterpret_cast<TO*>(tdw_smem);
    TO* s_taps = s_x + s.taps_offset;
    TY* s_y = reinterpret_cast<TY*>(tdw_smem) + s.y_offset;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int tile = blockIdx.x, tw = tile % s.tiles_w, th = (tile / s.tiles_w) % s.tiles_h;
    const int b = tile / (s.tiles_w * s.tiles_h), c0 = blockIdx.y * CB;
    const int oh0 = th * TH, ow0 = tw * TW;
    const int KK = s.KH * s.KW;

    // This lane's B positions: k = 16 ks + {2t, 2t+1, 2t+8, 2t+9} of column n = g hold tap (k - n S_w) / D_w
    // where that is a whole tap of the row.
    int kw[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int k = TDW_KSTEP_COLS * ks + 2 * (lane % 4) + (i & 1) + (i >> 1) * 8;
            const int d = k - (lane / 4) * s.stride_w;
            const int tap = d >= 0 && d % s.dil_w == 0 ? d / s.dil_w : -1;
            kw[ks][i] = tap < s.KW ? tap : -1;
        }

    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    for (int e = threadIdx.x; e < CB * KK; e += THREADS) {  // channel c0 + e / KK, tap e % KK
        const bool in = c0 + e / KK < s.C;
        const TX v = conv_ldg(w + (in ? c0 * KK + e : 0));
        s_taps[e] = in ? mma16_operand<TO>(v) : mma16_zero<TO>();
    }
    tdw_stage_x<CB, THREADS>(s, x, b, c0, oh0 * s.stride_h - s.pad_h, ow0 * s.stride_w - s.pad_w, s_x);
    __syncthreads();

    // ldmatrix.x4 rows: lanes 0-15 give rows 0-15 at columns +0, lanes 16-31 the same rows at +8.
    const int a_row = lane % 16, a_col = (lane / 16) * 8;
    constexpr int YROW = TW + TDW_Y_PAD;
    const int g = lane / 4, t2 = 2 * (lane % 4);
#pragma unroll 1
    for (int cl = warp; cl < CB; cl += WARPS) {  // each channel's outputs staged before the next
    const int c = c0 + cl;
    const TO* xc = s_x + TdwPlanes<CB, TX>::base(cl, s.plane_stride);
    float acc[MT][NT][4];
    mma_zero(acc);
    for (int kh = 0; kh < s.KH; ++kh) {
        uint32_t b0[KS], b1[KS];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) tdw_b_fragment(s_taps + cl * KK + kh * s.KW, kw[ks], b0[ks], b1[ks]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            const TO* xr = xc + ((mt * 16 + a_row) * s.stride_h + kh * s.dil_h) * s.row_stride + a_col;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    uint32_t a[4];
                    ldmatrix_x4(a, xr + nt * 8 * s.stride_w + ks * TDW_KSTEP_COLS);
                    mma16_m16n8k16<TO>(acc[mt][nt], a, b0[ks], b1[ks]);
                }
        }
    }

    const float bv = bias && c < s.C ? conv_load(bias, c) : 0.0f;
    TY* yc = s_y + cl * tdw_y_plane(TH, TW);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the 16 x 8 tile
                const float* d = acc[mt][nt] + 2 * h;
                mma16_store_pair(yc + (mt * 16 + g + 8 * h) * YROW + nt * 8 + t2, conv_epilogue_value(d[0], bv, s.relu),
                               conv_epilogue_value(d[1], bv, s.relu));
            }
    }
    grid_launch_dependents();  // x, w and bias are read
    __syncthreads();
    tdw_store_y<TH, TW, CB, THREADS>(s, y, b, c0, oh0, ow0, s_y);
}

// Shared memory of a launch (the window, the y staging, the taps): fills s's window and offset fields
// and returns the bytes.
template <int MT, int NT, int CB, class TX>
static size_t tdw_layout(const conv_problem* p, size_t y_elem, tdw_shape& s) {
    constexpr int TH = 16 * MT, TW = 8 * NT;
    s.in_rows = (int)((TH - 1) * p->stride_h + (p->KH - 1) * p->dilation_h + 1);
    s.in_cols = (int)((TW - 1) * p->stride_w + (p->KW - 1) * p->dilation_w + 1);
    const int read = (int)((NT - 1) * 8 * p->stride_w) + tdw_ksteps(p) * TDW_KSTEP_COLS;
    int chunks = (read + 7) / 8;
    if (chunks % 2 == 0) ++chunks;
    s.row_stride = 8 * chunks;
    s.plane_stride = s.in_rows * s.row_stride;
    const size_t window = ((size_t)CB * s.plane_stride + TdwPlanes<CB, TX>::SLACK) * 2;
    const size_t staged_y = (size_t)CB * tdw_y_plane(TH, TW) * y_elem;
    s.y_offset = (int)(window / y_elem);  // the window is whole 16-byte chunks
    const size_t taps = (window + staged_y + 15) / 16 * 16;
    s.taps_offset = (int)(taps / 2);
    return taps + (size_t)CB * p->KH * p->KW * 2;
}

template <int MT, int NT, int CB, int WARPS>
struct TdwLaunch {
    template <class TO, class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        tdw_shape s;
        static_cast<ConvShape32&>(s) = conv_shape32(p);
        const size_t smem = tdw_layout<MT, NT, CB, TX>(p, sizeof(TY), s);
        s.tiles_w = conv_ceil_div(s.OW, 8 * NT);
        s.tiles_h = conv_ceil_div(s.OH, 16 * MT);
        s.x_nhwc = p->x_layout == CONV_NHWC;
        s.y_nhwc = p->y_layout == CONV_NHWC;
        s.x_vec = s.x_nhwc && s.C % (16 / (int)sizeof(TX)) == 0 && (uintptr_t)t->x % 16 == 0;
        s.y_vec = s.y_nhwc && s.C % (16 / (int)sizeof(TY)) == 0 && (uintptr_t)t->y % 16 == 0;
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        const auto kernel = tdw_ksteps(p) == 1 ? tc_dw_kernel<MT, NT, CB, WARPS, 1, TO, TX, TY>
                                               : tc_dw_kernel<MT, NT, CB, WARPS, 2, TO, TX, TY>;
        const int opt_in = conv_allow_smem(kernel, smem, "implicit_gemm_f16: the depthwise tile");
        if (opt_in != CONV_OK) return opt_in;
        const dim3 grid((unsigned)(p->B * s.tiles_h * s.tiles_w), (unsigned)conv_ceil_div(s.C, CB));
        CONV_LAUNCH_DEPENDENT("tc_dw_kernel", kernel, grid, 32 * WARPS, smem, stream, s,
                              static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                              static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
        return CONV_OK;
    }
};

}  // namespace

template <int MT, int NT, int CB, int WARPS>
int tc_dw_supports(const conv_problem* p) {
    if (p->groups != p->C || p->M != p->C)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the dw configurations run depthwise layers (groups == C == M); "
                              "this one has groups=%lld, C=%lld, M=%lld", (long long)p->groups, (long long)p->C,
                              (long long)p->M);
    if (p->y_dtype != p->x_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the dw configurations write y in x's dtype (x %s, y %s)",
                              conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    if (tdw_ksteps(p) > TDW_MAX_KSTEPS)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the dw configurations read at most %d input columns per 8 "
                              "outputs; KW=%lld at stride_w=%lld, dilation_w=%lld reads %lld",
                              TDW_MAX_KSTEPS * TDW_KSTEP_COLS, (long long)p->KW, (long long)p->stride_w,
                              (long long)p->dilation_w, (long long)tdw_window_cols(p));
    tdw_shape s;
    const size_t y_elem = conv_dtype_size(p->y_dtype);
    const size_t bytes = p->x_dtype == CONV_F32 ? tdw_layout<MT, NT, CB, float>(p, y_elem, s)
                                                : tdw_layout<MT, NT, CB, __half>(p, y_elem, s);
    int most = 0;
    const int status = conv_smem_per_block_optin(&most);
    if (status != CONV_OK) return status;
    if (bytes > (size_t)most)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: this dw tile's input window (%d rows x %d columns x %d channels: "
                              "KH=%lld, stride_h=%lld, dilation_h=%lld) needs %zu bytes of shared memory, the "
                              "GPU gives a block %d", s.in_rows, s.row_stride, CB, (long long)p->KH,
                              (long long)p->stride_h, (long long)p->dilation_h, bytes, most);
    if ((p->B * ((conv_out_h(p) + 16 * MT - 1) / (16 * MT)) * ((conv_out_w(p) + 8 * NT - 1) / (8 * NT))) >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "implicit_gemm_f16: the dw tiles of this batch pass gridDim.x");
    if ((p->C + CB - 1) / CB > 65535)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: C=%lld channels in blocks of %d pass gridDim.y", (long long)p->C, CB);
    return CONV_OK;
}

template <int MT, int NT, int CB, int WARPS>
int tc_dw_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    using L = TdwLaunch<MT, NT, CB, WARPS>;
    const cudaStream_t s = conv_stream(stream);
    switch (p->x_dtype) {
    case CONV_F16: return L::template run<__half, __half, __half>(p, t, s);
    case CONV_BF16: return L::template run<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>(p, t, s);
    default: return L::template run<__half, float, float>(p, t, s);  // f32 rounded to fp16
    }
}

// The configurations TcVariant lists (tc_igemm_host.cuh).
#define TDW_CONFIG(MT, NT, CB, WARPS)                                                                           \
    template int tc_dw_supports<MT, NT, CB, WARPS>(const conv_problem*);                                        \
    template int tc_dw_run<MT, NT, CB, WARPS>(const conv_problem*, const conv_tensors*, void*, size_t, void*);
TDW_CONFIG(2, 4, 16, 16)
TDW_CONFIG(1, 2, 32, 8)
