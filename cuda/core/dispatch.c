/* dispatch.c — plans and the calls built on them. A plan is a validated problem bound once to a
 * concrete variant, launch configuration and device (auto resolved and tuned at creation); running it
 * checks the operands (NULL, host or device, which device, bias, workspace) and launches on the
 * operands' device and the caller's stream, restoring the caller's current device. The legacy
 * conv_params calls and the per-variant entry points are thin wrappers over the same path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* Resolves variant (CONV_AUTO, CONV_AUTO_FAST or concrete) and config for a validated problem on the
 * current device. config_name NULL: the tuned (auto) or default configuration. */
static int resolve(int variant, conv_problem* p, const char* config_name, const conv_variant_entry** entry,
                   int* config) {
    *config = -1;
    if (variant == CONV_AUTO || variant == CONV_AUTO_FAST) {
        if (config_name)
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                                  "config '%s': launch configurations belong to a concrete variant, not to auto",
                                  config_name);
        if (variant == CONV_AUTO_FAST && p->compute < CONV_COMPUTE_FAST) p->compute = CONV_COMPUTE_FAST;
        int status = conv_auto_resolve(variant, p, &variant, config);
        if (status != CONV_OK) return status;
    }
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (!e) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    int status = conv_entry_supports(e, p);
    if (status != CONV_OK) return status;
    if (config_name) {
        status = conv_entry_config_find(e, config_name, config);
        if (status == CONV_OK) status = conv_entry_config_supports(e, *config, p);
        if (status != CONV_OK) return status;
    } else if (*config < 0) {
        *config = conv_entry_default_config(e, p);
        if (*config < 0)
            return conv_set_error(CONV_ERR_INTERNAL, "variant '%s': its default configuration has no entry",
                                  e->info.name);
        status = conv_entry_config_supports(e, *config, p);
        if (status != CONV_OK) return status;
    }
    *entry = e;
    return CONV_OK;
}

/* The GPU a new plan runs on: `device`, else the current one; -1 when no GPU is usable. */
static int plan_device(int device, int* out) {
    *out = -1;
    if (device < -1) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "device = %d (use -1 for the current)", device);
    if (!conv_cuda_ready()) {
        if (device >= 0) return CONV_ERR_NO_DEVICE;  /* message set by conv_cuda_ready */
        conv_clear_error();
        return CONV_OK;
    }
    if (device >= 0) {
        int count = 0;
        int status = conv_device_count(&count);
        if (status != CONV_OK) return status;
        if (device >= count)
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "device %d does not exist (%d devices)", device, count);
        *out = device;
        return CONV_OK;
    }
    return conv_get_device(out);
}

int conv2d_plan_create(int variant, const conv_problem* problem, const char* config, int device,
                                conv_plan** plan) {
    conv_clear_error();
    if (!plan) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "plan is NULL");
    *plan = NULL;
    conv_plan q;
    memset(&q, 0, sizeof q);
    int status = conv_problem_load(problem, &q.problem);
    if (status == CONV_OK) status = plan_device(device, &q.device);
    if (status != CONV_OK) return status;
    int previous = -1;
    if (q.device >= 0 && (status = conv_device_enter(q.device, &previous)) != CONV_OK) return status;
    // A GPU variant, or auto, which would tune GPU kernels, on a GPU this build holds no code for: refused
    // with the architectures built (never a quiet fallback to the CPU).
    const conv_variant_entry* named = variant >= 0 ? conv_variant_entry_get(variant) : NULL;
    if (q.device >= 0 && !(named && !named->info.on_device)) status = conv_device_built_for(q.device);
    if (status == CONV_OK) status = resolve(variant, &q.problem, config, &q.entry, &q.config);
    if (status == CONV_OK) status = conv_entry_workspace(q.entry, &q.problem, &q.workspace_bytes);
    if (q.device >= 0) conv_device_leave(previous);
    if (status != CONV_OK) return status;
    q.variant = (int)(q.entry - conv_variant_entry_get(0));
    if (!q.entry->info.on_device) q.device = -1;
    else if (q.device < 0)
        return conv_set_error(CONV_ERR_INTERNAL, "GPU variant '%s' chosen without a device", q.entry->info.name);
    conv_plan* made = (conv_plan*)malloc(sizeof q);
    if (!made) return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "out of host memory for a plan (%zu bytes)", sizeof q);
    memcpy(made, &q, sizeof q);
    if ((status = conv_plan_handle_add(made)) != CONV_OK) {
        free(made);
        return status;
    }
    *plan = made;
    return CONV_OK;
}

