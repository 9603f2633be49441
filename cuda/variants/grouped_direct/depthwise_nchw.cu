// depthwise_nchw.cu — grouped_direct's kernel for depthwise layers stored NCHW (one input channel per
// group, any channel multiplier: map m reads channel m / (M/groups)), exact fp32 FFMA on f32, f16 or
// bf16 data, bias + ReLU fused into the store.
//   dw_nchw_kernel<K, S, PR, THREADS, TX, TY>: the tiled kernel (grouped_direct.cu) gives a block one
//     output tile of one plane and stages its input window in shared memory; on the late layers of a
//     MobileNet (7x7 and 14x14 planes, hundreds of channels) most of a tile is empty and each block
//     pays a fill and a barrier for a few dozen outputs; at stride 2 its shared reads conflict. Here
//     nothing is staged: threads run over (image, map, band of PR output rows, output column), column
//     fastest, so that a warp covers whole rows of neighbouring planes and its loads are one run
//     (stride 1) or two interleaved ones (stride 2) of the input, served by L1 and L2. A thread computes
//     PR rows of one column: as in direct_regblock, each input column segment ((PR-1)*S + K values)
//     is loaded once per filter column (addresses clamped into the plane and the value zeroed on
//     padding, so that the loads issue together) and feeds K*PR FMAs.
//     K, S > 0: K x K filter, stride S, dilation 1, all unrolled (3x3 and 5x5 at strides 1 and 2, 7x7
//     at stride 1; same dtype in and out).
//     K = S = 0: any KH x KW, stride and dilation (every other shape and the mixed-dtype pairs).
// A tap on padding meets a zero and still its weight: an Inf or NaN weight there gives NaN, as in
// PyTorch.

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "tensor_io.cuh"

namespace {

// x is (B, C, H, W), w is (M, 1, KH, KW) (MCKK and MKKC coincide with one channel per group), y is
// (B, M, OH, OW); every count < 2^31 (the dispatcher's batch chunks).
struct dw_nchw_shape : ConvShape32 {
    int Mg;       // maps per channel (the channel multiplier)
    int bands;    // bands of PR output rows per plane: ceil(OH / PR)
    int items;    // B * M * bands * OW <= y's element count
    int relu;
};

// x at (row ih, column iw) of a plane (xp: its start), zero on padding; the load itself always
// happens, at a clamped address inside the plane, so that no load waits behind a branch. Row and column
// are clamped apart, so that a thread computes each row's offset once for all the columns it reads.
template <class TX>
__device__ __forceinline__ float dw_plane_input(const TX* xp, int ih, int iw, const dw_nchw_shape& s) {
    const bool row_ok = (unsigned)ih < (unsigned)s.H, col_ok = (unsigned)iw < (unsigned)s.W;
    const float v = conv_load(xp, (row_ok ? ih : 0) * s.W + (col_ok ? iw : 0));
    return row_ok && col_ok ? v : 0.0f;
}

// One thread = PR rows of one output column of one (image, map) plane.
template <int K, int S, int PR, int THREADS, class TX, class TY>
__global__ void __launch_bounds__(THREADS) dw_nchw_kernel(dw_nchw_shape s, const TX* __restrict__ x,
                                                          const TX* __restrict__ w, const TY* __restrict__ bias,
                                                          TY* __restrict__ y) {
    static_assert((K == 0) == (S == 0), "fast path: both K and S; generic: neither");
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    const int KH = K ? K : s.KH, KW = K ? K : s.KW;
    const int item = blockIdx.x * THREADS + threadIdx.x;
    if (item >= s.items) return;
    const int ow = item % s.OW, rest = item / s.OW;
    const int band = rest % s.bands, plane = rest / s.bands;  // plane = b * M + m
    const int m = plane % s.M, b = plane / s.M;
    const int oh0 = band * PR;
    const TX* xp = x + (b * s.C + m / s.Mg) * s.H * s.W;
    const TX* wp = w + m * KH * KW;
    float acc[PR];
#pragma unroll
    for (int r = 0; r < PR; ++r) acc[r] = 0.0f;

    if constexpr (K > 0) {
        constexpr int ROWS = (PR - 1) * S + K;
        const int ih0 = oh0 * S - s.pad_h, iw0 = ow * S - s.pad_w;
        // Row i of the column segment feeds output row r at filter row kh = i - r*S.
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
            float col[ROWS];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) col[i] = dw_plane_input(xp, ih0 + i, iw0 + kw, s);
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
                const float wv = conv_load(wp, kh * K + kw);
#pragma unroll
                for (int r = 0; r < PR; ++r) acc[r] = fmaf(wv, col[r * S + kh], acc[r]);
            }
        }
    } else {
        // Rows past OH (the last band) read clamped addresses too and are not stored.
        for (int kh = 0; kh < KH; ++kh)
            for (int kw = 0; kw < KW; ++kw) {
                const float wv = conv_load(wp, kh * KW + kw);
                const int iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
#pragma unroll
                for (int r = 0; r < PR; ++r) {
                    const int ih = (oh0 + r) * s.stride_h - s.pad_h + kh * s.dil_h;
                    acc[r] = fmaf(wv, dw_plane_input(xp, ih, iw, s), acc[r]);
                }
            }
    }

    grid_launch_dependents();  // the inputs are read: the next kernel may launch during the stores
    const float bm = bias ? conv_load(bias, m) : 0.0f;
    TY* yp = y + (plane * s.OH + oh0) * s.OW + ow;
