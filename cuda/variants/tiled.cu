// tiled.cu — shared-memory tiling of the input, halo included.
//   conv_tiled_kernel: a block computes a TH x TW tile of output pixels (16x16 normally, one thread
//   each) for MAPS_PER_THREAD output maps of one image. For each stage of up to `cs` input channels
//   it first copies the input window that tile needs — (TH-1)*stride_h + (KH-1)*dilation_h + 1 rows
//   by (TW-1)*stride_w + (KW-1)*dilation_w + 1 columns per channel, zeros where it covers padding —
//   into shared memory with coalesced row reads, then every output reads its taps from there.
//   In `direct` each input value is fetched from L1/L2 once per output that covers it (up to KH*KW
//   times at stride 1, and once more per output map) and every tap pays a bounds test; here each
//   value comes from global memory once per block and stage, the inner loop has no bounds tests
//   (padding is stored as zeros, so a padded tap adds 0 * w as in PyTorch), and each shared load
//   feeds MAPS_PER_THREAD FMAs. The weights are
//   read through the read-only cache: at each step all threads of the block read the same one.
// Shared memory stays bounded for any C because channels are staged: a stage holds as many channels
// as fit in STAGE_FLOATS (at least one, up to WINDOW_FLOATS_MAX = 48 KB, the limit every GPU grants
// without opt-in). When one channel's window does not fit, the tile shrinks (halving the side whose
// window is larger); if even a 1x1 tile's window is too large (huge kernel extent with dilation),
// supports() says UNSUPPORTED. Small outputs get smaller tiles (a 7x7 output gets an 8x8 tile).
#include "conv_kernel_util.cuh"

// Output tile side (and threads per side) before shrinking.
#define TILE 16
// Most floats one channel's window may take: 48 KB of shared memory.
#define WINDOW_FLOATS_MAX 12288
// Floats a stage aims at (16 KB), so that several blocks fit on one SM.
#define STAGE_FLOATS 4096

// Tile and stage sizes for one shape.
struct tiled_plan {
    int th, tw;        // output tile: th x tw threads
    int in_th, in_tw;  // input window of one channel
    int cs;            // channels per stage
};

static int64_t window_side(int64_t tile, int64_t stride, int64_t k, int64_t dilation) {
    return (tile - 1) * stride + (k - 1) * dilation + 1;
}

// Smallest power of two >= n, at most TILE.
static int tile_side(int64_t n) {
    int t = 1;
    while (t < TILE && t < n) t *= 2;
    return t;
}

static int tiled_plan_for(const conv_problem* p, tiled_plan* plan) {
    int th = tile_side(conv_out_h(p)), tw = tile_side(conv_out_w(p));
    int64_t ih, iw;
    for (;;) {
        ih = window_side(th, p->stride_h, p->KH, p->dilation_h);
        iw = window_side(tw, p->stride_w, p->KW, p->dilation_w);
        // Tested side by side first so that the product cannot overflow.
        if (ih <= WINDOW_FLOATS_MAX && iw <= WINDOW_FLOATS_MAX && ih * iw <= WINDOW_FLOATS_MAX) break;
        if (th == 1 && tw == 1)
            return conv_set_error(CONV_ERR_UNSUPPORTED,
                                  "tiled: one input channel's window for a single output is %lldx%lld "
                                  "floats (KH=%lld, dilation_h=%lld, KW=%lld, dilation_w=%lld), more than "
                                  "the %d floats (48 KB) of shared memory a block may use",
                                  (long long)ih, (long long)iw, (long long)p->KH, (long long)p->dilation_h,
                                  (long long)p->KW, (long long)p->dilation_w, WINDOW_FLOATS_MAX);
        if (tw > 1 && (iw >= ih || th == 1))
            tw /= 2;
        else
            th /= 2;
    }
    int status = conv_check_coords("tiled", p, th - 1, tw - 1);
    if (status != CONV_OK) return status;
    const int64_t per_stage = STAGE_FLOATS / (ih * iw);
    plan->th = th;
    plan->tw = tw;
    plan->in_th = (int)ih;
    plan->in_tw = (int)iw;
    plan->cs = (int)(per_stage < 1 ? 1 : per_stage < p->C ? per_stage : p->C);
    return CONV_OK;
}

