// tc_wgmma_tma.cuh — the Hopper GEMM fed by the tensor memory accelerator (ungrouped layers, sm_90a):
// wgmma as in tc_wgmma.cuh, its operand tiles copied by TMA from a producer warp, the math warpgroups
// released stage by stage through mbarriers.
//   Why a kernel of its own: tc_igemm.cuh's im2col gather has every thread issue 16-byte cp.async copies
//   with their own address and bounds arithmetic between the barrier and the next wgmma. Here one thread
//   issues one copy per operand per stage, and the TMA unit does the address arithmetic:
//     - x: for a 1x1 window at stride 1 without padding, NHWC x is the GEMM's A as it lies in memory, a
//       P x C' matrix (P = B*H*W pixels), read in boxes of a tiled map; for any other window, an im2col
//       map gathers BM output pixels' inputs for one tap (kh, kw) and 64 channels, padding, stride,
//       dilation and the image edges included (tma_map.cuh);
//     - w (M, KH, KW, C'): a 3-D map's box of BN maps, one tap, 64 channels.
//   The maps use the 128-byte swizzle, which writes exactly the layout the wgmma descriptors read
//   (TcTile::offset with 8-chunk rows), and fill zeros outside the tensor: pixels >= P, maps >= M,
//   channels >= C' and padding need no guards.
//   Block: BM / 64 math warpgroups (tc_wgmma_mainloop's tiles and accumulator layout), then one producer
//   warp. Pipeline: STAGES stages, all of them filling ahead of the math. full[s]: the producer's
//   arrival with the stage's byte count, completed by the two copies; empty[s]: one arrival per math warp
//   once the wgmma batch that read stage s is done (wgmma.wait_group 1 in the next k-tile), which lets
//   the producer refill it. The producer leaves after its last copy, so the epilogue synchronises the
//   math warps only (tc_math_sync).
//   Persistent (PERSISTENT): a wave of blocks, each looping over output tiles (gridDim.x apart, the maps
//   of a pixel tile next to each other, so that the blocks running at once share their x rows in L2). The
//   stages' positions and mbarrier phases run on across tiles, so the producer copies the next tile's
//   k-tiles while the math warps store this one: a 1x1 layer of few channels is a few k-tiles a tile, and
//   a block per tile waited for its first copies and then for its stores each time (MobileNetV2's 96 ->
//   576 expansion at batch 128 ran at 31% of the memory floor, 6.7 waves of 4.2 us a block). Its epilogue
//   writes y by TMA stores from a buffer of its own past the stages and leaves them running under the next
//   tile (tc_store_tma), or from registers where y cannot be stored so (tc_store).
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: the maps are encoded on the host, tma_map.cuh)

#include "hopper_sync.cuh"
#include "tc_igemm_kernel.cuh"

// A launch shape: BM pixels (a warpgroup per 64) x BN maps (64, 128 or 256), STAGES stages.
template <int BM, int BN, int STAGES>
using TcTmaShape = TcShape<BM, BN, 16, BN, STAGES, 8, true, true>;

// The pipeline's barriers (static shared memory, beside the stages in dynamic shared memory).
template <class Tile>
struct TcTmaBarriers {
    uint64_t full[Tile::STAGES], empty[Tile::STAGES];
};

// The shared memory a persistent block asks for: every stage (a block's tiles follow each other through them)
// and, where its epilogue is TMA stores, a buffer of one tile of y past them (at smem + Tile::SMEM_BYTES in
// tc_wgmma_tma_kernel).
template <class Tile>
inline int tc_tma_persistent_smem_bytes(int y_dtype, bool y_tma) {
    return tc_wgmma_smem_bytes<Tile>() + (y_tma ? Tile::BM * Tile::BN * (int)conv_dtype_size(y_dtype) : 0);
}

// Blocks an SM the registers must allow (__launch_bounds__' second argument; 0: no bound, as the
// non-persistent kernels have always been built): one for the persistent kernels, whose shared memory allows
// no more where y is 16-bit (128 x 64: 96 KB of stages and a 16 KB buffer of y).
constexpr int tc_tma_min_blocks(bool persistent) { return persistent ? 1 : 0; }

