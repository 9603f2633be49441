// depthwise_nhwc.cu — grouped_direct's kernel for depthwise layers stored NHWC (groups == C == M:
// y[b, oh, ow, c] = sum over kh, kw of x[b, ih, iw, c] * w[c, kh, kw]), exact fp32 FFMA on f32, f16
// or bf16 data (x, w, y and bias of one dtype).
//   dw_nhwc_kernel<K, S, PR, PT, V, THREADS, MINB, T>: channels are contiguous in NHWC, so a thread takes
//     a vector of V neighbouring channels for a tile of PR output rows x PT neighbouring output columns,
//     and a warp's lanes take neighbouring vectors: every load and store of a warp is one contiguous
//     run, and no input is staged (neighbouring tiles share their input columns through L1). Two
//     kinds of configuration (dw_nhwc_run's NARROW):
//     wide, for grids of several waves: one 16-byte load per vector (4 channels in fp32, 8 in fp16 /
//       bf16 where C % 8 == 0 and x, y are 16-byte aligned, else 4 channels in 8 bytes).
//     narrow: 1 channel of fp32, 2 of fp16 / bf16, so 4x the threads, each with a quarter of the work:
//       in 1 x 1 to 2 x 2 tiles for small grids (batch 1, 7x7 and 14x14 planes); in tall tiles (4 x 2,
//       8 x 2, 4 x 4) for large f16 / bf16 grids, where 8 channels' taps would not fit registers and
//       the rows loop, unrolled, keeps a whole tile's loads in flight.
//     MINB: blocks an SM the compiler must leave room for (__launch_bounds__). The tall tiles take 96-141
//     registers, so 3-5 blocks of 128 threads an SM; at MINB = 4 (128 registers) the 5x5 8 x 2 tile ran up
//     to 9% faster on EfficientNet's 14-pixel planes and the 7x7 ones 11-13% on ConvNeXt's 7-pixel plane,
//     but slower at stride 2 and where the cap spills (the 5x5 4 x 4 tile: 52 bytes), so both are
//     configurations and the tuner chooses (fp16, B = 32, H100).
//     Channel blocks vary fastest in the grid (blockIdx.x), tiles slowest (blockIdx.y).
//     The taps: where a thread's take at most DW_REG_TAPS floats (3x3 on up to 4 channels, 5x5 on 2,
//     7x7 on 1) it reads them from global memory into registers once, with no shared memory and no
//     barrier (at batch 1, staging 128 channels' taps was most of a block's time); else its block
//     stages its channels' taps in shared memory (widened to fp32, channels fastest), and blocks loop
//     over tiles so that a grid of a few waves stages them once per block.
//     K, S > 0: K x K filter, stride S, dilation 1, all unrolled: the tile reads its (PR-1)*S + K input
//     rows once each; of each row, its (PT-1)*S + K vectors are loaded together (addresses clamped
//     into the image and the value zeroed on padding, so that no load waits behind a branch) and feed
//     every (output row, tap) of the tile that reads them.
//     K = S = 0: any KH x KW, stride, dilation; one load per tap and pixel (the fallback, also the
//     only kernel of the 4-channel f16 / bf16 path, which real networks with C % 8 == 0 do not take).
// A tap on padding meets a zero and still its weight, so an Inf or NaN weight there gives NaN, as in
// PyTorch.
#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "launch_util.cuh"
#include "tensor_io.cuh"

