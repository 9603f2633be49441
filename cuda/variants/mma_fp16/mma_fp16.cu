// mma_fp16.cu — implicit GEMM on the tensor cores through mma.sync.aligned.m16n8k16 (16-bit
// operands, fp32 accumulation; sm_80 and newer), x and w in fp32, fp16 or bf16, y in any of the three
// (+ bias, ReLU and max-pool where asked, in the store: mma_out in mma_rowwin.h), x and y NCHW or NHWC
// and w MCKK or MKKC: the kernels address every operand through its strides (mma_strides, mma_out), so
// one instance serves every layout; the staging and the fragments are the same. fp32 operands are
// rounded to fp16 where the kernels pack them into pairs; fp16 and bf16 operands go into the pairs as
// they are, never through fp32 (bf16 pairs into the bf16 MMA: fp16 has neither bf16's range nor its
// exponents). The banded kernel is an instance per x type that takes y's type at run time
// (mma_out_any); the row window takes x and y of one type, or fp16 x and fp32 y. Two kernel families,
// as launch configurations: the banded kernel below (any shape the variant supports) and the
// row-window kernel of mma_rowwin.cu (stride 1, no row padding, 5/7-row filters; faster where it
// fits, and the default there).
//   conv_mma_fp16_kernel<TX, MTILES, NT, WARPS>: GEMM rows = output maps (MTILES tiles of 16), columns =
//   output pixels of one image, reduction k = taps (c, kh, kw) with kw padded to an even count
//   KWP, so that the two consecutive k values of a fragment register are always the neighbours
//   kw, kw + 1 of one input row.
//   A persistent block writes, once, the weights as ready-made A fragments into shared memory
//   (one LDS.128 per warp, k-step and 16 maps, reused over NT pixel tiles) and a table of tap
//   offsets. Then, for each unit (a band of output rows of one image), it copies the input rows
//   the band needs into shared memory with cp.async (4-byte copies, zero-filled outside the image)
//   one unit AHEAD, so that the global loads of the next unit are in flight while the tensor cores
//   work on this one (16-bit inputs: plain loads and stores, as cp.async has no 2-byte copy and the
//   band's columns need not be 4-byte aligned in x); a short pass turns the band into 16-bit pairs
//   P[c][row][j] = (x[j], x[j + dilation_w]), so that each B fragment register is one 32-bit LDS
//   at (pixel base + tap offset): no im2col buffer and no index arithmetic per element in the k
//   loop. A warp computes 16*MTILES maps x 8*NT pixels in fp32 registers and stores them as
//   pairs (four lanes fill one 32-byte sector in fp32).
//   ReLU + max-pool (any window, stride and ceil mode: the fallback for pools the row window does
//   not take): a unit is the conv rows of a whole number of pooled rows' windows (the next unit
//   starts on its next window); the warps leave their raw fp32 sums in a shared tile of the unit, and
//   the block forms each pooled value from it (mma_out::store_pooled, mma_rowwin.h).
//   B addresses: the tap table holds byte offsets, so each B register costs one IMAD (pixel base
//   * 4 + offset) and one LDS with the band's address as its uniform operand, not an add, a
//   scaling LEA and the LDS: the kernel is issue-bound (bench/PERF_NOTES.md has the profiles and
//   the versions that did not help).
//   Padding: the band's copies zero-fill outside the image, so a padded tap adds 0 * w (an Inf or
//   NaN weight gives NaN, as in PyTorch); the taps that pad k (kw to an even count, the last
//   k-step) have zero weights and zero inputs.
//
// Error bound. Only fp32 operands are rounded to fp16 (unit roundoff u = 2^-11); products and sums
// are fp32. Each product then carries a relative error of at most 2u, independent between
// products, so for zero-mean data the relative L2 error of y is about u*sqrt(2/3) ~ 4e-4 at worst
// and ~2.5e-4 for uniform data whatever C*KH*KW is (fp32 accumulation adds ~1e-7). The variant is
// held to 1e-3. fp16 and bf16 operands enter exactly: their error is the fp32 sums' and y's
// rounding. Range (fp32 operands): |x| and |w| must stay below 65504 (fp16 max; larger values become
// inf) and values below 6.1e-5 in magnitude lose relative precision (fp16 subnormals); bf16
// operands keep bf16's range (fp32's exponents).
#include <type_traits>

