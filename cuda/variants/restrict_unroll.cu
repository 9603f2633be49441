// restrict_unroll.cu — the direct convolution with `__restrict__` pointers and compile-time kernel sizes.
//   conv_restrict_unroll_kernel<KH, KW, EPILOGUE>: the loops of conv_direct_kernel (direct.cu), with
//   three changes. (1) `const float* __restrict__` tells the compiler x and w never alias y, so it
//   may keep loaded values in registers across the stores and route the loads through the read-only
//   (non-coherent) cache path. (2) KH and KW are template parameters for the common square sizes
//   1, 3, 5, 7: the filter loops unroll fully, so the per-tap offsets kh*KW+kw become immediates,
//   the loop counters and their branches disappear, and the tests of which taps lie on the padding
//   can be hoisted out of the channel loop. <0, 0> is the generic fallback with runtime sizes (any
//   other size, rectangular ones included). (3) As in direct_const, a block works on one image and
//   MAPS_PER_THREAD output maps and each thread computes all of them for its pixel: every input
//   load feeds MAPS_PER_THREAD FMAs, and the weight loads are warp-uniform (one broadcast).
//   EPILOGUE: bias + ReLU applied in the store; without them the store is the plain one.
#include "conv_kernel_util.cuh"

// Blocks per SM each kernel asks __launch_bounds__ for, i.e. its register budget: 40 registers for
// 1x1 and 3x3, 64 for the others, without spills. With every tap's weight loads unconditional (padded
// taps included) ptxas would otherwise hoist them and take up to 128 registers, trading warps for
// loads in flight; these budgets keep the occupancy of the version that branched around padded taps.
// Turing (sm_75) holds 1024 threads per SM, so 4 blocks of PLANE_THREADS at most there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
__host__ __device__ constexpr int restrict_unroll_min_blocks(int) { return 4; }
#else
__host__ __device__ constexpr int restrict_unroll_min_blocks(int k) { return k == 1 || k == 3 ? 6 : 4; }
#endif

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW). KH_T = KW_T = 0: sizes from p.
// One thread per output pixel along x; blockIdx.y walks the (image, group of MAPS_PER_THREAD maps)
// planes.
template <int KH_T, int KW_T, bool EPILOGUE>
__global__ void __launch_bounds__(PLANE_THREADS, restrict_unroll_min_blocks(KH_T))
conv_restrict_unroll_kernel(conv_problem p, int OH, int OW, const float* __restrict__ x,
                            const float* __restrict__ w, float* __restrict__ y, conv_plane_epilogue ep) {
    const int KH = KH_T > 0 ? KH_T : (int)p.KH, KW = KW_T > 0 ? KW_T : (int)p.KW;
    const int C = (int)p.C, H = (int)p.H, W = (int)p.W, M = (int)p.M;
    const int dh = (int)p.dilation_h, dw = (int)p.dilation_w;
    const int KK = KH * KW, OHW = OH * OW;
    const int groups = conv_map_groups(M), planes = (int)p.B * groups;
    int pix, ih0, iw0;
    if (!conv_plane_pixel(p, OW, OHW, pix, ih0, iw0)) return;
    for (int plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const conv_plane q = conv_plane_at(plane, groups, M, C * KK);
        const int b = q.b;
        const int* wbase = q.wbase;
        float acc[MAPS_PER_THREAD] = {};
        for (int c = 0; c < C; ++c) {
            // An element index (int), not a pointer: the fully unrolled loops hoist one offset per
            // tap out of the channel loop, and 32-bit offsets take half the registers of pointers.
            const int xc = (b * C + c) * H * W;
#pragma unroll
            for (int kh = 0; kh < KH; ++kh) {
                const int ih = ih0 + kh * dh;
                const bool row_in = ih >= 0 && ih < H;
#pragma unroll
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = iw0 + kw * dw;
                    // A padded tap still adds 0 * w (an Inf or NaN weight gives NaN, as in PyTorch);
                    // only threads at the border take the zero.
                    const float v = row_in && iw >= 0 && iw < W ? x[xc + ih * W + iw] : 0.0f;
                    const int k = (c * KH + kh) * KW + kw;
#pragma unroll
                    for (int j = 0; j < MAPS_PER_THREAD; ++j) acc[j] += v * w[wbase[j] + k];
                }
            }
        }
        conv_plane_store<EPILOGUE>(y, q, M, OHW, pix, acc, ep);
    }
}

static int restrict_unroll_supports(const conv_problem* p) {
    return conv_check_coords("restrict_unroll", p, 0, 0);
}

template <int KH_T, int KW_T>
static int restrict_unroll_run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p);
    const conv_plane_launch l = conv_plane_launch_for((int64_t)OH * OW, p->B * conv_map_groups(p->M));
    const conv_plane_epilogue ep = conv_plane_epilogue_for(p, t);
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    if (conv_plane_epilogue_on(ep)) {
        conv_restrict_unroll_kernel<KH_T, KW_T, true><<<l.grid, l.block, 0, stream>>>(*p, OH, OW, x, w, y, ep);
        CONV_LAUNCH_CHECK(conv_restrict_unroll_kernel);
    } else {
        conv_restrict_unroll_kernel<KH_T, KW_T, false><<<l.grid, l.block, 0, stream>>>(*p, OH, OW, x, w, y, ep);
        CONV_LAUNCH_CHECK(conv_restrict_unroll_kernel);
    }
    return CONV_OK;
}

static int restrict_unroll_launch(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    const cudaStream_t s = conv_stream(stream);
    if (p->KH == p->KW) {
        switch (p->KH) {
        case 1: return restrict_unroll_run<1, 1>(p, t, s);
        case 3: return restrict_unroll_run<3, 3>(p, t, s);
        case 5: return restrict_unroll_run<5, 5>(p, t, s);
        case 7: return restrict_unroll_run<7, 7>(p, t, s);
        default: break;
        }
    }
    return restrict_unroll_run<0, 0>(p, t, s);
}

static const conv_config RESTRICT_UNROLL_CONFIGS[] = {{"default", restrict_unroll_launch, NULL}};
extern "C" const conv_impl conv_impl_restrict_unroll = {restrict_unroll_supports, NULL, RESTRICT_UNROLL_CONFIGS, 1,
                                                         NULL};