namespace {

// Channels per block at most: their staged weights (fp32, dw_staged_row) fit 48 KB up to
// DW_NHWC_MAX_TAPS taps.
constexpr int DW_BLOCK_CHANNELS = 128;
// Vectors per block at most in the narrow configurations: their grids are small, so a block has few
// tiles, and staging all of 128 channels' taps (7x7: 49 loads a thread) would be most of its work;
// 16 vectors (a half-warp's 64-byte run per pixel) with 8 tiles per block of 128 threads stage an eighth.
constexpr int DW_NARROW_BLOCK_VECS = 16;

// x is (B, H, W, C), w is (C, KH, KW) (MCKK and MKKC coincide with one channel per group), y is
// (B, OH, OW, C); every count < 2^31 (the dispatcher's batch chunks).
struct dw_nhwc_shape : ConvShape32 {
    int vecs;              // C / V
    int block_vecs;        // vectors per block (blockIdx.x: groups of them)
    int tiles_per_block;   // THREADS / block_vecs
    int tiles_w;           // tiles across an output row: ceil(OW / PT)
    int tiles_h;           // tiles down an output column: ceil(OH / PR)
    int tiles;             // B * tiles_h * tiles_w
    int relu;
};

// ---- V neighbouring channels widened to fp32 / narrowed from it (round to nearest even) ----
__device__ __forceinline__ float2 dw_widen2(unsigned u, const __half*) {
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
}
__device__ __forceinline__ float2 dw_widen2(unsigned u, const __nv_bfloat16*) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
__device__ __forceinline__ unsigned dw_narrow2(float a, float b, const __half*) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
}
__device__ __forceinline__ unsigned dw_narrow2(float a, float b, const __nv_bfloat16*) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
}

// Loads V channels at p (aligned to V elements) into v, or zeros where not `ok` (p must still be
// readable: the zeros replace the loaded bits, one select per 32-bit word, before widening).
template <int V>
__device__ __forceinline__ void dw_load(const float* p, bool ok, float (&v)[V]) {
    static_assert(V == 1 || V == 4, "the narrow and the wide vector of fp32");
    float f[4];
    if constexpr (V == 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(p));
        f[0] = q.x; f[1] = q.y; f[2] = q.z; f[3] = q.w;
    } else {
        f[0] = __ldg(p);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = ok ? f[e] : 0.0f;
}
template <int V, class T>
__device__ __forceinline__ void dw_load(const T* p, bool ok, float (&v)[V]) {
    static_assert(V == 2 || V == 4 || V == 8, "4, 8 or 16 bytes of f16 / bf16");
    unsigned u[V / 2];
    if constexpr (V == 8) {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
        u[0] = q.x; u[1] = q.y; u[2] = q.z; u[3] = q.w;
    } else if constexpr (V == 4) {
        const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
        u[0] = q.x; u[1] = q.y;
    } else {
        u[0] = __ldg(reinterpret_cast<const unsigned*>(p));
    }
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
        const float2 f = dw_widen2(ok ? u[i] : 0u, p);
        v[2 * i] = f.x; v[2 * i + 1] = f.y;
    }
}

template <int V>
__device__ __forceinline__ void dw_store(float* p, const float (&v)[V]) {
    static_assert(V == 1 || V == 4, "the narrow and the wide vector of fp32");
    if constexpr (V == 4) *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    else *p = v[0];
}
template <int V, class T>
__device__ __forceinline__ void dw_store(T* p, const float (&v)[V]) {
    unsigned u[V / 2];
#pragma unroll
    for (int i = 0; i < V / 2; ++i) u[i] = dw_narrow2(v[2 * i], v[2 * i + 1], p);
    if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = make_uint4(u[0], u[1], u[2], u[3]);
    else if constexpr (V == 4) *reinterpret_cast<uint2*>(p) = make_uint2(u[0], u[1]);
    else *reinterpret_cast<unsigned*>(p) = u[0];
}

// The vector at column iw of an input row (xr: the row's start at the thread's channels; a row on
// padding passes row_ok false and any row of the image), zeros on padding. The load always happens,
// at a column clamped into the row, so that a row's loads issue together with no branch between them;
// the clamp does not look at the row, so that a tile computes each column's offset once for all its rows
// (with the row in it, each load's address took five instructions: a third of the 5x5 kernels' own).
template <int V, class T>
__device__ __forceinline__ void dw_input(const T* xr, int iw, bool row_ok, const dw_nhwc_shape& s, float (&v)[V]) {
    const bool col_ok = (unsigned)iw < (unsigned)s.W;
    dw_load<V>(xr + (col_ok ? iw : 0) * s.C, row_ok && col_ok, v);
}

