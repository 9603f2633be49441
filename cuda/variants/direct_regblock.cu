// direct_regblock.cu — direct convolution with register blocking, exact fp32 (FFMA only).
//   conv_regblock_fast_kernel<K, MT, PT, ...>: stride 1, dilation 1, square K in {1, 3, 5, 7}.
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
//     CHECKED = false (no padding, OH >= PT): no bounds tests at all; the last strip of a column
//     is moved up to end on the last output row, recomputing rows of the strip above bit for bit
//     (same operations in the same order), so it stores all its rows unconditionally.
//     CHECKED = true: inputs outside the image load as zeros and still meet their weights, so a
//     padded tap adds 0 * w (an Inf or NaN weight gives NaN, as in PyTorch).
//   conv_regblock_generic_kernel<MT, PT, ...>: any stride, padding, dilation and KH x KW. Same
//     thread tile, but each tap's PT inputs are loaded with bounds tests (zeros outside the image,
//     as CHECKED; MT FMAs per load): the correct fallback for every shape the fast kernel does not
//     template.
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
    int strips;      // ceil(OH / PT): vertical strips per output column
    int items;       // B * strips * OW: one strip of one column per thread
    int groups;      // ceil(M / MT): map groups, over blockIdx.y
    int chunk_taps;  // taps whose MT weights one shared-memory fill holds
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

// Writes a thread's MT x PT tile, maps below M only; rows below OH only unless ALL_ROWS.
template <int MT, int PT, bool ALL_ROWS>
__device__ __forceinline__ void regblock_store(const regblock_shape& s, float (&acc)[MT][PT], float* y, int b,
                                               int m0, int oh0, int ow) {
    const int OHW = s.OH * s.OW;
    float* yp = y + ((b * s.M + m0) * s.OH + oh0) * s.OW + ow;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        if (m0 + m >= s.M) break;
#pragma unroll
        for (int r = 0; r < PT; ++r)
            if (ALL_ROWS || oh0 + r < s.OH) yp[m * OHW + r * s.OW] = acc[m][r];
    }
}

// Item = (image, strip, output column), column fastest so that a warp's lanes are neighbours.
__device__ __forceinline__ void regblock_decode(const regblock_shape& s, int item, int& b, int& strip, int& ow) {
    ow = item % s.OW;
    const int rest = item / s.OW;
    strip = rest % s.strips;
    b = rest / s.strips;
}

// Loads the ROWS input values of one column segment (xp = its top, rows W apart). CHECKED: rows
// outside the image (rows_ok) and columns outside it (col_ok) read as zero and are never touched;
// the branch-free path runs wherever the whole segment lies inside the image.
template <int ROWS, bool CHECKED>
__device__ __forceinline__ void regblock_load_col(const float* xp, int W, bool col_ok, unsigned rows_ok,
                                                  float (&col)[ROWS]) {
    constexpr unsigned ROWS_ALL = ROWS == 32 ? ~0u : (1u << ROWS) - 1;
    if (!CHECKED || (col_ok && rows_ok == ROWS_ALL)) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) col[i] = __ldg(xp + i * W);
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

// Stride 1, dilation 1, K x K taps; one thread = MT maps x PT rows of one output column.
// The bounds tests of CHECKED need registers: it asks for one block per SM fewer.
template <int K, int MT, int PT, int THREADS, int MIN_BLOCKS, bool CHECKED, bool KWLOOP>
__global__ void __launch_bounds__(THREADS, CHECKED && MIN_BLOCKS > 1 ? MIN_BLOCKS - 1 : MIN_BLOCKS)
    conv_regblock_fast_kernel(regblock_shape s, const float* __restrict__ x, const float* __restrict__ w,
                              float* __restrict__ y) {
    constexpr int KK = K * K, Q = MT / 4, ROWS = PT + K - 1;
    static_assert(ROWS <= 32, "row validity is a 32-bit mask");
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
            const int oh0 = CHECKED ? strip * PT : min(strip * PT, s.OH - PT);
            const int ih0 = oh0 - s.pad_h, iw0 = ow - s.pad_w;
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
                    regblock_load_col<ROWS, CHECKED>(xp, s.W, (unsigned)iw0 < (unsigned)s.W, rows_ok, col);
#pragma unroll 1
                    for (int t = 0; t < steps; ++t) {
                        const bool last_kw = kw == K - 1, more = t + 1 < steps;
                        const float* np = !last_kw ? xp + 1 : more ? xp - (K - 1) + HW : xp;
                        const int nkw = !last_kw ? kw + 1 : more ? 0 : kw;
                        float nxt[ROWS];
                        regblock_load_col<ROWS, CHECKED>(np, s.W, (unsigned)(iw0 + nkw) < (unsigned)s.W, rows_ok,
                                                         nxt);
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
                        regblock_load_col<ROWS, CHECKED>(xc + kw, s.W, (unsigned)(iw0 + kw) < (unsigned)s.W,
                                                         rows_ok, col);
#pragma unroll
                        for (int kh = 0; kh < K; ++kh) regblock_fma_tap(wc + (kh * K + kw) * Q, col, kh, acc);
                    }
                }
                }
            }
            if (owner) regblock_store<MT, PT, !CHECKED>(s, acc, y, b, g * MT, oh0, ow);
        }
    }
}

