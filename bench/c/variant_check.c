/* variant_check.c — checks and times libconv variants through include/conv.h alone.
 *
 * Build (repository root, library built into build/ with CMake):
 *   gcc -O2 -std=c11 -Iinclude bench/c/variant_check.c -Lbuild -lconv -Wl,-rpath,$PWD/build -lm \
 *       -o build/variant_check
 * Run:
 *   build/variant_check [-v direct,direct_regblock,mma_fp16] [-s all|lenet|odd|NAME,NAME...] [-r REPS]
 *   (-r 0: check only, no timing, e.g. under compute-sanitizer)
 *
 * For every (variant, shape): fills x and w with uniform(-1, 1) from a fixed-seed LCG, poisons y
 * with NaN (bytes 0xFF), runs the variant, checks that every output element was written, and
 * compares with a float64 CPU reference (all images of small batches; the first three and the
 * last of large ones) by relative L2 error against the variant's own bound. Then it times the
 * variant: 3 warm-up runs, then REPS (>= 50) runs each bracketed by events, and reports the
 * median with GFLOP/s and GB/s (x + w + y bytes once each). Shapes whose x and y fit in L2 rotate
 * over several input/output buffers so that the timings are not of the cache. The summary table
 * is printed last. Exit status: 0 when every supported case passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != CONV_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,               \
                    conv_status_string(status_), conv_last_error());                               \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct {
    const char* name;
    const char* group; /* "lenet" or "odd" */
    conv_params p;
} shape;

