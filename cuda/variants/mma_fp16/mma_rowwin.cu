// mma_rowwin.cu — implicit GEMM on the tensor cores (mma.sync m16n8k16, 16-bit operands, fp32
// accumulation; x and w in fp32, rounded to fp16 as they are loaded, or in fp16 or bf16, taken as
// they are (bf16 operands in bf16 MMAs); y in x's dtype (or fp32 for fp16 x); NCHW or NHWC, through
// strides as in mma_fp16.cu) with a sliding window of input rows held in registers; stride 1 and
// dilation 1, no padding along the rows, KH in {5, 7}, KW <= 8, up to 32 maps. mma_fp16's "rowwin_r*"
// launch configurations (mma_fp16.cu keeps the banded kernel for every other shape). Built for LeNet's
// 5- and 7-row filters: the tuner picked the banded kernel or another variant on every 3x3 suite layer,
// and the 3-row kernels were a third of this file's build; the row-tested kernels for padded rows (no
// suite layer) half of it.
//   A warp computes a tile of R output rows x 8 output columns of one image, for all maps. GEMM
//   rows = maps (m16 tiles), columns = the 8 pixels of one output row, k = (kernel row pair, kw
//   padded to 8): one k-step covers kernel rows kh, kh + 1 of one channel, so B register 0 of lane
//   (g, t) is the 16-bit pair x[ih][iw + 2t], x[ih][iw + 2t + 1] of input row ih = oy + kh at pixel
//   column g, and register 1 the same pair one input row lower. Both depend on oy + kh only: the
//   R + KH - 1 input rows the tile reads are loaded once per channel (one coalesced load per row
//   and lane, packed into pairs and handed to the right lanes by two shuffles), and every output
//   row reuses them for each kernel row: R*(KH+1)/2 MMAs fed by R + KH - 1 pairs. The banded
//   kernel gathers every B register from shared memory instead, ~40 instructions per k-step.
//   The weights are ready-made A fragments in shared memory, built once per persistent block
//   (one LDS.128 per k-step and m16 tile, reused over the R rows).
//   Stores: see the kernel (straight from the fragments where OW % 8 == 0, else through a shared
//   tile of the strip, written as contiguous runs), in y's type after the bias and
//   ReLU where asked (mma_out, mma_rowwin.h); the shared tile holds the raw fp32 sums.
//   ReLU + max-pool (any window, stride, ceil mode; pool_h <= R). A strip owns the pooled rows whose
//   windows fit in its R rows ((R - pool_h) / pool_stride_h + 1 of them) and starts on its first
//   window (the last strip moves up to end on OH, as without pooling); the conv's work and loads are
//   those of the plain kernel, y's bytes fall by the window's area. 2x2/2 windows where OW % 8 == 0
//   and OH is even (C1): formed in registers from the fragments (a shuffle for the rows of 4-row
//   groups) and stored straight. Any other pool (C3's 4x4 ceil): through the shared tile, from which
//   the block forms each pooled value once the strip is whole (mma_out::store_pooled).
//   Edges: the last strip and the last column tile shift back to end on the last output row and
//   column (they recompute a few outputs of their neighbours, bit for bit: the same operations in
//   the same order), so no output needs a test; column padding reads as zero through the load masks.
//   Taps that only pad k (kw >= KW, kernel row KH of an odd KH) have zero weights and read zero
//   input, so an Inf in x gives Inf or NaN exactly where the fp32 reference does; taps on the
//   image's (column) padding read zero input against their real weights, so they add 0 * w (an Inf or NaN
//   weight gives NaN, as in PyTorch), in the MMAs and in the fp32 recomputation alike.
// Measurements of each version of this kernel: bench/PERF_NOTES.md, mma_fp16.
// Error bound: as mma_fp16.cu (only fp32 operands are rounded, to fp16).
#include "conv_kernel_util.cuh"
#include "conv_shape.cuh"
#include "launch_util.cuh"
#include "mma_rowwin.h"
#include "mma_sync.cuh"

