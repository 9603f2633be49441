/* registry.c — parameter validation, the variant table, and the dispatcher that every entry point
 * goes through: validate once, resolve auto, check support and workspace, then launch the variant
 * over batch chunks small enough for 32-bit indexing inside the kernels. */
#include <stdio.h>
#include <string.h>

#include "conv_internal.h"

/* ---- shapes ---- */

int64_t conv_out_h(const conv_params* p) {
    return (p->H + 2 * p->pad_h - p->dilation_h * (p->KH - 1) - 1) / p->stride_h + 1;
}

int64_t conv_out_w(const conv_params* p) {
    return (p->W + 2 * p->pad_w - p->dilation_w * (p->KW - 1) - 1) / p->stride_w + 1;
}

/* Every size is capped so that the products below cannot overflow int64. */
#define CONV_DIM_LIMIT ((int64_t)1 << 30)

static int check_range(const char* name, int64_t value, int64_t lo) {
    if (value < lo)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s must be >= %lld, got %lld", name,
                              (long long)lo, (long long)value);
    if (value > CONV_DIM_LIMIT)
        return conv_set_error(CONV_ERR_TOO_LARGE, "%s = %lld is larger than the limit %lld", name,
                              (long long)value, (long long)CONV_DIM_LIMIT);
    return CONV_OK;
}

int conv_validate(const conv_params* p) {
    if (!p) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "params is NULL");
    const struct { const char* name; int64_t value; int64_t lo; } fields[] = {
        {"B", p->B, 1}, {"C", p->C, 1}, {"H", p->H, 1}, {"W", p->W, 1},
        {"M", p->M, 1}, {"KH", p->KH, 1}, {"KW", p->KW, 1},
        {"stride_h", p->stride_h, 1}, {"stride_w", p->stride_w, 1},
        {"pad_h", p->pad_h, 0}, {"pad_w", p->pad_w, 0},
        {"dilation_h", p->dilation_h, 1}, {"dilation_w", p->dilation_w, 1},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
        int status = check_range(fields[i].name, fields[i].value, fields[i].lo);
        if (status != CONV_OK) return status;
    }
    int64_t span_h = p->dilation_h * (p->KH - 1) + 1, span_w = p->dilation_w * (p->KW - 1) + 1;
    if (span_h > p->H + 2 * p->pad_h || span_w > p->W + 2 * p->pad_w)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "kernel extent %lldx%lld (KH, KW with dilation) is larger than the "
                              "padded input %lldx%lld",
                              (long long)span_h, (long long)span_w, (long long)(p->H + 2 * p->pad_h),
                              (long long)(p->W + 2 * p->pad_w));
    /* One image, one output image and the filter bank must each fit CONV_INDEX_LIMIT; the batch
     * is split by the dispatcher, so only these per-image counts are limited. */
    int64_t image = p->C * p->H * p->W, out_image = p->M * conv_out_h(p) * conv_out_w(p);
    int64_t filters = p->M * p->C * p->KH * p->KW;
    if (image > CONV_INDEX_LIMIT || out_image > CONV_INDEX_LIMIT || filters > CONV_INDEX_LIMIT)
        return conv_set_error(CONV_ERR_TOO_LARGE,
                              "one image (%lld elements), one output image (%lld) or the filter bank "
                              "(%lld) has more than 2^30 elements (the limit of 32-bit indexing with headroom)",
                              (long long)image, (long long)out_image, (long long)filters);
    return CONV_OK;
}

int conv_output_size(const conv_params* p, int64_t* out_h, int64_t* out_w) {
    int status = conv_validate(p);
    if (status != CONV_OK) return status;
    if (!out_h || !out_w) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "out_h or out_w is NULL");
    *out_h = conv_out_h(p);
    *out_w = conv_out_w(p);
    return CONV_OK;
}

/* ---- the variant table ---- */

#define CONV_VARIANT(name, on_device, exact, max_rel_error, idea) extern const conv_impl conv_impl_##name;
#include "variants.def"
#undef CONV_VARIANT

/* GPU implementations exist only in a CUDA build; host ones always. */
#define CONV_IMPL_0(name) &conv_impl_##name
#ifdef CONV_WITH_CUDA
#define CONV_IMPL_1(name) &conv_impl_##name
#else
#define CONV_IMPL_1(name) NULL
#endif

