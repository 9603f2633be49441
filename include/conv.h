/* conv.h — the convolution ABI of libconv (convolution forward pass for NVIDIA GPUs). Two more headers
 * beside it declare what is not convolution: conv_ops.h the LeNet demo's device ops (resize, softmax +
 * argmax), conv_bench.h the bench's GPU ceilings and timer (conv2d_time).
 *
 * A convolution is described by a conv_problem (size field first, so the struct can grow without
 * breaking callers): shape, stride, padding, dilation, groups, the dtypes of x, w and y, their
 * layouts, the compute precision the caller allows, a bias and a fused epilogue. A plan binds a
 * problem to a variant (and launch configuration) once; running it only launches:
 *
 *   conv_problem p;  conv_problem_init(&p);     sizes, defaults: groups 1, stride/dilation 1, f32 NCHW
 *   p.B = 100; p.C = 1; p.H = 86; p.W = 86; p.M = 4; p.KH = 7; p.KW = 7;
 *   conv_plan* plan;  conv2d_plan_create(CONV_AUTO, &p, NULL, -1, &plan);
 *   conv2d_plan_run(plan, d_x, d_w, NULL, d_y, ws, ws_bytes, stream);
 *   conv2d_plan_destroy(plan);
 *
 * Tensors (batch outermost, C-contiguous in their layout):
 *   x: NCHW (B, C, H, W) or NHWC (B, H, W, C);  w: MCKK (M, C/groups, KH, KW) or MKKC (M, KH, KW, C/groups)
 *   y: NCHW (B, M, OH, OW) or NHWC (B, OH, OW, M), in y's layout and dtype; bias: M values, y's dtype.
 *   OH = (H + 2*pad_h + pad_h_extra - dilation_h*(KH-1) - 1) / stride_h + 1 (the same for OW); with the
 *   ReLU + max-pool epilogue, OH and OW are the pooled sizes (conv_problem_output_shape).
 * GPU variants take device pointers (all on one device: the call runs there, whatever the current
 * device is, and leaves the current device as it was); the `cpu` variant takes host pointers.
 *
 * Every function returns a conv_status (CONV_OK = 0, errors negative). conv_last_error() gives a
 * thread-local message with the detail (which argument, which CUDA error, how many bytes).
 * The library never exits and never prints.
 *
 * The older fp32-NCHW-only calls (conv_params, conv2d_forward, conv2d_<variant>) remain as thin
 * wrappers over the problem path.
 *
 * This file is parsed as written by cffi: plain declarations only, no macros in them.
 */
#ifndef CONV_H
#define CONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum conv_status {
    CONV_OK = 0,
    CONV_ERR_INVALID_ARGUMENT = -1,   /* a parameter or pointer is invalid; the message names it */
    CONV_ERR_UNSUPPORTED = -2,        /* this variant cannot run this shape; the message says why */
    CONV_ERR_NO_CUDA_BUILD = -3,      /* the library was built without a CUDA compiler */
    CONV_ERR_NO_DEVICE = -4,          /* no CUDA driver or no CUDA device */
    CONV_ERR_OUT_OF_MEMORY = -5,      /* a device or pinned allocation failed; the message has the bytes */
    CONV_ERR_CUDA = -6,               /* any other CUDA runtime error; the message names it */
    CONV_ERR_WORKSPACE_TOO_SMALL = -7,/* the workspace passed is smaller than the query said */
    CONV_ERR_TOO_LARGE = -8,          /* a size passes what the library can index */
    CONV_ERR_INTERNAL = -9            /* a bug in libconv */
} conv_status;

/* Pseudo-variant ids: pick the fastest variant that supports the problem here. With a conv_problem,
 * CONV_AUTO picks within the problem's `compute`; CONV_AUTO_FAST is CONV_AUTO with `compute` raised
 * to CONV_COMPUTE_FAST (the legacy calls: CONV_AUTO is exact fp32, CONV_AUTO_FAST allows TF32/FP16). */