// Columns of a tile (the n of m16n8k16).
constexpr int ROWWIN_COLS = 8;
// Warps per block: staged, one per 8-column tile of a strip, up to a limit (they loop over the
// rest); direct, 4. Three blocks per SM: 128 registers a thread at 5 warps, 168 at 4, which strips
// of 16 rows (64 accumulators) need; two blocks per SM with more registers ran slower.
constexpr int ROWWIN_DIRECT_WARPS = 4;
constexpr int ROWWIN_MIN_BLOCKS = 3;
__host__ __device__ constexpr int rowwin_max_warps(int R, int MT) { return R * MT >= 16 ? 4 : 5; }
// Shared memory of a block: the A fragments (one 512-byte tile per channel, kernel row pair and
// m16 tile) and the output tile of one strip (maps x R x OW floats).
constexpr int ROWWIN_SMEM_LIMIT = CONV_SMEM_NO_OPT_IN;
constexpr int ROWWIN_MAX_MAPS = 32;

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW), each in its layout (st: x's and w's
// strides; y's are in mma_out); every count below < 2^31. KH is also a template parameter of the
// kernel, which uses that one.
struct rowwin_shape : ConvShape32 {
    mma_strides st;
    int strips, xtiles, items;  // items = B * strips: one strip of one image per block pass
    int strip_step;             // conv rows between strips' first rows (the last one moves up to end on OH)
    int pool_rows;              // max-pool: pooled rows per strip (their windows lie in its R rows)
    int ystride;                // floats per map in the shared output tile (>= R * OW, even)
    int pair_stores;            // 1: y NCHW, OW even and y 8-byte aligned: float2 stores
    int direct_stores;          // 1: stored from the fragments (rowwin_direct_stores: NCHW tiles of whole
                                // sectors, OW % 8 == 0; NHWC y without a pool)
};

// W[m, c, kh, kw], zero for padded maps and columns and for kernel rows outside [0, KH) (row groups
// shift the kernel rows down by the output row's offset).
template <class TX>
__device__ TX rowwin_weight(const rowwin_shape& s, int KH, const TX* __restrict__ w, int m, int c, int kh, int kw) {
    const bool tap = m < s.M && (unsigned)kh < (unsigned)KH && kw < s.KW;
    return tap ? conv_ldg(w + m * s.st.wm + c * s.st.wc + kh * s.st.wkh + kw * s.st.wkw) : TX(0.0f);
}

// One warp's unit: where its strip lies and what its lanes load.
//   A tile reads 7 + KW <= 15 columns of each input row, so one load covers two rows: lanes 0-15 load
//   columns col0 + lane of the first (clamped into the image, so every load is in bounds; in NHWC a
//   warp's loads of one channel are C values apart, and the other channels' loads of the same rows
//   find those lines in L1), lanes 16-31 the same columns of the next. Each lane pairs its value with
//   its right neighbour's; lane (g, t) then takes the pair of lane src = g + 2t (kw = 2t,
//   2t + 1 at pixel g) for the first row and of lane src + 16 for the second. Halves outside the image
//   or past KW are masked to +0 after the shuffle. Loading both halves of its own pair would cost a
//   lane two loads and two 64-bit addresses a row, one row per load twice the loads and neighbour
//   shuffles, in a kernel its issue slots bound (C1, C3).
template <class TX>
struct rowwin_unit {
    int b, ox0, oy0;   // oy0: also the strip's first input row (no padding along the rows)
    int ro;            // this lane's row in each load: lane / 16
    const TX* xc;      // channel 0, row 0, this lane's (clamped) column; the next channel is s.st.xc further
    uint32_t mask;     // the halves of lane (g, t)'s pair that are real taps inside the image
};

template <int R, class TX>
__device__ __forceinline__ rowwin_unit<TX> rowwin_unit_at(const rowwin_shape& s, const TX* __restrict__ x, int item,
                                                          int xt, int lane, int src, int t) {
    rowwin_unit<TX> u;
    const int strip = item % s.strips;
    u.b = item / s.strips;
    u.ox0 = min(xt * ROWWIN_COLS, s.OW - ROWWIN_COLS);
    u.oy0 = min(strip * s.strip_step, s.OH - R);
    const int col0 = u.ox0 - s.pad_w;
    u.ro = lane >> 4;
    u.xc = x + u.b * s.C * s.H * s.W + min(max(col0 + (lane & 15), 0), s.W - 1) * s.st.xw;
    const bool lo_ok = 2 * t < s.KW && (unsigned)(col0 + src) < (unsigned)s.W;
    const bool hi_ok = 2 * t + 1 < s.KW && (unsigned)(col0 + src + 1) < (unsigned)s.W;
    u.mask = (lo_ok ? 0x0000ffffu : 0u) | (hi_ok ? 0xffff0000u : 0u);
    return u;
}

// Issues the loads of one channel's window (xc: that channel's row 0; ih: the lane's first row,
// oy0 + ro), two rows per load (every row lies in the image: the row window takes no vertical padding).
template <int LOADS, class TX>
__device__ __forceinline__ void rowwin_load(const rowwin_shape& s, const TX* xc, int ih, TX (&raw)[LOADS]) {
#pragma unroll
    for (int j = 0; j < LOADS; ++j)
        raw[j] = conv_ldg(xc + (ih + 2 * j) * s.st.xh);
}

// A lane's loaded value and its right neighbour's as one 16-bit pair: fp32 values are shuffled, then
// rounded to fp16; fp16 and bf16 ones are shuffled as their bits.
__device__ __forceinline__ uint32_t rowwin_pair_with_next(float v) {
    return mma_pair(v, __shfl_down_sync(0xffffffffu, v, 1));
}
__device__ __forceinline__ uint32_t rowwin_pair_bits_with_next(uint32_t bits) {
    return bits | __shfl_down_sync(0xffffffffu, bits, 1) << 16;
}
__device__ __forceinline__ uint32_t rowwin_pair_with_next(__half v) {
    return rowwin_pair_bits_with_next(__half_as_ushort(v));
}
__device__ __forceinline__ uint32_t rowwin_pair_with_next(__nv_bfloat16 v) {
    return rowwin_pair_bits_with_next(__bfloat16_as_ushort(v));
}

// The loaded values as lane (g, t)'s 16-bit pairs, one per input row. (Lane 15's neighbour is lane 16,
// on the other row: no lane takes that pair, src + 1 <= 14.)
template <int ROWS, class TX>
__device__ __forceinline__ void rowwin_pairs(const rowwin_unit<TX>& u, const TX (&raw)[ROWS / 2], int src,
                                             uint32_t (&v)[ROWS]) {
#pragma unroll
    for (int j = 0; j < ROWS / 2; ++j) {
        const uint32_t own = rowwin_pair_with_next(raw[j]);
#pragma unroll
        for (int r = 0; r < 2; ++r) v[2 * j + r] = __shfl_sync(0xffffffffu, own, src + 16 * r) & u.mask;
    }
}

// x or w at p, as fp32 (exact: fp16 and bf16 values widen without rounding).
__device__ __forceinline__ float rowwin_ldg_f32(const float* p) { return conv_ldg(p); }
__device__ __forceinline__ float rowwin_ldg_f32(const __half* p) { return __half2float(conv_ldg(p)); }
__device__ __forceinline__ float rowwin_ldg_f32(const __nv_bfloat16* p) { return __bfloat162float(conv_ldg(p)); }

// One output of the conv in fp32 straight from x and w: the slow path of a row group whose MMAs
// met a NaN or an infinity (see the kernel). Taps on the column padding add 0 * w, as the MMAs do.
template <class TX>
__device__ float rowwin_output_fp32(const rowwin_shape& s, int KH, const TX* __restrict__ x,
                                    const TX* __restrict__ w, int b, int m, int oy, int ox) {
    float sum = 0.0f;
    for (int c = 0; c < s.C; ++c)
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oy + kh;
            for (int kw = 0; kw < s.KW; ++kw) {
                const int iw = ox - s.pad_w + kw;
                const float v =
                    (unsigned)iw < (unsigned)s.W
                        ? rowwin_ldg_f32(x + b * s.C * s.H * s.W + c * s.st.xc + ih * s.st.xh + iw * s.st.xw) : 0.0f;
                sum = fmaf(v, rowwin_ldg_f32(w + m * s.st.wm + c * s.st.wc + kh * s.st.wkh + kw * s.st.wkw), sum);
            }
        }
    return sum;
}

