// tc_igemm.cuh — the tensor-core implicit GEMM (device side): mma.sync with fp32 accumulation, operands
// fed by ldmatrix from swizzled shared memory, filled by a multistage cp.async pipeline.
//   GEMM view (rows = output pixels, columns = output maps, so that a row of D is a pixel of NHWC y),
//   one GEMM per group g < G (Mg = M/G maps, Cp channels each):
//     D[p, g*Mg + m] = sum_k A_g[p, k] * B[g*Mg + m, k],  p = (b, oh, ow) < P = B*OH*OW,  m < Mg,
//     A_g[p, k] = x[b, oh*stride_h - pad_h + kh*dil_h, ow*stride_w - pad_w + kw*dil_w, g*Cp + c] (0 outside),
//     B[m, k] = w[m, kh, kw, c],  k = (kh, kw, c) < K = KH*KW*Cp.
//   x is NHWC (B, H, W, G*Cp) and w MKKC (M, KH, KW, Cp) in the operand dtype with Cp a whole number of
//   16-byte chunks (tc_staging.cuh makes them so where the caller's tensors are not): each thread's
//   16-byte cp.async then holds channels of one (pixel, tap, group), and padding, image edges, p >= P,
//   m >= Mg and k >= K are zero-filled copies (src-size 0), so the math needs no guards. A block's map
//   tile lies inside one group (gridDim.y = G x map tiles per group).
//
// The layers (after CUTLASS's sm80 conv):
//   TcTf32 / TcF16 / TcBf16  operand precision: element type, the mma (m16n8k8 tf32, m16n8k16 f16 / bf16)
//                            and the register fix-up after ldmatrix (rounding fp32 to tf32);
//   TcShape, TcTile          block tile BM x BN, warp tile WM x WN, STAGES, and the shared-memory layout:
//                            per stage an A tile (BM rows) and a B tile (BN rows) of ROW_CHUNKS 16-byte
//                            chunks per row (k contiguous), chunk c of row r stored at chunk
//                            c ^ ((r / (8 / ROW_CHUNKS)) % ROW_CHUNKS): the 8 rows an ldmatrix reads
//                            at one chunk then cover all 32 banks;
//   TcLoader                 the tile iterator: a thread owns one chunk column and A_ITERS + B_ITERS rows,
//                            with each row's pixel decoded once and k's digits (kh, kw, c) advanced per
//                            tile by carries, not divisions;
//   tc_warp_mma              one stage: per 32-byte k-step, ldmatrix.x4 A fragments (16 rows) and B
//                            fragments (two n8 columns), then WM/16 x WN/8 mma;
//   tc_store_staged          the epilogue through shared memory, where rows are whole 16-byte chunks
//                            (NHWC y, split-K's partials): fragments (+ bias, ReLU, y's dtype) into a
//                            padded tile, then 16-byte stores along the maps, coalesced;
//   tc_store                 the epilogue from registers, for the rest (NCHW y, odd map counts);
//                            under split-K both write raw fp32 sums into partial [split][P][M]
//                            (split_k.cuh reduces them);
//   tc_mainloop              STAGES-1 tiles in flight, one barrier per k-tile;
//   tc_cluster_store         (sm_90) split-K with each tile's splits one thread-block cluster: the
//                            partial sums reduced through distributed shared memory, then y, in one launch.
// The kernel (tc_igemm_kernel.cuh) runs tc_mainloop or Hopper's wgmma mainloop (tc_wgmma.cuh) on the
// same loader and tiles, then one of the epilogues here.
// Index math: pixel and map indices are int32 (the dispatcher keeps P*M and x per launch < 2^30);
// offsets into x, w, y and partial are int64 (a padded staged x may pass 2^31 elements).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>

#include "mma_operand16.cuh"
#include "mma_sync.cuh"
#include "tensor_io.cuh"

// ---- operand precisions ----