enum { CONV_AUTO = -1, CONV_AUTO_FAST = -2 };

/* ---- the problem descriptor ---- */
typedef enum conv_dtype { CONV_F32 = 0, CONV_F16 = 1, CONV_BF16 = 2 } conv_dtype;
typedef enum conv_layout { CONV_NCHW = 0, CONV_NHWC = 1 } conv_layout;                   /* x and y */
typedef enum conv_filter_layout { CONV_MCKK = 0, CONV_MKKC = 1 } conv_filter_layout;    /* w */
/* The least exact arithmetic the caller allows; each level allows the ones above it. */
typedef enum conv_compute {
    CONV_COMPUTE_EXACT = 0,   /* fp32 products and sums (rel. L2 error <= 1e-5) */
    CONV_COMPUTE_TF32 = 1,    /* operands rounded to TF32 on tensor cores, fp32 accumulation */
    CONV_COMPUTE_HALF = 2,    /* operands rounded to fp16/bf16, accumulation in fp32 (see each variant's bound) */
    CONV_COMPUTE_FAST = 3     /* also partial sums in fp16 (half2 FMAs in short runs flushed into fp32) */
} conv_compute;
/* Applied to each output value before it is stored, after the optional bias. */
typedef enum conv_epilogue {
    CONV_EPILOGUE_NONE = 0,
    CONV_EPILOGUE_RELU = 1,          /* max(v, 0); NaN stays NaN */
    CONV_EPILOGUE_RELU_MAXPOOL = 2,  /* ReLU, then max over pool_h x pool_w windows (no padding) */
    CONV_EPILOGUE_SILU = 3           /* v * sigmoid(v) = v / (1 + exp(-v)) (sequence models' conv + SiLU) */
} conv_epilogue;

typedef struct conv_problem {
    uint64_t size;             /* sizeof(conv_problem) as the caller compiled it: conv_problem_init sets it */
    int64_t B, C, H, W;        /* input */
    int64_t M, KH, KW;         /* output maps and filter size */
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;      /* zeros before the first row / column, and after the last ... */
    int64_t pad_h_extra, pad_w_extra; /* ... plus these many more after the last (padding='same' with an even total);
                                  * negative down to -pad: fewer after. Causal padding (zeros before only) is
                                  * pad_w = dilation_w*(KW-1), pad_w_extra = -pad_w; only cpu, direct and
                                  * depthwise_conv1d take a negative extra */
    int64_t dilation_h, dilation_w;
    int64_t groups;            /* C and M divisible by it; w holds C/groups channels per map */
    int32_t x_dtype, w_dtype, y_dtype;  /* conv_dtype; w has x's dtype */
    int32_t x_layout, y_layout;         /* conv_layout */
    int32_t w_layout;                   /* conv_filter_layout */
    int32_t compute;                    /* conv_compute */
    int32_t bias;                       /* 1: a bias of M values (y's dtype) is passed to the run */
    int32_t epilogue;                   /* conv_epilogue */
    int32_t pool_ceil;                  /* max-pool: 1 for ceil mode (a last partial window counts) */
    int64_t pool_h, pool_w, pool_stride_h, pool_stride_w;   /* max-pool window and stride */
} conv_problem;

/* Sets size, every field to its default (groups, strides, dilations 1; f32, NCHW, MCKK, exact; no
 * bias; no epilogue) and the shape to 0, which the caller fills in. */
int conv_problem_init(conv_problem* problem);
/* CONV_OK, or INVALID_ARGUMENT / TOO_LARGE naming the field (every product checked for overflow). */
int conv_problem_validate(const conv_problem* problem);
/* y's dimensions as (B, M, OH, OW), whatever its layout; OH, OW pooled under the max-pool epilogue. */
int conv_problem_output_shape(const conv_problem* problem, int64_t* shape4);
/* One line naming every field, e.g. for logs; the tuning cache keys on the same text. */
int conv_problem_describe(const conv_problem* problem, char* text, size_t text_bytes);

