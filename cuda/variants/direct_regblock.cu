// direct_regblock.cu — direct convolution with register blocking, exact fp32 (FFMA only).
//   conv_regblock_fast_kernel<K, MT, PT, ...>: stride 1, dilation 1, square K in {5, 7} (LeNet's filters:
//     the variant's purpose; 1x1 and 3x3 layers belong to the GEMM and Winograd variants, which the tuner
//     picked over this one on every such suite shape, so their unrolled kernels were not worth compiling).
//     A thread owns MT output maps x PT output rows of one output column (a vertical strip). For
//     each filter column kw it loads the strip's input column segment (PT + K - 1 values) into
//     registers once, and each value feeds up to MT*K multiply-adds instead of the one of
//     `direct`. The weights of the block's MT maps sit in shared memory as [tap][map], so one
//     16-byte broadcast load (LDS.128) gives four maps' weights, each used for PT FMAs.
//     Consecutive lanes take consecutive output columns, so every load of x and every store of y
//     is coalesced across the warp (a horizontal strip per thread would scatter each lane's stores
//     over separate 32-byte sectors).
//     KWLOOP = false: kh and kw unrolled; the loads are fixed offsets from the channel's base
//     pointer (one IMAD.WIDE per row, no pointer array to hold in registers). Best for small tiles,
//     whose body still fits the instruction caches.
//     KWLOOP = true: (channel, kw) walked by a run-time loop, kh unrolled, and the next column's
//     loads issued before this column's FMAs. The body is K times smaller (7*MT*PT FFMA), so the
//     large tiles that reuse each load and each weight more stop missing in the instruction
//     caches. It costs a pointer step per row and a register copy per value per column, which is
//     why it loses on small tiles.
//     CHECKED = false (no padding, a column at least one strip tall): no bounds tests at all; the last
//     strip of a column is moved up to end on the last output row (pooled: on the last window),
//     recomputing rows of the strip above bit for bit (same operations in the same order), so it
//     stores all its rows unconditionally.
//     CHECKED = true: inputs outside the image load as zeros and still meet their weights, so a
//     padded tap adds 0 * w (an Inf or NaN weight gives NaN, as in PyTorch).
//     PH > 0 (ReLU + max-pool with window == stride, pool_h = PH in {2, 4} dividing PT, pool_w a power
//     of two up to 32): strips are aligned to the pool windows (PT rows = PT / PH windows) and the
//     lanes still take consecutive conv columns, so loads and FMAs are those of the plain kernel;
//     then + bias, the max over each window's rows in registers and over its pool_w columns
//     (aligned groups of pool_w lanes) by shuffles, ReLU, and one store per pooled value: 4x (2x2) or
//     16x (4x4) fewer bytes written. PH is a template argument so that the window rows, the
//     shuffled rows and the masked rows are known at compile time (a run-time pool height cost the
//     fused LeNet layers a third more instructions than the plain kernel). Ceil mode's partial
//     windows: the missing rows of the last window enter no max (its input rows below the image
//     are clamped into it: no bounds-checked loads), a missing column computes the window's last
//     column again.
//   conv_regblock_generic_kernel<MT, PT, ..., POOL>: any stride, padding, dilation and KH x KW. Same
//     thread tile, but each tap's PT inputs are loaded with bounds tests (zeros outside the image,
//     as CHECKED; MT FMAs per load): the correct fallback for every shape the fast kernel does not
//     template. POOL: any max-pool; a thread owns MT maps x PT pooled rows of one pooled column and
//     walks the window's positions, one pass over the taps each (rows pool_stride_h conv rows apart),
//     keeping the max of + bias and ReLU in registers.
// Without pooling, bias and ReLU are applied to the accumulators just before the store.
// Both walk the filter in chunks of taps (tap = (c, kh, kw), the order of w's rows) that fit a
// fixed shared-memory budget, so any C*KH*KW runs, and both loop over batches of items so that a
// launch may be one persistent wave (weights staged once per block). Measurements of every
// configuration: bench/PERF_NOTES.md.
#include "conv_kernel_util.cuh"
#include "conv_shape.cuh"
#include "launch_util.cuh"

// Floats of weights per shared-memory fill (16 KB), so that several blocks share an SM.
constexpr int REGBLOCK_SMEM_FLOATS = 4096;
// Tallest strip of any configuration: strips may run this many rows minus one past OH.
constexpr int REGBLOCK_MAX_PT = 17;

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW); every count below < 2^31.
struct regblock_shape : ConvShape32 {
    int YH, YW;      // y's plane: OH x OW, or the pooled size under the max-pool epilogue
    int strips;      // vertical strips per column (of PT conv rows, PT pooled rows for generic POOL)
    int cols;        // columns per strip row: OW; fast POOL: YW * pool_w conv columns; generic POOL: YW
    int items;       // B * strips * cols: one strip of one column per thread
    int groups;      // ceil(M / MT): map groups, over blockIdx.y
    int chunk_taps;  // taps whose MT weights one shared-memory fill holds
    int slot_step_h;          // generic kernel: input rows between a thread's PT rows (stride_h, x pool_stride_h)
    int pool_h, pool_w, pool_stride_h, pool_stride_w;
};

