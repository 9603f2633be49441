// ceilings.cu — conv_measure_ceilings: what this GPU can do, measured on it, so that every floor the
// bench tool reports comes from the machine it runs on rather than from a datasheet.
//   copy:                  cudaMemcpyAsync device-to-device of up to 1 GiB; bytes read + bytes written.
//   ffma_loop_kernel:      FP32 FMA rate. LOOP_CHAINS independent FMA chains per thread, so the FMA
//                          pipe never waits on its own latency, on as many threads as fit on every SM.
//   hfma2_loop_kernel:     the same with half2 FMAs (two fp16 FMAs per instruction).
//   wmma_fp16_loop_kernel, wmma_tf32_loop_kernel: tensor-core rate through nvcuda::wmma, the API the
//                          library's tensor-core variants use (on Hopper that is mma.sync, below the
//                          wgmma peak cuBLAS reaches), fragments held in registers, MMA_CHAINS
//                          independent accumulators per warp.
// Every loop kernel takes (out, iters, flag) and stores its result only when flag is set (never) or
// the result is negative (never: every operand is positive). The compiler can prove neither, and the
// second test reads the result, so the whole loop must run before the branch. Each rate is the best
// of CEIL_REPS runs of about CEIL_TARGET_MS: a ceiling is what the unit can do, not what it does on
// average.
#include <cuda_fp16.h>
#include <mma.h>

#include "conv_bench.h"
#include "cuda_util.cuh"

constexpr int LOOP_THREADS = 256;
constexpr int LOOP_CHAINS = 8;      // independent FMA chains per thread: more than the pipe latency needs
constexpr int LOOP_UNROLL = 32;     // FMAs per chain per trip: loop overhead is ~1% of the instructions
constexpr int MMA_CHAINS = 8;       // independent accumulators per warp
constexpr int MMA_UNROLL = 4;
constexpr int CEIL_REPS = 5;
constexpr double CEIL_TARGET_MS = 20.0;
constexpr size_t COPY_MAX_BYTES = (size_t)1 << 30;

