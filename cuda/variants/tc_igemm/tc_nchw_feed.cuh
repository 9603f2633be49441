// tc_nchw_feed.cuh — the A operand of the wgmma mainloop (tc_wgmma.cuh) read straight from the caller's
// fp32 NCHW x and converted to the operand dtype in registers: the NCHW configurations of implicit_gemm_f16.
//   Why: fp32 NCHW in and out ("fast" precision) otherwise goes through a staging copy to fp16 NHWC
//   (tc_staging.cuh), which reads 4 bytes and writes 2 per element before the GEMM reads those 2 again:
//   8 bytes per element of x against 4, on 1x1 layers whose time is mostly that traffic, and at batch 1
//   a launch more. Here the GEMM reads each value of x once (w, small, is still staged).
//   Layout: an A tile is BM rows (output pixels) of ROW_CHUNKS 16-byte chunks of 8 k-values, k = (kh, kw,
//   c) with c fastest over Cp (tc_igemm.cuh). One chunk's 8 values are 8 channels of one pixel and tap,
//   8 planes apart in NCHW x, so a thread reads them one by one; the 32 lanes of a warp hold 32
//   consecutive rows of the same chunk, so each of those reads is 32 neighbouring pixels of one plane
//   (coalesced at stride 1), and the chunk goes to shared memory as one 16-byte store in the swizzled
//   layout (8 consecutive rows cover the 32 banks).
//   Items: (32-row block, chunk) pairs, BM/32 x ROW_CHUNKS per tile, spread over the warps: item i of
//   warp w is q = w + WARPS*i, rows 32*(q / ROW_CHUNKS) + lane, chunk q % ROW_CHUNKS.
//   Pipelining: registers hold one tile. While the tensor cores run tile t, tile t+1 is stored into its
//   stage and the reads of tile t+2 are issued into the registers it frees, so they fly during the next
//   k-tile. (Two tiles in registers, 32 more of them, won none of 246 cnn5 tunings on the H100: the
//   occupancy they cost outweighed the latency they hid.)
#pragma once

#include "mma_operand16.cuh"
#include "tc_igemm.cuh"

template <class Tile>
struct TcNchwFeed {
    using T = typename Tile::T;
    static constexpr int WARPS = Tile::THREADS / 32, ITEMS = Tile::BM / 32 * Tile::ROW_CHUNKS / WARPS;
    static_assert(Tile::BM % 32 == 0 && ITEMS * WARPS == Tile::BM / 32 * Tile::ROW_CHUNKS && Tile::VEC == 8,
                  "whole 32-row blocks of 8-value chunks, shared evenly by the warps");
    long long image[ITEMS];        // b*C*H*W of each item's pixel
    int ih0[ITEMS], iw0[ITEMS];    // its window's top-left corner (may be negative)
    unsigned valid;                // bit i: item i's row is a pixel < P
    float v[ITEMS][8];             // the tile in flight

    static __device__ __forceinline__ int item_row(int i) {
        return (threadIdx.x / 32 + WARPS * i) / Tile::ROW_CHUNKS * 32 + threadIdx.x % 32;
    }
    static __device__ __forceinline__ int item_chunk(int i) { return (threadIdx.x / 32 + WARPS * i) % Tile::ROW_CHUNKS; }

    __device__ __forceinline__ void init(const TcParams& p, int m0) {
        valid = 0;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int r = item_row(i);
            const bool ok = r < p.P - m0;
            const int pixel = ok ? m0 + r : 0;
            const int b = pixel / p.OHW, rem = pixel - b * p.OHW, oh = rem / p.OW, ow = rem - oh * p.OW;
            valid |= (unsigned)ok << i;
            image[i] = (long long)b * p.Cx * p.H * p.W;  // Cx: x's channels C, for NCHW tiles
            ih0[i] = oh * p.stride_h - p.pad_h;
            iw0[i] = ow * p.stride_w - p.pad_w;
        }
    }

    // Issues the reads of k-tile kt into v: zeros for padding, image edges, pixels >= P, channels >= C
    // and k >= K.
    __device__ __forceinline__ void load(const TcParams& p, int kt) {
        const float* x = static_cast<const float*>(p.x);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int k = kt * Tile::BK + item_chunk(i) * 8;
            const int tap = k / p.Cp, c = k - tap * p.Cp, kh = tap / p.KW, kw = tap - kh * p.KW;
            // Unsigned, as TcLoader: kh may pass KH where k >= K, and such reads are not made.
            const unsigned ih = (unsigned)ih0[i] + (unsigned)kh * (unsigned)p.dil_h,
                           iw = (unsigned)iw0[i] + (unsigned)kw * (unsigned)p.dil_w;
            const bool ok = k < p.K && (valid >> i & 1) && ih < (unsigned)p.H && iw < (unsigned)p.W;
            const float* src = x + image[i] + ((long long)c * p.H + (ok ? ih : 0)) * p.W + (ok ? iw : 0);
            const long long plane = (long long)p.H * p.W;
#pragma unroll
            for (int e = 0; e < 8; ++e) v[i][e] = ok && c + e < p.Cx ? __ldg(src + e * plane) : 0.0f;
        }
    }

    // Stores v, converted, as the A tile of `stage`.
    __device__ __forceinline__ void store(unsigned char* stage) const {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            *reinterpret_cast<uint4*>(stage + Tile::offset(item_row(i), item_chunk(i))) = mma16_pack8<T>(v[i]);
    }

    // Before the mainloop (k-tiles kt0 .. kt0 + nk - 1): tile 0 in stage 0, tile 1 in flight.
    __device__ __forceinline__ void start(const TcParams& p, unsigned char* smem, int m0, int kt0, int nk) {
        init(p, m0);
        load(p, kt0);
        store(smem);
        if (nk > 1) load(p, kt0 + 1);
    }

    // During k-tile t: tile t + 1 (if any) into its stage, tile t + 2 read in.
    __device__ __forceinline__ void step(const TcParams& p, unsigned char* smem, int t, int kt0, int nk) {
        if (t + 1 >= nk) return;
        store(smem + (t + 1) % Tile::STAGES * Tile::STAGE_BYTES);
        if (t + 2 < nk) load(p, kt0 + t + 2);
    }
};