// y and the epilogue's operands (bias: M floats or NULL).
struct regblock_out {
    float* y;
    const float* bias;
    bool relu;
};

// Copies taps [t0, t0 + n) of maps [m0, m0 + MT) into s_w as [tap][map], zeros past M.
template <int MT>
__device__ void regblock_stage_weights(const float* __restrict__ w, int taps, int M, int m0, int t0,
                                       int n, float* s_w) {
    __syncthreads();  // nobody still reads the previous fill
    for (int e = threadIdx.x; e < n * MT; e += blockDim.x) {
        const int m = e / n, t = e - m * n;  // tap fastest: coalesced reads of w
        s_w[t * MT + m] = m0 + m < M ? __ldg(w + (m0 + m) * taps + t0 + t) : 0.0f;
    }
    __syncthreads();
}

__device__ __forceinline__ float regblock_bias(const regblock_out& out, int M, int m) {
    return out.bias && m < M ? out.bias[m] : 0.0f;
}

// Writes a thread's MT x PT tile of y's YH x YW plane (rows oh0.., column ow), maps below M only; rows
// below YH only unless ALL_ROWS. The bias + ReLU epilogue, where asked, first (as conv_epilogue_value
// of every other variant: bit for bit the separate ops); without one the plain store is unchanged.
template <int MT, int PT, bool ALL_ROWS>
__device__ __forceinline__ void regblock_store(const regblock_shape& s, const regblock_out& out,
                                               float (&acc)[MT][PT], int b, int m0, int oh0, int ow) {
    if (out.bias || out.relu) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            const float bias_m = regblock_bias(out, s.M, m0 + m);
#pragma unroll
            for (int r = 0; r < PT; ++r) acc[m][r] = conv_epilogue_value(acc[m][r], bias_m, out.relu);
        }
    }
    const int YHW = s.YH * s.YW;
    float* yp = out.y + ((b * s.M + m0) * s.YH + oh0) * s.YW + ow;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        if (m0 + m >= s.M) break;
#pragma unroll
        for (int r = 0; r < PT; ++r)
            if (ALL_ROWS || oh0 + r < s.YH) yp[m * YHW + r * s.YW] = acc[m][r];
    }
}

// max with NaN propagation, as conv_max_nan, in one instruction (FMNMX.NAN) where the GPU has it.
__device__ __forceinline__ float regblock_max_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return conv_max_nan(a, b);
#endif
}

// The fast kernel's pooled store (PH x pool_w windows, stride = window). The thread holds conv rows
// oh0 .. oh0 + PT - 1 (oh0 = a window's first row, so row r starts a window where r % PH == 0) of conv
// column ow; the other pool_w - 1 columns of its window are the lanes of its aligned group. Each value
// gets + bias; a running max down each window's rows leaves the window's max in its last row, shuffles
// take the max across the group, and the group's first lane stores ReLU of it: ReLU is monotonic and
// keeps NaN, so ReLU after the max is ReLU before it. Rows past OH (only a window's non-first rows: a
// window starts inside the conv output; unchecked, only in the strip's last window) enter no max. A
// column past OW (a partial window's) was computed as column OW - 1 of the same window, bit for bit,
// so it enters the max unmasked. Every lane runs the shuffles (spare lanes of the last batch form
// whole groups: items is a multiple of pool_w).
template <int MT, int PT, int PH, bool CHECKED>
__device__ __forceinline__ void regblock_pool_store(const regblock_shape& s, const regblock_out& out,
                                                    float (&acc)[MT][PT], bool owner, int b, int m0, int oh0,
                                                    int ow) {
    constexpr int WPS = PT / PH;  // windows per strip
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        const float bias_m = regblock_bias(out, s.M, m0 + m);
#pragma unroll
        for (int r = 0; r < PT; ++r) {
            float v = acc[m][r] + bias_m;
            if (r % PH != 0 && (CHECKED || r >= PT - PH) && oh0 + r >= s.OH) v = -INFINITY;
            acc[m][r] = r % PH == 0 ? v : regblock_max_nan(acc[m][r - 1], v);
        }
    }
    for (int offset = s.pool_w >> 1; offset > 0; offset >>= 1)
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int k = 0; k < WPS; ++k) {
                float& v = acc[m][k * PH + PH - 1];
                v = regblock_max_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));
            }
    if (!owner || (ow & (s.pool_w - 1)) != 0) return;
    const int YHW = s.YH * s.YW, pr0 = oh0 / PH;
    float* yp = out.y + ((b * s.M + m0) * s.YH + pr0) * s.YW + ow / s.pool_w;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        if (m0 + m >= s.M) break;
