// igemm_math_simt.cuh — math policies of the implicit-GEMM mainloop on CUDA cores. The first two tile a block
// as 64 maps x 64 pixels, k in steps of 16, 256 threads as 16 x 16 each owning 4 maps x 4 consecutive
// pixels in registers; the W tile is k-major so that a thread's 4 maps are adjacent.
//   IgemmSimtFp32Math (`implicit_gemm`): fp32 tiles; a thread reads its operands of one k as two
//     float4 and does 16 FMAs: 16 FMAs per 2 shared-memory loads instead of one FMA per two global
//     loads in `direct`. Exact fp32 products, summed in another order than `direct` (rel. L2 ~1e-7).
//   IgemmHalf2Math (`fp16`): fp16 tiles (half the shared footprint and traffic: 8-byte reads), two
//     adjacent pixels per __hfma2 (8 instructions per k for the 16 outputs instead of 16); the fp16
//     partial sums of each 16-long run of k are flushed into fp32 accumulators.
//   IgemmSimtOuterMath (`implicit_gemm`'s tuned configurations): 128/64/32 x 256/128/64 block tiles,
//     8 x 8 (or, for small GEMMs, 4 x 4) outputs per thread, for the double-buffered mainloop
//     (igemm_pipeline.cuh); see below.
// The policy interface the mainloop uses is described in igemm_mainloop.cuh.
#pragma once

#include "igemm_epilogue.cuh"
#include "igemm_tile_loaders.cuh"

// A thread's TM x TN fp32 outputs in registers; each policy's Mma adds its multiply().
template <int TM, int TN>
struct IgemmAccumulators {
    float acc[TM][TN];

    __device__ void clear() {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
};

// The tiling both policies share; Op is the operand type of the tiles, A_PAD the W tile's row padding
// (in elements) that spreads its k-strided stores over the banks.
template <class Op, int A_PAD>
struct IgemmMicroTile {
    using Operand = Op;
    using T = typename Op::type;
    static constexpr unsigned INPUTS = CONV_DT_ALL;
    static constexpr int MIN_ARCH = 0;
    static constexpr int BM = 64, BN = 64, BK = 16, THREADS = 256;
    static constexpr int TM = 4, TN = 4;  // outputs per thread: 16 x 16 threads cover 64 x 64
    static constexpr bool A_K_MAJOR = true;
    static constexpr int LDA = BM + A_PAD, LDB = BN;
    static constexpr int A_BYTES = BK * LDA * (int)sizeof(T);
    static constexpr int SMEM_BYTES = A_BYTES + BK * LDB * (int)sizeof(T);
    static_assert(BM == 16 * TM && BN == 16 * TN && THREADS == 256, "16 x 16 threads, one micro-tile each");
    static_assert((LDA * sizeof(T)) % 16 == 0 && A_BYTES % 16 == 0, "a thread's 4 maps / 4 pixels are one aligned read");

