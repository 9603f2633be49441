// depthwise_conv1d.cu — depthwise 1-D convolution (H = KH = 1, groups = C = M), the short conv of
// sequence models (Mamba, H3, Hyena: D channels, K = 2-4, causal padding, bias, SiLU).
//
// It is memory-bound: each input is read once and each output written once, K multiply-adds between
// them, so the kernels are about moving bytes. Three kernels:
//   dw1d_rows_kernel   x and y (B, D, L) rows (NCHW): a thread computes 8 consecutive outputs of one row
//                      from one 16-byte vector of x (two in fp32) and the K-1 values before it, K = 2-4,
//                      dilation 1, K-1 zeros before (causal, or PyTorch's padding = K-1 before slicing).
//                      Threads run over (row, 8-output chunk) pairs, so short rows fill the GPU too.
//   dw1d_cols_kernel   x and y (B, L, D) (NHWC): a thread owns 8 channels (a 16-byte vector) and slides
//                      down a run of L, keeping the last K-1 inputs in registers; K = 2-4, dilation 1,
//                      any padding.
//   dw1d_simple_kernel one thread per output, any K, stride, dilation, padding and layout: the simple
//                      kernel beside the tuned ones, and the path for shapes they do not take.
// Each value is bias + sum_k w[d, k] * x[d, o*stride - pad + k*dilation] (zeros outside x), then the
// epilogue (ReLU or SiLU), in fp32; stored in y's dtype.
#include <stdint.h>

#include "cuda_util.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int kVec = 8;  // outputs (NCHW) or channels (NHWC) a fast-kernel thread handles: 16 bytes of fp16

// ---- 8-element vectors in any dtype, as floats ----
template <class T>
__device__ __forceinline__ void load8(const T* p, float* v) {
    if constexpr (sizeof(T) == 4) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
        const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[i] = conv_load(e, i);
    }
}

template <class T>
__device__ __forceinline__ void store8(T* p, const float* v) {
    if constexpr (sizeof(T) == 4) {
        reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
        uint4 u;
        T* e = reinterpret_cast<T*>(&u);
#pragma unroll
        for (int i = 0; i < kVec; ++i) e[i] = conv_store_as<T>(v[i]);
        *reinterpret_cast<uint4*>(p) = u;
    }
}

// What every kernel needs, by value. Sizes fit int32 (the dispatcher's batch chunks).
struct Dw1dArgs {
    int rows;          // B * D
    int D, L, OL;      // channels, input and output length
    int K, stride, dilation, pad;  // pad: zeros before the first input
    int act;           // conv_epilogue: none, ReLU or SiLU
    bool vec_x, vec_y; // x / y rows (NCHW) or channel runs (NHWC) start on 16-byte boundaries
    int run;           // NHWC fast kernel: outputs a thread slides over
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
    const int chunks = (a.OL + kVec - 1) / kVec;
    const long long total = (long long)a.rows * chunks;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int r = (int)(idx / chunks), o0 = (int)(idx % chunks) * kVec, d = r % a.D;
        const TX* xr = x + (long long)r * a.L;
        // win[j] = x[o0 - (K-1) + j]: the K-1 values before the chunk, then its 8 (zeros outside x)
        float win[kVec + K - 1];
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {
            const int i = o0 - (K - 1) + j;
            win[j] = i >= 0 && i < a.L ? conv_load(xr, i) : 0.0f;
        }
        if (a.vec_x && o0 + kVec <= a.L) {
            load8(xr + o0, win + K - 1);
        } else {
#pragma unroll
            for (int j = 0; j < kVec; ++j) win[K - 1 + j] = o0 + j < a.L ? conv_load(xr, o0 + j) : 0.0f;
        }
        float taps[K];
#pragma unroll
        for (int k = 0; k < K; ++k) taps[k] = conv_load(w, (long long)d * K + k);
        const float b = bias_at(bias, d);
        float out[kVec];
#pragma unroll
        for (int t = 0; t < kVec; ++t) {
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k) acc = fmaf(win[t + k], taps[k], acc);
            out[t] = conv_activation_value(acc, b, a.act);
        }
        TY* yr = y + (long long)r * a.OL;
        if (a.vec_y && o0 + kVec <= a.OL) {
            store8(yr + o0, out);
        } else {
#pragma unroll
            for (int t = 0; t < kVec; ++t)
                if (o0 + t < a.OL) yr[o0 + t] = conv_store_as<TY>(out[t]);
        }
    }
}

