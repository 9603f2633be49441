// tc_stem.cu — implicit_gemm_f16's stem configuration ("stem32x64"): a convolution of 1 to 8 input channels
// on fp16 / bf16 NHWC tensors as a GEMM whose reduction is the window itself, K = KH x KW x C taps (27 for a
// 3x3 stem of 3 channels, 147 at 7x7), gathered per tile.
//   The GEMM tiles stage x by 16-byte copies of channel runs, which a pixel of 3 channels (6 bytes) does not
//   make; the first layers of MobileNet, EfficientNet and RegNet (3 -> 32 maps, 3x3 at stride 2) ran on
//   mma_fp16's row windows at 20% of the memory floor on the H200 where cuDNN reached 31% (modern5, fp16,
//   batch 128: 171 against 109 us), and ConvNeXt's 4x4 stem on fp32 SIMT tiles. Such a layer's time is
//   writing y (32 maps a pixel from 27 values). Here each warp takes tiles of 32 output pixels, as the
//   pointwise configuration does (tc_pointwise.cu), with the window in place of the channels:
//   0. once a block: the filters (M x K, MKKC: each map's taps in the order of the window's (kh, kw, c)) into
//      shared memory, a map a row of whole k16 steps (zeros past K, rows of zeros past M up to 16);
//   1. per tile: lane r gathers pixel r's window, K values of x (zeros on padding and past K, up to whole k16
//      steps), into row r of the warp's buffer, TST_BATCH taps a step: their loads issued before any is used,
//      then 16-byte stores; each tap's offset, window row and column from a table staged once a block, its
//      bounds from masks of the window's rows and columns inside x made once a tile (none where all 32 windows
//      lie inside x). A tap off the image or past K loads the image's first value instead and is replaced by
//      zero: no load sits under a branch, so TST_BATCH are in flight a lane (with a branch a tap, the compiler
//      issued one load at a time: ~150 serial latencies a 7x7 tile);
//   2. per pass of 64 maps (32 for layers of at most 32) and k16 step, the two m16 tiles' A fragments and, per
//      16 maps, the B fragments by ldmatrix, mma.sync m16n8k16 with fp32 sums; then bias, ReLU and the staged
//      stores, 16 bytes where M is a multiple of 8 (tc_warp_tile.cuh), narrower words for LeNet's 4 maps and
//      other counts.
//   A tile's gather waits for its loads (no copy engine takes 2-byte values); the warps of a block and the
//   blocks of an SM overlap one warp's gather with another's stores.
#include "tc_stem.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "int_divider.cuh"
#include "launch_util.cuh"
#include "mma_operand16.cuh"
#include "tc_warp_tile.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int TST_MAX_C = 8;     // channels: more take the GEMM tiles' 16-byte copies
constexpr int TST_MAX_K = 256;   // taps of a window (16 k16 steps: 528-byte staged rows)

struct tst_shape {
    long long P, tiles;   // output pixels (B * OH * OW) and tiles of TWT_PIX
    int H, W, C, M, K, KH, KW;
    int span_h, span_w;   // rows and columns a window spans: (KH - 1) * dil_h + 1, ...
    uint32_t rows_all, cols_all;  // masks of a window's KH rows and KW columns
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int relu;
    int ks;               // k16 steps
    int row;              // bytes a staged pixel or filter row: 32 a k16 step, and 16
    int w_rows;           // staged filter rows: M rounded up to 16
    int w_bytes, tap_bytes, warp_bytes;  // shared memory: the filters, the taps' table, a warp's rows
    int y_at;             // where a warp's staged outputs start in its rows: after the windows, or over them
    ConvDivider by_ow, by_oh;  // a pixel index into (b, oh, ow)
};

constexpr int TST_BATCH = 8;         // taps a gather step: loads in flight a lane (16: 4-10% slower, H200)
constexpr int TST_MAX_SIDE = 31;  // window rows and columns: bit masks of 32, row 31 marks the taps past K
static_assert(TST_BATCH % 8 == 0 && 16 % TST_BATCH == 0, "a gather step is whole 16-byte stores in a k16 step");