// The producer (one thread): k-tile kt0 + t into the stage of pipeline position it0 + t for t < nk, once
// the math warps have released that stage's previous tile (position it0 + t - STAGES). Positions count on
// across a persistent block's tiles (below 2^31: the host's bound on tiles x k-tiles): position i is stage
// i % STAGES, its fill i / STAGES. k-tiles run over the taps (kh, kw), and within a tap over 64-channel
// ranges c (BK channels; the last range's channels past C' read zeros from both maps): x's column of BM
// output pixels from m0 for that tap and range, w's box of BN maps from nb.
template <class Tile>
__device__ __forceinline__ void tc_tma_produce(const TcParams& p, const void* x_map, const void* w_map,
                                               unsigned char* smem, TcTmaBarriers<Tile>& bars, int m0, int nb,
                                               int kt0, int nk, unsigned it0) {
    constexpr int S = Tile::STAGES;
    // The window corner of output pixel m0 (image n, row oh, column ow): the im2col column's start.
    const int n = m0 / p.OHW, r = m0 - n * p.OHW, oh = r / p.OW, ow = r - oh * p.OW;
    const int h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
    const int c_tiles = (p.Cp + Tile::BK - 1) / Tile::BK;
    const int tap = kt0 / c_tiles;
    int c = kt0 - tap * c_tiles, kh = tap / p.KW, kw = tap - kh * p.KW;  // k-tile t's channel range and tap
    for (int t = 0; t < nk; ++t) {
        const unsigned it = it0 + t, s = it % S;
        if (it >= S) mbar_wait(&bars.empty[s], (it / S - 1) & 1);
        unsigned char* stage = smem + s * Tile::STAGE_BYTES;
        // The boxes' bytes, zero-filled parts included: TMA always writes a whole box.
        mbar_arrive_expect_tx(&bars.full[s], Tile::STAGE_BYTES);
        if (p.x_im2col)
            tma_load_im2col(stage, x_map, &bars.full[s], c * Tile::BK, w0, h0, n, (unsigned short)(kw * p.dil_w),
                            (unsigned short)(kh * p.dil_h));
        else
            tma_load_2d(stage, x_map, &bars.full[s], c * Tile::BK, m0);
        tma_load_3d(stage + Tile::A_BYTES, w_map, &bars.full[s], c * Tile::BK, kh * p.KW + kw, nb);
        if (++c == c_tiles) {
            c = 0;
            if (++kw == p.KW) kw = 0, ++kh;
        }
    }
}

// The math warps: acc = the block's tile over the nk k-tiles at pipeline positions it0 .., as
// tc_wgmma_mainloop's contract (returns with every wgmma done and every stage released; the stages are
// free for the epilogue once every math warp has returned, unless the block goes on to another tile).
template <class Tile>
__device__ __forceinline__ void tc_tma_consume(unsigned char* smem, TcTmaBarriers<Tile>& bars,
                                               float (&acc)[Tile::MI][Tile::NJ][4], int nk, int wg, int lane,
                                               unsigned it0) {
    constexpr int S = Tile::STAGES;
    constexpr bool BF16 = Tile::Op::DTYPE == CONV_BF16;
    float(&d)[Tile::BN / 2] = reinterpret_cast<float(&)[Tile::BN / 2]>(acc);
    mma_zero(acc);
    for (int t = 0; t < nk; ++t) {
        const unsigned it = it0 + t, s = it % S;
        mbar_wait(&bars.full[s], (it / S) & 1);
        const unsigned char* stage = smem + s * Tile::STAGE_BYTES;
        const uint64_t desc_a = wgmma_desc_sw128(stage + wg * 64 * Tile::ROW_BYTES);
        const uint64_t desc_b = wgmma_desc_sw128(stage + Tile::A_BYTES);
        wgmma_pin(d);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Tile::ROW_CHUNKS / 2; ++ks)
            wgmma_m64k16<Tile::BN, BF16>(d, desc_a + 2 * ks, desc_b + 2 * ks);
        wgmma_commit();
        wgmma_wait<1>();  // tile t - 1's batch is done: its stage may be refilled
        wgmma_pin(d);
        if (t > 0 && lane == 0) mbar_arrive(&bars.empty[(it - 1) % S]);
    }
    wgmma_wait<0>();
    wgmma_pin(d);
    if (lane == 0) mbar_arrive(&bars.empty[(it0 + nk - 1) % S]);  // the last stage, for a next tile's copies
}

