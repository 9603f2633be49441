// softmax_argmax.cu — conv_softmax_argmax: the network's last step on the device.
//   conv_softmax_argmax_kernel: one warp per row of fp32 logits (n, k), k <= 1024 (32 per lane); the
//   lanes stride along the row (coalesced), then warp shuffles combine: the max with the lowest index
//   holding it (NumPy's argmax: the first of equal values; a NaN counts as the largest, so the first
//   NaN wins), then the sum of exp(l - max). Probabilities = exp(l - max) / sum, as
//   pyconv.lenet.model.softmax (expf, not the fast __expf; the sum is a tree, not NumPy's order, so
//   probabilities agree to a few ulp, not bit for bit). A NaN logit makes its row's
//   probabilities NaN, as in NumPy.
#include <math.h>

#include "conv_kernel_util.cuh"
#include "conv_ops.h"
#include "ops_util.cuh"

namespace {

constexpr int SOFTMAX_MAX_K = 1024;
constexpr int SOFTMAX_THREADS = 256;

// Whether value a beats value b for the argmax: a NaN beats any number, else the larger.
__device__ __forceinline__ bool argmax_beats(float a, float b) { return (a != a && b == b) || a > b; }

// logits and probabilities are (n, k), classes (n,); either output may be NULL.
__global__ void conv_softmax_argmax_kernel(const float* __restrict__ logits, long long n, int k,
                                           float* __restrict__ probabilities, int* __restrict__ classes) {
    const int lane = threadIdx.x & 31;
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long step = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long row = first; row < n; row += step) {  // whole warps: the shuffles see every lane
        const float* l = logits + row * k;
        // Each lane's best (value, index) over its columns, in increasing order; k is the "none yet"
        // index, which every real column beats or ties with a lower index.
        float best = -INFINITY;
        int arg = k;
        for (int j = lane; j < k; j += 32) {
            const float v = __ldg(l + j);
            if (arg == k || argmax_beats(v, best)) { best = v; arg = j; }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_xor_sync(0xffffffffu, best, offset);
            const int other_arg = __shfl_xor_sync(0xffffffffu, arg, offset);
            if (argmax_beats(other, best) || (!argmax_beats(best, other) && other_arg < arg)) {
                best = other;
                arg = other_arg;
            }
        }
        if (classes && lane == 0) classes[row] = arg;
        if (!probabilities) continue;
        float sum = 0.0f;
        for (int j = lane; j < k; j += 32) sum += expf(__ldg(l + j) - best);
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        float* p = probabilities + row * k;
        for (int j = lane; j < k; j += 32) p[j] = expf(__ldg(l + j) - best) / sum;
    }
}

}  // namespace

extern "C" int conv_softmax_argmax(const void* logits, int64_t n, int k, void* probabilities, void* classes,
                                   void* stream) {
    static const char* op = "conv_softmax_argmax";
    if (n < 0) return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s: n must be >= 0, got %lld", op, (long long)n);
    if (k < 1 || k > SOFTMAX_MAX_K)
        return conv_set_error(CONV_ERR_INVALID_ARGUMENT, "%s: k must be in 1..%d, got %d", op, SOFTMAX_MAX_K, k);
    if (!conv_cuda_ready()) return CONV_ERR_NO_DEVICE;
    if (n == 0 || (!probabilities && !classes)) return CONV_OK;
    int status;
    if ((status = conv_op_device_operand(op, "logits", logits)) != CONV_OK) return status;
    if (probabilities && (status = conv_op_device_operand(op, "probabilities", probabilities)) != CONV_OK)
        return status;
    if (classes && (status = conv_op_device_operand(op, "classes", classes)) != CONV_OK) return status;
    const int rows_per_block = SOFTMAX_THREADS / 32;
    conv_softmax_argmax_kernel<<<conv_grid_for((n + rows_per_block - 1) / rows_per_block, 1), SOFTMAX_THREADS, 0,
                                 conv_stream(stream)>>>(static_cast<const float*>(logits), n, k,
                                                        static_cast<float*>(probabilities), static_cast<int*>(classes));
    CONV_LAUNCH_CHECK(conv_softmax_argmax_kernel);
    return CONV_OK;
}