#pragma unroll
        for (int k = 0; k < WPS; ++k)  // unchecked strips end on the last window: every row is below YH
            if (!CHECKED || pr0 + k < s.YH) yp[m * YHW + k * s.YW] = regblock_max_nan(acc[m][k * PH + PH - 1], 0.0f);
    }
}

// Item = (image, strip, column), column fastest so that a warp's lanes are neighbours.
__device__ __forceinline__ void regblock_decode(const regblock_shape& s, int item, int& b, int& strip, int& ow) {
    ow = item % s.cols;
    const int rest = item / s.cols;
    strip = rest % s.strips;
    b = rest / s.strips;
}

// Loads the ROWS input values of one column segment (xp = its top, rows W apart). CHECKED: rows
// outside the image (rows_ok) and columns outside it (col_ok) read as zero and are never touched;
// the branch-free path runs wherever the whole segment lies inside the image. CLAMPED: the last
// CLAMPED rows may lie below the image (an unchecked pooled strip ending on a partial window) and read
// row `last` (the segment's last row inside it) instead; they feed only conv rows that enter no max.
template <int ROWS, bool CHECKED, int CLAMPED>
__device__ __forceinline__ void regblock_load_col(const float* xp, int W, bool col_ok, unsigned rows_ok, int last,
                                                  float (&col)[ROWS]) {
    constexpr unsigned ROWS_ALL = ROWS == 32 ? ~0u : (1u << ROWS) - 1;
    if (!CHECKED || (col_ok && rows_ok == ROWS_ALL)) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) col[i] = __ldg(xp + (i < ROWS - CLAMPED ? i : min(i, last)) * W);
    } else {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) col[i] = col_ok && ((rows_ok >> i) & 1u) ? __ldg(xp + i * W) : 0.0f;
    }
}

// One tap on a thread's tile: acc[m][r] += w(m) * v[off + r] for its MT maps and PT rows, the MT
// weights read as MT/4 float4s (wt: the tap's first; one LDS.128 broadcast each).
template <int MT, int PT, int N>
__device__ __forceinline__ void regblock_fma_tap(const float4* wt, const float (&v)[N], int off,
                                                 float (&acc)[MT][PT]) {
#pragma unroll
    for (int q = 0; q < MT / 4; ++q) {
        const float4 wv = wt[q];
#pragma unroll
        for (int r = 0; r < PT; ++r) {
            acc[4 * q + 0][r] = fmaf(wv.x, v[off + r], acc[4 * q + 0][r]);
            acc[4 * q + 1][r] = fmaf(wv.y, v[off + r], acc[4 * q + 1][r]);
            acc[4 * q + 2][r] = fmaf(wv.z, v[off + r], acc[4 * q + 2][r]);
            acc[4 * q + 3][r] = fmaf(wv.w, v[off + r], acc[4 * q + 3][r]);
        }
    }
}

