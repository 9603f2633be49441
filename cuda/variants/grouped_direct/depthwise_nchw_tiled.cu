// depthwise_nchw_tiled.cu — grouped_direct's register-blocked kernel for depthwise layers stored NCHW with
// 3x3 and 5x5 filters at stride 1 or 2 and 7x7 at stride 1 (the "nchw_t*" configurations), exact fp32 FFMA
// on f32, f16 or bf16 data (x, w, y and bias of one dtype), bias + ReLU fused into the store.
//   dwt_kernel<K, S, TH, TW, TX>: a block computes TH x TW output tiles of PL planes ((image, map) pairs,
//     map m reads channel m / (M/C)) at a time, DWT_THREADS threads of 4 x 4 outputs each. It stages the
//     tiles' input windows in shared memory as fp32 (zeros on padding, rows padded to whole 16-byte
//     vectors); a thread then walks the 3*S + K input rows its 4 output rows read: each row's segment of
//     3*S + K values is read once (16-byte vectors from an aligned address) and feeds every (output row,
//     tap) that reads it, with its plane's K x K taps in registers: 16 * K * K FMAs for (3*S + K)^2 loads,
//     where the one-column threads of m1_t32x32_p8 (grouped_direct.cu) and of depthwise_nchw.cu load a
//     value for every K FMAs or fewer.
//     Blocks are persistent (a wave, each taking every gridDim.x-th tile group), the next windows copied in
//     while this one is multiplied (two buffers): f32 x by 4-byte cp.async, f16 / bf16 widened element by
//     element. The first version, one block per tile with the loads waited on in place, ran 98 us on
//     ConvNeXt's dw7_0 (B = 32, H100), slower than m1_t32x32_p8; persistent and double-buffered, 75 us.
//   Other filters, strides, dilations and mixed dtypes, and GPUs whose blocks cannot have the two buffers
//   (up to 73 KB), run depthwise_nchw.cu's kernel (nchw_r4).
// A tap on padding meets a zero and still its weight: an Inf or NaN weight there gives NaN, as in
// PyTorch.

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "grouped_direct.h"
#include "launch_util.cuh"
#include "mma_sync.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int DWT_THREADS = 128;
constexpr int DWT_PR = 4, DWT_PC = 4;  // output rows x columns a thread

// x is (B, C, H, W), w is (M, 1, K, K), y is (B, M, OH, OW); every count < 2^31 (the dispatcher's batch
// chunks).
struct dwt_shape : ConvShape32 {
    int Mg;               // maps per channel (the channel multiplier)
    int tiles_w, tiles;   // tiles across a plane's row, and per plane
    int planes;           // B * M
    int items;            // plane groups x tiles
    int relu;
};

// The tile geometry: threads across and down a plane's tile, planes a block, the input window, and the
// staged row (whole 16-byte vectors, room for the last thread's last vector). VEC: the staged row starts A
// columns left of the window, at a 16-byte boundary of x where the padding is K / 2 (16-byte copies, see
// dwt_stage); a thread's segment then starts A values into its first vector.
template <int K, int S, int TH, int TW, bool VEC = false>
struct DwtTile {
    static constexpr int TXT = TW / DWT_PC, TYT = TH / DWT_PR, PL = DWT_THREADS / (TXT * TYT);
    static constexpr int IN_H = (TH - 1) * S + K, ROWS = (DWT_PR - 1) * S + K;
    static constexpr int A = VEC ? (4 - K / 2 % 4) % 4 : 0;
    static constexpr int SEG = (DWT_PC - 1) * S + K, SEGV = (A + SEG + 3) / 4;
    static constexpr int ROW = (TXT - 1) * DWT_PC * S + 4 * SEGV;
    static_assert(TW % DWT_PC == 0 && TH % DWT_PR == 0 && DWT_THREADS % (TXT * TYT) == 0, "whole threads, planes");
    static_assert(ROW % 4 == 0, "rows of whole vectors");
};

