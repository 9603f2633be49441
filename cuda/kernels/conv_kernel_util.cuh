// conv_kernel_util.cuh — what the variant kernels share beyond cuda_util.cuh: the check that their
// 32-bit input coordinates cannot overflow, and the "plane" kernels' launch shape (one block row per
// (image, group of output maps), threads over that plane's output pixels) and store (with the bias +
// ReLU epilogue where the problem asks for one).
#pragma once

#include "cuda_util.cuh"
#include "tensor_io.cuh"

// Output maps one thread computes in the plane kernels: each input value it loads feeds
// MAPS_PER_THREAD accumulators instead of one.
#define MAPS_PER_THREAD 4
// Threads per block of the plane kernels (fewer when a plane has fewer pixels).
#define PLANE_THREADS 256
// gridDim.y limit; kernels loop over the planes beyond it.
#define GRID_Y_LIMIT 65535

// Kernels form input coordinates as oh*stride - pad + kh*dilation in int32, where tiled kernels let
// oh run up to slack rows (cols) past the last output row. Every partial sum lies in
// [-pad, reach - pad], reach = (OH-1+slack)*stride + (KH-1)*dilation, so reach must fit in int32.
// Only shapes with paddings or strides near 2^30 fail this.
static inline int conv_check_coords(const char* variant, const conv_problem* p, int64_t slack_h,
                                    int64_t slack_w) {
    const int64_t reach_h = (conv_out_h(p) - 1 + slack_h) * p->stride_h + (p->KH - 1) * p->dilation_h;
    const int64_t reach_w = (conv_out_w(p) - 1 + slack_w) * p->stride_w + (p->KW - 1) * p->dilation_w;
    if (reach_h > CONV_INDEX_LIMIT)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: input row coordinates reach %lld (H=%lld, pad_h=%lld, stride_h=%lld, "
                              "dilation_h=%lld), more than the 32-bit index math allows",
                              variant, (long long)reach_h, (long long)p->H, (long long)p->pad_h,
                              (long long)p->stride_h, (long long)p->dilation_h);
    if (reach_w > CONV_INDEX_LIMIT)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: input column coordinates reach %lld (W=%lld, pad_w=%lld, stride_w=%lld, "
                              "dilation_w=%lld), more than the 32-bit index math allows",
                              variant, (long long)reach_w, (long long)p->W, (long long)p->pad_w,
                              (long long)p->stride_w, (long long)p->dilation_w);
    return CONV_OK;
}

// Launch shape of a plane kernel: one thread per pixel of a plane along x (pixels < 2^31, so at
// most 2^26 blocks of 32+, and the last index blockIdx.x*blockDim.x + threadIdx.x still fits int32),
// blocks over the planes along y (capped; the kernel loops over the rest).
struct conv_plane_launch {
    dim3 grid;
    dim3 block;
};

static inline conv_plane_launch conv_plane_launch_for(int64_t pixels, int64_t planes) {
    // Whole warps, but no more than the plane needs: a 7x7 plane gets 64 threads, not 256.
    const int64_t warps = (pixels + 31) / 32;
    const int threads = (int)(warps * 32 < PLANE_THREADS ? warps * 32 : PLANE_THREADS);
    conv_plane_launch l;
    l.block = dim3(threads);
    l.grid = dim3((unsigned)((pixels + threads - 1) / threads),
                  (unsigned)(planes < GRID_Y_LIMIT ? planes : GRID_Y_LIMIT));
    return l;
}

// One plane of a plane kernel: image b and output maps m0 .. m0+MAPS_PER_THREAD-1, with the offset of
// each map's filters in w (M, C*KK). Maps past M (last group) use filter M-1, so reads stay in bounds;
// the kernels do not write them.
struct conv_plane {
    int b, m0;
    int wbase[MAPS_PER_THREAD];
};

__device__ __forceinline__ conv_plane conv_plane_at(int plane, int groups, int M, int filter_size) {
    conv_plane q;
    q.b = plane / groups;
    q.m0 = (plane - q.b * groups) * MAPS_PER_THREAD;
#pragma unroll
    for (int j = 0; j < MAPS_PER_THREAD; ++j) q.wbase[j] = min(q.m0 + j, M - 1) * filter_size;
    return q;
}

// Groups of MAPS_PER_THREAD maps: planes per image.
template <class T>
__host__ __device__ __forceinline__ T conv_map_groups(T M) {
    return (M + MAPS_PER_THREAD - 1) / MAPS_PER_THREAD;
}

// A thread of a one-pixel-per-thread plane kernel: its output pixel and the input row and column
// where its window starts. false for the spare threads of the last block, which leave (those
// kernels have no barriers).
__device__ __forceinline__ bool conv_plane_pixel(const conv_problem& p, int OW, int OHW, int& pix, int& ih0,
                                                 int& iw0) {
    pix = blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= OHW) return false;
    const int oh = pix / OW, ow = pix - oh * OW;
    ih0 = oh * (int)p.stride_h - (int)p.pad_h;
    iw0 = ow * (int)p.stride_w - (int)p.pad_w;
    return true;
}

// The plane kernels' epilogue (their variants declare f32 y, so bias is f32 too).
struct conv_plane_epilogue {
    const float* bias;  // (M,); NULL without one
    bool relu;
};

static inline conv_plane_epilogue conv_plane_epilogue_for(const conv_problem* p, const conv_tensors* t) {
    conv_plane_epilogue e;
    e.bias = p->bias ? static_cast<const float*>(t->bias) : NULL;
    e.relu = p->epilogue >= CONV_EPILOGUE_RELU;
    return e;
}

// Whether a launch needs the kernels' EPILOGUE instance; without one they store the sums as they are.
static inline bool conv_plane_epilogue_on(const conv_plane_epilogue& e) { return e.bias != NULL || e.relu; }

// Writes such a thread's pixel of each of the plane's maps below M; EPILOGUE: through the bias and
// ReLU (as conv followed by the separate ops, bit for bit).
template <bool EPILOGUE>
__device__ __forceinline__ void conv_plane_store(float* y, const conv_plane& q, int M, int OHW, int pix,
                                                 const float (&acc)[MAPS_PER_THREAD],
                                                 const conv_plane_epilogue& ep) {
#pragma unroll
    for (int j = 0; j < MAPS_PER_THREAD; ++j) {
        const int m = q.m0 + j;
        if (m >= M) continue;
        const float v = EPILOGUE ? conv_epilogue_value(acc[j], ep.bias ? ep.bias[m] : 0.0f, ep.relu) : acc[j];
        y[(q.b * M + m) * OHW + pix] = v;
    }
}

