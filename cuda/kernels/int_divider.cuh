// int_divider.cuh — division by a divisor fixed for a launch, as a multiply-high and a shift.
// A 32-bit integer division by a run-time value is a sequence of ~20 instructions on the GPU (no divide
// unit); kernels that split a flat index into coordinates for every element they stage paid more for the
// index than for the copy. ConvDivider is built once on the host (the multiplier of Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994) and divides any n < 2^31 exactly.
#pragma once

#include <stdint.h>

struct ConvDivider {
    uint32_t divisor, multiplier, shift;

    // divisor >= 1 and < 2^31.
    __host__ static ConvDivider of(uint32_t divisor) {
        ConvDivider d;
        d.divisor = divisor;
        d.shift = 0;
        while ((1u << d.shift) < divisor) ++d.shift;  // 2^shift >= divisor
        const uint64_t one = 1;
        d.multiplier = (uint32_t)(((one << 32) * ((one << d.shift) - divisor)) / divisor + 1);
        return d;
    }

    // n / divisor for 0 <= n < 2^31 (t + n then fits 32 bits).
    __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, multiplier) + n) >> shift; }

    // n / divisor and n % divisor.
    __device__ __forceinline__ uint32_t divmod(uint32_t n, uint32_t* rem) const {
        const uint32_t q = div(n);
        *rem = n - q * divisor;
        return q;
    }
};
