// device_runtime.cu — the device helpers of the C ABI (memory, copies, streams, events, device
// facts) and the mapping of CUDA errors to conv statuses. Built only with CUDA; device_stub.c
// stands in for it otherwise.
#include <pthread.h>
#include <stdio.h>

#include <atomic>
#include <mutex>
#include <string>

#include "cuda_util.cuh"

int conv_cuda_status(cudaError_t err, const char* what) {
    cudaGetLastError();  // clear a non-sticky error so that the next call starts clean
    int status = CONV_ERR_CUDA;
    if (err == cudaErrorMemoryAllocation) status = CONV_ERR_OUT_OF_MEMORY;
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
        err == cudaErrorInitializationError || err == cudaErrorCompatNotSupportedOnDevice)
        status = CONV_ERR_NO_DEVICE;
    if (err == cudaErrorNoKernelImageForDevice)
        return conv_set_error(CONV_ERR_CUDA,
                              "%s failed: %s (libconv has no kernel for this GPU's architecture; "
                              "reinstall with PYCONV_CUDA_ARCHITECTURES including it, or =all)",
                              what, cudaGetErrorName(err));
    return conv_set_error(status, "%s failed: %s (%s)", what, cudaGetErrorName(err),
                          cudaGetErrorString(err));
}

static std::atomic<int> cuda_started{0};

// CUDA cannot run in a child forked after its parent initialised it: the child inherits the parent's
// driver state but not its threads, and a CUDA call there fails or hangs. A fork handler, registered
// when the library is loaded, marks a child forked after CUDA started here; the library then answers
// "no usable GPU" in it without calling CUDA (auto on host arrays runs on the CPU, a GPU variant or a
// GPU plan inherited from the parent is refused in words).
static std::atomic<int> cuda_initialised{0};  // cudaGetDeviceCount answered here (it runs cuInit)
static std::atomic<int> forked_after_cuda{0};

static void mark_forked_child(void) {
    if (cuda_initialised.load(std::memory_order_relaxed)) forked_after_cuda.store(1, std::memory_order_relaxed);
}

[[maybe_unused]] static const int fork_handler_registered = pthread_atfork(nullptr, nullptr, mark_forked_child);

static int refuse_in_forked_child(void) {
    return conv_set_error(CONV_ERR_NO_DEVICE,
                          "this process was forked after its parent had initialised CUDA, and CUDA cannot run in "
                          "such a child: start worker processes with multiprocessing's 'spawn' or 'forkserver' "
                          "method (torch DataLoader: multiprocessing_context='spawn'), or use variant='cpu' on "
                          "host arrays here");
}

// Releases in a forked child (a parent's pointer, stream or event inherited by a Python object that the
// child collects): nothing of the child's to release, and CUDA must not be called there.
#define CONV_RELEASE_NOTHING_IN_FORKED_CHILD() \
    do { if (forked_after_cuda.load(std::memory_order_relaxed)) return CONV_OK; } while (0)
#define CONV_REFUSE_IN_FORKED_CHILD() \
    do { if (forked_after_cuda.load(std::memory_order_relaxed)) return refuse_in_forked_child(); } while (0)

int conv_cuda_started(void) {
    return cuda_started.load(std::memory_order_relaxed) && !forked_after_cuda.load(std::memory_order_relaxed);
}

int conv_cuda_ready(void) {
    if (forked_after_cuda.load(std::memory_order_relaxed)) {
        refuse_in_forked_child();
        return 0;
    }
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        conv_set_error(CONV_ERR_NO_DEVICE,
                       "no usable CUDA device: %s (%s); is the NVIDIA driver installed and a GPU "
                       "visible (CUDA_VISIBLE_DEVICES)?%s",
                       cudaGetErrorName(err), cudaGetErrorString(err),
                       err == cudaErrorInitializationError
                           ? " Or was this process forked after another library (torch, cupy) initialised CUDA "
                             "in its parent? Then start it with multiprocessing's 'spawn' method"
                           : "");
        cudaGetLastError();
        return 0;
    }
    if (count == 0) {
        conv_set_error(CONV_ERR_NO_DEVICE, "no CUDA device found (the driver reports 0 devices)");
        return 0;
    }
    cuda_initialised.store(1, std::memory_order_relaxed);
    cuda_started.store(1, std::memory_order_relaxed);
    return 1;
}

// The last kernel launched on each device (a static name), for the message of an asynchronous
// fault that surfaces at a later synchronising call.
static std::atomic<const char*> last_kernel[64];

void conv_note_launch(const char* kernel_name) {
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < 64)
        last_kernel[device].store(kernel_name, std::memory_order_relaxed);
}

