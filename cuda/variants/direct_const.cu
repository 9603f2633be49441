// direct_const.cu — the direct convolution with the filter bank in __constant__ memory.
//   conv_direct_const_kernel<true>: the arithmetic of conv_direct_kernel (direct.cu), but the
//   weights come from the constant cache, and the threads are arranged so that it can broadcast:
//   a block works on one image and MAPS_PER_THREAD output maps (blockIdx.y), its threads on the
//   output pixels, so at every step all threads of a warp read the same weight and the constant
//   cache serves it to the whole warp at once. In `direct` each thread issues its own L1 load for
//   the weight, and a warp can straddle two maps. Each thread also computes MAPS_PER_THREAD maps,
//   so each input value it loads (and bounds-tests) is used that many times.
//   conv_direct_const_kernel<false>: the same kernel reading the weights from global memory, for
//   filter banks larger than the CONST_FILTER_FLOATS reserved (M*C*KH*KW > 12288 floats, 48 KB).
// Limitation: c_filters is one buffer per device. Calls running concurrently on one device (on
// different streams, or a call overlapping a graph that holds one) overwrite each other's filters:
// the caller must serialise direct_const calls on a device. Calls on one stream are safe, since the
// filter copy is ordered on the stream like the kernel.
#include "conv_kernel_util.cuh"

// 48 KB of the 64 KB of constant memory.
#define CONST_FILTER_FLOATS 12288

__constant__ float c_filters[CONST_FILTER_FLOATS];

template <bool FROM_CONST>
__device__ __forceinline__ float filter_at(const float* w, int i) {
    return FROM_CONST ? c_filters[i] : w[i];
}

// x is (B, C, H, W), w is (M, C, KH, KW) (read only when !FROM_CONST), y is (B, M, OH, OW).
// One thread per output pixel along x; blockIdx.y walks the (image, group of MAPS_PER_THREAD maps)
// planes.
template <bool FROM_CONST>
__global__ void __launch_bounds__(PLANE_THREADS, 2)
conv_direct_const_kernel(conv_problem p, int OH, int OW, const float* x, const float* w, float* y) {
    const int C = (int)p.C, H = (int)p.H, W = (int)p.W, M = (int)p.M, KH = (int)p.KH, KW = (int)p.KW;
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
            const float* xc = x + (b * C + c) * H * W;
            for (int kh = 0; kh < KH; ++kh) {
                const int ih = ih0 + kh * dh;
                if (ih < 0 || ih >= H) continue;
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = iw0 + kw * dw;
                    if (iw < 0 || iw >= W) continue;
                    const float v = xc[ih * W + iw];
                    const int k = (c * KH + kh) * KW + kw;
#pragma unroll
                    for (int j = 0; j < MAPS_PER_THREAD; ++j)
                        acc[j] += v * filter_at<FROM_CONST>(w, wbase[j] + k);
                }
            }
        }
        conv_plane_store(y, q, M, OHW, pix, acc);
    }
}

static int direct_const_supports(const conv_problem* p) {
    return conv_check_coords("direct_const", p, 0, 0);
}

static int direct_const_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p);
    const int64_t filters = p->M * p->C * p->KH * p->KW;
    const conv_plane_launch l = conv_plane_launch_for((int64_t)OH * OW, p->B * conv_map_groups(p->M));
    const cudaStream_t s = conv_stream(stream);
    if (filters <= CONST_FILTER_FLOATS) {
        CONV_CUDA_CHECK(cudaMemcpyToSymbolAsync(c_filters, w, (size_t)filters * sizeof(float), 0,
                                                cudaMemcpyDeviceToDevice, s));
        conv_direct_const_kernel<true><<<l.grid, l.block, 0, s>>>(*p, OH, OW, x, w, y);
        CONV_LAUNCH_CHECK(conv_direct_const_kernel<true>);
    } else {
        conv_direct_const_kernel<false><<<l.grid, l.block, 0, s>>>(*p, OH, OW, x, w, y);
        CONV_LAUNCH_CHECK(conv_direct_const_kernel<false>);
    }
    return CONV_OK;
}

static const conv_config DIRECT_CONST_CONFIGS[] = {{"default", direct_const_launch, NULL}};
extern "C" const conv_impl conv_impl_direct_const = {direct_const_supports, NULL, DIRECT_CONST_CONFIGS, 1, NULL};
