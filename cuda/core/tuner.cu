// tuner.cu — times auto's candidates for one problem and picks the fastest correct one.
//   conv_tune_fill_kernel<T>: uniform(-1, 1) test data from a hash of the index, rounded to T (f32,
//   f16 or bf16; no host copies).
//   conv_tune_error_kernel<T>: sums (y - ref)^2 and ref^2 in double over outputs of type T, for the
//   relative L2 error of a candidate against the direct kernel; a candidate outside its own bound is
//   never chosen.
// Operands have the problem's dtypes and sizes (a bias of M values when it has one). Each candidate
// runs once into a NaN-poisoned y to warm up and to be checked, once more to be timed (each timed run
// starts with the L2 flushed); clearly slower ones
// (3x the best so far) stop there, the rest get repeated runs within the budget and their median
// decides. Then the finals: the contenders within TUNE_FINAL_SLACK of the best (at most TUNE_FINALISTS)
// are timed again as programs run them (graph_timing.cu: a CUDA graph each of back-to-back calls cycling
// through operand sets that pass the L2, consecutive calls overlapping by programmatic dependent launch, the
// graphs replayed in turn, round after round), and the fastest there wins: single cold launches ranked
// grouped_direct ahead of implicit_gemm on GoogLeNet's 5x5 layers at batch 32 where graph replays put it
// 15-21% behind (H100).
// Buffers are the tuner's own, so the caller's data is never touched.
// With PYCONV_TUNE_LOG set (to anything but "" or "0"), every candidate's outcome goes to stderr:
// how to see why auto chose what it chose, and how configurations compare on a new GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "tensor_io.cuh"

