// winograd_rows.cu — 7x7 filters (stride 1) in fp32 by Winograd's F(2, 7) along each row
// (winograd_rows_transforms.cuh): two outputs of a row from the 8 inputs they read take 8 multiplications
// per filter row instead of 14, so the accumulation does 1.75x fewer FMAs than a direct sum. Built for
// LeNet's C3 (4 -> 16 maps, 7x7 on 40x40); it wins at batches around 100 (H200, C3 exact at batch 100:
// 26.6 us against direct_regblock's 30.2), where it gives more threads than direct_regblock's strips for the
// same work, and loses at 1000 and 10000 (209 against 189 us, 2.01 against 1.60 ms), where it issues more
// instructions than the FMAs it saves: bench/PERF_NOTES.md, "winograd's F(2, 7) rows".
//   1. winograd_rows_filter_kernel: U = G w for every (group, map, channel, filter row) into the workspace,
//      laid out [group][map group of 8][channel][filter row][map quad][position][4]: the 8 x 8 values one
//      (channel, filter row) gives a map group, zeros past the group's maps. Weights change between calls
//      (a plan does not own them), so this runs on every call (M*C*7*7 reads).
//   2. winograd_rows_kernel: a block computes 16 tiles (2 output columns x PT output rows of one
//      image: flattened (image, strip, tile) items, so that rows of few tiles waste no lanes) for one
//      group of 8 maps. Thread = (tile, position j of the 8): it accumulates M_j = U_j * V_j for the 8 maps
//      x PT rows, summed over channels and filter rows. For each fill of channels the block copies x's
//      windows raw into shared memory (thread (tile, j) copies column j of its tile's window, every copy in
//      flight at once), transforms them in place into V = B^T x (a window a thread), and copies its U slice;
//      per channel a thread then holds its PT + 6 values of V_j in registers, and per filter row reads two
//      float4s of U (its position's 8 maps: one 16-byte row a position, conflict-free) for 8 x PT FMAs.
//      The 8 positions of a tile are 8 neighbouring lanes of one warp, so the output transform passes
//      the products through the warp's own shared memory (no block barrier): lane j takes map j of the
//      group and applies A^T to the 8 positions of each of its PT rows, then bias, ReLU and the store.
//   One configuration, PT = 12: 3 blocks an SM. Strips of 17 rows (2 blocks an SM; LeNet C3's 34 rows exactly)
//   and of 9 (4 blocks) were measured and dropped: neither won a batch that 12 or another variant did not.
// Takes x and w in f32, f16 or bf16 (widened exactly), NCHW or NHWC, MCKK or MKKC, any groups, any padding;
// y in f32, f16 or bf16. The arithmetic is fp32 throughout; the error bound is in the transforms' header.
#include "conv_kernel_util.cuh"
#include "cuda_util.cuh"
#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_sync.cuh"
#include "tensor_io.cuh"
#include "winograd_rows.h"
#include "winograd_rows_transforms.cuh"

#include <type_traits>

