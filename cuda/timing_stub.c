/* timing_stub.c — conv2d_time in a build without CUDA: there is no device work to time.
 * CMake compiles every .c file of cuda/ into every build, so the body is kept out of the CUDA build, where
 * timing.cu defines the function. */
#ifndef CONV_WITH_CUDA
#include "conv_internal.h"

int conv2d_time(int variant, const conv_params* params, const float* const* xs, const float* const* ws,
                float* const* ys, int n_sets, void* workspace, size_t workspace_bytes, void* stream,
                int calls, int warmup, int reps, float* median_ms, float* times_ms) {
    (void)variant; (void)params; (void)xs; (void)ws; (void)ys; (void)n_sets; (void)workspace;
    (void)workspace_bytes; (void)stream; (void)calls; (void)warmup; (void)reps; (void)median_ms;
    (void)times_ms;
    return conv_set_error(CONV_ERR_NO_CUDA_BUILD,
                          "conv2d_time times GPU variants, but libconv was built without a CUDA compiler "
                          "(install the CUDA toolkit and rebuild); time the cpu variant with a host clock");
}
#endif
