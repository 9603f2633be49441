/* conv_example.c — a C program using libconv through include/conv.h alone.
 * Build against a pip-installed pyconv:
 *   cc conv_example.c $(python -m pyconv --includes) $(python -m pyconv --ldflags) -lm -o conv_example
 * It describes a grouped convolution with a bias and a fused ReLU + 2x2 max-pool (ceil mode) as a
 * conv_problem, plans it, runs the plan, and checks every output element against a small reference
 * written out below; then makes one old-style conv2d_forward call (conv_params, no bias or epilogue)
 * and checks that too. It runs on the GPU with the direct variant (device memory) when there is one,
 * else with the cpu variant (host memory). Prints "OK <variant> ..." on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "conv.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != CONV_OK) {                                                                  \
            fprintf(stderr, "%s failed: %s: %s\n", #call, conv_status_string(status_),             \
                    conv_last_error());                                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Deterministic values in [-0.5, 0.5), different for each array. */
static float* filled(size_t n, unsigned salt) {
    float* a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) a[i] = (float)((i * 7919u + salt) % 23u) / 23.0f - 0.5f;
    return a;
}

/* Where the variant reads an operand: a device copy for a GPU variant, the host array for cpu. */
static void* operand(const float* h, size_t n, int on_device) {
    if (!on_device) return (void*)h;
    void* d = NULL;
    CHECK(conv_malloc(&d, n * sizeof(float)));
    CHECK(conv_memcpy_h2d(d, h, n * sizeof(float), NULL));
    return d;
}

/* NaN in every element of y (and of its host copy), so an element the call leaves unwritten fails. */
static void poison(float* h, void* y, size_t n, int on_device) {
    for (size_t i = 0; i < n; ++i) h[i] = NAN;
    if (on_device) CHECK(conv_memcpy_h2d(y, h, n * sizeof(float), NULL));
}

static void fetch(float* h, const void* y, size_t n, int on_device) {
    if (!on_device) return; /* the cpu variant wrote into h itself */
    CHECK(conv_memcpy_d2h(h, y, n * sizeof(float), NULL));
    CHECK(conv_stream_synchronize(NULL));
}

static void release(void* d, int on_device) {
    if (on_device) conv_free(d);
}

/* The convolution output (before pooling) of an NCHW/MCKK f32 problem, + bias, in double.
 * conv is (B, M, OH, OW). */
static void reference_conv(const conv_problem* p, const float* x, const float* w, const float* bias,
                           int64_t OH, int64_t OW, double* conv) {
    const int64_t cg = p->C / p->groups, mg = p->M / p->groups;
    for (int64_t b = 0; b < p->B; ++b)
        for (int64_t m = 0; m < p->M; ++m)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double sum = bias ? bias[m] : 0.0;
                    for (int64_t c = 0; c < cg; ++c)
                        for (int64_t kh = 0; kh < p->KH; ++kh)
                            for (int64_t kw = 0; kw < p->KW; ++kw) {
                                const int64_t ih = oh * p->stride_h - p->pad_h + kh * p->dilation_h;
                                const int64_t iw = ow * p->stride_w - p->pad_w + kw * p->dilation_w;
                                if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                                const int64_t ci = (m / mg) * cg + c; /* this map's group of channels */
                                sum += (double)x[((b * p->C + ci) * p->H + ih) * p->W + iw] *
                                       w[((m * cg + c) * p->KH + kh) * p->KW + kw];
                            }
                    conv[((b * p->M + m) * OH + oh) * OW + ow] = sum;
                }
}

/* ReLU then max over each pool window, clipped to the conv output (ceil mode's last partial window).
 * y is (B, M, PH, PW). */
static void reference_relu_maxpool(const conv_problem* p, const double* conv, int64_t OH, int64_t OW,
                                   int64_t PH, int64_t PW, double* y) {
    for (int64_t bm = 0; bm < p->B * p->M; ++bm)
        for (int64_t ph = 0; ph < PH; ++ph)
            for (int64_t pw = 0; pw < PW; ++pw) {
                double best = 0.0; /* ReLU: nothing below 0 survives */
                for (int64_t i = ph * p->pool_stride_h; i < ph * p->pool_stride_h + p->pool_h && i < OH; ++i)
                    for (int64_t j = pw * p->pool_stride_w; j < pw * p->pool_stride_w + p->pool_w && j < OW; ++j)
                        best = fmax(best, conv[(bm * OH + i) * OW + j]);
                y[(bm * PH + ph) * PW + pw] = best;
            }
}

/* Relative L2 difference; fails the program above 1e-5 (the exact variants' bound). */
static void compare(const char* what, const float* got, const double* expect, size_t n) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; ++i) {
        diff += (got[i] - expect[i]) * (got[i] - expect[i]);
        norm += expect[i] * expect[i];
    }
    if (!(sqrt(diff) <= 1e-5 * sqrt(norm))) {
        fprintf(stderr, "%s: relative L2 difference %g from the reference\n", what, sqrt(diff / norm));
        exit(1);
    }
}

