// fused.cu — implicit GEMM in exact fp32, register-tiled.
//   conv_fused_kernel: Y (M x B*OH*OW) = W (M x C*KH*KW) * Xunroll, one 64 (maps) x 64 (pixels)
//   block tile per block, the reduction in steps of 16. Relative to `direct`:
//   - each Xunroll tile is built in shared memory straight from x (implicit_gemm.cuh) and reused by
//     all 64 output maps, each weight tile by all 64 pixels, instead of every thread re-reading
//     global memory for every product;
//   - each of the 256 threads keeps a 4 (maps) x 4 (pixels) tile of accumulators in registers and
//     reads its operands as two float4 per k: 16 FMAs per 2 shared-memory loads instead of one
//     FMA per two global loads;
//   - the next tile's global loads are issued into registers before the current tile is
//     multiplied, so their latency overlaps the math (one shared buffer, two barriers per tile);
//   - the (c, kh, kw) decomposition of k is carried incrementally, with no division per element.
//   Same fp32 products as `direct`, summed in a different order: exact (rel. L2 ~1e-7).
#include "implicit_gemm.cuh"

constexpr int FUSED_BM = 64, FUSED_BN = 64, FUSED_BK = 16, FUSED_THREADS = 256;
constexpr int FUSED_TM = 4, FUSED_TN = 4;  // outputs per thread: 16 x 16 threads cover 64 x 64
constexpr int FUSED_LDA = FUSED_BM + 4;    // W^T tile row: +4 spreads the k-strided stores over banks
static_assert(FUSED_BM == 16 * FUSED_TM && FUSED_BN == 16 * FUSED_TN && FUSED_THREADS == 256,
              "16 x 16 threads, one micro-tile each");

// x is (B, C, H, W), w is (M, C*KH*KW), y is (B, M, OH, OW). Grid: (pixel tiles, M tiles <= 65535).
__global__ void __launch_bounds__(FUSED_THREADS)
conv_fused_kernel(ConvGemmShape s, const float* __restrict__ x, const float* __restrict__ w,
                  float* __restrict__ y) {
    // W^T tile, k-major so that a thread's 4 maps are one float4; Xunroll tile, k-major likewise.
    __shared__ __align__(16) float As[FUSED_BK * FUSED_LDA];
    __shared__ __align__(16) float Bs[FUSED_BK * FUSED_BN];

    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int n0 = blockIdx.x * FUSED_BN;
    UnrollTileLoader<FUSED_BK, FUSED_BN, FUSED_THREADS> xl;
    WeightTileLoader<FUSED_BM, FUSED_BK, FUSED_THREADS> wl;
    xl.init(s, n0, tid);
    wl.init(tid);

    int y_pix[FUSED_TN];
    conv_micro_tile_pixels(s, n0, tx * FUSED_TN, y_pix);

    const int k_tiles = conv_tiles(s.CKK, FUSED_BK), m_tiles = conv_tiles(s.M, FUSED_BM);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        const int m0 = tm * FUSED_BM;
        float acc[FUSED_TM][FUSED_TN] = {};
        xl.restart(s);
        wl.fetch(w, s, m0, 0);
        xl.fetch(x, s);
        for (int t = 0; t < k_tiles; ++t) {
            wl.store<StoreFloat, true, FUSED_LDA>(As);
            xl.store<StoreFloat, FUSED_BN>(Bs);
            __syncthreads();
            if (t + 1 < k_tiles) {
                wl.fetch(w, s, m0, (t + 1) * FUSED_BK);
                xl.fetch(x, s);
            }
#pragma unroll
            for (int kk = 0; kk < FUSED_BK; ++kk) {
                const float4 a4 = *reinterpret_cast<const float4*>(&As[kk * FUSED_LDA + ty * FUSED_TM]);
                const float4 b4 = *reinterpret_cast<const float4*>(&Bs[kk * FUSED_BN + tx * FUSED_TN]);
                const float a[FUSED_TM] = {a4.x, a4.y, a4.z, a4.w};
                const float b[FUSED_TN] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
                for (int i = 0; i < FUSED_TM; ++i)
#pragma unroll
                    for (int j = 0; j < FUSED_TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
            __syncthreads();
        }
        conv_micro_tile_store(y, s, m0, ty * FUSED_TM, y_pix, acc);
    }
}

static int fused_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    const ConvGemmShape s = conv_gemm_shape(p);
    const dim3 grid((unsigned)conv_tiles(s.NPIX, FUSED_BN), conv_grid_y(conv_tiles(s.M, FUSED_BM)));
    conv_fused_kernel<<<grid, FUSED_THREADS, 0, conv_stream(stream)>>>(s, x, w, y);
    CONV_LAUNCH_CHECK(conv_fused_kernel);
    return CONV_OK;
}

static const conv_config IMPLICIT_GEMM_CONFIGS[] = {{"default", fused_launch, NULL}};
extern "C" const conv_impl conv_impl_implicit_gemm = {NULL, NULL, IMPLICIT_GEMM_CONFIGS, 1, NULL};