// tf32: fp32 in memory, rounded to tf32 in registers after ldmatrix (inputs are not pre-rounded, as x
// may be the caller's own fp32 tensor). k-step 8 = 32 bytes.
struct TcTf32 {
    using T = float;
    static constexpr int DTYPE = CONV_F32;
    static __device__ __forceinline__ void fix(uint32_t (&r)[4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) r[i] = mma_round_tf32(r[i]);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_m16n8k8_tf32(d, a, b0, b1);
    }
};
// fp16 and bf16 (T): k-step 16 = 32 bytes, registers used as loaded.
template <class T_, int DTYPE_>
struct TcHalf {
    using T = T_;
    static constexpr int DTYPE = DTYPE_;
    static __device__ __forceinline__ void fix(uint32_t (&)[4]) {}
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        if constexpr (DTYPE_ == CONV_F16) mma_m16n8k16_f16(d, a, b0, b1);
        else mma_m16n8k16_bf16(d, a, b0, b1);
    }
};
using TcF16 = TcHalf<__half, CONV_F16>;
using TcBf16 = TcHalf<__nv_bfloat16, CONV_BF16>;

// Elements of one 16-byte chunk of an operand dtype: Cp is C rounded up to a multiple of it.
static inline int tc_chunk_elems(int dtype) { return 16 / (int)conv_dtype_size(dtype); }

// ---- block and warp tiles ----

// A launch shape: BM pixels x BN maps per block, warps of WM x WN, STAGES tiles in the pipeline, rows of
// ROW_CHUNKS 16-byte chunks (4: BK = 16 tf32 / 32 f16 values per tile; 8: twice that). WGMMA: the
// Hopper kernel of tc_wgmma.cuh (its pipeline in dynamic shared memory), else the mma.sync kernels here;
// TMA: the wgmma GEMM of tc_wgmma_tma.cuh, fed by a producer warp's tensor-map copies; NCHW: x read from
// the caller's fp32 NCHW tensor, by the wgmma mainloop converting it in registers (tc_nchw_feed.cuh) or,
// without WGMMA, by the tf32 mma.sync mainloop of tc_nchw_mma.cuh.
template <int BM_, int BN_, int WM_, int WN_, int STAGES_, int ROW_CHUNKS_ = 4, bool WGMMA_ = false,
          bool TMA_ = false, bool NCHW_ = false>
struct TcShape {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, STAGES = STAGES_, ROW_CHUNKS = ROW_CHUNKS_;
    static constexpr bool WGMMA = WGMMA_, TMA = TMA_, NCHW = NCHW_;
    static constexpr bool NCHW_MMA = NCHW && !WGMMA;  // the tf32 mma.sync tiles of tc_nchw_mma.cuh
};

template <class Op_, class Shape>
struct TcTile {
    using Op = Op_;
    using T = typename Op::T;
    static constexpr int BM = Shape::BM, BN = Shape::BN, WM = Shape::WM, WN = Shape::WN;
    static constexpr int STAGES = Shape::STAGES, ROW_CHUNKS = Shape::ROW_CHUNKS;
    static constexpr bool WGMMA = Shape::WGMMA, TMA = Shape::TMA, NCHW = Shape::NCHW;
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN, THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int VEC = 16 / (int)sizeof(T);  // elements per chunk
    static constexpr int ROW_BYTES = 16 * ROW_CHUNKS, BK = ROW_CHUNKS * VEC;
    // NCHW mma.sync tiles (tc_nchw_mma.cuh) keep x's pixel order: A as BK rows of A_LD pixels, B as BN
    // rows of B_LD channels, fp32, padded so that the fragments' word reads fall in distinct banks.
    static constexpr bool NCHW_MMA = Shape::NCHW_MMA;
    static constexpr int A_LD = BM + 8, B_LD = BK + 4;
    static constexpr int A_BYTES = NCHW_MMA ? BK * A_LD * 4 : BM * ROW_BYTES;
    static constexpr int STAGE_BYTES = NCHW_MMA ? A_BYTES + BN * B_LD * 4 : (BM + BN) * ROW_BYTES;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
    static constexpr int ROWS_PER_PASS = THREADS / ROW_CHUNKS;  // rows one pass of the block's copies fills
    static constexpr int A_ITERS = BM / ROWS_PER_PASS, B_ITERS = BN / ROWS_PER_PASS;
    static constexpr int MI = WM / 16, NJ = WN / 8;  // m16 x n8 accumulator tiles per warp
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "whole m16 and n16 warp tiles");
    static_assert(ROW_CHUNKS == 4 || ROW_CHUNKS == 8, "the swizzle covers 64- and 128-byte rows");
    static_assert(BM % ROWS_PER_PASS == 0 && BN % ROWS_PER_PASS == 0, "every tile row is copied");
    static_assert(STAGES >= 2 && (WGMMA || SMEM_BYTES <= 48 * 1024), "static shared memory holds the pipeline");

    // Byte offset of chunk c of row r in an A or B tile.
    static __device__ __forceinline__ int offset(int r, int c) {
        return r * ROW_BYTES + ((c ^ ((r / (8 / ROW_CHUNKS)) % ROW_CHUNKS)) << 4);
    }
};