/* NULL is a no-op (as free); a destroyed or foreign handle is refused, never freed. */
int conv2d_plan_destroy(conv_plan* plan) {
    return plan ? conv_plan_handle_remove(plan) : CONV_OK;
}

int conv2d_plan_get_info(const conv_plan* handle, conv_plan_info* info) {
    if (!info) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "conv2d_plan_get_info: info is NULL");
    conv_plan* plan = NULL;
    const int status = conv_plan_handle_acquire(handle, "conv2d_plan_get_info", &plan);
    if (status != CONV_OK) return status;
    info->variant = plan->variant;
    info->variant_name = plan->entry->info.name;
    info->config_name = plan->entry->impl->configs[plan->config].name;
    info->device = plan->device;
    info->on_device = plan->entry->info.on_device;
    info->workspace_bytes = plan->workspace_bytes;
    conv_plan_handle_release(plan);
    return CONV_OK;
}

/* An operand where the plan needs it: on the plan's device, or in host memory for a host variant.
 * where_known: the caller vouches for the device (conv2d_plan_launch): only NULL is checked. */
static int check_operand(const conv_plan* plan, const char* name, const void* ptr, int where_known) {
    if (!ptr) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s is NULL", name);
    if (where_known) return CONV_OK;
    int device = -1;
    if (plan->device < 0) {
        /* Asking where a pointer lives would start CUDA in a process that may never use it (a context
         * costs memory on device 0): host variants check only once this library has started it. */
        if (!conv_cuda_started()) return CONV_OK;
        int status = conv_pointer_device(ptr, &device);
        if (status != CONV_OK) return status;
        if (device >= 0)
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                                  "%s is device memory (on device %d), but variant '%s' runs on the host: pass "
                                  "host memory, or use a GPU variant",
                                  name, device, plan->entry->info.name);
        return CONV_OK;
    }
    int status = conv_pointer_device(ptr, &device);
    if (status != CONV_OK) return status;
    if (device < 0)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "%s is host memory, but variant '%s' runs on device %d: pass device memory",
                              name, plan->entry->info.name, plan->device);
    if (device != plan->device)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "%s is on device %d, but this plan runs on device %d (operands must share one device)",
                              name, device, plan->device);
    return CONV_OK;
}

static int run_plan(const conv_plan* plan, const void* x, const void* w, const void* bias, void* y,
                    void* workspace, size_t workspace_bytes, void* stream, int where_known) {
    const conv_problem* p = &plan->problem;
    int status;
    if ((status = check_operand(plan, "x", x, where_known)) != CONV_OK ||
        (status = check_operand(plan, "w", w, where_known)) != CONV_OK ||
        (status = check_operand(plan, "y", y, where_known)) != CONV_OK)
        return status;
    if (p->bias && (status = check_operand(plan, "bias", bias, where_known)) != CONV_OK) return status;
    if (!p->bias && bias)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "bias is given, but the problem says bias = 0");
    const size_t need = plan->workspace_bytes;
    if (workspace_bytes < need || (need > 0 && !workspace))
        return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL,
                              "variant '%s' needs %zu bytes of workspace for this problem, got %zu%s",
                              plan->entry->info.name, need, workspace ? workspace_bytes : (size_t)0,
                              workspace ? "" : " (workspace is NULL)");
    if (need > 0 && plan->device >= 0 && (status = check_operand(plan, "workspace", workspace, where_known)) != CONV_OK)
        return status;
    const conv_tensors t = {x, w, bias, y};
    int previous = -1;
    if (plan->device >= 0 && (status = conv_device_enter(plan->device, &previous)) != CONV_OK) return status;
    status = conv_entry_launch(plan->entry, plan->config, p, &t, workspace, workspace_bytes, stream);
    if (plan->device >= 0) conv_device_leave(previous);
    return status;
}