static const conv_variant_entry variant_table[CONV_ID_COUNT] = {
#define CONV_VARIANT(name, on_device, exact, max_rel_error, idea) \
    {{#name, idea, on_device, exact, max_rel_error, 0}, CONV_IMPL_##on_device(name)},
#include "variants.def"
#undef CONV_VARIANT
};

const conv_variant_entry* conv_variant_entry_get(int variant) {
    if (variant < 0 || variant >= CONV_ID_COUNT) return NULL;
    return &variant_table[variant];
}

int conv_variant_count(void) { return CONV_ID_COUNT; }

int conv_variant_find(const char* name, int* variant) {
    if (!name || !variant) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "name or variant is NULL");
    if (strcmp(name, "auto") == 0) { *variant = CONV_AUTO; return CONV_OK; }
    if (strcmp(name, "auto_fast") == 0) { *variant = CONV_AUTO_FAST; return CONV_OK; }
    for (int i = 0; i < CONV_ID_COUNT; ++i)
        if (strcmp(variant_table[i].info.name, name) == 0) { *variant = i; return CONV_OK; }
    char known[1024] = "";
    for (int i = 0; i < CONV_ID_COUNT; ++i) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, variant_table[i].info.name, sizeof known - strlen(known) - 1);
    }
    return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "unknown variant '%s' (known: auto, auto_fast, %s)",
                          name, known);
}

/* CONV_OK when the variant's code is in this build and its hardware is usable now. */
static int check_available(const conv_variant_entry* e) {
    if (!e->impl)
        return conv_set_error(CONV_ERR_NO_CUDA_BUILD,
                              "variant '%s' needs CUDA, but libconv was built without a CUDA compiler "
                              "(install the CUDA toolkit and rebuild)",
                              e->info.name);
    if (e->info.on_device && !conv_cuda_ready()) return CONV_ERR_NO_DEVICE;
    return CONV_OK;
}

int conv_variant_get_info(int variant, conv_variant_info* info) {
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (!e) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    if (!info) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "info is NULL");
    *info = e->info;
    info->available = check_available(e) == CONV_OK;
    return CONV_OK;
}

int conv_entry_supports(const conv_variant_entry* e, const conv_params* p) {
    int status = check_available(e);
    if (status != CONV_OK) return status;
    return e->impl->supports ? e->impl->supports(p) : CONV_OK;
}

/* Validates, resolves auto, and checks support: the one place every call passes. */
static int resolve(int variant, const conv_params* p, const conv_variant_entry** entry, int* config) {
    conv_clear_error();
    *config = -1;
    int status = conv_validate(p);
    if (status != CONV_OK) return status;
    if (variant == CONV_AUTO || variant == CONV_AUTO_FAST) {
        status = conv_auto_resolve(variant, p, &variant, config);
        if (status != CONV_OK) return status;
    }
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (!e) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    status = conv_entry_supports(e, p);
    if (status != CONV_OK) return status;
    *entry = e;
    return CONV_OK;
}

int conv_variant_supports(int variant, const conv_params* p) {
    const conv_variant_entry* e = NULL;
    int config;
    return resolve(variant, p, &e, &config);
}

int conv2d_auto_choice(int variant, const conv_params* p, int* chosen) {
    if (!chosen) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "chosen is NULL");
    const conv_variant_entry* e = NULL;
    int config;
    int status = resolve(variant, p, &e, &config);
    if (status == CONV_OK) *chosen = (int)(e - variant_table);
    return status;
}

/* Images per launch so that x and y of one chunk stay within int32 indexing. */
static int64_t chunk_images(const conv_params* p) {
    int64_t image = p->C * p->H * p->W, out_image = p->M * conv_out_h(p) * conv_out_w(p);
    int64_t largest = image > out_image ? image : out_image;
    int64_t chunk = CONV_INDEX_LIMIT / largest;
    return chunk < p->B ? chunk : p->B;
}

int conv_entry_workspace(const conv_variant_entry* e, const conv_params* p, size_t* bytes) {
    conv_params chunk = *p;
    chunk.B = chunk_images(p);
    *bytes = 0;
    return e->impl->workspace_size ? e->impl->workspace_size(&chunk, bytes) : CONV_OK;
}

int conv2d_workspace_size(int variant, const conv_params* p, size_t* bytes) {
    if (!bytes) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "bytes is NULL");
    const conv_variant_entry* e = NULL;
    int config;
    int status = resolve(variant, p, &e, &config);
    if (status != CONV_OK) return status;
    return conv_entry_workspace(e, p, bytes);
}