// The direct store under a 2x2/2 max-pool (OH even and OW % 8 == 0: strips start on even rows and
// tiles on even columns, so each window lies in one tile). A lane's registers 2h, 2h + 1 are a
// window's two columns; its two rows are row groups q, q + 1 (GR = 1) or row offsets dr, dr + 1 of one
// group (GR = 4: GEMM rows g, g + 4, held by lanes 16 apart, so a shuffle, which every lane runs, maps
// past M included). + bias and ReLU on each value, the max, one rounding to TY; the lane holding the
// window's top row stores it.
template <int GR, int NG, int MT, class TY>
__device__ __forceinline__ void rowwin_pool2_store(const rowwin_shape& s, const mma_out<TY>& out,
                                                   const float (&acc)[NG][MT][4], int mt, int h, int b, int m,
                                                   int dr, int oy0, int col) {
    const float bias_m = m < s.M ? out.bias_at(m) : 0.0f;
    const bool owner = m < s.M && !(GR > 1 && (dr & 1));
    TY* ym = out.at(b, owner ? m : 0, (oy0 + dr) / 2 * out.pool.YW + col / 2);
#pragma unroll
    for (int q = 0; q < NG; q += GR > 1 ? 1 : 2) {  // the window's top row: oy0 + q*GR + dr
        float v = conv_max_nan(conv_epilogue_value(acc[q][mt][2 * h], bias_m, true),
                               conv_epilogue_value(acc[q][mt][2 * h + 1], bias_m, true));
        if constexpr (GR > 1) {
            v = conv_max_nan(v, __shfl_xor_sync(0xffffffffu, v, 16));
        } else {
            v = conv_max_nan(v, conv_max_nan(conv_epilogue_value(acc[q + 1][mt][2 * h], bias_m, true),
                                             conv_epilogue_value(acc[q + 1][mt][2 * h + 1], bias_m, true)));
        }
        if (owner) ym[q * GR / 2 * out.pool.YW * out.pixel] = conv_store_as<TY>(v);
    }
}

