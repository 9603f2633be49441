/* problem.c — the problem descriptor: defaults, validation (every field named, every product checked
 * for overflow), output sizes, the one-line description the tuning cache keys on, and the mapping of
 * the legacy conv_params onto it. */
#include <stdio.h>
#include <string.h>

#include "conv_internal.h"

/* Every size is capped so that the sizes below stay far from int64 overflow one product at a time;
 * the products themselves are checked with mul_ok. */
#define CONV_DIM_LIMIT ((int64_t)1 << 30)

int conv_problem_init(conv_problem* p) {
    if (!p) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "problem is NULL");
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->stride_h = p->stride_w = 1;
    p->dilation_h = p->dilation_w = 1;
    p->groups = 1;
    p->pool_h = p->pool_w = p->pool_stride_h = p->pool_stride_w = 1;
    return CONV_OK;
}

void conv_problem_from_params(const conv_params* q, int legacy_variant, conv_problem* p) {
    conv_problem_init(p);
    p->B = q->B; p->C = q->C; p->H = q->H; p->W = q->W;
    p->M = q->M; p->KH = q->KH; p->KW = q->KW;
    p->stride_h = q->stride_h; p->stride_w = q->stride_w;
    p->pad_h = q->pad_h; p->pad_w = q->pad_w;
    p->dilation_h = q->dilation_h; p->dilation_w = q->dilation_w;
    p->compute = legacy_variant == CONV_AUTO_FAST ? CONV_COMPUTE_FAST : CONV_COMPUTE_EXACT;
}

size_t conv_dtype_size(int dtype) { return dtype == CONV_F32 ? 4 : 2; }

const char* conv_dtype_name(int dtype) {
    switch (dtype) {
    case CONV_F32: return "f32";
    case CONV_F16: return "f16";
    case CONV_BF16: return "bf16";
    default: return "?";
    }
}

int64_t conv_out_h(const conv_problem* p) {
    return (p->H + 2 * p->pad_h + p->pad_h_extra - p->dilation_h * (p->KH - 1) - 1) / p->stride_h + 1;
}

int64_t conv_out_w(const conv_problem* p) {
    return (p->W + 2 * p->pad_w + p->pad_w_extra - p->dilation_w * (p->KW - 1) - 1) / p->stride_w + 1;
}

/* Pooled size as PyTorch's max_pool2d (no padding): floor mode, or ceil mode where a last window that
 * starts inside the input counts. */
static int64_t pooled(int64_t in, int64_t window, int64_t stride, int ceil_mode) {
    int64_t out = (in - window + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (out - 1) * stride >= in) --out;
    return out;
}

int64_t conv_y_h(const conv_problem* p) {
    const int64_t oh = conv_out_h(p);
    return p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL ? pooled(oh, p->pool_h, p->pool_stride_h, p->pool_ceil) : oh;
}

int64_t conv_y_w(const conv_problem* p) {
    const int64_t ow = conv_out_w(p);
    return p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL ? pooled(ow, p->pool_w, p->pool_stride_w, p->pool_ceil) : ow;
}

int64_t conv_x_image(const conv_problem* p) { return p->C * p->H * p->W; }
int64_t conv_y_image(const conv_problem* p) { return p->M * conv_y_h(p) * conv_y_w(p); }
int64_t conv_w_count(const conv_problem* p) { return p->M * (p->C / p->groups) * p->KH * p->KW; }

static int check_range(const char* name, int64_t value, int64_t lo) {
    if (value < lo)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s must be >= %lld, got %lld", name,
                              (long long)lo, (long long)value);
    if (value > CONV_DIM_LIMIT)
        return conv_set_error(CONV_ERR_TOO_LARGE, "%s = %lld is larger than the limit %lld", name,
                              (long long)value, (long long)CONV_DIM_LIMIT);
    return CONV_OK;
}

static int check_enum(const char* name, int32_t value, int32_t count) {
    if (value < 0 || value >= count)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s = %d is not one of the %d values conv.h defines",
                              name, (int)value, (int)count);
    return CONV_OK;
}

/* a * b into *out, false on int64 overflow. */
static int mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

static int too_large(const char* what, const conv_problem* p) {
    return conv_set_error(CONV_ERR_TOO_LARGE,
                          "%s overflows 64-bit sizes (B=%lld C=%lld H=%lld W=%lld M=%lld KH=%lld KW=%lld)", what,
                          (long long)p->B, (long long)p->C, (long long)p->H, (long long)p->W, (long long)p->M,
                          (long long)p->KH, (long long)p->KW);
}

