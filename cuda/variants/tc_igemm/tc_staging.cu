// tc_staging.cu — the staging copies of tc_staging.cuh, x's and w's in one launch: blocks [0, a.blocks)
// do the first copy, the rest the second, each grid-striding over its own part. 64-bit indices
// throughout: a padded copy of a chunk-sized x can pass 2^31 elements. Per copy, one of three bodies:
//   stage_elementwise: one thread per destination element, reads and writes coalesced along the
//   channels: channels-last sources, and channels-first ones with few channels (G*C < 32: a few
//   sectors per warp either way);
//   stage_transpose: channels-first sources with G*C >= 32 and inner >= 32, through a 32 x 32 shared
//   tile, so that reads run along `inner` and writes along the channels, both coalesced;
//   stage_rows: channels-first sources with inner < 32 (filters: inner is the taps), one thread per
//   (row, channel) looping over inner. A transpose tile there would be mostly empty: 1x1 filters of
//   M x C made M*C/32 blocks of 32 values each, thousands of blocks for a few hundred KB, which cost
//   more than the GEMM on batch-1 layers (H100: 2048 x 512 filters, 32768 blocks).
// Launched as a programmatic dependent (grid_dependency.cuh), as is the GEMM that reads the staged
// operands: each block lets the GEMM launch at once, which waits for this grid's writes before reading.
#include "tc_staging.cuh"

#include <climits>
#include <utility>

#include "grid_dependency.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int TILE = 32, TILE_ROWS = 8;  // transpose tiles of 32 x 32
constexpr int THREADS = TILE * TILE_ROWS;
// stage_rows: reads in flight per thread. More would cost registers, and the kernel's register count is
// the most any of its bodies needs: at 16 (~100 registers) the transpose body, memory-bound, lost
// occupancy and large staged layers ran 10-80% slower (H100, cnn5 batch 32).
constexpr int ROWS_BATCH = 4;

// A copy with its launch geometry.
struct StageJob {
    TcStageCopy copy;
    bool transpose, rows;              // the body: stage_transpose, stage_rows, or elementwise
    bool narrow;                       // elementwise: every index of the copy fits an int
    long long i_tiles, c_tiles, work;  // transpose: tiles of inner and of channels; work: tiles or elements
    unsigned blocks;                   // of the launch's grid
};

// Source channel of destination channel cc < groups*Cp, for a row at pack place q, or -1 for padding
// (and, packed, for the other groups' places). 32-bit: it runs per element, and channel counts fit.
__device__ __forceinline__ int stage_source(const TcStageChannels& ch, int q, int cc) {
    const int g = ch.groups == 1 ? 0 : cc / ch.Cp, c = cc - g * ch.Cp - q * ch.C;
    return c >= 0 && c < ch.C ? g * ch.C + c : -1;
}

// The pack place of row o (0 unpacked).
__device__ __forceinline__ int stage_place(const TcStageChannels& ch, long long o) {
    return ch.pack == 1 ? 0 : (int)(o / ch.rows % ch.pack);
}

// One thread per (row o, destination channel cc), grid-striding, writing dst[o][i][cc] for every i <
// inner: per i a warp's writes run along the channels, and its reads of 32 rows of `inner` consecutive
// values are lines read once each into L1.
template <class TS, class TD>
__device__ void stage_rows(const StageJob& j, unsigned block) {
    const TS* __restrict__ src = static_cast<const TS*>(j.copy.src);
    TD* __restrict__ dst = static_cast<TD*>(j.copy.dst);
    const TcStageChannels& ch = j.copy.ch;
    const long long Cs = ch.groups * ch.C, Cd = ch.groups * ch.Cp;
    const int inner = (int)j.copy.inner;
    const long long stride = (long long)j.blocks * THREADS;
    for (long long t = (long long)block * THREADS + threadIdx.x; t < j.work; t += stride) {
        const long long o = t / Cd;
        const int cc = (int)(t - o * Cd);
        const int c = stage_source(ch, stage_place(ch, o), cc);
        const TS* s = src + (o * Cs + (c >= 0 ? c : 0)) * inner;
        TD* d = dst + o * inner * Cd + cc;
        // ROWS_BATCH reads issued before their writes: one after another, each write waiting on its
        // read, a 5x5 filter's 25 values cost 25 memory latencies (H100: 5 us more per layer).
        for (int i0 = 0; i0 < inner; i0 += ROWS_BATCH) {
            float v[ROWS_BATCH];
#pragma unroll
            for (int u = 0; u < ROWS_BATCH; ++u) v[u] = c >= 0 && i0 + u < inner ? conv_load(s, i0 + u) : 0.0f;
#pragma unroll
            for (int u = 0; u < ROWS_BATCH; ++u)
                if (i0 + u < inner) d[(long long)(i0 + u) * Cd] = conv_store_as<TD>(v[u]);
        }
    }
}