/* ---- plans: a problem bound to a concrete variant and launch configuration ----
 * create validates, resolves CONV_AUTO / CONV_AUTO_FAST (tuning a new problem on first use: do it
 * outside CUDA-graph capture), picks the launch configuration (`config` names one of the variant's,
 * NULL: the tuned or default one) and reports the workspace. device: the GPU the plan runs on (-1: the
 * current one); run refuses operands on another device. run checks its pointers, then only launches
 * on `stream` (NULL: the legacy default stream): no allocation, no synchronisation, capture-safe.
 * Handles are checked: a destroyed plan, or a pointer create never returned, is CONV_ERR_INVALID_ARGUMENT
 * in every plan function (destroy included; destroy(NULL) does nothing). A plan may be destroyed while
 * another thread runs it: it is freed when that call returns. `stream` is the caller's word, as in CUDA:
 * a value that is no stream of the plan's device is undefined behaviour (the driver may crash). */
typedef struct conv_plan conv_plan;
typedef struct conv_plan_info {
    int variant;               /* the concrete variant chosen */
    const char* variant_name;
    const char* config_name;   /* its launch configuration */
    int device;                /* -1 for the cpu variant */
    int on_device;
    size_t workspace_bytes;
} conv_plan_info;
int conv2d_plan_create(int variant, const conv_problem* problem, const char* config, int device, conv_plan** plan);
int conv2d_plan_get_info(const conv_plan* plan, conv_plan_info* info);
int conv2d_plan_run(const conv_plan* plan, const void* x, const void* w, const void* bias, void* y,
                    void* workspace, size_t workspace_bytes, void* stream);
int conv2d_plan_destroy(conv_plan* plan);
/* conv2d_plan_run without asking CUDA where x, w, bias, y and the workspace live: for bindings that
 * know from their arrays' metadata that every operand is on the plan's device (host memory for the
 * cpu variant). Everything else is checked as in conv2d_plan_run. */
int conv2d_plan_launch(const conv_plan* plan, const void* x, const void* w, const void* bias, void* y,
                       void* workspace, size_t workspace_bytes, void* stream);
/* One call: create a plan on the operands' device, run it, destroy it. */
int conv2d_execute(int variant, const conv_problem* problem, const void* x, const void* w, const void* bias,
                   void* y, void* workspace, size_t workspace_bytes, void* stream);
int conv2d_execute_workspace_size(int variant, const conv_problem* problem, size_t* bytes);

/* The legacy parameter struct: fp32 NCHW, MCKK weights, groups 1, no bias or epilogue. */
typedef struct conv_params {
    int64_t B, C, H, W;        /* input (B, C, H, W) */
    int64_t M, KH, KW;         /* weights (M, C, KH, KW) */
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;      /* zero padding on both sides */
    int64_t dilation_h, dilation_w;
} conv_params;

/* What the library knows of one variant. Strings are static. */
typedef struct conv_variant_info {
    const char* name;          /* e.g. "direct"; the same as the entry point's suffix */
    const char* idea;          /* one line: what the variant demonstrates */
    int on_device;             /* 1: GPU pointers; 0: host pointers (cpu) */
    int exact;                 /* 1: fp32 arithmetic (rel. L2 error <= 1e-5); 0: reduced precision */
    double max_rel_error;      /* the relative L2 error bound the variant is tested to (fp32 in and out) */
    int available;             /* 1 if it can run in this build on this machine */
} conv_variant_info;

/* What a variant declares it can do (beside its line in the variant table); bit masks use
 * 1 << the enum value: dtypes 1 << CONV_F16, layouts 1 << CONV_NHWC, epilogues 1 << CONV_EPILOGUE_RELU. */
