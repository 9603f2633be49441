// causal_update.cu — conv1d_causal_update: one decoding step of a causal depthwise conv1d. A sequence
// model generating token by token keeps, per (batch, channel), the last S >= K-1 inputs (the state);
// each step convolves them with the T new inputs, writes T outputs and shifts the state by T. Pure
// latency at small batch (one small kernel), pure bandwidth at large batch (state, x, y: each once).
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "cuda_util.cuh"
#include "dw1d_words.cuh"
#include "int_divider.cuh"
#include "tensor_io.cuh"

namespace {

struct UpdateArgs {
    int B, D, T, S, K;
    int act;      // conv_epilogue: none, ReLU or SiLU
    bool nhwc;    // x and y (B, T, D) instead of (B, D, T)
};

// One thread per (b, d): the window is state[0..S) then x[0..T); outputs first (they read the old
// state), then the state shifts in place, ascending, so each value is read before it is overwritten.
// (A block-wide version staging the rows' states through shared memory in coalesced order measured
// slower on the H200: 4.3 vs 2.4 us at batch 1, 68 vs 26 us at B x D = 256 x 8192.)
template <class TX, class TY>
__global__ void causal_update_kernel(UpdateArgs a, const TX* __restrict__ x, TX* state, const TX* __restrict__ w,
                                     const TY* __restrict__ bias, TY* __restrict__ y) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= a.B * a.D) return;
    const int d = idx % a.D, b = idx / a.D;
    TX* st = state + (long long)idx * a.S;
    // x[b, d, t] and y[b, d, t] at base + t * step
    const long long step = a.nhwc ? a.D : 1;
    const long long base = a.nhwc ? (long long)b * a.T * a.D + d : (long long)idx * a.T;
    auto window = [&](int j) { return j < a.S ? conv_load(st, j) : conv_load(x, base + (j - a.S) * step); };
    const float bias_d = bias ? conv_load(bias, d) : 0.0f;
    for (int t = 0; t < a.T; ++t) {
        float acc = 0.0f;
        for (int k = 0; k < a.K; ++k)
            acc = fmaf(window(a.S - (a.K - 1) + t + k), conv_load(w, (long long)d * a.K + k), acc);
        y[base + t * step] = conv_store_as<TY>(conv_activation_value(acc, bias_d, a.act));
    }
    for (int j = 0; j < a.S; ++j) {
        const int from = j + a.T;
        st[j] = from < a.S ? st[from] : x[base + (from - a.S) * step];
    }
}

// The common decoding step, one token (T = 1) with a state of K-1 or K values (the causal-conv1d
// package's tests keep K-1; Mamba's blocks keep K), x and y of one dtype: the state row is S values at
// compile time, loaded and stored in the widest words its bytes allow (Mamba's 4-value bf16 / fp32 rows:
// one 8- or 16-byte word), the taps likewise, no loops and no per-value branch. For T = 1 both layouts
// put x[b, d] and y[b, d] at b * D + d. (The generic kernel above spent ~4x the floor at B x D = 256 x
// 8192: scalar 2-byte state accesses, run-time loops over S, K and T.) A 16-bit state of 3 values moves
// as three 2-byte words and reaches 69-75% of the floor at batch 64-256, D = 4096-8192 (H200), where
// 4-value rows reach 84-113%; two ways of moving it in 16-byte words measured slower there: 8 rows a
// thread (6.4-10.8 vs 4.9-8.3 us at batch 256) and a warp's 32 rows staged through shared memory
// (5.6-9.5 us).
template <class T, int N>
struct RowOf {
    static constexpr int kBytes = N * (int)sizeof(T);
    using Word = Dw1dWord<kBytes, T>;
    static constexpr int kWords = kBytes / (int)sizeof(Word);
    // N values of a row whose start is a multiple of kBytes from a 16-byte boundary
    __device__ __forceinline__ static void load(const T* p, T (&v)[N]) {
        Word u[kWords];
#pragma unroll
        for (int i = 0; i < kWords; ++i) u[i] = reinterpret_cast<const Word*>(p)[i];
        memcpy(v, u, kBytes);
    }
    __device__ __forceinline__ static void store(T* p, const T (&v)[N]) {
        Word u[kWords];
        memcpy(u, v, kBytes);
#pragma unroll
        for (int i = 0; i < kWords; ++i) reinterpret_cast<Word*>(p)[i] = u[i];
    }
};

template <class T, int K, int S>
__global__ void __launch_bounds__(256) causal_step_kernel(int rows, ConvDivider by_d, int act, const T* __restrict__ x,
                                                         T* __restrict__ state, const T* __restrict__ w,
                                                         const T* __restrict__ bias, T* __restrict__ y) {
    static_assert(S == K - 1 || S == K, "a state of K-1 or K values");
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows) return;
    uint32_t d;
    by_d.divmod((uint32_t)idx, &d);
    T* st = state + (long long)idx * S;
    T old[S], taps[K];
    RowOf<T, S>::load(st, old);
    RowOf<T, K>::load(w + (long long)d * K, taps);
    const T token = x[idx];
    // window: the state's last K-1 values, then the token
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < K - 1; ++k) acc = fmaf(conv_load(old, S - (K - 1) + k), conv_load(taps, k), acc);
    acc = fmaf(conv_load(&token, 0), conv_load(taps, K - 1), acc);
    y[idx] = conv_store_as<T>(conv_activation_value(acc, bias ? conv_load(bias, d) : 0.0f, act));
    T shifted[S];
#pragma unroll
    for (int j = 0; j + 1 < S; ++j) shifted[j] = old[j + 1];
    shifted[S - 1] = token;
    RowOf<T, S>::store(st, shifted);
}

