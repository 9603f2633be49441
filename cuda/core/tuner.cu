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
// decides. Buffers are the tuner's own, so the caller's data is never touched.
// With PYCONV_TUNE_LOG set (to anything but "" or "0"), every candidate's outcome goes to stderr:
// how to see why auto chose what it chose, and how configurations compare on a new GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
        // Repeats for contenders: the budget left, shared by the candidates left, at most 15 runs.
        const double share = (budget_ms - elapsed_ms(began)) / (count - i);
        for (int r = 1; contender && r < 15 && (r < 3 || (r + 1) * ms < share); ++r) {
            if (run_timed(s, p, candidates[i], &ms) != CONV_OK) break;
            times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        const float median = times[times.size() / 2];
        log_candidate(candidates[i], "", median, (int)times.size(), err);
        if (best < 0 || median < best_ms) {
            best = i;
            best_ms = median;
        }
    }
    conv_clear_error();
    if (best < 0) return conv_set_error(CONV_ERR_INTERNAL, "tuning: no candidate ran correctly");
    result->best = candidates[best];
    result->median_ms = best_ms;
    return CONV_OK;
}