// Taps k0 .. k0 + TST_BATCH of a window (its first tap at xw, which may lie outside x) into `row`: the loads
// first, then 16-byte stores. A tap is (offset from the first tap, window row, window column); BOUNDED: it is
// taken where bit `row` of rows_in and bit `column` of cols_in are set (the window's rows and columns inside x;
// row TST_MAX_SIDE for the taps past K, never set), else xb (the image's first value) is loaded instead (no
// branch around a load) and zero stored. Else every tap lies inside x, below K.
template <bool BOUNDED, class T>
__device__ __forceinline__ void tst_gather_batch(const int4* taps, int k0, const T* xb, const T* xw, uint32_t rows_in,
                                                 uint32_t cols_in, T* row) {
    T v[TST_BATCH];
    bool in[TST_BATCH];
#pragma unroll
    for (int u = 0; u < TST_BATCH; ++u) {
        const int4 t = taps[k0 + u];
        in[u] = !BOUNDED || (rows_in >> t.y & cols_in >> t.z & 1u);
        v[u] = __ldg(in[u] ? xw + t.x : xb);
    }
#pragma unroll
    for (int u = 0; u < TST_BATCH; ++u)
        if (!in[u]) v[u] = conv_store_as<T>(0.0f);
    uint4 words[TST_BATCH / 8];  // rows of 32-byte k16 steps, k0 a multiple of 8: 16-byte aligned
    memcpy(words, v, sizeof(words));
#pragma unroll
    for (int i = 0; i < TST_BATCH / 8; ++i) reinterpret_cast<uint4*>(row + k0)[i] = words[i];
}

// NT n8 tiles of maps a pass: 8 (64 maps), or 4 for layers of at most 32 maps (most networks' stems), whose
// sums take half the registers. Blocks an SM: with 64 maps a pass 5 (96 registers, no spills; 4 blocks: 100
// registers; 6: 80 with spills). The gather waits on loads, so the fifth block helped the 3x3 stems 3-6% and
// cost the 7x7 ones 1-2% (H200); with 32 maps, 8 (64 registers).
template <int NT>
constexpr int tst_blocks_per_sm() { return NT == 8 ? 5 : 8; }

