// timing.cu — conv2d_time: the op time of one variant with host launch overhead removed.
// `calls` launches, rotating through n_sets operand sets so that a small shape is not served from L2,
// are captured into one CUDA graph; each timed replay sits between two events, and the median replay
// time / calls is the time per call. One graph launch stands for all the calls, so what is measured
// is the kernels and the gaps between them on the device — the same protocol the bench tool applies
// to cuDNN (through torch.cuda.CUDAGraph), so the two sides compare like with like.
// Before the capture: auto is resolved (and tuned), and every set is run once eagerly, so a variant
// that cannot run returns the library's own message instead of failing inside the capture.
#include <stdlib.h>

#include "cuda_util.cuh"

// Jump to the cleanup with a status: after a failed CUDA call, or a failed libconv call.
#define TIMING_CUDA(call)                                                                     \
    do {                                                                                      \
        cudaError_t timing_err_ = (call);                                                     \
        if (timing_err_ != cudaSuccess) { status = conv_cuda_status(timing_err_, #call); goto done; } \
    } while (0)
#define TIMING_CONV(expr)                                   \
    do {                                                    \
        status = (expr);                                    \
        if (status != CONV_OK) goto done;                   \
    } while (0)

static int compare_floats(const void* a, const void* b) {
    const float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

static int check_arguments(const float* const* xs, const float* const* ws, float* const* ys, int n_sets,
                           int calls, int warmup, int reps, const float* median_ms) {
    if (!median_ms) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "median_ms is NULL");
    if (!xs || !ws || !ys) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "xs, ws or ys is NULL");
    if (n_sets < 1) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "n_sets must be >= 1, got %d", n_sets);
    if (calls < 1) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "calls must be >= 1, got %d", calls);
    if (warmup < 0) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "warmup must be >= 0, got %d", warmup);
    if (reps < 1) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "reps must be >= 1, got %d", reps);
    for (int i = 0; i < n_sets; ++i)
        if (!xs[i] || !ws[i] || !ys[i])
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "xs[%d], ws[%d] or ys[%d] is NULL", i, i, i);
    return CONV_OK;
}

extern "C" int conv2d_time(int variant, const conv_params* p, const float* const* xs, const float* const* ws,
                           float* const* ys, int n_sets, void* workspace, size_t workspace_bytes,
                           void* stream_arg, int calls, int warmup, int reps, float* median_ms,
                           float* times_ms) {
    int status = check_arguments(xs, ws, ys, n_sets, calls, warmup, reps, median_ms);
    if (status != CONV_OK) return status;
    int chosen = 0;
    status = conv2d_auto_choice(variant, p, &chosen);  // validates, checks support, tunes auto
    if (status != CONV_OK) return status;
    const conv_variant_entry* entry = conv_variant_entry_get(chosen);
    if (!entry->info.on_device)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "variant '%s' runs on the host: conv2d_time times device work; time a host "
                              "variant with a host clock around conv2d_forward",
                              entry->info.name);

    cudaStream_t stream = conv_stream(stream_arg);
    const bool own_stream = stream == nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t* events = nullptr;  // start and stop of every rep
    int events_made = 0;
    float* per_call = nullptr;
    cudaError_t end_err = cudaSuccess;

    if (own_stream) TIMING_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < n_sets; ++i)
        TIMING_CONV(conv2d_forward(variant, p, xs[i], ws[i], ys[i], workspace, workspace_bytes, stream));
    TIMING_CUDA(cudaStreamSynchronize(stream));  // a faulting kernel shows here, not inside the graph

    TIMING_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls && status == CONV_OK; ++i) {
        const int s = i % n_sets;
        status = conv2d_forward(variant, p, xs[s], ws[s], ys[s], workspace, workspace_bytes, stream);
    }
    end_err = cudaStreamEndCapture(stream, &graph);  // always leave capture mode, even after a failure
    if (status != CONV_OK) goto done;
    TIMING_CUDA(end_err);
    TIMING_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    for (int r = 0; r < warmup; ++r) TIMING_CUDA(cudaGraphLaunch(exec, stream));
    events = (cudaEvent_t*)calloc((size_t)reps * 2, sizeof *events);
    per_call = (float*)malloc((size_t)reps * sizeof *per_call);
    if (!events || !per_call) {
        status = conv_set_error(CONV_ERR_OUT_OF_MEMORY, "cannot allocate %d timing events on the host", reps);
        goto done;
    }
    for (; events_made < reps * 2; ++events_made) TIMING_CUDA(cudaEventCreate(&events[events_made]));
    for (int r = 0; r < reps; ++r) {
        TIMING_CUDA(cudaEventRecord(events[2 * r], stream));
        TIMING_CUDA(cudaGraphLaunch(exec, stream));
        TIMING_CUDA(cudaEventRecord(events[2 * r + 1], stream));
    }
    TIMING_CUDA(cudaStreamSynchronize(stream));
    for (int r = 0; r < reps; ++r) {
        float ms = 0.0f;
        TIMING_CUDA(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
        per_call[r] = ms / (float)calls;
        if (times_ms) times_ms[r] = per_call[r];
    }
    qsort(per_call, (size_t)reps, sizeof *per_call, compare_floats);
    *median_ms = reps % 2 ? per_call[reps / 2] : 0.5f * (per_call[reps / 2 - 1] + per_call[reps / 2]);

done:
    for (int e = 0; e < events_made; ++e) cudaEventDestroy(events[e]);
    free(events);
    free(per_call);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (own_stream && stream) cudaStreamDestroy(stream);
    if (status != CONV_OK) cudaGetLastError();  // leave no non-sticky error behind for the next call
    return status;
}
