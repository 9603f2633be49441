// igemm_math_wmma.cuh — math policies of the implicit-GEMM mainloop on tensor cores, through
// nvcuda::wmma, with fp32 accumulation. IgemmWmmaMath<Op, ...>: a block of WARPS_M x WARPS_N warps,
// each multiplying FRAGS_M x FRAGS_N accumulator fragments of FM x FN with mma_sync; the tiles are
// stored row-major in the operand precision as the A (maps x k) and B (k x pixels) operands. Operand
// precisions (Op), with the oldest architecture whose tensor cores have them:
//   IgemmHalfOperand  fp16, k-step 16 (m16n16k16, m8n32k16), sm_70+: f16 inputs as they are, f32 rounded;
//   IgemmBf16Operand  bf16, k-step 16 (m16n16k16), sm_80+: bf16 inputs as they are;
//   IgemmTf32Operand  tf32 (fp32 range, 10-bit mantissa), k-step 8 (m16n16k8), sm_80+: any input.
// Relative to the SIMT policies: one warp-wide mma_sync does FM*FN*FK multiply-adds; the accumulators
// leave through a shared staging tile (IgemmStagedOutput), since a fragment's layout is opaque.
// The fragment types exist only in device code for architectures that have them (mma.h declares the
// bf16 and tf32 ones for sm_80+ only); the mainloop kernel is empty elsewhere, and the variants'
// supports() keep it from being launched there.
//
// Error: fp16 and tf32 operands carry 11 significant bits (u = 2^-11), bf16 8 (u = 2^-8); products are
// exact and summed in fp32. Inputs already in the operand type are not rounded at all, so f16 inputs
// on fp16 operands and bf16 inputs on bf16 operands give the conv of those values to fp32 summation
// accuracy (~1e-7 * sqrt(CKK/16)). Rounded f32 inputs (uniform(-1,1)): ~2.7e-4 relative L2 whatever
// CKK; bound 1e-3. fp16 also limits the range: |x|, |w| < 65504, and values below 6.1e-5 lose
// relative precision; bf16 and tf32 keep the fp32 range.
#pragma once

#include <mma.h>

#include "igemm_epilogue.cuh"
#include "igemm_tile_loaders.cuh"

// tf32 operands live in shared memory as fp32 already rounded to tf32, as mma_sync expects; the
// rounding instruction exists on sm_80+ only, where from() is defined (below).
struct IgemmTf32Operand {
    using type = float;
    template <class TX>
    static __device__ float from(TX v);
};

// FK and the A and B fragment types of one operand precision and fragment shape (device code only).
template <class Op, int FM, int FN>
struct WmmaFragments;

#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
template <int FM, int FN>
struct WmmaFragments<IgemmHalfOperand, FM, FN> {
    static constexpr int FK = 16;
    using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, FM, FN, FK, __half, nvcuda::wmma::row_major>;
    using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, FM, FN, FK, __half, nvcuda::wmma::row_major>;
};
#endif
#if __CUDA_ARCH__ >= 800
template <int FM, int FN>
struct WmmaFragments<IgemmBf16Operand, FM, FN> {
    static constexpr int FK = 16;
    using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, FM, FN, FK, __nv_bfloat16, nvcuda::wmma::row_major>;
    using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, FM, FN, FK, __nv_bfloat16, nvcuda::wmma::row_major>;
};
template <>
struct WmmaFragments<IgemmTf32Operand, 16, 16> {
    static constexpr int FK = 8;
    using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, FK, nvcuda::wmma::precision::tf32,
                                         nvcuda::wmma::row_major>;
    using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, FK, nvcuda::wmma::precision::tf32,
                                         nvcuda::wmma::row_major>;
};
template <class TX>
__device__ float IgemmTf32Operand::from(TX v) {
    return nvcuda::wmma::__float_to_tf32(igemm_widen(v));
}
#endif
#endif  // __CUDA_ARCH__

// Op: the operand precision; MIN_ARCH_: the oldest __CUDA_ARCH__ with it; INPUTS_: the x/w dtypes
// this configuration takes (CONV_DT_* mask); FM x FN: the fragment shape.
template <class Op, int MIN_ARCH_, unsigned INPUTS_, int FM, int FN, int WARPS_M, int WARPS_N, int FRAGS_M,
          int FRAGS_N>