// ---- the kernel's arguments ----

struct TcParams {
    const void* x;  // (B, H, W, Cx = G*Cp), operand dtype; NCHW tiles: the caller's (B, Cx = C, H, W) fp32
    const void* w;  // (M, KH, KW, Cp) = (M, K), operand dtype
    int H, W, Cp, Cx, KW;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int OW, OHW, P, M, K;
    int Mg, map_tiles;             // maps per group, and block tiles of them per group
    int k_tiles, tiles_per_split;  // k-tiles in all and per split (blockIdx.z)
    void* y;                       // (B, M, OH, OW) or (B, OH, OW, M), y_dtype
    const void* bias;              // M values of y_dtype, or NULL
    int y_dtype;
    bool y_nhwc, relu;
    bool x_im2col;      // TMA tiles: x through an im2col map (else a 1x1 layer's pixels x channels matrix)
    bool staged_store;  // rows of y (or partial) are whole aligned 16-byte chunks: tc_store_staged
    float* partial;     // split-K: raw sums as fp32 [splits][P][M] instead of y; NULL otherwise
};
// TcParams stays at these 128 bytes: with two more fields (136 bytes and more) nvcc compiled every
// tensor-core kernel into ~40% less PTX (its stores no longer unrolled as before), and on that build the
// fp16 / bf16 layers, whose code changed in nothing else, ran 7-10% slower on the H100 (bench/
// PERF_NOTES.md). New per-launch values go in as kernel parameters of their own, after TcParams.
static_assert(sizeof(TcParams) == 128, "TcParams grew: see the note above before adding a field");

// ---- the tile iterator ----

template <class Tile>
struct TcLoader {
    using T = typename Tile::T;
    int chunk;                                     // this thread's chunk column
    int row0;                                      // its first row; then + i*ROWS_PER_PASS
    long long a_image[Tile::A_ITERS];              // b*H*W*Cx + g*Cp: each A row's image and group
    int a_ih0[Tile::A_ITERS], a_iw0[Tile::A_ITERS];  // its window's top-left corner (may be negative)
    unsigned a_valid;                              // bit i: A row i is a pixel < P
    long long b_row[Tile::B_ITERS];                // m*K of each B row, -1 for m >= M
    int k, kh, kw, c;                              // this thread's k and its digits in the current tile
    int d_kh, d_kw, d_c;                           // BK as digits (d_kw < KW, d_c < Cp)

