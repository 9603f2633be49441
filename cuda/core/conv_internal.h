/* conv_internal.h — what the library's sources share and users never see:
 * the variant table entry (conv_impl), the error setter, and index limits. */
#ifndef CONV_INTERNAL_H
#define CONV_INTERNAL_H

#include "conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One algorithm. Adding a variant = one source file defining `const conv_impl conv_impl_<name>`
 * + one line in variants.def + its entry point's declaration in include/conv.h. */
typedef struct conv_impl {
    /* CONV_OK or CONV_ERR_UNSUPPORTED (with conv_set_error naming the parameter). NULL: all shapes. */
    int (*supports)(const conv_params* p);
    /* Bytes of workspace for this shape. NULL: needs none. */
    int (*workspace_size)(const conv_params* p, size_t* bytes);
    /* Runs the convolution on validated, supported parameters whose x and y element counts fit in
     * int32 (the dispatcher splits the batch to make it so). Pointers are device pointers except
     * for host variants; stream is a cudaStream_t. Must be graph-capture safe: no allocation,
     * no synchronisation. */
    int (*launch)(const conv_params* p, const float* x, const float* w, float* y,
                  void* workspace, size_t workspace_bytes, void* stream);
    /* Optional, for variants with tunable launch parameters (block shape, outputs per thread, ...).
     * num_configs = 0: not tunable. Otherwise launch_config(config) runs configuration
     * 0 <= config < num_configs (every one must give the same result within the variant's bound),
     * config_supports(config) says whether a configuration can run this shape (NULL: all can),
     * config_name(config) names it for the tuning cache and reports, and launch() runs a good
     * default. The tuner (tuner.cu) times the configurations and `auto` launches the winner. */
    int num_configs;
    int (*launch_config)(const conv_params* p, const float* x, const float* w, float* y,
                         void* workspace, size_t workspace_bytes, void* stream, int config);
    int (*config_supports)(const conv_params* p, int config);
    const char* (*config_name)(int config);
} conv_impl;

/* Variant ids, generated from variants.def: CONV_ID_cpu, CONV_ID_direct, ... CONV_ID_COUNT. */
enum conv_variant_id {
#define CONV_VARIANT(name, on_device, exact, max_rel_error, idea) CONV_ID_##name,
#include "variants.def"
#undef CONV_VARIANT
    CONV_ID_COUNT
};

/* The variant table (registry.c). impl is NULL where the variant is not built (GPU variants in a
 * build without CUDA). */
typedef struct conv_variant_entry {
    conv_variant_info info;
    const conv_impl* impl;
} conv_variant_entry;
const conv_variant_entry* conv_variant_entry_get(int variant);

/* Resolves CONV_AUTO / CONV_AUTO_FAST for a validated shape (auto.c): the variant and, for a tunable
 * one, the launch configuration (-1: its default launch). */
int conv_auto_resolve(int variant, const conv_params* p, int* chosen, int* config);

/* A variant's support for a validated shape: built, hardware usable, supports() agrees. */
int conv_entry_supports(const conv_variant_entry* e, const conv_params* p);

/* Launches a variant (config -1: default launch) over batch chunks that fit int32 indexing. */
int conv_entry_launch(const conv_variant_entry* e, int config, const conv_params* p, const float* x,
                      const float* w, float* y, void* workspace, size_t workspace_bytes, void* stream);
int conv_entry_workspace(const conv_variant_entry* e, const conv_params* p, size_t* bytes);

/* ---- tuning (tune_cache.c: the persistent cache; tuner.cu: the measurements) ---- */
typedef struct conv_tune_candidate {
    int variant;
    int config;       /* -1: the default launch */
} conv_tune_candidate;

typedef struct conv_tune_result {
    conv_tune_candidate best;
    float median_ms;
} conv_tune_result;

/* Times the candidates on random data of the shape, within the tuning budget, checks each one's
 * output against the `direct` kernel, and returns the fastest correct one (tuner.cu). */
int conv_tune_measure(const conv_params* p, const conv_tune_candidate* candidates, int count,
                      double budget_ms, conv_tune_result* result);

/* The cache of tuning results, keyed by GPU, library version, shape and precision (tune_cache.c). */
int conv_tune_cache_get(const char* gpu, const conv_params* p, int exact, conv_tune_result* result);
void conv_tune_cache_put(const char* gpu, const conv_params* p, int exact, const conv_tune_result* result);
double conv_tune_budget_ms(void);
int conv_gpu_name(char* name, size_t bytes);  /* current device's name (device_runtime.cu) */

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

/* Output size, assuming conv_validate passed. */
int64_t conv_out_h(const conv_params* p);
int64_t conv_out_w(const conv_params* p);

/* 1 when a CUDA device can be used right now (driver and device present); sets the error otherwise. */
int conv_cuda_ready(void);

#ifdef __cplusplus
}
#endif

#endif