struct IgemmWmmaMath {
    using Operand = Op;
    using T = typename Op::type;
    static constexpr unsigned INPUTS = INPUTS_;
    static constexpr int MIN_ARCH = MIN_ARCH_;
    static constexpr int BM = WARPS_M * FRAGS_M * FM, BN = WARPS_N * FRAGS_N * FN, BK = 16;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr bool A_K_MAJOR = false;
    // Rows padded by 16 bytes so that the 8 rows of a fragment load fall in different banks.
    static constexpr int SKEW = 16 / (int)sizeof(T);
    static constexpr int LDA = BK + SKEW, LDB = BN + SKEW, LDC = BN + 4;
    static constexpr int A_BYTES = BM * LDA * (int)sizeof(T), B_BYTES = BK * LDB * (int)sizeof(T);
    static constexpr int C_BYTES = BM * LDC * (int)sizeof(float);
    // The operand tiles while multiplying, then the staging tile in the same bytes.
    static constexpr int SMEM_BYTES = A_BYTES + B_BYTES > C_BYTES ? A_BYTES + B_BYTES : C_BYTES;
    static_assert((LDA * sizeof(T)) % 16 == 0 && (LDB * sizeof(T)) % 16 == 0 && LDC % 4 == 0,
                  "wmma ldm must be a multiple of 16 bytes");
    static_assert(A_BYTES % 32 == 0 && (FM * LDA * sizeof(T)) % 32 == 0 && (FN * sizeof(T)) % 32 == 0 &&
                      (FM * LDC * sizeof(float)) % 32 == 0 && (FN * sizeof(float)) % 32 == 0,
                  "every fragment pointer must be 256-bit aligned");
    using Output = IgemmStagedOutput<BM, BN, THREADS, LDC>;

    // The warp's fragments. Defined only when used, i.e. in device code where WmmaFragments exists.
    struct Mma {
        using Frags = WmmaFragments<Op, FM, FN>;
        static constexpr int FK = Frags::FK;
        static_assert(BK % FK == 0 && (FK * sizeof(T)) % 32 == 0 && (FK * LDB * sizeof(T)) % 32 == 0,
                      "whole, 256-bit aligned fragment steps per tile");
        nvcuda::wmma::fragment<nvcuda::wmma::accumulator, FM, FN, FK, float> acc[FRAGS_M][FRAGS_N];

        // The warp's first map and first pixel within the block tile.
        static __device__ int warp_m() { return (int)threadIdx.x / 32 / WARPS_N * FRAGS_M * FM; }
        static __device__ int warp_n() { return (int)threadIdx.x / 32 % WARPS_N * FRAGS_N * FN; }

        __device__ void clear() {
#pragma unroll
            for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
                for (int j = 0; j < FRAGS_N; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
        }
        // As is W (BM x BK, row-major), Bs is Xunroll (BK x BN, row-major).
        __device__ void multiply(const T* As, const T* Bs) {
            const int m = warp_m(), n = warp_n();
#pragma unroll
            for (int kk = 0; kk < BK; kk += FK) {
                typename Frags::FragA a[FRAGS_M];
                typename Frags::FragB b[FRAGS_N];
#pragma unroll
                for (int i = 0; i < FRAGS_M; ++i) nvcuda::wmma::load_matrix_sync(a[i], As + (m + i * FM) * LDA + kk, LDA);
#pragma unroll
                for (int j = 0; j < FRAGS_N; ++j) nvcuda::wmma::load_matrix_sync(b[j], Bs + kk * LDB + n + j * FN, LDB);
#pragma unroll
                for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
                    for (int j = 0; j < FRAGS_N; ++j) nvcuda::wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
            }
        }
        // Spills the accumulators into the staging tile Cs (BM x BN, row pitch ldc).
        __device__ void stage(float* Cs, int ldc) const {
            const int m = warp_m(), n = warp_n();
#pragma unroll
            for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
                for (int j = 0; j < FRAGS_N; ++j)
                    nvcuda::wmma::store_matrix_sync(Cs + (m + i * FM) * ldc + n + j * FN, acc[i][j], (unsigned)ldc,
                                                    nvcuda::wmma::mem_row_major);
        }
    };
};
