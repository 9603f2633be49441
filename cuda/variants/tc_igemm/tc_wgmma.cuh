// tc_wgmma.cuh — the tensor-core implicit GEMM's Hopper mainloop (sm_90a): the operand tiles of
// tc_igemm.cuh's loader (8-chunk rows, whose swizzle is wgmma's 128-byte one) multiplied by warpgroup
// wgmma straight from shared memory, fp16 or bf16 operands, fp32 accumulators in registers.
//   Against tc_mainloop (mma.sync): no ldmatrix and no per-warp fragment loads (the tensor cores read the
//   stages themselves), a warpgroup issues 64 x BN x 16 per instruction, and the multiply of one stage
//   runs asynchronously beside the next stage's copies and barrier.
//   Block: BM / 64 warpgroups, warpgroup wg owning pixel rows 64wg .. 64wg + 63 of the tile and all BN
//   maps; warp w of the block thus holds rows 16w .. 16w + 15 in mma.sync's accumulator layout (a warp
//   tile of 16 x BN), which is what lets tc_igemm.cuh's epilogues store it.
//   Pipeline: STAGES stages, STAGES - 2 tiles of copies in flight ahead of the one multiplied, and one
//   batch of wgmma left running across the barrier: the stage a copy overwrites was read by the batch
//   two tiles back, which every warpgroup has waited for before that barrier.
#pragma once

#include "tc_igemm.cuh"
#include "tc_nchw_feed.cuh"
#include "wgmma.cuh"

// A launch shape for the wgmma mainloop: BM pixels (a warpgroup per 64) x BN maps (64 or 128), STAGES
// >= 3 stages of 128-byte rows in dynamic shared memory; the NCHW one reads x through TcNchwFeed.
template <int BM, int BN, int STAGES>
using TcWgmmaShape = TcShape<BM, BN, 16, BN, STAGES, 8, true>;
template <int BM, int BN, int STAGES>
using TcNchwShape = TcShape<BM, BN, 16, BN, STAGES, 8, true, false, true>;

// Dynamic shared memory a wgmma block asks for: its stages, and room to align them to 1024 bytes.
template <class Tile>
constexpr int tc_wgmma_smem_bytes() {
    return Tile::SMEM_BYTES + 1024;
}

// The same for a block over the whole of a GEMM's k_tiles k-tiles: the stages it fills (a block of fewer
// k-tiles than stages never touches the others: the TMA producer's and the cp.async copies' tile t goes to
// stage t % STAGES), or the staged epilogue's rows of y where those take more (they reuse the stages). A 1x1
// layer of at most 128 channels is one or two k-tiles: a TMA 128 x 64 tile of 4 stages asks for 49 KB, not 97,
// and runs three blocks an SM (its registers' count), not two, so that more blocks wait on their copies at once.
template <class Tile>
inline int tc_wgmma_smem_bytes(int k_tiles, int y_dtype, bool staged_store) {
    const int stages = (k_tiles < Tile::STAGES ? k_tiles : Tile::STAGES) * Tile::STAGE_BYTES;
    const int rows = !staged_store ? 0
                     : y_dtype == CONV_F16 ? TcStagedTile<__half, Tile>::BYTES
                     : y_dtype == CONV_BF16 ? TcStagedTile<__nv_bfloat16, Tile>::BYTES
                                            : TcStagedTile<float, Tile>::BYTES;
    return (stages > rows ? stages : rows) + 1024;
}

// What a launch of configuration (Tile, whole K or not) asks for: sized to its k-tiles over the whole of K
// from NHWC x; all the stages under a split (the cluster's reduction, the partial sums' passes) or when the
// NCHW feed fills them.
template <class Tile, bool WHOLE_K>
inline int tc_wgmma_launch_smem_bytes(const TcParams& k) {
    return WHOLE_K && !Tile::NCHW ? tc_wgmma_smem_bytes<Tile>(k.k_tiles, k.y_dtype, k.staged_store)
                                  : tc_wgmma_smem_bytes<Tile>();
}

// acc = the block's tile over its k-range (TcCopies), as tc_mainloop's contract: returns with nothing in
// flight and every warp done with the stages. wg: this thread's warpgroup.
template <class Tile>
__device__ __forceinline__ void tc_wgmma_mainloop(const TcParams& p, unsigned char* smem,
                                                  float (&acc)[Tile::MI][Tile::NJ][4], int m0, int group, int n0,
                                                  int wg) {
    static_assert(Tile::WGMMA && Tile::ROW_CHUNKS == 8 && Tile::MI == 1 && Tile::BM % 64 == 0 && Tile::STAGES >= 3,
                  "warpgroups of 64 rows, warp tiles of 16 x BN, 128-byte rows, a stage between copy and multiply");
    constexpr int S = Tile::STAGES;
    constexpr bool BF16 = Tile::Op::DTYPE == CONV_BF16;
    float(&d)[Tile::BN / 2] = reinterpret_cast<float(&)[Tile::BN / 2]>(acc);
    TcCopies<Tile> copies;
    copies.template start<S - 2>(p, smem, m0, group, n0);
    [[maybe_unused]] TcNchwFeed<Tile> feed;  // NCHW tiles: A from registers, tile t+1 stored during tile t
    if constexpr (Tile::NCHW) feed.start(p, smem, m0, copies.kt0, copies.nk);
    mma_zero(acc);
    for (int t = 0; t < copies.nk; ++t) {
        // Tile t has landed and is visible to the tensor cores; every warpgroup has finished the wgmma
        // of tile t - 2, whose stage the next copies overwrite.
        cp_async_wait<S - 3>();
        fence_proxy_async_shared();
        __syncthreads();
        copies.issue(p, smem, t + S - 2);

        const unsigned char* stage = smem + t % S * Tile::STAGE_BYTES;
        const uint64_t desc_a = wgmma_desc_sw128(stage + wg * 64 * Tile::ROW_BYTES);
        const uint64_t desc_b = wgmma_desc_sw128(stage + Tile::A_BYTES);
        wgmma_pin(d);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Tile::ROW_CHUNKS / 2; ++ks)  // k-step ks: 32 bytes in, 2 in the descriptor
            wgmma_m64k16<Tile::BN, BF16>(d, desc_a + 2 * ks, desc_b + 2 * ks);
        wgmma_commit();
        // Stage (t+1) % S last held tile t+1-S <= t-2, whose wgmma every warpgroup finished before the
        // barrier above. The stores reach the tensor cores through the next k-tile's fence and barrier.
        if constexpr (Tile::NCHW) feed.step(p, smem, t, copies.kt0, copies.nk);
        wgmma_wait<1>();
        wgmma_pin(d);
    }
    wgmma_wait<0>();
    wgmma_pin(d);
    cp_async_wait<0>();
    __syncthreads();
}
