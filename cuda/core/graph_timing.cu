// graph_timing.cu — the time of a call as programs and the bench see it. `calls` enqueues, cycling through
// n_sets operand sets (so that a small problem does not find its operands in L2), are captured into one
// CUDA graph; each timed replay sits between two events, and the median replay time / calls is the time of a
// call. Consecutive calls overlap as they do in a program (programmatic dependent launch), and one graph
// launch stands for all of them, so the host's launch cost is not in it. Several graphs are timed in rounds,
// each round replaying every graph once in turn, so that a change in the GPU's state between rounds (clocks,
// another process) reaches all of them alike. conv2d_time (the bench's, in cuda/bench/timing.cu) and the
// tuner's finals (tuner.cu) time this way.
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

extern "C" int conv_graph_capture(conv_enqueue_fn enqueue, void* context, int n_sets, int calls, void* stream_arg,
                                  conv_timed_graph* out) {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_arg);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    int status = CONV_OK;
    out->exec = nullptr;
    out->calls = calls;
    GRAPH_TIMING_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls && status == CONV_OK; ++i) status = enqueue(context, i % n_sets, stream);
    {
        const cudaError_t end_err = cudaStreamEndCapture(stream, &graph);  // leave capture mode even after a failure
        if (status != CONV_OK) goto done;
        GRAPH_TIMING_CUDA(end_err);
    }
    GRAPH_TIMING_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    out->exec = exec;
done:
    if (graph) cudaGraphDestroy(graph);
    if (status != CONV_OK) cudaGetLastError();  // leave no non-sticky error behind for the next call
    return status;
}

extern "C" void conv_graph_release(conv_timed_graph* g) {
    if (g->exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g->exec));
    g->exec = nullptr;
}

extern "C" int conv_graph_time_rounds(const conv_timed_graph* graphs, int n, int warmup, int reps, void* stream_arg,
                                      float* median_ms, float* times_ms) {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_arg);
    const int events_wanted = 2 * reps * n;  // start and stop of every timed replay
    cudaEvent_t* events = (cudaEvent_t*)calloc((size_t)events_wanted, sizeof *events);
    float* per_call = (float*)malloc((size_t)reps * n * sizeof *per_call);  // graph-major
    int events_made = 0;
    int status = CONV_OK;
    if (!events || !per_call) {
        status = conv_set_error(CONV_ERR_OUT_OF_MEMORY, "cannot allocate %d timing events on the host", events_wanted);
        goto done;
    }
    for (; events_made < events_wanted; ++events_made) GRAPH_TIMING_CUDA(cudaEventCreate(&events[events_made]));
    for (int r = 0; r < warmup; ++r)
        for (int k = 0; k < n; ++k)
            GRAPH_TIMING_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphs[k].exec), stream));
    for (int r = 0; r < reps; ++r)
        for (int k = 0; k < n; ++k) {
            cudaEvent_t* e = &events[2 * (r * n + k)];
            GRAPH_TIMING_CUDA(cudaEventRecord(e[0], stream));
            GRAPH_TIMING_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphs[k].exec), stream));
            GRAPH_TIMING_CUDA(cudaEventRecord(e[1], stream));
        }
    GRAPH_TIMING_CUDA(cudaStreamSynchronize(stream));
    for (int r = 0; r < reps; ++r)
        for (int k = 0; k < n; ++k) {
            float ms = 0.0f;
            GRAPH_TIMING_CUDA(cudaEventElapsedTime(&ms, events[2 * (r * n + k)], events[2 * (r * n + k) + 1]));
            per_call[k * reps + r] = ms / (float)graphs[k].calls;
            if (times_ms) times_ms[r * n + k] = per_call[k * reps + r];
        }
    for (int k = 0; k < n; ++k) {
        float* t = per_call + k * reps;
        qsort(t, (size_t)reps, sizeof *t, compare_floats);
        median_ms[k] = reps % 2 ? t[reps / 2] : 0.5f * (t[reps / 2 - 1] + t[reps / 2]);
    }
done:
    for (int e = 0; e < events_made; ++e) cudaEventDestroy(events[e]);
    free(events);
    free(per_call);
    if (status != CONV_OK) cudaGetLastError();
    return status;
}

extern "C" int conv_graph_time(conv_enqueue_fn enqueue, void* context, int n_sets, int calls, int warmup, int reps,
                               void* stream, float* median_ms, float* times_ms) {
    conv_timed_graph g;
    int status = conv_graph_capture(enqueue, context, n_sets, calls, stream, &g);
    if (status == CONV_OK) status = conv_graph_time_rounds(&g, 1, warmup, reps, stream, median_ms, times_ms);
    conv_graph_release(&g);
    return status;
}
