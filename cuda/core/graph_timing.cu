// graph_timing.cu — conv_graph_time: the time of a call as programs and the bench see it. `calls` enqueues,
// cycling through n_sets operand sets (so that a small problem does not find its operands in L2), are captured
// into one CUDA graph; each timed replay sits between two events, and the median replay time / calls is the
// time of a call. Consecutive calls overlap as they do in a program (programmatic dependent launch), and one
// graph launch stands for all of them, so the host's launch cost is not in it. conv2d_time (the bench's, in
// cuda/bench/timing.cu) and the tuner's finals (tuner.cu) time this way.
#include <stdlib.h>

#include "cuda_util.cuh"

// Jump to the cleanup with a status after a failed CUDA call.
#define GRAPH_TIMING_CUDA(call)                                                                              \
    do {                                                                                                     \
        cudaError_t graph_timing_err_ = (call);                                                              \
        if (graph_timing_err_ != cudaSuccess) { status = conv_cuda_status(graph_timing_err_, #call); goto done; } \
    } while (0)

static int compare_floats(const void* a, const void* b) {
    const float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

extern "C" int conv_graph_time(conv_enqueue_fn enqueue, void* context, int n_sets, int calls, int warmup, int reps,
                               void* stream_arg, float* median_ms, float* times_ms) {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_arg);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t* events = nullptr;  // start and stop of every rep
    int events_made = 0;
    float* per_call = nullptr;
    cudaError_t end_err = cudaSuccess;
    int status = CONV_OK;

    GRAPH_TIMING_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls && status == CONV_OK; ++i) status = enqueue(context, i % n_sets, stream);
    end_err = cudaStreamEndCapture(stream, &graph);  // always leave capture mode, even after a failure
    if (status != CONV_OK) goto done;
    GRAPH_TIMING_CUDA(end_err);
    GRAPH_TIMING_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    for (int r = 0; r < warmup; ++r) GRAPH_TIMING_CUDA(cudaGraphLaunch(exec, stream));
    events = (cudaEvent_t*)calloc((size_t)reps * 2, sizeof *events);
    per_call = (float*)malloc((size_t)reps * sizeof *per_call);
    if (!events || !per_call) {
        status = conv_set_error(CONV_ERR_OUT_OF_MEMORY, "cannot allocate %d timing events on the host", reps);
        goto done;
    }
    for (; events_made < reps * 2; ++events_made) GRAPH_TIMING_CUDA(cudaEventCreate(&events[events_made]));
    for (int r = 0; r < reps; ++r) {
        GRAPH_TIMING_CUDA(cudaEventRecord(events[2 * r], stream));
        GRAPH_TIMING_CUDA(cudaGraphLaunch(exec, stream));
        GRAPH_TIMING_CUDA(cudaEventRecord(events[2 * r + 1], stream));
    }
    GRAPH_TIMING_CUDA(cudaStreamSynchronize(stream));
    for (int r = 0; r < reps; ++r) {
        float ms = 0.0f;
        GRAPH_TIMING_CUDA(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
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
    if (status != CONV_OK) cudaGetLastError();  // leave no non-sticky error behind for the next call
    return status;
}