// x is (B, C, H, W), w is (M, C, KH, KW), y is (B, M, OH, OW). Block: (tw, th) threads, one per
// output of the tile; blockIdx.x picks the tile (tiles_w per tile row), blockIdx.y walks the
// (image, group of MAPS_PER_THREAD maps) planes. Dynamic shared memory: (cs, in_th, in_tw) floats.
__global__ void
conv_tiled_kernel(conv_problem p, int OH, int OW, int tiles_w, int in_th, int in_tw, int cs,
                  const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    extern __shared__ float s_in[];
    const int C = (int)p.C, H = (int)p.H, W = (int)p.W, M = (int)p.M, KH = (int)p.KH, KW = (int)p.KW;
    const int sh = (int)p.stride_h, sw = (int)p.stride_w;
    const int dh = (int)p.dilation_h, dw = (int)p.dilation_w;
    const int KK = KH * KW, window = in_th * in_tw;
    const int tx = threadIdx.x, ty = threadIdx.y, TW = blockDim.x, TH = blockDim.y;
    const int tile = (int)blockIdx.x, oh0 = (tile / tiles_w) * TH, ow0 = (tile % tiles_w) * TW;
    const int oh = oh0 + ty, ow = ow0 + tx;
    // Threads past the output edge still load and reach every barrier; they only skip the math.
    const bool active = oh < OH && ow < OW;
    // Input coordinates of the window's top-left corner (negative inside the padding).
    const int ih0 = oh0 * sh - (int)p.pad_h, iw0 = ow0 * sw - (int)p.pad_w;
    // This thread's first tap inside one channel's window.
    const int first_tap = (ty * sh) * in_tw + tx * sw;
    const int groups = conv_map_groups(M), planes = (int)p.B * groups;
    for (int plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const conv_plane q = conv_plane_at(plane, groups, M, C * KK);
        const int b = q.b, m0 = q.m0;
        const int* wbase = q.wbase;
        float acc[MAPS_PER_THREAD] = {};
        for (int c0 = 0; c0 < C; c0 += cs) {
            const int nc = min(cs, C - c0);
            __syncthreads();  // the previous stage's reads of s_in are done
            for (int cc = 0; cc < nc; ++cc) {
                const float* xc = x + (b * C + c0 + cc) * H * W;
                float* sc = s_in + cc * window;
                for (int r = ty; r < in_th; r += TH) {
                    const int ih = ih0 + r;
                    const bool row_in = ih >= 0 && ih < H;
                    for (int col = tx; col < in_tw; col += TW) {
                        const int iw = iw0 + col;
                        sc[r * in_tw + col] = row_in && iw >= 0 && iw < W ? xc[ih * W + iw] : 0.0f;
                    }
                }
            }
            __syncthreads();
            if (active) {
                for (int cc = 0; cc < nc; ++cc) {
                    const float* s = s_in + cc * window + first_tap;
                    const int wc = (c0 + cc) * KK;
                    for (int kh = 0; kh < KH; ++kh) {
                        const float* sr = s + kh * dh * in_tw;
                        for (int kw = 0; kw < KW; ++kw) {
                            const float v = sr[kw * dw];
                            const int k = wc + kh * KW + kw;
#pragma unroll
                            for (int j = 0; j < MAPS_PER_THREAD; ++j) acc[j] += v * w[wbase[j] + k];
                        }
                    }
                }
            }
        }
        if (active) {
#pragma unroll
            for (int j = 0; j < MAPS_PER_THREAD; ++j)
                if (m0 + j < M) y[((b * M + m0 + j) * OH + oh) * OW + ow] = acc[j];
        }
    }
}

static int tiled_supports(const conv_problem* p) {
    tiled_plan plan;
    return tiled_plan_for(p, &plan);
}

static int tiled_launch(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    const float* x = (const float*)t->x;  // f32 operands: the variant declares f32 only
    const float* w = (const float*)t->w;
    float* y = (float*)t->y;
    tiled_plan plan;
    int status = tiled_plan_for(p, &plan);
    if (status != CONV_OK) return status;
    const int OH = (int)conv_out_h(p), OW = (int)conv_out_w(p);
    // At most OH*OW tiles (< 2^31): they fit gridDim.x.
    const int64_t tiles_h = ((int64_t)OH + plan.th - 1) / plan.th;
    const int64_t tiles_w = ((int64_t)OW + plan.tw - 1) / plan.tw;
    const int64_t planes = p->B * conv_map_groups(p->M);
    const dim3 grid((unsigned)(tiles_h * tiles_w),
                    (unsigned)(planes < GRID_Y_LIMIT ? planes : GRID_Y_LIMIT));
    const dim3 block(plan.tw, plan.th);
    const size_t smem = (size_t)plan.cs * plan.in_th * plan.in_tw * sizeof(float);
    conv_tiled_kernel<<<grid, block, smem, conv_stream(stream)>>>(*p, OH, OW, (int)tiles_w, plan.in_th,
                                                                  plan.in_tw, plan.cs, x, w, y);
    CONV_LAUNCH_CHECK(conv_tiled_kernel);
    return CONV_OK;
}

static const conv_config TILED_CONFIGS[] = {{"default", tiled_launch, NULL}};
extern "C" const conv_impl conv_impl_tiled = {tiled_supports, NULL, TILED_CONFIGS, 1, NULL};
