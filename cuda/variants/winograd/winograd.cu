// winograd.cu — 3x3 stride-1 convolution in fp32 on the CUDA cores by Winograd's F(2x2, 3x3)
// (kernels/winograd_transforms.cuh): 16 multiplications per 2x2 output tile and channel instead of 36,
// so the GEMM does 2.25x fewer FMAs than implicit_gemm's on the same layer.
//   1. winograd_filter_kernel: U = G g G^T for every (group, channel, map) into the workspace, laid out
//      [group][channel][xi][map] with channels padded to a multiple of KC and maps to the tile's BM (zeros),
//      so that the main kernel reads it in 16-byte cp.async copies without bounds tests. Weights change
//      between calls (a plan does not own them), so this runs on every call: M*C*9 reads, M*C*16 writes.
//   2. winograd_kernel<BM, BP>: one block per (BM maps of a group) x (BP 2x2 tiles of output). For each
//      k-step of KC channels it
//      - gathers the KC x BP input tiles (4x4, with the padding's zeros) straight from x, one tile per
//        thread, and transforms them in registers into V = B^T d B (16 values each) in shared memory;
//      - copies U's KC x 16 x BM slice into shared memory (cp.async);
//      - multiplies: 16 GEMMs of BM x BP at once, the 16 positions xi spread over the threads (each thread
//        one xi, 8 maps x 8 tiles: 64 FFMAs per four LDS.128, as implicit_gemm's 8x8 thread tiles);
//      double-buffered: the next k-step's copies and loads are in flight during the FMAs, one barrier
//      per k-step. The epilogue passes the 16 products of every (map, tile) through shared memory,
//      applies A^T . A, bias and ReLU, and stores the 2x2 tile (the parts inside the output).
// Takes x and w in f32, f16 or bf16 (widened exactly), NCHW or NHWC, MCKK or MKKC, any groups, any
// padding (asymmetric "same" too); y in f32, f16 or bf16. 3x3 filters, stride 1, dilation 1 only.
// The arithmetic is fp32 throughout; the transforms' coefficients are 0, +-1, +-1/2, and the error stays
// that of a direct fp32 sum (winograd_transforms.cuh; tested within the 1e-5 bound against float64).
#include "conv_kernel_util.cuh"
#include "cuda_util.cuh"
#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_sync.cuh"
#include "tensor_io.cuh"
#include "winograd_rows.h"
#include "winograd_transforms.cuh"

#include <type_traits>

// cp.async exists from sm_80 on; earlier GPUs copy through registers.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define WINOGRAD_CP_ASYNC true
#else
#define WINOGRAD_CP_ASYNC false
#endif

namespace {

constexpr int KC = 8;  // channels per k-step

struct WinogradParams {
    const void* x;
    const float* u;  // the transformed filters (workspace)
    const void* bias;
    void* y;
    int C, H, W, M, OH, OW;  // the problem (OH, OW: the convolution's output)
    int Cg, Mg;              // channels and maps per group
    int Cp, Mp;              // Cg padded to KC and Mg to BM: U's extents
    int pad_h, pad_w;
    int TH, TW, P;    // 2x2 output tiles per column and per row of an image, and in the whole batch
    int m_blocks;     // BM-map blocks per group
    int x_nhwc, y_nhwc, w_mkkc, relu;
};

// 16 bytes from global to shared memory: cp.async where there is one (sm_80 on), else a plain copy
// through registers (the k-step's barrier orders both).
__device__ __forceinline__ void copy_16(float* dst, const float* src) {
    if constexpr (WINOGRAD_CP_ASYNC)
        cp_async_16_zfill(dst, src, true);
    else
        *reinterpret_cast<float4*>(dst) = __ldg(reinterpret_cast<const float4*>(src));
}

template <int BM>
int padded_maps(const conv_problem* p) {
    return (int)((p->M / p->groups + BM - 1) / BM * BM);
}

int padded_channels(const conv_problem* p) { return (int)((p->C / p->groups + KC - 1) / KC * KC); }

// U[g][c][xi][m] = (G w[g*Mg + m][c] G^T)[xi], zero for padded channels and maps. A copy kernel under the
// dependent-launch contract (grid_dependency.cuh).
template <class TX>
__global__ void winograd_filter_kernel(WinogradParams k, const TX* __restrict__ w, float* __restrict__ u,
                                       long long count) {
    grid_dependency_enter();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const int m = (int)(i % k.Mp);
        const long long gc = i / k.Mp;  // group * Cp + channel
        const int c = (int)(gc % k.Cp), g = (int)(gc / k.Cp);
        const bool real = m < k.Mg && c < k.Cg;
        const long long filter = (long long)g * k.Mg + m;
        float taps[9];
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
            for (int s = 0; s < 3; ++s) {
                const long long at = k.w_mkkc ? ((filter * 3 + r) * 3 + s) * k.Cg + c : ((filter * k.Cg + c) * 3 + r) * 3 + s;
                taps[r * 3 + s] = real ? conv_load<TX>(w, at) : 0.0f;
            }
        float v[16];
        winograd_filter_transform(taps, v);
        float* out = u + gc * 16 * k.Mp + m;
#pragma unroll
        for (int xi = 0; xi < 16; ++xi) out[(long long)xi * k.Mp] = v[xi];
    }
}