    static __device__ int thread_m() { return threadIdx.x / 16 * TM; }
    static __device__ int thread_n() { return threadIdx.x % 16 * TN; }
    // The thread's i-th map and j-th pixel within the block tile (IgemmRegisterOutput).
    static __device__ int tile_m(int i) { return thread_m() + i; }
    static __device__ int tile_n(int j) { return thread_n() + j; }
    using Accumulators = IgemmAccumulators<TM, TN>;
    using Output = IgemmRegisterOutput<IgemmMicroTile>;
};

struct IgemmSimtFp32Math : IgemmMicroTile<IgemmFloatOperand, 4> {
    struct Mma : Accumulators {
        // As is W^T (k-major), Bs is Xunroll, both BK rows.
        __device__ void multiply(const float* As, const float* Bs) {
            const int m = thread_m(), n = thread_n();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                const float4 a4 = *reinterpret_cast<const float4*>(&As[kk * LDA + m]);
                const float4 b4 = *reinterpret_cast<const float4*>(&Bs[kk * LDB + n]);
                const float a[TM] = {a4.x, a4.y, a4.z, a4.w};
                const float b[TN] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
        }
    };
};

// Error bound of IgemmHalf2Math. fp16 has a unit roundoff u = 2^-11 ~ 4.9e-4. Three sources:
//   1. x and w are rounded to fp16 (not f16 inputs, which are exact): each product carries a relative
//      error <= 2u (rms ~0.8u for uniform data), independent between products: ~2.7e-4 relative L2;
//   2. each HFMA2 rounds once; over a run of n <= 16 products the rounding errors add up to
//      ~u*sqrt(sum_j |partial_j|^2), which for zero-mean unit-scale data is ~1.2x the rms size of the
//      run's sum times u, i.e. ~5-6e-4 relative;
//   3. the flushes into fp32 (2^-24 each) are negligible.
// Because the runs are flushed, the relative error does not grow with C*KH*KW: simulating this exact
// summation order (fp16-rounded operands, one rounding per fma, runs of 16, fp32 flushes) for
// uniform(-1,1) x and w gives 3.4e-4 (C*KH*KW = 1), 5.2e-4 (9) and 6.7e-4 (49 .. 5000) relative L2.
// The variant's bound is 2e-3: 3x margin over that. (Worst case, not statistical: |error| <=
// (2u + 16u) * sum |x*w| per output.) Range: |x|, |w| (bf16 inputs too) and every run of 16 partial
// sums must stay below 65504 (fp16 max); values below 6.1e-5 lose relative precision (subnormals).
struct IgemmHalf2Math : IgemmMicroTile<IgemmHalfOperand, 8> {
    static_assert(TM == 4 && TN == 4, "the inner loop reads maps and pixels as two half2 each");

    struct Mma : Accumulators {
        __device__ void multiply(const __half* As, const __half* Bs) {
            const int m = thread_m(), n = thread_n();
            // One fp16 run of BK products per output: [map i][pixel pair j].
            __half2 run[TM][TN / 2];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN / 2; ++j) run[i][j] = __float2half2_rn(0.0f);
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                const __half2* a2 = reinterpret_cast<const __half2*>(&As[kk * LDA + m]);
                const __half2* b2 = reinterpret_cast<const __half2*>(&Bs[kk * LDB + n]);
                const __half2 a01 = a2[0], a23 = a2[1], b01 = b2[0], b23 = b2[1];
                // Each map's weight broadcast to both halves, times two adjacent pixels.
                const __half2 a[TM] = {__low2half2(a01), __high2half2(a01), __low2half2(a23), __high2half2(a23)};
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    run[i][0] = __hfma2(a[i], b01, run[i][0]);
                    run[i][1] = __hfma2(a[i], b23, run[i][1]);
                }
            }
            // Flush the runs into fp32 so that the fp16 partial sums stay short and small.
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN / 2; ++j) {
                    const float2 f = __half22float2(run[i][j]);
                    acc[i][2 * j] += f.x;
                    acc[i][2 * j + 1] += f.y;
                }
        }
    };
};

// IgemmSimtOuterMath<BM, BN, WARPS_M, WARPS_N, MIN_BLOCKS, QUADS, BK> (`implicit_gemm`'s tuned configurations,
// run by the double-buffered mainloop of igemm_pipeline.cuh): BM maps x BN pixels per block, k in steps of BK,
// WARPS_M x WARPS_N warps each owning a WM x WN region, every thread a TM x TN tile of it as QUADS x QUADS
// quadrants of 4 x 4 (QUADS 2: 8 x 8; 1: 4 x 4). With QUADS 2 a thread owns maps lane_m() + {0..3} and
// + WM/2 + {0..3}, pixels lane_n() + {0..3} and + WN/2 + {0..3}: per k it reads its 8 maps and 8 pixels as
// four LDS.128 and does 64 FFMAs (outer product from registers), 16 FMAs per shared load where a 4 x 4 tile
// does 8. Splitting the 8 into two halves WM/2 apart keeps a warp's reads of one row contiguous (8 lanes x 16
// bytes of maps, 4 x 16 of pixels): no bank conflicts. QUADS 1 gives each thread a quarter of the work of a
// k-step: for small GEMMs (1x1 layers at batch 1), whose blocks are few and whose k-loop is a chain of
// latencies, more threads a block and a shorter chain each. The tiles are k-major, rows padded by 4 floats
// (LD % 32 == 4) so the loaders' transposed quad stores spread over all banks. Exact fp32 products (fmaf),
// each output's sum in k order.
template <int BM_, int BN_, int WARPS_M, int WARPS_N, int MIN_BLOCKS_ = 2 * 256 / (32 * WARPS_M * WARPS_N),
          int QUADS = 2, int BK_ = 8>