    // Block tile: pixels m0.., maps n0.. of group g (0 <= n0 < Mg), k from k0.
    __device__ void init(const TcParams& p, int m0, int g, int n0, int k0) {
        const int tid = threadIdx.x;
        chunk = tid % Tile::ROW_CHUNKS;
        row0 = tid / Tile::ROW_CHUNKS;
        a_valid = 0;
#pragma unroll
        for (int i = 0; i < Tile::A_ITERS; ++i) {
            const int r = row0 + i * Tile::ROWS_PER_PASS;
            const bool valid = r < p.P - m0;
            const int pixel = valid ? m0 + r : 0;
            const int b = pixel / p.OHW, rem = pixel - b * p.OHW, oh = rem / p.OW, ow = rem - oh * p.OW;
            a_valid |= (unsigned)valid << i;
            a_image[i] = (long long)b * p.H * p.W * p.Cx + (long long)g * p.Cp;
            // oh*stride_h <= (OH-1)*stride_h, which conv_check_coords (the variants' supports) keeps <= 2^30.
            a_ih0[i] = oh * p.stride_h - p.pad_h;
            a_iw0[i] = ow * p.stride_w - p.pad_w;
        }
#pragma unroll
        for (int i = 0; i < Tile::B_ITERS; ++i) {
            const int r = row0 + i * Tile::ROWS_PER_PASS;
            b_row[i] = r < p.Mg - n0 ? ((long long)g * p.Mg + n0 + r) * p.K : -1;
        }
        k = k0 + chunk * Tile::VEC;
        const int taps = k / p.Cp;
        c = k - taps * p.Cp;
        kh = taps / p.KW;
        kw = taps - kh * p.KW;
        const int d_taps = Tile::BK / p.Cp;
        d_c = Tile::BK - d_taps * p.Cp;
        d_kh = d_taps / p.KW;
        d_kw = d_taps - d_kh * p.KW;
    }

    // Issues the copies of the current k-tile into one pipeline stage (A tile, then B tile; NCHW tiles
    // the B tile only).
    __device__ void load(unsigned char* stage, const TcParams& p) const {
        const T* x = static_cast<const T*>(p.x);
        const T* w = static_cast<const T*>(p.w);
        const bool k_ok = k < p.K;
        // kh*dil_h may be large past k's end (kh grows past KH): unsigned, wrap-around defined, and only
        // used where k_ok.
        const unsigned dh = (unsigned)kh * (unsigned)p.dil_h, dw = (unsigned)kw * (unsigned)p.dil_w;
        if constexpr (!Tile::NCHW) {  // else A comes from TcNchwFeed
#pragma unroll
            for (int i = 0; i < Tile::A_ITERS; ++i) {
                const unsigned ih = (unsigned)a_ih0[i] + dh, iw = (unsigned)a_iw0[i] + dw;
                const bool valid = k_ok && (a_valid >> i & 1) && ih < (unsigned)p.H && iw < (unsigned)p.W;
                const T* src = valid ? x + a_image[i] + ((long long)ih * p.W + iw) * p.Cx + c : x;
                cp_async_16_zfill(stage + Tile::offset(row0 + i * Tile::ROWS_PER_PASS, chunk), src, valid);
            }
        }
        unsigned char* b_tile = stage + Tile::A_BYTES;
#pragma unroll
        for (int i = 0; i < Tile::B_ITERS; ++i) {
            const bool valid = k_ok && b_row[i] >= 0;
            const T* src = valid ? w + b_row[i] + k : w;
            cp_async_16_zfill(b_tile + Tile::offset(row0 + i * Tile::ROWS_PER_PASS, chunk), src, valid);
        }
    }

    // On to the next k-tile: each digit carries at most once (d_c < Cp, d_kw < KW).
    __device__ void advance(const TcParams& p) {
        k += Tile::BK;
        c += d_c;
        if (c >= p.Cp) { c -= p.Cp; ++kw; }
        kw += d_kw;
        if (kw >= p.KW) { kw -= p.KW; ++kh; }
        kh += d_kh;
    }
};

// ---- warp-level math ----

// acc += the warp's WM x WN share of one stage's A (BM x BK) times B^T (BK x BN).
template <class Tile>
__device__ __forceinline__ void tc_warp_mma(const unsigned char* stage, float (&acc)[Tile::MI][Tile::NJ][4],
                                            int wm, int wn, int lane) {
    using Op = typename Tile::Op;
    const unsigned char* As = stage;
    const unsigned char* Bs = stage + Tile::A_BYTES;
#pragma unroll
    for (int ks = 0; ks < Tile::ROW_CHUNKS / 2; ++ks) {
        uint32_t a[Tile::MI][4], b[Tile::NJ][2];
        // A: matrices (rows 0-7, chunk 0), (8-15, 0), (0-7, 1), (8-15, 1) = fragment registers 0..3.
#pragma unroll
        for (int i = 0; i < Tile::MI; ++i) {
            const int r = wm + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            ldmatrix_x4(a[i], As + Tile::offset(r, 2 * ks + (lane >> 4)));
            Op::fix(a[i]);
        }
        // B: matrices (columns 0-7, chunk 0), (0-7, 1), (8-15, 0), (8-15, 1) = two n8 tiles' registers.
#pragma unroll
        for (int j = 0; j < Tile::NJ; j += 2) {
            uint32_t q[4];
            const int r = wn + j * 8 + (lane & 7) + (lane >> 4) * 8;
            ldmatrix_x4(q, Bs + Tile::offset(r, 2 * ks + ((lane >> 3) & 1)));
            Op::fix(q);
            b[j][0] = q[0]; b[j][1] = q[1];
            b[j + 1][0] = q[2]; b[j + 1][1] = q[3];
        }
#pragma unroll
        for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
            for (int j = 0; j < Tile::NJ; ++j) Op::mma(acc[i][j], a[i], b[j][0], b[j][1]);
    }
}