// One thread per destination element, grid-striding. I: the index type, int where the copy's sizes fit
// (the common case: its divisions are several times cheaper than 64-bit ones).
template <class I, class TS, class TD>
__device__ void stage_elementwise(const StageJob& j, unsigned block) {
    const TS* __restrict__ src = static_cast<const TS*>(j.copy.src);
    TD* __restrict__ dst = static_cast<TD*>(j.copy.dst);
    const TcStageChannels& ch = j.copy.ch;
    const I Cs = ch.groups * ch.C, Cd = ch.groups * ch.Cp, inner = (I)j.copy.inner, work = (I)j.work;
    const I stride = (I)j.blocks * THREADS;
    for (I i = block * (I)THREADS + threadIdx.x; i < work; i += stride) {
        const I oi = i / Cd, cc = i - oi * Cd;  // oi = o*inner + ii
        const I o = oi / inner, ii = oi - o * inner;
        const int c = stage_source(ch, stage_place(ch, o), (int)cc);
        const float v =
            c >= 0 ? conv_load(src, j.copy.channels_first ? (o * Cs + c) * inner + ii : oi * Cs + c) : 0.0f;
        dst[i] = conv_store_as<TD>(v);
    }
}

// dst[o][i][cc] = src[o][source(cc)][i]; one tile per (o, 32 destination channels, 32 positions of
// inner), looping over the copy's tiles.
template <class TS, class TD>
__device__ void stage_transpose(const StageJob& j, unsigned block, float (&tile)[TILE][TILE + 1]) {
    const TS* __restrict__ src = static_cast<const TS*>(j.copy.src);
    TD* __restrict__ dst = static_cast<TD*>(j.copy.dst);
    const TcStageChannels& ch = j.copy.ch;
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    const int Cs = ch.groups * ch.C, Cd = ch.groups * ch.Cp;
    const long long inner = j.copy.inner;
    for (long long t = block; t < j.work; t += j.blocks) {
        const long long o = t / (j.i_tiles * j.c_tiles), rest = t - o * j.i_tiles * j.c_tiles;
        const int c0 = (int)(rest / j.i_tiles) * TILE, q = stage_place(ch, o);
        const long long i0 = (rest % j.i_tiles) * TILE;
        const TS* src_o = src + o * Cs * inner;
        TD* dst_o = dst + o * inner * Cd;
#pragma unroll
        for (int r = 0; r < TILE / TILE_ROWS; ++r) {
            const int cc = c0 + ty + r * TILE_ROWS;
            const long long i = i0 + tx;
            const int c = cc < Cd ? stage_source(ch, q, cc) : -1;
            tile[ty + r * TILE_ROWS][tx] = c >= 0 && i < inner ? conv_load(src_o, c * inner + i) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < TILE / TILE_ROWS; ++r) {
            const long long i = i0 + ty + r * TILE_ROWS;
            const int cc = c0 + tx;
            if (i < inner && cc < Cd) dst_o[i * Cd + cc] = conv_store_as<TD>(tile[tx][ty + r * TILE_ROWS]);
        }
        __syncthreads();  // the tile is read before the next one overwrites it
    }
}