// GR: output rows per MMA. 1: the 16 GEMM rows are 16 maps. 4 (M <= 4): they are 4 maps x 4
// consecutive output rows, with the weights shifted by the row offset in the A fragments, so that
// few maps do not leave three quarters of every MMA empty: C1 takes 5 MMAs per channel and 4 output
// rows instead of 16, and a quarter of the accumulators. The price: an output row's MMAs also see
// the group's other input rows, with zero weights, so a NaN or an infinity there would give NaN
// where IEEE arithmetic gives a number. A lane whose outputs are not all finite recomputes them in
// fp32 from x and w (rare: only where x, w or the sums are not finite).
// TX: the element type of x and w (float, __half or __nv_bfloat16); TY: y's (the same, or float for
// __half x).
template <class TX, class TY, int KH, int MT, int R, int GR>
__global__ void __launch_bounds__(rowwin_max_warps(R / GR, MT) * 32, ROWWIN_MIN_BLOCKS)
    conv_mma_rowwin_kernel(rowwin_shape s, const TX* __restrict__ x, const TX* __restrict__ w, mma_out<TY> out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // mma_fp16's supports() refuses GPUs below sm_80; this image exists for fat binaries
#else
    constexpr int KP = (GR + KH) / 2;  // k-steps per channel: the GR + KH - 1 input rows in pairs
    constexpr int NG = R / GR;         // row groups per strip
    constexpr int MPG = 16 / GR;       // maps per m16 tile
    constexpr int ROWS = R + KH - 1;   // input rows a strip reads per channel
    static_assert(MT == 1 || GR == 1, "row groups are for few maps");
    static_assert(ROWS % 2 == 0, "KH odd, R even: an even number of rows, two a load");
    constexpr int LOADS = ROWS / 2;    // loads per channel
    extern __shared__ uint4 s_a[];  // [c][kernel row pair][m16 tile][lane]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;

    // A register i of lane l: GEMM row l/4 + 8*(i&1) = (row offset dr, map m), input row 2j + i/2 of
    // the group (kernel row that - dr), kw 2*(l%4) and the next.
    uint32_t* s_a32 = reinterpret_cast<uint32_t*>(s_a);
    for (int e = threadIdx.x; e < s.C * KP * MT * 128; e += blockDim.x) {
        const int i = e & 3, l = (e >> 2) & 31, tile = e >> 7;
        const int cj = tile / MT, c = cj / KP, j = cj - c * KP, row = (l >> 2) + 8 * (i & 1);
        const int m = (tile - cj * MT) * 16 + row % MPG, kh = 2 * j + (i >> 1) - row / MPG, kw = 2 * (l & 3);
        s_a32[e] = mma_pair(rowwin_weight(s, KH, w, m, c, kh, kw), rowwin_weight(s, KH, w, m, c, kh, kw + 1));
    }
    __syncthreads();

    // A block takes strips (one image's R output rows, all maps) in turn; its warps take the 8-column
    // tiles of a strip. Where OW is a multiple of 8, each tile row is one 32-byte sector per map and
    // is stored straight from the fragments (so are 2x2/2 max-pool windows, rowwin_pool2_store), and so
    // is NHWC y without a pool at any OW (rowwin_direct_stores). Elsewhere the results go through
    // shared memory, so that each map's R*OW outputs, contiguous in y, are written by consecutive
    // threads: stored straight, NCHW tiles straddle sectors (C3, OW = 34, ran 3x slower than at
    // OW = 32), while staging costs C1 (OW = 80) a third (fewer warps per SM, and the barriers).
    // Software pipeline over a warp's (tile, channel) steps: the loads of the next step (the next
    // channel, or the next tile's first) are issued before this step's MMAs, so that a warp has a
    // window of loads in flight while it computes, and across the block's barriers.
    float* s_y = reinterpret_cast<float*>(s_a + s.C * KP * MT * 32);  // [map][row][column]
    const int nwarps = blockDim.x >> 5, src = g + 2 * t;
    // Where a warp works: (item, column tile). Staged, a block's warps share an item (the barriers
    // below): tiles xt, xt + nwarps, ... of it, then the block's next item. Direct, every warp walks
    // the flat (item, tile) order on its own, a whole grid of warps apart.
    const bool direct = s.direct_stores;
    const int total_warps = gridDim.x * nwarps;
    int flat = blockIdx.x * nwarps + warp;
    int item = direct ? flat / s.xtiles : blockIdx.x, xt = direct ? flat - item * s.xtiles : warp;
    if (item >= s.items) return;  // staged: the whole block, so no barrier misses some threads
    rowwin_unit<TX> u = rowwin_unit_at<R>(s, x, item, xt, lane, src, t);
    TX raw[LOADS];
    rowwin_load<LOADS>(s, u.xc, u.oy0 + u.ro, raw);
    for (;;) {
        int next_flat = flat + total_warps, next_item, next_xt;
        if (direct) {
            next_item = next_flat / s.xtiles;
            next_xt = next_flat - next_item * s.xtiles;
        } else {
            const bool same = xt + nwarps < s.xtiles;
            next_item = same ? item : item + gridDim.x;
            next_xt = same ? xt + nwarps : warp;
        }
        float acc[NG][MT][4];
        mma_zero(acc);

        rowwin_unit<TX> next = u;
#pragma unroll 1
        for (int c = 0; c < s.C; ++c) {
            uint32_t v[ROWS];  // lane (g, t)'s pair of every input row of the strip
            rowwin_pairs<ROWS>(u, raw, src, v);
            if (c + 1 < s.C) {
                rowwin_load<LOADS>(s, u.xc + (c + 1) * s.st.xc, u.oy0 + u.ro, raw);
            } else if (next_item < s.items) {
                next = rowwin_unit_at<R>(s, x, next_item, next_xt, lane, src, t);
                rowwin_load<LOADS>(s, next.xc, next.oy0 + next.ro, raw);
            }
#pragma unroll
            for (int j = 0; j < KP; ++j) {
                uint4 a[MT];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) a[mt] = s_a[((c * KP + j) * MT + mt) * 32 + lane];
#pragma unroll
                for (int q = 0; q < NG; ++q) {
                    const uint32_t b1 = 2 * j + 1 < GR + KH - 1 ? v[q * GR + 2 * j + 1] : 0u;
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) mma_multiply<TX>(acc[q][mt], a[mt], v[q * GR + 2 * j], b1);
                }
            }
        }

        // D registers 0, 1: GEMM row g, columns 2t and 2t + 1; registers 2, 3: GEMM row g + 8. GEMM
        // row = (row offset dr in the group, map). Staged: the last tile, moved left to end on the
        // last column, leaves the columns of the tile before it to that tile, so that every
        // shared-memory element has one writer.
        const int col = u.ox0 + 2 * t, first_col = xt * ROWWIN_COLS;
        if constexpr (GR > 1) {
            bool finite = true;
#pragma unroll
            for (int q = 0; q < NG; ++q)
#pragma unroll
                for (int e = 0; e < 4; ++e) finite &= isfinite(acc[q][0][e]);
            if (!finite) {
#pragma unroll 1
                for (int q = 0; q < NG; ++q)
#pragma unroll 1
                    for (int e = 0; e < 4; ++e) {
                        const int row = g + 8 * (e >> 1), m = row % MPG;
                        if (m < s.M)
                            acc[q][0][e] = rowwin_output_fp32(s, KH, x, w, u.b, m, u.oy0 + q * GR + row / MPG,
                                                              col + (e & 1));
                    }
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = mt * 16 + (g + 8 * h) % MPG, dr = (g + 8 * h) / MPG;
                if (direct && out.pool.h) {  // before the test of m: shuffles
                    rowwin_pool2_store<GR>(s, out, acc, mt, h, u.b, m, dr, u.oy0, col);
                    continue;
                }
                if (m >= s.M) continue;
                if (direct) {
                    TY* ym = out.at(u.b, m, (u.oy0 + dr) * s.OW + col);
                    const float bias_m = out.bias_at(m);
#pragma unroll
                    for (int q = 0; q < NG; ++q)
                        out.store_two(ym + q * GR * s.OW * out.pixel, acc[q][mt][2 * h], acc[q][mt][2 * h + 1],
                                      bias_m, s.pair_stores);
                    continue;
                }
                float* sm = s_y + m * s.ystride + dr * s.OW + col;
#pragma unroll
                for (int q = 0; q < NG; ++q) {
                    if (col >= first_col) sm[q * GR * s.OW] = acc[q][mt][2 * h];
                    if (col + 1 >= first_col) sm[q * GR * s.OW + 1] = acc[q][mt][2 * h + 1];
                }
            }

        if (!direct && next_item != item) {  // the block's last tiles of this item are done
            __syncthreads();  // the strip's tile is complete
            const int b = item / s.strips, strip = item - b * s.strips, oy0 = min(strip * s.strip_step, s.OH - R);
            if (out.pool.h) {  // the strip's pooled rows (strip_step = their windows' stride)
                const int pr0 = strip * s.pool_rows;
                out.store_pooled(s_y, s.ystride, s.M, s.OH, s.OW, b, oy0, pr0, min(s.pool_rows, out.pool.YH - pr0));
            } else {  // NCHW (NHWC y without a pool is stored straight): each map's R rows are R*OW
                      // consecutive values of y
                const int n = R * s.OW;
                for (int m = 0; m < s.M; ++m) {
                    TY* ym = out.at(b, m, oy0 * s.OW);
                    const float* sm = s_y + m * s.ystride;
                    const float bias_m = out.bias_at(m);
                    if (s.pair_stores) {
                        for (int e = threadIdx.x; e < n / 2; e += blockDim.x) {
                            const float2 v = reinterpret_cast<const float2*>(sm)[e];
                            out.store_pair(ym + 2 * e, v.x, v.y, bias_m);
                        }
                    } else {
                        for (int e = threadIdx.x; e < n; e += blockDim.x) ym[e] = out.value(sm[e], bias_m);
                    }
                }
            }
            __syncthreads();  // the tile is free for the next strip
        }
        if (next_item >= s.items) break;
        item = next_item;
        xt = next_xt;
        flat = next_flat;
        u = next;
    }