// ---- epilogue ----

// The bias of a thread's maps n0 + 8j + 2t + e (0 past n_end, or where bias is null: split-K's partial sums
// and layers without one), read once for all the rows it stores: per element, the loads and their bounds
// checks made the unrolled epilogue several times longer, and the warps of a short kernel each fetch its
// instructions once.
template <class TY, class Tile>
__device__ __forceinline__ void tc_thread_bias(const TY* bias, int n0, int n_end, int t, float (&bv)[Tile::NJ][2]) {
#pragma unroll
    for (int j = 0; j < Tile::NJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int m = n0 + j * 8 + 2 * t + e;
            bv[j][e] = bias && m < n_end ? conv_load(bias, m) : 0.0f;
        }
}

// Stores the warp's accumulators from registers: thread (g = lane / 4, t = lane % 4) holds, per m16 x n8
// tile, pixels row g and g + 8 at maps 2t and 2t + 1. m0: the warp's first pixel; n0: its first map (of
// all M); n_end: the end of its group's maps. TY: y's element type (unused under split-K).
template <class TY, class Tile>
__device__ void tc_store(const TcParams& p, const float (&acc)[Tile::MI][Tile::NJ][4], int m0, int n0, int n_end,
                         int lane) {
    const int g = lane >> 2, t = lane & 3;
    float bv[Tile::NJ][2];
    tc_thread_bias<TY, Tile>(p.partial ? nullptr : static_cast<const TY*>(p.bias), n0, n_end, t, bv);
    TY* y = static_cast<TY*>(p.y);
#pragma unroll
    for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int pixel = m0 + i * 16 + g + 8 * h;
            if (pixel >= p.P) continue;
            long long at, map_stride;  // y (or partial) offset of (pixel, map 0), and per map
            if (p.partial) {
                at = ((long long)blockIdx.z * p.P + pixel) * p.M;
                map_stride = 1;
            } else if (p.y_nhwc) {
                at = (long long)pixel * p.M;
                map_stride = 1;
            } else {
                const int b = pixel / p.OHW;
                at = (long long)b * p.M * p.OHW + (pixel - b * p.OHW);
                map_stride = p.OHW;
            }
#pragma unroll
            for (int j = 0; j < Tile::NJ; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int m = n0 + j * 8 + 2 * t + e;
                    if (m >= n_end) continue;
                    const float v = acc[i][j][2 * h + e];
                    if (p.partial) p.partial[at + m] = v;
                    else y[at + m * map_stride] = conv_store_as<TY>(conv_epilogue_value(v, bv[j][e], p.relu));
                }
        }
}

// A barrier over the warps that hold the accumulators: the block, or (TMA tiles, whose producer warp
// has left by the epilogue) named barrier 1 over the THREADS math threads.
template <class Tile>
__device__ __forceinline__ void tc_math_sync() {
    if constexpr (Tile::TMA) asm volatile("bar.sync 1, %0;\n" ::"n"(Tile::THREADS) : "memory");
    else __syncthreads();
}

