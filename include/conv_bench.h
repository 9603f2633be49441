/* conv_bench.h — benchmarking: what this GPU can do (its ceilings, the floors of the bench's "% of
 * floor") and the op time of a variant (cuda/bench/ceilings.cu, timing.cu). Used by the bench tool
 * (python -m pyconv bench); not part of the convolution ABI (conv.h, which this file includes for the
 * status codes and conv_params). Every function returns a conv_status; conv_last_error() has the
 * detail. A build without CUDA answers CONV_ERR_NO_CUDA_BUILD.
 *
 * This file is parsed as written by cffi: plain declarations only, no macros in them.
 */
#ifndef CONV_BENCH_H
#define CONV_BENCH_H

#include "conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ceilings measured on the current device, each the best of several ~20 ms runs (a ceiling is what the
 * unit can do). A rate the GPU lacks is 0. GFLOP/s count an FMA as 2 flops. */
typedef struct conv_ceilings {
    double copy_gbytes_per_s;    /* device-to-device cudaMemcpy of up to 1 GiB: (bytes read + written) / s */
    double fp32_gflops;          /* FP32 FMA on the CUDA cores, every SM busy */
    double fp16_gflops;          /* half2 FMA on the CUDA cores */
    double fp16_tensor_gflops;   /* tensor cores through wmma 16x16x16, fp16 operands, fp32 accumulate (sm_70+) */
    double tf32_tensor_gflops;   /* tensor cores through wmma 16x16x8, tf32 operands (sm_80+) */
    int64_t l2_cache_bytes;      /* what a benchmark must rotate its operands past */
    int sm_count;
} conv_ceilings;
int conv_measure_ceilings(conv_ceilings* out);

/* Median device time of one call of a GPU variant, host launch overhead removed. `calls` launches,
 * call i on operand set i % n_sets (xs[], ws[], ys[]: n_sets device pointers each, so that small shapes
 * are not served from L2), are captured into one CUDA graph after one eager call per set; `warmup`
 * untimed replays follow, then `reps` replays each between two events. median_ms = median replay time
 * / calls; times_ms (NULL or reps floats) gets every replay's time / calls. variant: a GPU variant id,
 * CONV_AUTO or CONV_AUTO_FAST (resolved, and tuned, before the capture; the captured calls go through
 * conv2d_forward as a caller's would). stream: NULL for a private one (the legacy stream cannot be
 * captured). Workspace as for conv2d_forward. */
int conv2d_time(int variant, const conv_params* params, const float* const* xs, const float* const* ws,
                float* const* ys, int n_sets, void* workspace, size_t workspace_bytes, void* stream,
                int calls, int warmup, int reps, float* median_ms, float* times_ms);

#ifdef __cplusplus
}
#endif

#endif /* CONV_BENCH_H */
