// fft.cu — depthwise convolution by 2-D FFTs, fp32 on the CUDA cores: a plane's cost no longer grows with the
// filter (a 31x31 filter on 56x56 is ~2.2 M multiply-adds direct, ~0.3 M through 72x72 transforms).
// One block per (output map, run of `images` images); the block works in shared memory, on a group of the run's
// images at a time (as many as keep the most images in flight an SM; fft_geometry):
//   1. the map's filter, dilated, at the origin of an NH x NW grid of zeros: two real rows a complex row
//      (z = row 2q + i row 2q+1), row FFTs of length NW, the two spectra separated (Z[k] and conj Z[-k]) into
//      the NW/2 + 1 columns that a real plane's spectrum needs, column FFTs of length NH: Wf, kept;
//   2. the group's planes of x the same way, in the same passes (with the filter's, for the first group): X;
//   3. X * conj(Wf) (a correlation), the inverse column FFTs, the needed rows paired again (A + i B, the
//      missing columns by Hermitian symmetry), the inverse row FFTs: the circular correlation c, real;
//   4. y[oh][ow] = c[(oh * stride - pad) mod NH][(ow * stride - pad) mod NW] / (NH NW), bias and ReLU.
// NH and NW (2^a 3^b 5^c, <= FFT_MAX_N) are the smallest lengths at which the circular correlation agrees with
// the zero-padded one on every output (fft_length): H + pad (the padding above wraps below the plane) and the
// last output's reach + 1. Any stride and dilation (the filter dilated in the grid, strided outputs picked);
// x and w in f32, f16 or bf16 (widened), y in any, NCHW or NHWC (one plane a block either way).
// Accuracy: the error of an FFT convolution is bounded by the norms, not by each output: about
// eps * log2(NH NW) * ||x plane||_2 * ||w||_2 for every output of the plane, so an output much smaller than its
// plane's typical one carries a larger relative error than a direct sum would give it (over a whole tensor
// of comparable values, the relative L2 error is ~1e-7; tests hold it to 1e-5). Planes with an Inf or NaN, or
// values of magnitude 2^48 and more (whose transforms could overflow), are summed directly instead, so that
// non-finite values reach exactly the outputs whose windows hold them.
#include "conv_kernel_util.cuh"
#include "conv_shape.cuh"
#include "cuda_util.cuh"
#include "fft_passes.cuh"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int FFT_THREADS_MAX = 512;
constexpr float FFT_SAFE = 281474976710656.0f;  // 2^48: |x|, |w| below it cannot overflow the transforms

// The problem's geometry (conv_shape.cuh) and what the transforms need beside it.
struct FftShape : ConvShape32 {
    int Mg;                             // maps per channel (groups == C)
    int B, images, group;               // images: a block's run; group: images transformed together
    int join;                           // 1: the filter transformed with the first group; 0: alone, before it
    int keep;                           // 1: the filter's spectrum kept in shared memory (later groups need it)
    long long xb, xc, xh, xw;           // element strides of x: image, channel, row, column
    long long yb, ym, yh, yw;           // and of y
    int ld_row, ld_col;                 // buffer strides of a row sequence (>= NW) and a column one (>= NH)
    int pw, px, po;                     // row pairs of the dilated filter, of x's plane, of y's plane
    int region;                         // complex elements of one plane's spectrum: (NW/2 + 1) * ld_col
    int buf;                            // complex elements of each work buffer
    int relu;
    FftDim nh, nw;
};

// Row-pair staging of a real plane of `rows` x `cols` values (value(r, c)) at the origin of the NW-wide grid:
// sequence q = row 2q + i row 2q + 1. Returns whether this thread saw a value the transforms must not take.
template <class Value>
__device__ bool stage_pairs(float2* a, int rows, int cols, const FftShape& s, Value value) {
    const int NW = s.nw.n, pairs = (rows + 1) / 2;
    bool bad = false;
    for (int i = threadIdx.x; i < pairs * NW; i += blockDim.x) {
        const int q = i / NW, c = i - q * NW;
        float re = 0.0f, im = 0.0f;
        if (c < cols) {
            re = value(2 * q, c);
            if (2 * q + 1 < rows) im = value(2 * q + 1, c);
        }
        bad |= !(fabsf(re) < FFT_SAFE) || !(fabsf(im) < FFT_SAFE);  // NaN fails both tests
        a[q * s.ld_row + c] = make_float2(re, im);
    }
    return bad;
}

