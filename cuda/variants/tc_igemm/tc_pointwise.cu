// tc_pointwise.cu — implicit_gemm_f16's pointwise configuration ("pw32x64"): a 1x1 convolution of 8 to 64
// input channels on fp16 / bf16 NHWC tensors, y = x (P x C) times w^T (C x M), streamed by warps.
//   Such a layer's time is its bytes: MobileNetV2's 16 -> 96 expansion at batch 128 writes six times the
//   bytes it reads and multiplies 16 values a product. The GEMM tiles ran these layers at 27-50% of the
//   memory floor on the H200 where cuDNN ran 62-80% (modern5, fp16, batch 128: 222 against 107 us at
//   16 -> 96), and the grouped tiles taking them as one group were slower still (tc_grouped.cu). Here each
//   warp takes tiles of 32 pixels on its own, over the whole of M:
//   0. once a block: the filters (M x C, MKKC) into shared memory, a map a row of whole k16 steps (zeros
//      past C, and rows of zeros past M up to a multiple of 16);
//   1. per tile: its 32 pixels' channels, one contiguous run of x, copied by 16-byte cp.async into one of
//      the warp's two buffers while the tile before is multiplied and stored;
//   2. the tile's A fragments by ldmatrix, kept in registers; per 64 maps: B fragments by ldmatrix from the
//      filters, mma.sync m16n8k16 with fp32 accumulation, bias and ReLU, the outputs staged in the warp's
//      shared memory and written by 16-byte stores (four pixels' 128-byte runs of maps an instruction).
//   Staged rows are whole k16 steps and 16 bytes (an odd number of 16-byte chunks), so that the 8 rows of
//   an ldmatrix fall in distinct banks; staged outputs take 144 bytes a pixel likewise for the fragments'
//   4-byte stores. After the filters no warp waits on another.
#include "tc_pointwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_operand16.cuh"
#include "tc_warp_tile.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int TPW_MAX_KS = 4;  // k16 steps (C up to 64): the A fragments a tile keeps

struct tpw_shape {
    long long P, tiles;  // pixels (B*H*W) and tiles of TWT_PIX
    int C, M, relu;
    int chunks;          // 16-byte chunks of a pixel's channels in x (C / 8)
    int row;             // bytes a staged pixel or filter row: 32 a k16 step, and 16
    int w_rows;          // staged filter rows: M rounded up to 16
    int w_bytes, warp_bytes;  // shared memory: the filters; a warp's two x buffers and its output staging
};

