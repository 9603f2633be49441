// depthwise_conv1d.cu — depthwise 1-D convolution (H = KH = 1, groups = C = M), the short conv of
// sequence models (Mamba, H3, Hyena: D channels, K = 2-4, causal padding, bias, SiLU).
//
// It is memory-bound: each input is read once and each output written once, K multiply-adds between
// them, so the kernels are about moving bytes. Three kernels:
//   dw1d_rows_kernel   x and y (B, D, L) rows (NCHW): a thread computes 32 bytes of consecutive outputs
//                      of one row (8 fp32, 16 fp16 / bf16) from as many bytes of x and the K-1 values
//                      before, K = 2-4, dilation 1, K-1 zeros before (causal, or PyTorch's padding = K-1
//                      before slicing). Threads run over (row, chunk) pairs, so short rows fill the GPU too.
//   dw1d_cols_kernel   x and y (B, L, D) (NHWC): a thread owns 16 bytes of channels and computes 8 time
//                      steps of them from the 8 + K-1 input steps, loaded all at once; K = 2-4, dilation 1,
//                      any padding.
//   dw1d_simple_kernel one thread per output, any K, stride, dilation, padding and layout: the simple
//                      kernel beside the tuned ones, and the path for shapes they do not take.
// Each value is bias + sum_k w[d, k] * x[d, o*stride - pad + k*dilation] (zeros outside x), then the
// epilogue (ReLU or SiLU), in fp32; stored in y's dtype.
#include <stdint.h>

#include "cuda_util.cuh"
#include "tensor_io.cuh"