int main(void) {
    int devices = 0;
    CHECK(conv_device_count(&devices));
    const char* variant = devices > 0 ? "direct" : "cpu";
    const int on_device = devices > 0;
    int id;
    CHECK(conv_variant_find(variant, &id));

    /* x (2, 4, 9, 11), w (6, 2, 3, 3): two groups of 2 channels -> 3 maps each, padding 1; then + bias,
     * ReLU and a 2x2/2 max-pool in ceil mode: 9x11 -> 5x6, the last row and column of windows partial. */
    conv_problem p;
    CHECK(conv_problem_init(&p));
    p.B = 2; p.C = 4; p.H = 9; p.W = 11; p.M = 6; p.KH = 3; p.KW = 3;
    p.pad_h = p.pad_w = 1;
    p.groups = 2;
    p.bias = 1;
    p.epilogue = CONV_EPILOGUE_RELU_MAXPOOL;
    p.pool_h = p.pool_w = p.pool_stride_h = p.pool_stride_w = 2;
    p.pool_ceil = 1;
    int64_t shape[4];
    CHECK(conv_problem_output_shape(&p, shape));
    const int64_t OH = (p.H + 2 * p.pad_h - p.KH) + 1, OW = (p.W + 2 * p.pad_w - p.KW) + 1; /* before pooling */
    const size_t nx = (size_t)(p.B * p.C * p.H * p.W), nw = (size_t)(p.M * (p.C / p.groups) * p.KH * p.KW);
    const size_t nconv = (size_t)(p.B * p.M * OH * OW), ny = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]);
    float *h_x = filled(nx, 1), *h_w = filled(nw, 2), *h_b = filled((size_t)p.M, 3), *h_y = malloc(nconv * sizeof(float));
    double *conv = malloc(nconv * sizeof(double)), *expect = malloc(nconv * sizeof(double));
    poison(h_y, NULL, nconv, 0);

    conv_plan* plan;
    CHECK(conv2d_plan_create(id, &p, NULL, -1, &plan));
    conv_plan_info info;
    CHECK(conv2d_plan_get_info(plan, &info));
    void *x = operand(h_x, nx, on_device), *w = operand(h_w, nw, on_device), *b = operand(h_b, p.M, on_device);
    void* y = operand(h_y, nconv, on_device);
    void* ws = NULL;
    if (info.workspace_bytes) {
        if (on_device) CHECK(conv_malloc(&ws, info.workspace_bytes));
        else ws = malloc(info.workspace_bytes);
    }
    poison(h_y, y, nconv, on_device);
    CHECK(conv2d_plan_run(plan, x, w, b, y, ws, info.workspace_bytes, NULL));
    fetch(h_y, y, ny, on_device);
    reference_conv(&p, h_x, h_w, h_b, OH, OW, conv);
    reference_relu_maxpool(&p, conv, OH, OW, shape[2], shape[3], expect);
    compare("plan (groups, bias, ReLU + max-pool)", h_y, expect, ny);
    CHECK(conv2d_plan_destroy(plan));
    if (on_device) conv_free(ws);
    else free(ws);

    /* The old-style call: conv_params, one group, no bias or epilogue; w's first 4 maps of (2, 3, 3)
     * filters read as 2 maps of (4, 3, 3) filters. */
    conv_params q = {.B = p.B, .C = p.C, .H = p.H, .W = p.W, .M = 2, .KH = 3, .KW = 3, .stride_h = 1,
                     .stride_w = 1, .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 1};
    conv_problem plain;
    CHECK(conv_problem_init(&plain));
    plain.B = q.B; plain.C = q.C; plain.H = q.H; plain.W = q.W; plain.M = q.M; plain.KH = 3; plain.KW = 3;
    plain.pad_h = plain.pad_w = 1;
    size_t ws_bytes = 0;
    CHECK(conv2d_workspace_size(id, &q, &ws_bytes));
    ws = NULL;
    if (ws_bytes) {
        if (on_device) CHECK(conv_malloc(&ws, ws_bytes));
        else ws = malloc(ws_bytes);
    }
    const size_t nq = (size_t)(q.B * q.M * OH * OW);
    poison(h_y, y, nconv, on_device);
    CHECK(conv2d_forward(id, &q, x, w, y, ws, ws_bytes, NULL));
    fetch(h_y, y, nq, on_device);
    reference_conv(&plain, h_x, h_w, NULL, OH, OW, expect);
    compare("conv2d_forward", h_y, expect, nq);

    /* A bad argument gets a status and a message, not a crash. */
    p.stride_h = 0;
    if (conv2d_plan_create(id, &p, NULL, -1, &plan) != CONV_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "stride_h = 0 was not refused\n");
        return 1;
    }
    printf("OK %s (libconv %s; output %lldx%lldx%lldx%lld; refused: %s)\n", variant, conv_version(),
           (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3], conv_last_error());

    release(x, on_device); release(w, on_device); release(b, on_device); release(y, on_device);
    if (on_device) conv_free(ws);
    else free(ws);
    free(h_x); free(h_w); free(h_b); free(h_y); free(conv); free(expect);
    return 0;
}
