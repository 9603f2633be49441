/* registry.c — the variant table with each variant's declared capabilities, the one capability check
 * every call passes, launch configurations by name, and the batch chunking that keeps every launch
 * within 32-bit indexing. */
#include <stdio.h>
#include <string.h>

#include "conv_internal.h"

#define CONV_VARIANT(name, on_device, unit, max_rel_error, in_dt, out_dt, layouts, wlayouts, epilogues, groups, \
                     bias, dilation, idea)                                                                       \
    extern const conv_impl conv_impl_##name;
#include "variants.def"
#undef CONV_VARIANT

/* GPU implementations exist only in a CUDA build; host ones always. */
#define CONV_IMPL_0(name) &conv_impl_##name
#ifdef CONV_WITH_CUDA
#define CONV_IMPL_1(name) &conv_impl_##name
#else
#define CONV_IMPL_1(name) NULL
#endif

/* The conv_compute level a unit needs. CUDA cores in fp16 sum runs of products in fp16 (a larger error than
 * fp32 accumulation, which cuDNN and PyTorch keep for fp16 / bf16 operands): their own, highest level. */
#define CONV_UNIT_COMPUTE(unit)                                                    \
    ((unit) == CONV_UNIT_TENSOR_TF32 ? CONV_COMPUTE_TF32                           \
     : (unit) == CONV_UNIT_TENSOR_HALF ? CONV_COMPUTE_HALF                         \
     : (unit) == CONV_UNIT_FP16 ? CONV_COMPUTE_FAST : CONV_COMPUTE_EXACT)

static const conv_variant_entry variant_table[CONV_ID_COUNT] = {
#define CONV_VARIANT(name, on_device, unit, max_rel_error, in_dt, out_dt, layouts, wlayouts, epilogues, groups, \
                     bias, dilation, idea)                                                                       \
    {{#name, idea, on_device, CONV_UNIT_COMPUTE(unit) == CONV_COMPUTE_EXACT, max_rel_error, 0},                   \
     {unit, CONV_UNIT_COMPUTE(unit), in_dt, out_dt, layouts, wlayouts, epilogues, groups, bias, dilation, 0},    \
     CONV_IMPL_##on_device(name)},
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

int conv_variant_get_caps(int variant, conv_variant_caps* caps) {
    const conv_variant_entry* e = conv_variant_entry_get(variant);
    if (!e) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant id %d is out of range", variant);
    if (!caps) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "caps is NULL");
    *caps = e->caps;
    return CONV_OK;
}

static const char* layout_name(int layout) { return layout == CONV_NHWC ? "NHWC" : "NCHW"; }
static const char* compute_name(int compute) {
    return compute == CONV_COMPUTE_EXACT ? "exact fp32" : compute == CONV_COMPUTE_TF32 ? "TF32"
           : compute == CONV_COMPUTE_HALF ? "fp16/bf16 with fp32 sums" : "fp16 with fp16 partial sums";
}
static const char* epilogue_name(int epilogue) {
    return epilogue == CONV_EPILOGUE_NONE ? "none" : epilogue == CONV_EPILOGUE_RELU ? "ReLU"
           : epilogue == CONV_EPILOGUE_SILU ? "SiLU" : "ReLU + max-pool";
}

/* The variants that take pad_*_extra < 0 (fewer zeros after than before: causal padding). The others'
 * tile arithmetic assumes at least as many zeros after as before. */
static int takes_fewer_zeros_after(const conv_variant_entry* e) {
    return e == &variant_table[CONV_ID_cpu] || e == &variant_table[CONV_ID_direct] ||
           e == &variant_table[CONV_ID_depthwise_conv1d];
}

/* The declared capabilities against the problem: the first parameter the variant does not take. */
static int check_caps(const conv_variant_entry* e, const conv_problem* p) {
    const conv_variant_caps* c = &e->caps;
    const char* v = e->info.name;
    if (p->compute < c->compute)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "variant '%s' computes in %s, but the problem allows only %s (compute = %d; "
                              "allow compute = %d or more to use it)",
                              v, compute_name(c->compute), compute_name(p->compute), (int)p->compute, c->compute);
    if (!(c->in_dtypes & (1u << p->x_dtype)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not take x_dtype = %s", v,
                              conv_dtype_name(p->x_dtype));
    if (!(c->out_dtypes & (1u << p->y_dtype)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not write y_dtype = %s", v,
                              conv_dtype_name(p->y_dtype));
    if (!(c->layouts & (1u << p->x_layout)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not take x_layout = %s", v,
                              layout_name(p->x_layout));
    if (!(c->layouts & (1u << p->y_layout)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not write y_layout = %s", v,
                              layout_name(p->y_layout));
    if (!(c->filter_layouts & (1u << p->w_layout)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not take w_layout = %s", v,
                              p->w_layout == CONV_MKKC ? "MKKC" : "MCKK");
    if (!(c->epilogues & (1u << p->epilogue)))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' does not fuse the epilogue %s", v,
                              epilogue_name(p->epilogue));
    if (!c->groups && p->groups != 1)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' takes groups = 1 only, got groups = %lld", v,
                              (long long)p->groups);
    if (!c->bias && p->bias)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' takes no bias", v);
    if (!c->dilation && (p->dilation_h != 1 || p->dilation_w != 1))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' takes dilation 1 only, got %lldx%lld", v,
                              (long long)p->dilation_h, (long long)p->dilation_w);
    if ((p->pad_h_extra < 0 || p->pad_w_extra < 0) && !takes_fewer_zeros_after(e))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "variant '%s' takes no fewer zeros after than before (pad_h_extra = %lld, "
                              "pad_w_extra = %lld: causal padding); cpu, direct and depthwise_conv1d do",
                              v, (long long)p->pad_h_extra, (long long)p->pad_w_extra);
    if (c->max_stride && (p->stride_h > c->max_stride || p->stride_w > c->max_stride))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "variant '%s' takes strides up to %d, got %lldx%lld", v,
                              c->max_stride, (long long)p->stride_h, (long long)p->stride_w);
    return CONV_OK;
}

