/* cpu_reference.c — the exact CPU reference ("gold") convolution, with every capability of the
 * problem descriptor: f32 / f16 / bf16 operands, NCHW / NHWC x and y, MCKK / MKKC w, groups, bias and
 * the ReLU and ReLU + max-pool epilogues, asymmetric end padding, strides and dilations.
 *
 * One kernel does the arithmetic: OpenMP over (image, output map), and for each filter tap the valid
 * output range is computed once, so the innermost loop over output columns has no branches and
 * vectorises when stride_w == 1. It reads f32 NCHW x and f32 MCKK w and writes an f32 NCHW plane;
 * other operands are widened into such copies first (x a slab of images at a time, w once per call),
 * and the epilogue (bias, ReLU, max-pool, rounding to y's dtype, y's layout) runs on each finished
 * plane. f32 NCHW problems without pooling take the seed's path: no copy, the sum lands in y itself.
 * The copies are host memory allocated here (the caller passes no workspace); when that fails the
 * call returns CONV_ERR_OUT_OF_MEMORY with the bytes.
 *
 * Sums are fp32 in the order c, kh, kw. Padded taps are skipped except where the weight is Inf or NaN,
 * where they add 0 * w (NaN) as PyTorch's zero padding does; 0 * finite adds nothing. Half-precision
 * conversions are done on bit patterns (exact widening, round-to-nearest-even narrowing), so no
 * compiler support for _Float16 or __bf16 is needed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_internal.h"

#ifdef _OPENMP
#include <omp.h>
#include <pthread.h>
#else
static int omp_get_thread_num(void) { return 0; }
#endif

/* Threads for the parallel loops below: OpenMP's, or 1 in a child forked after this process ran one.
 * libgomp keeps the team of a parallel region parked for the next; a forked child inherits that state
 * but not the threads, and its next parallel region with more than one thread waits for them forever
 * (os.fork, multiprocessing's 'fork' pools). A region of one thread never touches the parked team, so
 * such a child runs the loops serially, with the same results. */
#ifdef _OPENMP
static volatile int forked_after_parallel;
static volatile int ran_parallel;
static void mark_forked_child(void) { forked_after_parallel = ran_parallel; }
static void watch_forks(void) { pthread_atfork(NULL, NULL, mark_forked_child); }

static int cpu_threads(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, watch_forks);
    if (forked_after_parallel) return 1;
    const int threads = omp_get_max_threads();
    if (threads > 1) ran_parallel = 1;
    return threads;
}
#else
static int cpu_threads(void) { return 1; }
#endif

/* conv_map is kept out of line: inlined into the OpenMP loop, whose own variables crowd the
 * registers, its innermost loop reloaded a bound from the stack every iteration (~12% more work). */
#if defined(__GNUC__)
#define CPU_NOINLINE __attribute__((noinline))
#else
#define CPU_NOINLINE
#endif

/* Floats of widened x held at once: a slab of whole images up to 64 MiB (at least one image). */
#define CPU_SLAB_FLOATS ((int64_t)1 << 24)

/* ---- f16 / bf16 <-> float on bit patterns ---- */

static float float_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_from_float(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static float f16_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0) {  /* zero or subnormal: mantissa * 2^-24, exact in float */
        const float magnitude = (float)mantissa * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));  /* Inf, NaN */
    return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

static float bf16_to_float(uint16_t h) { return float_from_bits((uint32_t)h << 16); }

/* value >> shift rounded to nearest, ties to even (1 <= shift <= 31). */
static uint32_t shift_right_rne(uint32_t value, unsigned shift) {
    const uint32_t kept = value >> shift, rest = value & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1u)));
}