// A sticky (asynchronous) kernel fault: which kernel was launched last on the current device.
static int conv_fault_status(cudaError_t err, const char* what) {
    int device = 0;
    const char* kernel = nullptr;
    if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < 64)
        kernel = last_kernel[device].load(std::memory_order_relaxed);
    if (err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure || err == cudaErrorMisalignedAddress ||
        err == cudaErrorIllegalInstruction || err == cudaErrorAssert || err == cudaErrorHardwareStackError)
        return conv_set_error(CONV_ERR_CUDA,
                              "%s failed: %s (%s): a kernel faulted on device %d; the last pyconv kernel launched "
                              "there was %s. The CUDA context of this device is now unusable: restart the process",
                              what, cudaGetErrorName(err), cudaGetErrorString(err), device,
                              kernel ? kernel : "(none)");
    return conv_cuda_status(err, what);
}

// Asked on every tuning-cache lookup: looked up once.
int conv_cuda_versions(int* driver, int* runtime) {
    static const int d = [] { int v = 0; cudaDriverGetVersion(&v); return v; }();
    static const int r = [] { int v = 0; cudaRuntimeGetVersion(&v); return v; }();
    *driver = d;
    *runtime = r;
    return CONV_OK;
}

#ifndef CONV_CUDA_ARCHITECTURES
#define CONV_CUDA_ARCHITECTURES "(not recorded)"
#endif

// Compiled like every kernel of the library, for the architectures it was built for: where the device
// can load it, it can load the others.
__global__ void conv_arch_probe_kernel() {}

// CONV_OK when this library holds code that `device` runs; else CONV_ERR_NO_DEVICE naming the GPU's
// architecture and the ones built (a build made for other GPUs must say so, not fail at the first launch
// or fall back to something slower). Asked once per device.
int conv_device_built_for(int device) {
    static std::atomic<int> known[64];  // 0: not asked yet; 1: runs here; 2: no code for it
    const bool cached = device >= 0 && device < 64;
    int state = cached ? known[device].load(std::memory_order_relaxed) : 0;
    if (state == 0) {
        int previous = -1;
        int status = conv_device_enter(device, &previous);
        if (status != CONV_OK) return status;
        cudaFuncAttributes attributes;
        const cudaError_t err = cudaFuncGetAttributes(&attributes, conv_arch_probe_kernel);
        conv_device_leave(previous);
        if (err != cudaSuccess && err != cudaErrorNoKernelImageForDevice && err != cudaErrorInvalidDeviceFunction)
            return conv_cuda_status(err, "cudaFuncGetAttributes");
        cudaGetLastError();
        state = err == cudaSuccess ? 1 : 2;
        if (cached) known[device].store(state, std::memory_order_relaxed);
    }
    if (state == 1) return CONV_OK;
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    char name[256] = "";
    conv_device_name(device, name, sizeof name);
    return conv_set_error(CONV_ERR_NO_DEVICE,
                          "libconv was built for CUDA architectures %s, and GPU %d (%s, compute capability %d.%d) "
                          "runs none of them: reinstall with PYCONV_CUDA_ARCHITECTURES=%d%d%s (or =all), or build "
                          "on a machine with this GPU",
                          CONV_CUDA_ARCHITECTURES, device, name, major, minor, major, minor,
                          major == 9 && minor == 0 ? "a-real" : "-real");
}

int conv_device_enter(int device, int* previous) {
    *previous = -1;
    CONV_REFUSE_IN_FORKED_CHILD();  // a GPU plan the child inherited from its parent
    CONV_CUDA_CHECK(cudaGetDevice(previous));
    if (*previous != device) CONV_CUDA_CHECK(cudaSetDevice(device));
    return CONV_OK;
}

void conv_device_leave(int previous) {
    int current = -1;
    if (previous >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous) cudaSetDevice(previous);
}

// The current device's name, looked up once per device (cudaGetDeviceProperties is slow, and auto
// asks on every call to key its tuning cache).
int conv_gpu_name(char* name, size_t bytes) {
    static std::mutex lock;
    static std::string names[64];
    int device = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= 64) return conv_set_error(CONV_ERR_INTERNAL, "device index %d", device);
    std::lock_guard<std::mutex> guard(lock);
    if (names[device].empty()) {
        cudaDeviceProp prop;
        CONV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
        names[device] = prop.name;
    }
    snprintf(name, bytes, "%s", names[device].c_str());
    return CONV_OK;
}

#define CONV_REQUIRE_DEVICE() \
    do { if (!conv_cuda_ready()) return CONV_ERR_NO_DEVICE; } while (0)