template <int KS, int WARPS, class T>
__global__ void __launch_bounds__(32 * WARPS, 4)
    tc_pointwise_kernel(tpw_shape s, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                        T* __restrict__ y) {
    constexpr int ROW_CHUNKS = 2 * KS;  // 16-byte chunks of a staged row, before its pad
    extern __shared__ uint4 tpw_smem[];
    unsigned char* const s_w = reinterpret_cast<unsigned char*>(tpw_smem);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned char* const s_x = s_w + s.w_bytes + warp * s.warp_bytes;  // two buffers of TWT_PIX rows
    unsigned char* const s_y = s_x + 2 * TWT_PIX * s.row;              // TWT_PIX rows of TWT_Y_ROW bytes

    // The x buffers' chunks past C: zeros no copy overwrites (the last k-step's upper half at C % 16 == 8).
    const int past = ROW_CHUNKS - s.chunks;
    for (int e = lane; e < 2 * TWT_PIX * past; e += 32)
        *reinterpret_cast<uint4*>(s_x + e / past * s.row + (s.chunks + e % past) * 16) = make_uint4(0u, 0u, 0u, 0u);
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    for (int e = threadIdx.x; e < s.w_rows * ROW_CHUNKS; e += 32 * WARPS) {
        const int m = e / ROW_CHUNKS, c = e % ROW_CHUNKS;
        unsigned char* dst = s_w + m * s.row + c * 16;
        if (c < s.chunks) cp_async_16_zfill(dst, w + (m < s.M ? (long long)m * s.C + c * 8 : 0), m < s.M);
        else *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
    // Tile t's pixels into buffer buf: 32 * C contiguous values of x (zeros past P).
    const auto copy = [&](long long t, int buf) {
        const long long p0 = t * TWT_PIX;
        unsigned char* dst = s_x + buf * TWT_PIX * s.row;
        for (int e = lane; e < TWT_PIX * s.chunks; e += 32) {
            const int r = e / s.chunks, c = e - r * s.chunks;
            const bool in = p0 + r < s.P;
            cp_async_16_zfill(dst + r * s.row + c * 16, x + (in ? (p0 + r) * s.C + c * 8 : 0), in);
        }
    };
    long long tile = (long long)blockIdx.x * WARPS + warp;
    const long long step = (long long)gridDim.x * WARPS;
    if (tile < s.tiles) copy(tile, 0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();  // every thread's filter copies and zeros

    const uint32_t w_at = (uint32_t)__cvta_generic_to_shared(s_w);
    const uint32_t x_at = (uint32_t)__cvta_generic_to_shared(s_x);
    // ldmatrix rows: A, pixel lane % 16 at k-half lane / 16; B (two n8 tiles), map lane % 8 + 8 * (lane / 16)
    // at k-half (lane / 8) % 2.
    const uint32_t a_lane = (lane % 16) * s.row + lane / 16 * 16;
    const uint32_t b_lane = (lane % 8 + 8 * (lane / 16)) * s.row + (lane / 8) % 2 * 16;
#pragma unroll 1
    for (int buf = 0; tile < s.tiles; tile += step, buf ^= 1) {
        if (tile + step < s.tiles) copy(tile + step, buf ^ 1);
        cp_async_commit();
        cp_async_wait<1>();  // this tile's copies (the next one's stay in flight)
        __syncwarp();
        uint32_t a[2][KS][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
                ldmatrix_x4(a[mt][ks], x_at + buf * TWT_PIX * s.row + mt * 16 * s.row + a_lane + ks * 32);
        const long long p0 = tile * TWT_PIX;
#pragma unroll 1
        for (int m0 = 0; m0 < s.M; m0 += TWT_MAPS) {
            float acc[2][8][4];
            mma_zero(acc);
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // n8 tiles 2j and 2j + 1 (past M: the staged rows of zeros)
                if (m0 + 16 * j >= s.M) break;  // the same for the whole warp
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    uint32_t b[4];
                    ldmatrix_x4(b, w_at + (m0 + 16 * j) * s.row + b_lane + ks * 32);
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        mma16_m16n8k16<T>(acc[mt][2 * j], a[mt][ks], b[0], b[1]);
                        mma16_m16n8k16<T>(acc[mt][2 * j + 1], a[mt][ks], b[2], b[3]);
                    }
                }
            }
            twt_store_pass<8>(acc, bias, s.relu, m0, s.M, p0, s.P, s_y, y, lane);
        }
    }
    grid_launch_dependents();
}

// The geometry of problem p and the shared memory a block of `warps` warps takes.
static size_t tpw_layout(const conv_problem* p, int warps, tpw_shape& s) {
    s.P = p->B * p->H * p->W;
    s.tiles = (s.P + TWT_PIX - 1) / TWT_PIX;
    s.C = (int)p->C;
    s.M = (int)p->M;
    s.relu = p->epilogue == CONV_EPILOGUE_RELU;
    s.chunks = s.C / 8;
    const int ks = (s.C + 15) / 16;
    s.row = 32 * ks + 16;
    s.w_rows = (s.M + 15) / 16 * 16;
    s.w_bytes = s.w_rows * s.row;
    s.warp_bytes = 2 * TWT_PIX * s.row + TWT_PIX * TWT_Y_ROW;
    return (size_t)s.w_bytes + (size_t)warps * s.warp_bytes;
}

