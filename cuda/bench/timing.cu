// timing.cu — conv2d_time: the op time of one variant with host launch overhead removed.
// `calls` launches, rotating through n_sets operand sets so that a small shape is not served from L2,
// are captured into one CUDA graph and its replays timed (conv_graph_time, cuda/core/graph_timing.cu):
// the kernels and the gaps between them on the device — the same protocol the bench tool applies to
// cuDNN (through torch.cuda.CUDAGraph), so the two sides compare like with like.
// Before the capture: auto is resolved (and tuned), and every set is run once eagerly, so a variant
// that cannot run returns the library's own message instead of failing inside the capture.
#include "conv_bench.h"
#include "cuda_util.cuh"

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

// conv2d_time's calls: variant on operand set i, through the public entry point (auto resolved by it).
struct TimedCalls {
    int variant;
    const conv_params* p;
    const float* const* xs;
    const float* const* ws;
    float* const* ys;
    void* workspace;
    size_t workspace_bytes;
    static int enqueue(void* context, int i, void* stream) {
        const TimedCalls* c = static_cast<const TimedCalls*>(context);
        return conv2d_forward(c->variant, c->p, c->xs[i], c->ws[i], c->ys[i], c->workspace, c->workspace_bytes,
                              stream);
    }
};

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
    if (own_stream) {
        const cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (err != cudaSuccess) return conv_cuda_status(err, "cudaStreamCreateWithFlags");
    }
    TimedCalls timed = {variant, p, xs, ws, ys, workspace, workspace_bytes};
    for (int i = 0; i < n_sets && status == CONV_OK; ++i) status = TimedCalls::enqueue(&timed, i, stream);
    if (status == CONV_OK) {  // a faulting kernel shows here, not inside the graph
        const cudaError_t err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) status = conv_cuda_status(err, "cudaStreamSynchronize");
    }
    if (status == CONV_OK)
        status = conv_graph_time(TimedCalls::enqueue, &timed, n_sets, calls, warmup, reps, stream, median_ms,
                                 times_ms);
    if (own_stream) cudaStreamDestroy(stream);
    if (status != CONV_OK) cudaGetLastError();  // leave no non-sticky error behind for the next call
    return status;
}
