// unroll_gemm.cu — explicit im2col, then a shared-memory tiled matrix multiply.
//   conv_unroll_kernel: writes X_unroll, a (C*KH*KW) x N matrix whose column n is the receptive
//   field of output pixel col0 + n of the batch (pixels numbered b*OH*OW + oh*OW + ow), zeros where
//   it covers padding (so a padded tap adds 0 * w, as in PyTorch). Consecutive threads take
//   consecutive columns, so every row is written with coalesced stores.
//   conv_gemm_kernel: Y = W * X_unroll, W being the filter bank read as an M x (C*KH*KW) row-major
//   matrix, with 64x64 output tiles per block, K staged 16 at a time through shared memory, and a
//   4x4 register micro-tile per thread; it writes y in NCHW directly.
// Relative to `direct`: the convolution becomes one dense GEMM, whose tiles reuse each loaded weight
// 64 times and each unrolled input 64 times from shared memory (16 FMAs per 8 shared loads per
// thread), with no bounds tests in the inner loop; the price is the unroll pass, which writes KH*KW
// times the input to global memory (for stride 1) and reads it back.
// Workspace: X_unroll for a chunk of output pixel columns. workspace_size() asks for the whole batch
// (all B*OH*OW columns) when that takes at most WORKSPACE_CAP (256 MiB), otherwise for as many
// columns as fit in the cap, rounded down to whole GEMM tiles, and never fewer than one tile of
// GEMM_BN columns (or the batch's columns, if fewer). launch() takes as many columns per chunk as
// the workspace it is given holds, and runs the two kernels chunk after chunk. Chunks are column
// ranges, not whole images, so a single huge image needs no huge workspace.
#include "conv_kernel_util.cuh"

// GEMM tile: GEMM_BM output maps x GEMM_BN pixel columns per block, GEMM_BK of the reduction per stage.
#define GEMM_BM 64
#define GEMM_BN 64
#define GEMM_BK 16
// 16 x 16 threads, each owning a 4 x 4 micro-tile strided by 16 (conflict-free shared reads).
#define GEMM_THREADS 256
#define GEMM_MICRO 4
#define UNROLL_THREADS 256
#define WORKSPACE_CAP ((int64_t)256 << 20)

// x is (B, C, H, W); xu is (C*KH*KW, ncols) row-major: row (c*KH + kh)*KW + kw, column n = pixel
// col0 + n. blockIdx.x picks UNROLL_THREADS columns, blockIdx.y walks the channels.
__global__ void __launch_bounds__(UNROLL_THREADS)
conv_unroll_kernel(conv_problem p, int OH, int OW, int col0, int ncols, const float* __restrict__ x,
                   float* __restrict__ xu) {
    const int C = (int)p.C, H = (int)p.H, W = (int)p.W, KH = (int)p.KH, KW = (int)p.KW;
    const int sh = (int)p.stride_h, sw = (int)p.stride_w, ph = (int)p.pad_h, pw = (int)p.pad_w;
    const int dh = (int)p.dilation_h, dw = (int)p.dilation_w;
    const int OHW = OH * OW;
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= ncols) return;  // no barriers in this kernel
    const int g = col0 + n, b = g / OHW, pix = g - b * OHW, oh = pix / OW, ow = pix - oh * OW;
    const int ih0 = oh * sh - ph, iw0 = ow * sw - pw;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const float* xc = x + (b * C + c) * H * W;
        // The unrolled matrix can pass 2^31 elements (one huge image, one tile of columns): 64-bit.
        float* out = xu + (size_t)c * KH * KW * ncols + n;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = ih0 + kh * dh;
            const bool row_in = ih >= 0 && ih < H;
            for (int kw = 0; kw < KW; ++kw) {
                const int iw = iw0 + kw * dw;
                const bool in = row_in && iw >= 0 && iw < W;
                out[(size_t)(kh * KW + kw) * ncols] = in ? xc[ih * W + iw] : 0.0f;
            }
        }
    }
}