// A block's threads over `planes` planes of `items` x `lanes` elements, lanes <= the block's threads: a thread
// keeps its lane (threadIdx.x % lanes) and visits items threadIdx.x / lanes, + blockDim.x / lanes, ... plane by
// plane, without dividing: body(plane, item, lane). Threads past the last whole multiple of `lanes` sit it out.
template <class Body>
__device__ __forceinline__ void walk_planes(int planes, int items, int lanes, Body body) {
    const int step = blockDim.x / lanes;
    if ((int)threadIdx.x >= step * lanes) return;
    const int lane = threadIdx.x % lanes;
    for (int p = 0, item = threadIdx.x / lanes; p < planes; item += step) {
        while (item >= items && p < planes) {
            item -= items;
            ++p;
        }
        if (p >= planes) break;
        body(p, item, lane);
    }
}

// The 2-D spectra of `planes` staged planes (stage_pairs, one after the other in a): with the filter (`filter`:
// the first plane, pw pairs of KHe rows), then images of px pairs of H rows. Row FFTs of all, the pairs separated
// into column sequences (plane p's column k at p * region + k * ld_col, rows past the plane's zero), column FFTs.
// Returns the buffer holding the spectra (a or b; the other is free).
__device__ float2* forward_planes(float2* a, float2* b, int filter, int planes, int khe, const FftShape& s,
                                  const float2* tw_h, const float2* tw_w) {
    const int NH = s.nh.n, NW = s.nw.n, NWc = NW / 2 + 1;
    float2* z = fft_run<-1>(a, b, filter * s.pw + (planes - filter) * s.px, s.ld_row, s.nw, tw_w);
    float2* cols = z == a ? b : a;
    // A thread keeps its row r (NH <= the block's threads) over the planes' columns k.
    walk_planes(planes, NWc, NH, [&](int p, int k, int r) {
        const bool is_filter = p < filter;
        const int rows = is_filter ? khe : s.H, seq0 = is_filter ? 0 : filter * s.pw + (p - filter) * s.px;
        float2 v = make_float2(0.0f, 0.0f);
        if (r < rows) {
            const float2* row = z + (seq0 + (r >> 1)) * s.ld_row;
            const float2 u = row[k], m = cconj(row[k == 0 ? 0 : NW - k]);
            // Z = X0 + i X1 with X0, X1 Hermitian: X0 = (Z[k] + conj Z[-k]) / 2, X1 = (Z[k] - conj Z[-k]) / 2i.
            v = (r & 1) ? make_float2(0.5f * (u.y - m.y), -0.5f * (u.x - m.x)) : cscale(cadd(u, m), 0.5f);
        }
        cols[p * s.region + k * s.ld_col + r] = v;
    });
    __syncthreads();
    return fft_run<-1>(cols, z, planes * NWc, s.ld_col, s.nh, tw_h);
}

__device__ __forceinline__ int wrap(int i, int n) {
    const int r = i % n;
    return r < 0 ? r + n : r;
}

// The plane summed directly (planes the transforms must not take), from global memory. Taps on the padding
// multiply a zero, so that an Inf weight there gives NaN as in the oracle.
template <class TX, class TY>
__device__ void direct_plane(const FftShape& s, const TX* xp, const TX* wp, float add, TY* yp) {
    for (int i = threadIdx.x; i < s.OH * s.OW; i += blockDim.x) {
        const int oh = i / s.OW, ow = i - oh * s.OW;
        float acc = 0.0f;
        for (int kh = 0; kh < s.KH; ++kh) {
            const int h = oh * s.stride_h - s.pad_h + kh * s.dil_h;
            for (int kw = 0; kw < s.KW; ++kw) {
                const int w = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                const bool in = h >= 0 && h < s.H && w >= 0 && w < s.W;
                acc = fmaf(in ? conv_load<TX>(xp, h * s.xh + w * s.xw) : 0.0f, conv_load<TX>(wp, kh * s.KW + kw), acc);
            }
        }
        yp[oh * s.yh + ow * s.yw] = conv_store_as<TY>(conv_epilogue_value(acc, add, s.relu));
    }
}