// Stride 1, dilation 1, K x K taps; one thread = MT maps x PT rows of one output column; PH > 0: the
// ReLU + PH-row max-pool store. The bounds tests of CHECKED need registers: one block per SM fewer.
template <int K, int MT, int PT, int THREADS, int MIN_BLOCKS, bool CHECKED, bool KWLOOP, int PH>
__global__ void __launch_bounds__(THREADS, CHECKED && MIN_BLOCKS > 1 ? MIN_BLOCKS - 1 : MIN_BLOCKS)
    conv_regblock_fast_kernel(regblock_shape s, const float* __restrict__ x, const float* __restrict__ w,
                              regblock_out out) {
    constexpr int KK = K * K, Q = MT / 4, ROWS = PT + K - 1;
    constexpr bool POOL = PH > 0;
    constexpr int WPS = POOL ? PT / PH : 1;  // pool windows per strip
    // Unchecked pooled strips end on the last window, whose last PH - 1 rows may lie past OH (ceil
    // mode): so may the last PH - 1 rows of their input segments, which read clamped into the image.
    constexpr int CLAMPED = POOL && !CHECKED ? PH - 1 : 0;
    static_assert(ROWS <= 32, "row validity is a 32-bit mask");
    static_assert(PT % (POOL ? PH : 1) == 0, "pooled strips hold whole windows");
    extern __shared__ float4 s_w4[];  // [tap in fill][MT / 4]
    const int HW = s.H * s.W, step = gridDim.x * THREADS;
    const int chunk_c = s.chunk_taps / KK;  // channels per fill
    const bool one_fill = chunk_c >= s.C;
    for (int g = blockIdx.y; g < s.groups; g += gridDim.y) {
        if (one_fill) regblock_stage_weights<MT>(w, s.C * KK, s.M, g * MT, 0, s.C * KK, (float*)s_w4);
        for (int first = blockIdx.x * THREADS; first < s.items; first += step) {
            // Spare lanes of the last batch redo the last item and store nothing: every thread
            // must reach the barriers of the weight fills.
            const bool owner = first + (int)threadIdx.x < s.items;
            const int item = owner ? first + threadIdx.x : s.items - 1;
            int b, strip, ow;
            regblock_decode(s, item, b, strip, ow);
            // Unchecked, the last strip of a column is moved up to end on the last row (pooled: on
            // the last window), recomputing rows (windows) of the strip above bit for bit. A column
            // past the last (a partial window's) computes the last one again.
            int oh0;
            if constexpr (POOL)
                oh0 = (CHECKED ? strip * WPS : min(strip * WPS, s.YH - WPS)) * PH;
            else
                oh0 = CHECKED ? strip * PT : min(strip * PT, s.OH - PT);
            const int ih0 = oh0 - s.pad_h, iw0 = (POOL ? min(ow, s.OW - 1) : ow) - s.pad_w;
            const int last = s.H - 1 - ih0;  // the segment's last row inside the image (CLAMPED)
            unsigned rows_ok = 0;  // bit i: input row ih0 + i lies in the image
#pragma unroll
            for (int i = 0; i < ROWS; ++i) rows_ok |= (unsigned)((unsigned)(ih0 + i) < (unsigned)s.H) << i;
            // Channel 0, row ih0, column iw0; rows and columns outside the image are never read.
            const float* xc = x + (b * s.C * s.H + ih0) * s.W + iw0;

            float acc[MT][PT];
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int r = 0; r < PT; ++r) acc[m][r] = 0.0f;

            for (int c0 = 0; c0 < s.C; c0 += chunk_c) {
                const int cn = min(chunk_c, s.C - c0);
                if (!one_fill)
                    regblock_stage_weights<MT>(w, s.C * KK, s.M, g * MT, c0 * KK, cn * KK, (float*)s_w4);
                if constexpr (KWLOOP) {
                    // (c, kw) walked at run time, kh unrolled: a K times smaller loop body (7*MT*PT
                    // FFMA for K = 7) that fits the instruction caches. The next column's loads
                    // (the next channel's first column after the last kw) are issued before this
                    // column's FMAs, so their latency hides behind them; the last step reloads its
                    // own column instead of reading past the chunk.
                    const int steps = cn * K;
                    const float* xp = xc;     // column (c, kw): channel c's base + kw
                    const float4* wp = s_w4;  // weights of (c, kh = 0, kw)
                    int kw = 0;
                    float col[ROWS];
                    regblock_load_col<ROWS, CHECKED, CLAMPED>(xp, s.W, (unsigned)iw0 < (unsigned)s.W, rows_ok,
                                                              last, col);
#pragma unroll 1
                    for (int t = 0; t < steps; ++t) {
                        const bool last_kw = kw == K - 1, more = t + 1 < steps;
                        const float* np = !last_kw ? xp + 1 : more ? xp - (K - 1) + HW : xp;
                        const int nkw = !last_kw ? kw + 1 : more ? 0 : kw;
                        float nxt[ROWS];
                        regblock_load_col<ROWS, CHECKED, CLAMPED>(np, s.W, (unsigned)(iw0 + nkw) < (unsigned)s.W,
                                                                  rows_ok, last, nxt);
#pragma unroll
                        for (int kh = 0; kh < K; ++kh) regblock_fma_tap(wp + kh * K * Q, col, kh, acc);
#pragma unroll
                        for (int i = 0; i < ROWS; ++i) col[i] = nxt[i];
                        wp += last_kw ? (KK - K + 1) * Q : Q;
                        xp = np;
                        kw = nkw;
                    }
                    xc += cn * HW;
                } else {
#pragma unroll 1
                for (int c = 0; c < cn; ++c, xc += HW) {
                    const float4* wc = s_w4 + c * KK * Q;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        float col[ROWS];
                        regblock_load_col<ROWS, CHECKED, CLAMPED>(xc + kw, s.W, (unsigned)(iw0 + kw) < (unsigned)s.W,
                                                                  rows_ok, last, col);
#pragma unroll
                        for (int kh = 0; kh < K; ++kh) regblock_fma_tap(wc + (kh * K + kw) * Q, col, kh, acc);
                    }
                }
                }
            }
            if constexpr (POOL)
                regblock_pool_store<MT, PT, PH, CHECKED>(s, out, acc, owner, b, g * MT, oh0, ow);
            else if (owner)
                regblock_store<MT, PT, !CHECKED>(s, out, acc, b, g * MT, oh0, ow);
        }
    }
}