// Threads of a BM x BP tile: 16 positions xi, each spread over (BM/8) x (BP/8) threads of 8 x 8.
template <int BM, int BP>
struct WinogradTile {
    static constexpr int THREADS = 16 * (BM / 8) * (BP / 8);
    static constexpr int MIN_BLOCKS = THREADS > 256 ? 1 : 2;  // 128 registers a thread either way
    static constexpr int U_STAGE = KC * 16 * BM;  // floats of one k-step's U slice
    static constexpr int V_STAGE = KC * 16 * BP;
    static constexpr int STAGE = U_STAGE + V_STAGE;
    // Two stages for the mainloop, then each thread's raw 4x4 window (one k-step: transformed into the next
    // stage before the barrier that ends the step).
    static constexpr int RAW_OFFSET = 2 * STAGE;
    static constexpr int SMEM_FLOATS = RAW_OFFSET + 16 * THREADS;
    // The epilogue's 16 x BM x BP products pass through the stages, in as many passes over the tiles as
    // that takes (each pass a whole number of the threads' 8-tile columns).
    static constexpr int EPILOGUE_PASSES = (16 * BM * BP + RAW_OFFSET - 1) / RAW_OFFSET;
    static constexpr int PASS_TILES = BP / EPILOGUE_PASSES;
    static_assert(KC * BP == THREADS, "the gather gives each thread one (channel, tile) per k-step");
    static_assert(U_STAGE / 4 % THREADS == 0, "U's 16-byte copies divide among the threads");
    static_assert(PASS_TILES % 8 == 0 && BP % EPILOGUE_PASSES == 0, "passes of whole thread columns");
};