#define CONV_REQUIRE(arg) \
    do { if (!(arg)) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s is NULL", #arg); } while (0)

extern "C" {

int conv_device_count(int* count) {
    CONV_REQUIRE(count);
    *count = 0;
    if (forked_after_cuda.load(std::memory_order_relaxed)) return CONV_OK;  // none usable in this process
    cudaError_t err = cudaGetDeviceCount(count);
    if (err == cudaSuccess) cuda_initialised.store(1, std::memory_order_relaxed);
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        *count = 0;
        return CONV_OK;  // "how many devices" has an honest answer here: none
    }
    CONV_CUDA_CHECK(err);
    return CONV_OK;
}

int conv_device_name(int device, char* name, size_t name_bytes) {
    CONV_REQUIRE(name);
    CONV_REQUIRE_DEVICE();
    cudaDeviceProp prop;
    CONV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    snprintf(name, name_bytes, "%s", prop.name);
    return CONV_OK;
}

int conv_set_device(int device) {
    CONV_REQUIRE_DEVICE();
    CONV_CUDA_CHECK(cudaSetDevice(device));
    return CONV_OK;
}

int conv_get_device(int* device) {
    CONV_REQUIRE(device);
    CONV_REQUIRE_DEVICE();
    CONV_CUDA_CHECK(cudaGetDevice(device));
    return CONV_OK;
}

int conv_mem_info(size_t* free_bytes, size_t* total_bytes) {
    CONV_REQUIRE(free_bytes);
    CONV_REQUIRE(total_bytes);
    CONV_REQUIRE_DEVICE();
    CONV_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return CONV_OK;
}

// The status of a device allocation: out of memory says how much was asked and how much is free,
// then `hint`.
static int device_allocation_status(cudaError_t err, size_t bytes, const char* what, const char* hint) {
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on the GPU: %zu bytes free of %zu%s",
                              bytes, free_bytes, total_bytes, hint);
    }
    return err == cudaSuccess ? CONV_OK : conv_cuda_status(err, what);
}

int conv_malloc(void** ptr, size_t bytes) {
    CONV_REQUIRE(ptr);
    CONV_REQUIRE_DEVICE();
    *ptr = NULL;
    return device_allocation_status(cudaMalloc(ptr, bytes ? bytes : 1), bytes, "cudaMalloc", "");
}

int conv_free(void* ptr) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    CONV_CUDA_CHECK(cudaFree(ptr));
    return CONV_OK;
}

int conv_malloc_host(void** ptr, size_t bytes) {
    CONV_REQUIRE(ptr);
    CONV_REQUIRE_DEVICE();
    *ptr = NULL;
    cudaError_t err = cudaMallocHost(ptr, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory",
                              bytes);
    }
    CONV_CUDA_CHECK(err);
    return CONV_OK;
}

int conv_free_host(void* ptr) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    CONV_CUDA_CHECK(cudaFreeHost(ptr));
    return CONV_OK;
}

static int memcpy_kind(void* dst, const void* src, size_t bytes, void* stream, cudaMemcpyKind kind) {
    CONV_REFUSE_IN_FORKED_CHILD();
    if (bytes == 0) return CONV_OK;
    CONV_REQUIRE(dst);
    CONV_REQUIRE(src);
    CONV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, conv_stream(stream)));
    return CONV_OK;
}

int conv_memcpy_h2d(void* dst, const void* src, size_t bytes, void* stream) {
    return memcpy_kind(dst, src, bytes, stream, cudaMemcpyHostToDevice);
}

int conv_memcpy_d2h(void* dst, const void* src, size_t bytes, void* stream) {
    return memcpy_kind(dst, src, bytes, stream, cudaMemcpyDeviceToHost);
}

int conv_memcpy_d2d(void* dst, const void* src, size_t bytes, void* stream) {
    return memcpy_kind(dst, src, bytes, stream, cudaMemcpyDeviceToDevice);
}

int conv_memset(void* ptr, int value, size_t bytes, void* stream) {
    CONV_REFUSE_IN_FORKED_CHILD();
    if (bytes == 0) return CONV_OK;
    CONV_REQUIRE(ptr);
    CONV_CUDA_CHECK(cudaMemsetAsync(ptr, value, bytes, conv_stream(stream)));
    return CONV_OK;
}

int conv_stream_create(void** stream) {
    CONV_REQUIRE(stream);
    CONV_REQUIRE_DEVICE();
    cudaStream_t s;
    CONV_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return CONV_OK;
}