template <int V>
__device__ __forceinline__ void dw_fma(float (&acc)[V], const float (&wv)[V], const float (&v)[V]) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = fmaf(wv[e], v[e], acc[e]);
}

// Floats of taps a thread keeps in registers at most (3x3 on 4 channels: 36, 5x5 on 2, 7x7 on 1; 3x3
// on 8 would take 72 and halve the warps an SM holds).
constexpr int DW_REG_TAPS = 50;

// Whether a thread of the K x K kernel (K = 0: the generic one) on V channels holds its taps in
// registers, read once from global memory; else the block stages its channels' taps in shared memory.
__host__ __device__ constexpr bool dw_taps_in_regs(int K, int V) { return K > 0 && K * K * V <= DW_REG_TAPS; }

// Taps in registers: channel e of tap t is w[(c + e) * K*K + t], each thread reading its own channels'
// taps (a few KB of weights in all, served by L1 / L2).
template <int K, int V, class T>
struct DwRegTaps {
    float r[K * K][V];
    __device__ __forceinline__ DwRegTaps(const T* w, int c) {
#pragma unroll
        for (int t = 0; t < K * K; ++t)
#pragma unroll
            for (int e = 0; e < V; ++e) r[t][e] = conv_load(w, (long long)(c + e) * (K * K) + t);
    }
    __device__ __forceinline__ void get(int t, float (&wv)[V]) const {
#pragma unroll
        for (int e = 0; e < V; ++e) wv[e] = r[t][e];
    }
};

// Taps staged in shared memory as [tap][part of a vector][block vector][PART channels], PART = 4 (2 or 1
// for narrower vectors): part q of thread vector vl's tap t is at s_w[t * row + q * part_stride +
// PART * vl], so that a warp's loads of one part (LDS.128 at PART = 4) read consecutive addresses.
template <int V>
struct DwSharedTaps {
    static constexpr int PART = V < 4 ? V : 4;
    const float* s_w;  // thread vector vl's first part: s_w + PART * vl
    int row, part_stride;
    __device__ __forceinline__ void get(int t, float (&wv)[V]) const {
#pragma unroll
        for (int q = 0; q < V / PART; ++q) {
            const float* at = s_w + t * row + q * part_stride;
            if constexpr (PART == 4) {
                const float4 f = *reinterpret_cast<const float4*>(at);
                wv[4 * q] = f.x; wv[4 * q + 1] = f.y; wv[4 * q + 2] = f.z; wv[4 * q + 3] = f.w;
            } else if constexpr (PART == 2) {
                const float2 f = *reinterpret_cast<const float2*>(at);
                wv[0] = f.x; wv[1] = f.y;
            } else {
                wv[0] = *at;
            }
        }
    }
};

// Floats per tap of the staged taps: the block's V*block_vecs channels, padded to PART past a multiple
// of 32, so that the staging's writes of consecutive taps of a channel fall PART banks apart.
__host__ __device__ constexpr int dw_staged_row(int V, int block_vecs) {
    return (V * block_vecs + 31) / 32 * 32 + (V < 4 ? V : 4);
}