// The epilogue as TMA stores (y NHWC in rows of whole 16-byte chunks, one GEMM, no split): the math warps write
// their accumulators, with bias and ReLU, into the stages (free by now) as boxes of BM rows x 128 bytes in the
// 128-byte swizzle, the layout of y_map's boxes (a fragment's pair of outputs lands in chunk (j ^ row) % 8 of its
// row, so that a warp's 32 lanes write distinct banks); then one thread copies each box to y and waits for the
// copies. Rows past P and maps past M are clipped by the copy engine. Against tc_store_staged: no second barrier
// and no loop of 16-byte loads and stores by every thread.
// ASYNC (the persistent kernel, smem a buffer of its own): the buffer's previous copies must have read it
// before the warps write it, and these are left running (tc_wgmma_tma_kernel waits for the last ones).
template <class TY, class Tile, bool ASYNC>
__device__ void tc_store_tma(const TcParams& p, const void* y_map, const float (&acc)[1][Tile::NJ][4],
                             unsigned char* smem, int m0, int nb, int warp, int lane) {
    constexpr int E = 128 / (int)sizeof(TY), BOX_BYTES = Tile::BM * 128;  // a box row's elements; a box's bytes
    static_assert(Tile::BN % E == 0, "the tile's maps are whole boxes");
    static_assert(Tile::BM * Tile::BN * (int)sizeof(TY) <=
                      TcStagedTile<TY, Tile>::ROWS * TcStagedTile<TY, Tile>::ROW_BYTES,
                  "the boxes fit the shared memory the host gives the staged epilogue");
    const int g = lane >> 2, t = lane & 3;
    float bv[Tile::NJ][2];
    tc_thread_bias<TY, Tile>(static_cast<const TY*>(p.bias), nb, p.M, t, bv);
    if constexpr (ASYNC) {
        if (threadIdx.x == 0) tma_store_wait_read();
        tc_math_sync<Tile>();
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + g + 8 * h;  // the block's row: pixel m0 + r
#pragma unroll
        for (int j = 0; j < Tile::NJ; ++j) {
            const int c = j * 8 + 2 * t, byte = c % E * (int)sizeof(TY);  // column in the tile; byte in its box row
            unsigned char* at = smem + c / E * BOX_BYTES + r * 128 + (((byte >> 4) ^ (r & 7)) << 4) + (byte & 15);
            mma16_store_pair<TY>(reinterpret_cast<TY*>(at), conv_epilogue_value(acc[0][j][2 * h], bv[j][0], p.relu),
                                 conv_epilogue_value(acc[0][j][2 * h + 1], bv[j][1], p.relu));
        }
    }
    fence_proxy_async_shared();  // the writes, visible to the copy engine
    tc_math_sync<Tile>();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < Tile::BN / E; ++b) tma_store_2d(y_map, smem + b * BOX_BYTES, nb + b * E, m0);
        tma_store_commit();
        if constexpr (!ASYNC) tma_store_wait_all();  // the copies have read the stages and written y before the end
    }
}

