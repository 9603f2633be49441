// igemm_epilogue.cuh — the implicit GEMM's epilogue: everything between an fp32 accumulator and y.
//   IgemmEpilogue: the functor. + bias[m], then ReLU (conv_epilogue_value, NaN kept), rounding to y's
//   dtype (conv_store_as), at the offset of y[b, m, oh, ow] in NCHW or NHWC (ConvLayout::y_at's
//   arithmetic in int32; the dispatcher's chunking keeps y < 2^30 elements per launch).
//   Two traversals of a block tile, one for each place a math policy leaves its accumulators:
//   - IgemmRegisterOutput<Tile>: each thread's TM x TN micro-tile, stored from registers (SIMT math);
//   - IgemmStagedOutput<...>: the warps spill their fragments into a shared fp32 tile (wmma fragments
//     have an opaque layout), then the block writes it coalesced: threads along the pixels for NCHW,
//     along the maps for NHWC.
// y's dtype is a switch per block tile, not a template argument of the kernel: the store is 1/CKK of
// the work, and three times the kernels would triple the build.
#pragma once

#include "implicit_gemm.cuh"
#include "tensor_io.cuh"

struct IgemmEpilogue {
    void* y;             // (B, M, OH, OW) or (B, OH, OW, M), y_dtype
    const void* bias;    // M values of y_dtype, or NULL
    int y_dtype;
    bool y_nhwc;
    bool relu;

    static IgemmEpilogue of(const conv_problem* p, const conv_tensors* t) {
        IgemmEpilogue e;
        e.y = t->y;
        e.bias = p->bias ? t->bias : nullptr;
        e.y_dtype = p->y_dtype;
        e.y_nhwc = p->y_layout == CONV_NHWC;
        e.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        return e;
    }
    // Offset of y[b, 0, oh, ow] for pixel = (b, oh, ow) < NPIX; add m * map_stride() for map m.
    __device__ int pixel_offset(const ConvGemmShape& s, int pixel) const {
        if (y_nhwc) return pixel * s.M;  // < B*OH*OW*M
        const int b = pixel / s.OHW;
        return b * s.M * s.OHW + (pixel - b * s.OHW);
    }
    __device__ int map_stride(const ConvGemmShape& s) const { return y_nhwc ? 1 : s.OHW; }
    template <class TY>
    __device__ float bias_at(int m) const {
        return bias ? conv_load(static_cast<const TY*>(bias), m) : 0.0f;
    }
    template <class TY>
    __device__ void write(int offset, float acc, float bias_m) const {
        static_cast<TY*>(y)[offset] = conv_store_as<TY>(conv_epilogue_value(acc, bias_m, relu));
    }
};

// Stores the block tile at m0 through the Output traversal, with TY the problem's y dtype. Staging
// happens once, before the switch; store_as reads what stage() returns (the registers or the staging
// tile).
template <class Output, class Mma>
__device__ void igemm_store(const Output& out, const IgemmEpilogue& epi, const ConvGemmShape& s, int m0,
                            const Mma& mma, unsigned char* smem) {
    decltype(auto) source = out.stage(mma, smem);
    switch (epi.y_dtype) {
    case CONV_F16: out.template store_as<__half>(epi, s, m0, source); break;
    case CONV_BF16: out.template store_as<__nv_bfloat16>(epi, s, m0, source); break;
    default: out.template store_as<float>(epi, s, m0, source);
    }
    out.finish();
}

// Tile: a SIMT math policy whose thread owns maps thread_m() .. +TM-1 and consecutive pixels
// thread_n() .. +TN-1 of the block tile, accumulated in Mma::acc[TM][TN].
template <class Tile>
struct IgemmRegisterOutput {
    int pix[Tile::TN];  // y offsets of the thread's pixels, -1 past the last one

