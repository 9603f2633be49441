// depthwise_conv1d.cu — depthwise 1-D convolution (H = KH = 1, groups = C = M), the short conv of
// sequence models (Mamba, H3, Hyena: D channels, K = 2-4, causal padding, bias, SiLU).
//
// It is memory-bound: each input is read once and each output written once, K multiply-adds between
// them, so the kernels are about moving bytes. Three kernels:
//   dw1d_rows_kernel   x and y (B, D, L) rows (NCHW): rows cut into 16-byte pieces of outputs (4 fp32,
//                      8 fp16 / bf16), each computed from as many bytes of x and the K-1 values before;
//                      K = 2-4, dilation 1, K-1 zeros before (causal, or PyTorch's padding = K-1 before
//                      slicing). A warp's lanes take consecutive pieces, P each, 32 apart, numbered across
//                      rows, so short rows fill the GPU too: rows_p4 (P = 4) and rows_p1 (small problems).
//   dw1d_cols_kernel   x and y (B, L, D) (NHWC): a thread owns 8 bytes of channels (2 fp32, 4 fp16 / bf16)
//                      and computes RUN time steps of them, CHUNK at a time, the next chunk's inputs loaded
//                      before the current chunk's arithmetic; K = 2-4, dilation 1, any padding. Three
//                      configurations: cols_r16 (16 steps, chunks of 4: long 16-bit sequences), cols_r8
//                      (fp32, shorter sequences), cols_r4 (too few threads otherwise: B = 1, L = 128).
//   dw1d_simple_kernel one thread per output, any K, stride, dilation, padding and layout: the simple
//                      kernel beside the tuned ones, and the path for shapes they do not take.
// Each value is bias + sum_k w[d, k] * x[d, o*stride - pad + k*dilation] (zeros outside x), then the
// epilogue (ReLU or SiLU), in fp32; stored in y's dtype.
#include <stdint.h>

#include "cuda_util.cuh"
#include "dw1d_words.cuh"
#include "int_divider.cuh"
#include "tensor_io.cuh"

namespace {

// A rows piece is 16 bytes of x: 4 fp32 or 8 fp16 / bf16 outputs of a row (NCHW).
template <class T>
__host__ __device__ constexpr int row_elems() { return 16 / (int)sizeof(T); }
// A cols thread loads 8 bytes of channels per time step.
constexpr int kColBytes = 8;

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
    static_assert(kBytes % 4 == 0, "whole 4-byte words");
    using Word = Dw1dWord<kBytes>;
    Word u[kBytes / sizeof(Word)];
    T* e = reinterpret_cast<T*>(u);
#pragma unroll
    for (int i = 0; i < N; ++i) e[i] = conv_store_as<T>(v[i]);
#pragma unroll
    for (int i = 0; i < (int)(kBytes / sizeof(Word)); ++i) reinterpret_cast<Word*>(p)[i] = u[i];
}

// What every kernel needs, by value. Sizes fit int32 (the dispatcher's batch chunks).
struct Dw1dArgs {
    int rows;          // B * D
    int D, L, OL;      // channels, input and output length
    int K, stride, dilation, pad;  // pad: zeros before the first input
    int act;           // conv_epilogue: none, ReLU or SiLU
    bool vec_x, vec_y; // x / y rows (NCHW) or channel runs (NHWC) start on the boundaries of the kernel's words
};

template <class TY>
__device__ __forceinline__ float bias_at(const TY* bias, int d) {
    return bias ? conv_load(bias, d) : 0.0f;
}