namespace {

constexpr int RW_J = 8;                      // transform positions: 2 outputs + 7 taps - 1
constexpr int RW_TILES = 16;                 // tiles a block
constexpr int RW_MT = 8;                     // maps a thread (of its position)
constexpr int RW_THREADS = RW_TILES * RW_J;  // thread = tile * 8 + position
constexpr int RW_UNIT = RW_MT * RW_J;        // U floats of one (channel, filter row): [quad][position][4]
// Output rows a thread (LeNet C3's 34 rows are three strips).
constexpr int RW_PT = 12;
// The filter height the kernel is built for (LeNet's 7x7; the strip's input rows are registers).
constexpr int RW_KH = 7;

struct RowsParams {
    const void* x;
    const float* u;  // the transformed filters (workspace)
    const void* bias;
    void* y;
    int C, H, W, M, OH, OW;
    int Cg, Mg, mgroups;  // channels and maps per group, map groups of RW_MT per group
    int pad_h, pad_w;
    int TW, strips, items;  // tiles a row (ceil(OW / 2)), strips of PT rows a column, B * strips * TW
    int chunk;              // channels a shared-memory fill
    int x_nhwc, y_nhwc, w_mkkc, relu;
};

// The exchange of products in the epilogue: per warp, lane L's PT x 8 products at L * S + m * MS + p. MS odd
// and S = 8 MS + 1: the writes (one (m, p) across the lanes) and the reads (lane (t, j) reading map j of lane
// (t, j')) fall in 32 different banks.
struct RowsExchange {
    static constexpr int MS = RW_PT % 2 ? RW_PT : RW_PT + 1;
    static constexpr int S = RW_MT * MS + 1;
    static constexpr int FLOATS = (RW_THREADS / 32) * 32 * S;
};

// U[gm][c][r][q][j][i] = (G w[g * Mg + mg * 8 + 4q + i][c][r][0..6])[j]; one thread per (gm, c, r, map).
// A copy kernel under the dependent-launch contract (grid_dependency.cuh).
template <class TX>
__global__ void winograd_rows_filter_kernel(RowsParams k, const TX* __restrict__ w, float* __restrict__ u,
                                            long long count) {
    grid_dependency_enter();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const int mm = (int)(i % RW_MT);
        const long long tap_row = i / RW_MT;  // (gm * Cg + c) * RW_KH + r
        const int r = (int)(tap_row % RW_KH);
        const long long gc = tap_row / RW_KH;
        const int c = (int)(gc % k.Cg);
        const long long gm = gc / k.Cg;
        const int mg = (int)(gm % k.mgroups), g = (int)(gm / k.mgroups), m = mg * RW_MT + mm;
        const long long filter = (long long)g * k.Mg + m;
        float taps[7];
#pragma unroll
        for (int s = 0; s < 7; ++s) {
            const long long at = k.w_mkkc ? ((filter * RW_KH + r) * 7 + s) * k.Cg + c : ((filter * k.Cg + c) * RW_KH + r) * 7 + s;
            taps[s] = m < k.Mg ? conv_load<TX>(w, at) : 0.0f;
        }
        float v[RW_J];
        winograd_rows_filter_transform(taps, v);
        float* out = u + tap_row * RW_UNIT + (mm / 4) * RW_J * 4 + mm % 4;
#pragma unroll
        for (int j = 0; j < RW_J; ++j) out[j * 4] = v[j];
    }
}

// cp.async exists from sm_80 on; earlier GPUs stage through registers.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ROWS_CP_ASYNC true
#else
#define ROWS_CP_ASYNC false
#endif

// One value of x (*src, zero where !in: then src may point outside x, and the copy names x's start) into shared
// memory as fp32: a 4-byte cp.async for fp32 x (completed
// by the thread's cp_async_wait), f16 / bf16 widened through a register.
template <class TX>
__device__ __forceinline__ void rows_stage_x(float* dst, const TX* x, const TX* src, bool in) {
    if constexpr (std::is_same<TX, float>::value && ROWS_CP_ASYNC)
        cp_async_4_zfill(dst, in ? src : x, in);
    else
        *dst = in ? conv_to_float(*src) : 0.0f;
}

// 16 bytes of U from the workspace into shared memory (cp.async where there is one).
__device__ __forceinline__ void rows_stage_16(float4* dst, const float4* src) {
    if constexpr (ROWS_CP_ASYNC)
        cp_async_16_zfill(dst, src, true);
    else
        *dst = __ldg(src);
}

// Item = (image, strip, tile), tile fastest.
__device__ __forceinline__ void rows_decode(const RowsParams& k, int item, int& b, int& strip, int& tile) {
    tile = item % k.TW;
    const int rest = item / k.TW;
    strip = rest % k.strips;
    b = rest / k.strips;
}