namespace {

// A fast-kernel thread moves 32 bytes of x per step: 8 fp32 or 16 fp16 / bf16 outputs of a row (NCHW),
// and 16 bytes of channels (4 fp32, 8 fp16 / bf16) at each of kRun time steps (NHWC).
template <class T>
__host__ __device__ constexpr int row_elems() { return 32 / (int)sizeof(T); }
template <class T>
__host__ __device__ constexpr int col_elems() { return 16 / (int)sizeof(T); }
constexpr int kRun = 8;

// ---- N-element vectors in any dtype, as floats (16-byte loads; stores as wide as N elements allow) ----
template <class T, int N>
__device__ __forceinline__ void load_vec(const T* p, float* v) {
    static_assert(N * sizeof(T) % 16 == 0, "whole 16-byte words");
    constexpr int kWords = N * sizeof(T) / 16;
    uint4 u[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) u[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
    const T* e = reinterpret_cast<const T*>(u);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = conv_load(e, i);
}

template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const float* v) {
    constexpr int kBytes = N * sizeof(T);
    if constexpr (kBytes % 16 == 0) {
        uint4 u[kBytes / 16];
        T* e = reinterpret_cast<T*>(u);
#pragma unroll
        for (int i = 0; i < N; ++i) e[i] = conv_store_as<T>(v[i]);
#pragma unroll
        for (int i = 0; i < kBytes / 16; ++i) reinterpret_cast<uint4*>(p)[i] = u[i];
    } else {  // 8 bytes: 4 fp16 / bf16 outputs of fp32 inputs
        static_assert(kBytes == 8, "8 or a multiple of 16 bytes");
        uint2 u;
        T* e = reinterpret_cast<T*>(&u);
#pragma unroll
        for (int i = 0; i < N; ++i) e[i] = conv_store_as<T>(v[i]);
        *reinterpret_cast<uint2*>(p) = u;
    }
}

// What every kernel needs, by value. Sizes fit int32 (the dispatcher's batch chunks).
struct Dw1dArgs {
    int rows;          // B * D
    int D, L, OL;      // channels, input and output length
    int K, stride, dilation, pad;  // pad: zeros before the first input
    int act;           // conv_epilogue: none, ReLU or SiLU
    bool vec_x, vec_y; // x / y rows (NCHW) or channel runs (NHWC) start on 16-byte boundaries
};

template <class TY>
__device__ __forceinline__ float bias_at(const TY* bias, int d) {
    return bias ? conv_load(bias, d) : 0.0f;
}

// ---- NCHW rows, K = 2-4, dilation 1, pad = K-1 ----
template <class TX, class TY, int K>
__global__ void __launch_bounds__(256) dw1d_rows_kernel(Dw1dArgs a, const TX* __restrict__ x,
                                                        const TX* __restrict__ w, const TY* __restrict__ bias,
                                                        TY* __restrict__ y) {
    constexpr int N = row_elems<TX>();
    // 32-bit index arithmetic: the dispatcher's batch chunks keep every count below 2^31
    const unsigned chunks = (a.OL + N - 1) / N, total = (unsigned)a.rows * chunks;
    for (unsigned idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int r = (int)(idx / chunks), o0 = (int)(idx % chunks) * N, d = r % a.D;
        const TX* xr = x + (long long)r * a.L;
        // win[j] = x[o0 - (K-1) + j]: the K-1 values before the chunk, then its N (zeros outside x)
        float win[N + K - 1];
        if (a.vec_x && o0 + N <= a.L) {
            load_vec<TX, N>(xr + o0, win + K - 1);
        } else {
#pragma unroll
            for (int j = 0; j < N; ++j) win[K - 1 + j] = o0 + j < a.L ? conv_load(xr, o0 + j) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {  // the neighbour's values: L1 hits once its vector is in
            const int i = o0 - (K - 1) + j;
            win[j] = i >= 0 && i < a.L ? conv_load(xr, i) : 0.0f;
        }
        float taps[K];
#pragma unroll
        for (int k = 0; k < K; ++k) taps[k] = conv_load(w, (long long)d * K + k);
        const float b = bias_at(bias, d);
        float out[N];
#pragma unroll
        for (int t = 0; t < N; ++t) {
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k) acc = fmaf(win[t + k], taps[k], acc);
            out[t] = conv_activation_value(acc, b, a.act);
        }
        TY* yr = y + (long long)r * a.OL;
        if (a.vec_y && o0 + N <= a.OL) {
            store_vec<TY, N>(yr + o0, out);
        } else {
#pragma unroll
            for (int t = 0; t < N; ++t)
                if (o0 + t < a.OL) yr[o0 + t] = conv_store_as<TY>(out[t]);
        }
    }
}

// ---- NHWC (B, L, D), D a multiple of a thread's channels, K = 2-4, dilation 1, stride 1, any padding ----
// A thread computes kRun consecutive outputs of its channels from kRun + K-1 input steps, all loaded
// before any arithmetic so that they are in flight together.
template <class TX, class TY, int K>
__global__ void __launch_bounds__(256) dw1d_cols_kernel(Dw1dArgs a, const TX* __restrict__ x,
                                                        const TX* __restrict__ w, const TY* __restrict__ bias,
                                                        TY* __restrict__ y) {
    constexpr int N = col_elems<TX>();  // one 16-byte word of channels
    const unsigned groups = a.D / N, runs = (a.OL + kRun - 1) / kRun;
    const unsigned total = (unsigned)(a.rows / a.D) * runs * groups;  // < 2^31: the dispatcher's chunks
    for (unsigned idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        // channel group fastest: a warp's 16-byte words are 512 consecutive bytes of one time step
        const int g = (int)(idx % groups);
        const unsigned rest = idx / groups;
        const int o0 = (int)(rest % runs) * kRun, batch = (int)(rest / runs), c0 = g * N;
        const TX* xb = x + (long long)batch * a.L * a.D + c0;
        TY* yb = y + (long long)batch * a.OL * a.D + c0;
        // raw[j] = x[o0 - pad + j] as loaded (zeros outside x): 4 registers a step whatever the dtype,
        // widened where used, so that a 16-bit thread keeps its 8 + K-1 steps in flight at 2 blocks an SM
        uint4 raw[kRun + K - 1];
#pragma unroll
        for (int j = 0; j < kRun + K - 1; ++j) {
            const int i = o0 - a.pad + j;
            raw[j] = make_uint4(0, 0, 0, 0);  // +0 in every dtype
            if (i >= 0 && i < a.L) {
                if (a.vec_x) {
                    raw[j] = __ldg(reinterpret_cast<const uint4*>(xb + (long long)i * a.D));
                } else {
#pragma unroll
                    for (int c = 0; c < N; ++c) reinterpret_cast<TX*>(&raw[j])[c] = xb[(long long)i * a.D + c];
                }
            }
        }
        float taps[K][N], b[N];
#pragma unroll
        for (int c = 0; c < N; ++c) {
#pragma unroll
            for (int k = 0; k < K; ++k) taps[k][c] = conv_load(w, (long long)(c0 + c) * K + k);
            b[c] = bias_at(bias, c0 + c);
        }
#pragma unroll
        for (int t = 0; t < kRun; ++t) {
            if (o0 + t >= a.OL) break;
            float out[N];
#pragma unroll
            for (int c = 0; c < N; ++c) {
                float acc = 0.0f;
#pragma unroll
                for (int k = 0; k < K; ++k)
                    acc = fmaf(conv_load(reinterpret_cast<const TX*>(&raw[t + k]), c), taps[k][c], acc);
                out[c] = conv_activation_value(acc, b[c], a.act);
            }
            TY* yo = yb + (long long)(o0 + t) * a.D;
            if (a.vec_y) {
                store_vec<TY, N>(yo, out);
            } else {
#pragma unroll
                for (int c = 0; c < N; ++c) yo[c] = conv_store_as<TY>(out[c]);
            }
        }
    }
}

// ---- the simple kernel: one thread per output, in y's storage order ----
template <class TX, class TY>
__global__ void dw1d_simple_kernel(Dw1dArgs a, bool x_nhwc, bool y_nhwc, const TX* __restrict__ x,
                                   const TX* __restrict__ w, const TY* __restrict__ bias, TY* __restrict__ y) {
    const long long total = (long long)a.rows * a.OL;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        int d, o, batch;
        if (y_nhwc) {
            d = (int)(idx % a.D);
            o = (int)(idx / a.D % a.OL);
            batch = (int)(idx / ((long long)a.D * a.OL));
        } else {
            o = (int)(idx % a.OL);
            const int r = (int)(idx / a.OL);
            d = r % a.D;
            batch = r / a.D;
        }
        // x[batch, d, i] at xb + i * step
        const long long step = x_nhwc ? a.D : 1;
        const TX* xb = x + (x_nhwc ? (long long)batch * a.L * a.D + d : ((long long)batch * a.D + d) * a.L);
        float acc = 0.0f;
        for (int k = 0; k < a.K; ++k) {
            const long long i = (long long)o * a.stride - a.pad + (long long)k * a.dilation;
            const float xv = i >= 0 && i < a.L ? conv_load(xb, i * step) : 0.0f;  // 0 * Inf tap: NaN, as PyTorch
            acc = fmaf(xv, conv_load(w, (long long)d * a.K + k), acc);
        }
        y[idx] = conv_store_as<TY>(conv_activation_value(acc, bias_at(bias, d), a.act));
    }
}