/* run_plan on the live plan behind `handle`, which keeps it alive until the launch returns. */
static int run_handle(const char* function, const conv_plan* handle, const void* x, const void* w,
                      const void* bias, void* y, void* workspace, size_t workspace_bytes, void* stream,
                      int where_known) {
    conv_clear_error();
    conv_plan* plan = NULL;
    int status = conv_plan_handle_acquire(handle, function, &plan);
    if (status != CONV_OK) return status;
    status = run_plan(plan, x, w, bias, y, workspace, workspace_bytes, stream, where_known);
    conv_plan_handle_release(plan);
    return status;
}

int conv2d_plan_run(const conv_plan* plan, const void* x, const void* w, const void* bias, void* y,
                    void* workspace, size_t workspace_bytes, void* stream) {
    return run_handle("conv2d_plan_run", plan, x, w, bias, y, workspace, workspace_bytes, stream, 0);
}

int conv2d_plan_launch(const conv_plan* plan, const void* x, const void* w, const void* bias, void* y,
                       void* workspace, size_t workspace_bytes, void* stream) {
    return run_handle("conv2d_plan_launch", plan, x, w, bias, y, workspace, workspace_bytes, stream, 1);
}

/* The device of a one-shot call: where x lives (-1: host, or no GPU usable). */
static int operand_device(const void* x, int* device) {
    *device = -1;
    if (!x || !conv_cuda_ready()) {
        conv_clear_error();
        return CONV_OK;
    }
    return conv_pointer_device(x, device);
}

/* A plan for a one-shot call: on x's device; auto with host operands resolves to the host variant. */
static int one_shot_plan(int variant, const conv_problem* problem, const void* x, conv_plan** plan) {
    int device = -1;
    int status = operand_device(x, &device);
    if (status != CONV_OK) return status;
    if (device < 0 && x && (variant == CONV_AUTO || variant == CONV_AUTO_FAST) && conv_cuda_ready())
        variant = CONV_ID_cpu;  /* host memory: the host variant is the only one that can read it */
    conv_clear_error();
    return conv2d_plan_create(variant, problem, NULL, device, plan);
}

int conv2d_execute(int variant, const conv_problem* problem, const void* x, const void* w,
                            const void* bias, void* y, void* workspace, size_t workspace_bytes, void* stream) {
    conv_plan* plan = NULL;
    int status = one_shot_plan(variant, problem, x, &plan);
    if (status == CONV_OK) status = conv2d_plan_run(plan, x, w, bias, y, workspace, workspace_bytes, stream);
    conv2d_plan_destroy(plan);
    return status;
}

int conv2d_execute_workspace_size(int variant, const conv_problem* problem, size_t* bytes) {
    if (!bytes) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "bytes is NULL");
    conv_plan* plan = NULL;
    int status = conv2d_plan_create(variant, problem, NULL, -1, &plan);
    if (status == CONV_OK) *bytes = plan->workspace_bytes;
    conv2d_plan_destroy(plan);
    return status;
}

int conv_variant_supports_problem(int variant, const conv_problem* problem) {
    conv_plan* plan = NULL;
    int status = conv2d_plan_create(variant, problem, NULL, -1, &plan);
    conv2d_plan_destroy(plan);
    return status;
}

/* ---- launch configurations ---- */