#endif
}

// ---- host side ----

static int rowwin_kernel_rows(const conv_problem* p, int rows) { return p->M <= 16 ? rows : rows / 2; }
// Output rows per MMA (the kernel's GR): 4 maps x 4 rows for up to 4 maps.
static int rowwin_group_rows(const conv_problem* p) { return p->M <= 4 ? 4 : 1; }
// Floats per map in the output tile: even (float2 reads), and 8 banks apart for successive maps.
static int64_t rowwin_ystride(const conv_problem* p, int r) { return (r * conv_out_w(p) + 31) / 32 * 32 + 8; }
// Straight from the fragments: NHWC y without a pool at any OW (a pixel's maps are contiguous, so tiles
// that straddle sectors cost nothing; the last tile, moved left, rewrites its neighbour's values bit for
// bit: C3 in fp16 483 us against 571 staged, H200), NCHW y in whole sectors (OW % 8 == 0, pairs 8-byte
// aligned), or 2x2/2 windows within each tile (OW % 8 == 0, OH even; single stores). Other pools and
// NCHW widths go through the shared tile.
static bool rowwin_direct_stores(const conv_problem* p, const void* y) {
    if (p->y_layout == CONV_NHWC && !mma_pooled(p)) return true;
    if (conv_out_w(p) % ROWWIN_COLS != 0) return false;
    if (!mma_pooled(p)) return ((uintptr_t)y & 7) == 0;
    return p->pool_h == 2 && p->pool_w == 2 && p->pool_stride_h == 2 && p->pool_stride_w == 2 && conv_out_h(p) % 2 == 0;
}
static int64_t rowwin_smem_bytes(const conv_problem* p, int r, bool direct_stores) {
    return p->C * ((rowwin_group_rows(p) + p->KH) / 2) * ((p->M + 15) / 16) * 32 * (int64_t)sizeof(uint4) +
           (direct_stores ? 0 : p->M * rowwin_ystride(p, r) * (int64_t)sizeof(float));
}