// Any stride, padding, dilation, KH x KW; one thread = MT maps x PT rows of one output column.
template <int MT, int PT, int THREADS, int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) conv_regblock_generic_kernel(regblock_shape s,
                                                                        const float* __restrict__ x,
                                                                        const float* __restrict__ w,
                                                                        float* __restrict__ y) {
    constexpr int Q = MT / 4;
    extern __shared__ float4 s_w4[];  // [tap in fill][MT / 4]
    const int HW = s.H * s.W, taps = s.C * s.KH * s.KW;
    const bool one_fill = s.chunk_taps >= taps;
    for (int g = blockIdx.y; g < s.groups; g += gridDim.y) {
        if (one_fill) regblock_stage_weights<MT>(w, taps, s.M, g * MT, 0, taps, (float*)s_w4);
        for (int first = blockIdx.x * THREADS; first < s.items; first += gridDim.x * THREADS) {
            const bool owner = first + (int)threadIdx.x < s.items;
            const int item = owner ? first + threadIdx.x : s.items - 1;
            int b, strip, ow;
            regblock_decode(s, item, b, strip, ow);
            const int oh0 = strip * PT;
            const int ih_first = oh0 * s.stride_h - s.pad_h, iw_first = ow * s.stride_w - s.pad_w;
            const float* xb = x + b * s.C * HW;

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
                        const int ihr = ih + r * s.stride_h;
                        v[r] = (colok && (unsigned)ihr < (unsigned)s.H) ? __ldg(xc + ihr * s.W) : 0.0f;
                    }
                    regblock_fma_tap(s_w4 + t * Q, v, 0, acc);
                    if (++kw == s.KW) {
                        kw = 0;
                        if (++kh == s.KH) { kh = 0; ++c; }
                    }
                }
            }
            if (owner) regblock_store<MT, PT, false>(s, acc, y, b, g * MT, oh0, ow);
        }
    }
}

// ---- host side ----

static regblock_shape regblock_shape_for(const conv_problem* p, int MT, int PT, bool fast) {
    regblock_shape s;
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.strips = conv_ceil_div(s.OH, PT);
    s.items = (int)(p->B * s.strips * s.OW);  // <= B*OH*OW, which the dispatcher keeps < 2^31
    s.groups = conv_ceil_div(s.M, MT);
    const int taps = s.C * s.KH * s.KW, per_fill = REGBLOCK_SMEM_FLOATS / MT;
    if (fast) {  // whole channels per fill: the fast kernel walks taps channel by channel
        const int kk = s.KH * s.KW, chans = per_fill / kk;
        s.chunk_taps = (chans < s.C ? chans : s.C) * kk;
    } else {
        s.chunk_taps = per_fill < taps ? per_fill : taps;
    }
    return s;
}

static bool regblock_is_fast(const conv_problem* p) {
    return p->stride_h == 1 && p->stride_w == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
           p->KH == p->KW && (p->KH == 1 || p->KH == 3 || p->KH == 5 || p->KH == 7);
}

typedef void (*regblock_kernel)(regblock_shape, const float*, const float*, float*);

// wave_only: one wave of persistent blocks (as many as fit on the GPU at once, shared among the
// gridDim.y map groups), each looping over batches of items: the weights are staged once per block
// and the warps drift apart, so that some load while others compute. Else a block per batch of items.
static int regblock_launch_grid(regblock_kernel kernel, bool fast, const regblock_shape& s, int threads,
                                size_t smem, bool wave_only, cudaStream_t stream, const float* x, const float* w,
                                float* y) {
    int64_t wave = 0;
    int status = conv_wave_blocks(kernel, threads, smem, &wave);
    if (status != CONV_OK) return status;
    const int64_t gy = s.groups < GRID_Y_LIMIT ? s.groups : GRID_Y_LIMIT;
    const int64_t need = ((int64_t)s.items + threads - 1) / threads;
    const unsigned gx = conv_wave_grid(need, (wave + gy - 1) / gy, wave_only);
    kernel<<<dim3(gx, (unsigned)gy), threads, smem, stream>>>(s, x, w, y);
    conv_note_launch(fast ? "conv_regblock_fast_kernel" : "conv_regblock_generic_kernel");
    CONV_CUDA_CHECK(cudaGetLastError());
    return CONV_OK;
}