// Block (map m, run blockIdx.y of `images` images), in groups of `group` images transformed together (every
// pass of a group covers all its sequences: small planes fill the block). The filter rides with the first group
// (join) or goes alone before it (where shared memory cannot hold both); its spectrum stays in wf where later
// groups need it.
template <class TX, class TY>
__global__ void __launch_bounds__(FFT_THREADS_MAX) fft_conv_kernel(FftShape s, const TX* __restrict__ x,
                                                                  const TX* __restrict__ w,
                                                                  const TY* __restrict__ bias, TY* __restrict__ y) {
    extern __shared__ float4 fft_smem[];
    const int NH = s.nh.n, NW = s.nw.n, NWc = NW / 2 + 1;
    float2* tw_h = reinterpret_cast<float2*>(fft_smem);  // e^(-2 pi i j / NH)
    float2* tw_w = tw_h + NH;
    float2* wf = tw_w + NW;  // the filter's spectrum, where later groups need it
    float2* buf_a = wf + (s.keep ? s.region : 0);
    float2* buf_b = buf_a + s.buf;
    int* bad = reinterpret_cast<int*>(buf_b + s.buf);  // [0]: the filter, [1 + i]: image i of the group

    const int m = blockIdx.x, c = m / s.Mg;
    for (int i = threadIdx.x; i < NH + NW; i += blockDim.x) {
        const bool row = i < NH;
        const int n = row ? NH : NW, j = row ? i : i - NH;
        double sn, cs;
        sincospi(-2.0 * j / n, &sn, &cs);
        tw_h[i] = make_float2((float)cs, (float)sn);
    }
    const TX* wp = w + (long long)m * s.KH * s.KW;
    const int KHe = (s.KH - 1) * s.dil_h + 1, KWe = (s.KW - 1) * s.dil_w + 1;
    const float add = bias ? conv_load<TY>(bias, m) : 0.0f, scale = 1.0f / ((float)NH * (float)NW);
    const int first = blockIdx.y * s.images, last = min(first + s.images, s.B);

    for (int g0 = first, f = 1; g0 < last; f = 0) {
        const int n = f && !s.join ? 0 : min(s.group, last - g0);  // f: the filter is in this group
        __syncthreads();  // the previous group's reads of bad[] and of the buffers are done
        if (threadIdx.x <= n) bad[threadIdx.x] = 0;
        __syncthreads();  // and the tables written
        // 1. Stage the filter (first group) and the group's planes of x.
        if (f && stage_pairs(buf_a, KHe, KWe, s, [&](int r, int q) {
                return r % s.dil_h == 0 && q % s.dil_w == 0 ? conv_load<TX>(wp, (r / s.dil_h) * s.KW + q / s.dil_w)
                                                            : 0.0f;
            }))
            bad[0] = 1;
        for (int i = 0; i < n; ++i) {
            const TX* xp = x + (g0 + i) * s.xb + c * s.xc;
            if (stage_pairs(buf_a + (f * s.pw + i * s.px) * s.ld_row, s.H, s.W, s,
                            [&](int r, int q) { return conv_load<TX>(xp, r * s.xh + q * s.xw); }))
                bad[1 + i] = 1;
        }
        __syncthreads();
        if (bad[0]) {  // a non-finite or huge weight (set by the first group, kept): the whole run directly
            for (int img = g0; img < last; ++img)
                direct_plane<TX, TY>(s, x + img * s.xb + c * s.xc, wp, add, y + img * s.yb + m * s.ym);
            return;
        }
        // 2. Spectra; X conj(Wf) (a correlation); inverse column FFTs.
        float2* spec = forward_planes(buf_a, buf_b, f, f + n, KHe, s, tw_h, tw_w);
        if (n == 0) {  // the filter alone
            for (int i = threadIdx.x; i < s.region; i += blockDim.x) wf[i] = spec[i];
            continue;  // the barrier at the top orders the copy before its use
        }
        float2* other = spec == buf_a ? buf_b : buf_a;
        const float2* wspec = f ? spec : wf;
        float2* xs = spec + f * s.region;
        for (int at = threadIdx.x; at < s.region; at += blockDim.x) {
            const float2 wc = cconj(wspec[at]);
            if (f && s.keep) wf[at] = wspec[at];
            for (int p = 0; p < n; ++p) xs[p * s.region + at] = cmul(xs[p * s.region + at], wc);
        }
        __syncthreads();
        float2* cols = fft_run<1>(xs, other, n * NWc, s.ld_col, s.nh, tw_h);
        float2* rows = cols == other ? (other == buf_a ? buf_b : buf_a) : other;
        // 3. The output rows' grid rows in pairs, z = A + i B over all NW columns (k > NW/2: conj of NW - k).
        // A thread keeps its column k (NW <= the block's threads) over the planes' row pairs.
        walk_planes(n, s.po, NW, [&](int p, int pair, int k) {
            const int q = p * s.po + pair, o = 2 * pair;
            const bool upper = k >= NWc;
            const float2* col = cols + p * s.region + (upper ? NW - k : k) * s.ld_col;
            float2 va = col[wrap(o * s.stride_h - s.pad_h, NH)], vb = make_float2(0.0f, 0.0f);
            if (o + 1 < s.OH) vb = col[wrap((o + 1) * s.stride_h - s.pad_h, NH)];
            if (upper) {
                va = cconj(va);
                vb = cconj(vb);
            }
            rows[q * s.ld_row + k] = make_float2(va.x - vb.y, va.y + vb.x);
        });
        __syncthreads();
        const float2* out = fft_run<1>(rows, rows == buf_a ? buf_b : buf_a, n * s.po, s.ld_row, s.nw, tw_w);
        // 4. The outputs: row 2q in the real parts, 2q + 1 in the imaginary ones; planes the transforms must
        // not take summed directly.
        // A thread keeps its column ow (OW <= FFT_MAX_N <= the block's threads: fft_supports) over the planes' rows.
        const int cw = wrap((int)(threadIdx.x % s.OW) * s.stride_w - s.pad_w, NW);  // its grid column
        walk_planes(n, s.OH, s.OW, [&](int p, int oh, int ow) {
            if (bad[1 + p]) return;
            const float2 v = out[(p * s.po + (oh >> 1)) * s.ld_row + cw];
            const float r = (oh & 1) ? v.y : v.x;
            y[(g0 + p) * s.yb + m * s.ym + oh * s.yh + ow * s.yw] =
                conv_store_as<TY>(conv_epilogue_value(r * scale, add, s.relu));
        });
        for (int i = 0; i < n; ++i)
            if (bad[1 + i])
                direct_plane<TX, TY>(s, x + (g0 + i) * s.xb + c * s.xc, wp, add, y + (g0 + i) * s.yb + m * s.ym);
        g0 += n;
    }
}