static uint16_t float_to_f16(float f) {
    const uint32_t bits = bits_from_float(f);
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));  /* quiet NaN */
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520 rounds to Inf; Inf itself */
    if (magnitude >= 0x38800000u)                                     /* normal in f16: rebias, round 13 bits */
        return (uint16_t)(sign | shift_right_rne(magnitude - (112u << 23), 13));
    if (magnitude <= 0x33000000u) return sign;                        /* <= 2^-25: rounds to (signed) zero */
    /* Subnormal in f16: the value in units of 2^-24 is the 24-bit significand >> (126 - exponent);
     * a carry into 0x400 is the smallest normal, which is the right pattern. */
    const uint32_t exponent = magnitude >> 23, significand = (magnitude & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | shift_right_rne(significand, 126 - exponent));
}

static uint16_t float_to_bf16(float f) {
    const uint32_t bits = bits_from_float(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);  /* quiet NaN */
    /* Overflow carries into the exponent and gives Inf, as round-to-nearest-even should. */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static float load_as_float(const void* base, int dtype, int64_t i) {
    switch (dtype) {
    case CONV_F16: return f16_to_float(((const uint16_t*)base)[i]);
    case CONV_BF16: return bf16_to_float(((const uint16_t*)base)[i]);
    default: return ((const float*)base)[i];
    }
}

static void store_from_float(void* base, int dtype, int64_t i, float v) {
    switch (dtype) {
    case CONV_F16: ((uint16_t*)base)[i] = float_to_f16(v); break;
    case CONV_BF16: ((uint16_t*)base)[i] = float_to_bf16(v); break;
    default: ((float*)base)[i] = v; break;
    }
}

/* dst[k] = src[start + k * step] as float, k < count. */
static void widen_row(const void* src, int dtype, int64_t start, int64_t step, int64_t count, float* dst) {
    for (int64_t k = 0; k < count; ++k) dst[k] = load_as_float(src, dtype, start + k * step);
}

/* ---- operands as f32 NCHW / MCKK ---- */

/* Images b0 .. b0+n-1 of x as f32 NCHW, (n, C, H, W). */
static void widen_images(const conv_problem* p, const void* x, int64_t b0, int64_t n, float* out, int threads) {
    (void)threads;  /* read by the pragma only: unused in a build without OpenMP */
    const int64_t C = p->C, H = p->H, W = p->W;
    const int nhwc = p->x_layout == CONV_NHWC;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t h = 0; h < H; ++h) {
                const int64_t b = b0 + i;
                const int64_t start = nhwc ? (b * H + h) * W * C + c : ((b * C + c) * H + h) * W;
                widen_row(x, p->x_dtype, start, nhwc ? C : 1, W, out + ((i * C + c) * H + h) * W);
            }
}

/* The filter bank as f32 MCKK, (M, C/groups, KH, KW). */
static void widen_filters(const conv_problem* p, const void* w, float* out, int threads) {
    (void)threads;  /* read by the pragma only: unused in a build without OpenMP */
    const int64_t M = p->M, Cg = p->C / p->groups, KH = p->KH, KW = p->KW;
    const int mkkc = p->w_layout == CONV_MKKC;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
                const int64_t start = mkkc ? (m * KH + kh) * KW * Cg + c : ((m * Cg + c) * KH + kh) * KW;
                widen_row(w, p->x_dtype, start, mkkc ? Cg : 1, KW, out + ((m * Cg + c) * KH + kh) * KW);
            }
}

/* ---- the convolution of one output map ---- */

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

/* Adds 0 * tap to every output whose input for this tap is padding (outside rows [oh_lo, oh_hi) or
 * columns [ow_lo, ow_hi)). Only worth calling for a non-finite tap: 0 * finite changes no sum. */
static void add_padded_products(float* plane, int64_t OH, int64_t OW, int64_t oh_lo, int64_t oh_hi,
                                int64_t ow_lo, int64_t ow_hi, float tap) {
    const float product = 0.0f * tap;
    for (int64_t oh = 0; oh < OH; ++oh) {
        const int row_valid = oh >= oh_lo && oh < oh_hi;
        for (int64_t ow = 0; ow < OW; ++ow)
            if (!row_valid || ow < ow_lo || ow >= ow_hi) plane[oh * OW + ow] += product;
    }
}

