/* conv_example.c — a C program using libconv through include/conv.h alone.
 * Build against a pip-installed pyconv:
 *   cc conv_example.c $(python -m pyconv --includes) $(python -m pyconv --ldflags) -o conv_example
 * It convolves a small batch on the GPU when there is one (direct variant, device memory), else with
 * the cpu variant, and checks one output element by hand. Prints "OK <variant>" on success. */
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
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void) {
    conv_params p = {.B = 2, .C = 3, .H = 9, .W = 11, .M = 4, .KH = 3, .KW = 3, .stride_h = 1,
                     .stride_w = 1, .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 1};
    int64_t oh, ow;
    CHECK(conv_output_size(&p, &oh, &ow));
    size_t nx = p.B * p.C * p.H * p.W, nw = p.M * p.C * p.KH * p.KW, ny = p.B * p.M * oh * ow;
    float *h_x = malloc(nx * sizeof(float)), *h_w = malloc(nw * sizeof(float)), *h_y = malloc(ny * sizeof(float));
    for (size_t i = 0; i < nx; ++i) h_x[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < nw; ++i) h_w[i] = (float)((i * 104729) % 11) / 11.0f - 0.5f;

    int devices = 0;
    CHECK(conv_device_count(&devices));
    const char* variant = devices > 0 ? "direct" : "cpu";
    int id;
    CHECK(conv_variant_find(variant, &id));
    if (devices > 0) {
        void *d_x, *d_w, *d_y;
        CHECK(conv_malloc(&d_x, nx * sizeof(float)));
        CHECK(conv_malloc(&d_w, nw * sizeof(float)));
        CHECK(conv_malloc(&d_y, ny * sizeof(float)));
        CHECK(conv_memcpy_h2d(d_x, h_x, nx * sizeof(float), NULL));
        CHECK(conv_memcpy_h2d(d_w, h_w, nw * sizeof(float), NULL));
        CHECK(conv2d_direct(&p, d_x, d_w, d_y, NULL, 0, NULL));
        CHECK(conv_memcpy_d2h(h_y, d_y, ny * sizeof(float), NULL));
        CHECK(conv_stream_synchronize(NULL));
        conv_free(d_x); conv_free(d_w); conv_free(d_y);
    } else {
        CHECK(conv2d_cpu(&p, h_x, h_w, h_y, NULL, 0, NULL));
    }
    /* y[1, 2, 4, 5] by hand: interior point, all 3x3 taps inside the image. */
    double expect = 0.0;
    for (int c = 0; c < p.C; ++c)
        for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
                expect += (double)h_x[((1 * p.C + c) * p.H + 4 + kh - 1) * p.W + 5 + kw - 1] *
                          h_w[((2 * p.C + c) * 3 + kh) * 3 + kw];
    float got = h_y[((1 * p.M + 2) * oh + 4) * ow + 5];
    if (fabs(got - expect) > 1e-5 * (1.0 + fabs(expect))) {
        fprintf(stderr, "mismatch: got %f, expected %f\n", got, expect);
        return 1;
    }
    /* A bad argument gets a status and a message, not a crash. */
    p.stride_h = 0;
    if (conv2d_forward(id, &p, h_x, h_w, h_y, NULL, 0, NULL) != CONV_ERR_INVALID_ARGUMENT) return 1;
    printf("OK %s (%s)\n", variant, conv_last_error());
    free(h_x); free(h_w); free(h_y);
    return 0;
}