// w is (M, K) row-major (the filter bank, K = C*KH*KW), xu is (K, N), y is (B, M, OH*OW) with
// column n of the product going to pixel col0 + n. blockIdx.x picks GEMM_BN columns, blockIdx.y walks
// the GEMM_BM row tiles.
__global__ void __launch_bounds__(GEMM_THREADS)
conv_gemm_kernel(int M, int K, int N, int col0, int OHW, const float* __restrict__ w,
                 const float* __restrict__ xu, float* __restrict__ y) {
    // As is W's tile transposed (k-major) so that the compute loop reads it like Bs; the +1 column
    // spreads the transposing stores over the banks.
    __shared__ float As[GEMM_BK][GEMM_BM + 1];
    __shared__ float Bs[GEMM_BK][GEMM_BN];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    // Loader roles: A as 16 (k) x 16 (m) per pass, B as 4 (k) x 64 (n) per pass; 4 passes each.
    const int a_k = tid % GEMM_BK, a_m = tid / GEMM_BK;
    const int b_n = tid % GEMM_BN, b_k = tid / GEMM_BN;
    const int n0 = blockIdx.x * GEMM_BN;
    for (int m0 = blockIdx.y * GEMM_BM; m0 < M; m0 += gridDim.y * GEMM_BM) {
        float acc[GEMM_MICRO][GEMM_MICRO] = {};
        for (int k0 = 0; k0 < K; k0 += GEMM_BK) {
#pragma unroll
            for (int i = 0; i < GEMM_MICRO; ++i) {
                const int m = a_m + 16 * i, gm = m0 + m, gk = k0 + a_k;
                As[a_k][m] = gm < M && gk < K ? w[gm * K + gk] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < GEMM_MICRO; ++i) {
                const int k = b_k + 4 * i, gk = k0 + k, gn = n0 + b_n;
                Bs[k][b_n] = gk < K && gn < N ? xu[(size_t)gk * N + gn] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < GEMM_BK; ++kk) {
                float a[GEMM_MICRO], bv[GEMM_MICRO];
#pragma unroll
                for (int i = 0; i < GEMM_MICRO; ++i) {
                    a[i] = As[kk][ty + 16 * i];
                    bv[i] = Bs[kk][tx + 16 * i];
                }
#pragma unroll
                for (int i = 0; i < GEMM_MICRO; ++i)
#pragma unroll
                    for (int j = 0; j < GEMM_MICRO; ++j) acc[i][j] += a[i] * bv[j];
            }
            __syncthreads();  // the tiles are overwritten by the next stage
        }
#pragma unroll
        for (int j = 0; j < GEMM_MICRO; ++j) {
            const int n = n0 + tx + 16 * j;
            if (n >= N) continue;
            const int g = col0 + n, b = g / OHW, pix = g - b * OHW;
#pragma unroll
            for (int i = 0; i < GEMM_MICRO; ++i) {
                const int m = m0 + ty + 16 * i;
                if (m < M) y[(b * M + m) * OHW + pix] = acc[i][j];
            }
        }
    }
}

// Columns (output pixels of the batch) the workspace query makes room for.
static int64_t query_columns(const conv_problem* p) {
    const int64_t rows = p->C * p->KH * p->KW, total = p->B * conv_out_h(p) * conv_out_w(p);
    int64_t cols = WORKSPACE_CAP / (rows * (int64_t)sizeof(float)) / GEMM_BN * GEMM_BN;
    if (cols < GEMM_BN) cols = GEMM_BN;
    return cols < total ? cols : total;
}

static int unroll_gemm_supports(const conv_problem* p) {
    return conv_check_coords("unroll_gemm", p, 0, 0);
}

static int unroll_gemm_workspace_size(const conv_problem* p, size_t* bytes) {
    *bytes = (size_t)(query_columns(p) * p->C * p->KH * p->KW) * sizeof(float);
    return CONV_OK;
}

static int unroll_gemm_launch(const conv_problem* p, const conv_tensors* t, void* workspace, size_t workspace_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p), OHW = OH * OW;
    const int64_t rows = p->C * p->KH * p->KW, total = p->B * OHW;
    const int64_t fit = (int64_t)(workspace_bytes / ((size_t)rows * sizeof(float)));
    if (fit < 1)
        return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL,
                              "unroll_gemm: the workspace (%zu bytes) cannot hold one unrolled column "
                              "(%lld bytes)",
                              workspace_bytes, (long long)(rows * (int64_t)sizeof(float)));
    const int chunk = (int)(fit < total ? fit : total);
    const cudaStream_t s = conv_stream(stream);
    float* xu = static_cast<float*>(workspace);
    const int64_t row_tiles = (p->M + GEMM_BM - 1) / GEMM_BM;
    for (int64_t col0 = 0; col0 < total; col0 += chunk) {
        const int ncols = (int)(total - col0 < chunk ? total - col0 : chunk);
        const dim3 unroll_grid((unsigned)(((int64_t)ncols + UNROLL_THREADS - 1) / UNROLL_THREADS),
                               (unsigned)(p->C < GRID_Y_LIMIT ? p->C : GRID_Y_LIMIT));
        conv_unroll_kernel<<<unroll_grid, UNROLL_THREADS, 0, s>>>(*p, OH, OW, (int)col0, ncols, x, xu);
        CONV_LAUNCH_CHECK(conv_unroll_kernel);
        const dim3 gemm_grid((unsigned)(((int64_t)ncols + GEMM_BN - 1) / GEMM_BN),
                             (unsigned)(row_tiles < GRID_Y_LIMIT ? row_tiles : GRID_Y_LIMIT));
        conv_gemm_kernel<<<gemm_grid, GEMM_THREADS, 0, s>>>((int)p->M, (int)rows, ncols, (int)col0,
                                                            OHW, w, xu, y);
        CONV_LAUNCH_CHECK(conv_gemm_kernel);
    }
    return CONV_OK;
}

static const conv_config UNROLL_GEMM_CONFIGS[] = {{"default", unroll_gemm_launch, NULL}};
extern "C" const conv_impl conv_impl_unroll_gemm = {unroll_gemm_supports, unroll_gemm_workspace_size,
                                                     UNROLL_GEMM_CONFIGS, 1, NULL};
