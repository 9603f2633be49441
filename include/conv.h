/* conv.h — the whole public C ABI of libconv (convolution forward pass for NVIDIA GPUs).
 *
 * Layouts: input x is NCHW (B, C, H, W); weights w are (M, C, KH, KW); output y is NCHW
 * (B, M, OH, OW) with OH = (H + 2*pad_h - dilation_h*(KH-1) - 1) / stride_h + 1 (same for OW).
 * All data is float32. GPU entry points take device pointers; the `cpu` variant takes host pointers.
 *
 * Every function returns a conv_status (CONV_OK = 0, errors negative). conv_last_error() gives a
 * thread-local message with the detail (which argument, which CUDA error, how many bytes).
 * The library never exits and never prints.
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

/* Pseudo-variant ids for conv2d_forward: pick the fastest supported variant for the shape.
 * CONV_AUTO only picks exact fp32 variants; CONV_AUTO_FAST may pick reduced precision (TF32/FP16). */
enum { CONV_AUTO = -1, CONV_AUTO_FAST = -2 };

/* One parameter struct for every variant. */
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
    double max_rel_error;      /* the relative L2 error bound the variant is tested to */
    int available;             /* 1 if it can run in this build on this machine */
} conv_variant_info;

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
/* CONV_OK if the variant runs this shape here; else a status and a message naming the reason.
 * Accepts CONV_AUTO / CONV_AUTO_FAST. */
int conv_variant_supports(int variant, const conv_params* params);

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
/* Configuration `config` of a concrete variant (not CONV_AUTO*): CONV_ERR_UNSUPPORTED with the
 * reason where it cannot run the shape. */
int conv2d_forward_config(int variant, int config, const conv_params* params, const float* x, const float* w,
                          float* y, void* workspace, size_t workspace_bytes, void* stream);

/* ---- auto-tuning ----
 * CONV_AUTO / CONV_AUTO_FAST time every candidate variant (and each one's launch configurations) on
 * random data of a new shape the first time it is seen, within a time budget, check each candidate's
 * output against the direct kernel, and remember the fastest correct one in a cache file keyed by
 * GPU, library version, shape and precision. Tuning allocates its own buffers: do the first call of
 * a shape outside CUDA-graph capture. Tuning never changes results beyond the precision asked for. */
int conv_tune_set_cache_path(const char* path); /* NULL: $PYCONV_TUNE_CACHE, else ~/.cache/pyconv/tuning.txt */
int conv_tune_get_cache_path(char* path, size_t path_bytes);
int conv_tune_clear(void);                       /* forget every result, in memory and in the file */
int conv_tune_set_budget_ms(double ms);          /* budget of one shape's tuning (default 3000 ms) */
/* What auto chose for a shape (tuning it if new): "variant[config] 0.512 ms" */
int conv_tune_describe(int variant, const conv_params* params, char* text, size_t text_bytes);

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

int conv2d_fused(const conv_params* params, const float* x, const float* w, float* y,
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
int conv_device_synchronize(void);
int conv_event_create(void** event);
int conv_event_destroy(void* event);
int conv_event_record(void* event, void* stream);
int conv_event_synchronize(void* event);
int conv_event_elapsed_ms(void* start, void* stop, float* ms);

/* ---- benchmarking: what this GPU can do, and the op time of a variant (cuda/ceilings.cu, timing.cu) ---- */
/* Ceilings measured on the current device, each the best of several ~20 ms runs (a ceiling is what the
 * unit can do). A rate the GPU lacks is 0. GFLOP/s count an FMA as 2 flops. */
typedef struct conv_ceilings {
    double copy_gbytes_per_s;    /* device-to-device cudaMemcpy of up to 1 GiB: (bytes read + written) / s */
    double fp32_gflops;          /* FP32 FMA on the CUDA cores, every SM busy */
    double fp16_gflops;          /* half2 FMA on the CUDA cores */
    double fp16_tensor_gflops;   /* tensor cores through wmma 16x16x16, fp16 operands, fp32 accumulate (sm_70+) */
    double tf32_tensor_gflops;   /* tensor cores through wmma 16x16x8, tf32 operands (sm_80+) */
    int64_t l2_cache_bytes;      /* what a benchmark must rotate its operands past */
    int sm_count;
} conv_ceilings;
int conv_measure_ceilings(conv_ceilings* out);

/* Median device time of one call of a GPU variant, host launch overhead removed. `calls` launches,
 * call i on operand set i % n_sets (xs[], ws[], ys[]: n_sets device pointers each, so that small shapes
 * are not served from L2), are captured into one CUDA graph after one eager call per set; `warmup`
 * untimed replays follow, then `reps` replays each between two events. median_ms = median replay time
 * / calls; times_ms (NULL or reps floats) gets every replay's time / calls. variant: a GPU variant id,
 * CONV_AUTO or CONV_AUTO_FAST (resolved, and tuned, before the capture; the captured calls go through
 * conv2d_forward as a caller's would). stream: NULL for a private one (the legacy stream cannot be
 * captured). Workspace as for conv2d_forward. */
int conv2d_time(int variant, const conv_params* params, const float* const* xs, const float* const* ws,
                float* const* ys, int n_sets, void* workspace, size_t workspace_bytes, void* stream,
                int calls, int warmup, int reps, float* median_ms, float* times_ms);

#ifdef __cplusplus
}
#endif

#endif /* CONV_H */
