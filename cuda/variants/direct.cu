// direct.cu — the baseline GPU convolution, and the simplest implementation of every capability.
//   conv_direct_kernel: one thread per output element y[b, m, oh, ow]; every input and weight read
//   goes to global memory (through L1/L2). Any dtype (f32/f16/bf16 in and out), NCHW or NHWC x and
//   y, MCKK or MKKC w, groups, dilation, causal padding, bias, ReLU or SiLU. The kernel every other
//   variant is compared with.
//   conv_direct_pool_kernel: the ReLU + max-pool epilogue: one thread per stored (pooled) element,
//   which recomputes the conv values of its window with the same function and takes their max.
//   Overlapping windows compute some values twice: the baseline stays simple.
#include <math.h>

#include "conv_shape.cuh"
#include "tensor_io.cuh"

namespace {

// What both kernels need to locate and finish an output value, passed by value.
struct DirectArgs {
    ConvShape32 s;   // s.OH x s.OW: the convolution's output, before pooling
    ConvLayout l;    // offsets; y at its stored size YH x YW
    int Cg, Mg;      // input channels and output maps per group
    int YH, YW;      // the stored output: pooled under the max-pool epilogue, else s.OH x s.OW
    int act;         // the conv_epilogue applied to each value (the pooled kernel: ReLU)
    int pool_h, pool_w, pool_stride_h, pool_stride_w;
};

// Input row (or column) read by output o at filter tap k. In 64 bits: o * stride and k * dilation are
// each below the padded extent, which can pass 2^31 (pad and size up to 2^30 each).
__device__ __forceinline__ long long input_coord(int o, int stride, int pad, int k, int dilation) {
    return (long long)o * stride - pad + (long long)k * dilation;
}

// The convolution at (b, m, oh, ow), in fp32, before the epilogue. Both kernels get their values from
// here, with fmaf in (c, kh, kw) order, so that the pooled kernel sees exactly the values the plain one
// stores. A padded tap multiplies a loaded 0 rather than being skipped: 0 * Inf is NaN, as in PyTorch.
template <class TX>
__device__ float direct_conv_value(const DirectArgs& a, const TX* x, const TX* w, int b, int m, int oh, int ow) {
    const ConvShape32& s = a.s;
    const int c_first = (m / a.Mg) * a.Cg;  // map m reads its group's channels only
    // Elements between neighbouring columns of x and neighbouring kw taps of w: the inner loop steps
    // by these from a row's start instead of recomputing whole 64-bit offsets for every tap.
    const long long x_col = a.l.x_nhwc ? s.C : 1, w_col = a.l.w_mkkc ? a.Cg : 1;
    float acc = 0.0f;
    for (int c = 0; c < a.Cg; ++c) {
        for (int kh = 0; kh < s.KH; ++kh) {
            const long long ih = input_coord(oh, s.stride_h, s.pad_h, kh, s.dil_h);
            const bool row_inside = ih >= 0 && ih < s.H;
            const TX* x_row = x + a.l.x_at(b, c_first + c, row_inside ? ih : 0, 0);  // never outside x
            const TX* w_row = w + a.l.w_at(m, c, kh, 0);
            for (int kw = 0; kw < s.KW; ++kw) {
                const long long iw = input_coord(ow, s.stride_w, s.pad_w, kw, s.dil_w);
                const bool inside = row_inside && iw >= 0 && iw < s.W;
                const float xv = inside ? conv_load(x_row, iw * x_col) : 0.0f;
                acc = fmaf(xv, conv_load(w_row, kw * w_col), acc);
            }
        }
    }
    return acc;
}

// The idx-th element of a (B, M, rows, cols) output, counted in y's storage order, so that the
// threads of a warp store to consecutive addresses in NCHW and NHWC alike.
struct OutputCoord {
    int b, m, h, w;
};
__device__ __forceinline__ OutputCoord output_coord(int idx, int M, int rows, int cols, bool nhwc) {
    OutputCoord o;
    if (nhwc) {
        o.m = idx % M; idx /= M;
        o.w = idx % cols; idx /= cols;
        o.h = idx % rows; o.b = idx / rows;
    } else {
        o.w = idx % cols; idx /= cols;
        o.h = idx % rows; idx /= rows;
        o.m = idx % M; o.b = idx / M;
    }
    return o;
}

template <class TY>
__device__ __forceinline__ float bias_of(const TY* bias, int m) {
    return bias ? conv_load(bias, m) : 0.0f;
}

// Thread indices: total <= 2^30 (the dispatcher's batch chunks keep B*M*OH*OW, conv and stored, within
// CONV_INDEX_LIMIT) and one grid-stride step adds < 2^29 (conv_grid_for), so idx stays below 2^31.

// x is (B, C, H, W) or (B, H, W, C); w is (M, Cg, KH, KW) or (M, KH, KW, Cg); y is (B, M, OH, OW) or
// (B, OH, OW, M). total = B*M*OH*OW.
template <class TX, class TY>
__global__ void conv_direct_kernel(DirectArgs a, int total, const TX* x, const TX* w, const TY* bias, TY* y) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const OutputCoord o = output_coord(idx, a.s.M, a.s.OH, a.s.OW, a.l.y_nhwc);
        const float v = direct_conv_value(a, x, w, o.b, o.m, o.h, o.w);
        y[a.l.y_at(o.b, o.m, o.h, o.w)] = conv_store_as<TY>(conv_activation_value(v, bias_of(bias, o.m), a.act));
    }
}

