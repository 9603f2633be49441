/* device_stub.c — the device helpers, the demo's ops and the benchmarking entry points in a build
 * without CUDA (CMake compiles this file only there): each says so. Only the pure queries have a real answer. */
#include "conv_bench.h"
#include "conv_internal.h"
#include "conv_ops.h"

#define NO_CUDA() \
    conv_set_error(CONV_ERR_NO_CUDA_BUILD, \
                   "libconv was built without a CUDA compiler; install the CUDA toolkit and rebuild " \
                   "(pip install . finds nvcc on PATH or via CUDACXX)")

int conv_cuda_ready(void) { NO_CUDA(); return 0; }
int conv_cuda_started(void) { return 0; }
int conv_cuda_versions(int* driver, int* runtime) { *driver = *runtime = 0; return CONV_OK; }
int conv_device_enter(int device, int* previous) { (void)device; *previous = -1; return NO_CUDA(); }
int conv_device_built_for(int device) { (void)device; return NO_CUDA(); }
void conv_device_leave(int previous) { (void)previous; }
void conv_note_launch(const char* kernel_name) { (void)kernel_name; }
int conv_gpu_name(char* name, size_t bytes) { (void)name; (void)bytes; return NO_CUDA(); }
int conv_pointer_device(const void* ptr, int* device) {
    (void)ptr;
    if (!device) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "device is NULL");
    *device = -1;  /* without CUDA every pointer is host memory */
    return CONV_OK;
}
int conv_stream_device(void* stream, int* device) { (void)stream; (void)device; return NO_CUDA(); }
int conv_stream_wait_stream(void* waiter, void* producer) { (void)waiter; (void)producer; return NO_CUDA(); }
int conv_malloc_async(void** ptr, size_t bytes, void* stream) { (void)ptr; (void)bytes; (void)stream; return NO_CUDA(); }
int conv_free_async(void* ptr, void* stream) { (void)ptr; (void)stream; return NO_CUDA(); }
int conv_pool_trim(void) { return CONV_OK; }

int conv_device_count(int* count) {
    if (!count) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "count is NULL");
    *count = 0;
    return CONV_OK;
}

int conv_device_name(int device, char* name, size_t name_bytes) { (void)device; (void)name; (void)name_bytes; return NO_CUDA(); }
int conv_set_device(int device) { (void)device; return NO_CUDA(); }
int conv_get_device(int* device) { (void)device; return NO_CUDA(); }
int conv_mem_info(size_t* free_bytes, size_t* total_bytes) { (void)free_bytes; (void)total_bytes; return NO_CUDA(); }
int conv_malloc(void** ptr, size_t bytes) { (void)ptr; (void)bytes; return NO_CUDA(); }
int conv_free(void* ptr) { (void)ptr; return NO_CUDA(); }
int conv_malloc_host(void** ptr, size_t bytes) { (void)ptr; (void)bytes; return NO_CUDA(); }
int conv_free_host(void* ptr) { (void)ptr; return NO_CUDA(); }
int conv_memcpy_h2d(void* dst, const void* src, size_t bytes, void* stream) { (void)dst; (void)src; (void)bytes; (void)stream; return NO_CUDA(); }
int conv_memcpy_d2h(void* dst, const void* src, size_t bytes, void* stream) { (void)dst; (void)src; (void)bytes; (void)stream; return NO_CUDA(); }
int conv_memcpy_d2d(void* dst, const void* src, size_t bytes, void* stream) { (void)dst; (void)src; (void)bytes; (void)stream; return NO_CUDA(); }
int conv_memset(void* ptr, int value, size_t bytes, void* stream) { (void)ptr; (void)value; (void)bytes; (void)stream; return NO_CUDA(); }
int conv_stream_create(void** stream) { (void)stream; return NO_CUDA(); }
int conv_stream_destroy(void* stream) { (void)stream; return NO_CUDA(); }
int conv_stream_synchronize(void* stream) { (void)stream; return NO_CUDA(); }
int conv_device_synchronize(void) { return NO_CUDA(); }
int conv_event_create(void** event) { (void)event; return NO_CUDA(); }
int conv_event_destroy(void* event) { (void)event; return NO_CUDA(); }
int conv_event_record(void* event, void* stream) { (void)event; (void)stream; return NO_CUDA(); }
int conv_event_synchronize(void* event) { (void)event; return NO_CUDA(); }
int conv_stream_wait_event(void* stream, void* event) { (void)stream; (void)event; return NO_CUDA(); }
int conv_event_elapsed_ms(void* start, void* stop, float* ms) { (void)start; (void)stop; (void)ms; return NO_CUDA(); }

/* The demo's device ops of conv_ops.h (cuda/ops/ in a CUDA build). */
int conv_resize_bilinear_u8(const void* x, int64_t n, int in_h, int in_w, void* y, int out_h, int out_w,
                            int y_dtype, void* stream) {
    (void)x; (void)n; (void)in_h; (void)in_w; (void)y; (void)out_h; (void)out_w; (void)y_dtype; (void)stream;
    return NO_CUDA();
}
int conv_softmax_argmax(const void* logits, int64_t n, int k, void* probabilities, void* classes, void* stream) {
    (void)logits; (void)n; (void)k; (void)probabilities; (void)classes; (void)stream;
    return NO_CUDA();
}

/* The benchmarking entry points of conv_bench.h (cuda/bench/ceilings.cu, timing.cu in a CUDA build). */
int conv_measure_ceilings(conv_ceilings* out) {
    (void)out;
    return conv_set_error(CONV_ERR_NO_CUDA_BUILD,
                          "conv_measure_ceilings measures a GPU, but libconv was built without a CUDA "
                          "compiler (install the CUDA toolkit and rebuild)");
}

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

int conv1d_causal_update(const conv_problem* problem, int64_t state_len, const void* x, void* state, const void* w,
                         const void* bias, void* y, void* stream) {
    (void)problem; (void)state_len; (void)x; (void)state; (void)w; (void)bias; (void)y; (void)stream;
    return NO_CUDA();
}
