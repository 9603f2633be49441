// tuner.cu — times auto's candidates for one shape and picks the fastest correct one.
//   conv_tune_fill_kernel: uniform(-1, 1) test data from a hash of the index (no host copies).
//   conv_tune_error_kernel: sums (y - ref)^2 and ref^2 in double, for the relative L2 error of a
//   candidate against the direct kernel; a candidate outside its own bound is never chosen.
// Each candidate runs once to warm up and to be checked, once more to be timed (each timed run
// starts with the L2 flushed); clearly slower ones
// (3x the best so far) stop there, the rest get repeated runs within the budget and their median
// decides. Buffers are the tuner's own, so the caller's data is never touched.
// With PYCONV_TUNE_LOG set (to anything but "" or "0"), every candidate's outcome goes to stderr:
// how to see why auto chose what it chose, and how configurations compare on a new GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_util.cuh"

__global__ void conv_tune_fill_kernel(float* data, long long n, unsigned seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        data[i] = (h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

// sums[0] += (y - ref)^2, sums[1] += ref^2; a NaN in y makes sums[0] NaN.
__global__ void conv_tune_error_kernel(const float* y, const float* ref, long long n, double* sums) {
    double diff = 0.0, norm = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double d = (double)y[i] - (double)ref[i];
        diff += d * d;
        norm += (double)ref[i] * ref[i];
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

// Device buffers and a stream for one tuning session, released on every path out.
struct TuneSession {
    float *x = nullptr, *w = nullptr, *y = nullptr, *ref = nullptr, *bias = nullptr;
    void* workspace = nullptr;
    double* sums = nullptr;
    void* flush = nullptr;  // written before each timed run, so that no candidate starts with x in L2
    size_t flush_bytes = 0;
    size_t workspace_bytes = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~TuneSession() {
        cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(ref); cudaFree(workspace); cudaFree(sums);
        cudaFree(flush);
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (stream) cudaStreamDestroy(stream);
    }
};

int fill(float* data, long long n, unsigned seed, cudaStream_t stream) {
    conv_tune_fill_kernel<<<conv_grid_for(n, 256), 256, 0, stream>>>(data, n, seed);
    CONV_LAUNCH_CHECK(conv_tune_fill_kernel);
    return CONV_OK;
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

int relative_error(TuneSession& s, long long ny, double* err) {
    CONV_CUDA_CHECK(cudaMemsetAsync(s.sums, 0, 2 * sizeof(double), s.stream));
    conv_tune_error_kernel<<<conv_grid_for(ny, 256), 256, 0, s.stream>>>(s.y, s.ref, ny, s.sums);
    CONV_LAUNCH_CHECK(conv_tune_error_kernel);
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

double elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int conv_tune_measure(const conv_problem* p, const conv_tune_candidate* candidates, int count,
                      double budget_ms, conv_tune_result* result) {
    const auto began = std::chrono::steady_clock::now();
    const long long nx = p->B * p->C * p->H * p->W, nw = p->M * p->C * p->KH * p->KW;
    const long long ny = p->B * p->M * conv_out_h(p) * conv_out_w(p);
    TuneSession s;
    for (int i = 0; i < count; ++i) {
        size_t bytes = 0;
        int status = conv_entry_workspace(conv_variant_entry_get(candidates[i].variant), p, &bytes);
        if (status != CONV_OK) return status;
        s.workspace_bytes = std::max(s.workspace_bytes, bytes);
    }
    CONV_CUDA_CHECK(cudaMalloc(&s.x, nx * sizeof(float)));
    CONV_CUDA_CHECK(cudaMalloc(&s.w, nw * sizeof(float)));
    CONV_CUDA_CHECK(cudaMalloc(&s.y, ny * sizeof(float)));
    CONV_CUDA_CHECK(cudaMalloc(&s.ref, ny * sizeof(float)));
    CONV_CUDA_CHECK(cudaMalloc(&s.sums, 2 * sizeof(double)));
    if (s.workspace_bytes) CONV_CUDA_CHECK(cudaMalloc(&s.workspace, s.workspace_bytes));
    int device = 0, l2_bytes = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    s.flush_bytes = 2 * (size_t)(l2_bytes > 0 ? l2_bytes : 1);
    CONV_CUDA_CHECK(cudaMalloc(&s.flush, s.flush_bytes));
    CONV_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CONV_CUDA_CHECK(cudaEventCreate(&s.start));
    CONV_CUDA_CHECK(cudaEventCreate(&s.stop));
    int status = fill(s.x, nx, 0x9e3779b9u, s.stream);
    if (status == CONV_OK) status = fill(s.w, nw, 0x85ebca6bu, s.stream);
    if (status != CONV_OK) return status;

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
        float ms;
        if (run_timed(s, p, candidates[i], &ms) != CONV_OK) {  // warm-up; a failing candidate is out
            log_candidate(candidates[i], conv_last_error(), 0.0f, 0, 0.0);
            continue;
        }
        double err;
        status = relative_error(s, ny, &err);
        if (status != CONV_OK) return status;
        if (!(err <= 2.0 * e->info.max_rel_error)) {  // NaN fails this test too
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