template <int WARPS, int VEC, int NT, class T>
__global__ void __launch_bounds__(32 * WARPS, tst_blocks_per_sm<NT>())
    tc_stem_kernel(tst_shape s, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                   T* __restrict__ y) {
    extern __shared__ uint4 tst_smem[];
    unsigned char* const s_w = reinterpret_cast<unsigned char*>(tst_smem);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int4* const s_taps = reinterpret_cast<int4*>(s_w + s.w_bytes);    // per tap: x offset, window row, column
    unsigned char* const s_x = s_w + s.w_bytes + s.tap_bytes + warp * s.warp_bytes;  // TWT_PIX rows of s.row bytes
    unsigned char* const s_y = s_x + s.y_at;                           // TWT_PIX rows of TWT_Y_ROW bytes
    T* const my_row = reinterpret_cast<T*>(s_x + lane * s.row);
    const int kpad = 16 * s.ks;
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    for (int e = threadIdx.x; e < s.w_rows * kpad; e += 32 * WARPS) {
        const int m = e / kpad, k = e - m * kpad;
        reinterpret_cast<T*>(s_w + m * s.row)[k] =
            m < s.M && k < s.K ? w[(long long)m * s.K + k] : conv_store_as<T>(0.0f);
    }
    // Tap k = (kh * KW + kw) * C + c of a window: its offset in x from the window's first tap, kh and kw (for the
    // bounds). Taps K .. kpad: window row TST_MAX_SIDE, outside every window.
    for (int k = threadIdx.x; k < kpad; k += 32 * WARPS) {
        const int c = k % s.C, kw = k / s.C % s.KW, kh = k / s.C / s.KW;
        s_taps[k] = k < s.K ? make_int4((kh * s.dil_h * s.W + kw * s.dil_w) * s.C + c, kh, kw, 0)
                            : make_int4(0, TST_MAX_SIDE, 0, 0);
    }
    __syncthreads();  // the filters and taps, before any warp gathers or multiplies

    const uint32_t w_at = (uint32_t)__cvta_generic_to_shared(s_w);
    const uint32_t x_at = (uint32_t)__cvta_generic_to_shared(s_x);
    // ldmatrix rows: A, pixel lane % 16 at k-half lane / 16; B (two n8 tiles), map lane % 8 + 8 * (lane / 16)
    // at k-half (lane / 8) % 2.
    const uint32_t a_lane = (lane % 16) * s.row + lane / 16 * 16;
    const uint32_t b_lane = (lane % 8 + 8 * (lane / 16)) * s.row + (lane / 8) % 2 * 16;
    const long long step = (long long)gridDim.x * WARPS;
#pragma unroll 1
    for (long long tile = (long long)blockIdx.x * WARPS + warp; tile < s.tiles; tile += step) {
        const long long p0 = tile * TWT_PIX, p = p0 + lane;
        // Pixel p's window into row `lane`, taps in the order (kh, kw, c) of w's rows; zeros on padding, past K
        // and for pixels past P (their sums are never stored).
        uint32_t ow = 0, oh = 0;  // p < 2^31: the dispatcher splits batches whose y passes 2^31 values
        const long long b = p < s.P ? s.by_oh.divmod(s.by_ow.divmod((uint32_t)p, &ow), &oh) : 0;
        const T* xb = x + b * s.H * s.W * s.C;  // an image's offsets fit 32 bits (x's do, by the same split)
        const int ih0 = (int)oh * s.stride_h - s.pad_h, iw0 = (int)ow * s.stride_w - s.pad_w;
        const int mine = p < s.P ? s.H : 0;  // rows of x this pixel may read (past P: none, every tap zero)
        // The window's first tap as an opaque pointer: folded into each tap's 64-bit index instead, the compiler
        // gave a tap four integer instructions; from a pointer, one wide multiply-add.
        const T* xw = xb + (ih0 * s.W + iw0) * s.C;
        asm("" : "+l"(xw));
        // Where every lane's window lies inside x (most tiles of a large image), the taps below K in whole
        // batches skip the bounds (7x7 stem, batch 32: 126 -> 104 us on the H200). The rest take a tap where
        // its window row and column lie inside x: a mask of each, made once a tile.
        const bool inside = p < s.P && ih0 >= 0 && iw0 >= 0 && ih0 + s.span_h <= s.H && iw0 + s.span_w <= s.W;
        const bool all_inside = __all_sync(0xffffffffu, inside);
        uint32_t rows_in = s.rows_all, cols_in = s.cols_all;
        if (!all_inside) {
            rows_in = cols_in = 0;
            for (int r = 0; r < s.KH; ++r) rows_in |= (uint32_t)((unsigned)(ih0 + r * s.dil_h) < (unsigned)mine) << r;
            for (int c = 0; c < s.KW; ++c) cols_in |= (uint32_t)((unsigned)(iw0 + c * s.dil_w) < (unsigned)s.W) << c;
        }
        const int kfast = all_inside ? s.K / TST_BATCH * TST_BATCH : 0;
        int k0 = 0;
        for (; k0 < kfast; k0 += TST_BATCH) tst_gather_batch<false>(s_taps, k0, xb, xw, rows_in, cols_in, my_row);
        for (; k0 < kpad; k0 += TST_BATCH) tst_gather_batch<true>(s_taps, k0, xb, xw, rows_in, cols_in, my_row);
        __syncwarp();
        // Per pass of 8 * NT maps, per k16 step: A fragments from the staged windows (read again each pass: a
        // 7x7 window's ten steps would not stay in registers), B from the filters.
#pragma unroll 1
        for (int m0 = 0; m0 < s.M; m0 += 8 * NT) {
            float acc[2][NT][4];
            mma_zero(acc);
#pragma unroll 1
            for (int ks = 0; ks < s.ks; ++ks) {
                uint32_t a[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(a[mt], x_at + mt * 16 * s.row + a_lane + ks * 32);
#pragma unroll
                for (int j = 0; j < NT / 2; ++j) {  // n8 tiles 2j and 2j + 1 (past M: the staged rows of zeros)
                    if (m0 + 16 * j >= s.M) break;  // the same for the whole warp
                    uint32_t bf[4];
                    ldmatrix_x4(bf, w_at + (m0 + 16 * j) * s.row + b_lane + ks * 32);
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        mma16_m16n8k16<T>(acc[mt][2 * j], a[mt], bf[0], bf[1]);
                        mma16_m16n8k16<T>(acc[mt][2 * j + 1], a[mt], bf[2], bf[3]);
                    }
                }
            }
            if (s.y_at == 0) __syncwarp();  // outputs staged over the windows: every lane's reads first
            // (its __syncwarp calls also order this tile's ldmatrix reads before the next tile's gather)
            twt_store_pass<VEC>(acc, bias, s.relu, m0, s.M, p0, s.P, s_y, y, lane);
        }
    }
    grid_launch_dependents();
}