// Any stride, padding, dilation, KH x KW; one thread = MT maps x PT rows of one output column (POOL:
// of one pooled column, each row the max over its window).
template <int MT, int PT, int THREADS, int MIN_BLOCKS, bool POOL>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_regblock_generic_kernel(regblock_shape s,
                                                                        const float* __restrict__ x,
                                                                        const float* __restrict__ w,
                                                                        regblock_out out) {
    constexpr int Q = MT / 4;
    extern __shared__ float4 s_w4[];  // [tap in fill][MT / 4]
    const int HW = s.H * s.W, taps = s.C * s.KH * s.KW;
    const bool one_fill = s.chunk_taps >= taps;
    for (int g = blockIdx.y; g < s.groups; g += gridDim.y) {
        if (one_fill) regblock_stage_weights<MT>(w, taps, s.M, g * MT, 0, taps, (float*)s_w4);
        for (int first = blockIdx.x * THREADS; first < s.items; first += gridDim.x * THREADS) {
            const bool owner = first + (int)threadIdx.x < s.items;
            const int item = owner ? first + threadIdx.x : s.items - 1;
            int b, strip, col;
            regblock_decode(s, item, b, strip, col);
            const int row0 = strip * PT;  // the thread's first y row (conv row, or pooled row under POOL)
            const float* xb = x + b * s.C * HW;

            float best[MT][PT];  // POOL: the max so far of each pooled value (after bias and ReLU)
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int r = 0; r < PT; ++r) best[m][r] = -INFINITY;
            // The window's positions (one without pooling), the same count in every thread: the
            // weight fills below hold barriers.
            const int win_h = POOL ? s.pool_h : 1, win_w = POOL ? s.pool_w : 1;
            for (int pos = 0; pos < win_h * win_w; ++pos) {
                const int i = pos / win_w, j = pos - i * win_w;
                const int oh_first = POOL ? row0 * s.pool_stride_h + i : row0;  // conv row of row 0
                const int ow_pos = POOL ? col * s.pool_stride_w + j : col;
                const bool col_ok = ow_pos < s.OW;  // else a partial window's missing column: no max
                const int ow = min(ow_pos, s.OW - 1);
                const int ih_first = oh_first * s.stride_h - s.pad_h, iw_first = ow * s.stride_w - s.pad_w;

                float acc[MT][PT];
#pragma unroll
                for (int m = 0; m < MT; ++m)
#pragma unroll
                    for (int r = 0; r < PT; ++r) acc[m][r] = 0.0f;

                int c = 0, kh = 0, kw = 0;  // the next tap, carried across fills
                for (int t0 = 0; t0 < taps; t0 += s.chunk_taps) {
                    const int n = min(s.chunk_taps, taps - t0);
                    if (!one_fill) regblock_stage_weights<MT>(w, taps, s.M, g * MT, t0, n, (float*)s_w4);
#pragma unroll 1
                    for (int t = 0; t < n; ++t) {
                        const int iw = iw_first + kw * s.dil_w, ih = ih_first + kh * s.dil_h;
                        const bool colok = (unsigned)iw < (unsigned)s.W;
                        const float* xc = xb + c * HW + iw;
                        float v[PT];
#pragma unroll
                        for (int r = 0; r < PT; ++r) {
                            const int ihr = ih + r * s.slot_step_h;
                            v[r] = (colok && (unsigned)ihr < (unsigned)s.H) ? __ldg(xc + ihr * s.W) : 0.0f;
                        }
                        regblock_fma_tap(s_w4 + t * Q, v, 0, acc);
                        if (++kw == s.KW) {
                            kw = 0;
                            if (++kh == s.KH) { kh = 0; ++c; }
                        }
                    }
                }
                if constexpr (POOL) {
#pragma unroll
                    for (int m = 0; m < MT; ++m) {
                        const float bias_m = regblock_bias(out, s.M, g * MT + m);
#pragma unroll
                        for (int r = 0; r < PT; ++r)
                            if (col_ok && oh_first + r * s.pool_stride_h < s.OH)
                                best[m][r] = conv_max_nan(best[m][r], conv_epilogue_value(acc[m][r], bias_m, true));
                    }
                } else if (owner) {
                    regblock_store<MT, PT, false>(s, out, acc, b, g * MT, row0, col);
                }
            }
            if (POOL && owner) {
                const regblock_out plain = {out.y, nullptr, false};  // the epilogue is in best already
                regblock_store<MT, PT, false>(s, plain, best, b, g * MT, row0, col);
            }
        }
    }
}