// acc = acc * a + b converges to b / (1 - a): values stay finite however long the loop runs.
__global__ void __launch_bounds__(LOOP_THREADS) ffma_loop_kernel(float* out, long long iters, int flag) {
    const float a = 0.999f + 1e-3f * (float)flag, b = 1e-3f;
    float acc[LOOP_CHAINS];
#pragma unroll
    for (int i = 0; i < LOOP_CHAINS; ++i) acc[i] = 1e-3f * (float)(threadIdx.x + i);
    for (long long it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < LOOP_UNROLL; ++u)
#pragma unroll
            for (int i = 0; i < LOOP_CHAINS; ++i) acc[i] = fmaf(acc[i], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LOOP_CHAINS; ++i) sum += acc[i];
    if (flag || sum < 0.0f) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// The half2 twin of ffma_loop_kernel: each __hfma2 is 2 FMAs = 4 flops.
__global__ void __launch_bounds__(LOOP_THREADS) hfma2_loop_kernel(float* out, long long iters, int flag) {
    const __half2 a = __float2half2_rn(0.999f + 1e-3f * (float)flag), b = __float2half2_rn(1e-3f);
    __half2 acc[LOOP_CHAINS];
#pragma unroll
    for (int i = 0; i < LOOP_CHAINS; ++i) acc[i] = __float2half2_rn(1e-3f * (float)(threadIdx.x + i));
    for (long long it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < LOOP_UNROLL; ++u)
#pragma unroll
            for (int i = 0; i < LOOP_CHAINS; ++i) acc[i] = __hfma2(acc[i], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LOOP_CHAINS; ++i) sum += __low2float(acc[i]) + __high2float(acc[i]);
    if (flag || sum < 0.0f) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// MMA_CHAINS accumulators, each c += a * b per step, all operands in registers. One warp's share of
// out (were it ever written) is MMA_CHAINS 16x16 tiles.
template <typename FragA, typename FragB, typename FragC>
__device__ void mma_loop(const FragA& a, const FragB& b, float* out, long long iters, int flag) {
    using namespace nvcuda;
    FragC c[MMA_CHAINS];
#pragma unroll
    for (int i = 0; i < MMA_CHAINS; ++i) wmma::fill_fragment(c[i], 0.0f);
    for (long long it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < MMA_UNROLL; ++u)
#pragma unroll
            for (int i = 0; i < MMA_CHAINS; ++i) wmma::mma_sync(c[i], a, b, c[i]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < MMA_CHAINS; ++i) sum += c[i].x[0];
    sum = __shfl_sync(0xffffffffu, sum, 0);  // store_matrix_sync is collective: lane 0 decides for the warp
    if (flag || sum < 0.0f) {
        const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
#pragma unroll
        for (int i = 0; i < MMA_CHAINS; ++i)
            wmma::store_matrix_sync(out + (warp * MMA_CHAINS + i) * 256, c[i], 16, wmma::mem_row_major);
    }
}

// Tensor cores, fp16 operands, fp32 accumulate: 2*16*16*16 flops per mma_sync. sm_70+.
__global__ void __launch_bounds__(LOOP_THREADS) wmma_fp16_loop_kernel(float* out, long long iters, int flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fill_fragment(a, __float2half(1e-2f + 1e-3f * (float)flag));
    wmma::fill_fragment(b, __float2half(1e-2f));
    mma_loop<decltype(a), decltype(b), wmma::fragment<wmma::accumulator, 16, 16, 16, float>>(a, b, out, iters,
                                                                                             flag);
#endif
}

// Tensor cores, tf32 operands, fp32 accumulate: 2*16*16*8 flops per mma_sync. sm_80+.
__global__ void __launch_bounds__(LOOP_THREADS) wmma_tf32_loop_kernel(float* out, long long iters, int flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b;
    wmma::fill_fragment(a, wmma::__float_to_tf32(1e-2f + 1e-3f * (float)flag));
    wmma::fill_fragment(b, wmma::__float_to_tf32(1e-2f));
    mma_loop<decltype(a), decltype(b), wmma::fragment<wmma::accumulator, 16, 16, 8, float>>(a, b, out, iters,
                                                                                            flag);
#endif
}

// A loop kernel and the flops one thread does per loop trip.
struct loop_kernel {
    void (*kernel)(float*, long long, int);
    double flops_per_thread_trip;
};

// A private stream and the two events that bracket each timed launch.
struct timer {
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

static int time_loop_once(const timer& t, const loop_kernel& k, unsigned grid, long long iters, float* ms) {
    CONV_CUDA_CHECK(cudaEventRecord(t.start, t.stream));
    k.kernel<<<grid, LOOP_THREADS, 0, t.stream>>>(nullptr, iters, 0);
    CONV_LAUNCH_CHECK(loop_kernel);
    CONV_CUDA_CHECK(cudaEventRecord(t.stop, t.stream));
    CONV_CUDA_CHECK(cudaEventSynchronize(t.stop));
    CONV_CUDA_CHECK(cudaEventElapsedTime(ms, t.start, t.stop));
    return CONV_OK;
}

// GFLOP/s of a loop kernel filling every SM: the trip count is grown until one launch takes about
// CEIL_TARGET_MS (so launch latency and clock ramp-up do not count), then the best of CEIL_REPS.
static int measure_loop(const timer& t, const loop_kernel& k, int sm_count, double* gflops) {
    int per_sm = 0;
    CONV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k.kernel, LOOP_THREADS, 0));
    const unsigned grid = (unsigned)(sm_count * (per_sm > 0 ? per_sm : 1));
    // An untimed first launch loads the module, which would otherwise count in the first timing.
    k.kernel<<<grid, LOOP_THREADS, 0, t.stream>>>(nullptr, 1, 0);
    CONV_LAUNCH_CHECK(loop_kernel);
    CONV_CUDA_CHECK(cudaStreamSynchronize(t.stream));
    long long iters = 64;
    float ms = 0.0f;
    int status = time_loop_once(t, k, grid, iters, &ms);
    for (int grow = 0; status == CONV_OK && grow < 8 && ms < CEIL_TARGET_MS / 2; ++grow) {
        const double factor = ms > 0.01f ? CEIL_TARGET_MS / ms : 64.0;
        iters = (long long)((double)iters * (factor < 64.0 ? factor : 64.0)) + 1;
        status = time_loop_once(t, k, grid, iters, &ms);
    }
    float best = ms;
    for (int r = 0; status == CONV_OK && r < CEIL_REPS; ++r) {
        status = time_loop_once(t, k, grid, iters, &ms);
        if (ms < best) best = ms;
    }
    if (status != CONV_OK) return status;
    const double flops = k.flops_per_thread_trip * (double)iters * (double)grid * LOOP_THREADS;
    *gflops = flops / ((double)best * 1e-3) / 1e9;
    return CONV_OK;
}

// Device-to-device copy bandwidth, counting the bytes read and the bytes written.
static int measure_copy(const timer& t, double* gbytes_per_s) {
    size_t free_bytes = 0, total_bytes = 0;
    CONV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    size_t bytes = free_bytes / 4 < COPY_MAX_BYTES ? free_bytes / 4 : COPY_MAX_BYTES;
    bytes &= ~(size_t)255;
    if (bytes == 0) return conv_set_error(CONV_ERR_OUT_OF_MEMORY, "no device memory free for the copy ceiling");
    void *src = nullptr, *dst = nullptr;
    int status = CONV_OK;
    float best = 0.0f;
    if ((status = conv_malloc(&src, bytes)) == CONV_OK && (status = conv_malloc(&dst, bytes)) == CONV_OK &&
        (status = conv_memset(src, 0x3f, bytes, t.stream)) == CONV_OK) {
        for (int r = 0; r <= CEIL_REPS && status == CONV_OK; ++r) {  // r = 0 is the warm-up
            float ms = 0.0f;
            cudaError_t err = cudaEventRecord(t.start, t.stream);
            if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, t.stream);
            if (err == cudaSuccess) err = cudaEventRecord(t.stop, t.stream);
            if (err == cudaSuccess) err = cudaEventSynchronize(t.stop);
            if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, t.start, t.stop);
            if (err != cudaSuccess) status = conv_cuda_status(err, "timing the device-to-device copy");
            else if (r > 0 && (best == 0.0f || ms < best)) best = ms;
        }
    }
    conv_free(src);
    conv_free(dst);
    if (status != CONV_OK) return status;
    *gbytes_per_s = 2.0 * (double)bytes / ((double)best * 1e-3) / 1e9;
    return CONV_OK;
}