// Stages the taps of the block's channels [V*v0, V*(v0 + nv)) (nv vectors of V) in that layout. They are
// one contiguous run of w (channel after channel, its KK taps each), read in order: every warp load is
// coalesced, and the shared-memory writes conflict at most PART ways. Returns thread vector vl's view.
template <int V, int THREADS, class T>
__device__ __forceinline__ DwSharedTaps<V> dw_stage_taps(float* s_w, const T* w, const dw_nhwc_shape& s, int KK,
                                                         int v0, int nv, int vl) {
    constexpr int PART = DwSharedTaps<V>::PART;
    const int row = dw_staged_row(V, s.block_vecs), part_stride = PART * s.block_vecs;
    const T* run = w + (long long)V * v0 * KK;
#pragma unroll 4
    for (int e = threadIdx.x; e < V * nv * KK; e += THREADS) {
        const int cl = e / KK, t = e - cl * KK, vec = cl / V, in_vec = cl - vec * V;
        s_w[t * row + in_vec / PART * part_stride + PART * vec + in_vec % PART] = conv_load(run, e);
    }
    return DwSharedTaps<V>{s_w + PART * vl, row, part_stride};
}

// The thread's tiles (from tile tl of block y, gridDim.y * tiles_per_block apart) for its V channels
// from c, with its taps (DwRegTaps or DwSharedTaps).
template <int K, int S, int PR, int PT, int V, class T, class Taps>
__device__ __forceinline__ void dw_nhwc_tiles(const dw_nhwc_shape& s, const T* __restrict__ x, const Taps& taps,
                                              const T* __restrict__ bias, T* __restrict__ y, int c, int tl) {
    const int KH = K ? K : s.KH, KW = K ? K : s.KW;
    float bv[V];
#pragma unroll
    for (int e = 0; e < V; ++e) bv[e] = bias ? conv_load(bias, c + e) : 0.0f;

    for (int tile = blockIdx.y * s.tiles_per_block + tl; tile < s.tiles; tile += gridDim.y * s.tiles_per_block) {
        const int twi = tile % s.tiles_w, rest = tile / s.tiles_w;
        const int thi = rest % s.tiles_h, b = rest / s.tiles_h;
        const int oh0 = thi * PR, ow0 = twi * PT;
        float acc[PR][PT][V];
#pragma unroll
        for (int r = 0; r < PR; ++r)
#pragma unroll
            for (int p = 0; p < PT; ++p)
#pragma unroll
                for (int e = 0; e < V; ++e) acc[r][p][e] = 0.0f;

        if constexpr (K > 0) {
            constexpr int ROWS = (PR - 1) * S + K, COLS = (PT - 1) * S + K;
            const int ih0 = oh0 * S - s.pad_h, iw0 = ow0 * S - s.pad_w;
            // Input row i of the tile's window feeds output row r at filter row kh = i - r*S, and its
            // column j output column p at filter column kw = j - p*S. The rows stay a loop (unrolled
            // only where the taps sit in registers and need constant indices): unrolled, the compiler
            // hoists every row's loads and takes 255 registers or spills; one row's loads in flight per
            // thread suffice with the warps an SM then holds.
#pragma unroll(dw_taps_in_regs(K, V) ? ROWS : 1)
            for (int i = 0; i < ROWS; ++i) {
                const int ih = ih0 + i;
                const bool row_ok = (unsigned)ih < (unsigned)s.H;
                const T* xr = x + ((b * s.H + (row_ok ? ih : 0)) * s.W) * s.C + c;  // never outside x
                float win[COLS][V];
#pragma unroll
                for (int j = 0; j < COLS; ++j) dw_input<V>(xr, iw0 + j, row_ok, s, win[j]);
#pragma unroll
                for (int r = 0; r < PR; ++r) {
                    const int kh = i - r * S;
                    if ((unsigned)kh >= (unsigned)K) continue;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        float wv[V];
                        taps.get(kh * K + kw, wv);
#pragma unroll
                        for (int p = 0; p < PT; ++p) dw_fma<V>(acc[r][p], wv, win[p * S + kw]);
                    }
                }
            }
        } else {
            // Rows past OH (the last tile) read clamped addresses too and are not stored.
#pragma unroll
            for (int r = 0; r < PR; ++r) {
                for (int kh = 0; kh < KH; ++kh) {
                    const int ih = (oh0 + r) * s.stride_h - s.pad_h + kh * s.dil_h;
                    const bool row_ok = (unsigned)ih < (unsigned)s.H;
                    const T* xr = x + ((b * s.H + (row_ok ? ih : 0)) * s.W) * s.C + c;
                    for (int kw = 0; kw < KW; ++kw) {
                        float wv[V];
                        taps.get(kh * KW + kw, wv);
#pragma unroll
                        for (int p = 0; p < PT; ++p) {
                            float v[V];
                            dw_input<V>(xr, (ow0 + p) * s.stride_w - s.pad_w + kw * s.dil_w, row_ok, s, v);
                            dw_fma<V>(acc[r][p], wv, v);
                        }
                    }
                }
            }
        }

        grid_launch_dependents();  // the tile's inputs are read (a block's first call is the one that counts)
#pragma unroll
        for (int r = 0; r < PR; ++r) {
            if (oh0 + r >= s.OH) break;
            T* yp = y + ((b * s.OH + oh0 + r) * s.OW + ow0) * s.C + c;
#pragma unroll
            for (int p = 0; p < PT; ++p) {
                if (ow0 + p >= s.OW) break;
                float o[V];
#pragma unroll
                for (int e = 0; e < V; ++e) o[e] = conv_epilogue_value(acc[r][p][e], bv[e], s.relu);
                dw_store<V>(yp + p * s.C, o);
            }
        }
    }
}