// ---- NCHW rows, K = 2-4, dilation 1, pad = K-1 ----
// Rows are cut into 16-byte pieces of outputs, numbered row after row; a warp takes 32 * P consecutive
// pieces, lane l pieces l, l + 32, ..., so that each of its 16-byte loads and stores covers 512
// consecutive bytes. (A thread owning 32 consecutive bytes stored them as two 16-byte halves 32 bytes
// apart a lane: L2 saw every sector written twice, 21.3 M write sectors for 8.4 M of y at fp32
// D = 4096, B = 8, L = 2048, 81% of the floor. Pieces numbered within a row left lanes idle on short
// rows: 36 against 16 us at bf16 L = 128.) A piece's K-1 inputs before it are the previous lane's: L1 hits.
template <class TX, class TY, int K, int P>
__global__ void __launch_bounds__(256) dw1d_rows_kernel(Dw1dArgs a, ConvDivider by_pieces, ConvDivider by_d,
                                                        const TX* __restrict__ x, const TX* __restrict__ w,
                                                        const TY* __restrict__ bias, TY* __restrict__ y) {
    constexpr int E = row_elems<TX>();  // outputs a piece
    // 32-bit index arithmetic: supports_rows keeps the piece count below 2^31
    const unsigned total = (unsigned)a.rows * by_pieces.divisor;
    const unsigned stride = gridDim.x * blockDim.x * P;  // a multiple of 32 * P: lanes stay in step
    for (unsigned first = (blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) * P + (threadIdx.x & 31u);
         first < total; first += stride) {
#pragma unroll
        for (int p = 0; p < P; ++p) {
            const unsigned g = first + 32 * p;
            if (g >= total) break;
            uint32_t piece, d;
            const uint32_t r = by_pieces.divmod(g, &piece);
            by_d.divmod(r, &d);
            const int o0 = (int)piece * E;
            const TX* xr = x + (long long)r * a.L;
            // win[j] = x[o0 - (K-1) + j]: the K-1 values before the piece, then its E (zeros outside x)
            float win[E + K - 1];
            if (a.vec_x && o0 + E <= a.L) {
                load_vec<TX, E>(xr + o0, win + K - 1);
            } else {
#pragma unroll
                for (int j = 0; j < E; ++j) win[K - 1 + j] = o0 + j < a.L ? conv_load(xr, o0 + j) : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < K - 1; ++j) {
                const int i = o0 - (K - 1) + j;
                win[j] = i >= 0 && i < a.L ? conv_load(xr, i) : 0.0f;
            }
            const float b = bias_at(bias, (int)d);
            float out[E];
#pragma unroll
            for (int t = 0; t < E; ++t) {
                float acc = 0.0f;
#pragma unroll
                for (int k = 0; k < K; ++k) acc = fmaf(win[t + k], conv_load(w, (long long)d * K + k), acc);
                out[t] = conv_activation_value(acc, b, a.act);
            }
            TY* yr = y + (long long)r * a.OL;
            if (a.vec_y && o0 + E <= a.OL) {
                store_vec<TY, E>(yr + o0, out);
            } else {
#pragma unroll
                for (int t = 0; t < E; ++t)
                    if (o0 + t < a.OL) yr[o0 + t] = conv_store_as<TY>(out[t]);
            }
        }
    }
}