int conv_stream_destroy(void* stream) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    CONV_CUDA_CHECK(cudaStreamDestroy(conv_stream(stream)));
    return CONV_OK;
}

int conv_stream_synchronize(void* stream) {
    CONV_REQUIRE_DEVICE();
    cudaError_t err = cudaStreamSynchronize(conv_stream(stream));
    return err == cudaSuccess ? CONV_OK : conv_fault_status(err, "cudaStreamSynchronize");
}

int conv_device_synchronize(void) {
    CONV_REQUIRE_DEVICE();
    cudaError_t err = cudaDeviceSynchronize();
    return err == cudaSuccess ? CONV_OK : conv_fault_status(err, "cudaDeviceSynchronize");
}

int conv_pointer_device(const void* ptr, int* device) {
    CONV_REQUIRE(device);
    *device = -1;
    CONV_REQUIRE_DEVICE();
    cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err == cudaErrorInvalidValue) {  // a pointer CUDA has never seen: host memory
        cudaGetLastError();
        return CONV_OK;
    }
    CONV_CUDA_CHECK(err);
    if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) *device = attr.device;
    return CONV_OK;
}

int conv_stream_device(void* stream, int* device) {
    CONV_REQUIRE(device);
    CONV_REQUIRE_DEVICE();
    if (!stream) {
        CONV_CUDA_CHECK(cudaGetDevice(device));
        return CONV_OK;
    }
    CONV_CUDA_CHECK(cudaStreamGetDevice(conv_stream(stream), device));
    return CONV_OK;
}

int conv_stream_wait_stream(void* waiter, void* producer) {
    CONV_REQUIRE_DEVICE();
    if (waiter == producer) return CONV_OK;  // one stream is already ordered
    cudaEvent_t event;
    CONV_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cudaError_t err = cudaEventRecord(event, conv_stream(producer));
    if (err == cudaSuccess) err = cudaStreamWaitEvent(conv_stream(waiter), event, 0);
    cudaEventDestroy(event);  // released once the wait is satisfied
    CONV_CUDA_CHECK(err);
    return CONV_OK;
}

int conv_malloc_async(void** ptr, size_t bytes, void* stream) {
    CONV_REQUIRE(ptr);
    CONV_REQUIRE_DEVICE();
    *ptr = NULL;
    return device_allocation_status(cudaMallocAsync(ptr, bytes ? bytes : 1, conv_stream(stream)), bytes,
                                    "cudaMallocAsync", " (pyconv.empty_cache() returns pyconv's unused pool memory)");
}

int conv_free_async(void* ptr, void* stream) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    CONV_REQUIRE_DEVICE();
    if (ptr) CONV_CUDA_CHECK(cudaFreeAsync(ptr, conv_stream(stream)));
    return CONV_OK;
}

int conv_pool_trim(void) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return CONV_OK;  // no device: nothing pooled
    }
    for (int d = 0; d < count; ++d) {
        cudaMemPool_t pool;
        CONV_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, d));
        CONV_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    }
    return CONV_OK;
}

int conv_event_create(void** event) {
    CONV_REQUIRE(event);
    CONV_REQUIRE_DEVICE();
    cudaEvent_t e;
    CONV_CUDA_CHECK(cudaEventCreate(&e));
    *event = e;
    return CONV_OK;
}

int conv_event_destroy(void* event) {
    CONV_RELEASE_NOTHING_IN_FORKED_CHILD();
    CONV_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
    return CONV_OK;
}

int conv_event_record(void* event, void* stream) {
    CONV_REFUSE_IN_FORKED_CHILD();
    CONV_REQUIRE(event);
    CONV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), conv_stream(stream)));
    return CONV_OK;
}

int conv_stream_wait_event(void* stream, void* event) {
    CONV_REFUSE_IN_FORKED_CHILD();
    CONV_REQUIRE(event);
    CONV_CUDA_CHECK(cudaStreamWaitEvent(conv_stream(stream), static_cast<cudaEvent_t>(event), 0));
    return CONV_OK;
}

int conv_event_synchronize(void* event) {
    CONV_REFUSE_IN_FORKED_CHILD();
    CONV_REQUIRE(event);
    CONV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
    return CONV_OK;
}

int conv_event_elapsed_ms(void* start, void* stop, float* ms) {
    CONV_REFUSE_IN_FORKED_CHILD();
    CONV_REQUIRE(start);
    CONV_REQUIRE(stop);
    CONV_REQUIRE(ms);
    CONV_CUDA_CHECK(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start),
                                         static_cast<cudaEvent_t>(stop)));
    return CONV_OK;
}

}  // extern "C"