#include "conv_kernel_util.cuh"
#include "conv_shape.cuh"
#include "launch_util.cuh"
#include "mma_rowwin.h"
#include "mma_sync.cuh"

// Maps per block: up to 4 m16 tiles of accumulators per warp.
constexpr int MMA_MAX_MAPS = 64;
// A fragments in shared memory: k-steps x m-tiles of 512 bytes each (48 KB).
constexpr int MMA_MAX_A_TILES = 96;
// Shared memory a block may use (opted in above the default 48 KB) ...
constexpr int MMA_SMEM_LIMIT = 96 * 1024;
// ... and what the choice of band height aims for: three blocks per SM (or six, for the
// configuration that trades taller bands for more blocks).
constexpr int MMA_SMEM_TARGET = 72 * 1024;
constexpr int MMA_SMEM_TARGET_SHORT = 36 * 1024;

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW), each in its layout (st: x's and w's
// strides; y's are in mma_out); every count below < 2^31.
struct mma_shape : ConvShape32 {
    mma_strides st;
    int kwp;                   // KW rounded up to even: k = (c*KH + kh)*kwp + kw
    int ksteps;                // ceil(C*KH*kwp / 16)
    int tile_rows;             // output rows per unit (at most; the last unit of an image may have fewer)
    int tile_step;             // conv rows between units' first rows (max-pool: pool_rows windows' stride)
    int tiles;                 // units per image
    int pool_rows;             // max-pool: pooled rows per unit (their windows lie in its tile_rows rows)
    int ystride;               // max-pool: floats per map in the unit's output tile (tile_rows * OW); else 0
    int units;                 // B * tiles
    int band_rows, band_cols;  // input rows and columns (as 16-bit pairs) one unit stages, per channel
    int raw_cols;              // band_cols + dil_w: the columns of x the pairs are made of
    int pair_stores;           // 1: y NCHW and every even pixel index of y 8-byte aligned
};

// (c, kh, kw) of tap k in the padded order; c == C past the last tap.
__device__ __forceinline__ void mma_tap(const mma_shape& s, int k, int& c, int& kh, int& kw) {
    const int row = k / s.kwp;
    kw = k - row * s.kwp;
    c = row / s.KH;
    kh = row - c * s.KH;
}

// Where in a unit's band the pair for tap k (k even) starts, relative to the pixel's base.
__device__ int mma_tap_offset(const mma_shape& s, int k) {
    int c, kh, kw;
    mma_tap(s, k, c, kh, kw);
    return c < s.C ? (c * s.band_rows + kh * s.dil_h) * s.band_cols + kw * s.dil_w : 0;
}

// Which halves of the pair for tap k (k even) are real taps. Padded taps have zero weights but read
// real input (the next column, or the pixel itself past the last channel); masking their input to
// zero keeps 0 * Inf = NaN out of outputs whose window holds no Inf, as IEEE arithmetic expects.
__device__ uint32_t mma_tap_mask(const mma_shape& s, int k) {
    int c, kh, kw;
    mma_tap(s, k, c, kh, kw);
    if (c >= s.C) return 0u;
    return kw + 1 < s.KW ? 0xffffffffu : 0x0000ffffu;  // the low half holds tap k
}

// W[m, k] in the padded order: zero for padded maps, padded kw and taps past the last channel.
template <class TX>
__device__ TX mma_weight(const mma_shape& s, const TX* __restrict__ w, int m, int k) {
    int c, kh, kw;
    mma_tap(s, k, c, kh, kw);
    return m < s.M && c < s.C && kw < s.KW ? conv_ldg(w + m * s.st.wm + c * s.st.wc + kh * s.st.wkh + kw * s.st.wkw)
                                           : TX(0.0f);
}

// Issues the copies of unit's input band (x's type, [c][row][raw_cols], zeros outside the image)
// into s_raw; one warp per row, lanes along it. 16-bit bands: plain loads and stores (see the top).
template <class TX>
__device__ void mma_issue_band(const mma_shape& s, const TX* __restrict__ x, int unit, TX* s_raw) {
    const int b = unit / s.tiles, ih_first = (unit - b * s.tiles) * s.tile_step * s.stride_h - s.pad_h;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int q = warp; q < s.C * s.band_rows; q += nwarps) {
        const int c = q / s.band_rows, ih = ih_first + q - c * s.band_rows;
        const bool row_ok = (unsigned)ih < (unsigned)s.H;
        const TX* src = x + b * s.C * s.H * s.W + c * s.st.xc + (row_ok ? ih : 0) * s.st.xh;
        TX* dst = s_raw + q * s.raw_cols;
        for (int j = lane; j < s.raw_cols; j += 32) {
            const int iw = j - s.pad_w;
            const bool ok = row_ok && (unsigned)iw < (unsigned)s.W;
            if constexpr (std::is_same_v<TX, float>)
                cp_async_4_zfill(dst + j, ok ? src + iw * s.st.xw : x, ok);
            else
                dst[j] = ok ? src[iw * s.st.xw] : TX(0.0f);
        }
    }
    if constexpr (std::is_same_v<TX, float>) cp_async_commit();
}