/* plane (OH, OW) = the convolution of x_group (Cg, H, W: the channels of the map's group) with
 * filter (Cg, KH, KW), summed in fp32. */
static CPU_NOINLINE void conv_map(const conv_problem* p, const float* x_group, const float* filter, float* plane) {
    const int64_t OH = conv_out_h(p), OW = conv_out_w(p);
    const int64_t Cg = p->C / p->groups, H = p->H, W = p->W, KH = p->KH, KW = p->KW;
    const int64_t sh = p->stride_h, sw = p->stride_w, ph = p->pad_h, pw = p->pad_w;
    const int64_t dh = p->dilation_h, dw = p->dilation_w;
    memset(plane, 0, (size_t)(OH * OW) * sizeof(float));
    for (int64_t c = 0; c < Cg; ++c) {
        const float* img = x_group + c * H * W;
        for (int64_t kh = 0; kh < KH; ++kh) {
            int64_t oh_lo, oh_hi;
            valid_range(H, OH, sh, ph, kh * dh, &oh_lo, &oh_hi);
            for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ow_lo, ow_hi;
                valid_range(W, OW, sw, pw, kw * dw, &ow_lo, &ow_hi);
                const float tap = filter[(c * KH + kh) * KW + kw];
                for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                    const float* row = img + (oh * sh - ph + kh * dh) * W - pw + kw * dw;
                    float* orow = plane + oh * OW;
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) orow[ow] += tap * row[ow * sw];
                }
                if (!isfinite(tap)) add_padded_products(plane, OH, OW, oh_lo, oh_hi, ow_lo, ow_hi, tap);
            }
        }
    }
}

/* ---- the epilogue ---- */

/* bias, then the activation: ReLU max(v, 0) keeping NaN (v < 0 is false for NaN), or SiLU
 * v / (1 + exp(-v)). The same as the GPU's epilogue. act: a conv_epilogue (RELU_MAXPOOL: ReLU). */
static float epilogue_value(float acc, float bias, int act) {
    const float v = acc + bias;
    if (act == CONV_EPILOGUE_SILU) return v / (1.0f + expf(-v));
    return act != CONV_EPILOGUE_NONE && v < 0.0f ? 0.0f : v;
}

/* max that stays NaN once it has seen one (PyTorch's max_pool2d propagates NaN). */
static float max_nan(float m, float v) { return (m != m || v > m || v != v) ? (m != m ? m : v) : m; }

/* Stores map m of image b from its finished plane (OH, OW) into y: bias, ReLU, the max over each pool
 * window (a 1x1 window without pooling; in ceil mode the last window is cut at the plane's edge), then
 * y's dtype and layout. */
static void store_map(const conv_problem* p, const float* plane, float bias, void* y, int64_t b, int64_t m) {
    const int64_t OH = conv_out_h(p), OW = conv_out_w(p), YH = conv_y_h(p), YW = conv_y_w(p), M = p->M;
    const int pool = p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL, act = p->epilogue;
    const int64_t wh = pool ? p->pool_h : 1, ww = pool ? p->pool_w : 1;
    const int64_t psh = pool ? p->pool_stride_h : 1, psw = pool ? p->pool_stride_w : 1;
    const int nhwc = p->y_layout == CONV_NHWC;
    for (int64_t yh = 0; yh < YH; ++yh) {
        const int64_t r0 = yh * psh, r1 = r0 + wh < OH ? r0 + wh : OH;
        for (int64_t yw = 0; yw < YW; ++yw) {
            const int64_t c0 = yw * psw, c1 = c0 + ww < OW ? c0 + ww : OW;
            float v = epilogue_value(plane[r0 * OW + c0], bias, act);
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) v = max_nan(v, epilogue_value(plane[r * OW + c], bias, act));
            const int64_t at = nhwc ? ((b * YH + yh) * YW + yw) * M + m : ((b * M + m) * YH + yh) * YW + yw;
            store_from_float(y, p->y_dtype, at, v);
        }
    }
}

