/* cpu_reference.c — the exact CPU reference ("gold") convolution.
 * OpenMP over (image, output map); for each filter tap the valid output range is computed once, so
 * the innermost loop over output columns has no branches and vectorises when stride_w == 1. */
#include <string.h>

#include "conv_internal.h"

/* floor(a / b) for b > 0 and any sign of a. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Outputs o in [*lo, *hi) whose input index o*stride - pad + tap lies in [0, size). */
static void valid_range(int64_t size, int64_t out, int64_t stride, int64_t pad, int64_t tap,
                        int64_t* lo, int64_t* hi) {
    int64_t first = floor_div(pad - tap + stride - 1, stride);     /* ceil((pad - tap) / stride) */
    int64_t last = floor_div(size - 1 + pad - tap, stride) + 1;
    *lo = first < 0 ? 0 : first;
    *hi = last > out ? out : last;
}

static int cpu_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    (void)ws; (void)ws_bytes; (void)stream;
    const int64_t OH = conv_out_h(p), OW = conv_out_w(p);
    const int64_t B = p->B, C = p->C, H = p->H, W = p->W, M = p->M, KH = p->KH, KW = p->KW;
    const int64_t sh = p->stride_h, sw = p->stride_w, ph = p->pad_h, pw = p->pad_w;
    const int64_t dh = p->dilation_h, dw = p->dilation_w;

#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t m = 0; m < M; ++m) {
            float* out = y + (b * M + m) * OH * OW;            /* y is (B, M, OH, OW) */
            memset(out, 0, (size_t)(OH * OW) * sizeof(float));
            for (int64_t c = 0; c < C; ++c) {
                const float* img = x + (b * C + c) * H * W;    /* x is (B, C, H, W) */
                for (int64_t kh = 0; kh < KH; ++kh) {
                    int64_t oh_lo, oh_hi;
                    valid_range(H, OH, sh, ph, kh * dh, &oh_lo, &oh_hi);
                    for (int64_t kw = 0; kw < KW; ++kw) {
                        int64_t ow_lo, ow_hi;
                        valid_range(W, OW, sw, pw, kw * dw, &ow_lo, &ow_hi);
                        const float tap = w[((m * C + c) * KH + kh) * KW + kw];  /* w is (M, C, KH, KW) */
                        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                            const float* row = img + (oh * sh - ph + kh * dh) * W - pw + kw * dw;
                            float* orow = out + oh * OW;
                            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) orow[ow] += tap * row[ow * sw];
                        }
                    }
                }
            }
        }
    }
    return CONV_OK;
}

static const conv_config CPU_CONFIGS[] = {{"default", cpu_launch, NULL}};
const conv_impl conv_impl_cpu = {.configs = CPU_CONFIGS, .num_configs = 1};
