// wmma.cu — implicit GEMM on tensor cores through nvcuda::wmma: variants `wmma` (fp16 operands)
// and `wmma_tf32` (tf32 operands), both with fp32 accumulation and fp32 in and out.
//   conv_wmma_kernel<Cfg>: one template for every configuration. Each block builds the same tiles
//   as `fused` (W tile and Xunroll tile from implicit_gemm.cuh, zero-padded past every edge, so
//   k is padded to a multiple of BK = 16 with zeros) but stores them in the operand precision,
//   row-major, as the A (maps x k) and B (k x pixels) operands of wmma fragments; each warp
//   multiplies its FRAGS_M x FRAGS_N accumulator fragments with mma_sync. The accumulators go
//   through a shared-memory staging tile (aliasing the operand tiles) so that they can be
//   scattered into NCHW with bounds checks and coalesced along the pixels.
//   Relative to `fused`: the multiply-adds run on tensor cores (one warp-wide mma_sync does
//   FM*FN*FK of them) instead of one FMA per thread and instruction, and fp16 operands halve
//   the shared-memory footprint of the tiles.
//   Configurations:
//   - wmma, M > 8:  m16n16k16 fp16, 2 x 2 warps of 2 x 2 fragments: 64 maps x 64 pixels per block;
//   - wmma, M <= 8: m8n32k16 fp16, 8 warps of one 8 x 32 fragment: 8 maps x 256 pixels, so that
//     small layers (LeNet's first, M = 4) waste at most half of each fragment, not 3/4 or more;
//   - wmma_tf32:    m16n16k8 tf32 (fp32 range, 10-bit mantissa), 64 x 64 like the first.
//   The kernel body exists only in code compiled for sm_70+ (fp16) / sm_80+ (tf32); supports()
//   checks both the GPU and the code this build has for it.
//
// Error: the operands are rounded to 11 significant bits (fp16 and tf32 alike: u = 2^-11), the
// products are exact and summed in fp32. For uniform(-1,1) data the relative L2 error is ~2.7e-4
// whatever C*KH*KW (independent operand roundings; the fp32 sums add ~1e-7 * sqrt(CKK/16)).
// Bound used: 1e-3 for both. fp16 also limits the range: |x|, |w| < 65504, and values below
// 6.1e-5 lose relative precision; tf32 keeps the fp32 range.
#include <mma.h>

#include <atomic>

#include "implicit_gemm.cuh"

namespace wmma = nvcuda::wmma;

// Operand precisions, with the oldest architecture (as __CUDA_ARCH__) whose tensor cores have it.
struct Fp16Operands { static constexpr int MIN_ARCH = 700; };
struct Tf32Operands { static constexpr int MIN_ARCH = 800; };

// A block of WARPS_M x WARPS_N warps, each computing FRAGS_M x FRAGS_N accumulator fragments of
// FM x FN; the reduction advances BK per shared-memory tile.
template <class Ops, int FM_, int FN_, int WARPS_M_, int WARPS_N_, int FRAGS_M_, int FRAGS_N_, int BK_>
struct WmmaConfig {
    using Operands = Ops;
    static constexpr int FM = FM_, FN = FN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int FRAGS_M = FRAGS_M_, FRAGS_N = FRAGS_N_, BK = BK_;
    static constexpr int BM = WARPS_M * FRAGS_M * FM, BN = WARPS_N * FRAGS_N * FN;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
};
using WmmaFp16Config = WmmaConfig<Fp16Operands, 16, 16, 2, 2, 2, 2, 16>;       // 64 x 64, 128 threads
using WmmaFp16SmallMConfig = WmmaConfig<Fp16Operands, 8, 32, 1, 8, 1, 1, 16>;  // 8 x 256, 256 threads
using WmmaTf32Config = WmmaConfig<Tf32Operands, 16, 16, 2, 2, 2, 2, 16>;       // 64 x 64, 128 threads

#if defined(__CUDA_ARCH__)
// Fragment types and shared-memory element of each operand precision; defined only where the
// architecture has them (mma.h declares the tf32 types only for sm_80+).
template <class Ops, int FM, int FN>
struct MmaOperands;
#if __CUDA_ARCH__ >= 700
template <int FM, int FN>
struct MmaOperands<Fp16Operands, FM, FN> {
    static constexpr int FK = 16;
    using Store = StoreHalf;
    using FragA = wmma::fragment<wmma::matrix_a, FM, FN, FK, __half, wmma::row_major>;
    using FragB = wmma::fragment<wmma::matrix_b, FM, FN, FK, __half, wmma::row_major>;
};
#endif
#if __CUDA_ARCH__ >= 800
// tf32 operands live in shared memory as fp32 already rounded to tf32, as mma_sync expects.
struct StoreTf32 {
    using type = float;
    static __device__ float apply(float v) { return wmma::__float_to_tf32(v); }
};
template <>
struct MmaOperands<Tf32Operands, 16, 16> {
    static constexpr int FK = 8;
    using Store = StoreTf32;
    using FragA = wmma::fragment<wmma::matrix_a, 16, 16, FK, wmma::precision::tf32, wmma::row_major>;
    using FragB = wmma::fragment<wmma::matrix_b, 16, 16, FK, wmma::precision::tf32, wmma::row_major>;
};
#endif