// One warp pass's 16*MTILES maps x 8*NT pixels (acc, D fragments) into y (+ bias, ReLU), pixels
// [p0, p0 + 8*NT) of the unit whose first pixel y_unit is (pixels past npix are not stored).
template <int MTILES, int NT, class TY>
__device__ __forceinline__ void mma_store_pass(const mma_shape& s, const mma_out<TY>& out, TY* y_unit,
                                               const float (&acc)[MTILES][NT][4], int p0, int npix) {
    const int g = (threadIdx.x & 31) >> 2, tig = threadIdx.x & 3;
    // D fragment: registers 0,1 = map g, pixels 2*tig, +1; registers 2,3 = map g + 8.
#pragma unroll
    for (int t = 0; t < MTILES; ++t) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = t * 16 + g + 8 * h;
            if (m >= s.M) continue;
            TY* ym = y_unit + m * out.map;
            const float bias_m = out.bias_at(m);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int p = p0 + 8 * j + 2 * tig;
                const float v0 = acc[t][j][2 * h], v1 = acc[t][j][2 * h + 1];
                if (s.pair_stores && p + 1 < npix) {
                    out.store_pair(ym + p, v0, v1, bias_m);
                } else {
                    if (p < npix) ym[p * out.pixel] = out.value(v0, bias_m);
                    if (p + 1 < npix) ym[(p + 1) * out.pixel] = out.value(v1, bias_m);
                }
            }
        }
    }
}