// One thread = PR output rows x PT output columns x V channels; blockIdx.x picks the block's channels,
// blockIdx.y its tiles. Channels vary fastest in the grid, so that the blocks in flight together read and
// write whole pixels (every channel of a run of pixels: whole lines of x and y) rather than one channel
// group's few sectors of each of many pixels, which DRAM serves at a fraction of its bandwidth.
template <int K, int S, int PR, int PT, int V, int THREADS, int MINB, class T>
__global__ void __launch_bounds__(THREADS, MINB) dw_nhwc_kernel(dw_nhwc_shape s, const T* __restrict__ x,
                                                                const T* __restrict__ w,
                                                                const T* __restrict__ bias, T* __restrict__ y) {
    static_assert((K == 0) == (S == 0), "fast path: both K and S; generic: neither");
    constexpr bool IN_REGS = dw_taps_in_regs(K, V);
    const int KH = K ? K : s.KH, KW = K ? K : s.KW, KK = KH * KW;
    extern __shared__ float4 s_w4[];  // !IN_REGS: the staged taps
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    const int v0 = blockIdx.x * s.block_vecs, nv = min(s.block_vecs, s.vecs - v0);
    const int vl = threadIdx.x % s.block_vecs, tl = threadIdx.x / s.block_vecs;
    const int c = V * (v0 + vl);
    if constexpr (!IN_REGS) {
        // Every thread takes part in staging before the barrier, even one without a vector or a tile.
        const auto staged = dw_stage_taps<V, THREADS>(reinterpret_cast<float*>(s_w4), w, s, KK, v0, nv, vl);
        __syncthreads();  // the only barrier: threads without work may leave after it
        if (tl >= s.tiles_per_block || vl >= nv) return;
        dw_nhwc_tiles<K, S, PR, PT, V>(s, x, staged, bias, y, c, tl);
    } else {
        if (tl >= s.tiles_per_block || vl >= nv) return;
        dw_nhwc_tiles<K, S, PR, PT, V>(s, x, DwRegTaps<K, V, T>(w, c), bias, y, c, tl);
    }
}

template <int PR, int PT, int V, int THREADS, int MINB, class T>
struct DwNhwcKernels {
    template <int K, int S>
    struct At {
        static constexpr auto kernel = dw_nhwc_kernel<K, S, PR, PT, V, THREADS, MINB, T>;
    };
};