template <class T>
__global__ void conv_tune_fill_kernel(T* data, long long n, unsigned seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        data[i] = conv_store_as<T>((h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

// sums[0] += (y - ref)^2, sums[1] += ref^2; a NaN in y makes sums[0] NaN.
template <class T>
__global__ void conv_tune_error_kernel(const T* y, const T* ref, long long n, double* sums) {
    double diff = 0.0, norm = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const double r = conv_load(ref, i);
        const double d = conv_load(y, i) - r;
        diff += d * d;
        norm += r * r;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        diff += __shfl_down_sync(0xffffffffu, diff, offset);
        norm += __shfl_down_sync(0xffffffffu, norm, offset);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&sums[0], diff);
        atomicAdd(&sums[1], norm);
    }
}

namespace {

// Calls F::template run<T>(args...) with T the element type of dtype.
template <class F, class... Args>
int with_element_type(int dtype, Args... args) {
    switch (dtype) {
    case CONV_F16: return F::template run<__half>(args...);
    case CONV_BF16: return F::template run<__nv_bfloat16>(args...);
    default: return F::template run<float>(args...);
    }
}

struct FillUniform {
    template <class T>
    static int run(void* data, long long n, unsigned seed, cudaStream_t stream) {
        conv_tune_fill_kernel<T><<<conv_grid_for(n, 256), 256, 0, stream>>>(static_cast<T*>(data), n, seed);
        CONV_LAUNCH_CHECK(conv_tune_fill_kernel);
        return CONV_OK;
    }
};

struct SumErrors {
    template <class T>
    static int run(const void* y, const void* ref, long long n, double* sums, cudaStream_t stream) {
        conv_tune_error_kernel<T><<<conv_grid_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(y),
                                                                            static_cast<const T*>(ref), n, sums);
        CONV_LAUNCH_CHECK(conv_tune_error_kernel);
        return CONV_OK;
    }
};

// Device buffers and a stream for one tuning session, released on every path out. x, w, y, ref and
// bias hold the problem's dtypes.
struct TuneSession {
    void *x = nullptr, *w = nullptr, *y = nullptr, *ref = nullptr, *bias = nullptr;
    long long nx = 0, nw = 0, ny = 0;  // elements of x, w and y (ref has y's)
    size_t y_bytes = 0;
    void* workspace = nullptr;
    double* sums = nullptr;
    void* flush = nullptr;  // written before each timed run, so that no candidate starts with x in L2
    size_t flush_bytes = 0;
    size_t workspace_bytes = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~TuneSession() {
        cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(ref); cudaFree(bias); cudaFree(workspace); cudaFree(sums);
        cudaFree(flush);
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (stream) cudaStreamDestroy(stream);
    }
};

// Allocates the operands in the problem's dtypes and fills x, w and the bias with uniform(-1, 1).
int make_operands(TuneSession& s, const conv_problem* p) {
    const size_t x_size = conv_dtype_size(p->x_dtype), w_size = conv_dtype_size(p->w_dtype);
    const size_t y_size = conv_dtype_size(p->y_dtype);
    s.nx = p->B * conv_x_image(p);
    s.nw = conv_w_count(p);
    s.ny = p->B * conv_y_image(p);
    s.y_bytes = (size_t)s.ny * y_size;
    CONV_CUDA_CHECK(cudaMalloc(&s.x, (size_t)s.nx * x_size));
    CONV_CUDA_CHECK(cudaMalloc(&s.w, (size_t)s.nw * w_size));
    CONV_CUDA_CHECK(cudaMalloc(&s.y, s.y_bytes));
    CONV_CUDA_CHECK(cudaMalloc(&s.ref, s.y_bytes));
    int status = with_element_type<FillUniform>(p->x_dtype, s.x, s.nx, 0x9e3779b9u, s.stream);
    if (status == CONV_OK) status = with_element_type<FillUniform>(p->w_dtype, s.w, s.nw, 0x85ebca6bu, s.stream);
    if (status != CONV_OK || !p->bias) return status;
    CONV_CUDA_CHECK(cudaMalloc(&s.bias, (size_t)p->M * y_size));
    return with_element_type<FillUniform>(p->y_dtype, s.bias, (long long)p->M, 0xc2b2ae35u, s.stream);
}

// Runs one candidate and returns its time in ms (events around the launch).
int run_timed(TuneSession& s, const conv_problem* p, conv_tune_candidate c, float* ms) {
    const conv_variant_entry* e = conv_variant_entry_get(c.variant);
    // A cold cache, as real calls (and the bench tool's rotated operands) see it: on small shapes a
    // warm L2 favours kernels that re-read x, and the tuner then picks what is slower in use.
    CONV_CUDA_CHECK(cudaMemsetAsync(s.flush, 0, s.flush_bytes, s.stream));
    CONV_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
    const conv_tensors t = {s.x, s.w, s.bias, s.y};
    int status = conv_entry_launch(e, c.config, p, &t, s.workspace, s.workspace_bytes, s.stream);
    if (status != CONV_OK) return status;
    CONV_CUDA_CHECK(cudaEventRecord(s.stop, s.stream));
    CONV_CUDA_CHECK(cudaEventSynchronize(s.stop));
    CONV_CUDA_CHECK(cudaEventElapsedTime(ms, s.start, s.stop));
    return CONV_OK;
}

int relative_error(TuneSession& s, int y_dtype, double* err) {
    CONV_CUDA_CHECK(cudaMemsetAsync(s.sums, 0, 2 * sizeof(double), s.stream));
    int status = with_element_type<SumErrors>(y_dtype, s.y, s.ref, s.ny, s.sums, s.stream);
    if (status != CONV_OK) return status;
    double sums[2];
    CONV_CUDA_CHECK(cudaMemcpyAsync(sums, s.sums, sizeof sums, cudaMemcpyDeviceToHost, s.stream));
    CONV_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    *err = sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
    return CONV_OK;
}

bool log_enabled() {
    const char* env = getenv("PYCONV_TUNE_LOG");
    return env && *env && strcmp(env, "0") != 0;
}

// One line per candidate: "pyconv tune: mma_fp16[rowwin_r12] 0.4012 ms (7 runs) rel. error 2.6e-04".
void log_candidate(conv_tune_candidate c, const char* outcome, float median_ms, int runs, double err) {
    if (!log_enabled()) return;
    const conv_variant_entry* e = conv_variant_entry_get(c.variant);
    const char* config = e->impl->configs[c.config].name;
    if (runs > 0)
        fprintf(stderr, "pyconv tune: %s[%s] %.4f ms (%d runs) rel. error %.1e\n", e->info.name, config, median_ms,
                runs, err);
    else
        fprintf(stderr, "pyconv tune: %s[%s] %s\n", e->info.name, config, outcome);
}

// The relative L2 error a candidate may show against direct: its own bound (fp32 in and out) plus the
// rounding of the output dtype (both outputs are rounded to it), with a 2x margin for random data.
double error_bound(const conv_variant_entry* e, int y_dtype) {
    const double rounding = y_dtype == CONV_F16    ? std::ldexp(1.0, -11)  // 11-bit significand
                            : y_dtype == CONV_BF16 ? std::ldexp(1.0, -8)   // 8-bit significand
                                                   : 0.0;
    return 2.0 * (e->info.max_rel_error + rounding);
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// The finals: contenders within this factor of the first pass's best, at most this many.
constexpr float TUNE_FINAL_SLACK = 1.25f;
constexpr int TUNE_FINALISTS = 4;
// Operand sets of the finals: together at least twice the L2 (as the bench's), at most this many, at most a
// quarter of the free memory.
constexpr int TUNE_MAX_SETS = 256;
// A timed replay of the finals lasts about this long (many calls where one is short), at most this many calls.
constexpr double TUNE_REPLAY_MS = 0.5;
constexpr int TUNE_MAX_CALLS = 100;
constexpr int TUNE_FINAL_WARMUP = 1, TUNE_FINAL_REPS = 5;
// The share of the budget the first pass leaves to the finals, and the least they get after a first pass that
// overran its part.
constexpr double TUNE_FINALS_SHARE = 0.2;

// The finals' operand sets, one allocation: set i's x, w and y at i * stride bytes (256-byte aligned parts);
// x and w filled like the first pass's, each set with its own seeds; the bias is the session's.
struct FinalSets {
    char* base = nullptr;
    size_t x_bytes = 0, w_bytes = 0, y_bytes = 0, stride = 0;
    int n = 0;
    ~FinalSets() { cudaFree(base); }
    static size_t round256(size_t b) { return (b + 255) / 256 * 256; }
    void* x(int i) const { return base + i * stride; }
    void* w(int i) const { return base + i * stride + round256(x_bytes); }
    void* y(int i) const { return base + i * stride + round256(x_bytes) + round256(w_bytes); }
};

int make_final_sets(const TuneSession& s, const conv_problem* p, size_t l2_bytes, FinalSets& sets) {
    sets.x_bytes = (size_t)s.nx * conv_dtype_size(p->x_dtype);
    sets.w_bytes = (size_t)s.nw * conv_dtype_size(p->w_dtype);
    sets.y_bytes = s.y_bytes;
    sets.stride = FinalSets::round256(sets.x_bytes) + FinalSets::round256(sets.w_bytes) +
                  FinalSets::round256(sets.y_bytes);
    size_t free_bytes = 0, total_bytes = 0;
    CONV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t wanted = (2 * l2_bytes + sets.stride - 1) / sets.stride;
    const size_t affordable = free_bytes / (4 * sets.stride);
    sets.n = (int)std::max<size_t>(1, std::min<size_t>({wanted, (size_t)TUNE_MAX_SETS, affordable}));
    CONV_CUDA_CHECK(cudaMalloc(&sets.base, sets.n * sets.stride));
    for (int i = 0; i < sets.n; ++i) {
        int status = with_element_type<FillUniform>(p->x_dtype, sets.x(i), s.nx, 0x27d4eb2fu + 2u * i, s.stream);
        if (status == CONV_OK)
            status = with_element_type<FillUniform>(p->w_dtype, sets.w(i), s.nw, 0x165667b1u + 2u * i, s.stream);
        if (status != CONV_OK) return status;
    }
    return CONV_OK;
}

// One finalist's calls, for conv_graph_capture: candidate c on set i.
struct FinalCalls {
    const conv_variant_entry* e;
    int config;
    const conv_problem* p;
    const FinalSets* sets;
    void* bias;
    void* workspace;
    size_t workspace_bytes;
    static int enqueue(void* context, int i, void* stream) {
        const FinalCalls* f = static_cast<const FinalCalls*>(context);
        const conv_tensors t = {f->sets->x(i), f->sets->w(i), f->bias, f->sets->y(i)};
        return conv_entry_launch(f->e, f->config, f->p, &t, f->workspace, f->workspace_bytes, stream);
    }
};

// The finalists' captured graphs (released before the operand sets they read are freed), and whose they are.
struct FinalGraphs {
    std::vector<conv_timed_graph> graphs;
    std::vector<int> candidate;
    ~FinalGraphs() {
        for (conv_timed_graph& g : graphs) conv_graph_release(&g);
    }
};

// The finals over finalists (candidate indices, fastest first in the first pass, first_ms[k] its time there):
// each one captured as a graph while its replays fit budget_ms (a finalist that would pass it, or that fails
// in a graph, is left out), then all timed in rounds (conv_graph_time_rounds: a change of the GPU's state
// between rounds reaches them alike); *best becomes the fastest there. Fewer than two timed: *best stays.
int run_finals(TuneSession& s, const conv_problem* p, const conv_tune_candidate* candidates,
               const std::vector<int>& finalists, const std::vector<float>& first_ms, size_t l2_bytes,
               double budget_ms, int* best, float* best_ms) {
    const auto began = std::chrono::steady_clock::now();
    FinalSets sets;
    int status = make_final_sets(s, p, l2_bytes, sets);
    if (status != CONV_OK) return status;
    FinalGraphs finals;
    double cost = 0.0;  // of the replays of the graphs captured, at the first pass's time a call (the finals' is lower)
    for (size_t k = 0; k < finalists.size(); ++k) {
        const int i = finalists[k];
        const double call_ms = std::max(first_ms[k], 1e-3f);  // an event pair resolves about 1 us
        const int calls = std::min(std::max(sets.n, (int)std::ceil(TUNE_REPLAY_MS / call_ms)),
                                   std::max(TUNE_MAX_CALLS, sets.n));
        const double replays_ms = (double)(TUNE_FINAL_WARMUP + TUNE_FINAL_REPS) * calls * call_ms;
        if (elapsed_ms(began) + cost + replays_ms > budget_ms) {
            log_candidate(candidates[i], "final: not timed (budget)", 0.0f, 0, 0.0);
            continue;
        }
        FinalCalls f = {conv_variant_entry_get(candidates[i].variant), candidates[i].config, p, &sets,
                        s.bias, s.workspace, s.workspace_bytes};
        conv_timed_graph g;
        if (conv_graph_capture(FinalCalls::enqueue, &f, sets.n, calls, s.stream, &g) != CONV_OK) {
            log_candidate(candidates[i], conv_last_error(), 0.0f, 0, 0.0);  // out of the finals
            conv_clear_error();
            continue;
        }
        finals.graphs.push_back(g);
        finals.candidate.push_back(i);
        cost += replays_ms;
    }
    const int n = (int)finals.graphs.size();
    if (n < 2) return CONV_OK;
    std::vector<float> ms(n);
    if (conv_graph_time_rounds(finals.graphs.data(), n, TUNE_FINAL_WARMUP, TUNE_FINAL_REPS, s.stream, ms.data(),
                               nullptr) != CONV_OK) {  // the first pass's choice stands
        if (log_enabled()) fprintf(stderr, "pyconv tune: finals not timed: %s\n", conv_last_error());
        conv_clear_error();
        return CONV_OK;
    }
    for (int k = 0; k < n; ++k) {
        const conv_tune_candidate& c = candidates[finals.candidate[k]];
        if (log_enabled()) {
            const conv_variant_entry* e = conv_variant_entry_get(c.variant);
            fprintf(stderr, "pyconv tune: final %s[%s] %.4f ms a call (graph of %d calls over %d operand sets)\n",
                    e->info.name, e->impl->configs[c.config].name, ms[k], finals.graphs[k].calls, sets.n);
        }
        if (k == 0 || ms[k] < *best_ms) {
            *best = finals.candidate[k];
            *best_ms = ms[k];
        }
    }
    return CONV_OK;
}

}  // namespace

int conv_tune_measure(const conv_problem* p, const conv_tune_candidate* candidates, int count,
                      double budget_ms, conv_tune_result* result) {
    const auto began = std::chrono::steady_clock::now();
    TuneSession s;
    for (int i = 0; i < count; ++i) {
        size_t bytes = 0;
        int status = conv_entry_workspace(conv_variant_entry_get(candidates[i].variant), p, &bytes);
        if (status != CONV_OK) return status;
        s.workspace_bytes = std::max(s.workspace_bytes, bytes);
    }
    CONV_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    int status = make_operands(s, p);
    if (status != CONV_OK) return status;
    CONV_CUDA_CHECK(cudaMalloc(&s.sums, 2 * sizeof(double)));
    if (s.workspace_bytes) CONV_CUDA_CHECK(cudaMalloc(&s.workspace, s.workspace_bytes));
    int device = 0, l2_bytes = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    s.flush_bytes = 2 * (size_t)(l2_bytes > 0 ? l2_bytes : 1);
    CONV_CUDA_CHECK(cudaMalloc(&s.flush, s.flush_bytes));
    CONV_CUDA_CHECK(cudaEventCreate(&s.start));
    CONV_CUDA_CHECK(cudaEventCreate(&s.stop));

    // The reference output: the direct kernel, the simplest exact one.
    const conv_variant_entry* direct = conv_variant_entry_get(CONV_ID_direct);
    const conv_tensors ref = {s.x, s.w, s.bias, s.ref};
    status = conv_entry_launch(direct, 0, p, &ref, nullptr, 0, s.stream);
    if (status != CONV_OK) return status;

    int best = -1;
    float best_ms = 0.0f;
    std::vector<float> times;
    std::vector<std::pair<float, int>> timed;  // (first-pass median, candidate) of every correct candidate
    for (int i = 0; i < count; ++i) {
        const conv_variant_entry* e = conv_variant_entry_get(candidates[i].variant);
        // All-ones bytes are a NaN in f32, f16 and bf16: an element the candidate leaves unwritten fails
        // the check below instead of passing with the value an earlier candidate left there.
        CONV_CUDA_CHECK(cudaMemsetAsync(s.y, 0xFF, s.y_bytes, s.stream));
        float ms;
        if (run_timed(s, p, candidates[i], &ms) != CONV_OK) {  // warm-up; a failing candidate is out
            log_candidate(candidates[i], conv_last_error(), 0.0f, 0, 0.0);
            continue;
        }
        double err;
        status = relative_error(s, p->y_dtype, &err);
        if (status != CONV_OK) return status;
        if (!(err <= error_bound(e, p->y_dtype))) {  // NaN fails this test too
            log_candidate(candidates[i], "rejected: error above its bound", 0.0f, 0, err);
            continue;
        }
        if (run_timed(s, p, candidates[i], &ms) != CONV_OK) continue;
        times.assign(1, ms);
        const bool contender = best < 0 || ms < 3.0f * best_ms;
        // Repeats for contenders: the first pass's budget left, shared by the candidates left, at most 15 runs.
        const double share = ((1.0 - TUNE_FINALS_SHARE) * budget_ms - elapsed_ms(began)) / (count - i);
        for (int r = 1; contender && r < 15 && (r < 3 || (r + 1) * ms < share); ++r) {
            if (run_timed(s, p, candidates[i], &ms) != CONV_OK) break;
            times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        const float median = times[times.size() / 2];
        log_candidate(candidates[i], "", median, (int)times.size(), err);
        timed.push_back({median, i});
        if (best < 0 || median < best_ms) {
            best = i;
            best_ms = median;
        }
    }
    conv_clear_error();
    if (best < 0) return conv_set_error(CONV_ERR_INTERNAL, "tuning: no candidate ran correctly");
    // The finals: the contenders within TUNE_FINAL_SLACK of the best, fastest first.
    std::sort(timed.begin(), timed.end());
    std::vector<int> finalists;
    std::vector<float> first_ms;
    for (const auto& t : timed)
        if (t.first <= TUNE_FINAL_SLACK * best_ms && (int)finalists.size() < TUNE_FINALISTS) {
            finalists.push_back(t.second);
            first_ms.push_back(t.first);
        }
    if (finalists.size() >= 2) {
        // What the first pass left of the budget, at least TUNE_FINALS_SHARE of it: the first pass can overrun
        // (every candidate runs at least once), and the finals decide between close candidates.
        status = run_finals(s, p, candidates, finalists, first_ms, s.flush_bytes / 2,
                            std::max(budget_ms - elapsed_ms(began), TUNE_FINALS_SHARE * budget_ms), &best, &best_ms);
        if (status != CONV_OK) return status;
    }
    result->best = candidates[best];
    result->median_ms = best_ms;
    return CONV_OK;
}