template <class TX, class TY>
// 3 blocks an SM: 153 registers (8 x 12 accumulators, the channel's 18 values of V), 54 KB of shared memory.
__global__ void __launch_bounds__(RW_THREADS, 3) winograd_rows_kernel(RowsParams k) {
    using Exchange = RowsExchange;
    constexpr int PT = RW_PT, KH = RW_KH, ROWS = PT + KH - 1;  // ROWS: input rows of a strip
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    const int tid = threadIdx.x, j = tid % RW_J, lane = tid % 32;
    const int gm = blockIdx.y, g = gm / k.mgroups, mg = gm - g * k.mgroups;
    float* vs = smem;                                // V: [channel][input row][tile][position]
    float* us = smem + k.chunk * ROWS * RW_THREADS;  // U: [channel][filter row][quad][position][4]

    // The raw copy: thread (tile, j) copies column j of its tile's windows (so that a warp's copies land in 32
    // consecutive floats); the column's validity and the strip's first input row (none for an item past the
    // batch).
    bool col_in = false;
    int ih0 = 0;
    long long xcol = 0;  // x's offset of (image, channel g * Cg, row 0, this column)
    const int sstride = k.x_nhwc ? k.C : 1, rstride = sstride * k.W;
    {
        const int item = blockIdx.x * RW_TILES + tid / RW_J;
        if (item < k.items) {
            int b, strip, tile;
            rows_decode(k, item, b, strip, tile);
            ih0 = strip * PT - k.pad_h;
            const int iw = 2 * tile - k.pad_w + j;
            col_in = iw >= 0 && iw < k.W;
            xcol = (k.x_nhwc ? (long long)b * k.H * k.W * k.C + g * k.Cg : ((long long)b * k.C + g * k.Cg) * k.H * k.W) +
                   (long long)iw * sstride;
        }
    }
    const long long cstride = k.x_nhwc ? 1 : (long long)k.H * k.W;
    const TX* x = static_cast<const TX*>(k.x);
    const float4* u4 = reinterpret_cast<const float4*>(k.u + (long long)gm * k.Cg * KH * RW_UNIT);

    float acc[RW_MT][PT];
#pragma unroll
    for (int m = 0; m < RW_MT; ++m)
#pragma unroll
        for (int p = 0; p < PT; ++p) acc[m][p] = 0.0f;

    for (int c0 = 0; c0 < k.Cg; c0 += k.chunk) {
        const int cn = min(k.chunk, k.Cg - c0);
        if (c0 > 0) __syncthreads();  // nobody still reads the previous fill
        // x's windows raw into V's slots and U's slice, every copy in flight at once (fp32: cp.async, zeros
        // where a window leaves x); then the windows transformed in place, a window a thread.
        // The strip's rows inside x: [row_lo, row_hi).
        const int row_lo = max(0, -ih0), row_hi = col_in ? min(ROWS, k.H - ih0) : 0;
        for (int c = 0; c < cn; ++c) {
            const TX* xc = x + xcol + (c0 + c) * cstride + (long long)ih0 * rstride;
            float* dst = vs + c * ROWS * RW_THREADS + tid;
#pragma unroll 4
            for (int row = 0; row < ROWS; ++row)
                rows_stage_x(dst + row * RW_THREADS, x, xc + (long long)row * rstride, row >= row_lo && row < row_hi);
        }
        const float4* src = u4 + (long long)c0 * KH * (RW_UNIT / 4);
        for (int i = tid; i < cn * KH * (RW_UNIT / 4); i += RW_THREADS)
            rows_stage_16(reinterpret_cast<float4*>(us) + i, src + i);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        for (int w = tid; w < cn * ROWS * RW_TILES; w += RW_THREADS) {
            float4* slot = reinterpret_cast<float4*>(vs + w * RW_J);
            const float4 lo = slot[0], hi = slot[1];
            const float d[RW_J] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            float v[RW_J];
            winograd_rows_input_transform(d, v);
            slot[0] = make_float4(v[0], v[1], v[2], v[3]);
            slot[1] = make_float4(v[4], v[5], v[6], v[7]);
        }
        __syncthreads();

        // M_j += U_j(c, r) V_j(c, row + r) for the 8 maps and PT rows: the channel's ROWS values of V_j in
        // registers, each feeding up to KH x 8 FMAs.
        const float4* up = reinterpret_cast<const float4*>(us) + j;
        for (int c = 0; c < cn; ++c) {
            const float* vc = vs + c * ROWS * RW_THREADS + tid;
            float v[ROWS];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) v[i] = vc[i * RW_THREADS];
#pragma unroll
            for (int r = 0; r < KH; ++r) {
                const float4 ua = up[((c * KH + r) * 2) * RW_J], ub = up[((c * KH + r) * 2 + 1) * RW_J];
#pragma unroll
                for (int p = 0; p < PT; ++p) {
                    acc[0][p] = fmaf(ua.x, v[p + r], acc[0][p]);
                    acc[1][p] = fmaf(ua.y, v[p + r], acc[1][p]);
                    acc[2][p] = fmaf(ua.z, v[p + r], acc[2][p]);
                    acc[3][p] = fmaf(ua.w, v[p + r], acc[3][p]);
                    acc[4][p] = fmaf(ub.x, v[p + r], acc[4][p]);
                    acc[5][p] = fmaf(ub.y, v[p + r], acc[5][p]);
                    acc[6][p] = fmaf(ub.z, v[p + r], acc[6][p]);
                    acc[7][p] = fmaf(ub.w, v[p + r], acc[7][p]);
                }
            }
        }
    }

    // The output transform: the products through this warp's part of shared memory (free once every warp
    // passed the barrier), then lane (tile, j) takes map j of the group, all PT rows.
    __syncthreads();
    float* ex = smem + (tid / 32) * 32 * Exchange::S;