struct UpdateLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const UpdateArgs& a, const void* x, void* state, const void* w,
                   const void* bias, void* y, cudaStream_t stream) {
        (void)p;
        const long long rows = (long long)a.B * a.D;
        if constexpr (std::is_same<TX, TY>::value) {
            if (a.T == 1 && (a.S == a.K - 1 || a.S == a.K) && a.K >= 2 && a.K <= 4 && dw1d_aligned(state, 16) &&
                dw1d_aligned(w, 16))
                return step<TX>(a, rows, static_cast<const TX*>(x), static_cast<TX*>(state),
                                static_cast<const TX*>(w), static_cast<const TX*>(bias), static_cast<TX*>(y), stream);
        }
        const int threads = 128;
        causal_update_kernel<TX, TY><<<(unsigned)((rows + threads - 1) / threads), threads, 0, stream>>>(
            a, static_cast<const TX*>(x), static_cast<TX*>(state), static_cast<const TX*>(w),
            static_cast<const TY*>(bias), static_cast<TY*>(y));
        CONV_LAUNCH_CHECK(causal_update_kernel);
        return CONV_OK;
    }

    template <class T>
    static int step(const UpdateArgs& a, long long rows, const T* x, T* state, const T* w, const T* bias, T* y,
                    cudaStream_t stream) {
        switch (a.K) {
        case 2: step_k<T, 2>(a, rows, x, state, w, bias, y, stream); break;
        case 3: step_k<T, 3>(a, rows, x, state, w, bias, y, stream); break;
        default: step_k<T, 4>(a, rows, x, state, w, bias, y, stream); break;
        }
        CONV_LAUNCH_CHECK(causal_step_kernel);
        return CONV_OK;
    }

    // the kernel for a state of K (Mamba) or K-1 values
    template <class T, int K>
    static void step_k(const UpdateArgs& a, long long rows, const T* x, T* state, const T* w, const T* bias, T* y,
                       cudaStream_t stream) {
        const unsigned blocks = (unsigned)((rows + 255) / 256);
        const ConvDivider by_d = ConvDivider::of((uint32_t)a.D);
        if (a.S == K)
            causal_step_kernel<T, K, K><<<blocks, 256, 0, stream>>>((int)rows, by_d, a.act, x, state, w, bias, y);
        else
            causal_step_kernel<T, K, K - 1><<<blocks, 256, 0, stream>>>((int)rows, by_d, a.act, x, state, w, bias, y);
    }
};

int refuse(const char* what) {
    return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "conv1d_causal_update: %s", what);
}

// The problem a step describes: the causal depthwise conv of the T new tokens.
int check_problem(const conv_problem* p, int64_t state_len) {
    if (p->H != 1 || p->KH != 1 || p->pad_h != 0 || p->pad_h_extra != 0)
        return refuse("the problem must be 1-D (H = KH = 1, no padding along H)");
    if (p->groups != p->C || p->M != p->C) return refuse("the problem must be depthwise (groups = C = M)");
    if (p->stride_w != 1 || p->dilation_w != 1) return refuse("the problem must have stride 1 and dilation 1");
    if (p->pad_w != p->KW - 1 || p->pad_w_extra != -(p->KW - 1))
        return refuse("the problem must be causal (pad_w = KW-1, pad_w_extra = -(KW-1))");
    if (p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL) return refuse("the epilogue must be none, ReLU or SiLU");
    if (p->x_layout != p->y_layout) return refuse("y must have x's layout");
    if (state_len < p->KW - 1 || state_len > (1 << 20))
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "conv1d_causal_update: state_len must be in [K-1, 2^20] = [%lld, 1048576], got %lld",
                              (long long)(p->KW - 1), (long long)state_len);
    if (p->B * p->C > (1LL << 30) || p->B * p->C * (state_len + p->W) > (1LL << 40))
        return conv_set_error(CONV_ERR_TOO_LARGE, "conv1d_causal_update: B*D = %lld is too large",
                              (long long)(p->B * p->C));
    return CONV_OK;
}

}  // namespace

extern "C" int conv1d_causal_update(const conv_problem* problem, int64_t state_len, const void* x, void* state,
                                    const void* w, const void* bias, void* y, void* stream) {
    conv_clear_error();
    conv_problem p;
    int status = conv_problem_load(problem, &p);
    if (status != CONV_OK) return status;
    if ((status = check_problem(&p, state_len)) != CONV_OK) return status;
    const struct { const char* name; const void* ptr; } operands[] = {
        {"x", x}, {"state", state}, {"w", w}, {"y", y}, {"bias", p.bias ? bias : nullptr}};
    int device = -1;
    for (const auto& o : operands) {
        if (!o.ptr) {
            if (o.name[0] == 'b' && !p.bias) continue;
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "conv1d_causal_update: %s is NULL", o.name);
        }
        int where = -1;
        if ((status = conv_pointer_device(o.ptr, &where)) != CONV_OK) return status;
        if (where < 0)
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                                  "conv1d_causal_update: %s is host memory: pass device memory", o.name);
        if (device >= 0 && where != device)
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                                  "conv1d_causal_update: %s is on device %d, x on device %d (operands must share "
                                  "one device)", o.name, where, device);
        device = where;
    }
    if (!p.bias && bias) return refuse("bias is given, but the problem says bias = 0");
    const UpdateArgs a = {(int)p.B, (int)p.C, (int)p.W, (int)state_len, (int)p.KW, p.epilogue,
                          p.x_layout == CONV_NHWC};
    int previous = -1;
    if ((status = conv_device_enter(device, &previous)) != CONV_OK) return status;
    status = conv_dispatch_dtypes<UpdateLaunch>(&p, &p, a, x, state, w, bias, y, conv_stream(stream));
    conv_device_leave(previous);
    return status;
}