// The staged epilogue's tile: ROWS rows of BN values of TY, each row padded by 16 bytes (so that the
// fragments' 8 rows x 4 columns of a store fall in distinct banks), in the pipeline's shared memory;
// ROWS is the most whole warp rows that fit (fp32 128 x 128 tiles go in two passes).
template <class TY, class Tile>
struct TcStagedTile {
    static constexpr int VEC = 16 / (int)sizeof(TY), CHUNKS = Tile::BN / VEC;  // 16-byte chunks per row
    static constexpr int ROW_BYTES = Tile::BN * (int)sizeof(TY) + 16;
    static constexpr int FIT = Tile::SMEM_BYTES / ROW_BYTES;
    static constexpr int ROWS = (FIT < Tile::BM ? FIT : Tile::BM) / Tile::WM * Tile::WM;
    static constexpr int BYTES = ROWS * ROW_BYTES;  // the shared memory a pass takes
    static_assert(ROWS >= Tile::WM && Tile::BN % VEC == 0, "a warp's rows fit the tile, rows are whole chunks");
};

// Stores the block's accumulators through shared memory (the pipeline's, free once the mainloop is
// done): rows y[pixel, nb ..] (or partial's) written as 16-byte chunks, a warp covering whole rows.
// m0: the block's first pixel; nb: its first map (of all M); wm, wn: the warp's tile in the block.
// The host sets p.staged_store only where the output is 16-byte aligned and each group's maps are a
// whole number of chunks (so are M, every row and every group's first map).
template <class TY, class Tile>
__device__ void tc_store_staged(const TcParams& p, const float (&acc)[Tile::MI][Tile::NJ][4], unsigned char* smem,
                                int m0, int nb, int n_end, int wm, int wn, int lane) {
    using S = TcStagedTile<TY, Tile>;
    const int g = lane >> 2, t = lane & 3;
    const bool raw = p.partial != nullptr;  // split-K: sums as they are, the reduction applies the rest
    float bv[Tile::NJ][2];
    tc_thread_bias<TY, Tile>(raw ? nullptr : static_cast<const TY*>(p.bias), nb + wn, n_end, t, bv);
    TY* dst = raw ? reinterpret_cast<TY*>(p.partial + (long long)blockIdx.z * p.P * p.M) : static_cast<TY*>(p.y);
    for (int r0 = 0; r0 < Tile::BM; r0 += S::ROWS) {
        if (wm >= r0 && wm < r0 + S::ROWS) {
#pragma unroll
            for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    TY* row = reinterpret_cast<TY*>(smem + (wm - r0 + i * 16 + g + 8 * h) * S::ROW_BYTES);
#pragma unroll
                    for (int j = 0; j < Tile::NJ; ++j) {  // maps 2t, 2t + 1 of n8 tile j: one 4- or 8-byte store
                        float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                        if (!raw) {
                            v0 = conv_epilogue_value(v0, bv[j][0], p.relu);
                            v1 = conv_epilogue_value(v1, bv[j][1], p.relu);
                        }
                        mma16_store_pair<TY>(row + wn + j * 8 + 2 * t, v0, v1);
                    }
                }
        }
        tc_math_sync<Tile>();  // the pass's rows are in the tile
        for (int c = threadIdx.x; c < S::ROWS * S::CHUNKS; c += Tile::THREADS) {
            const int r = c / S::CHUNKS, chunk = c - r * S::CHUNKS;
            const int pixel = m0 + r0 + r, m = nb + chunk * S::VEC;
            if (pixel >= p.P || m >= n_end) continue;
            // m < n_end is a whole chunk: the group's maps are (n_end - nb = Mg) a whole number of chunks.
            *reinterpret_cast<uint4*>(dst + (long long)pixel * p.M + m) =
                *reinterpret_cast<const uint4*>(smem + r * S::ROW_BYTES + chunk * 16);
        }
        tc_math_sync<Tile>();  // the tile is read before the next pass overwrites it
    }
}

template <class TY, class Tile>
__device__ void tc_epilogue(const TcParams& p, const float (&acc)[Tile::MI][Tile::NJ][4], unsigned char* smem,
                            int m0, int nb, int n_end, int wm, int wn, int lane) {
    if (p.staged_store) tc_store_staged<TY, Tile>(p, acc, smem, m0, nb, n_end, wm, wn, lane);
    else tc_store<TY, Tile>(p, acc, m0 + wm, nb + wn, n_end, lane);
}