// Stages item i's windows (plane group i / tiles, tile i % tiles) into buf as [plane][row][column], zeros on
// padding and past the planes, columns fastest (coalesced rows): f32 by cp.async (in flight until the caller
// waits), f16 / bf16 widened element by element, 8 loads in flight. VEC (f32, W % 4 == 0, x 16-byte aligned,
// padding K / 2): 16-byte copies of 4 columns from the boundary A columns left of the window, each wholly in
// or out of the image; else a copy per element.
template <class T, int S, int TH, int TW, class TX>
__device__ __forceinline__ void dwt_stage(const dwt_shape& s, const TX* __restrict__ x, int i, float* buf) {
    const int tile = i % s.tiles, first = i / s.tiles * T::PL;
    const int ih0 = tile / s.tiles_w * TH * S - s.pad_h, iw0 = tile % s.tiles_w * TW * S - s.pad_w - T::A;
    if constexpr (T::A > 0) {
        constexpr int VR = T::ROW / 4;  // vectors a staged row
#pragma unroll 4
        for (int e = threadIdx.x; e < T::PL * T::IN_H * VR; e += DWT_THREADS) {
            const int j = e % VR * 4, r = e / VR, row = r % T::IN_H, plane = first + r / T::IN_H;
            const int ih = ih0 + row, iw = iw0 + j;
            const bool in = plane < s.planes && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W;
            cp_async_16_zfill(buf + 4 * e, x + (in ? (plane * s.H + ih) * s.W + iw : 0), in);  // Mg == 1 (VEC)
        }
    } else {
#pragma unroll 8
        for (int e = threadIdx.x; e < T::PL * T::IN_H * T::ROW; e += DWT_THREADS) {
            const int j = e % T::ROW, r = e / T::ROW, row = r % T::IN_H, plane = first + r / T::IN_H;
            const int ih = ih0 + row, iw = iw0 + j;
            const bool in = plane < s.planes && (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W;
            // x's plane of the map's channel (no division without a channel multiplier)
            const int xp = s.Mg == 1 ? plane : plane / s.M * s.C + plane % s.M / s.Mg;
            const int at = in ? (xp * s.H + ih) * s.W + iw : 0;
            if constexpr (std::is_same<TX, float>::value) {
                cp_async_4_zfill(buf + e, x + at, in);
            } else {
                const float v = conv_load(x, at);
                buf[e] = in ? v : 0.0f;
            }
        }
    }
}

// Persistent blocks: a wave of them, each taking every gridDim.x-th item (a plane group's tile), the next
// item's windows copied in while this one's are multiplied (two buffers). The launch bounds hold 7x7 to 80
// registers (6 blocks an SM; ptxas took 95 without them: the same speed, measured, with fewer warps).
template <int K, int S, int TH, int TW, class TX, bool VEC>
__global__ void __launch_bounds__(DWT_THREADS, 6) dwt_kernel(dwt_shape s, const TX* __restrict__ x,
                                                          const TX* __restrict__ w, const TX* __restrict__ bias,
                                                          TX* __restrict__ y) {
    using T = DwtTile<K, S, TH, TW, VEC>;
    constexpr int PR = DWT_PR, PC = DWT_PC, BUF = T::PL * T::IN_H * T::ROW;
    extern __shared__ float4 dwt_smem4[];
    float* s_x = reinterpret_cast<float*>(dwt_smem4);  // two buffers of [plane][row][column]
    const int pl = threadIdx.x / (T::TXT * T::TYT), t = threadIdx.x % (T::TXT * T::TYT);
    const int tx = t % T::TXT, ty = t / T::TXT;
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)

    int item = blockIdx.x;
    if (item < s.items) dwt_stage<T, S, TH, TW>(s, x, item, s_x);
    cp_async_commit();
#pragma unroll 1
    for (int cur = 0; item < s.items; item += gridDim.x, cur ^= 1) {
        if (item + gridDim.x < s.items) dwt_stage<T, S, TH, TW>(s, x, item + gridDim.x, s_x + (cur ^ 1) * BUF);
        cp_async_commit();
        const int tile = item % s.tiles, plane = item / s.tiles * T::PL + pl;
        const int oh0 = tile / s.tiles_w * TH, ow0 = tile % s.tiles_w * TW;
        const int m = (plane < s.planes ? plane : 0) % s.M;
        float taps[K * K];
#pragma unroll
        for (int k = 0; k < K * K; ++k) taps[k] = conv_load(w, m * K * K + k);
        cp_async_wait<1>();  // this item's windows (the next one's copies stay in flight)
        __syncthreads();

        float acc[PR][PC];
#pragma unroll
        for (int r = 0; r < PR; ++r)
#pragma unroll
            for (int q = 0; q < PC; ++q) acc[r][q] = 0.0f;
        // 16-byte aligned: ROW and PC * S are whole vectors (the segment starts A values in)
        const float* xs = s_x + cur * BUF + (pl * T::IN_H + ty * PR * S) * T::ROW + tx * PC * S;
#pragma unroll
        for (int i = 0; i < T::ROWS; ++i) {
            float seg[4 * T::SEGV];
#pragma unroll
            for (int v = 0; v < T::SEGV; ++v) {
                const float4 q = reinterpret_cast<const float4*>(xs + i * T::ROW)[v];
                seg[4 * v] = q.x; seg[4 * v + 1] = q.y; seg[4 * v + 2] = q.z; seg[4 * v + 3] = q.w;
            }
#pragma unroll
            for (int r = 0; r < PR; ++r) {
                const int kh = i - r * S;  // the filter row that input row i is for output row r
                if (kh < 0 || kh >= K) continue;
#pragma unroll
                for (int kw = 0; kw < K; ++kw)
#pragma unroll
                    for (int q = 0; q < PC; ++q)
                        acc[r][q] = fmaf(taps[kh * K + kw], seg[T::A + q * S + kw], acc[r][q]);
            }
        }

        if (plane < s.planes) {
            const float bm = bias ? conv_load(bias, m) : 0.0f;
#pragma unroll
            for (int r = 0; r < PR; ++r) {
                const int oh = oh0 + ty * PR + r;
                if (oh >= s.OH) break;
                TX* yr = y + (plane * s.OH + oh) * s.OW;
#pragma unroll
                for (int q = 0; q < PC; ++q) {
                    const int ow = ow0 + tx * PC + q;
                    if (ow < s.OW) yr[ow] = conv_store_as<TX>(conv_epilogue_value(acc[r][q], bm, s.relu));
                }
            }
        }
        __syncthreads();  // every read of this buffer is done before it is refilled
    }
    grid_launch_dependents();  // x and w are read
}

