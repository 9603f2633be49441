/* conv_internal.h — what the library's sources share and users never see: the variant table entry
 * (conv_impl, its launch configurations), the capability masks of variants.def, the error setter,
 * problem helpers and index limits. */
#ifndef CONV_INTERNAL_H
#define CONV_INTERNAL_H

#include "conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The operands of one run: device pointers for GPU variants, host pointers for cpu; x, w and y in
 * the problem's dtypes and layouts; bias NULL unless problem->bias. */
typedef struct conv_tensors {
    const void* x;
    const void* w;
    const void* bias;
    void* y;
} conv_tensors;

/* Runs the convolution on a validated problem that the variant (and this configuration) supports,
 * whose x and y element counts fit int32 (the dispatcher splits the batch to make it so). stream is a
 * cudaStream_t on the current device, which the dispatcher has set to the operands' device. Must be
 * graph-capture safe: no allocation, no synchronisation. */
typedef int (*conv_run_fn)(const conv_problem* p, const conv_tensors* t, void* workspace,
                           size_t workspace_bytes, void* stream);

/* One launch configuration of a variant: a name (for the tuning cache, reports and config=), how it
 * runs, and which problems it takes beyond the variant's own limits (NULL: all of them). Every
 * configuration of a variant gives the same result within the variant's bound. */
typedef struct conv_config {
    const char* name;
    conv_run_fn run;
    int (*supports)(const conv_problem* p);
} conv_config;

/* One algorithm. Adding a variant = one source file in cuda/variants/ defining
 * `const conv_impl conv_impl_<name>` + one line in variants.def (with its capabilities) + its entry
 * point's declaration in include/conv.h. */
typedef struct conv_impl {
    /* Limits beyond the capabilities declared in variants.def (kernel sizes, architecture, index
     * ranges): CONV_OK or CONV_ERR_UNSUPPORTED with conv_set_error naming the parameter. NULL: none. */
    int (*supports)(const conv_problem* p);
    /* Bytes of workspace for this problem. NULL: needs none. */
    int (*workspace_size)(const conv_problem* p, size_t* bytes);
    /* The launch configurations (at least one); the tuner times those that support a problem. */
    const conv_config* configs;
    int num_configs;
    /* The name of the configuration to run when none is pinned or tuned. NULL: configs[0]. */
    const char* (*default_config)(const conv_problem* p);
} conv_impl;

/* Capability masks for variants.def (1 << the enum value). */
#define CONV_DT_F32 (1u << CONV_F32)
#define CONV_DT_F16 (1u << CONV_F16)
#define CONV_DT_BF16 (1u << CONV_BF16)
#define CONV_DT_ALL (CONV_DT_F32 | CONV_DT_F16 | CONV_DT_BF16)
#define CONV_LY_NCHW (1u << CONV_NCHW)
#define CONV_LY_ALL ((1u << CONV_NCHW) | (1u << CONV_NHWC))
#define CONV_WL_MCKK (1u << CONV_MCKK)
#define CONV_WL_ALL ((1u << CONV_MCKK) | (1u << CONV_MKKC))
#define CONV_EP_NONE (1u << CONV_EPILOGUE_NONE)
#define CONV_EP_RELU (CONV_EP_NONE | (1u << CONV_EPILOGUE_RELU))
#define CONV_EP_ALL (CONV_EP_RELU | (1u << CONV_EPILOGUE_RELU_MAXPOOL))
#define CONV_EP_SILU (1u << CONV_EPILOGUE_SILU)

/* Variant ids, generated from variants.def: CONV_ID_cpu, CONV_ID_direct, ... CONV_ID_COUNT. */
enum conv_variant_id {
#define CONV_VARIANT(name, on_device, unit, max_rel_error, in_dt, out_dt, layouts, wlayouts, epilogues, \
                     groups, bias, dilation, idea)                                                       \
    CONV_ID_##name,
#include "variants.def"
#undef CONV_VARIANT
    CONV_ID_COUNT
};

/* The variant table (registry.c). impl is NULL where the variant is not built (GPU variants in a
 * build without CUDA). */
typedef struct conv_variant_entry {
    conv_variant_info info;
    conv_variant_caps caps;
    const conv_impl* impl;
} conv_variant_entry;
const conv_variant_entry* conv_variant_entry_get(int variant);

/* ---- problems (problem.c) ---- */
/* The problem of a legacy conv_params call: f32 NCHW, MCKK, groups 1, no bias, no epilogue; compute
 * from the legacy auto id (CONV_AUTO_FAST: HALF, else EXACT). */
void conv_problem_from_params(const conv_params* params, int legacy_variant, conv_problem* problem);
/* Copies a caller's problem (of any size this library knows) into a full one, validating it. */
int conv_problem_load(const conv_problem* in, conv_problem* out);
/* Convolution output size (before pooling) and the stored output size (after it). */
int64_t conv_out_h(const conv_problem* p);
int64_t conv_out_w(const conv_problem* p);
int64_t conv_y_h(const conv_problem* p);
int64_t conv_y_w(const conv_problem* p);
size_t conv_dtype_size(int dtype);
/* Elements of one input image, one stored output image, and the filter bank. */
int64_t conv_x_image(const conv_problem* p);
int64_t conv_y_image(const conv_problem* p);
int64_t conv_w_count(const conv_problem* p);
const char* conv_dtype_name(int dtype);