template <int K, int MT, int PT, int THREADS, int MIN_BLOCKS, bool KWLOOP>
static regblock_kernel regblock_fast_kernel_for(bool checked) {
    return checked ? conv_regblock_fast_kernel<K, MT, PT, THREADS, MIN_BLOCKS, true, KWLOOP>
                   : conv_regblock_fast_kernel<K, MT, PT, THREADS, MIN_BLOCKS, false, KWLOOP>;
}

// One configuration: the fast kernel where it applies, the generic one elsewhere.
template <int MT, int PT, int THREADS, int MIN_BLOCKS, bool WAVE, bool KWLOOP>
static int regblock_run(const conv_problem* p, const float* x, const float* w, float* y, cudaStream_t stream) {
    static_assert(MT % 4 == 0 && PT <= REGBLOCK_MAX_PT, "maps per thread come in float4s");
    const bool fast = regblock_is_fast(p);
    const regblock_shape s = regblock_shape_for(p, MT, PT, fast);
    const size_t smem = (size_t)s.chunk_taps * MT * sizeof(float);
    regblock_kernel kernel = conv_regblock_generic_kernel<MT, PT, THREADS, MIN_BLOCKS>;
    if (fast) {
        // Any padding, the end padding of 'same' included, puts taps outside the image.
        const bool checked = p->pad_h != 0 || p->pad_w != 0 || p->pad_h_extra != 0 || p->pad_w_extra != 0 ||
                             s.OH < PT;
        switch (s.KH) {
            case 1: kernel = regblock_fast_kernel_for<1, MT, PT, THREADS, MIN_BLOCKS, KWLOOP>(checked); break;
            case 3: kernel = regblock_fast_kernel_for<3, MT, PT, THREADS, MIN_BLOCKS, KWLOOP>(checked); break;
            case 5: kernel = regblock_fast_kernel_for<5, MT, PT, THREADS, MIN_BLOCKS, KWLOOP>(checked); break;
            default: kernel = regblock_fast_kernel_for<7, MT, PT, THREADS, MIN_BLOCKS, KWLOOP>(checked); break;
        }
    }
    return regblock_launch_grid(kernel, fast, s, THREADS, smem, WAVE, stream, x, w, y);
}

// The tunable configurations: maps per thread x rows per thread x threads per block (with the
// blocks per SM that __launch_bounds__ asks for, which caps the registers at 64K / (threads *
// blocks)), one persistent wave of blocks or a block per batch of items, and ("_kwloop") the
// run-time kw loop. Each kept one won a measured case (bench/PERF_NOTES.md): C1 (4 x 8), C3 (8 x 17
// kwloop), C1 and C3 at B = 100 (4 x 10, 4 x 17); 8 x 8 is the default for M > 16.
static const conv_config REGBLOCK_CONFIGS[] = {
    {"m4_p8_t256_wave", conv_f32_run<regblock_run<4, 8, 256, 2, true, false>>, NULL},
    {"m4_p10_t256_wave", conv_f32_run<regblock_run<4, 10, 256, 2, true, false>>, NULL},
    {"m4_p17_t128_wave", conv_f32_run<regblock_run<4, 17, 128, 3, true, false>>, NULL},
    {"m8_p8_t256_grid", conv_f32_run<regblock_run<8, 8, 256, 2, false, false>>, NULL},
    {"m8_p17_t128_wave_kwloop", conv_f32_run<regblock_run<8, 17, 128, 2, true, true>>, NULL},
};

// Below this many threads (at 8 rows per strip) the batch fills the H100 only a few times over, and
// taller strips (fewer, longer threads) ran faster.
constexpr long long REGBLOCK_SMALL_THREADS = 1LL << 18;

// The default, from the H100 sweeps (bench/PERF_NOTES.md). Large batches: 4 maps x 8 rows, fully
// unrolled, in one persistent wave for M <= 4 (C1: the run-time kw loop lost there, its per-step
// pointer and copy overhead weighs more than the instruction-cache stalls of this small body); for
// more maps with 7x7 filters, 8 maps x 17 rows with the run-time kw loop (C3), where 17-row strips
// pad no more rows than 8-row ones. Many maps (not measured) get 8 per thread, so that x is re-read
// fewer times; small batches get the strip height that wastes the fewest rows.
static const char* regblock_default_config(const conv_problem* p) {
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

static int regblock_supports(const conv_problem* p) {
    return conv_check_coords("direct_regblock", p, REGBLOCK_MAX_PT - 1, 0);
}

extern "C" const conv_impl conv_impl_direct_regblock = {
    regblock_supports, NULL, REGBLOCK_CONFIGS, (int)(sizeof REGBLOCK_CONFIGS / sizeof REGBLOCK_CONFIGS[0]),
    regblock_default_config};