int conv_entry_launch(const conv_variant_entry* e, int config, const conv_params* p, const float* x,
                      const float* w, float* y, void* workspace, size_t workspace_bytes, void* stream) {
    const int64_t image = p->C * p->H * p->W, out_image = p->M * conv_out_h(p) * conv_out_w(p);
    const int64_t chunk = chunk_images(p);
    for (int64_t b0 = 0; b0 < p->B; b0 += chunk) {
        conv_params part = *p;
        part.B = p->B - b0 < chunk ? p->B - b0 : chunk;
        const float* part_x = x + b0 * image;
        float* part_y = y + b0 * out_image;
        int status = config >= 0
            ? e->impl->launch_config(&part, part_x, w, part_y, workspace, workspace_bytes, stream, config)
            : e->impl->launch(&part, part_x, w, part_y, workspace, workspace_bytes, stream);
        if (status != CONV_OK) return status;
    }
    return CONV_OK;
}

/* Checks the pointers and the workspace, then launches configuration `config` (-1: default). */
static int forward(const conv_variant_entry* e, int config, const conv_params* p, const float* x, const float* w,
                   float* y, void* workspace, size_t workspace_bytes, void* stream) {
    if (!x) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "x is NULL");
    if (!w) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "w is NULL");
    if (!y) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "y is NULL");
    size_t need;
    int status = conv_entry_workspace(e, p, &need);
    if (status != CONV_OK) return status;
    if (workspace_bytes < need || (need > 0 && !workspace))
        return conv_set_error(CONV_ERR_WORKSPACE_TOO_SMALL,
                              "variant '%s' needs %zu bytes of workspace for this shape, got %zu%s",
                              e->info.name, need, workspace ? workspace_bytes : (size_t)0,
                              workspace ? "" : " (workspace is NULL)");
    return conv_entry_launch(e, config, p, x, w, y, workspace, workspace_bytes, stream);
}

int conv2d_forward(int variant, const conv_params* p, const float* x, const float* w, float* y,
                   void* workspace, size_t workspace_bytes, void* stream) {
    const conv_variant_entry* e = NULL;
    int config;
    int status = resolve(variant, p, &e, &config);
    if (status != CONV_OK) return status;
    return forward(e, config, p, x, w, y, workspace, workspace_bytes, stream);
}

/* ---- launch configurations ---- */

/* The entry of a concrete variant, for the configuration calls. */
static int concrete_entry(int variant, const conv_variant_entry** entry) {
    if (variant == CONV_AUTO || variant == CONV_AUTO_FAST)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "launch configurations belong to a concrete variant, not to auto");
    *entry = conv_variant_entry_get(variant);
    if (!*entry) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    return CONV_OK;
}

static int config_count(const conv_variant_entry* e) { return e->impl ? e->impl->num_configs : 0; }

static int check_config(const conv_variant_entry* e, int config) {
    if (config < 0 || config >= config_count(e))
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant '%s' has no launch configuration %d (it has %d)",
                              e->info.name, config, config_count(e));
    return CONV_OK;
}

int conv_variant_config_count(int variant, int* count) {
    conv_clear_error();
    if (!count) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "count is NULL");
    const conv_variant_entry* e = NULL;
    int status = concrete_entry(variant, &e);
    if (status == CONV_OK) *count = config_count(e);
    return status;
}

int conv_variant_config_name(int variant, int config, const char** name) {
    conv_clear_error();
    if (!name) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "name is NULL");
    const conv_variant_entry* e = NULL;
    int status = concrete_entry(variant, &e);
    if (status == CONV_OK) status = check_config(e, config);
    if (status == CONV_OK) *name = e->impl->config_name(config);
    return status;
}

int conv_variant_config_supports(int variant, int config, const conv_params* p) {
    const conv_variant_entry* e = NULL;
    int status = concrete_entry(variant, &e);
    if (status != CONV_OK) return status;
    int resolved_config;
    status = resolve(variant, p, &e, &resolved_config);
    if (status == CONV_OK) status = check_config(e, config);
    if (status == CONV_OK && e->impl->config_supports) status = e->impl->config_supports(p, config);
    return status;
}

int conv2d_forward_config(int variant, int config, const conv_params* p, const float* x, const float* w,
                          float* y, void* workspace, size_t workspace_bytes, void* stream) {
    int status = conv_variant_config_supports(variant, config, p);
    if (status != CONV_OK) return status;
    return forward(conv_variant_entry_get(variant), config, p, x, w, y, workspace, workspace_bytes, stream);
}

/* ---- one entry point per variant, all through the dispatcher ---- */
#define CONV_VARIANT(name, on_device, exact, max_rel_error, idea)                                   \
    int conv2d_##name(const conv_params* p, const float* x, const float* w, float* y, void* ws,      \
                      size_t ws_bytes, void* stream) {                                              \
        return conv2d_forward(CONV_ID_##name, p, x, w, y, ws, ws_bytes, stream);                    \
    }
#include "variants.def"
#undef CONV_VARIANT