/* B, C, H, W, M, KH, KW, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w */
static const shape SHAPES[] = {
    {"lenet_c1", "lenet", {10000, 1, 86, 86, 4, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"lenet_c3", "lenet", {10000, 4, 40, 40, 16, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"c1_b100", "odd", {100, 1, 86, 86, 4, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"c3_b100", "odd", {100, 4, 40, 40, 16, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"c3_b1", "odd", {1, 4, 40, 40, 16, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"stride2_k3", "odd", {3, 3, 33, 31, 5, 3, 3, 2, 2, 1, 1, 1, 1}},
    {"pad2_k5", "odd", {2, 4, 17, 19, 7, 5, 5, 1, 1, 2, 2, 1, 1}},
    {"dil2_k3", "odd", {2, 2, 23, 21, 6, 3, 3, 1, 1, 2, 2, 2, 2}},
    {"rect5x3", "odd", {2, 3, 20, 18, 9, 5, 3, 1, 1, 1, 2, 1, 1}},
    {"b1_m33", "odd", {1, 16, 13, 11, 33, 3, 3, 1, 1, 1, 1, 1, 1}},
    {"odd_k7", "odd", {5, 5, 15, 13, 3, 7, 7, 1, 1, 0, 0, 1, 1}},
    {"k7_pad3", "odd", {2, 3, 24, 25, 20, 7, 7, 1, 1, 3, 3, 1, 1}},
    {"k1", "odd", {4, 32, 9, 7, 20, 1, 1, 1, 1, 0, 0, 1, 1}},
    {"k3_c64", "odd", {2, 64, 10, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1}},
    {"asym", "odd", {2, 3, 19, 23, 10, 3, 4, 2, 1, 0, 3, 1, 2}},
    {"m70", "odd", {2, 3, 12, 12, 70, 3, 3, 1, 1, 0, 0, 1, 1}},
    {"k7x5_c20", "odd", {2, 20, 14, 16, 17, 7, 5, 1, 1, 0, 0, 1, 1}},
    {"wide", "odd", {1, 2, 5, 300, 8, 3, 3, 1, 1, 0, 0, 1, 1}},
    {"tall", "odd", {3, 1, 200, 9, 4, 5, 5, 1, 1, 0, 0, 1, 1}},
};
#define NUM_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

typedef struct {
    char variant[64];
    char shape[32];
    const char* status; /* PASS, FAIL, UNSUPPORTED */
    double rel_err, bound, ms, gflops, gbps;
} result;

static result results[1024];
static int num_results;

/* Deterministic uniform(-1, 1). */
static uint64_t lcg_state;
static float lcg_uniform(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(lcg_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

/* float64 reference of image b into ref (M, OH, OW). */
static void reference_image(const conv_params* p, int64_t OH, int64_t OW, const float* x, const float* w,
                            int64_t b, double* ref) {
    for (int64_t m = 0; m < p->M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                double acc = 0.0;
                for (int64_t c = 0; c < p->C; ++c)
                    for (int64_t kh = 0; kh < p->KH; ++kh) {
                        const int64_t ih = oh * p->stride_h - p->pad_h + kh * p->dilation_h;
                        if (ih < 0 || ih >= p->H) continue;
                        for (int64_t kw = 0; kw < p->KW; ++kw) {
                            const int64_t iw = ow * p->stride_w - p->pad_w + kw * p->dilation_w;
                            if (iw < 0 || iw >= p->W) continue;
                            acc += (double)x[((b * p->C + c) * p->H + ih) * p->W + iw] *
                                   (double)w[((m * p->C + c) * p->KH + kh) * p->KW + kw];
                        }
                    }
                ref[(m * OH + oh) * OW + ow] = acc;
            }
}

static int cmp_float(const void* a, const void* b) {
    const float fa = *(const float*)a, fb = *(const float*)b;
    return (fa > fb) - (fa < fb);
}

static int in_list(const char* list, const char* name) {
    if (!list) return 1;
    const size_t n = strlen(name);
    for (const char* s = list; (s = strstr(s, name)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == '\0')) return 1;
    return 0;
}

/* Data of one shape, shared by every variant run on it. */
typedef struct {
    float *h_x, *h_w, *h_y;
    float *d_x[8], *d_y[8], *d_w;
    int rot;
    size_t nx, nw, ny;
    double* ref;        /* reference of the checked images */
    int64_t checked[4]; /* which images */
    int nchecked;
} shape_data;

static void run_case(const shape* sh, shape_data* d, const char* variant, int reps) {
    const conv_params* p = &sh->p;
    result* r = &results[num_results++];
    memset(r, 0, sizeof *r);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    snprintf(r->shape, sizeof r->shape, "%s", sh->name);
    int id;
    CHECK(conv_variant_find(variant, &id));
    conv_variant_info info;
    CHECK(conv_variant_get_info(id, &info));
    r->bound = info.max_rel_error;
    int status = conv_variant_supports(id, p);
    if (status == CONV_ERR_UNSUPPORTED) {
        r->status = "UNSUPPORTED";
        printf("%-16s %-11s UNSUPPORTED: %s\n", variant, sh->name, conv_last_error());
        return;
    }
    CHECK(status);
    size_t ws_bytes = 0;
    void* ws = NULL;
    CHECK(conv2d_workspace_size(id, p, &ws_bytes));
    if (ws_bytes) CHECK(conv_malloc(&ws, ws_bytes));

    /* Correctness: poison, run, copy back, check every element and the error. */
    const size_t ybytes = d->ny * sizeof(float);
    CHECK(conv_memset(d->d_y[0], 0xFF, ybytes, NULL));
    CHECK(conv2d_forward(id, p, d->d_x[0], d->d_w, d->d_y[0], ws, ws_bytes, NULL));
    CHECK(conv_memcpy_d2h(d->h_y, d->d_y[0], ybytes, NULL));
    CHECK(conv_stream_synchronize(NULL));
    size_t unwritten = 0;
    for (size_t i = 0; i < d->ny; ++i) unwritten += d->h_y[i] != d->h_y[i];
    const int64_t OH = (p->H + 2 * p->pad_h - p->dilation_h * (p->KH - 1) - 1) / p->stride_h + 1;
    const int64_t OW = (p->W + 2 * p->pad_w - p->dilation_w * (p->KW - 1) - 1) / p->stride_w + 1;
    const size_t out_image = (size_t)(p->M * OH * OW);
    double num = 0.0, den = 0.0;
    for (int i = 0; i < d->nchecked; ++i) {
        const float* got = d->h_y + d->checked[i] * out_image;
        const double* ref = d->ref + i * out_image;
        for (size_t e = 0; e < out_image; ++e) {
            const double diff = (double)got[e] - ref[e];
            num += diff * diff;
            den += ref[e] * ref[e];
        }
    }
    r->rel_err = den > 0 ? sqrt(num / den) : sqrt(num);
    const int pass = unwritten == 0 && r->rel_err <= r->bound;  /* NaN fails too */
    r->status = pass ? "PASS" : "FAIL";

    if (reps == 0) { /* correctness only (e.g. under compute-sanitizer) */
        if (ws) CHECK(conv_free(ws));
        printf("%-16s %-11s %s rel_err %.2e (bound %.0e) unwritten %zu\n", variant, sh->name, r->status,
               r->rel_err, r->bound, unwritten);
        return;
    }
    /* Timing: warm-up, then reps runs each between two events, rotating buffers. */
    void* ev[2 * 256];
    if (reps > 256) reps = 256;
    for (int i = 0; i < 2 * reps; ++i) CHECK(conv_event_create(&ev[i]));
    for (int i = 0; i < 3; ++i)
        CHECK(conv2d_forward(id, p, d->d_x[i % d->rot], d->d_w, d->d_y[i % d->rot], ws, ws_bytes, NULL));
    for (int i = 0; i < reps; ++i) {
        CHECK(conv_event_record(ev[2 * i], NULL));
        CHECK(conv2d_forward(id, p, d->d_x[i % d->rot], d->d_w, d->d_y[i % d->rot], ws, ws_bytes, NULL));
        CHECK(conv_event_record(ev[2 * i + 1], NULL));
    }
    CHECK(conv_event_synchronize(ev[2 * reps - 1]));
    float times[256];
    for (int i = 0; i < reps; ++i) CHECK(conv_event_elapsed_ms(ev[2 * i], ev[2 * i + 1], &times[i]));
    for (int i = 0; i < 2 * reps; ++i) CHECK(conv_event_destroy(ev[i]));
    qsort(times, reps, sizeof times[0], cmp_float);
    r->ms = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    const double flops = 2.0 * (double)p->B * p->M * OH * OW * p->C * p->KH * p->KW;
    const double bytes = 4.0 * ((double)d->nx + d->nw + d->ny);
    r->gflops = flops / (r->ms * 1e6);
    r->gbps = bytes / (r->ms * 1e6);
    if (ws) CHECK(conv_free(ws));
    printf("%-16s %-11s %s rel_err %.2e (bound %.0e) unwritten %zu  median %.4f ms (min %.4f max %.4f) "
           "%.0f GFLOP/s %.0f GB/s\n",
           variant, sh->name, r->status, r->rel_err, r->bound, unwritten, r->ms, times[0],
           times[reps - 1], r->gflops, r->gbps);
    fflush(stdout);
}

int main(int argc, char** argv) {
    const char* variants = "direct,direct_regblock,mma_fp16";
    const char* shapes = "all";
    int reps = 60;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-v")) variants = argv[i + 1];
        else if (!strcmp(argv[i], "-s")) shapes = argv[i + 1];
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [-v variants] [-s all|lenet|odd|names] [-r reps]\n", argv[0]);
            return 2;
        }
    }
    if (reps != 0 && reps < 50) reps = 50;
    char device[256] = "?";
    int devices = 0;
    CHECK(conv_device_count(&devices));
    if (devices == 0) {
        fprintf(stderr, "no CUDA device\n");
        return 2;
    }
    CHECK(conv_device_name(0, device, sizeof device));
    printf("device: %s, libconv %s\n", device, conv_version());

    for (int s = 0; s < NUM_SHAPES; ++s) {
        const shape* sh = &SHAPES[s];
        if (strcmp(shapes, "all") && strcmp(shapes, sh->group) && !in_list(shapes, sh->name)) continue;
        const conv_params* p = &sh->p;
        int64_t OH, OW;
        CHECK(conv_output_size(p, &OH, &OW));
        shape_data d;
        memset(&d, 0, sizeof d);
        d.nx = (size_t)(p->B * p->C * p->H * p->W);
        d.nw = (size_t)(p->M * p->C * p->KH * p->KW);
        d.ny = (size_t)(p->B * p->M * OH * OW);
        const double footprint = 4.0 * (double)(d.nx + d.ny);
        d.rot = footprint >= 256e6 ? 1 : (int)ceil(256e6 / footprint);
        if (d.rot > 8) d.rot = 8;
        d.h_x = malloc(d.nx * sizeof(float));
        d.h_w = malloc(d.nw * sizeof(float));
        d.h_y = malloc(d.ny * sizeof(float));
        if (!d.h_x || !d.h_w || !d.h_y) {
            fprintf(stderr, "host allocation failed\n");
            return 2;
        }
        lcg_state = 0x5eed0000ULL + (uint64_t)s;
        for (size_t i = 0; i < d.nx; ++i) d.h_x[i] = lcg_uniform();
        for (size_t i = 0; i < d.nw; ++i) d.h_w[i] = lcg_uniform();
        CHECK(conv_malloc((void**)&d.d_w, d.nw * sizeof(float)));
        CHECK(conv_memcpy_h2d(d.d_w, d.h_w, d.nw * sizeof(float), NULL));
        for (int i = 0; i < d.rot; ++i) {
            CHECK(conv_malloc((void**)&d.d_x[i], d.nx * sizeof(float)));
            CHECK(conv_malloc((void**)&d.d_y[i], d.ny * sizeof(float)));
            CHECK(conv_memcpy_h2d(d.d_x[i], d.h_x, d.nx * sizeof(float), NULL));
        }
        /* Reference images: all of a small batch, else the first three and the last. */
        if (p->B <= 4) {
            for (int64_t b = 0; b < p->B; ++b) d.checked[d.nchecked++] = b;
        } else {
            d.checked[0] = 0; d.checked[1] = 1; d.checked[2] = 2; d.checked[3] = p->B - 1;
            d.nchecked = 4;
        }
        const size_t out_image = (size_t)(p->M * OH * OW);
        d.ref = malloc(d.nchecked * out_image * sizeof(double));
        for (int i = 0; i < d.nchecked; ++i) reference_image(p, OH, OW, d.h_x, d.h_w, d.checked[i], d.ref + i * out_image);

        char list[512];
        snprintf(list, sizeof list, "%s", variants);
        for (char* v = strtok(list, ","); v; v = strtok(NULL, ",")) run_case(sh, &d, v, reps);
        for (int i = 0; i < d.rot; ++i) {
            CHECK(conv_free(d.d_x[i]));
            CHECK(conv_free(d.d_y[i]));
        }
        CHECK(conv_free(d.d_w));
        free(d.h_x); free(d.h_w); free(d.h_y); free(d.ref);
    }

    int failed = 0, skipped = 0;
    printf("\n%-16s %-11s %-11s %9s %9s %9s %9s\n", "variant", "shape", "status", "rel_err", "median_ms",
           "GFLOP/s", "GB/s");
    for (int i = 0; i < num_results; ++i) {
        const result* r = &results[i];
        failed += !strcmp(r->status, "FAIL");
        if (!strcmp(r->status, "UNSUPPORTED")) {
            ++skipped;
            printf("%-16s %-11s %-11s\n", r->variant, r->shape, r->status);
            continue;
        }
        printf("%-16s %-11s %-11s %9.2e %9.4f %9.0f %9.0f\n", r->variant, r->shape, r->status, r->rel_err, r->ms,
               r->gflops, r->gbps);
    }
    printf("%d passed, %d failed, %d skipped\n", num_results - failed - skipped, failed, skipped);
    return failed ? 1 : 0;
}
