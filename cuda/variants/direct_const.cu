// direct_const.cu — the direct convolution with the filter bank in __constant__ memory.
//   conv_direct_const_kernel<true, EPILOGUE>: the arithmetic of conv_direct_kernel (direct.cu), but
//   the weights come from the constant cache, and the threads are arranged so that it can broadcast:
//   a block works on one image and MAPS_PER_THREAD output maps (blockIdx.y), its threads on the
//   output pixels, so at every step all threads of a warp read the same weight and the constant
//   cache serves it to the whole warp at once. In `direct` each thread issues its own L1 load for
//   the weight, and a warp can straddle two maps. Each thread also computes MAPS_PER_THREAD maps,
//   so each input value it loads (and bounds-tests) is used that many times.
//   conv_direct_const_kernel<false, EPILOGUE>: the same kernel reading the weights from global
//   memory: for filter banks larger than the CONST_FILTER_FLOATS reserved (M*C*KH*KW > 12288
//   floats, 48 KB), and inside a CUDA graph capture (below). Same operations in the same order, so
//   both give the same bits.
//   EPILOGUE: bias + ReLU applied in the store; without them the store is the plain one.
// The shared buffer. c_filters is one buffer per device, filled by a copy on the caller's stream
// before each kernel that reads it. Calls on different streams (or threads) must not let one call's
// copy land while another call's kernel still reads it, so per device a lock and an event order
// them: a call makes its stream wait for the event (the last kernel that read c_filters, whatever
// its stream), enqueues its copy and its kernel, and records the event after them. No host
// synchronisation: a call costs a lock and two stream operations more, and calls on one stream lose
// nothing (they were in order anyway); but direct_const kernels on different streams of one device
// run one after the other, never overlapped: that is the price of the constant-cache broadcast.
// A CUDA graph's replays run outside this ordering (the library does not see them), so
// while the caller's stream is capturing, the call records the global-memory kernel, which touches
// no shared state: graphs holding direct_const may replay concurrently, with each other and with
// direct calls, but they do not use the constant cache.
#include <mutex>

#include "conv_kernel_util.cuh"

// 48 KB of the 64 KB of constant memory.
#define CONST_FILTER_FLOATS 12288
// Devices whose c_filters use is ordered (the others use the global-memory kernel).
#define CONST_MAX_DEVICES 64

__constant__ float c_filters[CONST_FILTER_FLOATS];

// The ordering of one device's c_filters users. Static storage with constant initialisation; the
// event is created on first use and never destroyed, so nothing depends on teardown order at exit.
struct const_filter_users {
    std::mutex lock;                  // makes (wait, copy, kernel, record) one step among callers
    cudaEvent_t last_read = nullptr;  // recorded after the last kernel that reads c_filters
};
static const_filter_users g_const_filter_users[CONST_MAX_DEVICES];

template <bool FROM_CONST>
__device__ __forceinline__ float filter_at(const float* w, int i) {
    return FROM_CONST ? c_filters[i] : w[i];
}

// x is (B, C, H, W), w is (M, C, KH, KW) (read only when !FROM_CONST), y is (B, M, OH, OW).
// One thread per output pixel along x; blockIdx.y walks the (image, group of MAPS_PER_THREAD maps)
// planes.
template <bool FROM_CONST, bool EPILOGUE>
__global__ void __launch_bounds__(PLANE_THREADS, 2)
conv_direct_const_kernel(conv_problem p, int OH, int OW, const float* x, const float* w, float* y,
                         conv_plane_epilogue ep) {
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
                const bool row_in = ih >= 0 && ih < H;
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = iw0 + kw * dw;
                    // A padded tap still adds 0 * w (an Inf or NaN weight gives NaN, as in PyTorch);
                    // only threads at the border take the zero.
                    const float v = row_in && iw >= 0 && iw < W ? xc[ih * W + iw] : 0.0f;
                    const int k = (c * KH + kh) * KW + kw;
#pragma unroll
                    for (int j = 0; j < MAPS_PER_THREAD; ++j)
                        acc[j] += v * filter_at<FROM_CONST>(w, wbase[j] + k);
                }
            }
        }
        conv_plane_store<EPILOGUE>(y, q, M, OHW, pix, acc, ep);
    }
}