#pragma unroll
    for (int m = 0; m < RW_MT; ++m)
#pragma unroll
        for (int p = 0; p < PT; ++p) ex[lane * Exchange::S + m * Exchange::MS + p] = acc[m][p];
    __syncwarp();
    const int item = blockIdx.x * RW_TILES + tid / RW_J, m = mg * RW_MT + j;
    if (item >= k.items || m >= k.Mg) return;
    int b, strip, tile;
    rows_decode(k, item, b, strip, tile);
    const float* er = ex + (lane / RW_J) * RW_J * Exchange::S + j * Exchange::MS;
    const int map = g * k.Mg + m, oh0 = strip * PT, ow = 2 * tile;
    const float add = k.bias ? conv_load<TY>(static_cast<const TY*>(k.bias), map) : 0.0f;
    // y at (b, map, oh0, ow), rows `row` elements apart, the tile's second column `col` after its first.
    const long long row = k.y_nhwc ? (long long)k.OW * k.M : k.OW;
    const int col = k.y_nhwc ? k.M : 1;
    TY* yp = static_cast<TY*>(k.y) + (k.y_nhwc ? (((long long)b * k.OH + oh0) * k.OW + ow) * k.M + map
                                                : (((long long)b * k.M + map) * k.OH + oh0) * k.OW + ow);
    const bool second = ow + 1 < k.OW;
    const int rows_out = min(PT, k.OH - oh0);
#pragma unroll
    for (int p = 0; p < PT; ++p) {
        if (p >= rows_out) break;
        float prod[RW_J], out[2];
#pragma unroll
        for (int jj = 0; jj < RW_J; ++jj) prod[jj] = er[jj * Exchange::S + p];
        winograd_rows_output_transform(prod, out);
        yp[p * row] = conv_store_as<TY>(conv_epilogue_value(out[0], add, k.relu));
        if (second) yp[p * row + col] = conv_store_as<TY>(conv_epilogue_value(out[1], add, k.relu));
    }
}

int map_groups(const conv_problem* p) { return (int)((p->M / p->groups + RW_MT - 1) / RW_MT); }

// Floats of shared memory a channel of a fill takes (V's rows and U's filter rows), and the channels a fill takes:
// as many as fit in the shared memory the output exchange needs anyway.
constexpr int RW_CHANNEL_FLOATS = (RW_PT + RW_KH - 1) * RW_THREADS + RW_KH * RW_UNIT;
constexpr int RW_FILL_CHANNELS = RowsExchange::FLOATS / RW_CHANNEL_FLOATS;
static_assert(RW_FILL_CHANNELS >= 1, "a fill holds at least one channel");