// ---- the kernels ----

// Block (x, y, z)'s output tile: pixels m0 .., maps n0 .. of GEMM `group` (0 <= n0 < Mg), maps nb ..
// of all M, which end for its group at n_end.
struct TcBlock {
    int group, m0, n0, nb, n_end;
};

template <class Tile>
__device__ __forceinline__ TcBlock tc_block(const TcParams& p) {
    TcBlock b;
    b.group = blockIdx.y / p.map_tiles;
    b.m0 = blockIdx.x * Tile::BM;
    b.n0 = (blockIdx.y - b.group * p.map_tiles) * Tile::BN;
    b.nb = b.group * p.Mg + b.n0;
    b.n_end = (b.group + 1) * p.Mg;
    return b;
}

// Calls f(TY()) with y's element type TY for a CONV_* dtype (the epilogues are templates on it).
template <class F>
__device__ __forceinline__ void tc_with_y_type(int dtype, F&& f) {
    switch (dtype) {
    case CONV_F16: f(__half()); break;
    case CONV_BF16: f(__nv_bfloat16()); break;
    default: f(float());
    }
}

// The copies of block (x, y, z)'s k-range, k-tiles [z*tiles_per_split, min((z+1)*tiles_per_split,
// k_tiles)): the loader and the tile count, with tile t going to stage t % STAGES. Both mainloops start
// with AHEAD tiles in flight and issue one more per k-tile; every issue commits one cp.async group, empty
// past the last tile, so that the count wait_group relies on stays the same.
template <class Tile, class Loader = TcLoader<Tile>>
struct TcCopies {
    Loader loader;
    int kt0, nk;  // the range's first k-tile, and its tiles, >= 1: the host leaves no split empty

    template <int AHEAD>
    __device__ __forceinline__ void start(const TcParams& p, unsigned char* smem, int m0, int group, int n0) {
        kt0 = blockIdx.z * p.tiles_per_split;
        nk = min(p.tiles_per_split, p.k_tiles - kt0);
        loader.init(p, m0, group, n0, kt0 * Tile::BK);
#pragma unroll
        for (int t = 0; t < AHEAD; ++t) issue(p, smem, t);
    }

    __device__ __forceinline__ void issue(const TcParams& p, unsigned char* smem, int t) {
        if (t < nk) {
            loader.load(smem + t % Tile::STAGES * Tile::STAGE_BYTES, p);
            loader.advance(p);
        }
        cp_async_commit();
    }
};

// The warp-level math of the ldmatrix tiles, as the mainloop calls it.
template <class Tile>
struct TcLdmatrixMath {
    static __device__ __forceinline__ void run(const unsigned char* stage, float (&acc)[Tile::MI][Tile::NJ][4],
                                               int wm, int wn, int lane) {
        tc_warp_mma<Tile>(stage, acc, wm, wn, lane);
    }
};

// The mma.sync mainloop of block (x, y, z): acc = D[m0 .. m0+BM, maps n0 .. n0+BN of group y /
// map_tiles] over its k-range (TcCopies on Loader), Math::run per stage, STAGES-1 tiles in flight, one
// barrier per k-tile. Returns with no copy in flight and every warp done with the stages (the epilogues
// reuse them).
template <class Tile, class Loader, class Math>
__device__ __forceinline__ void tc_pipelined_mainloop(const TcParams& p, unsigned char* smem,
                                                      float (&acc)[Tile::MI][Tile::NJ][4], int m0, int group,
                                                      int n0, int wm, int wn, int lane) {
    TcCopies<Tile, Loader> copies;
    copies.template start<Tile::STAGES - 1>(p, smem, m0, group, n0);
    mma_zero(acc);
    for (int t = 0; t < copies.nk; ++t) {
        // Tile t has landed (for this thread's copies; the barrier makes it every thread's), and every
        // warp is done with tile t-1, whose stage the next copies overwrite.
        cp_async_wait<Tile::STAGES - 2>();
        __syncthreads();
        copies.issue(p, smem, t + Tile::STAGES - 1);
        Math::run(smem + t % Tile::STAGES * Tile::STAGE_BYTES, acc, wm, wn, lane);
    }
    cp_async_wait<0>();  // only empty groups remain; nothing may be in flight when the block exits
    __syncthreads();     // every warp is done with the stages before an epilogue reuses them
}