// The transform length along one side: the circular correlation must agree with the zero-padded one on every
// output. Grid index i holds x's i (< H, zeros up to n); output o reads i = o * stride - pad + k * dil, from
// -pad up to the last output's reach: the negative ones wrap to n - pad .. n - 1, which must hold zeros
// (n >= H + pad), and the highest must stay below n. The filter is laid out in the grid as well.
int fft_length(int64_t in, int64_t out, int64_t k, int64_t pad, int64_t stride, int64_t dil) {
    const int64_t extent = (k - 1) * dil + 1, reach = (out - 1) * stride - pad + extent;
    int64_t need = in + pad;
    if (reach > need) need = reach;
    if (extent > need) need = extent;
    return need > FFT_MAX_N ? FFT_MAX_N + 1 : fft_good_length((int)need);
}

struct FftGeometry {
    FftShape s;
    size_t smem;
};

// Shared memory of a block that transforms `group` images together in runs of `images`, the filter with the
// first group (join) or alone (s: the rest filled in).
size_t fft_smem_bytes(FftShape& s, int images, int group, int join) {
    const int NWc = s.nw.n / 2 + 1, khe = (s.KH - 1) * s.dil_h + 1;
    s.images = images;
    s.group = group;
    s.join = join;
    s.pw = (khe + 1) / 2;
    s.px = (s.H + 1) / 2;
    s.po = (s.OH + 1) / 2;
    s.region = NWc * s.ld_col;
    const int staged = (join ? s.pw + group * s.px : max(s.pw, group * s.px)) * s.ld_row;
    const int spectra = (join ? 1 + group : group) * s.region, out = group * s.po * s.ld_row;
    s.buf = max(max(staged, spectra), out);
    s.keep = images > group || !join;
    const size_t complex = (size_t)s.nh.n + s.nw.n + (s.keep ? s.region : 0) + 2 * (size_t)s.buf;
    return complex * sizeof(float2) + (group + 1) * sizeof(int);
}