// ---- NHWC (B, L, D), D % 8 == 0, K = 2-4, dilation 1, stride 1, any padding ----
template <class TX, class TY, int K>
__global__ void __launch_bounds__(256) dw1d_cols_kernel(Dw1dArgs a, const TX* __restrict__ x,
                                                        const TX* __restrict__ w, const TY* __restrict__ bias,
                                                        TY* __restrict__ y) {
    const int groups = a.D / kVec, runs = (a.OL + a.run - 1) / a.run;
    const long long total = (long long)(a.rows / a.D) * runs * groups;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        // channel group fastest: a warp's 16-byte vectors are 512 consecutive bytes of one time step
        const int g = (int)(idx % groups);
        const long long rest = idx / groups;
        const int o0 = (int)(rest % runs) * a.run, batch = (int)(rest / runs), c0 = g * kVec;
        const TX* xb = x + (long long)batch * a.L * a.D + c0;
        TY* yb = y + (long long)batch * a.OL * a.D + c0;
        float taps[K][kVec], b[kVec];
#pragma unroll
        for (int c = 0; c < kVec; ++c) {
#pragma unroll
            for (int k = 0; k < K; ++k) taps[k][c] = conv_load(w, (long long)(c0 + c) * K + k);
            b[c] = bias_at(bias, c0 + c);
        }
        // win[k] holds x[o - pad + k] for the next output o; the first K-1 are loaded before the loop
        float win[K][kVec];
        auto load_step = [&](int i, float* v) {
            if (i >= 0 && i < a.L) {
                if (a.vec_x) {
                    load8(xb + (long long)i * a.D, v);
                } else {
#pragma unroll
                    for (int c = 0; c < kVec; ++c) v[c] = conv_load(xb, (long long)i * a.D + c);
                }
            } else {
#pragma unroll
                for (int c = 0; c < kVec; ++c) v[c] = 0.0f;
            }
        };
#pragma unroll
        for (int k = 0; k < K - 1; ++k) load_step(o0 - a.pad + k, win[k]);
        const int end = min(o0 + a.run, a.OL);
        for (int o = o0; o < end; ++o) {
            load_step(o - a.pad + K - 1, win[K - 1]);
            float out[kVec];
#pragma unroll
            for (int c = 0; c < kVec; ++c) {
                float acc = 0.0f;
#pragma unroll
                for (int k = 0; k < K; ++k) acc = fmaf(win[k][c], taps[k][c], acc);
                out[c] = conv_activation_value(acc, b[c], a.act);
            }
            TY* yo = yb + (long long)o * a.D;
            if (a.vec_y) {
                store8(yo, out);
            } else {
#pragma unroll
                for (int c = 0; c < kVec; ++c) yo[c] = conv_store_as<TY>(out[c]);
            }
#pragma unroll
            for (int k = 0; k < K - 1; ++k)
#pragma unroll
                for (int c = 0; c < kVec; ++c) win[k][c] = win[k + 1][c];
        }
    }
}

// ---- the simple kernel: one thread per output, in y's storage order ----
template <class TX, class TY>
__global__ void dw1d_simple_kernel(Dw1dArgs a, bool nhwc, const TX* __restrict__ x, const TX* __restrict__ w,
                                   const TY* __restrict__ bias, TY* __restrict__ y) {
    const long long total = (long long)a.rows * a.OL;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        int d, o, batch;
        if (nhwc) {
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
        const long long step = nhwc ? a.D : 1;
        const TX* xb = x + (nhwc ? (long long)batch * a.L * a.D + d : ((long long)batch * a.D + d) * a.L);
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
    if (p->x_layout != p->y_layout)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "depthwise_conv1d writes y in x's layout");
    return CONV_OK;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int supports_rows(const conv_problem* p) {
    if (p->x_layout != CONV_NCHW || p->KW < 2 || p->KW > 4 || p->stride_w != 1 || p->dilation_w != 1 ||
        p->pad_w != p->KW - 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[rows] takes NCHW, K = 2-4, stride 1, dilation 1 and K-1 zeros "
                              "before (causal)");
    return CONV_OK;
}

int supports_cols(const conv_problem* p) {
    if (p->x_layout != CONV_NHWC || p->KW < 2 || p->KW > 4 || p->stride_w != 1 || p->dilation_w != 1 ||
        p->C % kVec != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[cols] takes NHWC, K = 2-4, stride 1, dilation 1 and channels a "
                              "multiple of 8");
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
    // the row's bytes are a multiple of 16
    const long long x_row = (nhwc ? p->C : p->W) * (long long)conv_dtype_size(p->x_dtype);
    const long long y_row = (nhwc ? p->C : conv_out_w(p)) * (long long)conv_dtype_size(p->y_dtype);
    a.vec_x = aligned16(t->x) && x_row % 16 == 0;
    a.vec_y = aligned16(t->y) && y_row % 16 == 0;
    if (!nhwc) {  // NCHW: a vector is 8 elements of one row: rows of 8 elements' multiples
        a.vec_x = a.vec_x && p->W % kVec == 0;
        a.vec_y = a.vec_y && conv_out_w(p) % kVec == 0;
    }
    // NHWC: outputs a thread slides over: long runs share the K-1 halo loads, short ones fill the GPU
    const long long vectors = p->B * (p->C / kVec) * conv_out_w(p);
    a.run = vectors >= (64LL << 16) ? 16 : vectors >= (16LL << 16) ? 8 : vectors >= (4LL << 16) ? 4 : 1;
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
                                   ? (p->B * (p->C / kVec)) * ((a.OL + a.run - 1) / a.run)
                                   : (long long)a.rows * ((a.OL + kVec - 1) / kVec);
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
            a, p->x_layout == CONV_NHWC, static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
            static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
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