// Units (mma_unit_rows) per strip of r conv rows: r rows, or the most pooled rows whose windows fit in r.
static int64_t rowwin_strip_units(const conv_problem* p, int r) {
    return mma_pooled(p) ? (r - p->pool_h) / p->pool_stride_h + 1 : r;
}

int64_t mma_rowwin_computed_rows(const conv_problem* p, int rows) {
    const int r = rowwin_kernel_rows(p, rows);
    return mma_units_per_image(p, rowwin_strip_units(p, r)) * r;
}

int mma_rowwin_fits(const conv_problem* p, int rows) {
    if (rows != 12 && rows != 16)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "mma_fp16 row window: strips of %d rows (12 or 16)", rows);
    const int r = rowwin_kernel_rows(p, rows);
    // x and y of one dtype, and fp16 x with fp32 y (the fast LeNet's C3: fp16 maps in, fp32 into F5);
    // each other pair would add 24 kernels, and the banded kernel takes every pair.
    if (p->x_dtype != p->y_dtype && !(p->x_dtype == CONV_F16 && p->y_dtype == CONV_F32))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: takes x and y of one dtype, or f16 x and f32 y; got x %s, y %s "
                              "(the banded configurations n4_w8 and n4_w8_short take every pair)",
                              conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    // (strided columns, on no suite layer, run the banded configurations)
    if (p->stride_h != 1 || p->stride_w != 1 || p->dilation_h != 1 || p->dilation_w != 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: needs stride 1 and dilation 1 (got stride %lldx%lld, "
                              "dilation %lldx%lld)",
                              (long long)p->stride_h, (long long)p->stride_w, (long long)p->dilation_h,
                              (long long)p->dilation_w);
    // (rows padded above or below, on no suite layer, run the banded configurations: row-tested kernels
    // would double the row window's 96 kernels, the longest compile of the library)
    if (p->pad_h != 0 || p->pad_h_extra != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: takes no padding along the rows (got %lld before, %lld after)",
                              (long long)p->pad_h, (long long)(p->pad_h + p->pad_h_extra));
    if ((p->KH != 5 && p->KH != 7) || p->KW > ROWWIN_COLS)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: needs KH in {5, 7} and KW <= %d (got %lldx%lld)",
                              ROWWIN_COLS, (long long)p->KH, (long long)p->KW);
    if (p->M > ROWWIN_MAX_MAPS)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "mma_fp16 row window: at most %d maps (got M=%lld)",
                              ROWWIN_MAX_MAPS, (long long)p->M);
    if (conv_out_h(p) < r || conv_out_w(p) < ROWWIN_COLS)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: an output of %lldx%lld is smaller than one %dx%d strip",
                              (long long)conv_out_h(p), (long long)conv_out_w(p), r, ROWWIN_COLS);
    if (mma_pooled(p) && p->pool_h > r)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: a pool window of %lld rows is taller than a strip of %d rows",
                              (long long)p->pool_h, r);
    if (rowwin_smem_bytes(p, r, false) > ROWWIN_SMEM_LIMIT)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "mma_fp16 row window: the weights of C=%lld channels x M=%lld maps and an output "
                              "tile of %d rows x OW=%lld need %lld bytes of shared memory, more than %d",
                              (long long)p->C, (long long)p->M, r, (long long)conv_out_w(p),
                              (long long)rowwin_smem_bytes(p, r, false), ROWWIN_SMEM_LIMIT);
    return conv_check_coords("mma_fp16", p, 0, 0);
}