#pragma unroll
    for (int r = 0; r < PR; ++r) {
        if (oh0 + r >= s.OH) break;
        yp[r * s.OW] = conv_store_as<TY>(conv_epilogue_value(acc[r], bm, s.relu));
    }
}

// Threads per block: the kernel has no shared memory and no barrier, so the block size only sets how
// finely the grid's tail divides.
constexpr int DW_NCHW_THREADS = 256;

template <int PR>
struct DwNchwLaunch {
    template <class TX, class TY>
    struct Kernels {
        template <int K, int S>
        struct At {
            static constexpr auto kernel = dw_nchw_kernel<K, S, PR, DW_NCHW_THREADS, TX, TY>;
        };
    };

    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        dw_nchw_shape s;
        static_cast<ConvShape32&>(s) = conv_shape32(p);
        s.Mg = (int)(p->M / p->groups);
        s.bands = conv_ceil_div(s.OH, PR);
        s.items = (int)(p->B * p->M * s.bands * s.OW);  // <= y's count < 2^31
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        const unsigned blocks = (unsigned)(((int64_t)s.items + DW_NCHW_THREADS - 1) / DW_NCHW_THREADS);  // < 2^24
        const auto kernel = gd_kernel_for<Kernels<TX, TY>::template At, TX, TY>(p);
        CONV_LAUNCH_DEPENDENT("dw_nchw_kernel", kernel, blocks, DW_NCHW_THREADS, 0, stream, s,
                              static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                              static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
        return CONV_OK;
    }
};

}  // namespace

int dw_nchw_fits(const conv_problem* p, int report) {
    const bool ok = p->C == p->groups && p->x_layout == CONV_NCHW && p->y_layout == CONV_NCHW;
    if (ok) return CONV_OK;
    if (!report) return CONV_ERR_UNSUPPORTED;
    if (p->C != p->groups)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NCHW depthwise kernel needs one input channel per group "
                              "(C=%lld, groups=%lld)", (long long)p->C, (long long)p->groups);
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "grouped_direct: the NCHW depthwise kernel needs x_layout and y_layout NCHW");
}

template <int PR>
int dw_nchw_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    return conv_dispatch_dtypes<DwNchwLaunch<PR>>(p, p, t, stream);
}

// grouped_direct's configurations (grouped_direct.cu).
template int dw_nchw_run<2>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nchw_run<4>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nchw_run<7>(const conv_problem*, const conv_tensors*, cudaStream_t);
