// fp16.cu — implicit GEMM with half-precision arithmetic (fp32 in and out).
//   conv_fp16_kernel: the tiling of `fused` (64 maps x 64 pixels per block, k in steps of 16,
//   4 x 4 outputs per thread, register-staged tile loads), but the tiles are converted to fp16
//   as they are written to shared memory and the products are accumulated with __hfma2, two
//   adjacent output pixels per half2. Relative to `fused`:
//   - half the shared-memory footprint and traffic per tile (a thread reads its 4 maps and its
//     4 pixels as 8 bytes each instead of 16);
//   - one HFMA2 does two multiply-adds: 8 instructions per k for the 16 outputs instead of 16.
//   The fp16 accumulators are flushed into fp32 ones after every tile, i.e. every 16 products.
//
// Error bound. fp16 has a unit roundoff u = 2^-11 ~ 4.9e-4. Three sources:
//   1. x and w are rounded to fp16: each product carries a relative error <= 2u (rms ~0.8u for
//      uniform data), independent between products, so ~2.7e-4 relative L2 on the result;
//   2. each HFMA2 rounds once; over a run of n <= 16 products the rounding errors add up to
//      ~u*sqrt(sum_j |partial_j|^2), which for zero-mean unit-scale data is ~1.2x the rms size of
//      the run's sum times u, i.e. ~5-6e-4 relative;
//   3. the flushes into fp32 (2^-24 each) are negligible.
// Because the runs are flushed, the relative error does not grow with C*KH*KW: simulating this
// exact summation order (fp16-rounded operands, one rounding per fma, runs of 16, fp32 flushes)
// for uniform(-1,1) x and w gives 3.4e-4 (C*KH*KW = 1), 5.2e-4 (9) and 6.7e-4 (49 .. 5000)
// relative L2. The variant's bound is 2e-3: 3x margin over that. (Worst case, not statistical:
// |error| <= (2u + 16u) * sum |x*w| per output.) Range: |x|, |w| and every run of 16 partial
// sums must stay below 65504 (fp16 max); for unit-scale data a run is at most 16 in magnitude.
// Values below 6.1e-5 in magnitude lose relative precision (fp16 subnormals).
#include "implicit_gemm.cuh"

constexpr int FP16_BM = 64, FP16_BN = 64, FP16_BK = 16, FP16_THREADS = 256;
constexpr int FP16_TM = 4, FP16_TN = 4;  // outputs per thread: 16 x 16 threads cover 64 x 64
constexpr int FP16_LDA = FP16_BM + 8;    // W^T tile row: +8 halves spreads the k-strided stores
static_assert(FP16_BM == 16 * FP16_TM && FP16_BN == 16 * FP16_TN && FP16_THREADS == 256,
              "16 x 16 threads, one micro-tile each");
static_assert(FP16_TN == 4 && FP16_TM == 4, "the inner loop reads maps and pixels as two half2 each");

// x is (B, C, H, W), w is (M, C*KH*KW), y is (B, M, OH, OW). Grid: (pixel tiles, M tiles <= 65535).
__global__ void __launch_bounds__(FP16_THREADS)
conv_fp16_kernel(ConvGemmShape s, const float* __restrict__ x, const float* __restrict__ w,
                 float* __restrict__ y) {
    // k-major fp16 tiles; 8-byte aligned rows so that 4 halves are read as two half2.
    __shared__ __align__(16) __half As[FP16_BK * FP16_LDA];
    __shared__ __align__(16) __half Bs[FP16_BK * FP16_BN];

    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int n0 = blockIdx.x * FP16_BN;
    UnrollTileLoader<FP16_BK, FP16_BN, FP16_THREADS> xl;
    WeightTileLoader<FP16_BM, FP16_BK, FP16_THREADS> wl;
    xl.init(s, n0, tid);
    wl.init(tid);

    int y_pix[FP16_TN];
    conv_micro_tile_pixels(s, n0, tx * FP16_TN, y_pix);

    const int k_tiles = conv_tiles(s.CKK, FP16_BK), m_tiles = conv_tiles(s.M, FP16_BM);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        const int m0 = tm * FP16_BM;
        float acc[FP16_TM][FP16_TN] = {};
        xl.restart(s);
        wl.fetch(w, s, m0, 0);
        xl.fetch(x, s);
        for (int t = 0; t < k_tiles; ++t) {
            wl.store<StoreHalf, true, FP16_LDA>(As);
            xl.store<StoreHalf, FP16_BN>(Bs);
            __syncthreads();
            if (t + 1 < k_tiles) {
                wl.fetch(w, s, m0, (t + 1) * FP16_BK);
                xl.fetch(x, s);
            }
            // One fp16 run of FP16_BK products per output: [map i][pixel pair j].
            __half2 run[FP16_TM][FP16_TN / 2];
#pragma unroll
            for (int i = 0; i < FP16_TM; ++i)
#pragma unroll
                for (int j = 0; j < FP16_TN / 2; ++j) run[i][j] = __float2half2_rn(0.0f);
#pragma unroll
            for (int kk = 0; kk < FP16_BK; ++kk) {
                const __half2* a2 = reinterpret_cast<const __half2*>(&As[kk * FP16_LDA + ty * FP16_TM]);
                const __half2* b2 = reinterpret_cast<const __half2*>(&Bs[kk * FP16_BN + tx * FP16_TN]);
                const __half2 a01 = a2[0], a23 = a2[1], b01 = b2[0], b23 = b2[1];
                // Each map's weight broadcast to both halves, times two adjacent pixels.
                const __half2 a[FP16_TM] = {__low2half2(a01), __high2half2(a01), __low2half2(a23),
                                            __high2half2(a23)};
#pragma unroll
                for (int i = 0; i < FP16_TM; ++i) {
                    run[i][0] = __hfma2(a[i], b01, run[i][0]);
                    run[i][1] = __hfma2(a[i], b23, run[i][1]);
                }
            }
            // Flush the runs into fp32 so that the fp16 partial sums stay short and small.
#pragma unroll
            for (int i = 0; i < FP16_TM; ++i)
#pragma unroll
                for (int j = 0; j < FP16_TN / 2; ++j) {
                    const float2 f = __half22float2(run[i][j]);
                    acc[i][2 * j] += f.x;
                    acc[i][2 * j + 1] += f.y;
                }
            __syncthreads();
        }
        conv_micro_tile_store(y, s, m0, ty * FP16_TM, y_pix, acc);
    }
}

static int fp16_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    const ConvGemmShape s = conv_gemm_shape(p);
    const dim3 grid((unsigned)conv_tiles(s.NPIX, FP16_BN), conv_grid_y(conv_tiles(s.M, FP16_BM)));
    conv_fp16_kernel<<<grid, FP16_THREADS, 0, conv_stream(stream)>>>(s, x, w, y);
    CONV_LAUNCH_CHECK(conv_fp16_kernel);
    return CONV_OK;
}

static const conv_config FP16_CONFIGS[] = {{"default", fp16_launch, NULL}};
extern "C" const conv_impl conv_impl_fp16 = {NULL, NULL, FP16_CONFIGS, 1, NULL};
