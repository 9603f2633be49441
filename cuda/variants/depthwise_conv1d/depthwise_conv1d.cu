// depthwise_conv1d.cu — depthwise 1-D convolution (H = KH = 1, groups = C = M), the short conv of
// sequence models (Mamba, H3, Hyena: D channels, K = 2-4, causal padding, bias, SiLU).
//
// It is memory-bound: each input is read once and each output written once, K multiply-adds between
// them, so the kernels are about moving bytes. Three kernels:
//   dw1d_rows_kernel   x and y (B, D, L) rows (NCHW): rows cut into 16-byte pieces of outputs (4 fp32,
//                      8 fp16 / bf16), each computed from as many bytes of x and the K-1 values before;
//                      K = 2-4, dilation 1, K-1 zeros before (causal, or PyTorch's padding = K-1 before
//                      slicing). A warp's lanes take consecutive pieces, P each, 32 apart, numbered across
//                      rows, so short rows fill the GPU too: rows_p4 (P = 4; long fp32 rows) and rows_p1
//                      (16-bit rows, small problems).
//   dw1d_cols_kernel   x and y (B, L, D) (NHWC): a thread owns 8 bytes of channels (2 fp32, 4 fp16 / bf16)
//                      and computes RUN time steps of them, CHUNK at a time, the next chunk's inputs loaded
//                      before the current chunk's arithmetic; K = 2-4, dilation 1, any padding, x and y
//                      on 8-byte boundaries. Three configurations: cols_r16 (16 steps, chunks of 4: long
//                      16-bit sequences), cols_r8 (fp32, shorter sequences), cols_r4 (too few threads
//                      otherwise: B = 1, L = 128).
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

// ---- N elements of any dtype stored from floats, in words as wide as N elements allow ----
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
    bool vec_x, vec_y; // x / y rows (NCHW) start on 16-byte boundaries (the rows kernel's pieces)
};

template <class TY>
__device__ __forceinline__ float bias_at(const TY* bias, int d) {
    return bias ? conv_load(bias, d) : 0.0f;
}

// ---- NCHW rows, K = 2-4, dilation 1, pad = K-1 ----
// Piece `o0` of row xr (its E elements from o0) as 32-bit words: one 16-byte load where the row is aligned
// and the piece whole, element by element otherwise (zeros past L).
template <class TX>
__device__ __forceinline__ uint4 load_piece(const TX* xr, int o0, int L, bool vec) {
    constexpr int E = row_elems<TX>();
    if (vec && o0 + E <= L) return __ldg(reinterpret_cast<const uint4*>(xr + o0));
    uint4 u;
    TX* e = reinterpret_cast<TX*>(&u);
#pragma unroll
    for (int j = 0; j < E; ++j) e[j] = o0 + j < L ? conv_ldg(xr + o0 + j) : conv_store_as<TX>(0.0f);
    return u;
}

__device__ __forceinline__ uint32_t word_of(const uint4& u, int i) { return reinterpret_cast<const uint32_t*>(&u)[i]; }