    // Once per block: the divisions of the pixel offsets are shared by every M tile.
    __device__ void init(const ConvGemmShape& s, const IgemmEpilogue& epi, int n0) {
        const int n = Tile::thread_n();
#pragma unroll
        for (int j = 0; j < Tile::TN; ++j) pix[j] = n + j < s.NPIX - n0 ? epi.pixel_offset(s, n0 + n + j) : -1;
    }
    // The accumulators stay in registers: nothing to stage, no shared memory to release.
    template <class Mma>
    __device__ const Mma& stage(const Mma& mma, unsigned char*) const { return mma; }
    __device__ void finish() const {}
    template <class TY, class Mma>
    __device__ void store_as(const IgemmEpilogue& epi, const ConvGemmShape& s, int m0, const Mma& mma) const {
        const int mm = Tile::thread_m(), stride = epi.map_stride(s);
#pragma unroll
        for (int i = 0; i < Tile::TM; ++i) {
            if (mm + i >= s.M - m0) break;
            const int m = m0 + mm + i, m_off = m * stride;  // < M*OH*OW
            const float bias_m = epi.template bias_at<TY>(m);
#pragma unroll
            for (int j = 0; j < Tile::TN; ++j)
                if (pix[j] >= 0) epi.template write<TY>(pix[j] + m_off, mma.acc[i][j], bias_m);
        }
    }
};

// A BM x BN block tile staged as fp32 Cs[m*LDC + n] in shared memory (aliasing the operand tiles),
// written by THREADS threads. Mma::stage(Cs, LDC) spills the accumulators.
template <int BM, int BN, int THREADS, int LDC>
struct IgemmStagedOutput {
    static_assert(THREADS % BN == 0 && THREADS % BM == 0, "a thread owns one pixel column or one map row");
    int n0;
    int pix;  // NCHW: the y offset of this thread's pixel column n0 + tid % BN, -1 past the last pixel

    __device__ void init(const ConvGemmShape& s, const IgemmEpilogue& epi, int n0_) {
        n0 = n0_;
        const int n = threadIdx.x % BN;
        pix = !epi.y_nhwc && n < s.NPIX - n0 ? epi.pixel_offset(s, n0 + n) : -1;
    }
    template <class Mma>
    __device__ const float* stage(const Mma& mma, unsigned char* smem) const {
        // The mainloop's last barrier ended every read of the operand tiles that Cs overwrites.
        float* Cs = reinterpret_cast<float*>(smem);
        mma.stage(Cs, LDC);
        __syncthreads();
        return Cs;
    }
    // Cs is read before the next M tile's operands overwrite it.
    __device__ void finish() const { __syncthreads(); }
    // Out of line: inlined once per y dtype, the three copies raise the kernel's registers from ~80 to
    // ~115 (ptxas, m16n16k16 fp16), which costs a block per SM; the call is made once per block tile.
    template <class TY>
    __device__ __noinline__ void store_as(const IgemmEpilogue& epi, const ConvGemmShape& s, int m0,
                                          const float* Cs) const {
        const int tid = threadIdx.x;
        if (!epi.y_nhwc) {
            // Consecutive threads, consecutive pixels of one map.
            const int n = tid % BN;
            if (pix >= 0)
                for (int mm = tid / BN; mm < BM && mm < s.M - m0; mm += THREADS / BN)
                    epi.template write<TY>(pix + (m0 + mm) * s.OHW, Cs[mm * LDC + n],  // < B*M*OH*OW
                                           epi.template bias_at<TY>(m0 + mm));
        } else {
            // Consecutive threads, consecutive maps of one pixel.
            const int mm = tid % BM;
            if (mm < s.M - m0) {
                const float bias_m = epi.template bias_at<TY>(m0 + mm);
                for (int n = tid / BM; n < BN && n < s.NPIX - n0; n += THREADS / BM)
                    epi.template write<TY>(epi.pixel_offset(s, n0 + n) + m0 + mm, Cs[mm * LDC + n], bias_m);
            }
        }
    }
};