// One persistent block: A fragments and tap offsets once, then per unit a band of 16-bit input
// pairs and 16*MTILES maps x 8*NT pixels per warp pass. TX: the element type of x and w (float,
// __half or __nv_bfloat16); y's type is out's, chosen at run time.
template <class TX, int MTILES, int NT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) conv_mma_fp16_kernel(mma_shape s, const TX* __restrict__ x,
                                                            const TX* __restrict__ w, mma_out_any out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // supports() refuses GPUs below sm_80; this image exists only for fat binaries
#else
    extern __shared__ uint4 smem[];
    uint4* s_a = smem;                                                       // [kstep][mtile][lane]
    int4* s_koff = reinterpret_cast<int4*>(s_a + s.ksteps * MTILES * 32);   // [kstep][lane % 4]: offsets, masks
    float* s_y = reinterpret_cast<float*>(s_koff + s.ksteps * 4);            // max-pool: [map][pixel] raw sums
    uint32_t* s_band = reinterpret_cast<uint32_t*>(s_y + s.M * s.ystride);  // [c][row][col] pairs
    TX* s_raw = reinterpret_cast<TX*>(s_band + s.C * s.band_rows * s.band_cols);  // [c][row][raw col]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int g = lane >> 2, tig = lane & 3;

    if (blockIdx.x < s.units) mma_issue_band(s, x, blockIdx.x, s_raw);
    // A fragment register i of lane l holds maps l/4 + 8*(i&1) and taps 2*(l%4) + 8*(i/2), +1.
    uint32_t* s_a32 = reinterpret_cast<uint32_t*>(s_a);
    for (int e = threadIdx.x; e < s.ksteps * MTILES * 128; e += blockDim.x) {
        const int i = e & 3, l = (e >> 2) & 31, tile = e >> 7;
        const int m = (tile % MTILES) * 16 + (l >> 2) + 8 * (i & 1);
        const int k = (tile / MTILES) * 16 + 2 * (l & 3) + 8 * (i >> 1);
        s_a32[e] = mma_pair(mma_weight(s, w, m, k), mma_weight(s, w, m, k + 1));
    }
    // B fragment registers of lane l: taps 2*(l%4), +1 (b0) and 8 more (b1), at pixel g = l/4.
    for (int e = threadIdx.x; e < s.ksteps * 4; e += blockDim.x) {
        const int k = (e >> 2) * 16 + 2 * (e & 3);
        s_koff[e] = make_int4(4 * mma_tap_offset(s, k), 4 * mma_tap_offset(s, k + 8), (int)mma_tap_mask(s, k),
                              (int)mma_tap_mask(s, k + 8));
    }

    for (int unit = blockIdx.x; unit < s.units; unit += gridDim.x) {
        const int b = unit / s.tiles, tile = unit - b * s.tiles, oh_first = tile * s.tile_step;
        const int npix = min(s.tile_rows, s.OH - oh_first) * s.OW;
        cp_async_wait<0>();  // the unit's band (every group this thread committed)
        __syncthreads();  // this unit's band has landed; nobody still reads the pairs

        // band -> 16-bit pairs (the second element dil_w columns to the right).
        for (int q = warp; q < s.C * s.band_rows; q += nwarps) {
            const TX* src = s_raw + q * s.raw_cols;
            uint32_t* dst = s_band + q * s.band_cols;
            for (int j = lane; j < s.band_cols; j += 32) dst[j] = mma_pair(src[j], src[j + s.dil_w]);
        }
        __syncthreads();  // pairs ready, the band free for the next unit's copies
        if (unit + gridDim.x < s.units) mma_issue_band(s, x, unit + gridDim.x, s_raw);

        const int passes = (npix + 8 * NT - 1) / (8 * NT);
        for (int pass = warp; pass < passes; pass += nwarps) {
            const int p0 = pass * 8 * NT;
            // Band offset in bytes of this lane's B column (pixel p0 + 8j + g) in each n8 tile;
            // pixels past the unit repeat the last one and are not stored. Byte offsets (the
            // table's too) make each B address one 3-input add (band + base + offset) instead of
            // an add and a scaling LEA: 8 of the ~41 instructions per k-step.
            const char* band = reinterpret_cast<const char*>(s_band);
            int base[NT];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int p = min(p0 + 8 * j + g, npix - 1), oh = p / s.OW, ow = p - oh * s.OW;
                base[j] = 4 * (oh * s.stride_h * s.band_cols + ow * s.stride_w);
            }
            float acc[MTILES][NT][4];
            mma_zero(acc);

#pragma unroll 2
            for (int ks = 0; ks < s.ksteps; ++ks) {
                const int4 off = s_koff[ks * 4 + tig];
                uint4 a[MTILES];
#pragma unroll
                for (int t = 0; t < MTILES; ++t) a[t] = s_a[(ks * MTILES + t) * 32 + lane];
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(band + (base[j] + off.x)) & (uint32_t)off.z;
                    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(band + (base[j] + off.y)) & (uint32_t)off.w;
#pragma unroll
                    for (int t = 0; t < MTILES; ++t) mma_multiply<TX>(acc[t][j], a[t], b0, b1);
                }
            }

            if (out.pool.h) {  // raw sums into the unit's tile, pooled once it is whole
                // D fragment: registers 0,1 = map g, pixels 2*tig, +1; registers 2,3 = map g + 8.
#pragma unroll
                for (int t = 0; t < MTILES; ++t)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int m = t * 16 + g + 8 * h;
                        if (m >= s.M) continue;
                        float* sm = s_y + m * s.ystride;
#pragma unroll
                        for (int j = 0; j < NT; ++j) {
                            const int p = p0 + 8 * j + 2 * tig;
                            if (p < npix) sm[p] = acc[t][j][2 * h];
                            if (p + 1 < npix) sm[p + 1] = acc[t][j][2 * h + 1];
                        }
                    }
                continue;
            }
            mma_with_y(out, [&](const auto& o) { mma_store_pass(s, o, o.at(b, 0, oh_first * s.OW), acc, p0, npix); });
        }
        if (out.pool.h) {
            __syncthreads();  // the unit's tile is whole; the next unit's barriers keep it until it is read
            const int pr0 = tile * s.pool_rows;
            const int prows = min(s.pool_rows, out.pool.YH - pr0);
            mma_with_y(out, [&](const auto& o) {
                o.store_pooled(s_y, s.ystride, s.M, s.OH, s.OW, b, oh_first, pr0, prows);
            });
        }
    }
