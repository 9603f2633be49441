// tma_map.cuh — host side of the tensor memory accelerator: encoding the tensor maps that
// tc_wgmma_tma.cuh's copies read (fp16 / bf16 operands, boxes of 128-byte rows in the 128-byte swizzle,
// zeros outside the tensor) and its epilogue writes:
//   - x of a 1x1 convolution with stride 1 and no padding: a (pixels x channels) matrix, tiled;
//   - x of any other window: an im2col map of the NHWC tensor, whose bounding box is the window's
//     top-left positions over the output, so that one copy gathers a column of output pixels for one tap;
//   - w (M, KH, KW, C'): a 3-D (maps, taps, channels) tensor, so that a channel range past C' reads zeros
//     rather than the next tap's filters;
//   - y (pixels x maps, NHWC, any y dtype): boxes of a tile's pixels x 128 bytes of maps, clipped at the edges.
//   The encoders are driver functions; they are looked up through the runtime
//   (cudaGetDriverEntryPointByVersion), so libconv does not link libcuda itself and loads where the
//   driver is older (the TMA configurations then refuse, with the reason).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000, PFN_cuTensorMapEncodeIm2col_v12000
#include <cuda_runtime.h>

#include "conv_kernel_util.cuh"

// The driver function `name` (CUDA 12.0's signature), or NULL where the driver has none.
static inline void* tma_driver_function(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        fn = nullptr;
    (void)cudaGetLastError();  // a failed lookup is an answer, not an error for the next call to see
    return fn;
}

static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encode_tiled() {
    static const auto fn =
        reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(tma_driver_function("cuTensorMapEncodeTiled"));
    return fn;
}

static inline PFN_cuTensorMapEncodeIm2col_v12000 tma_encode_im2col() {
    static const auto fn =
        reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(tma_driver_function("cuTensorMapEncodeIm2col"));
    return fn;
}

// CONV_OK where the driver has both encoders, else CONV_ERR_UNSUPPORTED saying so.
static inline int tma_check_driver(const char* variant) {
    if (tma_encode_tiled() && tma_encode_im2col()) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "%s: the CUDA driver offers no cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col, which the "
                          "TMA configurations need (a driver of CUDA 12.0 or later)", variant);
}