typedef enum conv_unit {
    CONV_UNIT_CPU = 0,         /* host cores, fp32 */
    CONV_UNIT_FP32 = 1,        /* CUDA cores, fp32 FMA */
    CONV_UNIT_FP16 = 2,        /* CUDA cores, half2 FMA in short runs flushed into fp32 */
    CONV_UNIT_TENSOR_HALF = 3, /* tensor cores, fp16/bf16 operands, fp32 accumulation */
    CONV_UNIT_TENSOR_TF32 = 4  /* tensor cores, tf32 operands, fp32 accumulation */
} conv_unit;
typedef struct conv_variant_caps {
    int unit;                  /* conv_unit */
    int compute;               /* the conv_compute level a problem must allow for this variant */
    unsigned in_dtypes;        /* x and w dtypes */
    unsigned out_dtypes;       /* y (and bias) dtypes */
    unsigned layouts;          /* x and y layouts */
    unsigned filter_layouts;   /* w layouts */
    unsigned epilogues;        /* epilogues */
    int groups;                /* 1: any groups; 0: groups == 1 only */
    int bias;                  /* 1: takes a bias */
    int dilation;              /* 1: any dilation; 0: 1 only */
    int max_stride;            /* 0: any */
} conv_variant_caps;

/* ---- status and library facts ---- */
const char* conv_status_string(int status);
const char* conv_last_error(void);          /* thread-local detail of the last failure on this thread */
const char* conv_version(void);
int conv_built_with_cuda(void);             /* 1 if built with a CUDA compiler */

/* ---- shapes ---- */
int conv_output_size(const conv_params* params, int64_t* out_h, int64_t* out_w);
int conv_validate(const conv_params* params);   /* CONV_OK or INVALID_ARGUMENT naming the parameter */

/* ---- variants ---- */
int conv_variant_count(void);
int conv_variant_find(const char* name, int* variant);
int conv_variant_get_info(int variant, conv_variant_info* info);
int conv_variant_get_caps(int variant, conv_variant_caps* caps);
/* CONV_OK if the variant runs this shape here; else a status and a message naming the reason.
 * Accepts CONV_AUTO / CONV_AUTO_FAST. */
int conv_variant_supports(int variant, const conv_params* params);
int conv_variant_supports_problem(int variant, const conv_problem* problem);

/* ---- the dispatcher: any variant id, CONV_AUTO or CONV_AUTO_FAST ---- */
int conv2d_workspace_size(int variant, const conv_params* params, size_t* bytes);
int conv2d_forward(int variant, const conv_params* params, const float* x, const float* w, float* y,
                   void* workspace, size_t workspace_bytes, void* stream);
/* Which variant CONV_AUTO / CONV_AUTO_FAST resolves to for this shape (tuning it on first use). */
int conv2d_auto_choice(int variant, const conv_params* params, int* chosen);

/* ---- launch configurations ----
 * Tunable variants have several launch configurations (block shape, outputs per thread, kernel
 * family); the tuner sweeps them and auto launches the winner, a variant's own entry point its
 * default. These pin one, e.g. to compare them or to reproduce a tuned launch. */
int conv_variant_config_count(int variant, int* count);  /* 0: not tunable (one launch only) */
int conv_variant_config_name(int variant, int config, const char** name);
/* CONV_OK if configuration `config` of a concrete variant runs this shape here; else why not. */
int conv_variant_config_supports(int variant, int config, const conv_params* params);
int conv_variant_config_supports_problem(int variant, int config, const conv_problem* problem);
/* Configuration `config` of a concrete variant (not CONV_AUTO*): CONV_ERR_UNSUPPORTED with the
 * reason where it cannot run the shape. */
int conv2d_forward_config(int variant, int config, const conv_params* params, const float* x, const float* w,
                          float* y, void* workspace, size_t workspace_bytes, void* stream);