#endif
}

// ---- host side ----

static int64_t mma_kwp(const conv_problem* p) { return p->KW + (p->KW & 1); }
static int64_t mma_ksteps(const conv_problem* p) { return (p->C * p->KH * mma_kwp(p) + 15) / 16; }
static int64_t mma_mtiles(const conv_problem* p) { return (p->M + 15) / 16; }
static int64_t mma_band_cols(const conv_problem* p) {
    return (conv_out_w(p) - 1) * p->stride_w + (mma_kwp(p) - 2) * p->dilation_w + 1;
}
static int64_t mma_band_rows(const conv_problem* p, int64_t tile_rows) {
    return (tile_rows - 1) * p->stride_h + (p->KH - 1) * p->dilation_h + 1;
}
// Shared memory of a block whose units are tile_rows output rows: A fragments, tap offsets, the
// output tile (max-pool), the band as 16-bit pairs and in x's type.
static int64_t mma_smem_bytes(const conv_problem* p, int64_t tile_rows) {
    const int64_t raw_bytes = (mma_band_cols(p) + p->dilation_w) * (int64_t)conv_dtype_size(p->x_dtype);
    const int64_t y_bytes = mma_pooled(p) ? p->M * tile_rows * conv_out_w(p) * 4 : 0;
    return mma_ksteps(p) * mma_mtiles(p) * 512 + mma_ksteps(p) * 4 * 16 + y_bytes +
           p->C * mma_band_rows(p, tile_rows) * (4 * mma_band_cols(p) + raw_bytes);
}

static int mma_supports(const conv_problem* p) {
    if (p->M > MMA_MAX_MAPS)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16: M=%lld output maps; this variant keeps at most %d per block",
                              (long long)p->M, MMA_MAX_MAPS);
    if (mma_ksteps(p) * mma_mtiles(p) > MMA_MAX_A_TILES)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16: C*KH*KW = %lld*%lld*%lld taps (kw padded to %lld) for M=%lld maps "
                              "need %lld A-fragment tiles in shared memory, more than %d",
                              (long long)p->C, (long long)p->KH, (long long)p->KW, (long long)mma_kwp(p),
                              (long long)p->M, (long long)(mma_ksteps(p) * mma_mtiles(p)), MMA_MAX_A_TILES);
    int status = conv_check_coords("mma_fp16", p, 0, 0);  // also keeps the band sizes below 2^31
    if (status != CONV_OK) return status;
    // The smallest unit: one output row, or under max-pool one pooled row's window rows (and their
    // fp32 sums, M x rows x OW).
    const int64_t rows = mma_unit_rows(p, 1);
    if (mma_band_rows(p, rows) * (2 * mma_band_cols(p) + p->dilation_w) > MMA_SMEM_LIMIT ||
        mma_smem_bytes(p, rows) > MMA_SMEM_LIMIT)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16: %lld output row(s) (pool_h=%lld) need an input band of C=%lld channels x "
                              "%lld rows x %lld columns (W=%lld) in x's type and fp16, which with the weights%s is "
                              "more than the %d bytes of shared memory this variant gives a block",
                              (long long)rows, (long long)(mma_pooled(p) ? p->pool_h : 1), (long long)p->C,
                              (long long)mma_band_rows(p, rows), (long long)mma_band_cols(p), (long long)p->W,
                              mma_pooled(p) ? " and the fp32 sums of the pool's rows" : "", MMA_SMEM_LIMIT);
    int device, major, minor;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major < 8)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16: needs compute capability 8.0 or newer (mma.sync m16n8k16 with fp16 "
                              "operands); device %d is %d.%d",
                              device, major, minor);
    return CONV_OK;
}