// ---- host side ----

static bool regblock_is_fast(const conv_problem* p) {
    return p->stride_h == 1 && p->stride_w == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
           p->KH == p->KW && (p->KH == 5 || p->KH == 7);
}

static bool regblock_pooled(const conv_problem* p) { return p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL; }

// Which kernel runs a problem with strips of PT rows: the fast one where it templates the conv (the
// pooled fast one where the windows tile its strips: window == stride, pool_h 2 or 4 (templated, so
// that the window's rows are known at compile time) dividing PT, pool_w a power of two up to a warp,
// and its items within 32-bit indexing), else the generic one.
enum regblock_kind { REGBLOCK_GENERIC, REGBLOCK_FAST, REGBLOCK_FAST_POOL };

static regblock_kind regblock_kind_for(const conv_problem* p, int PT) {
    if (!regblock_is_fast(p)) return REGBLOCK_GENERIC;
    if (!regblock_pooled(p)) return REGBLOCK_FAST;
    if (p->pool_stride_h != p->pool_h || p->pool_stride_w != p->pool_w || (p->pool_h != 2 && p->pool_h != 4) ||
        PT % p->pool_h != 0 || p->pool_w > 32 || (p->pool_w & (p->pool_w - 1)) != 0)
        return REGBLOCK_GENERIC;
    const int64_t windows = PT / p->pool_h, strips = (conv_y_h(p) + windows - 1) / windows;
    return p->B * strips * conv_y_w(p) * p->pool_w <= CONV_INDEX_LIMIT ? REGBLOCK_FAST_POOL : REGBLOCK_GENERIC;
}

static regblock_shape regblock_shape_for(const conv_problem* p, int MT, int PT, regblock_kind kind) {
    regblock_shape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.YH = (int)conv_y_h(p);
    s.YW = (int)conv_y_w(p);
    const bool pooled = regblock_pooled(p);
    s.pool_h = pooled ? (int)p->pool_h : 1;
    s.pool_w = pooled ? (int)p->pool_w : 1;
    s.pool_stride_h = pooled ? (int)p->pool_stride_h : 1;
    s.pool_stride_w = pooled ? (int)p->pool_stride_w : 1;
    s.slot_step_h = s.stride_h * s.pool_stride_h;
    if (kind == REGBLOCK_FAST_POOL) {  // PT / pool_h windows per strip, pool_w lanes per pooled column
        s.strips = conv_ceil_div(s.YH, PT / s.pool_h);
        s.cols = s.YW * s.pool_w;
    } else {  // PT rows of y per strip (conv rows, or pooled rows for the generic POOL kernel)
        s.strips = conv_ceil_div(s.YH, PT);
        s.cols = s.YW;
    }
    // <= B*YH*YW (fast: B*OH*OW; fast POOL: checked by regblock_kind_for): the dispatcher keeps those < 2^31.
    s.items = (int)(p->B * s.strips * s.cols);
    s.groups = conv_ceil_div(s.M, MT);
    const int taps = s.C * s.KH * s.KW, per_fill = REGBLOCK_SMEM_FLOATS / MT;
    if (kind != REGBLOCK_GENERIC) {  // whole channels per fill: the fast kernel walks taps channel by channel
        const int kk = s.KH * s.KW, chans = per_fill / kk;
        s.chunk_taps = (chans < s.C ? chans : s.C) * kk;
    } else {
        s.chunk_taps = per_fill < taps ? per_fill : taps;
    }
    return s;
}

typedef void (*regblock_kernel)(regblock_shape, const float*, const float*, regblock_out);

// wave_only: one wave of persistent blocks (as many as fit on the GPU at once, shared among the
// gridDim.y map groups), each looping over batches of items: the weights are staged once per block
// and the warps drift apart, so that some load while others compute. Else a block per batch of items.
static int regblock_launch_grid(regblock_kernel kernel, bool fast, const regblock_shape& s, int threads,
                                size_t smem, bool wave_only, cudaStream_t stream, const float* x, const float* w,
                                const regblock_out& out) {
    int64_t wave = 0;
    int status = conv_wave_blocks(kernel, threads, smem, &wave);
    if (status != CONV_OK) return status;
    const int64_t gy = s.groups < GRID_Y_LIMIT ? s.groups : GRID_Y_LIMIT;
    const int64_t need = ((int64_t)s.items + threads - 1) / threads;
    const unsigned gx = conv_wave_grid(need, (wave + gy - 1) / gy, wave_only);
    kernel<<<dim3(gx, (unsigned)gy), threads, smem, stream>>>(s, x, w, out);
    conv_note_launch(fast ? "conv_regblock_fast_kernel" : "conv_regblock_generic_kernel");
    CONV_CUDA_CHECK(cudaGetLastError());
    return CONV_OK;
}