static inline CUtensorMapDataType tma_dtype(int dtype) {
    return dtype == CONV_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
           : dtype == CONV_F32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

static inline int tma_result(CUresult r, const char* variant, const char* what) {
    if (r == CUDA_SUCCESS) return CONV_OK;
    return conv_set_error(CONV_ERR_CUDA, "%s: the CUDA driver refused the tensor map of %s (CUresult %d)", variant,
                          what, (int)r);
}

// The elements of a 128-byte row (a k-tile of the wgmma tiles) of dtype.
static inline int tma_row_elems(int dtype) { return 128 / (int)conv_dtype_size(dtype); }

// map = the rows x cols matrix at base (16-byte aligned, rows of cols elements, cols * 2 a multiple of 16
// bytes), copied in boxes of box_rows rows x 128 bytes.
static inline int tma_map_rows(CUtensorMap* map, const char* variant, const void* base, int dtype, int64_t rows,
                               int64_t cols, int box_rows) {
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * conv_dtype_size(dtype)};  // bytes; dimension 0's is implied
    const cuuint32_t box[2] = {(cuuint32_t)tma_row_elems(dtype), (cuuint32_t)box_rows};
    const cuuint32_t steps[2] = {1, 1};
    return tma_result(tma_encode_tiled()(map, tma_dtype(dtype), 2, const_cast<void*>(base), dims, strides, box, steps,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      variant, "x");
}

// map = y (P pixels, M maps) NHWC at base (16-byte aligned, M * element a multiple of 16 bytes), written in
// boxes of box_rows pixels x 128 bytes of maps, in the 128-byte swizzle (tc_store_tma).
static inline int tma_map_y(CUtensorMap* map, const char* variant, void* base, int dtype, int64_t P, int64_t M,
                            int box_rows) {
    const cuuint64_t dims[2] = {(cuuint64_t)M, (cuuint64_t)P};
    const cuuint64_t strides[1] = {(cuuint64_t)M * conv_dtype_size(dtype)};
    const cuuint32_t box[2] = {(cuuint32_t)(128 / conv_dtype_size(dtype)), (cuuint32_t)box_rows};
    const cuuint32_t steps[2] = {1, 1};
    return tma_result(tma_encode_tiled()(map, tma_dtype(dtype), 2, base, dims, strides, box, steps,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      variant, "y");
}

// map = w (M, taps, C') at base, copied in boxes of box_maps maps x one tap x 128 bytes.
static inline int tma_map_filters(CUtensorMap* map, const char* variant, const void* base, int dtype, int64_t M,
                                  int64_t taps, int64_t Cp, int box_maps) {
    const size_t elem = conv_dtype_size(dtype);
    const cuuint64_t dims[3] = {(cuuint64_t)Cp, (cuuint64_t)taps, (cuuint64_t)M};
    const cuuint64_t strides[2] = {(cuuint64_t)(Cp * elem), (cuuint64_t)(taps * Cp * elem)};
    const cuuint32_t box[3] = {(cuuint32_t)tma_row_elems(dtype), 1, (cuuint32_t)box_maps};
    const cuuint32_t steps[3] = {1, 1, 1};
    return tma_result(tma_encode_tiled()(map, tma_dtype(dtype), 3, const_cast<void*>(base), dims, strides, box, steps,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      variant, "w");
}

// The im2col map's bounding box, per spatial dimension: the top-left window corners of the output's
// first and last positions, as offsets from the tensor's first and last element (lower: -pad; upper:
// (out - 1) * stride - pad - (in - 1)). Rank-4 maps hold each in [-128, 127].
struct TmaIm2colBox {
    int lower_w, lower_h, upper_w, upper_h;
};

static inline TmaIm2colBox tma_im2col_box(const conv_problem* p) {
    return TmaIm2colBox{(int)-p->pad_w, (int)-p->pad_h,
                        (int)((conv_out_w(p) - 1) * p->stride_w - p->pad_w - (p->W - 1)),
                        (int)((conv_out_h(p) - 1) * p->stride_h - p->pad_h - (p->H - 1))};
}

// CONV_OK where an im2col map can describe p (strides of at most 8, the box's corners in range), else
// CONV_ERR_UNSUPPORTED naming the limit.
static inline int tma_im2col_supports(const char* variant, const conv_problem* p) {
    const TmaIm2colBox b = tma_im2col_box(p);
    const auto in_range = [](int v) { return v >= -128 && v <= 127; };
    if (p->stride_h > 8 || p->stride_w > 8)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "%s: the TMA configurations step at most 8 pixels (stride %lldx%lld)",
                              variant, (long long)p->stride_h, (long long)p->stride_w);
    if (!in_range(b.lower_w) || !in_range(b.lower_h) || !in_range(b.upper_w) || !in_range(b.upper_h))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "%s: the TMA configurations' im2col box needs padding and (window extent - padding) "
                              "within 128 pixels; here the corners are %d, %d (h, w) and %d, %d", variant, b.lower_h,
                              b.lower_w, b.upper_h, b.upper_w);
    return CONV_OK;
}

// map = x (B, H, W, Cx) at base as im2col columns of box_pixels output pixels x 128 bytes of channels.
static inline int tma_map_im2col(CUtensorMap* map, const char* variant, const void* base, int dtype,
                                 const conv_problem* p, int64_t Cx, int box_pixels) {
    const size_t elem = conv_dtype_size(dtype);
    const cuuint64_t dims[4] = {(cuuint64_t)Cx, (cuuint64_t)p->W, (cuuint64_t)p->H, (cuuint64_t)p->B};
    const cuuint64_t strides[3] = {(cuuint64_t)(Cx * elem), (cuuint64_t)(p->W * Cx * elem),
                                   (cuuint64_t)(p->H * p->W * Cx * elem)};
    const TmaIm2colBox b = tma_im2col_box(p);
    const int lower[2] = {b.lower_w, b.lower_h}, upper[2] = {b.upper_w, b.upper_h};
    const cuuint32_t steps[4] = {1, (cuuint32_t)p->stride_w, (cuuint32_t)p->stride_h, 1};
    return tma_result(tma_encode_im2col()(map, tma_dtype(dtype), 4, const_cast<void*>(base), dims, strides, lower,
                                          upper, (cuuint32_t)tma_row_elems(dtype), (cuuint32_t)box_pixels, steps,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      variant, "x (im2col)");
}