// The configurations: "rows" and "cols" are the fast kernels for their layouts, "simple" the one for
// everything. Each refuses what its kernel does not compute.
int supports_shape(const conv_problem* p) {
    if (p->H != 1 || p->KH != 1 || p->pad_h != 0 || p->pad_h_extra != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d computes 1-D convolutions (H = KH = 1, no padding along H), got "
                              "H=%lld KH=%lld pad_h=%lld", (long long)p->H, (long long)p->KH, (long long)p->pad_h);
    if (p->groups != p->C || p->M != p->C)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d takes depthwise layers (groups = C = M), got C=%lld M=%lld groups=%lld",
                              (long long)p->C, (long long)p->M, (long long)p->groups);
    return CONV_OK;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int supports_rows(const conv_problem* p) {
    if (p->x_layout != CONV_NCHW || p->y_layout != CONV_NCHW || p->KW < 2 || p->KW > 4 || p->stride_w != 1 ||
        p->dilation_w != 1 || p->pad_w != p->KW - 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[rows] takes NCHW x and y, K = 2-4, stride 1, dilation 1 and K-1 zeros "
                              "before (causal)");
    return CONV_OK;
}

int supports_cols(const conv_problem* p) {
    const int per_thread = 16 / (int)conv_dtype_size(p->x_dtype);
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC || p->KW < 2 || p->KW > 4 || p->stride_w != 1 ||
        p->dilation_w != 1 || p->C % per_thread != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[cols] takes NHWC x and y, K = 2-4, stride 1, dilation 1 and "
                              "channels a multiple of %d (16 bytes)", per_thread);
    return CONV_OK;
}