static int measure_all(const timer& t, conv_ceilings* c, int cc_major) {
    int status = measure_copy(t, &c->copy_gbytes_per_s);
    const loop_kernel ffma = {ffma_loop_kernel, 2.0 * LOOP_CHAINS * LOOP_UNROLL};
    const loop_kernel hfma2 = {hfma2_loop_kernel, 4.0 * LOOP_CHAINS * LOOP_UNROLL};
    // Per thread: its warp's flops / 32.
    const loop_kernel mma_fp16 = {wmma_fp16_loop_kernel, 2.0 * 16 * 16 * 16 * MMA_CHAINS * MMA_UNROLL / 32};
    const loop_kernel mma_tf32 = {wmma_tf32_loop_kernel, 2.0 * 16 * 16 * 8 * MMA_CHAINS * MMA_UNROLL / 32};
    if (status == CONV_OK) status = measure_loop(t, ffma, c->sm_count, &c->fp32_gflops);
    if (status == CONV_OK) status = measure_loop(t, hfma2, c->sm_count, &c->fp16_gflops);
    if (status == CONV_OK && cc_major >= 7) status = measure_loop(t, mma_fp16, c->sm_count, &c->fp16_tensor_gflops);
    if (status == CONV_OK && cc_major >= 8) status = measure_loop(t, mma_tf32, c->sm_count, &c->tf32_tensor_gflops);
    return status;
}

extern "C" int conv_measure_ceilings(conv_ceilings* out) {
    if (!out) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "out is NULL");
    if (!conv_cuda_ready()) return CONV_ERR_NO_DEVICE;
    conv_ceilings c = {};
    int device = 0, cc_major = 0, l2 = 0;
    CONV_CUDA_CHECK(cudaGetDevice(&device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&c.sm_count, cudaDevAttrMultiProcessorCount, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
    CONV_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    c.l2_cache_bytes = l2;
    timer t = {};
    CONV_CUDA_CHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
    int status = CONV_OK;
    cudaError_t err = cudaEventCreate(&t.start);
    if (err == cudaSuccess) err = cudaEventCreate(&t.stop);
    if (err != cudaSuccess) status = conv_cuda_status(err, "cudaEventCreate");
    if (status == CONV_OK) status = measure_all(t, &c, cc_major);
    if (t.start) cudaEventDestroy(t.start);
    if (t.stop) cudaEventDestroy(t.stop);
    cudaStreamDestroy(t.stream);
    if (status == CONV_OK) *out = c;
    return status;
}