static int concrete_entry(int variant, const conv_variant_entry** entry) {
    if (variant == CONV_AUTO || variant == CONV_AUTO_FAST)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "launch configurations belong to a concrete variant, not to auto");
    *entry = conv_variant_entry_get(variant);
    if (!*entry) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    return CONV_OK;
}

int conv_variant_config_count(int variant, int* count) {
    conv_clear_error();
    if (!count) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "count is NULL");
    const conv_variant_entry* e = NULL;
    int status = concrete_entry(variant, &e);
    /* A variant with one launch only has nothing to choose: 0, as before configurations were tables. */
    if (status == CONV_OK) *count = e->impl && e->impl->num_configs > 1 ? e->impl->num_configs : 0;
    return status;
}

int conv_variant_config_name(int variant, int config, const char** name) {
    conv_clear_error();
    if (!name) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "name is NULL");
    const conv_variant_entry* e = NULL;
    int status = concrete_entry(variant, &e);
    if (status != CONV_OK) return status;
    if (!e->impl || config < 0 || config >= e->impl->num_configs)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant '%s' has no launch configuration %d (it has %d)",
                              e->info.name, config, e->impl ? e->impl->num_configs : 0);
    *name = e->impl->configs[config].name;
    return CONV_OK;
}

int conv_variant_config_supports_problem(int variant, int config, const conv_problem* problem) {
    const char* name = NULL;
    int status = conv_variant_config_name(variant, config, &name);
    if (status != CONV_OK) return status;
    conv_plan* plan = NULL;
    status = conv2d_plan_create(variant, problem, name, -1, &plan);
    conv2d_plan_destroy(plan);
    return status;
}

/* ---- what auto chose: a plan's variant and configuration, with the tuned time the cache holds ----
 * Here, over the plan API and the cache's lookup, so that the cache (tune_cache.c) knows problems only. */

/* The time the tuning cache holds for the plan's choice; 0 where it has none or variant is not auto. The
 * cache keys on the problem as auto resolved it: the plan's (compute raised for CONV_AUTO_FAST). */
static float tuned_ms(int variant, const conv_plan* plan) {
    float ms = 0.0f;
#ifdef CONV_WITH_CUDA
    char gpu[256];
    conv_tune_result r;
    if ((variant == CONV_AUTO || variant == CONV_AUTO_FAST) && plan->entry->info.on_device &&
        conv_gpu_name(gpu, sizeof gpu) == CONV_OK && conv_tune_cache_get(gpu, &plan->problem, &r) == CONV_OK &&
        r.best.variant == plan->variant && r.best.config == plan->config)
        ms = r.median_ms;
    conv_clear_error();
#else
    (void)variant;
    (void)plan;
#endif
    return ms;
}

int conv_tune_describe_problem(int variant, const conv_problem* problem, char* text, size_t text_bytes) {
    if (!text) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "text is NULL");
    conv_plan* plan = NULL;
    int status = conv2d_plan_create(variant, problem, NULL, -1, &plan);
    if (status != CONV_OK) return status;
    const float ms = tuned_ms(variant, plan);
    const char* variant_name = plan->entry->info.name;                       /* static strings */
    const char* config_name = plan->entry->impl->configs[plan->config].name;
    conv2d_plan_destroy(plan);
    if (ms > 0.0f)
        snprintf(text, text_bytes, "%s[%s] %.4f ms (tuned)", variant_name, config_name, ms);
    else
        snprintf(text, text_bytes, "%s[%s] (not timed)", variant_name, config_name);
    return CONV_OK;
}

/* ---- the legacy conv_params calls: f32 NCHW problems through the same path ---- */

int conv_validate(const conv_params* params) {
    conv_clear_error();
    if (!params) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "params is NULL");
    conv_problem p;
    conv_problem_from_params(params, CONV_AUTO, &p);
    return conv_problem_validate(&p);
}