// Shared memory an SM holds (228 KB on sm_80 / sm_90 parts, 1 KB of it reserved a block by CUDA), and the most one
// block may take (227 KB); the launch checks the device's own.
constexpr size_t FFT_SM_SMEM = 233472;
constexpr size_t FFT_SMEM_MAX = 232448;

// The shape and shared memory of problem p (fft_supports has accepted it) for runs of `images` images in blocks of
// `threads`. One image: the filter transformed with it (fewer passes; at batch 1 the grid is one wave anyway).
// Runs: the grouping (images transformed together, the filter with the first group or alone) that keeps the most
// images in flight an SM (blocks an SM by shared memory and threads, times the group), then the larger group.
// Sequences padded to an odd stride (float2 rows an odd number of 8-byte words apart: a half-warp reading down a
// column spreads over the banks).
FftGeometry fft_geometry(const conv_problem* p, int images, int threads) {
    FftGeometry g;
    FftShape& s = g.s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.Mg = (int)(p->M / p->C);
    s.B = (int)p->B;
    const bool xn = p->x_layout == CONV_NHWC, yn = p->y_layout == CONV_NHWC;
    s.xb = (long long)s.C * s.H * s.W;
    s.xc = xn ? 1 : (long long)s.H * s.W; s.xh = xn ? (long long)s.W * s.C : s.W; s.xw = xn ? s.C : 1;
    s.yb = (long long)s.M * s.OH * s.OW;
    s.ym = yn ? 1 : (long long)s.OH * s.OW; s.yh = yn ? (long long)s.OW * s.M : s.OW; s.yw = yn ? s.M : 1;
    s.relu = p->epilogue == CONV_EPILOGUE_RELU;
    fft_dim_plan(fft_length(p->H, s.OH, p->KH, p->pad_h, p->stride_h, p->dilation_h), &s.nh);
    fft_dim_plan(fft_length(p->W, s.OW, p->KW, p->pad_w, p->stride_w, p->dilation_w), &s.nw);
    s.ld_row = s.nw.n | 1;
    s.ld_col = s.nh.n | 1;
    if (images > (int)p->B) images = (int)p->B;
    if (images == 1) {
        g.smem = fft_smem_bytes(s, 1, 1, 1);
        if (g.smem > FFT_SMEM_MAX) g.smem = fft_smem_bytes(s, 1, 1, 0);
        return g;
    }
    int best_group = 1, best_join = 0, best_inflight = -1;
    for (int join = 1; join >= 0; --join)
        for (int group = images; group >= 1; --group) {
            const size_t smem = fft_smem_bytes(s, images, group, join);
            if (smem > FFT_SMEM_MAX) continue;
            int blocks = (int)(FFT_SM_SMEM / (smem + 1024));
            if (blocks > 2048 / threads) blocks = 2048 / threads;
            if (blocks * group > best_inflight) {
                best_inflight = blocks * group;
                best_group = group;
                best_join = join;
            }
        }
    g.smem = fft_smem_bytes(s, images, best_group, best_join);
    return g;
}

