// tc_nchw_mma.cuh — the mma.sync mainloop of implicit_gemm_tf32's `nchw_mma*` configurations: a 1x1
// convolution's fp32 NCHW x and fp32 filters read in place by cp.async, no staging copy and no second
// launch, multiplied as tf32 (m16n8k8, fp32 accumulation).
//   Why: on the fast path (fp32 NCHW in and out) the other configurations stage x (NCHW -> channels-last)
//   and w (fp32 -> the operand dtype) in a launch of their own before the GEMM. At batch 1 a 1x1 layer's
//   GEMM takes a few microseconds, and the staging and its hand-off took about as long again (H100, cnn5:
//   fast 6.8 us against 3.0 us for the same GEMM on fp16 NHWC operands, bench/PERF_NOTES.md). tf32
//   operands are fp32 in memory, so nothing needs converting before the tensor cores; what the other
//   loaders cannot do is read NCHW x, whose pixels, not channels, are contiguous: ldmatrix and the 16-byte
//   chunk swizzle of tc_igemm.cuh want k contiguous. Here the A tile keeps x's order and the fragments
//   are read one 32-bit word at a time.
//   GEMM view as tc_igemm.cuh (rows = pixels, columns = maps), for a 1x1 window (k = c, K = C):
//     A[p, c] = x[b, c, oh*stride_h - pad_h, ow*stride_w - pad_w] (0 outside),  B[m, c] = w[m, c].
//   Shared memory per stage (fp32):
//     A: BK rows (channels) of BM + 8 pixels. Fragment reads (row = k t or t + 4, column = pixel g or
//        g + 8; g = lane / 4, t = lane % 4) hit bank (t * (BM + 8) + g) % 32 = 8t + g: all 32 distinct.
//     B: BN rows (maps) of BK + 4 channels. Reads (row g, column t): bank (20g + t) % 32, distinct.
//   Copies: A by 16-byte cp.async of 4 pixels where a tile row is 4-pixel aligned in memory (stride 1,
//   no padding, H*W a multiple of 4, x 16-byte aligned), else one 4-byte cp.async per pixel, which also
//   covers stride, padding and odd planes; B by 16-byte copies of 4 channels where C is a multiple of 4
//   and w 16-byte aligned, else by 4-byte ones. Each thread owns one column (a pixel, 4 pixels, or a
//   channel, 4 channels) of its tile and steps down its rows, so its source address is computed once per
//   tile. Padding, image edges, pixels >= P, maps >= M and channels >= C are zero-filled copies.
//   Rounding: fp32 -> tf32 to nearest after the shared-memory read, as TcTf32 does after ldmatrix.
#pragma once

#include "tc_igemm.cuh"

// A launch shape for this mainloop: BM pixels x BN maps, warps of 32 x 32, STAGES stages of BK = 16
// channels (4 chunks of 4 fp32).
template <int BM, int BN, int STAGES>
using TcNchwMmaShape = TcShape<BM, BN, 32, 32, STAGES, 4, false, false, true>;

template <class Tile>
struct TcNchwMmaLoader {
    static_assert(Tile::NCHW_MMA && Tile::BK == 16, "fp32 NCHW tiles of 16 channels (the B padding's banks)");
    static constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, THREADS = Tile::THREADS;
    // Columns a pass of the block's copies covers, and the rows each thread steps down.
    static constexpr int A_VEC_COLS = BM / 4, A_VEC_ITERS = BK * A_VEC_COLS / THREADS;
    static constexpr int A_ONE_ITERS = BK * BM / THREADS;
    static constexpr int B_VEC_COLS = BK / 4, B_VEC_ITERS = BN * B_VEC_COLS / THREADS;
    static constexpr int B_ONE_ITERS = BN * BK / THREADS;
    static_assert(THREADS % A_VEC_COLS == 0 && THREADS % BM == 0 && THREADS % BK == 0 && A_VEC_ITERS >= 1 &&
                      A_VEC_ITERS * THREADS == BK * A_VEC_COLS && B_VEC_ITERS * THREADS == BN * B_VEC_COLS,
                  "the tiles' columns divide the block, and every row is copied");

    bool a_vec, b_vec;  // 16-byte copies of x / w (else 4-byte ones)
    int a_col, a_row0;  // this thread's A column (pixel, or first of 4) and first row; rows step by a_step
    int a_step;
    long long a_src;    // x offset of its column at channel 0, or -1 where it reads only zeros
    int b_col, b_row0, b_step;  // its B column (channel, or first of 4) and rows (maps)
    int c0;             // the current tile's first channel
    int m_first;        // the block's first map