template <int BM, int BP, class TX, class TY>
__global__ void __launch_bounds__(WinogradTile<BM, BP>::THREADS, WinogradTile<BM, BP>::MIN_BLOCKS) winograd_kernel(WinogradParams k) {
    using Tile = WinogradTile<BM, BP>;
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    const int t = threadIdx.x;
    const int g = blockIdx.y / k.m_blocks, m0 = (blockIdx.y - g * k.m_blocks) * BM;
    const int p0 = blockIdx.x * BP;

    // The gather: this thread's tile (pl) and channel within the k-step (kc); a warp reads one channel of
    // 32 neighbouring tiles. Its 4x4 window's rows and columns inside x, as bit masks (none for a tile
    // past the batch), and the offset of its corner (which may lie in the padding).
    const int kc = t / BP, pl = t % BP;
    const int cstride = k.x_nhwc ? 1 : k.H * k.W, sstride = k.x_nhwc ? k.C : 1, rstride = sstride * k.W;
    unsigned inside = 0;  // bit r*4+s: window element (r, s) lies in x
    int xoff = 0;
    if (p0 + pl < k.P) {
        const int p = p0 + pl, b = p / (k.TH * k.TW), rest = p - b * k.TH * k.TW;
        const int ty = rest / k.TW, tx = rest - ty * k.TW;
        const int h0 = 2 * ty - k.pad_h, w0 = 2 * tx - k.pad_w;
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int s = 0; s < 4; ++s)
                if (h0 + r >= 0 && h0 + r < k.H && w0 + s >= 0 && w0 + s < k.W) inside |= 1u << (r * 4 + s);
        const int c = g * k.Cg + kc;
        xoff = k.x_nhwc ? ((b * k.H + h0) * k.W + w0) * k.C + c : ((b * k.C + c) * k.H + h0) * k.W + w0;
    }
    // This thread's window for channels c0 + kc into its raw slots (raw[q * THREADS + t], q = r*4 + s), zeros
    // outside x or past Cg: fp32 by 4-byte cp.async (in flight during the k-step's FMAs), f16 / bf16
    // widened through registers.
    const TX* x = static_cast<const TX*>(k.x);
    float* raw = smem + Tile::RAW_OFFSET + t;
    auto load_x = [&](int c0) {
        const unsigned mask = c0 + kc < k.Cg ? inside : 0u;
        const int base = xoff + c0 * cstride;
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                const bool in = mask >> (r * 4 + s) & 1u;
                float* dst = raw + (r * 4 + s) * Tile::THREADS;
                if constexpr (std::is_same<TX, float>::value && WINOGRAD_CP_ASYNC)
                    cp_async_4_zfill(dst, in ? x + base + r * rstride + s * sstride : x, in);
                else
                    *dst = in ? conv_load<TX>(x, base + r * rstride + s * sstride) : 0.0f;
            }
    };
    // V = B^T d B of this thread's raw window (its own copies: complete after its cp.async wait).
    auto store_v = [&](float* vs) {
        float d[16], v[16];
#pragma unroll
        for (int q = 0; q < 16; ++q) d[q] = raw[q * Tile::THREADS];
        winograd_input_transform(d, v);
#pragma unroll
        for (int xi = 0; xi < 16; ++xi) vs[(kc * 16 + xi) * BP + pl] = v[xi];
    };
    // U's slice for channels c0 .. c0+KC-1: KC*16 rows of BM maps, contiguous in the workspace rows.
    const float* u = k.u + (long long)g * k.Cp * 16 * k.Mp + m0;
    auto load_u = [&](int c0, float* us) {
        const float* src = u + (long long)c0 * 16 * k.Mp;
#pragma unroll
        for (int i = 0; i < Tile::U_STAGE / 4 / Tile::THREADS; ++i) {
            const int q = t + i * Tile::THREADS, row = q / (BM / 4), col = q % (BM / 4) * 4;
            copy_16(us + row * BM + col, src + (long long)row * k.Mp + col);
        }
        cp_async_commit();
    };

    // The math: position xi, maps mi*8 .. mi*8+7 and tiles pi*8 .. pi*8+7 of the block's.
    const int xi = t / (Tile::THREADS / 16), sub = t % (Tile::THREADS / 16);
    const int mi = sub / (BP / 8), pi = sub % (BP / 8);
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int steps = k.Cp / KC;
    load_x(0);  // committed with U's copies (load_u commits the group)
    load_u(0, smem);
    cp_async_wait<0>();
    store_v(smem + Tile::U_STAGE);
    __syncthreads();
    for (int step = 0; step < steps; ++step) {
        float* cur = smem + (step & 1) * Tile::STAGE;
        float* next = smem + ((step + 1) & 1) * Tile::STAGE;
        const bool more = step + 1 < steps;
        if (more) {
            load_x((step + 1) * KC);
            load_u((step + 1) * KC, next);
        }
        const float* us = cur + xi * BM + mi * 8;
        const float* vs = cur + Tile::U_STAGE + xi * BP + pi * 8;
#pragma unroll
        for (int c = 0; c < KC; ++c) {
            float a[8], b[8];
            *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(us + c * 16 * BM);
            *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(us + c * 16 * BM + 4);
            *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(vs + c * 16 * BP);
            *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(vs + c * 16 * BP + 4);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        cp_async_wait<0>();
        if (more) store_v(next + Tile::U_STAGE);
        __syncthreads();
    }

    // The epilogue: the products E[xi][m][tile] through shared memory (the stages are free: every thread
    // passed the last barrier), a pass's tiles at a time; then A^T . A per (map, tile), consecutive threads
    // on consecutive tiles.
    constexpr int PT = Tile::PASS_TILES;
    float* e = smem;
    TY* y = static_cast<TY*>(k.y);
    const TY* bias = static_cast<const TY*>(k.bias);
#pragma unroll 1
    for (int pass = 0; pass < Tile::EPILOGUE_PASSES; ++pass) {
        if (pi * 8 / PT == pass) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                float* row = e + (xi * BM + mi * 8 + i) * PT + pi * 8 - pass * PT;
                *reinterpret_cast<float4*>(row) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
                *reinterpret_cast<float4*>(row + 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
            }
        }
        __syncthreads();
        for (int item = t; item < BM * PT; item += Tile::THREADS) {
            const int ml = item / PT, tl = item % PT, m = m0 + ml, p = p0 + pass * PT + tl;
            if (m >= k.Mg || p >= k.P) continue;
            float prod[16], out[4];
#pragma unroll
            for (int q = 0; q < 16; ++q) prod[q] = e[(q * BM + ml) * PT + tl];
            winograd_output_transform(prod, out);
            const int b = p / (k.TH * k.TW), rest = p - b * k.TH * k.TW;
            const int oh = 2 * (rest / k.TW), ow = 2 * (rest % k.TW), map = g * k.Mg + m;
            const float add = bias ? conv_load<TY>(bias, map) : 0.0f;
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int s = 0; s < 2; ++s) {
                    if (oh + r >= k.OH || ow + s >= k.OW) continue;
                    const int at = k.y_nhwc ? ((b * k.OH + oh + r) * k.OW + ow + s) * k.M + map
                                            : ((b * k.M + map) * k.OH + oh + r) * k.OW + ow + s;
                    y[at] = conv_store_as<TY>(conv_epilogue_value(out[r * 2 + s], add, k.relu));
                }
        }
        if (pass + 1 < Tile::EPILOGUE_PASSES) __syncthreads();  // before the next pass overwrites E
    }
}