int conv_entry_supports(const conv_variant_entry* e, const conv_problem* p) {
    int status = check_caps(e, p);
    if (status == CONV_OK) status = check_available(e);
    if (status == CONV_OK && e->impl->supports) status = e->impl->supports(p);
    return status;
}

/* ---- launch configurations ---- */

int conv_entry_config_find(const conv_variant_entry* e, const char* name, int* config) {
    const int count = e->impl ? e->impl->num_configs : 0;
    for (int i = 0; i < count; ++i)
        if (strcmp(e->impl->configs[i].name, name) == 0) { *config = i; return CONV_OK; }
    char known[1024] = "";
    for (int i = 0; i < count; ++i) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, e->impl->configs[i].name, sizeof known - strlen(known) - 1);
    }
    *config = -1;
    return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant '%s' has no launch configuration '%s' (it has: %s)",
                          e->info.name, name, known);
}

int conv_entry_config_supports(const conv_variant_entry* e, int config, const conv_problem* p) {
    if (!e->impl || config < 0 || config >= e->impl->num_configs)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "variant '%s' has no launch configuration %d",
                              e->info.name, config);
    const conv_config* c = &e->impl->configs[config];
    return c->supports ? c->supports(p) : CONV_OK;
}

int conv_entry_default_config(const conv_variant_entry* e, const conv_problem* p) {
    int config = 0;
    if (e->impl->default_config && conv_entry_config_find(e, e->impl->default_config(p), &config) != CONV_OK)
        return -1; /* a default naming no configuration: a bug, reported by the caller */
    return config;
}

/* ---- launching ---- */

/* Images per launch so that x and y of one chunk stay within int32 indexing. */
static int64_t chunk_images(const conv_problem* p) {
    const int64_t image = conv_x_image(p), out_image = conv_y_image(p);
    const int64_t conv_image = p->M * conv_out_h(p) * conv_out_w(p); /* kernels index the unpooled grid too */
    int64_t largest = image > out_image ? image : out_image;
    if (conv_image > largest) largest = conv_image;
    const int64_t chunk = CONV_INDEX_LIMIT / largest;
    return chunk < p->B ? chunk : p->B;
}

int conv_entry_workspace(const conv_variant_entry* e, const conv_problem* p, size_t* bytes) {
    conv_problem chunk = *p;
    chunk.B = chunk_images(p);
    *bytes = 0;
    return e->impl->workspace_size ? e->impl->workspace_size(&chunk, bytes) : CONV_OK;
}

int conv_entry_launch(const conv_variant_entry* e, int config, const conv_problem* p, const conv_tensors* t,
                      void* workspace, size_t workspace_bytes, void* stream) {
    const size_t x_image = (size_t)conv_x_image(p) * conv_dtype_size(p->x_dtype);
    const size_t y_image = (size_t)conv_y_image(p) * conv_dtype_size(p->y_dtype);
    const int64_t chunk = chunk_images(p);
    const conv_run_fn run = e->impl->configs[config].run;
    for (int64_t b0 = 0; b0 < p->B; b0 += chunk) {
        conv_problem part = *p;
        part.B = p->B - b0 < chunk ? p->B - b0 : chunk;
        conv_tensors part_t = *t;
        part_t.x = (const char*)t->x + (size_t)b0 * x_image;  /* batch is outermost in NCHW and NHWC */
        part_t.y = (char*)t->y + (size_t)b0 * y_image;
        int status = run(&part, &part_t, workspace, workspace_bytes, stream);
        if (status != CONV_OK) return status;
    }
    return CONV_OK;
}
