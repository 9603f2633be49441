// ops_util.cuh — what the whole-network helpers (cuda/ops/) share: the check that an operand is
// device memory on the current device, where their kernels run (the caller has set it).
#pragma once

#include "cuda_util.cuh"

// CONV_OK, or INVALID_ARGUMENT naming `name` when ptr is NULL, host memory or another device's.
static inline int conv_op_device_operand(const char* op, const char* name, const void* ptr) {
    if (!ptr) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
    int where = -1, current = -1;
    int status = conv_pointer_device(ptr, &where);
    if (status != CONV_OK) return status;
    CONV_CUDA_CHECK(cudaGetDevice(&current));
    if (where < 0)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s: %s is host memory; pass device memory on device %d",
                              op, name, current);
    if (where != current)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT,
                              "%s: %s is on device %d, but the current device is %d (set it first)", op, name, where,
                              current);
    return CONV_OK;
}