template <int BM>
size_t filter_bytes(const conv_problem* p) {
    return (size_t)p->groups * padded_channels(p) * 16 * padded_maps<BM>(p) * sizeof(float);
}

// The launches of configuration (BM, BP) for x/w of type TX and y/bias of type TY.
template <int BM, int BP>
struct WinogradLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
        using Tile = WinogradTile<BM, BP>;
        const size_t needed = filter_bytes<BM>(p);
        if (workspace_bytes < needed || workspace == NULL)
            return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL,
                                  "winograd needs %zu bytes of workspace for the transformed filters, got %zu",
                                  needed, workspace_bytes);
        WinogradParams k;
        k.x = t->x;
        k.u = static_cast<const float*>(workspace);
        k.bias = p->bias ? t->bias : NULL;
        k.y = t->y;
        k.C = (int)p->C; k.H = (int)p->H; k.W = (int)p->W; k.M = (int)p->M;
        k.OH = (int)conv_out_h(p); k.OW = (int)conv_out_w(p);
        k.Cg = (int)(p->C / p->groups); k.Mg = (int)(p->M / p->groups);
        k.Cp = padded_channels(p); k.Mp = padded_maps<BM>(p);
        k.pad_h = (int)p->pad_h; k.pad_w = (int)p->pad_w;
        k.TH = (k.OH + 1) / 2; k.TW = (k.OW + 1) / 2;
        k.P = (int)p->B * k.TH * k.TW;
        k.m_blocks = k.Mp / BM;
        k.x_nhwc = p->x_layout == CONV_NHWC; k.y_nhwc = p->y_layout == CONV_NHWC;
        k.w_mkkc = p->w_layout == CONV_MKKC;
        k.relu = p->epilogue == CONV_EPILOGUE_RELU;

        const long long filters = (long long)p->groups * k.Cp * k.Mp;
        CONV_LAUNCH_DEPENDENT("winograd_filter_kernel", winograd_filter_kernel<TX>, dim3(conv_grid_for(filters, 256)),
                              dim3(256), 0, stream, k, static_cast<const TX*>(t->w), static_cast<float*>(workspace),
                              filters);
        const auto kernel = winograd_kernel<BM, BP, TX, TY>;
        const size_t smem = Tile::SMEM_FLOATS * sizeof(float);
        const int opt_in = conv_allow_smem(kernel, smem, "winograd: the GEMM tile");
        if (opt_in != CONV_OK) return opt_in;
        const dim3 grid((unsigned)((k.P + BP - 1) / BP), (unsigned)(p->groups * k.m_blocks));
        // A plain launch, as implicit_gemm's pipelined SIMT kernel (igemm_pipeline.cuh: launched as a
        // dependent, that kernel ran up to 45% slower on some batch-32 grids): it follows the filter
        // transform, which itself goes as a dependent of the stream's previous kernel.
        kernel<<<grid, Tile::THREADS, smem, stream>>>(k);
        CONV_LAUNCH_CHECK(winograd_kernel);
        return CONV_OK;
    }
};

