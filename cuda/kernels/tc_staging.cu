// tc_staging.cu — the staging copy of tc_staging.cuh. 64-bit indices throughout: a padded copy of a
// chunk-sized x can pass 2^31 elements.
//   tc_stage_kernel<TS, TD>: one thread per destination element (grid-stride), reads and writes
//   coalesced along the channels: channels-last sources, and channels-first ones with few channels
//   (G*C < 32: a few sectors per warp either way);
//   tc_stage_transpose_kernel<TS, TD>: channels-first sources with G*C >= 32, through a 32 x 32 shared
//   tile, so that reads run along `inner` and writes along the channels, both coalesced.
#include "tc_staging.cuh"

#include "tensor_io.cuh"

namespace {

// Source channel of destination channel cc < groups*Cp of row o, or -1 for padding (and, packed, for
// the other groups' places).
__device__ __forceinline__ long long stage_source(const TcStageChannels& ch, long long o, long long cc) {
    const long long g = cc / ch.Cp, c = cc - g * ch.Cp - (o / ch.rows) % ch.pack * ch.C;
    return c >= 0 && c < ch.C ? g * ch.C + c : -1;
}

template <class TS, class TD>
__global__ void tc_stage_kernel(const TS* __restrict__ src, TD* __restrict__ dst, bool channels_first,
                                long long inner, TcStageChannels ch, long long total) {
    const long long Cs = ch.groups * ch.C, Cd = ch.groups * ch.Cp;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long cc = i % Cd, oi = i / Cd;  // oi = o*inner + ii
        const long long o = oi / inner, ii = oi - o * inner;
        const long long c = stage_source(ch, o, cc);
        const float v = c >= 0 ? conv_load(src, channels_first ? (o * Cs + c) * inner + ii : oi * Cs + c) : 0.0f;
        dst[i] = conv_store_as<TD>(v);
    }
}

constexpr int TILE = 32, TILE_ROWS = 8;  // transpose tiles of 32 x 32, blocks of 32 x 8 threads

// dst[o][i][cc] = src[o][source(cc)][i]; one block per (o, 32 destination channels, 32 positions of
// inner), looping.
template <class TS, class TD>
__global__ void __launch_bounds__(TILE * TILE_ROWS)
tc_stage_transpose_kernel(const TS* __restrict__ src, TD* __restrict__ dst, long long inner, TcStageChannels ch,
                          long long i_tiles, long long c_tiles, long long tiles) {
    __shared__ float tile[TILE][TILE + 1];  // [channel][position], padded against bank conflicts
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long Cs = ch.groups * ch.C, Cd = ch.groups * ch.Cp;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long o = t / (i_tiles * c_tiles), rest = t - o * i_tiles * c_tiles;
        const long long c0 = rest / i_tiles * TILE, i0 = (rest % i_tiles) * TILE;
#pragma unroll
        for (int r = 0; r < TILE / TILE_ROWS; ++r) {
            const long long cc = c0 + ty + r * TILE_ROWS, i = i0 + tx;
            const long long c = cc < Cd ? stage_source(ch, o, cc) : -1;
            tile[ty + r * TILE_ROWS][tx] = c >= 0 && i < inner ? conv_load(src, (o * Cs + c) * inner + i) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < TILE / TILE_ROWS; ++r) {
            const long long i = i0 + ty + r * TILE_ROWS, cc = c0 + tx;
            if (i < inner && cc < Cd) dst[(o * inner + i) * Cd + cc] = conv_store_as<TD>(tile[tx][ty + r * TILE_ROWS]);
        }
        __syncthreads();  // the tile is read before the next one overwrites it
    }
}

template <class TS, class TD>
int tc_stage_launch(const void* src, bool channels_first, void* dst, int64_t outer, int64_t inner,
                    TcStageChannels ch, cudaStream_t stream) {
    const long long Cd = ch.groups * ch.Cp, total = outer * inner * Cd;
    if (total == 0) return CONV_OK;
    if (channels_first && ch.groups * ch.C >= TILE) {
        const long long i_tiles = (inner + TILE - 1) / TILE, c_tiles = (Cd + TILE - 1) / TILE;
        const long long tiles = outer * i_tiles * c_tiles;
        const unsigned grid = (unsigned)(tiles < 65535LL * 32 ? tiles : 65535LL * 32);
        tc_stage_transpose_kernel<TS, TD><<<grid, dim3(TILE, TILE_ROWS), 0, stream>>>(
            static_cast<const TS*>(src), static_cast<TD*>(dst), inner, ch, i_tiles, c_tiles, tiles);
        CONV_LAUNCH_CHECK(tc_stage_transpose_kernel);
        return CONV_OK;
    }
    constexpr int THREADS = 256;
    tc_stage_kernel<TS, TD><<<conv_grid_for(total, THREADS), THREADS, 0, stream>>>(
        static_cast<const TS*>(src), static_cast<TD*>(dst), channels_first, inner, ch, total);
    CONV_LAUNCH_CHECK(tc_stage_kernel);
    return CONV_OK;
}

template <class TS>
int tc_stage_to(const void* src, bool channels_first, void* dst, int dst_dtype, int64_t outer, int64_t inner,
                TcStageChannels ch, cudaStream_t stream) {
    switch (dst_dtype) {
    case CONV_F16: return tc_stage_launch<TS, __half>(src, channels_first, dst, outer, inner, ch, stream);
    case CONV_BF16: return tc_stage_launch<TS, __nv_bfloat16>(src, channels_first, dst, outer, inner, ch, stream);
    default: return tc_stage_launch<TS, float>(src, channels_first, dst, outer, inner, ch, stream);
    }
}

}  // namespace

int tc_stage_channels_last(const void* src, int src_dtype, bool channels_first, void* dst, int dst_dtype,
                           int64_t outer, int64_t inner, TcStageChannels ch, cudaStream_t stream) {
    switch (src_dtype) {
    case CONV_F16: return tc_stage_to<__half>(src, channels_first, dst, dst_dtype, outer, inner, ch, stream);
    case CONV_BF16: return tc_stage_to<__nv_bfloat16>(src, channels_first, dst, dst_dtype, outer, inner, ch, stream);
    default: return tc_stage_to<float>(src, channels_first, dst, dst_dtype, outer, inner, ch, stream);
    }
}