// As conv_direct_kernel, y being the max-pooled ReLU output (B, M, YH, YW); total = B*M*YH*YW. Taking
// the max in fp32 and rounding once equals rounding each value then taking the max (rounding is
// monotone), so this matches conv + ReLU stored in y's dtype, then max-pooled, bit for bit.
template <class TX, class TY>
__global__ void conv_direct_pool_kernel(DirectArgs a, int total, const TX* x, const TX* w, const TY* bias, TY* y) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const OutputCoord o = output_coord(idx, a.s.M, a.YH, a.YW, a.l.y_nhwc);
        const float bias_m = bias_of(bias, o.m);
        // Every window starts inside the conv output (problem.c's pooled sizes, floor and ceil mode);
        // in ceil mode the last one may hang over its edge, and its max is over the part inside.
        const int oh0 = o.h * a.pool_stride_h, ow0 = o.w * a.pool_stride_w;
        const int rows = min(a.pool_h, a.s.OH - oh0), cols = min(a.pool_w, a.s.OW - ow0);
        float best = -INFINITY;
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const float v = direct_conv_value(a, x, w, o.b, o.m, oh0 + r, ow0 + c);
                best = conv_max_nan(best, conv_epilogue_value(v, bias_m, true));
            }
        y[a.l.y_at(o.b, o.m, o.h, o.w)] = conv_store_as<TY>(best);
    }
}

DirectArgs direct_args(const conv_problem* p) {
    DirectArgs a;
    a.s = conv_shape32(p);
    a.YH = (int)conv_y_h(p);
    a.YW = (int)conv_y_w(p);
    a.l = ConvLayout::of(p, a.YH, a.YW);
    a.Cg = (int)(p->C / p->groups);
    a.Mg = (int)(p->M / p->groups);
    a.act = p->epilogue;
    a.pool_h = (int)p->pool_h;
    a.pool_w = (int)p->pool_w;
    a.pool_stride_h = (int)p->pool_stride_h;
    a.pool_stride_w = (int)p->pool_stride_w;
    return a;
}

// conv_dispatch_dtypes' functor: launches the kernel of the problem's epilogue for x/w type TX and
// y/bias type TY.
struct DirectLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const DirectArgs a = direct_args(p);
        const TX* x = static_cast<const TX*>(t->x);
        const TX* w = static_cast<const TX*>(t->w);
        const TY* bias = static_cast<const TY*>(t->bias);  // NULL without one
        TY* y = static_cast<TY*>(t->y);
        const int threads = 256;
        if (p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL) {
            const int total = (int)(p->B * conv_y_image(p));
            conv_direct_pool_kernel<TX, TY><<<conv_grid_for(total, threads), threads, 0, stream>>>(a, total, x, w,
                                                                                                  bias, y);
            CONV_LAUNCH_CHECK(conv_direct_pool_kernel);
        } else {
            const int total = (int)(p->B * p->M * conv_out_h(p) * conv_out_w(p));
            conv_direct_kernel<TX, TY><<<conv_grid_for(total, threads), threads, 0, stream>>>(a, total, x, w, bias, y);
            CONV_LAUNCH_CHECK(conv_direct_kernel);
        }
        return CONV_OK;
    }
};

int direct_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<DirectLaunch>(p, p, t, conv_stream(stream));
}

}  // namespace

static const conv_config DIRECT_CONFIGS[] = {{"default", direct_run, NULL}};
extern "C" const conv_impl conv_impl_direct = {NULL, NULL, DIRECT_CONFIGS, 1, NULL};
