// depthwise_store.cuh — the store of grouped_direct's large-filter depthwise kernels (depthwise_large.cu,
// depthwise_small_plane.cu): y and bias in a dtype known at run time, so that one kernel per x dtype serves
// every y dtype.
#pragma once

#include "tensor_io.cuh"

// bias[c] widened to float from its dtype (y's); 0 without a bias.
__device__ __forceinline__ float gd_bias_as_float(const void* bias, int dtype, int c) {
    if (!bias) return 0.0f;
    if (dtype == CONV_F16) return conv_load(static_cast<const __half*>(bias), c);
    if (dtype == CONV_BF16) return conv_load(static_cast<const __nv_bfloat16*>(bias), c);
    return conv_load(static_cast<const float*>(bias), c);
}

// y[i] = v in y's dtype.
__device__ __forceinline__ void gd_store_in_dtype(void* y, int dtype, long long i, float v) {
    if (dtype == CONV_F16) static_cast<__half*>(y)[i] = conv_store_as<__half>(v);
    else if (dtype == CONV_BF16) static_cast<__nv_bfloat16*>(y)[i] = conv_store_as<__nv_bfloat16>(v);
    else static_cast<float*>(y)[i] = v;
}