// ---- NHWC (B, L, D), D a multiple of a thread's channels, K = 2-4, dilation 1, stride 1, any padding ----
// A thread owns 8 bytes of channels and computes RUN consecutive outputs of them, CHUNK at a time. It
// holds the K-1 input steps before its chunk and the chunk's own as loaded words (widened where used:
// 16-bit inputs take no more registers than fp32) and loads the next chunk's steps before the arithmetic,
// so that its loads stay in flight while it computes. Measured on the H200 (bf16, D = 4096, B = 8,
// L = 2048, SiLU): 16-byte words and all 11 steps loaded at once 129 us (2 blocks an SM at 128
// registers); 8-byte words 102 us (r8), 92 us (r16 in chunks of 4); the floor 65 us.
template <class TX, class TY, int K, int RUN, int CHUNK>
__global__ void __launch_bounds__(256) dw1d_cols_kernel(Dw1dArgs a, const TX* __restrict__ x,
                                                        const TX* __restrict__ w, const TY* __restrict__ bias,
                                                        TY* __restrict__ y) {
    static_assert(RUN % CHUNK == 0, "whole chunks");
    constexpr int N = kColBytes / (int)sizeof(TX);
    using Raw = uint2;
    const unsigned groups = a.D / N, runs = (a.OL + RUN - 1) / RUN;
    const unsigned total = (unsigned)(a.rows / a.D) * runs * groups;  // < 2^31: the dispatcher's chunks
    for (unsigned idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        // channel group fastest: a warp's words are 256 consecutive bytes of one time step
        const int g = (int)(idx % groups);
        const unsigned rest = idx / groups;
        const int o0 = (int)(rest % runs) * RUN, batch = (int)(rest / runs), c0 = g * N;
        const TX* xb = x + (long long)batch * a.L * a.D + c0;
        TY* yb = y + (long long)batch * a.OL * a.D + c0;
        // x[o0 - pad + j] as loaded, zeros outside x (+0 in every dtype)
        auto fetch = [&](int j) {
            const int i = o0 - a.pad + j;
            Raw r{};
            if (i >= 0 && i < a.L) {
                if (a.vec_x) {
                    r = __ldg(reinterpret_cast<const Raw*>(xb + (long long)i * a.D));
                } else {
#pragma unroll
                    for (int c = 0; c < N; ++c) reinterpret_cast<TX*>(&r)[c] = xb[(long long)i * a.D + c];
                }
            }
            return r;
        };
        // win[j]: the input step of output o0 + chunk start + j - (K-1)
        Raw win[K - 1 + CHUNK], next[CHUNK];
#pragma unroll
        for (int j = 0; j < K - 1 + CHUNK; ++j) win[j] = fetch(j);
        float taps[K][N], b[N];
#pragma unroll
        for (int c = 0; c < N; ++c) {
#pragma unroll
            for (int k = 0; k < K; ++k) taps[k][c] = conv_load(w, (long long)(c0 + c) * K + k);
            b[c] = bias_at(bias, c0 + c);
        }
#pragma unroll
        for (int chunk = 0; chunk < RUN / CHUNK; ++chunk) {
            const int first = o0 + chunk * CHUNK;
            if (first >= a.OL) break;
            if (chunk + 1 < RUN / CHUNK) {
#pragma unroll
                for (int j = 0; j < CHUNK; ++j) next[j] = fetch(K - 1 + (chunk + 1) * CHUNK + j);
            }
#pragma unroll
            for (int t = 0; t < CHUNK; ++t) {
                if (first + t >= a.OL) break;
                float out[N];
#pragma unroll
                for (int c = 0; c < N; ++c) {
                    float acc = 0.0f;
#pragma unroll
                    for (int k = 0; k < K; ++k)
                        acc = fmaf(conv_load(reinterpret_cast<const TX*>(&win[t + k]), c), taps[k][c], acc);
                    out[c] = conv_activation_value(acc, b[c], a.act);
                }
                TY* yo = yb + (long long)(first + t) * a.D;
                if (a.vec_y) {
                    store_vec<TY, N>(yo, out);
                } else {
#pragma unroll
                    for (int c = 0; c < N; ++c) yo[c] = conv_store_as<TY>(out[c]);
                }
            }
#pragma unroll
            for (int j = 0; j < K - 1; ++j) win[j] = win[CHUNK + j];
#pragma unroll
            for (int j = 0; j < CHUNK; ++j) win[K - 1 + j] = next[j];
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

// The configurations: "rows_*" and "cols_*" are the fast kernels for their layouts, "simple" the one
// for everything. Each refuses what its kernel does not compute.
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

// 16-byte pieces of y's rows (the last piece of a row may be partial), and all of them.
long long row_pieces(const conv_problem* p) {
    const long long e = 16 / conv_dtype_size(p->x_dtype);
    return (conv_out_w(p) + e - 1) / e;
}
// The fast kernels are built for x and y of one dtype (a sequence model's conv keeps its dtype); the six
// mixed pairs added 386 KB to the library, and the simple kernel computes them.
int one_dtype(const conv_problem* p, const char* config) {
    if (p->x_dtype != p->y_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "depthwise_conv1d[%s] takes x and y of one dtype", config);
    return CONV_OK;
}

template <class F, class... Args>
int dispatch_one_dtype(const conv_problem* p, Args&&... args) {
    switch (p->x_dtype) {
    case CONV_F16: return F::template run<__half, __half>(args...);
    case CONV_BF16: return F::template run<__nv_bfloat16, __nv_bfloat16>(args...);
    default: return F::template run<float, float>(args...);
    }
}

int supports_rows(const conv_problem* p) {
    if (p->x_layout != CONV_NCHW || p->y_layout != CONV_NCHW || p->KW < 2 || p->KW > 4 || p->stride_w != 1 ||
        p->dilation_w != 1 || p->pad_w != p->KW - 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[rows] takes NCHW x and y, K = 2-4, stride 1, dilation 1 and K-1 zeros "
                              "before (causal)");
    if (p->B * p->C * row_pieces(p) + 32 * 4 >= (1LL << 31))  // the kernel's 32-bit piece numbers
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[rows] numbers 16-byte pieces of y in 32 bits: B*C = %lld rows of "
                              "%lld pieces are too many", (long long)(p->B * p->C), row_pieces(p));
    return one_dtype(p, "rows");
}

// The cols configurations: a thread owns 8 bytes of channels, so C must be a multiple of them.
int supports_cols(const conv_problem* p) {
    const int per_thread = kColBytes / (int)conv_dtype_size(p->x_dtype);
    if (p->x_layout != CONV_NHWC || p->y_layout != CONV_NHWC || p->KW < 2 || p->KW > 4 || p->stride_w != 1 ||
        p->dilation_w != 1 || p->C % per_thread != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[cols] takes NHWC x and y, K = 2-4, stride 1, dilation 1 and "
                              "channels a multiple of %d (8 bytes)", per_thread);
    return one_dtype(p, "cols");
}

// x_word / y_word: the bytes a kernel moves at once (16 for rows; 8 and up to 16 for cols).
Dw1dArgs args_of(const conv_problem* p, const conv_tensors* t, int x_word = 16, int y_word = 16) {
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
    // vectors: every row (NCHW) or time step (NHWC) starts on a word boundary when the base does and a
    // row's bytes are a multiple of the word (a thread's part of a row starts a multiple of words in)
    const long long x_row = (nhwc ? p->C : p->W) * (long long)conv_dtype_size(p->x_dtype);
    const long long y_row = (nhwc ? p->C : conv_out_w(p)) * (long long)conv_dtype_size(p->y_dtype);
    a.vec_x = dw1d_aligned(t->x, x_word) && x_row % x_word == 0;
    a.vec_y = dw1d_aligned(t->y, y_word) && y_row % y_word == 0;
    return a;
}

// Threads of a cols launch: B x channel groups x runs of RUN steps.
long long cols_threads(const conv_problem* p, int run) {
    const long long groups = p->C / (kColBytes / conv_dtype_size(p->x_dtype));
    return p->B * groups * ((conv_out_w(p) + run - 1) / run);
}

// A fast kernel's launch for x / y of TX / TY: Kernel<TX, TY, K>::launch, by the problem's K.
template <template <class, class, int> class Kernel>
struct FastLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const TX* x = static_cast<const TX*>(t->x);
        const TX* w = static_cast<const TX*>(t->w);
        const TY* bias = static_cast<const TY*>(t->bias);
        TY* y = static_cast<TY*>(t->y);
        switch (p->KW) {
        case 2: Kernel<TX, TY, 2>::launch(p, t, stream, x, w, bias, y); break;
        case 3: Kernel<TX, TY, 3>::launch(p, t, stream, x, w, bias, y); break;
        default: Kernel<TX, TY, 4>::launch(p, t, stream, x, w, bias, y); break;
        }
        CONV_LAUNCH_CHECK(depthwise_conv1d);
        return CONV_OK;
    }
};