struct IgemmSimtOuterMath {
    using Operand = IgemmFloatOperand;
    using T = float;
    static constexpr unsigned INPUTS = CONV_DT_ALL;
    static constexpr int BM = BM_, BN = BN_, BK = BK_, THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int TM = 4 * QUADS, TN = 4 * QUADS;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;         // a warp's region
    static constexpr int LANES_M = WM / TM, LANES_N = WN / TN;         // its lanes, LANES_N fastest
    static_assert(QUADS == 1 || QUADS == 2, "4 x 4 or 8 x 8 outputs per lane");
    static_assert(WM * WARPS_M == BM && WN * WARPS_N == BN && LANES_M * LANES_N == 32, "TM x TN per lane, 32 lanes");
    // Blocks per SM that the registers must allow (__launch_bounds__). The default, 512 threads per SM,
    // caps a thread at 128 registers: 64 accumulators + 16 operands + staged loads. The thin-map tiles,
    // whose few threads stage 4x the loads each, ask for fewer blocks instead of spilling.
    static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
    static constexpr int LDA = BM + 4, LDB = BN + 4;
    static constexpr int A_FLOATS = BK * LDA, B_FLOATS = BK * LDB, STAGE_FLOATS = A_FLOATS + B_FLOATS;
    static_assert(LDA % 32 == 4 && LDB % 32 == 4 && A_FLOATS % 4 == 0 && STAGE_FLOATS % 4 == 0,
                  "float4-aligned rows, padded for conflict-free transposed stores");

    static __device__ int lane_m() {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        return warp / WARPS_N * WM + lane / LANES_N * 4;
    }
    static __device__ int lane_n() {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        return warp % WARPS_N * WN + lane % LANES_N * 4;
    }
    // Quadrant q of a side starts q * (W / QUADS) past the lane's first: WM/2 apart for 8 x 8 tiles.
    static __device__ int tile_m(int i) { return lane_m() + i / 4 * (WM / QUADS) + i % 4; }
    static __device__ int tile_n(int j) { return lane_n() + j / 4 * (WN / QUADS) + j % 4; }

    struct Mma : IgemmAccumulators<TM, TN> {
        using IgemmAccumulators<TM, TN>::acc;
        // As is W^T (BK x LDA, k-major), Bs is Xunroll (BK x LDB).
        __device__ void multiply(const float* As, const float* Bs) {
            const int m = lane_m(), n = lane_n();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float a[TM], b[TN];
#pragma unroll
                for (int q = 0; q < QUADS; ++q) {
                    const float4 aq = *reinterpret_cast<const float4*>(&As[kk * LDA + m + q * (WM / QUADS)]);
                    const float4 bq = *reinterpret_cast<const float4*>(&Bs[kk * LDB + n + q * (WN / QUADS)]);
                    a[4 * q] = aq.x, a[4 * q + 1] = aq.y, a[4 * q + 2] = aq.z, a[4 * q + 3] = aq.w;
                    b[4 * q] = bq.x, b[4 * q + 1] = bq.y, b[4 * q + 2] = bq.z, b[4 * q + 3] = bq.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
        }
    };
    using Output = IgemmRegisterOutput<IgemmSimtOuterMath>;
};