struct RowsLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
        const size_t needed = winograd_rows_workspace_bytes(p);
        if (workspace_bytes < needed || workspace == NULL)
            return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL,
                                  "winograd (F(2, 7) rows) needs %zu bytes of workspace for the transformed filters, "
                                  "got %zu", needed, workspace_bytes);
        RowsParams k;
        k.x = t->x;
        k.u = static_cast<const float*>(workspace);
        k.bias = p->bias ? t->bias : NULL;
        k.y = t->y;
        k.C = (int)p->C; k.H = (int)p->H; k.W = (int)p->W; k.M = (int)p->M;
        k.OH = (int)conv_out_h(p); k.OW = (int)conv_out_w(p);
        k.Cg = (int)(p->C / p->groups); k.Mg = (int)(p->M / p->groups); k.mgroups = map_groups(p);
        k.pad_h = (int)p->pad_h; k.pad_w = (int)p->pad_w;
        k.TW = (k.OW + 1) / 2;
        k.strips = (k.OH + RW_PT - 1) / RW_PT;
        k.items = (int)(p->B * k.strips * k.TW);
        k.chunk = k.Cg < RW_FILL_CHANNELS ? k.Cg : RW_FILL_CHANNELS;
        k.x_nhwc = p->x_layout == CONV_NHWC; k.y_nhwc = p->y_layout == CONV_NHWC;
        k.w_mkkc = p->w_layout == CONV_MKKC;
        k.relu = p->epilogue == CONV_EPILOGUE_RELU;

        const long long filters = (long long)p->groups * k.mgroups * k.Cg * RW_KH * RW_MT;
        CONV_LAUNCH_DEPENDENT("winograd_rows_filter_kernel", winograd_rows_filter_kernel<TX>,
                              dim3(conv_grid_for(filters, 256)), dim3(256), 0, stream, k,
                              static_cast<const TX*>(t->w), static_cast<float*>(workspace), filters);
        const auto kernel = winograd_rows_kernel<TX, TY>;
        const size_t smem = RowsExchange::FLOATS * sizeof(float);  // a fill takes at most as much
        const int opt_in = conv_allow_smem(kernel, smem, "winograd (F(2, 7) rows): a fill of V and U");
        if (opt_in != CONV_OK) return opt_in;
        const dim3 grid((unsigned)((k.items + RW_TILES - 1) / RW_TILES), (unsigned)(p->groups * k.mgroups));
        // A plain launch after the filter transform, as winograd's F(2x2, 3x3) GEMM.
        kernel<<<grid, RW_THREADS, smem, stream>>>(k);
        CONV_LAUNCH_CHECK(winograd_rows_kernel);
        return CONV_OK;
    }
};

}  // namespace

size_t winograd_rows_workspace_bytes(const conv_problem* p) {
    return (size_t)p->groups * map_groups(p) * (p->C / p->groups) * p->KH * RW_UNIT * sizeof(float);
}

int winograd_rows_supports(const conv_problem* p) {
    if (p->KH != RW_KH || p->KW != 7)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "winograd's F(2, 7) rows take 7x7 filters only, got %lldx%lld",
                              (long long)p->KH, (long long)p->KW);
    if (p->groups * map_groups(p) > 65535)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "winograd (F(2, 7) rows): groups x map groups of 8 = %lld exceeds the grid's 65535",
                              (long long)(p->groups * map_groups(p)));
    if (winograd_rows_workspace_bytes(p) / sizeof(float) >= ((size_t)1 << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "winograd (F(2, 7) rows): the transformed filters (%zu bytes) exceed 2^31 floats",
                              winograd_rows_workspace_bytes(p));
    const int64_t items = p->B * ((conv_out_h(p) + RW_PT - 1) / RW_PT) * ((conv_out_w(p) + 1) / 2);
    if (items > CONV_INDEX_LIMIT)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "winograd (F(2, 7) rows): %lld tiles exceed the 32-bit item index",
                              (long long)items);
    // Strips run PT - 1 rows, tiles one column, past the output.
    return conv_check_coords("winograd", p, RW_PT - 1, 1);
}

int winograd_rows_run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                      void* stream) {
    return conv_dispatch_dtypes<RowsLaunch>(p, p, t, workspace, workspace_bytes, conv_stream(stream));
}