int fft_supports(const conv_problem* p) {
    if (p->groups != p->C)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "fft computes depthwise convolutions only (groups == C), got groups=%lld, C=%lld",
                              (long long)p->groups, (long long)p->C);
    const int NH = fft_length(p->H, conv_out_h(p), p->KH, p->pad_h, p->stride_h, p->dilation_h);
    const int NW = fft_length(p->W, conv_out_w(p), p->KW, p->pad_w, p->stride_w, p->dilation_w);
    if (NH > FFT_MAX_N || NW > FFT_MAX_N)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "fft: a plane of %lldx%lld with this filter, padding and stride needs transforms "
                              "longer than %d",
                              (long long)p->H, (long long)p->W, FFT_MAX_N);
    if (conv_out_h(p) > FFT_MAX_N || conv_out_w(p) > FFT_MAX_N)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "fft: outputs of %lldx%lld (padding past the filter) are longer than %d",
                              (long long)conv_out_h(p), (long long)conv_out_w(p), FFT_MAX_N);
    const FftGeometry g = fft_geometry(p, 1, 256);
    if (g.smem > FFT_SMEM_MAX)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "fft: %dx%d transforms of a %lldx%lld plane need %zu bytes of shared memory, over %zu",
                              NH, NW, (long long)p->H, (long long)p->W, g.smem, FFT_SMEM_MAX);
    if (p->M > 0x7fffffff || p->B > 65535)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "fft: the grid takes M < 2^31 maps and B <= 65535 images, got %lld, %lld",
                              (long long)p->M, (long long)p->B);
    return conv_check_coords("fft", p, 0, 0);
}

template <int THREADS, int IMAGES>
struct FftLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const FftGeometry g = fft_geometry(p, IMAGES, THREADS);
        const auto kernel = fft_conv_kernel<TX, TY>;
        const int opt_in = conv_allow_smem(kernel, g.smem, "fft: the plane's transforms");
        if (opt_in != CONV_OK) return opt_in;
        const int64_t runs = (p->B + IMAGES - 1) / IMAGES;
        const dim3 grid((unsigned)p->M, (unsigned)runs);
        kernel<<<grid, THREADS, g.smem, stream>>>(g.s, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                                                  p->bias ? static_cast<const TY*>(t->bias) : NULL,
                                                  static_cast<TY*>(t->y));
        CONV_LAUNCH_CHECK(fft_conv_kernel);
        return CONV_OK;
    }
};

template <int THREADS, int IMAGES>
int fft_run_config(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                   void* stream) {
    (void)workspace;
    (void)workspace_bytes;
    return conv_dispatch_dtypes<FftLaunch<THREADS, IMAGES>>(p, p, t, conv_stream(stream));
}

// Batches of a few images: one image a block, each block transforming its own copy of the filter (the grid is M
// blocks); larger ones: runs of 4 to 16 images a block sharing the filter's transform, small planes transformed
// several at a time. Each configuration was the fastest on some layer of the large_kernel suite on the H200
// (bench/results/nvidia-h200/fft-configs-large_kernel-b32.md): t512_i1 RepLKNet's 31x31 at batch 1, t256_i1 the
// 27x27 and smaller at batch 1 and InceptionNeXt's first stage at 32, t256_i4 the 29x29 and 13x13 on 28x28 at 32,
// t256_i8 smaller planes at 32, t512_i16 the 31x31 and SLaK's 51x5 bands at 32 (a t512_i8 won none).
template <int IMAGES>
int fft_enough_images(const conv_problem* p) {
    if (p->B >= IMAGES) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED, "fft: runs of %d images need a batch of %d or more", IMAGES, IMAGES);
}

const conv_config FFT_CONFIGS[] = {
    {"t256_i1", fft_run_config<256, 1>, NULL},
    {"t512_i1", fft_run_config<512, 1>, NULL},
    {"t256_i4", fft_run_config<256, 4>, fft_enough_images<4>},
    {"t256_i8", fft_run_config<256, 8>, fft_enough_images<8>},
    {"t512_i16", fft_run_config<512, 16>, fft_enough_images<16>},
};

const char* fft_default_config(const conv_problem* p) { return p->B >= 4 ? "t256_i4" : "t512_i1"; }

}  // namespace

extern "C" const conv_impl conv_impl_fft = {fft_supports, NULL, FFT_CONFIGS, 5, fft_default_config};