// The mainloop of the ldmatrix tiles (channels-last operands).
template <class Tile>
__device__ __forceinline__ void tc_mainloop(const TcParams& p, unsigned char* smem,
                                            float (&acc)[Tile::MI][Tile::NJ][4], int m0, int group, int n0,
                                            int wm, int wn, int lane) {
    tc_pipelined_mainloop<Tile, TcLoader<Tile>, TcLdmatrixMath<Tile>>(p, smem, acc, m0, group, n0, wm, wn, lane);
}

// ---- split-K within a thread-block cluster (sm_90) ----

// The cluster epilogue's tile: the block's fp32 sums, BM rows of BN + 4 floats (the padding staggers the
// fragments' rows over the banks), in the pipeline's shared memory.
template <class Tile>
struct TcClusterTile {
    static constexpr int LD = Tile::BN + 4;
    static_assert(Tile::BM * LD * (int)sizeof(float) <= Tile::SMEM_BYTES, "the sums fit the pipeline's memory");
};

// The blocks of one cluster (1 x 1 x splits) hold one output tile's partial sums over their k-ranges:
// each writes its sums to its own shared memory (THREADS threads; others of the block call
// tc_cluster_store_idle), then block r of S reduces rows [r*BM/S, (r+1)*BM/S)
// of the tile over all S blocks' memories (distributed shared memory, in rank order: deterministic),
// applies bias and ReLU and writes y in its layout and dtype. No workspace and no second launch: the
// point, at batch 1, where a launch costs more than the reduction.
// Empty before sm_90.
template <class TY, class Tile>
__device__ void tc_cluster_store(const TcParams& p, const float (&acc)[Tile::MI][Tile::NJ][4], unsigned char* smem,
                                 int m0, int nb, int n_end, int wm, int wn, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    constexpr int LD = TcClusterTile<Tile>::LD;
    const cg::cluster_group cluster = cg::this_cluster();
    float* sums = reinterpret_cast<float*>(smem);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < Tile::NJ; ++j)
                *reinterpret_cast<float2*>(&sums[(wm + i * 16 + g + 8 * h) * LD + wn + j * 8 + 2 * t]) =
                    make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    cluster.sync();  // every block's sums are written and visible to the cluster

    const int S = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const int per = (Tile::BM + S - 1) / S, r0 = rank * per, rows = min(per, Tile::BM - r0);
    const TY* bias = static_cast<const TY*>(p.bias);
    TY* y = static_cast<TY*>(p.y);
    // NHWC: a thread's consecutive elements run along the maps, NCHW along the pixels (coalesced stores).
    for (int e = threadIdx.x; e < rows * Tile::BN; e += Tile::THREADS) {
        const int r = r0 + (p.y_nhwc ? e / Tile::BN : e % rows), col = p.y_nhwc ? e % Tile::BN : e / rows;
        const int pixel = m0 + r, m = nb + col;
        if (pixel >= p.P || m >= n_end) continue;
        float v = 0.0f;
        for (int b = 0; b < S; ++b) v += cluster.map_shared_rank(sums, b)[r * LD + col];
        long long at;
        if (p.y_nhwc) {
            at = (long long)pixel * p.M + m;
        } else {
            const int img = pixel / p.OHW;
            at = ((long long)img * p.M + m) * p.OHW + (pixel - img * p.OHW);
        }
        y[at] = conv_store_as<TY>(conv_epilogue_value(v, bias ? conv_load(bias, m) : 0.0f, p.relu));
    }
    cluster.sync();  // no block leaves (freeing its memory) while another still reads it
#endif
}

// tc_cluster_store's cluster barriers, for the threads of a block that hold no sums (the TMA kernel's
// producer warp): a cluster barrier waits for every thread of every block in the cluster.
__device__ __forceinline__ void tc_cluster_store_idle() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // tc_cluster_store's first barrier: the sums are written
    cluster.sync();  // and its second: they have been read
#endif
}