template <int BM, int BP>
int winograd_run(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes, void* stream) {
    return conv_dispatch_dtypes<WinogradLaunch<BM, BP>>(p, p, t, workspace, workspace_bytes, conv_stream(stream));
}

// The configurations' largest map tile: the workspace holds U padded to it.
constexpr int MAX_BM = 32;

// The F(2x2, 3x3) configurations' limits.
int winograd_f2x2_supports(const conv_problem* p) {
    if (p->KH != 3 || p->KW != 3)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "winograd's F(2x2, 3x3) tiles take 3x3 filters only, got %lldx%lld",
                              (long long)p->KH, (long long)p->KW);
    const int64_t blocks_y = p->groups * (padded_maps<MAX_BM>(p) / MAX_BM);
    if (blocks_y > 65535)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "winograd: groups x map blocks = %lld exceeds the grid's 65535 (groups=%lld, M=%lld)",
                              (long long)blocks_y, (long long)p->groups, (long long)p->M);
    if (filter_bytes<MAX_BM>(p) / sizeof(float) >= ((size_t)1 << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "winograd: the transformed filters (%zu bytes) exceed 2^31 floats",
                              filter_bytes<MAX_BM>(p));
    // Tiles run one row and column past an odd output: the window's corner coordinates stay in int32.
    return conv_check_coords("winograd", p, 1, 1);
}

bool is_3x3(const conv_problem* p) { return p->KH == 3 && p->KW == 3; }

// 3x3 filters by F(2x2, 3x3) tiles, 7x7 ones by F(2, 7) along rows; stride 1.
int winograd_supports(const conv_problem* p) {
    if (!is_3x3(p) && (p->KH != 7 || p->KW != 7))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "winograd computes 3x3 filters (F(2x2, 3x3)) and 7x7 ones (F(2, 7) along rows), "
                              "got %lldx%lld", (long long)p->KH, (long long)p->KW);
    if (p->stride_h != 1 || p->stride_w != 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "winograd takes stride 1 only, got (%lld, %lld)",
                              (long long)p->stride_h, (long long)p->stride_w);
    return is_3x3(p) ? winograd_f2x2_supports(p) : winograd_rows_supports(p);
}

int winograd_workspace_size(const conv_problem* p, size_t* bytes) {
    *bytes = is_3x3(p) ? filter_bytes<MAX_BM>(p) : winograd_rows_workspace_bytes(p);
    return CONV_OK;
}

const conv_config WINOGRAD_CONFIGS[] = {
    {"f2x2_32x32", winograd_run<32, 32>, winograd_f2x2_supports},
    {"f2x2_32x64", winograd_run<32, 64>, winograd_f2x2_supports},
    {"f2x7_rows_m8_p12", winograd_rows_run, winograd_rows_supports},
};

const char* winograd_default_config(const conv_problem* p) { return is_3x3(p) ? "f2x2_32x32" : "f2x7_rows_m8_p12"; }

}  // namespace

extern "C" const conv_impl conv_impl_winograd = {winograd_supports, winograd_workspace_size, WINOGRAD_CONFIGS,
                                                 (int)(sizeof WINOGRAD_CONFIGS / sizeof WINOGRAD_CONFIGS[0]),
                                                 winograd_default_config};