// target: the shared memory the band height is chosen for.
static mma_shape mma_shape_for(const conv_problem* p, const void* y, int sms, int64_t target) {
    mma_shape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.st = mma_strides_of(p);
    s.kwp = (int)mma_kwp(p);
    s.ksteps = (int)mma_ksteps(p);
    // The tallest band within the target, but small enough for about four units per SM on small
    // batches. n: rows of y per unit (conv rows, or pooled rows under max-pool).
    const int64_t yh = conv_y_h(p);
    int64_t n = 1;
    while (n < yh && mma_smem_bytes(p, mma_unit_rows(p, n + 1)) <= target) ++n;
    const int64_t enough = (p->B * yh + 4 * (int64_t)sms - 1) / (4 * (int64_t)sms);
    if (n > enough) n = enough;
    s.tile_rows = (int)mma_unit_rows(p, n);
    s.tile_step = (int)mma_unit_step(p, n);
    s.tiles = (int)mma_units_per_image(p, n);
    s.pool_rows = mma_pooled(p) ? (int)n : 0;
    s.ystride = mma_pooled(p) ? s.tile_rows * s.OW : 0;
    s.units = (int)(p->B * s.tiles);
    s.band_rows = (int)mma_band_rows(p, s.tile_rows);
    s.band_cols = (int)mma_band_cols(p);
    s.raw_cols = s.band_cols + s.dil_w;
    const int64_t OHW = (int64_t)s.OH * s.OW;  // unpooled stores only
    s.pair_stores = p->y_layout == CONV_NCHW && OHW % 2 == 0 && (s.OW % 2 == 0 || s.tiles == 1) &&
                    ((uintptr_t)y & 7) == 0;
    return s;
}

template <int MTILES, int NT, int WARPS, class TX>
static int mma_run_tiles(const conv_problem* p, const TX* x, const TX* w, const mma_out_any& out,
                         cudaStream_t stream, int64_t target) {
    const auto kernel = conv_mma_fp16_kernel<TX, MTILES, NT, WARPS>;
    int sms;
    int status = conv_sm_count(&sms);
    if (status != CONV_OK) return status;
    const mma_shape s = mma_shape_for(p, out.y, sms, target);
    const size_t smem = (size_t)mma_smem_bytes(p, s.tile_rows);
    status = conv_allow_smem(kernel, smem, "mma_fp16: the row-window tile");
    if (status != CONV_OK) return status;
    int64_t wave = 0;
    status = conv_wave_blocks(kernel, WARPS * 32, smem, &wave);
    if (status != CONV_OK) return status;
    kernel<<<conv_wave_grid(s.units, wave, true), WARPS * 32, smem, stream>>>(s, x, w, out);
    CONV_LAUNCH_CHECK(conv_mma_fp16_kernel);
    return CONV_OK;
}

// One configuration (pixel tiles per warp pass, warps per block, band height target) for any
// supported M, in one persistent wave. TX: x's and w's element type; y's is chosen at run time.
template <int NT, int WARPS, bool SHORT>
struct mma_banded {
    template <class TX>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const TX* x = static_cast<const TX*>(t->x);
        const TX* w = static_cast<const TX*>(t->w);
        const mma_out_any out = mma_out_any_of(p, t);
        const int64_t target = SHORT ? MMA_SMEM_TARGET_SHORT : MMA_SMEM_TARGET;
        switch (mma_mtiles(p)) {
            case 1: return mma_run_tiles<1, NT, WARPS>(p, x, w, out, stream, target);
            case 2: return mma_run_tiles<2, NT, WARPS>(p, x, w, out, stream, target);
            case 3: return mma_run_tiles<3, NT, WARPS>(p, x, w, out, stream, target);
            default: return mma_run_tiles<4, NT, WARPS>(p, x, w, out, stream, target);
        }
    }
};