/* ---- capabilities and support (registry.c) ---- */
/* The one capability check: CONV_OK, or CONV_ERR_UNSUPPORTED naming the parameter the variant does
 * not declare. Then availability (build, device) and the variant's own supports(). */
int conv_entry_supports(const conv_variant_entry* e, const conv_problem* p);
/* Configuration index by name (-1 and an error if none), and whether one supports a problem. */
int conv_entry_config_find(const conv_variant_entry* e, const char* name, int* config);
int conv_entry_config_supports(const conv_variant_entry* e, int config, const conv_problem* p);
/* The configuration the variant runs by default for a problem. */
int conv_entry_default_config(const conv_variant_entry* e, const conv_problem* p);
/* Launches configuration `config` over batch chunks that fit int32 indexing (the current device). */
int conv_entry_launch(const conv_variant_entry* e, int config, const conv_problem* p, const conv_tensors* t,
                      void* workspace, size_t workspace_bytes, void* stream);
int conv_entry_workspace(const conv_variant_entry* e, const conv_problem* p, size_t* bytes);

/* Resolves CONV_AUTO / CONV_AUTO_FAST for a validated problem on the current device (auto.c): the
 * variant and its launch configuration. */
int conv_auto_resolve(int variant, const conv_problem* p, int* chosen, int* config);

/* ---- tuning (tune_cache.c: the persistent cache; tuner.cu: the measurements) ---- */
typedef struct conv_tune_candidate {
    int variant;
    int config;
} conv_tune_candidate;

typedef struct conv_tune_result {
    conv_tune_candidate best;
    float median_ms;  /* its time a call: in the finals' graph replays where they ran, else its first-pass median */
} conv_tune_result;

/* Times the candidates on random data of the problem, within the tuning budget, checks each one's
 * output against the `direct` kernel, times the closest few again as programs run them (graph replays),
 * and returns the fastest correct one there (tuner.cu). */
int conv_tune_measure(const conv_problem* p, const conv_tune_candidate* candidates, int count,
                      double budget_ms, conv_tune_result* result);

/* Enqueues one call on operand set `set` on stream (a cudaStream_t); CONV_OK or the call's status. */
typedef int (*conv_enqueue_fn)(void* context, int set, void* stream);
/* The time of a call as programs see it (graph_timing.cu). A timed graph: `calls` enqueues cycling through
 * n_sets operand sets, captured on stream into one instantiated CUDA graph (exec a cudaGraphExec_t). */
typedef struct conv_timed_graph {
    void* exec;
    int calls;
} conv_timed_graph;
int conv_graph_capture(conv_enqueue_fn enqueue, void* context, int n_sets, int calls, void* stream,
                       conv_timed_graph* graph);
void conv_graph_release(conv_timed_graph* graph); /* exec NULL: nothing to do */
/* n graphs timed in rounds, each replaying every graph once in turn: `warmup` untimed rounds, then `reps` rounds,
 * each replay between events; median_ms[k] graph k's median time per call, and times_ms (NULL or reps * n
 * values, round-major) every replay's. */
int conv_graph_time_rounds(const conv_timed_graph* graphs, int n, int warmup, int reps, void* stream,
                           float* median_ms, float* times_ms);
/* One graph captured, timed and released: the median time per call, each rep's in times_ms where not NULL.
 * Arguments are the caller's to check. */
int conv_graph_time(conv_enqueue_fn enqueue, void* context, int n_sets, int calls, int warmup, int reps,
                    void* stream, float* median_ms, float* times_ms);

/* The cache of tuning results, keyed by GPU, build and the whole problem (tune_cache.c). */
int conv_tune_cache_get(const char* gpu, const conv_problem* p, conv_tune_result* result);
double conv_tune_budget_ms(void);
int conv_gpu_name(char* name, size_t bytes);  /* current device's name (device_runtime.cu) */

/* ---- devices (device_runtime.cu; device_stub.c without CUDA) ---- */
/* 1 when a CUDA device can be used right now (driver and device present); sets the error otherwise. */
int conv_cuda_ready(void);
/* 1 once this library has used CUDA in this process (so asking where a pointer lives costs no new context). */
int conv_cuda_started(void);
/* The CUDA driver and runtime versions (part of the tuning key); 0, 0 without CUDA. */
int conv_cuda_versions(int* driver, int* runtime);
/* Current device, and switching to another for the length of a call. */
int conv_device_enter(int device, int* previous);
/* CONV_OK when the library holds code this device runs, else CONV_ERR_NO_DEVICE saying which
 * architectures were built (a GPU variant's plan asks before it is made). */
int conv_device_built_for(int device);
void conv_device_leave(int previous);
/* Records the name of a kernel just launched on the current device, so that an asynchronous fault
 * reported later can name the last kernel launched. */
void conv_note_launch(const char* kernel_name);

/* Sets the thread-local message and returns status, so `return conv_set_error(...)` reads well. */
int conv_set_error(int status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void conv_clear_error(void);

/* Largest element count one launch's x or y may have: kernels index with 32-bit ints, and 2^30
 * rather than 2^31-1 leaves headroom for grid-stride loops, whose index passes the count by up to one
 * grid's width (at most 2^29 threads here) before the loop test ends them. */
#define CONV_INDEX_LIMIT ((int64_t)1 << 30)

#ifdef __cplusplus
}
#endif

#endif