template <class TX, class TY>
using rowwin_kernel = void (*)(rowwin_shape, const TX*, const TX*, mma_out<TY>);

// Kernel rows are in {5, 7}; up to 4 maps take 4-row groups, up to 16 one m16 tile, up to 32
// two (in half-height strips, for the registers).
template <class TX, class TY, int MT, int R, int GR>
static rowwin_kernel<TX, TY> rowwin_kernel_for(const conv_problem* p) {
    return p->KH == 5 ? conv_mma_rowwin_kernel<TX, TY, 5, MT, R, GR> : conv_mma_rowwin_kernel<TX, TY, 7, MT, R, GR>;
}

template <class TX, class TY, int R>
static rowwin_kernel<TX, TY> rowwin_kernel_for(const conv_problem* p) {
    if (p->M <= 4) return rowwin_kernel_for<TX, TY, 1, R, 4>(p);
    return p->M <= 16 ? rowwin_kernel_for<TX, TY, 1, R, 1>(p) : rowwin_kernel_for<TX, TY, 2, R / 2, 1>(p);
}

template <class TX, class TY>
int mma_rowwin_run(const conv_problem* p, const TX* x, const TX* w, const mma_out<TY>& out, cudaStream_t stream,
                   int rows) {
    void* y = out.y;
    const int r = rowwin_kernel_rows(p, rows);
    rowwin_shape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.st = mma_strides_of(p);
    const int64_t units = rowwin_strip_units(p, r);
    s.strips = (int)mma_units_per_image(p, units);
    s.strip_step = (int)mma_unit_step(p, units);
    s.pool_rows = mma_pooled(p) ? (int)units : 0;
    s.xtiles = conv_ceil_div(s.OW, ROWWIN_COLS);
    s.items = (int)(p->B * s.strips);  // <= B*OH, which the dispatcher keeps < 2^31
    s.ystride = (int)rowwin_ystride(p, r);
    s.pair_stores = p->y_layout == CONV_NCHW && s.OW % 2 == 0 && ((uintptr_t)y & 7) == 0;
    s.direct_stores = rowwin_direct_stores(p, y);
    rowwin_kernel<TX, TY> kernel = rows == 12 ? rowwin_kernel_for<TX, TY, 12>(p) : rowwin_kernel_for<TX, TY, 16>(p);
    const size_t smem = (size_t)rowwin_smem_bytes(p, r, s.direct_stores);
    // Staged: a warp per tile (up to 8), as the barriers make a block as slow as its slowest warp.
    // Direct: 4 warps, independent, and more blocks per SM.
    const int max_warps =
        s.direct_stores ? ROWWIN_DIRECT_WARPS : rowwin_max_warps(r / rowwin_group_rows(p), p->M <= 16 ? 1 : 2);
    const int threads = 32 * (s.xtiles < max_warps ? s.xtiles : max_warps);
    // One persistent wave: the A fragments are built once per block, not once per strip.
    int64_t wave = 0;
    int status = conv_wave_blocks(kernel, threads, smem, &wave);
    if (status != CONV_OK) return status;
    kernel<<<conv_wave_grid(s.items, wave, true), threads, smem, stream>>>(s, x, w, out);
    CONV_LAUNCH_CHECK(conv_mma_rowwin_kernel);
    return CONV_OK;
}
template int mma_rowwin_run(const conv_problem*, const float*, const float*, const mma_out<float>&, cudaStream_t, int);
template int mma_rowwin_run(const conv_problem*, const __half*, const __half*, const mma_out<__half>&, cudaStream_t,
                            int);
template int mma_rowwin_run(const conv_problem*, const __nv_bfloat16*, const __nv_bfloat16*,
                            const mma_out<__nv_bfloat16>&, cudaStream_t, int);
template int mma_rowwin_run(const conv_problem*, const __half*, const __half*, const mma_out<float>&, cudaStream_t,
                            int);