int conv_output_size(const conv_params* params, int64_t* out_h, int64_t* out_w) {
    int status = conv_validate(params);
    if (status != CONV_OK) return status;
    if (!out_h || !out_w) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "out_h or out_w is NULL");
    conv_problem p;
    conv_problem_from_params(params, CONV_AUTO, &p);
    *out_h = conv_out_h(&p);
    *out_w = conv_out_w(&p);
    return CONV_OK;
}

/* The problem of a legacy call, or an error for a NULL params. A legacy call that names a variant
 * runs it at the precision its arithmetic needs, as before problems had a compute level. */
static int legacy_problem(const conv_params* params, int variant, conv_problem* p) {
    if (!params) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "params is NULL");
    conv_problem_from_params(params, variant, p);
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (e && p->compute < e->caps.compute) p->compute = e->caps.compute;
    return CONV_OK;
}

int conv_variant_supports(int variant, const conv_params* params) {
    conv_problem p;
    int status = legacy_problem(params, variant, &p);
    return status != CONV_OK ? status : conv_variant_supports_problem(variant, &p);
}

int conv2d_workspace_size(int variant, const conv_params* params, size_t* bytes) {
    conv_problem p;
    int status = legacy_problem(params, variant, &p);
    return status != CONV_OK ? status : conv2d_execute_workspace_size(variant, &p, bytes);
}

int conv2d_auto_choice(int variant, const conv_params* params, int* chosen) {
    if (!chosen) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "chosen is NULL");
    conv_problem p;
    conv_plan* plan = NULL;
    int status = legacy_problem(params, variant, &p);
    if (status == CONV_OK) status = conv2d_plan_create(variant, &p, NULL, -1, &plan);
    if (status == CONV_OK) *chosen = plan->variant;
    conv2d_plan_destroy(plan);
    return status;
}

int conv_tune_describe(int variant, const conv_params* params, char* text, size_t text_bytes) {
    if (!params) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "params is NULL");
    conv_problem p;
    conv_problem_from_params(params, variant, &p);
    return conv_tune_describe_problem(variant, &p, text, text_bytes);
}

int conv2d_forward(int variant, const conv_params* params, const float* x, const float* w, float* y,
                            void* workspace, size_t workspace_bytes, void* stream) {
    conv_problem p;
    int status = legacy_problem(params, variant, &p);
    return status != CONV_OK ? status : conv2d_execute(variant, &p, x, w, NULL, y, workspace, workspace_bytes, stream);
}

int conv_variant_config_supports(int variant, int config, const conv_params* params) {
    conv_problem p;
    int status = legacy_problem(params, variant, &p);
    return status != CONV_OK ? status : conv_variant_config_supports_problem(variant, config, &p);
}

int conv2d_forward_config(int variant, int config, const conv_params* params, const float* x,
                                   const float* w, float* y, void* workspace, size_t workspace_bytes, void* stream) {
    conv_problem p;
    const char* name = NULL;
    int status = legacy_problem(params, variant, &p);
    if (status == CONV_OK) status = conv_variant_config_name(variant, config, &name);
    if (status != CONV_OK) return status;
    int device = -1;
    if ((status = operand_device(x, &device)) != CONV_OK) return status;
    conv_plan* plan = NULL;
    status = conv2d_plan_create(variant, &p, name, device, &plan);
    if (status == CONV_OK) status = conv2d_plan_run(plan, x, w, NULL, y, workspace, workspace_bytes, stream);
    conv2d_plan_destroy(plan);
    return status;
}

/* ---- one entry point per variant, all through the dispatcher ---- */
#define CONV_VARIANT(name, on_device, unit, max_rel_error, in_dt, out_dt, layouts, wlayouts, epilogues, groups, \
                     bias, dilation, idea)                                                                       \
    int conv2d_##name(const conv_params* p, const float* x, const float* w, float* y, void* ws,         \
                               size_t ws_bytes, void* stream) {                                                  \
        return conv2d_forward(CONV_ID_##name, p, x, w, y, ws, ws_bytes, stream);                                 \
    }
#include "variants.def"
#undef CONV_VARIANT