// Blocks [0, a.blocks) run copy a, the next b.blocks copy b (b.blocks = 0: none). The branch is uniform
// per block, so the transpose's barriers are too. The job is selected by value, field by field: a
// reference to one of two kernel parameters would put both in local memory.
// Eight blocks per SM (32 registers): the copies are memory-bound and want every warp the SM holds.
template <class TS, class TD>
__global__ void __launch_bounds__(THREADS, 8) tc_stage_kernel(StageJob a, StageJob b) {
    __shared__ float tile[TILE][TILE + 1];  // [channel][position], padded against bank conflicts
    grid_dependency_enter();  // the GEMM may launch; x, w and the workspace are free of earlier kernels
    const bool second = blockIdx.x >= a.blocks;
    const StageJob j = second ? b : a;
    const unsigned block = second ? blockIdx.x - a.blocks : blockIdx.x;
    if (j.transpose) stage_transpose<TS, TD>(j, block, tile);
    else if (j.rows) stage_rows<TS, TD>(j, block);
    else if (j.narrow) stage_elementwise<int, TS, TD>(j, block);
    else stage_elementwise<long long, TS, TD>(j, block);
}

// The body and launch geometry of a copy: at most 65535 x 32 tiles' or 2^31 elements' worth of blocks, looping.
StageJob stage_job(const TcStageCopy& c) {
    StageJob j{};
    j.copy = c;
    const long long Cd = c.ch.groups * c.ch.Cp;
    j.rows = c.channels_first && c.inner < TILE;
    j.transpose = c.channels_first && !j.rows && c.ch.groups * c.ch.C >= TILE;
    if (j.rows) {
        j.work = c.outer * Cd;
        j.blocks = j.work ? conv_grid_for(j.work, THREADS) : 0;
    } else if (j.transpose) {
        j.i_tiles = (c.inner + TILE - 1) / TILE;
        j.c_tiles = (Cd + TILE - 1) / TILE;
        j.work = c.outer * j.i_tiles * j.c_tiles;
        j.blocks = (unsigned)(j.work < 65535LL * 32 ? j.work : 65535LL * 32);
    } else {
        j.work = c.outer * c.inner * Cd;
        j.narrow = j.work < INT_MAX && c.outer * c.inner * c.ch.groups * c.ch.C < INT_MAX;
        j.blocks = j.work ? conv_grid_for(j.work, THREADS) : 0;
    }
    return j;
}

template <class TS, class TD>
int stage_launch(const StageJob& a, const StageJob& b, cudaStream_t stream) {
    CONV_LAUNCH_DEPENDENT("tc_stage_kernel", tc_stage_kernel<TS, TD>, a.blocks + b.blocks, THREADS, 0, stream, a, b);
    return CONV_OK;
}

template <class TS>
int stage_to(const StageJob& a, const StageJob& b, int dst_dtype, cudaStream_t stream) {
    switch (dst_dtype) {
    case CONV_F16: return stage_launch<TS, __half>(a, b, stream);
    case CONV_BF16: return stage_launch<TS, __nv_bfloat16>(a, b, stream);
    default: return stage_launch<TS, float>(a, b, stream);
    }
}

}  // namespace

int tc_stage_channels_last(const TcStageCopy* copies, int count, int src_dtype, int dst_dtype, cudaStream_t stream) {
    StageJob a = count > 0 ? stage_job(copies[0]) : StageJob{}, b = count > 1 ? stage_job(copies[1]) : StageJob{};
    if (!a.blocks) std::swap(a, b);  // an empty first copy: the second alone
    if (!a.blocks) return CONV_OK;
    switch (src_dtype) {
    case CONV_F16: return stage_to<__half>(a, b, dst_dtype, stream);
    case CONV_BF16: return stage_to<__nv_bfloat16>(a, b, dst_dtype, stream);
    default: return stage_to<float>(a, b, dst_dtype, stream);
    }
}