template <int P>
struct Rows {
    template <class TX, class TY, int K>
    struct Kernel {
        static void launch(const conv_problem* p, const conv_tensors* t, cudaStream_t s, const TX* x, const TX* w,
                           const TY* b, TY* y) {
            const long long per_row = row_pieces(p), pieces = p->B * p->C * per_row;
            dw1d_rows_kernel<TX, TY, K, P><<<conv_grid_for((pieces + P - 1) / P, 256), 256, 0, s>>>(
                args_of(p, t), ConvDivider::of((uint32_t)per_row), ConvDivider::of((uint32_t)p->C), x, w, b, y);
        }
    };
};

template <int RUN, int CHUNK>
struct Cols {
    template <class TX, class TY, int K>
    struct Kernel {
        static void launch(const conv_problem* p, const conv_tensors* t, cudaStream_t s, const TX* x, const TX* w,
                           const TY* b, TY* y) {
            // a thread stores its channels' outputs of one step in one word of up to 16 bytes
            constexpr int y_word = (int)(kColBytes / sizeof(TX) * sizeof(TY));
            const Dw1dArgs a = args_of(p, t, kColBytes, y_word < 16 ? y_word : 16);
            dw1d_cols_kernel<TX, TY, K, RUN, CHUNK><<<conv_grid_for(cols_threads(p, RUN), 256), 256, 0, s>>>(
                a, x, w, b, y);
        }
    };
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

template <int P>
int run_rows(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dispatch_one_dtype<FastLaunch<Rows<P>::template Kernel>>(p, p, t, conv_stream(stream));
}
template <int RUN, int CHUNK>
int run_cols(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dispatch_one_dtype<FastLaunch<Cols<RUN, CHUNK>::template Kernel>>(p, p, t, conv_stream(stream));
}
int run_simple(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<SimpleLaunch>(p, p, t, conv_stream(stream));
}

// The cols configuration by how many threads it would run (H200, bf16 / fp32, SiLU; bench/PERF_NOTES.md,
// depthwise_conv1d):
// at B = 1, L = 128, D = 1536 cols_r4 runs 12K threads (3.3 us bf16) where cols_r8 runs 6K (4.2 us); in
// 16-bit, cols_r16 wins once it has 128K threads (D = 4096, B = 8, L = 2048: 92 against 102 us for r8)
// and ties below; in fp32 cols_r8 is within 4% of the best but at L = 16384 (r16 10% faster).
const char* default_cols(const conv_problem* p) {
    if (cols_threads(p, 8) < 32 * 1024) return "cols_r4";
    if (conv_dtype_size(p->x_dtype) == 2 && cols_threads(p, 16) >= 128 * 1024) return "cols_r16";
    return "cols_r8";
}

// 16-bit rows: rows_p4 (a lane takes 4 pieces) once it has 64K threads, rows_p1 below; fp32 rows: rows_p1.
// H200, SiLU: bf16 D = 12288, L = 16384: p4 245 against p1 278 us, D = 12288, L = 2048: 32 against 37 us;
// bf16 B = 1, L = 128, D = 1536: p1 2.3 against p4 3.6 us. In fp32 p1 is as fast or faster everywhere
// measured (D = 5120, B = 8, L = 128: 10.1 against 10.9 us; L = 16384: 411 against 409).
const char* default_rows(const conv_problem* p) {
    if (conv_dtype_size(p->x_dtype) == 4) return "rows_p1";
    return p->B * p->C * row_pieces(p) / 4 >= 64 * 1024 ? "rows_p4" : "rows_p1";
}

const char* default_config(const conv_problem* p) {
    if (supports_rows(p) == CONV_OK) return default_rows(p);
    if (supports_cols(p) == CONV_OK) return default_cols(p);
    conv_clear_error();
    return "simple";
}

}  // namespace

static const conv_config DW1D_CONFIGS[] = {
    {"rows_p4", run_rows<4>, supports_rows},
    {"rows_p1", run_rows<1>, supports_rows},
    {"cols_r16", run_cols<16, 4>, supports_cols},
    {"cols_r8", run_cols<8, 8>, supports_cols},
    {"cols_r4", run_cols<4, 4>, supports_cols},
    {"simple", run_simple, NULL},
};
extern "C" const conv_impl conv_impl_depthwise_conv1d = {supports_shape, NULL, DW1D_CONFIGS,
                                                         sizeof(DW1D_CONFIGS) / sizeof(DW1D_CONFIGS[0]),
                                                         default_config};
