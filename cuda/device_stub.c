/* device_stub.c — the device helpers in a build without CUDA: each says so. Only the pure queries
 * have a real answer (no devices). */
#include "conv_internal.h"

#define NO_CUDA() \
    conv_set_error(CONV_ERR_NO_CUDA_BUILD, \
                   "libconv was built without a CUDA compiler; install the CUDA toolkit and rebuild " \
                   "(pip install . finds nvcc on PATH or via CUDACXX)")

int conv_cuda_ready(void) { NO_CUDA(); return 0; }

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
int conv_event_elapsed_ms(void* start, void* stop, float* ms) { (void)start; (void)stop; (void)ms; return NO_CUDA(); }
