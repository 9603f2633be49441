// depthwise_large.cu — grouped_direct's kernel for depthwise layers with large filters (RepLKNet's 31x31,
// SLaK's 51x5 / 5x51 bands, UniRepLKNet's 13x13, InceptionNeXt's 1x11 / 11x1; any size, any stride, no
// dilation), the "lk_q*" configurations: exact fp32 FFMA on f32, f16 or bf16 x and w, y and bias in any
// dtype, NCHW or NHWC, bias + ReLU fused into the store.
//
// The work is arithmetic (KH*KW multiply-adds an output against one read of x), so the kernel is about
// feeding the FMA units from shared memory with as few loads as possible:
//   - A block stages an input window for CB channels of one image in shared memory as fp32 planes
//     (zeros on padding), and the CB channels' filters.
//   - A thread computes Q consecutive outputs along one direction of the plane (the "slide" direction:
//     along rows, or along columns where the filter is taller than wide, so that the long side of a band
//     slides). For one filter row it keeps Q input values in registers and walks the row's taps: each tap
//     is one broadcast weight (LDS.128 for four taps) and Q FMAs, then one new input value replaces the
//     one no output needs any more (a circular window, its slots named at compile time by unrolling the
//     walk Q taps at a time). Q FMAs a load, where a thread of one output loads a value for every FMA.
//   - Strides: the staged slide coordinate is stored split by phase (all positions = p mod stride, then
//     the next p), so that the taps of one phase walk consecutive words at any stride; each phase is a
//     walk of its own with its own taps (filter columns p, p + stride, ...).
// One kernel per (x dtype, Q): the layouts, stride, filter size and y dtype are run-time values that only
// the staging and the store read. Blocks, tiles and channels a block are chosen per problem (dwl_plan).
// A tap on padding meets a zero and still its weight: an Inf or NaN weight there gives NaN, as in
// PyTorch.

#include <algorithm>

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
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
    int vertical;                 // 0: v runs along W (u = row); 1: v runs along H (u = column)
    int KH, KW;                   // the filter
    int KU, KV, SU, SV, PU, PV;   // taps, strides and zeros before, across and along the slide
    int OUn, OVn;                 // outputs across and along the slide in a plane
    int x_nhwc, y_nhwc, y_dtype, relu;
    // the block's tile: OUt x (NS strips of Q) outputs for CB channels of one image
    int OUt, NS, CB, tiles_u, tiles_v, cgroups;
    // staged: IU rows of SV phases of IVlen values (row stride IVrow, odd); weights KU x SV phases of Apad
    int IU, IVlen, IVrow, plane, A, Apad, wplane;
};

template <class TY>
__device__ __forceinline__ void dwl_store(void* y, int i, float v) {
    static_cast<TY*>(y)[i] = conv_store_as<TY>(v);
}

__device__ __forceinline__ float dwl_bias(const void* bias, int dtype, int c) {
    if (!bias) return 0.0f;
    if (dtype == CONV_F16) return conv_load(static_cast<const __half*>(bias), c);
    if (dtype == CONV_BF16) return conv_load(static_cast<const __nv_bfloat16*>(bias), c);
    return conv_load(static_cast<const float*>(bias), c);
}

// acc[q] += sum_a w[a] * x[q + a] for a < A: xin holds the walk's inputs (x[0] first), wrow its taps,
// zero-padded to whole float4s. win[s] holds x[a0 + s] at the start of each group of Q taps.
template <int Q>
__device__ __forceinline__ void dwl_walk(float (&acc)[Q], const float* xin, const float* wrow, int A) {
    float win[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) win[q] = xin[q];
    int a0 = 0;
    for (; a0 + Q <= A; a0 += Q) {
#pragma unroll
        for (int j4 = 0; j4 < Q; j4 += 4) {
            const float4 w4 = *reinterpret_cast<const float4*>(wrow + a0 + j4);
            const float wj[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                const int j = j4 + jj;
#pragma unroll
                for (int q = 0; q < Q; ++q) acc[q] = fmaf(win[(j + q) % Q], wj[jj], acc[q]);
                win[j] = xin[a0 + j + Q];  // slot j's value x[a0 + j] is spent: x[a0 + j + Q] takes it
            }
        }
    }
    // the last A % Q taps (a branch on a block-uniform count)
#pragma unroll
    for (int j = 0; j < Q - 1; ++j) {
        if (a0 + j >= A) break;
        const float wj = wrow[a0 + j];
#pragma unroll
        for (int q = 0; q < Q; ++q) acc[q] = fmaf(win[(j + q) % Q], wj, acc[q]);
        win[j] = xin[a0 + j + Q];
    }
}