// Two buffers of a block's windows for the problem's filter (the largest, 5x5 at stride 2 in 32 x 32 tiles:
// 73 KB).
template <int TH, int TW>
static size_t dwt_smem_bytes(const conv_problem* p) {
    const auto bytes = [](auto tile) {
        using T = decltype(tile);
        return 2 * sizeof(float) * T::PL * T::IN_H * T::ROW;
    };
    const int64_t k = p->KH, st = p->stride_h;  // the VEC rows: the longer ones (A + SEG may take a vector more)
    if (k == 3) return st == 1 ? bytes(DwtTile<3, 1, TH, TW, true>{}) : bytes(DwtTile<3, 2, TH, TW, true>{});
    if (k == 5) return st == 1 ? bytes(DwtTile<5, 1, TH, TW, true>{}) : bytes(DwtTile<5, 2, TH, TW, true>{});
    return bytes(DwtTile<7, 1, TH, TW, true>{});
}

template <int TH, int TW>
struct DwtLaunch {
    template <class TX, bool VEC>
    struct Kernels {
        // At<0, 0> (the filters without a kernel of their own here): none.
        template <int K, int S>
        struct At {
            static constexpr decltype(&dwt_kernel<3, 1, TH, TW, TX, VEC>) kernel =
                K ? dwt_kernel<K ? K : 3, K ? S : 1, TH, TW, TX, VEC> : nullptr;
        };
    };

    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        if constexpr (!std::is_same<TX, TY>::value) {
            return dw_nchw_run<4>(p, t, stream);
        } else {
            // 16-byte staging copies: f32 rows of whole vectors (W % 4 == 0, x aligned) read from K / 2 columns
            // of padding on, one input channel a map.
            constexpr bool F32 = std::is_same<TX, float>::value;
            const bool vec = F32 && p->W % 4 == 0 && (uintptr_t)t->x % 16 == 0 && p->pad_w == p->KW / 2 &&
                             p->M == p->C;
            const auto kernel = vec ? gd_kernel_for<Kernels<TX, F32>::template At, TX, TY>(p)
                                    : gd_kernel_for<Kernels<TX, false>::template At, TX, TY>(p);
            if (!kernel) return dw_nchw_run<4>(p, t, stream);
            dwt_shape s;
            static_cast<ConvShape32&>(s) = conv_shape32(p);
            s.Mg = (int)(p->M / p->groups);
            s.tiles_w = conv_ceil_div(s.OW, TW);
            s.tiles = conv_ceil_div(s.OH, TH) * s.tiles_w;
            s.planes = (int)(p->B * p->M);
            s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
            const int64_t items = (int64_t)conv_ceil_div(s.planes, DwtTile<3, 1, TH, TW>::PL) * s.tiles;
            if (items >= (1ll << 31))
                return conv_set_error(CONV_ERR_UNSUPPORTED, "grouped_direct: the nchw_t%dx%d tiles of this batch pass "
                                      "int range", TW, TH);
            s.items = (int)items;
            const size_t smem = dwt_smem_bytes<TH, TW>(p);
            int most = 0;
            int status = conv_smem_per_block_optin(&most);
            if (status != CONV_OK) return status;
            if (smem > (size_t)most) return dw_nchw_run<4>(p, t, stream);  // GPUs with less shared memory
            status = conv_allow_smem(kernel, smem, "grouped_direct: the nchw_t* tile");
            if (status != CONV_OK) return status;
            int64_t wave = 0;
            status = conv_wave_blocks(kernel, DWT_THREADS, smem, &wave);
            if (status != CONV_OK) return status;
            CONV_LAUNCH_DEPENDENT("dwt_kernel", kernel, (unsigned)(wave < items ? wave : items), DWT_THREADS, smem,
                                  stream, s, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                                  static_cast<const TX*>(t->bias), static_cast<TX*>(t->y));
            return CONV_OK;
        }
    }
};

}  // namespace

int dwt_unrolled(const conv_problem* p) {
    using At = DwtLaunch<32, 32>::Kernels<float, false>;  // the filters with a kernel: the same for every tile
    return p->x_dtype == p->y_dtype && gd_kernel_for<At::template At, float, float>(p) != nullptr;
}

template <int TH, int TW>
int dwt_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    return conv_dispatch_dtypes<DwtLaunch<TH, TW>>(p, p, t, stream);
}

// grouped_direct's configurations (grouped_direct.cu).
template int dwt_run<32, 32>(const conv_problem*, const conv_tensors*, cudaStream_t);