    __device__ void init(const TcParams& p, int m0, int /*group: 1x1 NCHW tiles are ungrouped*/, int n0, int k0) {
        const int tid = threadIdx.x;
        const long long plane = (long long)p.H * p.W;
        a_vec = p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0 && plane % 4 == 0 &&
                ((uintptr_t)p.x & 15) == 0;
        b_vec = p.Cx % 4 == 0 && ((uintptr_t)p.w & 15) == 0;
        const int cols = a_vec ? A_VEC_COLS : BM;
        a_col = (tid % cols) * (a_vec ? 4 : 1);
        a_row0 = tid / cols;
        a_step = THREADS / cols;
        // With 4-pixel chunks and H*W a multiple of 4 (so P too), a chunk's pixels are all < P or none.
        const int pixel = m0 + a_col;
        a_src = -1;
        if (pixel < p.P) {
            const int b = pixel / p.OHW, rem = pixel - b * p.OHW, oh = rem / p.OW, ow = rem - oh * p.OW;
            const int ih = oh * p.stride_h - p.pad_h, iw = ow * p.stride_w - p.pad_w;
            if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W)
                a_src = (long long)b * p.Cx * plane + (long long)ih * p.W + iw;
        }
        const int bcols = b_vec ? B_VEC_COLS : BK;
        b_col = (tid % bcols) * (b_vec ? 4 : 1);
        b_row0 = tid / bcols;
        b_step = THREADS / bcols;
        c0 = k0;
        m_first = n0;
    }

    // Issues the copies of the current k-tile (channels c0 .. c0 + BK) into one pipeline stage.
    __device__ void load(unsigned char* stage, const TcParams& p) const {
        const float* x = static_cast<const float*>(p.x);
        const float* w = static_cast<const float*>(p.w);
        float* As = reinterpret_cast<float*>(stage);
        float* Bs = reinterpret_cast<float*>(stage + Tile::A_BYTES);
        const long long plane = (long long)p.H * p.W;
        if (a_vec) {
#pragma unroll
            for (int i = 0; i < A_VEC_ITERS; ++i) {
                const int r = a_row0 + i * a_step, c = c0 + r;
                const bool ok = a_src >= 0 && c < p.Cx;
                cp_async_16_zfill(As + r * Tile::A_LD + a_col, ok ? x + a_src + c * plane : x, ok);
            }
        } else {
#pragma unroll 4
            for (int i = 0; i < A_ONE_ITERS; ++i) {
                const int r = a_row0 + i * a_step, c = c0 + r;
                const bool ok = a_src >= 0 && c < p.Cx;
                cp_async_4_zfill(As + r * Tile::A_LD + a_col, ok ? x + a_src + c * plane : x, ok);
            }
        }
        const int c = c0 + b_col;
        if (b_vec) {
#pragma unroll
            for (int i = 0; i < B_VEC_ITERS; ++i) {
                const int r = b_row0 + i * b_step, m = m_first + r;
                const bool ok = m < p.M && c < p.Cx;  // C a multiple of 4: a chunk is whole or past the end
                cp_async_16_zfill(Bs + r * Tile::B_LD + b_col, ok ? w + (long long)m * p.Cx + c : w, ok);
            }
        } else {
#pragma unroll 4
            for (int i = 0; i < B_ONE_ITERS; ++i) {
                const int r = b_row0 + i * b_step, m = m_first + r;
                const bool ok = m < p.M && c < p.Cx;
                cp_async_4_zfill(Bs + r * Tile::B_LD + b_col, ok ? w + (long long)m * p.Cx + c : w, ok);
            }
        }
    }

    __device__ void advance(const TcParams&) { c0 += BK; }
};

// acc += the warp's WM x WN share of one stage's A (BM x BK, stored k-major) times B^T (BK x BN).
template <class Tile>
struct TcNchwMmaMath {
    static __device__ __forceinline__ void run(const unsigned char* stage, float (&acc)[Tile::MI][Tile::NJ][4],
                                               int wm, int wn, int lane) {
        const float* As = reinterpret_cast<const float*>(stage);
        const float* Bs = reinterpret_cast<const float*>(stage + Tile::A_BYTES);
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int ks = 0; ks < Tile::BK; ks += 8) {
            uint32_t a[Tile::MI][4], b[Tile::NJ][2];
#pragma unroll
            for (int i = 0; i < Tile::MI; ++i) {
                const float* col = As + (ks + t) * Tile::A_LD + wm + i * 16 + g;
                a[i][0] = mma_round_tf32(__float_as_uint(col[0]));
                a[i][1] = mma_round_tf32(__float_as_uint(col[8]));
                a[i][2] = mma_round_tf32(__float_as_uint(col[4 * Tile::A_LD]));
                a[i][3] = mma_round_tf32(__float_as_uint(col[4 * Tile::A_LD + 8]));
            }
#pragma unroll
            for (int j = 0; j < Tile::NJ; ++j) {
                const float* row = Bs + (wn + j * 8 + g) * Tile::B_LD + ks + t;
                b[j][0] = mma_round_tf32(__float_as_uint(row[0]));
                b[j][1] = mma_round_tf32(__float_as_uint(row[4]));
            }
#pragma unroll
            for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
                for (int j = 0; j < Tile::NJ; ++j) mma_m16n8k8_tf32(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
};

// tc_mainloop's pipeline on this loader and math.
template <class Tile>
__device__ __forceinline__ void tc_nchw_mma_mainloop(const TcParams& p, unsigned char* smem,
                                                     float (&acc)[Tile::MI][Tile::NJ][4], int m0, int n0, int wm,
                                                     int wn, int lane) {
    tc_pipelined_mainloop<Tile, TcNchwMmaLoader<Tile>, TcNchwMmaMath<Tile>>(p, smem, acc, m0, 0, n0, wm, wn, lane);
}