// The kernel for the problem's filter: the unrolled ones, the generic one elsewhere and for the wide
// configurations' 4-channel f16 / bf16 path.
template <int PR, int PT, int V, int THREADS, int MINB, bool NARROW, class T>
static auto dw_kernel_for(const conv_problem* p) {
    using Kernels = DwNhwcKernels<PR, PT, V, THREADS, MINB, T>;
    if constexpr (NARROW || V * sizeof(T) == 16) return gd_kernel_for_filter<Kernels::template At>(p);
    return Kernels::template At<0, 0>::kernel;
}

// Vectors per block along the channels, at most `most`. Where a multiple of a 32-byte sector's worth
// of vectors, at least half of `most`, divides the channel vectors: the largest such, so that a block's
// channels at a pixel are whole sectors (C = 144 in fp16, 4-byte vectors, as 5 blocks of 15 vectors
// reads 13 sectors per pixel where 9 hold it; as 9 blocks of 8, 9). Else as few channel blocks as `most`
// allows, sharing the vectors evenly: C = 144 in blocks of 128 + 16 channels would leave most lanes of
// the second block's warps idle.
static int dw_block_vecs(int vecs, int most, int vec_bytes) {
    const int sector = 32 / vec_bytes > 1 ? 32 / vec_bytes : 1;
    for (int bv = most / sector * sector; 2 * bv >= most && bv >= sector; bv -= sector)
        if (vecs % bv == 0) return bv;
    return conv_ceil_div(vecs, conv_ceil_div(vecs, most));
}

// Blocks of one launch along y (tiles): at most a few waves (the blocks loop over the rest of the
// tiles), so that each block's weight staging (taps not in registers) is paid for by several tiles;
// far fewer than gridDim.y's 65535.
constexpr int DW_WAVES = 4;

template <int PR, int PT, int THREADS, bool NARROW, int MINB>
struct DwNhwcLaunch {
    template <class T, int V>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        dw_nhwc_shape s;
        static_cast<ConvShape32&>(s) = conv_shape32(p);
        s.vecs = s.C / V;
        const int limit = NARROW ? DW_NARROW_BLOCK_VECS : DW_BLOCK_CHANNELS / V;
        s.block_vecs = dw_block_vecs(s.vecs, limit < THREADS ? limit : THREADS, V * (int)sizeof(T));
        const int channel_blocks = conv_ceil_div(s.vecs, s.block_vecs);
        s.tiles_per_block = THREADS / s.block_vecs;
        s.tiles_w = conv_ceil_div(s.OW, PT);
        s.tiles_h = conv_ceil_div(s.OH, PR);
        s.tiles = (int)(p->B * s.tiles_h * s.tiles_w);  // <= B*OH*OW < 2^31
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        const auto kernel = dw_kernel_for<PR, PT, V, THREADS, MINB, NARROW, T>(p);
        // The unrolled kernels' K is KH; the generic kernel always stages its taps.
        const bool generic = kernel == DwNhwcKernels<PR, PT, V, THREADS, MINB, T>::template At<0, 0>::kernel;
        const bool in_regs = !generic && dw_taps_in_regs((int)p->KH, V);
        const size_t smem = in_regs ? 0 : (size_t)s.KH * s.KW * dw_staged_row(V, s.block_vecs) * sizeof(float);
        int64_t wave = 0;
        int status = conv_wave_blocks(kernel, THREADS, smem, &wave);
        if (status != CONV_OK) return status;
        const int64_t need = ((int64_t)s.tiles + s.tiles_per_block - 1) / s.tiles_per_block;
        const int64_t cap = (DW_WAVES * wave + channel_blocks - 1) / channel_blocks;
        const unsigned tile_blocks = conv_wave_grid(need, cap, true);
        CONV_LAUNCH_DEPENDENT("dw_nhwc_kernel", kernel, dim3((unsigned)channel_blocks, tile_blocks), THREADS, smem,
                              stream, s, static_cast<const T*>(t->x), static_cast<const T*>(t->w),
                              static_cast<const T*>(t->bias), static_cast<T*>(t->y));
        return CONV_OK;
    }
};