// The whole computation of one block: x is (B, C, H, W), w is (M, C*KH*KW), y is (B, M, OH, OW).
template <class Cfg>
__device__ void conv_wmma_tiles(const ConvGemmShape& s, const float* __restrict__ x,
                                const float* __restrict__ w, float* __restrict__ y) {
    using Ops = MmaOperands<typename Cfg::Operands, Cfg::FM, Cfg::FN>;
    using Store = typename Ops::Store;
    using T = typename Store::type;
    using FragC = wmma::fragment<wmma::accumulator, Cfg::FM, Cfg::FN, Ops::FK, float>;
    constexpr int FM = Cfg::FM, FN = Cfg::FN, FK = Ops::FK;
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, THREADS = Cfg::THREADS;
    // Rows padded by 16 bytes so that the 8 rows of a fragment load fall in different banks.
    constexpr int SKEW = 16 / (int)sizeof(T);
    constexpr int LDA = BK + SKEW, LDB = BN + SKEW, LDC = BN + 4;
    constexpr int A_BYTES = BM * LDA * (int)sizeof(T), B_BYTES = BK * LDB * (int)sizeof(T);
    constexpr int C_BYTES = BM * LDC * (int)sizeof(float);
    static_assert(BK % FK == 0, "whole fragment steps per tile");
    static_assert((LDA * sizeof(T)) % 16 == 0 && (LDB * sizeof(T)) % 16 == 0 && LDC % 4 == 0,
                  "wmma ldm must be a multiple of 16 bytes");
    static_assert(A_BYTES % 32 == 0 && (FM * LDA * sizeof(T)) % 32 == 0 && (FK * sizeof(T)) % 32 == 0 &&
                      (FK * LDB * sizeof(T)) % 32 == 0 && (FN * sizeof(T)) % 32 == 0 &&
                      (FM * LDC * sizeof(float)) % 32 == 0 && (FN * sizeof(float)) % 32 == 0,
                  "every fragment pointer must be 256-bit aligned");

    // The operand tiles As (BM x BK, row-major) and Bs (BK x BN, row-major) while multiplying,
    // then the staging tile Cs (BM x BN fp32) for the stores.
    __shared__ __align__(128) unsigned char smem[A_BYTES + B_BYTES > C_BYTES ? A_BYTES + B_BYTES : C_BYTES];
    T* As = reinterpret_cast<T*>(smem);
    T* Bs = reinterpret_cast<T*>(smem + A_BYTES);
    float* Cs = reinterpret_cast<float*>(smem);

    const int tid = threadIdx.x, warp = tid / 32;
    const int warp_m = warp / Cfg::WARPS_N * Cfg::FRAGS_M * FM, warp_n = warp % Cfg::WARPS_N * Cfg::FRAGS_N * FN;
    const int n0 = blockIdx.x * BN;
    using XLoader = UnrollTileLoader<BK, BN, THREADS>;
    XLoader xl;
    WeightTileLoader<BM, BK, THREADS> wl;
    xl.init(s, n0, tid);
    wl.init(tid);

    const int k_tiles = conv_tiles(s.CKK, BK), m_tiles = conv_tiles(s.M, BM);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        const int m0 = tm * BM;
        FragC acc[Cfg::FRAGS_M][Cfg::FRAGS_N];
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
        xl.restart(s);
        wl.fetch(w, s, m0, 0);
        xl.fetch(x, s);
        for (int t = 0; t < k_tiles; ++t) {
            wl.template store<Store, false, LDA>(As);
            xl.template store<Store, LDB>(Bs);
            __syncthreads();
            if (t + 1 < k_tiles) {
                wl.fetch(w, s, m0, (t + 1) * BK);
                xl.fetch(x, s);
            }
#pragma unroll
            for (int kk = 0; kk < BK; kk += FK) {
                typename Ops::FragA a[Cfg::FRAGS_M];
                typename Ops::FragB b[Cfg::FRAGS_N];
#pragma unroll
                for (int i = 0; i < Cfg::FRAGS_M; ++i)
                    wmma::load_matrix_sync(a[i], As + (warp_m + i * FM) * LDA + kk, LDA);
#pragma unroll
                for (int j = 0; j < Cfg::FRAGS_N; ++j)
                    wmma::load_matrix_sync(b[j], Bs + kk * LDB + warp_n + j * FN, LDB);
#pragma unroll
                for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
                    for (int j = 0; j < Cfg::FRAGS_N; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
            }
            __syncthreads();
        }
        // Staging: the last barrier above ended every read of As/Bs, which Cs overwrites.
#pragma unroll
        for (int i = 0; i < Cfg::FRAGS_M; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::FRAGS_N; ++j)
                wmma::store_matrix_sync(Cs + (warp_m + i * FM) * LDC + warp_n + j * FN, acc[i][j], LDC,
                                        wmma::mem_row_major);
        __syncthreads();
        // Each thread writes its loader's pixel column: consecutive threads, consecutive pixels.
        if (xl.col.valid)
            for (int mm = xl.r0; mm < BM && mm < s.M - m0; mm += XLoader::STEP)
                y[xl.col.y_base + (m0 + mm) * s.OHW] = Cs[mm * LDC + xl.n];  // < B*M*OH*OW
        __syncthreads();  // Cs is read before the next M tile's operands overwrite it
    }
}
#endif  // __CUDA_ARCH__