// Block (x, y, z) of a grid (pixel tiles, map tiles, splits): the GEMM of x_map and w_map over the block's
// k-range (p.tiles_per_split k-tiles from z's), then the epilogue; CLUSTER: each (x, y) tile's splits are
// one thread-block cluster that reduces them (tc_cluster_store), as in tc_igemm_kernel; PERSISTENT: a
// one-dimensional wave of blocks, block x taking output tiles x, x + gridDim.x, .. of the (pixel tile, map
// tile) grid, maps fastest, each over the whole of K. Launched as a programmatic dependent
// (grid_dependency.cuh): only the producer's copies touch global memory before the epilogue, which
// follows them, so only the producer waits, after the block's set-up.
// y_tma: the epilogue as TMA stores through y_map (tc_store_tma; a persistent block's from a buffer past the
// stages, its copies left running under the next tile), else tc_epilogue's (a persistent block's from
// registers, tc_store: the stages are the next tile's).
// Empty where the build lacks sm_90a code (the host checks before it launches).
template <class Tile, bool CLUSTER, bool PERSISTENT>
__global__ void __launch_bounds__(Tile::THREADS + 32, tc_tma_min_blocks(PERSISTENT))
    tc_wgmma_tma_kernel(TcParams p, const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                        const __grid_constant__ CUtensorMap y_map, int y_tma) {
#ifdef CONV_WGMMA
    static_assert(Tile::WGMMA && Tile::TMA && Tile::MI == 1 && Tile::BM % 64 == 0 && Tile::ROW_CHUNKS == 8,
                  "warpgroups of 64 rows, warp tiles of 16 x BN, 128-byte rows (the swizzle's span)");
    static_assert(!(CLUSTER && PERSISTENT), "a persistent block takes whole tiles");
    unsigned char* smem = tc_pipeline_smem<Tile>();
    __shared__ TcTmaBarriers<Tile> bars;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // The block's tiles: one (blockIdx's), or every gridDim.x-th of the grid's under PERSISTENT.
    const int tiles = PERSISTENT ? (p.P + Tile::BM - 1) / Tile::BM * p.map_tiles : 1;
    const int first = PERSISTENT ? (int)blockIdx.x : 0, step = PERSISTENT ? (int)gridDim.x : 1;
    const auto block_of = [&](int tile) {
        if constexpr (!PERSISTENT) return tc_block<Tile>(p);
        TcBlock b;  // one GEMM: group 0, maps n0 .. of all M
        const int mt = tile / p.map_tiles;
        b.group = 0;
        b.m0 = mt * Tile::BM;
        b.n0 = b.nb = (tile - mt * p.map_tiles) * Tile::BN;
        b.n_end = p.Mg;
        return b;
    };
    const int kt0 = blockIdx.z * p.tiles_per_split, nk = min(p.tiles_per_split, p.k_tiles - kt0);
    if (threadIdx.x == 0) {
        for (int s = 0; s < Tile::STAGES; ++s) {
            mbar_init(&bars.full[s], 1);
            mbar_init(&bars.empty[s], Tile::THREADS / 32);
        }
        mbar_fence_init();
    }
    __syncthreads();
    if (warp == Tile::THREADS / 32) {  // the producer warp: one thread issues every copy, then all leave
        if (lane == 0) {
            grid_wait_prior();  // the previous kernel's writes of x and w (the staging's) are visible
            unsigned it = 0;
            for (int tile = first; tile < tiles; tile += step, it += nk) {
                const TcBlock blk = block_of(tile);
                tc_tma_produce<Tile>(p, &x_map, &w_map, smem, bars, blk.m0, blk.nb, kt0, nk, it);
            }
            grid_launch_dependents();  // every copy is issued
        }
        if constexpr (CLUSTER) tc_cluster_store_idle();  // the cluster's barriers count every thread
        return;
    }
    float acc[Tile::MI][Tile::NJ][4];
    unsigned it = 0;
    for (int tile = first; tile < tiles; tile += step, it += nk) {
        const TcBlock blk = block_of(tile);
        tc_tma_consume<Tile>(smem, bars, acc, nk, warp / 4, lane, it);
        if (tile + step >= tiles) grid_launch_dependents();  // the operands are read: the next kernel may launch
        tc_with_y_type(p.y_dtype, [&](auto ty) {
            using TY = decltype(ty);
            if constexpr (PERSISTENT) {  // the stages hold the next tile's copies
                if (y_tma)
                    tc_store_tma<TY, Tile, true>(p, &y_map, acc, smem + Tile::SMEM_BYTES, blk.m0, blk.nb, warp, lane);
                else
                    tc_store<TY, Tile>(p, acc, blk.m0 + warp * 16, blk.nb, blk.n_end, lane);
                return;
            }
            tc_math_sync<Tile>();  // every math warp is done with the stages before the epilogue reuses them
            if constexpr (CLUSTER)
                tc_cluster_store<TY, Tile>(p, acc, smem, blk.m0, blk.nb, blk.n_end, warp * 16, 0, lane);
            else if (y_tma)
                tc_store_tma<TY, Tile, false>(p, &y_map, acc, smem, blk.m0, blk.nb, warp, lane);
            else
                tc_epilogue<TY, Tile>(p, acc, smem, blk.m0, blk.nb, blk.n_end, warp * 16, 0, lane);
        });
    }
    if (PERSISTENT && y_tma && threadIdx.x == 0) tma_store_wait_all();  // the last tile's copies, before the end
#else
    (void)p; (void)x_map; (void)w_map; (void)y_map; (void)y_tma;
#endif
}
