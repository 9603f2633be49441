// split_k.cu — the split-K reduction (interface and layout of the partial sums: split_k.cuh).
//   conv_split_k_reduce_kernel<TY, Y_NHWC>: one block per 32 pixels x 32 maps of the output; threads
//   along the maps read the partials coalesced (M is their fastest dimension), sum the splits in
//   order, add the bias, apply ReLU; NHWC y is written as read (M fastest too), NCHW y goes through a
//   32 x 33 shared tile so that the store runs along the pixels, coalesced, instead of M strides apart.
#include "split_k.cuh"

#include "grid_dependency.cuh"
#include "implicit_gemm.cuh"
#include "tensor_io.cuh"

namespace {

constexpr int SPLIT_TILE = 32, SPLIT_ROWS = 8;  // 32 x 8 threads, 4 tile rows each

// partial is fp32 [splits][P][M]; y is (B, M, OH, OW) or (B, OH, OW, M) in TY; bias M values of TY or
// NULL. Grid: (pixel tiles, map tiles <= 65535), looping over the map tiles past gridDim.y.
template <class TY, bool Y_NHWC>
__global__ void __launch_bounds__(SPLIT_TILE * SPLIT_ROWS)
conv_split_k_reduce_kernel(const float* __restrict__ partial, int splits, int P, int M, int OHW,
                           const TY* __restrict__ bias, bool relu, TY* __restrict__ y) {
    __shared__ float tile[SPLIT_TILE][SPLIT_TILE + 1];  // [map][pixel], padded against bank conflicts
    grid_dependency_enter();  // the GEMM's partial sums are written
    const long long split_stride = (long long)P * M;     // may pass 2^31 over all splits
    const int p0 = blockIdx.x * SPLIT_TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m_tiles = conv_tiles(M, SPLIT_TILE);
    for (int tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
        const int m0 = tm * SPLIT_TILE, m = m0 + tx;
        const float bias_m = bias && m < M ? conv_load(bias, m) : 0.0f;
#pragma unroll
        for (int i = 0; i < SPLIT_TILE / SPLIT_ROWS; ++i) {
            const int pp = ty + i * SPLIT_ROWS;
            if (m >= M || pp >= P - p0) continue;
            const int at = (p0 + pp) * M + m;  // < P*M <= 2^30 (the dispatcher's chunking)
            float sum = 0.0f;
            for (int s = 0; s < splits; ++s) sum += partial[s * split_stride + at];
            const float v = conv_epilogue_value(sum, bias_m, relu);
            if constexpr (Y_NHWC) y[at] = conv_store_as<TY>(v);
            else tile[tx][pp] = v;
        }
        if constexpr (!Y_NHWC) {
            __syncthreads();
            // Threads along the pixels now: consecutive (oh, ow) of one map are adjacent in NCHW.
            const int pixel = p0 + tx;
            if (tx < P - p0) {
                const int b = pixel / OHW, r = pixel - b * OHW;
#pragma unroll
                for (int i = 0; i < SPLIT_TILE / SPLIT_ROWS; ++i) {
                    const int mm = ty + i * SPLIT_ROWS;
                    if (mm < M - m0) y[(b * M + m0 + mm) * OHW + r] = conv_store_as<TY>(tile[mm][tx]);  // < B*M*OH*OW
                }
            }
            __syncthreads();  // the tile is read before the next map tile overwrites it
        }
    }
}

template <class TY>
int split_k_launch(const conv_problem* p, const float* partial, int splits, const void* bias, void* y,
                   cudaStream_t stream) {
    const int OHW = (int)(conv_out_h(p) * conv_out_w(p)), P = (int)(p->B * OHW), M = (int)p->M;
    const dim3 grid((unsigned)conv_tiles(P, SPLIT_TILE), conv_grid_y(conv_tiles(M, SPLIT_TILE)));
    const dim3 block(SPLIT_TILE, SPLIT_ROWS);
    const TY* b = p->bias ? static_cast<const TY*>(bias) : nullptr;
    const bool relu = p->epilogue == CONV_EPILOGUE_RELU;
    const auto kernel = p->y_layout == CONV_NHWC ? conv_split_k_reduce_kernel<TY, true>
                                                 : conv_split_k_reduce_kernel<TY, false>;
    CONV_LAUNCH_DEPENDENT("conv_split_k_reduce_kernel", kernel, grid, block, 0, stream, partial, splits, P, M, OHW, b,
                          relu, static_cast<TY*>(y));
    return CONV_OK;
}

}  // namespace

int conv_split_k_reduce(const conv_problem* p, const float* partial, int splits, const void* bias, void* y,
                        cudaStream_t stream) {
    if (p->epilogue == CONV_EPILOGUE_RELU_MAXPOOL)
        return conv_set_error(CONV_ERR_UNSUPPORTED, "split-K: epilogue = RELU_MAXPOOL is not reduced (only NONE, RELU)");
    if (splits < 1) return conv_set_error(CONV_ERR_INTERNAL, "split-K reduce called with splits = %d", splits);
    if (p->B * conv_out_h(p) * conv_out_w(p) * p->M == 0) return CONV_OK;  // nothing to store, no empty grid
    switch (p->y_dtype) {
    case CONV_F16: return split_k_launch<__half>(p, partial, splits, bias, y, stream);
    case CONV_BF16: return split_k_launch<__nv_bfloat16>(p, partial, splits, bias, y, stream);
    default: return split_k_launch<float>(p, partial, splits, bias, y, stream);
    }
}

size_t conv_split_k_workspace(const conv_problem* p, int splits) {
    return (size_t)(splits > 0 ? splits : 0) * (size_t)(p->B * conv_out_h(p) * conv_out_w(p)) * (size_t)p->M *
           sizeof(float);
}
