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
#include "launch_util.cuh"
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

// The common decoding step, one token (T = 1) with a state of K-1 or K values (the causal-conv1d package's tests
// keep K-1; Mamba's blocks keep K), x and y of one dtype: each thread takes R adjacent rows (channels d .. d+R-1 of
// one batch item), R = 2 where a 16-bit state is no multiple of 16 bytes (step_rows), else 1, so that the state,
// the taps, x, y and bias move in words of 4 bytes or more, with no loops and no per-value branch. For T = 1 both
// layouts put x[b, d] and y[b, d] at b * D + d. (The generic kernel above spent ~4x the floor at B x D = 256 x
// 8192: scalar 2-byte state accesses, run-time loops over S, K and T.) One row a thread, a 16-bit state of 3 values
// moved as three 2-byte words reached 69-75% of the floor at batch 64-256, D = 4096-8192 (H200), where 4-value rows
// reached 84-113%: the kernel is bound by issuing instructions (bench/PERF_NOTES.md); two rows move in three 4-byte
// words. Two ways of moving it in 16-byte words measured slower: 8 rows a thread (6.4-10.8 vs 4.9-8.3 us at batch
// 256) and a warp's 32 rows staged through shared memory (5.6-9.5 us).
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

// Rows a thread of the step kernel takes: two where a 16-bit state (S values of T) is no multiple of 16 bytes,
// so that two rows' state moves in wider words (1 or 3 values: 4-byte words; 2 or 4: 8- or 16-byte words),
// else one. fp32 states keep one row: two rows of 3 values measured 2-11% slower at batch 64-256, D = 2048-8192
// (H200), and 1 or 2 values already move in whole words.
template <class T, int S>
constexpr int step_rows() {
    return sizeof(T) == 2 && S * sizeof(T) % 16 != 0 ? 2 : 1;
}

// R rows a thread: channels d0 .. d0+R-1 of one batch item (D % R == 0), row group g = idx / R. Every
// operand's R-row run starts on a boundary of the word RowOf moves it in (the caller checks the pointers'
// alignment: state and w 16 bytes, x, y and bias R values).
template <class T, int K, int S, int R>
__global__ void __launch_bounds__(256) causal_step_kernel(int groups, ConvDivider groups_per_b, int act,
                                                         const T* __restrict__ x, T* __restrict__ state,
                                                         const T* __restrict__ w, const T* __restrict__ bias,
                                                         T* __restrict__ y) {
    static_assert(S == K - 1 || S == K, "a state of K-1 or K values");
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    uint32_t dg;
    groups_per_b.divmod((uint32_t)g, &dg);
    const long long idx0 = (long long)g * R, d0 = (long long)dg * R;
    T* st = state + idx0 * S;
    T old[R * S], taps[R * K], token[R], bias_v[R], out[R], shifted[R * S];
    RowOf<T, R * S>::load(st, old);
    RowOf<T, R * K>::load(w + d0 * K, taps);
    RowOf<T, R>::load(x + idx0, token);
    if (bias) RowOf<T, R>::load(bias + d0, bias_v);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        // window: the row's last K-1 state values, then its token
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < K - 1; ++k)
            acc = fmaf(conv_load(old, r * S + S - (K - 1) + k), conv_load(taps, r * K + k), acc);
        acc = fmaf(conv_load(token, r), conv_load(taps, r * K + K - 1), acc);
        out[r] = conv_store_as<T>(conv_activation_value(acc, bias ? conv_load(bias_v, r) : 0.0f, act));
#pragma unroll
        for (int j = 0; j + 1 < S; ++j) shifted[r * S + j] = old[r * S + j + 1];
        shifted[r * S + S - 1] = token[r];
    }
    RowOf<T, R>::store(y + idx0, out);
    RowOf<T, R * S>::store(st, shifted);
}

struct UpdateLaunch {
    template <class TX, class TY>
    static int run(const conv_problem* p, const UpdateArgs& a, const void* x, void* state, const void* w,
                   const void* bias, void* y, cudaStream_t stream) {
        (void)p;
        const long long rows = (long long)a.B * a.D;
        if constexpr (std::is_same<TX, TY>::value) {
            if (a.T == 1 && (a.S == a.K - 1 || a.S == a.K) && a.K >= 2 && a.K <= 4 && dw1d_aligned(state, 16) &&
                dw1d_aligned(w, 16))  // (row runs of x, y and bias: step_k checks theirs)
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
        if (a.S == K)
            step_s<T, K, K>(a, rows, x, state, w, bias, y, stream);
        else
            step_s<T, K, K - 1>(a, rows, x, state, w, bias, y, stream);
    }

    // step_rows<T, S>() rows a thread where D is a multiple of them, x, y and bias sit on boundaries of R
    // values (their R-row runs then do too) and there are more rows than 1024 a streaming multiprocessor;
    // else one row a thread. (Two rows measured 3-5% slower below that, where a launch is latency-bound and
    // halving the threads lengthens each one's chain: batch 1, and 131k rows on the H200's 132 SMs; 8-19%
    // faster from 262k rows, bf16 and fp16, D = 2048-8192, batch 64-256.)
    template <class T, int K, int S>
    static void step_s(const UpdateArgs& a, long long rows, const T* x, T* state, const T* w, const T* bias, T* y,
                       cudaStream_t stream) {
        constexpr int R = step_rows<T, S>();
        constexpr int RUN = R * (int)sizeof(T);
        bool runs = R > 1 && a.D % R == 0 && dw1d_aligned(x, RUN) && dw1d_aligned(y, RUN) &&
                    (!bias || dw1d_aligned(bias, RUN));
        int sms = 0;
        if (runs) runs = conv_sm_count(&sms) == CONV_OK && rows > 1024LL * sms;
        if (runs)
            launch_step<T, K, S, R>(a, rows, x, state, w, bias, y, stream);
        else
            launch_step<T, K, S, 1>(a, rows, x, state, w, bias, y, stream);
    }

    template <class T, int K, int S, int R>
    static void launch_step(const UpdateArgs& a, long long rows, const T* x, T* state, const T* w, const T* bias, T* y,
                            cudaStream_t stream) {
        const long long groups = rows / R;
        const ConvDivider groups_per_b = ConvDivider::of((uint32_t)(a.D / R));
        causal_step_kernel<T, K, S, R><<<(unsigned)((groups + 255) / 256), 256, 0, stream>>>(
            (int)groups, groups_per_b, a.act, x, state, w, bias, y);
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