template <int KS, int WARPS, class T>
static int tpw_launch(const tpw_shape& s, size_t smem, const conv_tensors* t, const void* bias, cudaStream_t stream) {
    return twt_launch("tc_pointwise_kernel", tc_pointwise_kernel<KS, WARPS, T>, s.tiles, WARPS, smem, stream, s,
                      static_cast<const T*>(t->x), static_cast<const T*>(t->w), static_cast<const T*>(bias),
                      static_cast<T*>(t->y));
}

// The kernel of p's k16 steps (C / 16, rounded up) on operands T.
template <int WARPS, class T>
static int tpw_run_typed(const tpw_shape& s, size_t smem, const conv_tensors* t, const void* bias,
                         cudaStream_t stream) {
    switch ((s.C + 15) / 16) {
    case 1: return tpw_launch<1, WARPS, T>(s, smem, t, bias, stream);
    case 2: return tpw_launch<2, WARPS, T>(s, smem, t, bias, stream);
    case 3: return tpw_launch<3, WARPS, T>(s, smem, t, bias, stream);
    default: return tpw_launch<TPW_MAX_KS, WARPS, T>(s, smem, t, bias, stream);
    }
}

}  // namespace

template <int WARPS>
int tc_pw_supports(const conv_problem* p) {
    if (p->groups != 1 || p->KH != 1 || p->KW != 1 || p->stride_h != 1 || p->stride_w != 1 || p->pad_h || p->pad_w ||
        p->pad_h_extra || p->pad_w_extra)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the pw configuration runs ungrouped 1x1 windows at stride 1 without "
                              "padding; this layer is %lldx%lld, stride %lldx%lld, %lld groups", (long long)p->KH,
                              (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w, (long long)p->groups);
    if ((p->x_dtype != CONV_F16 && p->x_dtype != CONV_BF16) || p->y_dtype != p->x_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the pw configuration takes fp16 or bf16 x and y of one dtype (x %s, "
                              "y %s)", conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC || p->w_layout != CONV_MKKC)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the pw configuration takes NHWC x and y and MKKC w");
    if (p->C % 8 != 0 || p->C > 8 * 2 * TPW_MAX_KS || p->M % 8 != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the pw configuration takes C a multiple of 8 up to %d and M a "
                              "multiple of 8; this layer has C=%lld, M=%lld", 16 * TPW_MAX_KS, (long long)p->C,
                              (long long)p->M);
    int most = 0;
    const int status = conv_smem_per_block_optin(&most);
    if (status != CONV_OK) return status;
    tpw_shape s;
    const size_t bytes = tpw_layout(p, WARPS, s);
    if (bytes > (size_t)most)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the pw configuration's filters (M=%lld maps) and buffers need %zu "
                              "bytes of shared memory, the GPU gives a block %d", (long long)p->M, bytes, most);
    return CONV_OK;
}

template <int WARPS>
int tc_pw_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    const struct { const char* name; const void* ptr; } operands[] = {{"x", t->x}, {"w", t->w}, {"y", t->y}};
    for (const auto& o : operands)
        if ((uintptr_t)o.ptr % 16 != 0)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "implicit_gemm_f16: the pw configuration copies %s by 16-byte words; %s at %p is "
                                  "not 16-byte aligned", o.name, o.name, o.ptr);
    tpw_shape s;
    const size_t smem = tpw_layout(p, WARPS, s);
    const void* bias = p->bias ? t->bias : nullptr;
    const cudaStream_t on = conv_stream(stream);
    if (p->x_dtype == CONV_BF16) return tpw_run_typed<WARPS, __nv_bfloat16>(s, smem, t, bias, on);
    return tpw_run_typed<WARPS, __half>(s, smem, t, bias, on);
}

// The configuration TcVariant lists (tc_igemm_host.cuh).
template int tc_pw_supports<4>(const conv_problem*);
template int tc_pw_run<4>(const conv_problem*, const conv_tensors*, void*, size_t, void*);