/* ---- auto-tuning ----
 * CONV_AUTO / CONV_AUTO_FAST time every candidate variant (and each one's launch configurations) on
 * random data of a new problem the first time it is seen, within a time budget, check each candidate's
 * output against the direct kernel, and remember the fastest correct one in a cache file keyed by the
 * GPU model, the build id (a hash of the library's sources and build settings), the CUDA driver and
 * runtime versions and the whole problem; processes share the file, and one tunes a problem while
 * the others wait for its result. Tuning allocates its own buffers: do the first call of a problem
 * outside CUDA-graph capture. Tuning never changes results beyond the precision asked for. */
int conv_tune_set_cache_path(const char* path); /* NULL: $PYCONV_TUNE_CACHE, else ~/.cache/pyconv/tuning.txt */
int conv_tune_get_cache_path(char* path, size_t path_bytes);
int conv_tune_clear(void);                       /* forget every result, in memory and in the file */
/* Rewrite the cache file with only the newest line per problem of this build (either count may be NULL). */
int conv_tune_compact(int* lines_kept, int* lines_dropped);
int conv_tune_set_budget_ms(double ms);          /* budget of one shape's tuning (default 3000 ms) */
/* The calling thread's own budget, used instead of the process's by the tuning this thread does; ms < 0
 * removes it. get: the thread's budget, -1 where it has none. */
int conv_tune_set_thread_budget_ms(double ms);
int conv_tune_get_thread_budget_ms(double* ms);
/* What auto chose for a shape (tuning it if new): "variant[config] 0.512 ms" */
int conv_tune_describe(int variant, const conv_params* params, char* text, size_t text_bytes);
int conv_tune_describe_problem(int variant, const conv_problem* problem, char* text, size_t text_bytes);

/* ---- one entry point per algorithm (same signature; see README for what each shows) ---- */
int conv2d_cpu(const conv_params* params, const float* x, const float* w, float* y,
               void* workspace, size_t workspace_bytes, void* stream);
int conv2d_direct(const conv_params* params, const float* x, const float* w, float* y,
                  void* workspace, size_t workspace_bytes, void* stream);
int conv2d_direct_const(const conv_params* params, const float* x, const float* w, float* y,
                        void* workspace, size_t workspace_bytes, void* stream);
int conv2d_tiled(const conv_params* params, const float* x, const float* w, float* y,
                 void* workspace, size_t workspace_bytes, void* stream);
int conv2d_unroll_gemm(const conv_params* params, const float* x, const float* w, float* y,
                       void* workspace, size_t workspace_bytes, void* stream);
int conv2d_restrict_unroll(const conv_params* params, const float* x, const float* w, float* y,
                           void* workspace, size_t workspace_bytes, void* stream);

int conv2d_implicit_gemm(const conv_params* params, const float* x, const float* w, float* y,
                         void* workspace, size_t workspace_bytes, void* stream);
int conv2d_fp16(const conv_params* params, const float* x, const float* w, float* y,
                void* workspace, size_t workspace_bytes, void* stream);
int conv2d_wmma(const conv_params* params, const float* x, const float* w, float* y,
                void* workspace, size_t workspace_bytes, void* stream);
int conv2d_wmma_tf32(const conv_params* params, const float* x, const float* w, float* y,
                     void* workspace, size_t workspace_bytes, void* stream);
int conv2d_direct_regblock(const conv_params* params, const float* x, const float* w, float* y,
                           void* workspace, size_t workspace_bytes, void* stream);
int conv2d_mma_fp16(const conv_params* params, const float* x, const float* w, float* y,
                    void* workspace, size_t workspace_bytes, void* stream);
int conv2d_implicit_gemm_tf32(const conv_params* params, const float* x, const float* w, float* y,
                              void* workspace, size_t workspace_bytes, void* stream);
int conv2d_implicit_gemm_f16(const conv_params* params, const float* x, const float* w, float* y,
                             void* workspace, size_t workspace_bytes, void* stream);
int conv2d_grouped_direct(const conv_params* params, const float* x, const float* w, float* y,
                          void* workspace, size_t workspace_bytes, void* stream);
