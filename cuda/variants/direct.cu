// direct.cu — the baseline GPU convolution.
//   conv_direct_kernel: one thread per output element y[b, m, oh, ow]; every input and weight read
//   goes to global memory (through L1/L2). The simplest correct kernel, and the one every other
//   variant is compared with.
#include "cuda_util.cuh"

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW); total = B*M*OH*OW < 2^31.
__global__ void conv_direct_kernel(conv_problem p, int OH, int OW, int total, const float* x,
                                   const float* w, float* y) {
    const int C = (int)p.C, H = (int)p.H, W = (int)p.W, M = (int)p.M, KH = (int)p.KH, KW = (int)p.KW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        const int ow = idx % OW, oh = (idx / OW) % OH, m = (idx / (OW * OH)) % M, b = idx / (OW * OH * M);
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) {
            for (int kh = 0; kh < KH; ++kh) {
                const int ih = oh * (int)p.stride_h - (int)p.pad_h + kh * (int)p.dilation_h;
                if (ih < 0 || ih >= H) continue;
                for (int kw = 0; kw < KW; ++kw) {
                    const int iw = ow * (int)p.stride_w - (int)p.pad_w + kw * (int)p.dilation_w;
                    if (iw < 0 || iw >= W) continue;
                    acc += x[((b * C + c) * H + ih) * W + iw] * w[((m * C + c) * KH + kh) * KW + kw];
                }
            }
        }
        y[idx] = acc;
    }
}

static int direct_launch(const conv_problem* p, const conv_tensors* t, void* ws, size_t ws_bytes, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p);
    const int total = (int)(p->B * p->M * OH * OW);
    const int threads = 256;
    conv_direct_kernel<<<conv_grid_for(total, threads), threads, 0, conv_stream(stream)>>>(
        *p, OH, OW, total, x, w, y);
    CONV_LAUNCH_CHECK(conv_direct_kernel);
    return CONV_OK;
}

static const conv_config DIRECT_CONFIGS[] = {{"default", direct_launch, NULL}};
extern "C" const conv_impl conv_impl_direct = {NULL, NULL, DIRECT_CONFIGS, 1, NULL};
