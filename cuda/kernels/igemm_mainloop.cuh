// igemm_mainloop.cuh — the one implicit-GEMM kernel: conv_igemm_kernel<Math, TX, X_NHWC, KKC>.
// Each block owns BN output pixels and loops over the M tiles of BM maps (more than one when the grid
// has fewer than M/BM rows); for each, the reduction runs in shared-memory tiles of BK:
//   store the staged W and Xunroll tiles (operand type) -> barrier -> fetch the next tiles into
//   registers (their latency overlaps the math) -> Math multiplies -> barrier;
// then the epilogue stores the block tile. One shared buffer, two barriers per tile, the (c, kh, kw)
// decomposition of k carried incrementally (no division per element).
//
// A math policy Math provides:
//   Operand                 operand type of the shared tiles (igemm_tile_loaders.cuh / _wmma.cuh)
//   INPUTS                  x/w dtypes it takes (CONV_DT_* mask); MIN_ARCH: oldest __CUDA_ARCH__ it runs on
//   BM, BN, BK, THREADS     block tile (maps x pixels), reduction step, threads per block
//   A_K_MAJOR, LDA, LDB     the W tile k-major (W^T) or m-major in shared memory; row pitches of W and Xunroll
//   A_BYTES, SMEM_BYTES     where the Xunroll tile starts; shared bytes in all (staging tile included)
//   Mma                     a thread's accumulators: clear(), multiply(As, Bs) for one BK step
//   Output                  the epilogue's traversal of the block tile (igemm_epilogue.cuh)
// The template arguments of the kernel beside it: TX, the element type of x and w (f32, f16, bf16);
// X_NHWC, x's layout; KKC, k's digit order (true for MKKC filters). y's dtype and layout, the bias and
// ReLU are run-time values of the epilogue.
#pragma once

#include "grid_dependency.cuh"
#include "igemm_epilogue.cuh"
#include "igemm_tile_loaders.cuh"

template <class Math, class TX, bool X_NHWC, bool KKC>
__device__ void igemm_block(const ConvGemmShape& s, const TX* __restrict__ x, const TX* __restrict__ w,
                            const IgemmEpilogue& epi) {
    using Operand = typename Math::Operand;
    using T = typename Operand::type;
    __shared__ __align__(128) unsigned char smem[Math::SMEM_BYTES];
    T* As = reinterpret_cast<T*>(smem);
    T* Bs = reinterpret_cast<T*>(smem + Math::A_BYTES);

    const int tid = threadIdx.x;
    const int n0 = blockIdx.x * Math::BN;
    XunrollTileLoader<TX, X_NHWC, KKC, Math::BK, Math::BN, Math::THREADS> xl;
    WeightTileLoader<TX, Math::BM, Math::BK, Math::THREADS> wl;
    xl.init(s, n0, tid);
    wl.init(tid);
    typename Math::Output out;
    out.init(s, epi, n0);

    const int k_tiles = conv_tiles(s.CKK, Math::BK), m_tiles = conv_tiles(s.M, Math::BM);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        const int m0 = tm * Math::BM;
        typename Math::Mma mma;
        mma.clear();
        xl.restart(s, 0);
        wl.fetch(w, s, m0, 0);
        xl.fetch(x, s);
        for (int t = 0; t < k_tiles; ++t) {
            wl.template store<Operand, Math::A_K_MAJOR, Math::LDA>(As);
            xl.template store<Operand, Math::LDB>(Bs);
            __syncthreads();
            if (t + 1 < k_tiles) {
                wl.fetch(w, s, m0, (t + 1) * Math::BK);
                xl.fetch(x, s);
            }
            mma.multiply(As, Bs);
            __syncthreads();
        }
        grid_launch_dependents();  // the operands are read: the next kernel may launch during the stores
        igemm_store(out, epi, s, m0, mma, smem);
    }
}

// x is (B, C, H, W) or (B, H, W, C), w is (M, CKK) in k's order, y as the epilogue says.
// Grid: (pixel tiles, M tiles <= 65535). Empty in code for architectures older than Math::MIN_ARCH.
template <class Math, class TX, bool X_NHWC, bool KKC>
__global__ void __launch_bounds__(Math::THREADS)
conv_igemm_kernel(ConvGemmShape s, const TX* __restrict__ x, const TX* __restrict__ w, IgemmEpilogue epi) {
#if defined(__CUDA_ARCH__)
    if constexpr (__CUDA_ARCH__ >= Math::MIN_ARCH) {
        grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
        igemm_block<Math, TX, X_NHWC, KKC>(s, x, w, epi);
    }
#endif
}

template <class Math, class TX, bool X_NHWC, bool KKC>
static int igemm_launch(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    const ConvGemmShape s = conv_gemm_shape(p);
    const dim3 grid((unsigned)conv_tiles(s.NPIX, Math::BN), conv_grid_y(conv_tiles(s.M, Math::BM)));
    CONV_LAUNCH_DEPENDENT("conv_igemm_kernel", conv_igemm_kernel<Math, TX, X_NHWC, KKC>, grid, Math::THREADS, 0,
                          stream, s, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w), IgemmEpilogue::of(p, t));
    return CONV_OK;
}

// The problem's layouts as template arguments.
template <class Math, class TX>
static int igemm_run_layouts(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    const bool kkc = p->w_layout == CONV_MKKC;
    if (p->x_layout == CONV_NHWC)
        return kkc ? igemm_launch<Math, TX, true, true>(p, t, stream) : igemm_launch<Math, TX, true, false>(p, t, stream);
    return kkc ? igemm_launch<Math, TX, false, true>(p, t, stream) : igemm_launch<Math, TX, false, false>(p, t, stream);
}

// A conv_run_fn for a launch configuration computing with Math.
template <class Math>
static int igemm_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return igemm_with_input_type<Math>(p, [&](auto tx) {
        return igemm_run_layouts<Math, decltype(tx)>(p, t, conv_stream(stream));
    });
}
