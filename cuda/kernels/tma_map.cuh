// tma_map.cuh — host side of the tensor memory accelerator: encoding the 2-D tensor maps that
// tc_wgmma_tma.cuh's copies read (a row-major matrix of fp16 / bf16, boxes of 128-byte rows in the
// 128-byte swizzle, zeros outside).
//   cuTensorMapEncodeTiled is a driver function; it is looked up through the runtime
//   (cudaGetDriverEntryPointByVersion), so libconv does not link libcuda itself and loads where the
//   driver is older (the TMA configurations then refuse, with the reason).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

#include "conv_kernel_util.cuh"

// The driver's encoder (CUDA 12.0's signature), or NULL where the driver has none. Looked up once.
static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        (void)cudaGetLastError();  // a failed lookup is an answer, not an error for the next call to see
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// CONV_OK where tma_encoder() exists, else CONV_ERR_UNSUPPORTED saying so.
static inline int tma_check_driver(const char* variant) {
    if (tma_encoder()) return CONV_OK;
    return conv_set_error(CONV_ERR_UNSUPPORTED,
                          "%s: the CUDA driver offers no cuTensorMapEncodeTiled, which the TMA configurations "
                          "need (a driver of CUDA 12.0 or later)", variant);
}

// map = the rows x cols matrix at base (16-byte aligned, rows of cols elements of dtype CONV_F16 or
// CONV_BF16, cols * 2 a multiple of 16 bytes), copied in boxes of box_rows rows x 128 bytes.
static inline int tma_map_rows(CUtensorMap* map, const char* variant, const void* base, int dtype, int64_t rows,
                               int64_t cols, int box_rows) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder();
    if (!encode) return tma_check_driver(variant);
    const size_t elem = conv_dtype_size(dtype);
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * elem};  // bytes between rows (dimension 0's is elem)
    const cuuint32_t box[2] = {(cuuint32_t)(128 / elem), (cuuint32_t)box_rows};
    const cuuint32_t steps[2] = {1, 1};
    const CUresult r = encode(map, dtype == CONV_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                              2, const_cast<void*>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) return CONV_OK;
    return conv_set_error(CONV_ERR_CUDA,
                          "%s: cuTensorMapEncodeTiled refused a %lld x %lld matrix at %p (CUresult %d)", variant,
                          (long long)rows, (long long)cols, base, (int)r);
}