/* Element counts of x, y and w as a whole, overflow-checked: the caller's buffers have these sizes,
 * so they must be addressable (bytes below 2^63). */
static int check_totals(const conv_problem* p) {
    int64_t image, out_image, conv_image, filters, total, bytes;
    const int64_t oh = conv_y_h(p), ow = conv_y_w(p);
    if (!mul_ok(p->C, p->H, &image) || !mul_ok(image, p->W, &image)) return too_large("C*H*W", p);
    if (!mul_ok(p->M, oh, &out_image) || !mul_ok(out_image, ow, &out_image)) return too_large("M*OH*OW", p);
    /* The kernels index the unpooled output grid too (the batch chunking divides by it). */
    if (!mul_ok(p->M, conv_out_h(p), &conv_image) || !mul_ok(conv_image, conv_out_w(p), &conv_image))
        return too_large("M*OH*OW before pooling", p);
    if (!mul_ok(p->M, p->C / p->groups, &filters) || !mul_ok(filters, p->KH, &filters) ||
        !mul_ok(filters, p->KW, &filters))
        return too_large("M*(C/groups)*KH*KW", p);
    if (!mul_ok(p->B, image, &total) || !mul_ok(total, 4, &bytes)) return too_large("x's size in bytes", p);
    if (!mul_ok(p->B, out_image, &total) || !mul_ok(total, 4, &bytes)) return too_large("y's size in bytes", p);
    /* One image, one output image and the filter bank must each fit CONV_INDEX_LIMIT; the batch is
     * split by the dispatcher, so only these per-image counts are limited. */
    if (image > CONV_INDEX_LIMIT || conv_image > CONV_INDEX_LIMIT || filters > CONV_INDEX_LIMIT)
        return conv_set_error(CONV_ERR_TOO_LARGE,
                              "one image (%lld elements), one output image (%lld before pooling) or the filter "
                              "bank (%lld) has more than 2^30 elements (the limit of 32-bit indexing with headroom)",
                              (long long)image, (long long)conv_image, (long long)filters);
    return CONV_OK;
}

static int validate(const conv_problem* p) {
    const struct { const char* name; int64_t value; int64_t lo; } fields[] = {
        {"B", p->B, 1}, {"C", p->C, 1}, {"H", p->H, 1}, {"W", p->W, 1},
        {"M", p->M, 1}, {"KH", p->KH, 1}, {"KW", p->KW, 1},
        {"stride_h", p->stride_h, 1}, {"stride_w", p->stride_w, 1},
        {"pad_h", p->pad_h, 0}, {"pad_w", p->pad_w, 0},
        {"pad_h_extra", p->pad_h_extra, -p->pad_h}, {"pad_w_extra", p->pad_w_extra, -p->pad_w},  /* -pad: none after */
        {"dilation_h", p->dilation_h, 1}, {"dilation_w", p->dilation_w, 1},
        {"groups", p->groups, 1},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
        int status = check_range(fields[i].name, fields[i].value, fields[i].lo);
        if (status != CONV_OK) return status;
    }
    const struct { const char* name; int32_t value; int32_t count; } enums[] = {
        {"x_dtype", p->x_dtype, 3}, {"w_dtype", p->w_dtype, 3}, {"y_dtype", p->y_dtype, 3},
        {"x_layout", p->x_layout, 2}, {"y_layout", p->y_layout, 2}, {"w_layout", p->w_layout, 2},
        {"compute", p->compute, 4}, {"bias", p->bias, 2}, {"epilogue", p->epilogue, 4},
        {"pool_ceil", p->pool_ceil, 2},
    };
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; ++i) {
        int status = check_enum(enums[i].name, enums[i].value, enums[i].count);
        if (status != CONV_OK) return status;
    }
    if (p->w_dtype != p->x_dtype)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "w_dtype (%s) must be x_dtype (%s)",
                              conv_dtype_name(p->w_dtype), conv_dtype_name(p->x_dtype));
    if (p->C % p->groups != 0 || p->M % p->groups != 0)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "groups = %lld must divide both C = %lld and M = %lld", (long long)p->groups,
                              (long long)p->C, (long long)p->M);
    /* The padded extent fits easily in int64 (each term <= 2^30). */
    const int64_t span_h = p->dilation_h * (p->KH - 1) + 1, span_w = p->dilation_w * (p->KW - 1) + 1;
    const int64_t padded_h = p->H + 2 * p->pad_h + p->pad_h_extra, padded_w = p->W + 2 * p->pad_w + p->pad_w_extra;
    if (span_h > padded_h || span_w > padded_w)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "kernel extent %lldx%lld (KH, KW with dilation) is larger than the "
                              "padded input %lldx%lld",
                              (long long)span_h, (long long)span_w, (long long)padded_h, (long long)padded_w);
    if (p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL) {
        const struct { const char* name; int64_t value; } pool[] = {
            {"pool_h", p->pool_h}, {"pool_w", p->pool_w}, {"pool_stride_h", p->pool_stride_h},
            {"pool_stride_w", p->pool_stride_w},
        };
        for (size_t i = 0; i < 4; ++i) {
            int status = check_range(pool[i].name, pool[i].value, 1);
            if (status != CONV_OK) return status;
        }
        if (p->pool_h > conv_out_h(p) || p->pool_w > conv_out_w(p))
            return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                                  "pool window %lldx%lld is larger than the convolution output %lldx%lld",
                                  (long long)p->pool_h, (long long)p->pool_w, (long long)conv_out_h(p),
                                  (long long)conv_out_w(p));
    }
    return check_totals(p);
}