// Grid: (pixel tiles, M tiles <= 65535). Empty in code for architectures without the operands'
// tensor cores; supports() keeps it from being launched there.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
conv_wmma_kernel(ConvGemmShape s, const float* __restrict__ x, const float* __restrict__ w,
                 float* __restrict__ y) {
#if defined(__CUDA_ARCH__)
    if constexpr (__CUDA_ARCH__ >= Cfg::Operands::MIN_ARCH) conv_wmma_tiles<Cfg>(s, x, w, y);
#endif
}

template <class Cfg>
static int wmma_run(const conv_problem* p, const float* x, const float* w, float* y, cudaStream_t stream) {
    const ConvGemmShape s = conv_gemm_shape(p);
    const dim3 grid((unsigned)conv_tiles(s.NPIX, Cfg::BN), conv_grid_y(conv_tiles(s.M, Cfg::BM)));
    conv_wmma_kernel<Cfg><<<grid, Cfg::THREADS, 0, conv_stream(stream)>>>(s, x, w, y);
    CONV_LAUNCH_CHECK(conv_wmma_kernel<Cfg>);
    return CONV_OK;
}

// ---- support: the GPU's compute capability, and the code this build has for it ----

// Devices whose check passed, one bit per device id (ids >= 64 are checked every time).
using DeviceMask = std::atomic<unsigned long long>;

// CONV_OK when the current GPU has the tensor cores for `min_arch` (e.g. 800) and the code this
// build runs on it for each kernel was compiled for such an architecture: a build whose newest
// code is compute_75 PTX, JIT-compiled on an sm_80 GPU, would have empty tf32 kernels.
static int wmma_check_device(const char* name, int min_arch, const void* const* kernels, int n_kernels,
                             DeviceMask& passed) {
    int device = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    const unsigned long long bit = device < 64 ? 1ull << device : 0;
    if (passed.load(std::memory_order_relaxed) & bit) return CONV_OK;
    int major = 0, minor = 0;
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major * 100 + minor * 10 < min_arch)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "%s needs compute capability %d.%d+, this GPU is %d.%d",
                              name, min_arch / 100, min_arch / 10 % 10, major, minor);
    for (int i = 0; i < n_kernels; ++i) {
        cudaFuncAttributes attr;
        CONV_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernels[i]));
        if (attr.ptxVersion * 10 < min_arch)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "%s: this libconv runs code compiled for compute_%d on this GPU "
                                  "(compute capability %d.%d), which has no tensor-core path; rebuild "
                                  "with CMAKE_CUDA_ARCHITECTURES including %d%d",
                                  name, attr.ptxVersion, major, minor, major, minor);
    }
    passed.fetch_or(bit, std::memory_order_relaxed);
    return CONV_OK;
}

// ---- wmma: fp16 operands ----

static int wmma_supports(const conv_problem*) {
    static DeviceMask passed{0};
    const void* kernels[] = {reinterpret_cast<const void*>(&conv_wmma_kernel<WmmaFp16Config>),
                             reinterpret_cast<const void*>(&conv_wmma_kernel<WmmaFp16SmallMConfig>)};
    return wmma_check_device("wmma", Fp16Operands::MIN_ARCH, kernels, 2, passed);
}

// Tunable configurations; the default picks by M: M <= 8, one 8-map fragment row covers every map;
// otherwise 16 x 16 fragments.
static const conv_config WMMA_CONFIGS[] = {
    {"m16n16k16_tile64x64", conv_f32_run<wmma_run<WmmaFp16Config>>, NULL},
    {"m8n32k16_tile8x256", conv_f32_run<wmma_run<WmmaFp16SmallMConfig>>, NULL},
};

static const char* wmma_default_config(const conv_problem* p) {
    return p->M <= 8 ? "m8n32k16_tile8x256" : "m16n16k16_tile64x64";
}

extern "C" const conv_impl conv_impl_wmma = {wmma_supports, NULL, WMMA_CONFIGS, 2, wmma_default_config};

// ---- wmma_tf32: tf32 operands ----

static int wmma_tf32_supports(const conv_problem*) {
    static DeviceMask passed{0};
    const void* kernels[] = {reinterpret_cast<const void*>(&conv_wmma_kernel<WmmaTf32Config>)};
    return wmma_check_device("wmma_tf32", Tf32Operands::MIN_ARCH, kernels, 1, passed);
}

static const conv_config WMMA_TF32_CONFIGS[] = {{"default", conv_f32_run<wmma_run<WmmaTf32Config>>, NULL}};
extern "C" const conv_impl conv_impl_wmma_tf32 = {wmma_tf32_supports, NULL, WMMA_TF32_CONFIGS, 1, NULL};