static int direct_const_supports(const conv_problem* p) {
    return conv_check_coords("direct_const", p, 0, 0);
}

// One launch of the kernel (FROM_CONST: c_filters must hold w's filters by then, on this stream).
template <bool FROM_CONST>
static int direct_const_kernel_launch(const conv_problem* p, const conv_tensors* t, cudaStream_t s) {
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p);
    const conv_plane_launch l = conv_plane_launch_for((int64_t)OH * OW, p->B * conv_map_groups(p->M));
    const conv_plane_epilogue ep = conv_plane_epilogue_for(p, t);
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    if (conv_plane_epilogue_on(ep)) {
        conv_direct_const_kernel<FROM_CONST, true><<<l.grid, l.block, 0, s>>>(*p, OH, OW, x, w, y, ep);
        CONV_LAUNCH_CHECK(conv_direct_const_kernel);
    } else {
        conv_direct_const_kernel<FROM_CONST, false><<<l.grid, l.block, 0, s>>>(*p, OH, OW, x, w, y, ep);
        CONV_LAUNCH_CHECK(conv_direct_const_kernel);
    }
    return CONV_OK;
}

// Whether this call may use c_filters: the filters fit, the stream is not being captured, and the
// device is one whose users are ordered.
static int direct_const_uses_buffer(const conv_problem* p, cudaStream_t s, int* device, bool* use) {
    *use = false;
    if (p->M * p->C * p->KH * p->KW > CONST_FILTER_FLOATS) return CONV_OK;
    cudaStreamCaptureStatus capture;
    CONV_CUDA_CHECK(cudaStreamIsCapturing(s, &capture));
    if (capture != cudaStreamCaptureStatusNone) return CONV_OK;
    CONV_CUDA_CHECK(cudaGetDevice(device));
    *use = *device >= 0 && *device < CONST_MAX_DEVICES;
    return CONV_OK;
}

// Copy and kernel, ordered after the device's previous c_filters reader and before its next one.
static int direct_const_launch_ordered(const conv_problem* p, const conv_tensors* t, cudaStream_t s,
                                       const_filter_users& users) {
    std::lock_guard<std::mutex> guard(users.lock);
    if (!users.last_read) CONV_CUDA_CHECK(cudaEventCreateWithFlags(&users.last_read, cudaEventDisableTiming));
    CONV_CUDA_CHECK(cudaStreamWaitEvent(s, users.last_read, 0));
    const size_t bytes = (size_t)(p->M * p->C * p->KH * p->KW) * sizeof(float);
    const cudaError_t copy = cudaMemcpyToSymbolAsync(c_filters, t->w, bytes, 0, cudaMemcpyDeviceToDevice, s);
    int status = copy == cudaSuccess ? direct_const_kernel_launch<true>(p, t, s)
                                     : conv_cuda_status(copy, "cudaMemcpyToSymbolAsync(c_filters)");
    // Recorded even after a failed launch: the copy may be queued, and the next call's copy must not
    // overtake it.
    const cudaError_t record = cudaEventRecord(users.last_read, s);
    if (status == CONV_OK && record != cudaSuccess) status = conv_cuda_status(record, "cudaEventRecord(last_read)");
    return status;
}

static int direct_const_launch(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    const cudaStream_t s = conv_stream(stream);
    int device = 0;
    bool use_buffer;
    int status = direct_const_uses_buffer(p, s, &device, &use_buffer);
    if (status != CONV_OK) return status;
    return use_buffer ? direct_const_launch_ordered(p, t, s, g_const_filter_users[device])
                      : direct_const_kernel_launch<false>(p, t, s);
}

static const conv_config DIRECT_CONST_CONFIGS[] = {{"default", direct_const_launch, NULL}};
extern "C" const conv_impl conv_impl_direct_const = {direct_const_supports, NULL, DIRECT_CONST_CONFIGS, 1, NULL};