// 1 if x and y are aligned to `bytes`.
static bool dw_aligned_to(const conv_tensors* t, size_t bytes) {
    return (uintptr_t)t->x % bytes == 0 && (uintptr_t)t->y % bytes == 0;
}

}  // namespace

int dw_nhwc_fits(const conv_problem* p, int report) {
    const bool ok = p->groups == p->C && p->M == p->C && p->x_layout == CONV_NHWC && p->y_layout == CONV_NHWC &&
                    p->C % 4 == 0 && p->x_dtype == p->y_dtype && p->KH * p->KW <= DW_NHWC_MAX_TAPS;
    if (ok) return CONV_OK;
    if (!report) return CONV_ERR_UNSUPPORTED;
    if (p->groups != p->C || p->M != p->C)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs groups == C == M (groups=%lld, "
                              "C=%lld, M=%lld)", (long long)p->groups, (long long)p->C, (long long)p->M);
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: the NHWC depthwise kernel needs x_layout and "
                                                    "y_layout NHWC");
    if (p->C % 4 != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs C a multiple of 4 (C=%lld)",
                              (long long)p->C);
    if (p->x_dtype != p->y_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "grouped_direct: the NHWC depthwise kernel needs x_dtype == y_dtype (%s, %s)",
                              conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    return conv_set_error(CONV_ERR_UNSUPPORTED,  // the one condition left
                          "grouped_direct: the NHWC depthwise kernel takes KH*KW <= %d (KH=%lld, KW=%lld)",
                          DW_NHWC_MAX_TAPS, (long long)p->KH, (long long)p->KW);
}

int dw_nhwc_aligned(const conv_problem* p, const conv_tensors* t) {
    return dw_aligned_to(t, 4 * conv_dtype_size(p->x_dtype));
}

// Wide: f16 / bf16 take 8 channels (16 bytes) per vector where C and the operands allow it, else 4 (8
// bytes); fp32 4. Narrow: 4 bytes, 2 channels of f16 / bf16, 1 of fp32.
template <int PR, int PT, int THREADS, bool NARROW, int MINB>
int dw_nhwc_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    using L = DwNhwcLaunch<PR, PT, THREADS, NARROW, MINB>;
    const auto halves = [&](auto type) {
        using T = decltype(type);
        if constexpr (NARROW) {
            return L::template run<T, 2>(p, t, stream);
        } else {
            if (p->C % 8 == 0 && dw_aligned_to(t, 16)) return L::template run<T, 8>(p, t, stream);
            return L::template run<T, 4>(p, t, stream);
        }
    };
    // dw_nhwc_dtype_fits refused the dtypes a configuration is not built for.
    if constexpr (dw_nhwc_takes_half<NARROW>) {
        if (p->x_dtype == CONV_F16) return halves(__half());
        if (p->x_dtype == CONV_BF16) return halves(__nv_bfloat16());
    }
    if constexpr (dw_nhwc_takes_f32<PR, PT, NARROW>)
        if (p->x_dtype == CONV_F32) return L::template run<float, NARROW ? 1 : 4>(p, t, stream);
    return conv_set_error(CONV_ERR_INTERNAL, "NHWC depthwise configuration launched on x_dtype = %s",
                          conv_dtype_name(p->x_dtype));
}

// grouped_direct's configurations (grouped_direct.cu).
template int dw_nhwc_run<1, 4, 128, false, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<1, 2, 128, false, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<2, 2, 128, false, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<1, 1, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<1, 2, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<2, 2, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<4, 2, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<8, 2, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<4, 4, 128, true, 1>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<8, 2, 128, true, 4>(const conv_problem*, const conv_tensors*, cudaStream_t);
template int dw_nhwc_run<4, 4, 128, true, 4>(const conv_problem*, const conv_tensors*, cudaStream_t);