template <class TX, int Q>
__global__ void __launch_bounds__(DWL_THREADS) dwl_kernel(DwlShape s, const TX* __restrict__ x,
                                                          const TX* __restrict__ w, const void* __restrict__ bias,
                                                          void* __restrict__ y) {
    extern __shared__ float4 dwl_smem[];
    float* ws = reinterpret_cast<float*>(dwl_smem);  // [CB][KU][SV][Apad]
    float* xs = ws + s.CB * s.wplane;                // [CB][IU][IVrow]: [phase][IVlen] in a row
    int blk = (int)blockIdx.x;
    const int tv = blk % s.tiles_v;
    blk /= s.tiles_v;
    const int tu = blk % s.tiles_u;
    blk /= s.tiles_u;
    const int c0 = (blk % s.cgroups) * s.CB, b = blk / s.cgroups;
    const int u0 = tu * s.OUt, v0 = tv * s.NS * Q;
    const int in_u0 = u0 * s.SU - s.PU, in_v0 = v0 * s.SV - s.PV;

    grid_wait_prior();
    // The filters: phase p's taps a are filter columns kv = p + SV * a (rows where vertical), zeros after.
    const int wtotal = s.CB * s.wplane;
    for (int i = threadIdx.x; i < wtotal; i += blockDim.x) {
        const int a = i % s.Apad, row = i / s.Apad, p = row % s.SV, ku = row / s.SV % s.KU, c = row / s.SV / s.KU;
        const int kv = p + s.SV * a;
        float v = 0.0f;
        if (kv < s.KV && c0 + c < s.C) {  // w is (C, KH, KW): MCKK and MKKC coincide at one channel a map
            const int kh = s.vertical ? kv : ku, kw = s.vertical ? ku : kv;
            v = conv_load(w, ((c0 + c) * s.KH + kh) * s.KW + kw);
        }
        ws[i] = v;
    }
    // The input window, zeros outside x. The fastest index follows x's contiguous dimension: channels
    // (NHWC), or the plane's columns: v where the slide runs along rows, u where it runs down columns.
    const int per_row = s.SV * s.IVlen, total = s.CB * s.IU * per_row;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
        // (c, iu, iv) from i, the fastest index first: NHWC c, then w, then h; NCHW w, then h, then c
        // (w is u where the slide runs down columns, v where it runs along rows)
        int c, iu, iv, r = i;
        if (s.x_nhwc) {
            c = r % s.CB;
            r /= s.CB;
        }
        if (s.vertical) {
            iu = r % s.IU;
            r /= s.IU;
            iv = r % per_row;
            r /= per_row;
        } else {
            iv = r % per_row;
            r /= per_row;
            iu = r % s.IU;
            r /= s.IU;
        }
        if (!s.x_nhwc) c = r;
        const int gu = in_u0 + iu, gv = in_v0 + iv;  // iv: the slide position, before the phase split
        const int gh = s.vertical ? gv : gu, gw = s.vertical ? gu : gv;
        float v = 0.0f;
        if (c0 + c < s.C && gh >= 0 && gh < s.H && gw >= 0 && gw < s.W) {
            const int xi = s.x_nhwc ? ((b * s.H + gh) * s.W + gw) * s.C + c0 + c : ((b * s.C + c0 + c) * s.H + gh) * s.W + gw;
            v = conv_load(x, xi);
        }
        xs[c * s.plane + iu * s.IVrow + (iv % s.SV) * s.IVlen + iv / s.SV] = v;
    }
    __syncthreads();
    grid_launch_dependents();

    const int per_c = s.OUt * s.NS, items = s.CB * per_c;
    for (int it = threadIdx.x; it < items; it += blockDim.x) {
        // u fastest across a warp: rows an odd stride apart fall in different banks
        const int c = it / per_c, r = it % per_c, ou = r % s.OUt, strip = r / s.OUt;
        if (c0 + c >= s.C || u0 + ou >= s.OUn) continue;
        float acc[Q];
#pragma unroll
        for (int q = 0; q < Q; ++q) acc[q] = 0.0f;
        const float* xc = xs + c * s.plane + ou * s.SU * s.IVrow + strip * Q;
        const float* wc = ws + c * s.wplane;
        for (int ku = 0; ku < s.KU; ++ku) {
            for (int p = 0; p < s.SV; ++p) {
                const int A = (s.KV - p + s.SV - 1) / s.SV;
                dwl_walk<Q>(acc, xc + ku * s.IVrow + p * s.IVlen, wc + (ku * s.SV + p) * s.Apad, A);
            }
        }
        const float bv = dwl_bias(bias, s.y_dtype, c0 + c);
        const int ou_g = u0 + ou;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const int ov_g = v0 + strip * Q + q;
            if (ov_g >= s.OVn) break;
            const int oh = s.vertical ? ov_g : ou_g, ow = s.vertical ? ou_g : ov_g;
            const int yi = s.y_nhwc ? ((b * s.OH + oh) * s.OW + ow) * s.C + c0 + c : ((b * s.C + c0 + c) * s.OH + oh) * s.OW + ow;
            const float v = conv_epilogue_value(acc[q], bv, s.relu);
            if (s.y_dtype == CONV_F16) dwl_store<__half>(y, yi, v);
            else if (s.y_dtype == CONV_BF16) dwl_store<__nv_bfloat16>(y, yi, v);
            else dwl_store<float>(y, yi, v);
        }
    }
}