// The row-window kernel (mma_rowwin.cu) with strips of ROWS output rows, where it fits (x and y of
// one dtype, or fp16 x and fp32 y: mma_rowwin_fits refuses the other pairs).
template <int ROWS>
struct mma_rowwin_strips {
    template <class TX>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const TX* x = static_cast<const TX*>(t->x);
        const TX* w = static_cast<const TX*>(t->w);
        if (p->y_dtype == p->x_dtype) return mma_rowwin_run(p, x, w, mma_out_of<TX>(p, t), stream, ROWS);
        if constexpr (std::is_same_v<TX, __half>)
            if (p->y_dtype == CONV_F32) return mma_rowwin_run(p, x, w, mma_out_of<float>(p, t), stream, ROWS);
        return conv_set_error(CONV_ERR_INTERNAL, "mma_fp16 row window launched on a dtype pair it has no kernel for");
    }
};

// A configuration's entry: x and w in fp32, fp16 or bf16 (the declared in_dt); y's type is the
// configuration's business.
template <class CONFIG>
static int mma_config_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    if (p->x_dtype == CONV_F16) return CONFIG::template run<__half>(p, t, conv_stream(stream));
    if (p->x_dtype == CONV_BF16) return CONFIG::template run<__nv_bfloat16>(p, t, conv_stream(stream));
    return CONFIG::template run<float>(p, t, conv_stream(stream));
}
template <int ROWS>
static int mma_rowwin_supports(const conv_problem* p) {
    return mma_rowwin_fits(p, ROWS);
}

// The tunable configurations. Banded kernel (any supported shape): n8 pixel tiles per warp pass x
// warps per block, tall bands (3 blocks per SM) or short ones (6). ("n8_w8_grid", one block per unit,
// went: its one win, C1, is the row window's now; on cnn5's layers at batch 1 and 32 it was the fastest
// on 2 of 496 rows, by <= 1.5%, where mma_fp16 loses to cuDNN, and on no groups row, H200.) Row-window
// kernel (stride 1, no dilation, no row padding, KH in {5, 7}, KW <= 8, M <= 32, x and y of one dtype
// or fp16 x and fp32 y): strips of R output rows.
static const conv_config MMA_CONFIGS[] = {
    {"n4_w8", mma_config_run<mma_banded<4, 8, false>>, NULL},
    {"n4_w8_short", mma_config_run<mma_banded<4, 8, true>>, NULL},
    {"rowwin_r12", mma_config_run<mma_rowwin_strips<12>>, mma_rowwin_supports<12>},
    {"rowwin_r16", mma_config_run<mma_rowwin_strips<16>>, mma_rowwin_supports<16>},
};
// Strips of 8 rows went: the tuner picked 12 or 16 on every layer it fits (LeNet's C1 and C3 among them).
static const int MMA_ROWWIN_ROWS[] = {16, 12};

// The default. Where the row window fits: the strip height that computes the fewest rows (the last
// strip overlaps its neighbour), the taller on a tie. Elsewhere the banded kernel's tall bands (8
// warps, 4 pixel tiles a pass: the H100 sweeps, bench/PERF_NOTES.md).
static const char* mma_default_config(const conv_problem* p) {
    static const char* const names[] = {"rowwin_r16", "rowwin_r12"};
    int best = -1;
    int64_t best_rows = 0;
    for (int i = 0; i < 2; ++i) {
        const int rows = MMA_ROWWIN_ROWS[i];
        if (mma_rowwin_fits(p, rows) != CONV_OK) continue;
        const int64_t computed = mma_rowwin_computed_rows(p, rows);
        if (best < 0 || computed < best_rows) {
            best = i;
            best_rows = computed;
        }
    }
    conv_clear_error();
    return best >= 0 ? names[best] : "n4_w8";
}

extern "C" const conv_impl conv_impl_mma_fp16 = {mma_supports, NULL, MMA_CONFIGS,
                                                 (int)(sizeof MMA_CONFIGS / sizeof MMA_CONFIGS[0]),
                                                 mma_default_config};