// Rows are cut into 16-byte pieces of outputs, numbered row after row; a warp takes 32 * P consecutive
// pieces, lane l pieces l, l + 32, ..., so that each of its 16-byte loads and stores covers 512
// consecutive bytes. (A thread owning 32 consecutive bytes stored them as two 16-byte halves 32 bytes
// apart a lane: L2 saw every sector written twice, 21.3 M write sectors for 8.4 M of y at fp32
// D = 4096, B = 8, L = 2048, 81% of the floor. Pieces numbered within a row left lanes idle on short
// rows: 36 against 16 us at bf16 L = 128.)
// A thread loads its P pieces (and their rows' taps and bias) first, then computes them: their bytes are
// in flight together, and no load waits on another. A piece's K-1 inputs before it end the previous
// piece, which the previous lane holds (lane 0: lane 31's previous piece; its first piece's comes from
// memory), so they come by shuffle, not by load. Sums start at the bias. (bf16 rows_p4 at D = 4096,
// B = 8, L = 2048 ran 25 instructions an output with a load per piece at a time and the K-1 inputs
// loaded: 83 us, 62% of the HBM bandwidth, issue slots 61% busy; rows_p1 now 72 us.)
template <class T, int K, int P>
__global__ void __launch_bounds__(256) dw1d_rows_kernel(Dw1dArgs a, ConvDivider by_pieces, ConvDivider by_d,
                                                        const T* __restrict__ x, const T* __restrict__ w,
                                                        const T* __restrict__ bias, T* __restrict__ y) {
    constexpr int E = row_elems<T>();      // outputs a piece
    constexpr int kPer = 4 / (int)sizeof(T);  // elements a 32-bit word
    constexpr int kTail = (K - 1 + kPer - 1) / kPer;  // a piece's last words, which hold the next's K-1 inputs
    // 32-bit index arithmetic: supports_rows keeps the piece count below 2^31
    const unsigned total = (unsigned)a.rows * by_pieces.divisor;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned stride = gridDim.x * blockDim.x * P;  // a multiple of 32 * P: lanes stay in step
    // the loop is the warp's, so that every lane takes part in the shuffles
    for (unsigned warp_first = (blockIdx.x * blockDim.x + (threadIdx.x & ~31u)) * P; warp_first < total;
         warp_first += stride) {
        uint4 raw[P];
        uint32_t row[P], piece[P];
        float taps[P][K], b[P];
#pragma unroll
        for (int p = 0; p < P; ++p) {
            const unsigned g = warp_first + lane + 32 * p;
            raw[p] = make_uint4(0, 0, 0, 0);
            row[p] = piece[p] = 0;
            if (g < total) {
                row[p] = by_pieces.divmod(g, &piece[p]);
                raw[p] = load_piece<T>(x + (long long)row[p] * a.L, (int)piece[p] * E, a.L, a.vec_x);
                uint32_t d;
                by_d.divmod(row[p], &d);
#pragma unroll
                for (int k = 0; k < K; ++k) taps[p][k] = conv_load(w, (long long)d * K + k);
                b[p] = bias_at(bias, (int)d);
            }
        }
        uint4 before = make_uint4(0, 0, 0, 0);  // lane 0: the piece before its first
        if (lane == 0 && warp_first < total && piece[0] > 0)
            before = load_piece<T>(x + (long long)row[0] * a.L, ((int)piece[0] - 1) * E, a.L, a.vec_x);
#pragma unroll
        for (int p = 0; p < P; ++p) {
            uint32_t tail[kTail];
#pragma unroll
            for (int j = 0; j < kTail; ++j) {
                const int i = 4 - kTail + j;
                const uint32_t up = __shfl_up_sync(0xffffffffu, word_of(raw[p], i), 1);
                const uint32_t wrap =
                    p > 0 ? __shfl_sync(0xffffffffu, word_of(raw[p > 0 ? p - 1 : 0], i), 31) : word_of(before, i);
                tail[j] = lane > 0 ? up : wrap;
            }
            if (warp_first + lane + 32 * p >= total) continue;
            // win[j] = x[o0 - (K-1) + j]: the K-1 values before the piece (zeros before the row), then its E
            float before_v[kTail * kPer], win[K - 1 + E];
            dw1d_widen_words<T, kTail>(tail, before_v);
#pragma unroll
            for (int j = 0; j < K - 1; ++j) win[j] = piece[p] > 0 ? before_v[kTail * kPer - (K - 1) + j] : 0.0f;
            dw1d_widen_words<T, 4>(reinterpret_cast<const uint32_t*>(&raw[p]), win + K - 1);
            float out[E];
#pragma unroll
            for (int t = 0; t < E; ++t) {
                float acc = b[p];
#pragma unroll
                for (int k = 0; k < K; ++k) acc = fmaf(win[t + k], taps[p][k], acc);
                out[t] = conv_activate(acc, a.act);
            }
            const int o0 = (int)piece[p] * E;
            T* yr = y + (long long)row[p] * a.OL;
            if (a.vec_y && o0 + E <= a.OL) {
                store_vec<T, E>(yr + o0, out);
            } else {
#pragma unroll
                for (int t = 0; t < E; ++t)
                    if (o0 + t < a.OL) yr[o0 + t] = conv_store_as<T>(out[t]);
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
// x and y are 8-byte aligned (run_cols sends other operands to the simple kernel); steps outside x or
// past y are predicated loads and stores, not branches; a step's address is the thread's first one plus a
// 32-bit offset; the index splits with ConvDivider. (With a fallback for misaligned words, a branch and a
// 64-bit multiply a step and two integer divisions, the kernel ran 25 instructions an output: bf16 r16 at
// the shape above 86 us; now 75.) by_groups divides by D / N (a step's words), by_runs by a row's runs.
template <class T, int K, int RUN, int CHUNK>
__global__ void __launch_bounds__(256) dw1d_cols_kernel(Dw1dArgs a, ConvDivider by_groups, ConvDivider by_runs,
                                                        const T* __restrict__ x, const T* __restrict__ w,
                                                        const T* __restrict__ bias, T* __restrict__ y) {
    static_assert(RUN % CHUNK == 0, "whole chunks");
    constexpr int N = kColBytes / (int)sizeof(T);
    using Word = uint2;
    const int groups = (int)by_groups.divisor;  // a step's words
    const unsigned total = (unsigned)(a.rows / a.D) * by_runs.divisor * groups;  // < 2^31: the dispatcher's chunks
    for (unsigned idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        // channel group fastest: a warp's words are 256 consecutive bytes of one time step
        uint32_t g, run;
        const uint32_t batch = by_runs.divmod(by_groups.divmod(idx, &g), &run);
        const int o0 = (int)run * RUN, c0 = (int)g * N;
        // the thread's words of x step o0 - pad and of y step o0; a step further is `groups` words on
        const Word* xw = reinterpret_cast<const Word*>(x + ((long long)batch * a.L + o0 - a.pad) * a.D + c0);
        Word* yw = reinterpret_cast<Word*>(y + ((long long)batch * a.OL + o0) * a.D + c0);
        // x[o0 - pad + j], zeros outside x (+0 in every dtype)
        auto fetch = [&](int j) {
            Word r = make_uint2(0, 0);
            if ((unsigned)(o0 - a.pad + j) < (unsigned)a.L) r = __ldg(xw + j * groups);
            return r;
        };
        // win[j]: the input step of output o0 + chunk start + j - (K-1)
        Word win[K - 1 + CHUNK], next[CHUNK];
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
                float in[K][N], out[N];
#pragma unroll
                for (int k = 0; k < K; ++k)
                    dw1d_widen_words<T, kColBytes / 4>(reinterpret_cast<const uint32_t*>(&win[t + k]), in[k]);
#pragma unroll
                for (int c = 0; c < N; ++c) {
                    float acc = b[c];  // sums start at the bias: one addition fewer an output
#pragma unroll
                    for (int k = 0; k < K; ++k) acc = fmaf(in[k][c], taps[k][c], acc);
                    out[c] = conv_activate(acc, a.act);
                }
                if (first + t < a.OL) store_vec<T, N>(reinterpret_cast<T*>(yw + (chunk * CHUNK + t) * groups), out);
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
    case CONV_F16: return F::template run<__half>(args...);
    case CONV_BF16: return F::template run<__nv_bfloat16>(args...);
    default: return F::template run<float>(args...);
    }
}

// x and y in `layout`, or of a shape whose NCHW and NHWC orders are one memory order (one position or
// one channel: the Python layer reports such an operand as NCHW), so either kernel family reads it.
bool in_layout(const conv_problem* p, int layout) {
    const bool coincide_x = p->C == 1 || p->H * p->W == 1;
    const bool coincide_y = p->M == 1 || conv_out_h(p) * conv_out_w(p) == 1;
    return (p->x_layout == layout || coincide_x) && (p->y_layout == layout || coincide_y);
}

int supports_rows(const conv_problem* p) {
    if (!in_layout(p, CONV_NCHW) || p->KW < 2 || p->KW > 4 || p->stride_w != 1 ||
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

// rows_p4 is built for fp32 alone: loading four pieces with their taps at once takes 64-76 registers in
// 16-bit, and rows_p1 was faster on every 16-bit shape measured (bf16 D = 4096, B = 8, L = 2048: 72 against
// 82 us).
int supports_rows_p4(const conv_problem* p) {
    const int status = supports_rows(p);
    if (status != CONV_OK) return status;
    if (p->x_dtype != CONV_F32)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "depthwise_conv1d[rows_p4] takes fp32 x and y (16-bit rows: rows_p1)");
    return CONV_OK;
}

// The cols configurations: a thread owns 8 bytes of channels, so C must be a multiple of them.
int supports_cols(const conv_problem* p) {
    const int per_thread = kColBytes / (int)conv_dtype_size(p->x_dtype);
    if (!in_layout(p, CONV_NHWC) || p->KW < 2 || p->KW > 4 || p->stride_w != 1 || p->dilation_w != 1 ||
        p->C % per_thread != 0)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "depthwise_conv1d[cols] takes NHWC x and y, K = 2-4, stride 1, dilation 1 and "
                              "channels a multiple of %d (8 bytes)", per_thread);
    return one_dtype(p, "cols");
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
    // rows in 16-byte pieces: every row starts on a piece boundary when the base does and a row's bytes
    // are a multiple of 16 (NCHW; the cols kernel's 8-byte words are checked by run_cols)
    a.vec_x = dw1d_aligned(t->x, 16) && p->W * conv_dtype_size(p->x_dtype) % 16 == 0;
    a.vec_y = dw1d_aligned(t->y, 16) && conv_out_w(p) * conv_dtype_size(p->y_dtype) % 16 == 0;
    return a;
}

// A cols launch's channel groups (a thread's 8 bytes of channels each) and runs of RUN steps a row, and
// its threads: B x groups x runs.
long long cols_groups(const conv_problem* p) { return p->C / (kColBytes / conv_dtype_size(p->x_dtype)); }
long long cols_runs(const conv_problem* p, int run) { return (conv_out_w(p) + run - 1) / run; }
long long cols_threads(const conv_problem* p, int run) { return p->B * cols_groups(p) * cols_runs(p, run); }

// A fast kernel's launch for x and y of T: Kernel<T, K>::launch, by the problem's K.
template <template <class, int> class Kernel>
struct FastLaunch {
    template <class T>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        const T* x = static_cast<const T*>(t->x);
        const T* w = static_cast<const T*>(t->w);
        const T* bias = static_cast<const T*>(t->bias);
        T* y = static_cast<T*>(t->y);
        switch (p->KW) {
        case 2: Kernel<T, 2>::launch(p, t, stream, x, w, bias, y); break;
        case 3: Kernel<T, 3>::launch(p, t, stream, x, w, bias, y); break;
        default: Kernel<T, 4>::launch(p, t, stream, x, w, bias, y); break;
        }
        CONV_LAUNCH_CHECK(depthwise_conv1d);
        return CONV_OK;
    }
};

template <int P>
struct Rows {
    template <class T, int K>
    struct Kernel {
        static void launch(const conv_problem* p, const conv_tensors* t, cudaStream_t s, const T* x, const T* w,
                           const T* b, T* y) {
            const long long per_row = row_pieces(p), pieces = p->B * p->C * per_row;
            dw1d_rows_kernel<T, K, P><<<conv_grid_for((pieces + P - 1) / P, 256), 256, 0, s>>>(
                args_of(p, t), ConvDivider::of((uint32_t)per_row), ConvDivider::of((uint32_t)p->C), x, w, b, y);
        }
    };
};

template <int RUN, int CHUNK>
struct Cols {
    template <class T, int K>
    struct Kernel {
        static void launch(const conv_problem* p, const conv_tensors* t, cudaStream_t s, const T* x, const T* w,
                           const T* b, T* y) {
            dw1d_cols_kernel<T, K, RUN, CHUNK><<<conv_grid_for(cols_threads(p, RUN), 256), 256, 0, s>>>(
                args_of(p, t), ConvDivider::of((uint32_t)cols_groups(p)), ConvDivider::of((uint32_t)cols_runs(p, RUN)),
                x, w, b, y);
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

int run_rows_p4(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return FastLaunch<Rows<4>::template Kernel>::run<float>(p, t, conv_stream(stream));
}
int run_rows_p1(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return dispatch_one_dtype<FastLaunch<Rows<1>::template Kernel>>(p, p, t, conv_stream(stream));
}
int run_simple(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    return conv_dispatch_dtypes<SimpleLaunch>(p, p, t, conv_stream(stream));
}
// x or y off an 8-byte boundary (a tensor sliced at an odd channel, say): the simple kernel computes it.
template <int RUN, int CHUNK>
int run_cols(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_size, void* stream) {
    if (!dw1d_aligned(t->x, kColBytes) || !dw1d_aligned(t->y, kColBytes))
        return run_simple(p, t, ws, ws_size, stream);
    return dispatch_one_dtype<FastLaunch<Cols<RUN, CHUNK>::template Kernel>>(p, p, t, conv_stream(stream));
}

// The cols configuration by how many threads it would run (H200, SiLU; bench/PERF_NOTES.md,
// depthwise_conv1d): at B = 1, L = 128, D = 1536 cols_r4 runs 12K threads (bf16 2.7 us) where cols_r8 runs
// 6K (3.1); in 16-bit cols_r16 and cols_r8 are within 3% of each other from 128K threads of r16 (D = 4096,
// B = 8, L = 2048: 75.2 and 75.6 us; D = 12288, L = 16384: 215 and 219); in fp32 cols_r8 is the fastest
// or within 1% of it.
const char* default_cols(const conv_problem* p) {
    if (cols_threads(p, 8) < 32 * 1024) return "cols_r4";
    if (conv_dtype_size(p->x_dtype) == 2 && cols_threads(p, 16) >= 128 * 1024) return "cols_r16";
    return "cols_r8";
}

// fp32 rows: rows_p4 (a lane takes 4 pieces) once it has 64K threads, rows_p1 below; 16-bit rows: rows_p1.
// H200, SiLU: fp32 D = 12288, L = 16384: p4 385 against p1 402 us, D = 4096, B = 8, L = 2048: 130 against
// 135; B = 1, L = 128, D = 1536: p1 1.9 against p4 2.7 us.
const char* default_rows(const conv_problem* p) {
    if (conv_dtype_size(p->x_dtype) == 4 && p->B * p->C * row_pieces(p) / 4 >= 64 * 1024) return "rows_p4";
    return "rows_p1";
}

const char* default_config(const conv_problem* p) {
    if (supports_rows(p) == CONV_OK) return default_rows(p);
    if (supports_cols(p) == CONV_OK) return default_cols(p);
    conv_clear_error();
    return "simple";
}

}  // namespace

static const conv_config DW1D_CONFIGS[] = {
    {"rows_p4", run_rows_p4, supports_rows_p4},
    {"rows_p1", run_rows_p1, supports_rows},
    {"cols_r16", run_cols<16, 4>, supports_cols},
    {"cols_r8", run_cols<8, 8>, supports_cols},
    {"cols_r4", run_cols<4, 4>, supports_cols},
    {"simple", run_simple, NULL},
};
extern "C" const conv_impl conv_impl_depthwise_conv1d = {supports_shape, NULL, DW1D_CONFIGS,
                                                         sizeof(DW1D_CONFIGS) / sizeof(DW1D_CONFIGS[0]),
                                                         default_config};