/* ---- the run ---- */

static int out_of_memory(size_t bytes, const char* what) {
    return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "variant 'cpu': out of host memory for %zu bytes (%s)", bytes,
                          what);
}

static int cpu_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    (void)ws; (void)ws_bytes; (void)stream;
    const int threads = cpu_threads();
    const int64_t B = p->B, C = p->C, M = p->M, Cg = C / p->groups, maps_per_group = M / p->groups;
    const int64_t image = conv_x_image(p), plane_size = conv_out_h(p) * conv_out_w(p);
    const int64_t filter_size = Cg * p->KH * p->KW;
    const int x_as_is = p->x_dtype == CONV_F32 && p->x_layout == CONV_NCHW;
    const int w_as_is = p->x_dtype == CONV_F32 && p->w_layout == CONV_MCKK;
    /* The sum can land in y itself when y is f32 NCHW of the convolution's own size. */
    const int y_as_plane =
        p->y_dtype == CONV_F32 && p->y_layout == CONV_NCHW && p->epilogue != CONV_EPILOGUE_RELU_MAXPOOL;
    const int needs_store = !y_as_plane || p->bias || p->epilogue != CONV_EPILOGUE_NONE;
    const int64_t slab = x_as_is ? B : (CPU_SLAB_FLOATS / image > 1 ? CPU_SLAB_FLOATS / image : 1);
    const size_t x_bytes = x_as_is ? 0 : (size_t)((slab < B ? slab : B) * image) * sizeof(float);
    const size_t w_bytes = w_as_is ? 0 : (size_t)(M * filter_size) * sizeof(float);
    const size_t planes_bytes = y_as_plane ? 0 : (size_t)threads * (size_t)plane_size * sizeof(float);

    float* x_f32 = x_bytes ? (float*)malloc(x_bytes) : NULL;
    float* w_f32 = w_bytes ? (float*)malloc(w_bytes) : NULL;
    float* planes = planes_bytes ? (float*)malloc(planes_bytes) : NULL;
    int status = CONV_OK;
    if (x_bytes && !x_f32) status = out_of_memory(x_bytes, "an f32 NCHW copy of x");
    else if (w_bytes && !w_f32) status = out_of_memory(w_bytes, "an f32 MCKK copy of w");
    else if (planes_bytes && !planes) status = out_of_memory(planes_bytes, "one f32 output plane per thread");
    if (status != CONV_OK) {
        free(x_f32); free(w_f32); free(planes);
        return status;
    }

    const float* w = w_as_is ? (const float*)t->w : w_f32;
    if (!w_as_is) widen_filters(p, t->w, w_f32, threads);
    for (int64_t b0 = 0; b0 < B; b0 += slab) {
        const int64_t n = B - b0 < slab ? B - b0 : slab;
        const float* x = x_as_is ? (const float*)t->x + b0 * image : x_f32;
        if (!x_as_is) widen_images(p, t->x, b0, n, x_f32, threads);
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t m = 0; m < M; ++m) {
                const int64_t b = b0 + i, group = m / maps_per_group;
                float* plane = y_as_plane ? (float*)t->y + (b * M + m) * plane_size
                                          : planes + (int64_t)omp_get_thread_num() * plane_size;
                conv_map(p, x + (i * C + group * Cg) * p->H * p->W, w + m * filter_size, plane);
                if (needs_store) {
                    const float bias = p->bias ? load_as_float(t->bias, p->y_dtype, m) : 0.0f;
                    store_map(p, plane, bias, t->y, b, m);
                }
            }
        }
    }
    free(x_f32); free(w_f32); free(planes);
    return CONV_OK;
}

static const conv_config CPU_CONFIGS[] = {{"default", cpu_launch, NULL}};
const conv_impl conv_impl_cpu = {.configs = CPU_CONFIGS, .num_configs = 1};