template <int K, int MT, int PT, int THREADS, int MIN_BLOCKS, bool KWLOOP, int PH>
static regblock_kernel regblock_fast_kernel_k(bool checked) {
    return checked ? conv_regblock_fast_kernel<K, MT, PT, THREADS, MIN_BLOCKS, true, KWLOOP, PH>
                   : conv_regblock_fast_kernel<K, MT, PT, THREADS, MIN_BLOCKS, false, KWLOOP, PH>;
}

// PH: 0 (no pooling) or the pool height of the pooled kernel.
template <int MT, int PT, int THREADS, int MIN_BLOCKS, bool KWLOOP, int PH>
static regblock_kernel regblock_fast_kernel_for(int K, bool checked) {
    return K == 5 ? regblock_fast_kernel_k<5, MT, PT, THREADS, MIN_BLOCKS, KWLOOP, PH>(checked)
                  : regblock_fast_kernel_k<7, MT, PT, THREADS, MIN_BLOCKS, KWLOOP, PH>(checked);
}

// The pooled fast kernel for pool_h 2 or 4 dividing PT (regblock_kind_for: odd strips never pool).
template <int MT, int PT, int THREADS, int MIN_BLOCKS, bool KWLOOP>
static regblock_kernel regblock_fast_pool_kernel_for(int pool_h, int K, bool checked) {
    if constexpr (PT % 2 != 0) {
        return nullptr;
    } else {
        constexpr int PH_TALL = PT % 4 == 0 ? 4 : 2;
        return pool_h == PH_TALL ? regblock_fast_kernel_for<MT, PT, THREADS, MIN_BLOCKS, KWLOOP, PH_TALL>(K, checked)
                                 : regblock_fast_kernel_for<MT, PT, THREADS, MIN_BLOCKS, KWLOOP, 2>(K, checked);
    }
}

// One configuration: the fast kernel (plain or pooled) where it applies, the generic one elsewhere;
// bias and ReLU where the problem asks for them.
template <int MT, int PT, int THREADS, int MIN_BLOCKS, bool WAVE, bool KWLOOP>
static int regblock_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    static_assert(MT % 4 == 0 && PT <= REGBLOCK_MAX_PT, "maps per thread come in float4s");
    const regblock_kind kind = regblock_kind_for(p, PT);
    const regblock_shape s = regblock_shape_for(p, MT, PT, kind);
    const size_t smem = (size_t)s.chunk_taps * MT * sizeof(float);
    const bool pooled = regblock_pooled(p);
    regblock_kernel kernel = pooled ? conv_regblock_generic_kernel<MT, PT, THREADS, MIN_BLOCKS, true>
                                    : conv_regblock_generic_kernel<MT, PT, THREADS, MIN_BLOCKS, false>;
    if (kind != REGBLOCK_GENERIC) {
        // Any padding, the end padding of 'same' included, puts taps outside the image; so does a
        // column shorter than one strip (pooled: than its PT / pool_h windows), which no strip moved
        // up can cover.
        const bool checked = p->pad_h != 0 || p->pad_w != 0 || p->pad_h_extra != 0 || p->pad_w_extra != 0 ||
                             (kind == REGBLOCK_FAST_POOL ? s.YH < PT / s.pool_h : s.OH < PT);
        kernel = kind == REGBLOCK_FAST_POOL
                     ? regblock_fast_pool_kernel_for<MT, PT, THREADS, MIN_BLOCKS, KWLOOP>(s.pool_h, s.KH, checked)
                     : regblock_fast_kernel_for<MT, PT, THREADS, MIN_BLOCKS, KWLOOP, 0>(s.KH, checked);
    }
    const regblock_out out = {static_cast<float*>(t->y), p->bias ? static_cast<const float*>(t->bias) : nullptr,
                              p->epilogue >= CONV_EPILOGUE_RELU};
    return regblock_launch_grid(kernel, kind != REGBLOCK_GENERIC, s, THREADS, smem, WAVE, conv_stream(stream),
                                static_cast<const float*>(t->x), static_cast<const float*>(t->w), out);
}