// The geometry of one problem for outputs of Q along the slide: the tile, channels a block and the staged
// sizes. Returns the shared memory bytes, or 0 where even one output row of one channel does not fit.
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
    s.x_nhwc = p->x_layout == CONV_NHWC;
    s.y_nhwc = p->y_layout == CONV_NHWC;
    s.y_dtype = p->y_dtype;
    s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    s.A = (s.KV + s.SV - 1) / s.SV;
    s.Apad = (s.A + 3) / 4 * 4;
    s.wplane = s.KU * s.SV * s.Apad;
    // Along the slide: up to 4 strips a tile (64 outputs at Q = 16), tiles of equal length.
    const int strips = conv_ceil_div(s.OVn, Q);
    s.tiles_v = conv_ceil_div(strips, 4);
    s.NS = conv_ceil_div(strips, s.tiles_v);
    // A phase holds the tile's outputs and the walk's taps, and the walk's one value read past its last tap.
    s.IVlen = s.NS * Q + s.Apad;
    s.IVrow = s.SV * s.IVlen | 1;  // odd: the rows of a warp's threads fall in different banks
    // NHWC: 32 bytes of channels a block, so that staging reads whole sectors of x; NCHW: planes.
    int cb_min = s.x_nhwc ? std::min(32 / (int)conv_dtype_size(p->x_dtype), s.C) : 1;
    auto bytes = [&](int cb, int out_rows) {
        const int iu = (out_rows - 1) * s.SU + s.KU;
        return (size_t)cb * ((size_t)s.wplane + (size_t)iu * s.IVrow) * sizeof(float);
    };
    // Rows a tile: the whole plane where a block's threads cover it in one pass, else equal parts; fewer
    // where the window would not fit (and one channel a block where even one row of cb_min would not).
    int tiles_u = conv_ceil_div(s.OUn * s.NS * cb_min, DWL_THREADS);
    s.OUt = conv_ceil_div(s.OUn, tiles_u);
    while (s.OUt > 1 && bytes(cb_min, s.OUt) > budget) s.OUt = conv_ceil_div(s.OUt, 2);
    if (bytes(cb_min, s.OUt) > budget) cb_min = 1;
    if (bytes(cb_min, s.OUt) > budget) return 0;
    s.tiles_u = conv_ceil_div(s.OUn, s.OUt);
    // Channels a block: more while a block has threads to spare, its window fits, and the grid keeps
    // two blocks an SM.
    const int64_t planes = p->B * (int64_t)s.C, tiles = (int64_t)s.tiles_u * s.tiles_v;
    s.CB = cb_min;
    while (s.CB * 2 * s.OUt * s.NS <= DWL_THREADS && s.CB * 2 <= s.C && bytes(s.CB * 2, s.OUt) <= budget &&
           (planes / (s.CB * 2)) * tiles >= 2 * (int64_t)sms)
        s.CB *= 2;
    // Small grids (batch 1): rows split further while blocks are fewer than two an SM.
    while (s.OUt > 1 && (planes / s.CB) * (int64_t)s.tiles_u * s.tiles_v < 2 * (int64_t)sms &&
           s.CB * s.OUt * s.NS > 64) {
        s.OUt = conv_ceil_div(s.OUt, 2);
        s.tiles_u = conv_ceil_div(s.OUn, s.OUt);
    }
    s.cgroups = conv_ceil_div(s.C, s.CB);
    s.IU = (s.OUt - 1) * s.SU + s.KU;
    s.plane = s.IU * s.IVrow;
    *out = s;
    return bytes(s.CB, s.OUt);
}

// One kernel per x dtype: y's dtype is a run-time value of the store.
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
        CONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        const int threads = (int)std::min<int64_t>(DWL_THREADS, (s.CB * s.OUt * s.NS + 31) / 32 * 32);
        CONV_LAUNCH_DEPENDENT("dwl_kernel", kernel, (unsigned)blocks, threads, smem, stream, s,
                              static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                              static_cast<const void*>(t->bias), t->y);
        return CONV_OK;
    }
};

}  // namespace

int dwl_fits(const conv_problem* p, int report) {
    if (p->groups != p->C || p->M != p->C) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the lk_* configurations take depthwise layers (groups = C = M), got "
                              "C=%lld M=%lld groups=%lld", (long long)p->C, (long long)p->M, (long long)p->groups);
    }
    if (p->dilation_h != 1 || p->dilation_w != 1) {
        if (!report) return CONV_ERR_UNSUPPORTED;
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: the lk_* configurations take no dilation, got %lldx%lld",
                              (long long)p->dilation_h, (long long)p->dilation_w);
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