int conv2d_winograd(const conv_params* params, const float* x, const float* w, float* y,
                    void* workspace, size_t workspace_bytes, void* stream);
int conv2d_depthwise_conv1d(const conv_params* params, const float* x, const float* w, float* y,
                            void* workspace, size_t workspace_bytes, void* stream);
int conv2d_fft(const conv_params* params, const float* x, const float* w, float* y,
               void* workspace, size_t workspace_bytes, void* stream);

/* ---- causal depthwise conv1d, one step of decoding ----
 * The state update of a causal depthwise conv1d (sequence models' short conv) for T new tokens: for
 * each (b, d) the window is state[b, d, 0..S) (the last S inputs, oldest first) followed by x's T new
 * values; y[b, d, t] = epilogue(bias[d] + sum_k w[d, k] * window[S - (K-1) + t + k]), and state then
 * holds the window's last S values (in place). problem: the causal conv of the new tokens: H = KH = 1,
 * W = T, C = M = groups = D, KW = K, stride 1, dilation 1, pad_w = K-1, pad_w_extra = -(K-1); x and y
 * (B, D, T) in NCHW or (B, T, D) in NHWC, w (D, 1, 1, K) (MCKK and MKKC are the same here); epilogue
 * none, ReLU or SiLU; compute any. state: (B, D, S) contiguous, x's dtype, S = state_len >= K-1.
 * Device pointers on one device (the call runs there); y may not overlap x or state. Capture-safe. */
int conv1d_causal_update(const conv_problem* problem, int64_t state_len, const void* x, void* state, const void* w,
                         const void* bias, void* y, void* stream);

/* ---- device helpers, so that callers need no other CUDA binding ---- */
int conv_device_count(int* count);
int conv_device_name(int device, char* name, size_t name_bytes);
int conv_set_device(int device);
int conv_get_device(int* device);
int conv_mem_info(size_t* free_bytes, size_t* total_bytes);
int conv_malloc(void** ptr, size_t bytes);
int conv_free(void* ptr);
int conv_malloc_host(void** ptr, size_t bytes);  /* pinned host memory, for overlapped copies */
int conv_free_host(void* ptr);
int conv_memcpy_h2d(void* dst, const void* src, size_t bytes, void* stream);
int conv_memcpy_d2h(void* dst, const void* src, size_t bytes, void* stream);
int conv_memcpy_d2d(void* dst, const void* src, size_t bytes, void* stream);
int conv_memset(void* ptr, int value, size_t bytes, void* stream);
int conv_stream_create(void** stream);
int conv_stream_destroy(void* stream);
int conv_stream_synchronize(void* stream);
int conv_device_synchronize(void);   /* the current device; a kernel fault names the last kernel launched */
/* Where a pointer lives: *device = its GPU, or -1 for host memory (pageable or pinned). */
int conv_pointer_device(const void* ptr, int* device);
/* The device a stream belongs to (NULL: the current device's legacy stream). */
int conv_stream_device(void* stream, int* device);
/* Makes `waiter` wait (on the GPU, the host does not block) for the work queued on `producer` so far. */
int conv_stream_wait_stream(void* waiter, void* producer);
/* Stream-ordered allocation from the device's memory pool (no device-wide synchronisation on free):
 * the memory may be used on `stream` (or after it, in stream order) and is freed on it. */
int conv_malloc_async(void** ptr, size_t bytes, void* stream);
int conv_free_async(void* ptr, void* stream);
/* Returns the pool's unused memory of every device to the driver (pyconv.empty_cache). */
int conv_pool_trim(void);
int conv_event_create(void** event);
int conv_event_destroy(void* event);
int conv_event_record(void* event, void* stream);
int conv_event_synchronize(void* event);
int conv_stream_wait_event(void* stream, void* event);  /* the GPU waits; the host does not */
int conv_event_elapsed_ms(void* start, void* stop, float* ms);

#ifdef __cplusplus
}
#endif

#endif /* CONV_H */