// The geometry of problem p and the shared memory a block of `warps` warps takes.
static size_t tst_layout(const conv_problem* p, int warps, tst_shape& s) {
    const ConvShape32 g = conv_shape32(p);
    s.P = p->B * (long long)g.OH * g.OW;
    s.tiles = (s.P + TWT_PIX - 1) / TWT_PIX;
    s.H = g.H; s.W = g.W; s.C = g.C; s.M = g.M; s.KH = g.KH; s.KW = g.KW;
    s.K = g.KH * g.KW * g.C;
    s.stride_h = g.stride_h; s.stride_w = g.stride_w; s.pad_h = g.pad_h; s.pad_w = g.pad_w;
    s.dil_h = g.dil_h; s.dil_w = g.dil_w;
    s.span_h = (g.KH - 1) * g.dil_h + 1; s.span_w = (g.KW - 1) * g.dil_w + 1;
    s.rows_all = (1u << g.KH) - 1; s.cols_all = (1u << g.KW) - 1;  // KH, KW <= TST_MAX_SIDE
    s.relu = p->epilogue == CONV_EPILOGUE_RELU;
    s.ks = (s.K + 15) / 16;
    s.row = 32 * s.ks + 16;
    s.w_rows = (s.M + 15) / 16 * 16;
    s.w_bytes = s.w_rows * s.row;
    s.tap_bytes = 16 * s.ks * (int)sizeof(int4);  // whole k16 steps: the gather reads taps up to kpad
    // One pass of maps (M <= 64) reads the windows no more once its sums are made: its outputs are staged over
    // them, a smaller block (7x7 stems of 64 maps: 66 KB instead of 85, 3 blocks an SM instead of 2).
    const int x_bytes = TWT_PIX * s.row, y_bytes = TWT_PIX * TWT_Y_ROW;
    s.y_at = s.M <= TWT_MAPS ? 0 : x_bytes;
    s.warp_bytes = s.M <= TWT_MAPS ? (x_bytes > y_bytes ? x_bytes : y_bytes) : x_bytes + y_bytes;
    s.by_ow = ConvDivider::of((uint32_t)g.OW);
    s.by_oh = ConvDivider::of((uint32_t)g.OH);
    return (size_t)s.w_bytes + s.tap_bytes + (size_t)warps * s.warp_bytes;
}

template <int WARPS, int VEC, int NT, class T>
static int tst_launch(const tst_shape& s, size_t smem, const conv_tensors* t, const void* bias, cudaStream_t stream) {
    return twt_launch("tc_stem_kernel", tc_stem_kernel<WARPS, VEC, NT, T>, s.tiles, WARPS, smem, stream, s,
                      static_cast<const T*>(t->x), static_cast<const T*>(t->w), static_cast<const T*>(bias),
                      static_cast<T*>(t->y));
}

}  // namespace