// The tunable configurations: maps per thread x rows per thread x threads per block (with the
// blocks per SM that __launch_bounds__ asks for, which caps the registers at 64K / (threads *
// blocks)), one persistent wave of blocks or a block per batch of items, and ("_kwloop") the
// run-time kw loop. Each kept one won a measured case (bench/PERF_NOTES.md): C1 (4 x 8), C3 (8 x 17
// kwloop), C1 and C3 at B = 100 (4 x 10, 4 x 17); 8 x 8 is the default for M > 16. 8 x 12 kwloop is
// C3 fused with its 4x4 max-pool: 3 windows per strip, 36 rows for its 34 (17 rows hold no whole
// number of windows, and 8 or 16 rows compute 40 or 48), unchecked since the strips end on the last
// window (C3 + ReLU + pool 1.74 ms against the plain conv's 1.52 ms at B = 10000, H100).
static const conv_config REGBLOCK_CONFIGS[] = {
    {"m4_p8_t256_wave", regblock_run<4, 8, 256, 2, true, false>, NULL},
    {"m4_p10_t256_wave", regblock_run<4, 10, 256, 2, true, false>, NULL},
    {"m4_p17_t128_wave", regblock_run<4, 17, 128, 3, true, false>, NULL},
    {"m8_p8_t256_grid", regblock_run<8, 8, 256, 2, false, false>, NULL},
    {"m8_p17_t128_wave_kwloop", regblock_run<8, 17, 128, 2, true, true>, NULL},
    {"m8_p12_t128_wave_kwloop", regblock_run<8, 12, 128, 3, true, true>, NULL},
};

// Below this many threads (at 8 rows per strip) the batch fills the H100 only a few times over, and
// taller strips (fewer, longer threads) ran faster.
constexpr long long REGBLOCK_SMALL_THREADS = 1LL << 18;

// The default, from the H100 sweeps (bench/PERF_NOTES.md). Large batches: 4 maps x 8 rows, fully
// unrolled, in one persistent wave for M <= 4 (C1: the run-time kw loop lost there, its per-step
// pointer and copy overhead weighs more than the instruction-cache stalls of this small body); for
// more maps with 7x7 filters, 8 maps x 17 rows with the run-time kw loop (C3), where 17-row strips
// pad no more rows than 8-row ones. Many maps (not measured) get 8 per thread, so that x is re-read
// fewer times; small batches get the strip height that wastes the fewest rows. Under the max-pool
// epilogue, the first of these whose strips hold whole windows (the fast pooled kernel): 8 x 12 kwloop
// for more maps with 7x7 filters (C3), 4 x 8 (C1; 8 x 8 for many maps), 4 x 10.
static const char* regblock_default_config(const conv_problem* p) {
    if (regblock_pooled(p)) {
        if (p->M > 4 && p->KH == 7 && regblock_kind_for(p, 12) == REGBLOCK_FAST_POOL) return "m8_p12_t128_wave_kwloop";
        if (regblock_kind_for(p, 8) == REGBLOCK_FAST_POOL) return p->M > 16 ? "m8_p8_t256_grid" : "m4_p8_t256_wave";
        if (regblock_kind_for(p, 10) == REGBLOCK_FAST_POOL) return "m4_p10_t256_wave";
    }
    if (p->M > 16) return "m8_p8_t256_grid";
    const int64_t OH = conv_out_h(p);
    const long long threads = (long long)p->B * ((OH + 7) / 8) * conv_out_w(p) * ((p->M + 3) / 4);
    const int64_t rows8 = (OH + 7) / 8 * 8, rows10 = (OH + 9) / 10 * 10, rows17 = (OH + 16) / 17 * 17;
    if (threads >= REGBLOCK_SMALL_THREADS)
        return p->M > 4 && p->KH == 7 && p->KW == 7 && rows17 <= rows8 && regblock_is_fast(p)
                   ? "m8_p17_t128_wave_kwloop"
                   : "m4_p8_t256_wave";
    return rows17 <= rows10 ? "m4_p17_t128_wave" : "m4_p10_t256_wave";
}

// Strips may run REGBLOCK_MAX_PT - 1 rows past the last (pooled: that many windows, pool_stride_h
// conv rows apart, each pool_h tall); columns past the last are clamped.
static int regblock_supports(const conv_problem* p) {
    const int64_t slack = regblock_pooled(p) ? (REGBLOCK_MAX_PT - 1) * p->pool_stride_h + p->pool_h : REGBLOCK_MAX_PT - 1;
    return conv_check_coords("direct_regblock", p, slack, 0);
}

extern "C" const conv_impl conv_impl_direct_regblock = {
    regblock_supports, NULL, REGBLOCK_CONFIGS, (int)(sizeof REGBLOCK_CONFIGS / sizeof REGBLOCK_CONFIGS[0]),
    regblock_default_config};