Dw1dArgs args_of(const conv_problem* p, const conv_tensors* t) {
    Dw1dArgs a;
    a.rows = (int)(p->B * p->C);
    a.D = (int)p->C;
    a.L = (int)p->W;
    a.OL = (int)conv_out_w(p);
    a.K = (int)p->KW;
    a.stride = (int)p->stride_w;
    a.dilation = (int)p->dilation_w;
    a.pad = (int)p->pad_w;
    a.act = p->epilogue;
    const bool nhwc = p->x_layout == CONV_NHWC;
    // 16-byte vectors: every row (NCHW) or time step (NHWC) starts on a boundary when the base does and
    // a row's bytes are a multiple of 16 (a thread's chunk of a row starts a multiple of 32 bytes in)
    const long long x_row = (nhwc ? p->C : p->W) * (long long)conv_dtype_size(p->x_dtype);
    const long long y_row = (nhwc ? p->C : conv_out_w(p)) * (long long)conv_dtype_size(p->y_dtype);
    a.vec_x = aligned16(t->x) && x_row % 16 == 0;
    a.vec_y = aligned16(t->y) && y_row % 16 == 0;
    return a;
}

template <template <class, class, int> class Kernel>
struct FastLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const Dw1dArgs a = args_of(p, t);
        const TX* x = static_cast<const TX*>(t->x);
        const TX* w = static_cast<const TX*>(t->w);
        const TY* bias = static_cast<const TY*>(t->bias);
        TY* y = static_cast<TY*>(t->y);
        const long long work = p->x_layout == CONV_NHWC
                                   ? (p->B * (p->C / col_elems<TX>())) * ((a.OL + kRun - 1) / kRun)
                                   : (long long)a.rows * ((a.OL + row_elems<TX>() - 1) / row_elems<TX>());
        const unsigned blocks = conv_grid_for(work, 256);
        switch (a.K) {
        case 2: Kernel<TX, TY, 2>::launch(blocks, stream, a, x, w, bias, y); break;
        case 3: Kernel<TX, TY, 3>::launch(blocks, stream, a, x, w, bias, y); break;
        default: Kernel<TX, TY, 4>::launch(blocks, stream, a, x, w, bias, y); break;
        }
        CONV_LAUNCH_CHECK(depthwise_conv1d);
        return CONV_OK;
    }
};

template <class TX, class TY, int K>
struct RowsKernel {
    static void launch(unsigned blocks, cudaStream_t s, const Dw1dArgs& a, const TX* x, const TX* w, const TY* b,
                       TY* y) {
        dw1d_rows_kernel<TX, TY, K><<<blocks, 256, 0, s>>>(a, x, w, b, y);
    }
};

template <class TX, class TY, int K>
struct ColsKernel {
    static void launch(unsigned blocks, cudaStream_t s, const Dw1dArgs& a, const TX* x, const TX* w, const TY* b,
                       TY* y) {
        dw1d_cols_kernel<TX, TY, K><<<blocks, 256, 0, s>>>(a, x, w, b, y);
    }
};

struct SimpleLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const Dw1dArgs a = args_of(p, t);
        const unsigned blocks = conv_grid_for((long long)a.rows * a.OL, 256);
        dw1d_simple_kernel<TX, TY><<<blocks, 256, 0, stream>>>(
            a, p->x_layout == CONV_NHWC, p->y_layout == CONV_NHWC, static_cast<const TX*>(t->x),
            static_cast<const TX*>(t->w), static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
        CONV_LAUNCH_CHECK(dw1d_simple_kernel);
        return CONV_OK;
    }
};

int run_rows(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<FastLaunch<RowsKernel>>(p, p, t, conv_stream(stream));
}
int run_cols(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<FastLaunch<ColsKernel>>(p, p, t, conv_stream(stream));
}
int run_simple(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<SimpleLaunch>(p, p, t, conv_stream(stream));
}

const char* default_config(const conv_problem* p) {
    if (supports_rows(p) == CONV_OK) return "rows";
    if (supports_cols(p) == CONV_OK) return "cols";
    conv_clear_error();
    return "simple";
}

}  // namespace

static const conv_config DW1D_CONFIGS[] = {
    {"rows", run_rows, supports_rows},
    {"cols", run_cols, supports_cols},
    {"simple", run_simple, NULL},
};
extern "C" const conv_impl conv_impl_depthwise_conv1d = {supports_shape, NULL, DW1D_CONFIGS, 3, default_config};