template <int WARPS>
int tc_stem_supports(const conv_problem* p) {
    if (p->groups != 1 || p->C > TST_MAX_C || p->KH * p->KW * p->C > TST_MAX_K)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration runs ungrouped layers of at most %d channels "
                              "and %d taps a window (KH*KW*C); this layer has C=%lld, %lldx%lld, %lld groups",
                              TST_MAX_C, TST_MAX_K, (long long)p->C, (long long)p->KH, (long long)p->KW,
                              (long long)p->groups);
    if (p->KH > TST_MAX_SIDE || p->KW > TST_MAX_SIDE)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration takes windows of at most %d rows and columns; "
                              "this one is %lldx%lld", TST_MAX_SIDE, (long long)p->KH, (long long)p->KW);
    if ((p->KH - 1) * p->dilation_h >= 32768 || (p->KW - 1) * p->dilation_w >= 32768)  // taps' offsets in 32 bits
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration's windows span less than 32768 rows and "
                              "columns; this one spans %lld x %lld", (long long)((p->KH - 1) * p->dilation_h + 1),
                              (long long)((p->KW - 1) * p->dilation_w + 1));
    if ((p->x_dtype != CONV_F16 && p->x_dtype != CONV_BF16) || p->y_dtype != p->x_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration takes fp16 or bf16 x and y of one dtype (x "
                              "%s, y %s)", conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC || p->w_layout != CONV_MKKC)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration takes NHWC x and y and MKKC w");
    int most = 0;
    const int status = conv_smem_per_block_optin(&most);
    if (status != CONV_OK) return status;
    tst_shape s;
    const size_t bytes = tst_layout(p, WARPS, s);
    if (bytes > (size_t)most)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the stem configuration's filters and buffers need %zu bytes of "
                              "shared memory, the GPU gives a block %d", bytes, most);
    return CONV_OK;
}

// The kernel storing y in words of VEC values: the most of 8, 4, 2 and 1 that M is a multiple of and y's
// address allows (a pixel's maps then start on a word's boundary); passes of 32 maps for layers of at most 32
// in 16-byte words (the narrower words are for few odd maps: LeNet's, tests'), else of 64.
template <int WARPS, class T>
static int tst_run_typed(const tst_shape& s, size_t smem, const conv_tensors* t, const void* bias, cudaStream_t on) {
    const uintptr_t at = (uintptr_t)t->y;
    if (s.M % 8 == 0 && at % 16 == 0)
        return s.M <= 32 ? tst_launch<WARPS, 8, 4, T>(s, smem, t, bias, on)
                         : tst_launch<WARPS, 8, 8, T>(s, smem, t, bias, on);
    if (s.M % 4 == 0 && at % 8 == 0) return tst_launch<WARPS, 4, 8, T>(s, smem, t, bias, on);
    if (s.M % 2 == 0 && at % 4 == 0) return tst_launch<WARPS, 2, 8, T>(s, smem, t, bias, on);
    return tst_launch<WARPS, 1, 8, T>(s, smem, t, bias, on);
}

template <int WARPS>
int tc_stem_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    tst_shape s;
    const size_t smem = tst_layout(p, WARPS, s);
    const void* bias = p->bias ? t->bias : nullptr;
    const cudaStream_t on = conv_stream(stream);
    if (p->x_dtype == CONV_BF16) return tst_run_typed<WARPS, __nv_bfloat16>(s, smem, t, bias, on);
    return tst_run_typed<WARPS, __half>(s, smem, t, bias, on);
}

// The configuration TcVariant lists (tc_igemm_host.cuh).
template int tc_stem_supports<4>(const conv_problem*);
template int tc_stem_run<4>(const conv_problem*, const conv_tensors*, void*, size_t, void*);