int conv_problem_load(const conv_problem* in, conv_problem* out) {
    if (!in) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "problem is NULL");
    /* A caller compiled against an older, shorter conv_problem: the fields it lacks keep their
     * defaults. A longer one (a newer header) is refused rather than half read. */
    if (in->size < offsetof(conv_problem, groups) || in->size > sizeof *out)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "problem->size = %llu: set it with conv_problem_init (this library knows sizes "
                              "up to %zu)",
                              (unsigned long long)in->size, sizeof *out);
    conv_problem_init(out);
    memcpy(out, in, (size_t)in->size);
    out->size = sizeof *out;
    return validate(out);
}

int conv_problem_validate(const conv_problem* in) {
    conv_problem p;
    return conv_problem_load(in, &p);
}

int conv_problem_output_shape(const conv_problem* in, int64_t* shape4) {
    conv_problem p;
    int status = conv_problem_load(in, &p);
    if (status != CONV_OK) return status;
    if (!shape4) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "shape4 is NULL");
    shape4[0] = p.B;
    shape4[1] = p.M;
    shape4[2] = conv_y_h(&p);
    shape4[3] = conv_y_w(&p);
    return CONV_OK;
}

int conv_problem_describe(const conv_problem* in, char* text, size_t text_bytes) {
    conv_problem p;
    int status = conv_problem_load(in, &p);
    if (status != CONV_OK) return status;
    if (!text || text_bytes == 0) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "text is NULL or empty");
    int n = snprintf(text, text_bytes,
                     "B%lld C%lld H%lld W%lld M%lld K%lldx%lld s%lld,%lld p%lld,%lld+%lld,%lld d%lld,%lld g%lld "
                     "%s,%s->%s %s/%s/%s c%d b%d e%d",
                     (long long)p.B, (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.M,
                     (long long)p.KH, (long long)p.KW, (long long)p.stride_h, (long long)p.stride_w,
                     (long long)p.pad_h, (long long)p.pad_w, (long long)p.pad_h_extra, (long long)p.pad_w_extra,
                     (long long)p.dilation_h, (long long)p.dilation_w, (long long)p.groups,
                     conv_dtype_name(p.x_dtype), conv_dtype_name(p.w_dtype), conv_dtype_name(p.y_dtype),
                     p.x_layout == CONV_NHWC ? "nhwc" : "nchw", p.w_layout == CONV_MKKC ? "mkkc" : "mckk",
                     p.y_layout == CONV_NHWC ? "nhwc" : "nchw", (int)p.compute, (int)p.bias, (int)p.epilogue);
    if (n >= 0 && (size_t)n < text_bytes && p.epilogue == CONV_EPILOGUE_RELU_MAXPOOL)
        n += snprintf(text + n, text_bytes - (size_t)n, " pool%lldx%lld/%lld,%lld%s", (long long)p.pool_h,
                      (long long)p.pool_w, (long long)p.pool_stride_h, (long long)p.pool_stride_w,
                      p.pool_ceil ? "c" : "");
    if (n < 0 || (size_t)n >= text_bytes)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "text_bytes = %zu is too small", text_bytes);
    return CONV_OK;
}
