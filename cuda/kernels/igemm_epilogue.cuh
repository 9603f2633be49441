// igemm_epilogue.cuh — the implicit GEMM's epilogue: everything between an fp32 accumulator and y.
//   IgemmEpilogue: the functor. + bias[m], then ReLU (conv_epilogue_value, NaN kept), rounding to y's
//   dtype (conv_store_as), at the offset of y[b, m, oh, ow] in NCHW or NHWC (ConvLayout::y_at's
//   arithmetic in int32; the dispatcher's chunking keeps y < 2^30 elements per launch).
//   With split-K (IgemmEpilogue::partial) it stores raw fp32 sums into the split's slice of the
//   workspace instead, as NHWC, for conv_split_k_reduce (split_k.cuh) to finish.
//   Two traversals of a block tile, one for each place a math policy leaves its accumulators:
//   - IgemmRegisterOutput<Tile>: each thread's TM x TN micro-tile, stored from registers (SIMT math);
//   - IgemmStagedOutput<...>: the warps spill their fragments into a shared fp32 tile (wmma fragments
//     have an opaque layout), then the block writes it coalesced: threads along the pixels for NCHW,
//     along the maps for NHWC.
//   Both store the maps of one group only (m < m_end): a block tile of a grouped convolution may run
//   past its group's last map, and those rows are no output of its reduction.
// y's dtype is a switch per block tile, not a template argument of the kernel: the store is 1/CKK of
// the work, and three times the kernels would triple the build.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "implicit_gemm.cuh"
#include "tensor_io.cuh"

struct IgemmEpilogue {
    void* y;             // (B, M, OH, OW) or (B, OH, OW, M), y_dtype
    const void* bias;    // M values of y_dtype, or NULL
    int y_dtype;
    bool y_nhwc;
    bool relu;

    long long split_stride;  // split-K: floats between the partial outputs of consecutive splits; else 0

    static IgemmEpilogue of(const conv_problem* p, const conv_tensors* t) {
        IgemmEpilogue e;
        e.y = t->y;
        e.bias = p->bias ? t->bias : nullptr;
        e.y_dtype = p->y_dtype;
        e.y_nhwc = p->y_layout == CONV_NHWC;
        e.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        e.split_stride = 0;
        return e;
    }
    // Split-K: raw fp32 sums into partial [splits][NPIX][M] (split_k.cuh), no bias, no ReLU; the
    // reduction applies the problem's epilogue.
    static IgemmEpilogue partial(float* partial, const ConvGemmShape& s) {
        IgemmEpilogue e;
        e.y = partial;
        e.bias = nullptr;
        e.y_dtype = CONV_F32;
        e.y_nhwc = true;
        e.relu = false;
        e.split_stride = (long long)s.NPIX * s.M;
        return e;
    }
    // The epilogue of split z: its own partial output (the same y without split-K).
    __device__ IgemmEpilogue for_split(int z) const {
        IgemmEpilogue e = *this;
        e.y = static_cast<float*>(y) + z * split_stride;
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

// Stores the block tile at m0 through the Output traversal, with TY the problem's y dtype: its maps
// below m_end only (the end of the tile's group; rows past it belong to no output of this tile).
// Staging happens once, before the switch; store_as reads what stage() returns (the registers or the
// staging tile).
template <class Output, class Mma>
__device__ void igemm_store(const Output& out, const IgemmEpilogue& epi, const ConvGemmShape& s, int m0, int m_end,
                            const Mma& mma, unsigned char* smem) {
    decltype(auto) source = out.stage(mma, smem);
    switch (epi.y_dtype) {
    case CONV_F16: out.template store_as<__half>(epi, s, m0, m_end, source); break;
    case CONV_BF16: out.template store_as<__nv_bfloat16>(epi, s, m0, m_end, source); break;
    default: out.template store_as<float>(epi, s, m0, m_end, source);
    }
    out.finish();
}
// Without groups: the tile's maps up to M.
template <class Output, class Mma>
__device__ void igemm_store(const Output& out, const IgemmEpilogue& epi, const ConvGemmShape& s, int m0,
                            const Mma& mma, unsigned char* smem) {
    igemm_store(out, epi, s, m0, s.M, mma, smem);
}

// Tile: a SIMT math policy whose thread owns maps tile_m(0) < .. < tile_m(TM-1) and pixels
// tile_n(0 .. TN-1) of the block tile, accumulated in Mma::acc[TM][TN].
template <class Tile>
struct IgemmRegisterOutput {
    int pix[Tile::TN];  // y offsets of the thread's pixels, -1 past the last one

    // Once per block: the divisions of the pixel offsets are shared by every M tile.
    __device__ void init(const ConvGemmShape& s, const IgemmEpilogue& epi, int n0) {
#pragma unroll
        for (int j = 0; j < Tile::TN; ++j) {
            const int n = Tile::tile_n(j);
            pix[j] = n < s.NPIX - n0 ? epi.pixel_offset(s, n0 + n) : -1;
        }
    }
    // The accumulators stay in registers: nothing to stage, no shared memory to release.
    template <class Mma>
    __device__ const Mma& stage(const Mma& mma, unsigned char*) const { return mma; }
    __device__ void finish() const {}
    template <class TY, class Mma>
    __device__ void store_as(const IgemmEpilogue& epi, const ConvGemmShape& s, int m0, int m_end,
                             const Mma& mma) const {
        if constexpr (std::is_same<TY, float>::value)
            if (store_quads(epi, s, m0, m_end, mma)) return;
        const int stride = epi.map_stride(s);
#pragma unroll
        for (int i = 0; i < Tile::TM; ++i) {
            if (Tile::tile_m(i) >= m_end - m0) break;  // tile_m grows with i
            const int m = m0 + Tile::tile_m(i), m_off = m * stride;  // < M*OH*OW
            const float bias_m = epi.template bias_at<TY>(m);
#pragma unroll
            for (int j = 0; j < Tile::TN; ++j)
                if (pix[j] >= 0) epi.template write<TY>(pix[j] + m_off, mma.acc[i][j], bias_m);
        }
    }
    // fp32 NHWC y (split-K's partials included) with Mg % 4 == 0 (so M, m0 and m_end are multiples of
    // 4 too) and y 16-byte aligned: each run of 4 consecutive maps of a pixel (tile_m(4q) % 4 == 0,
    // tile_m(4q+r) = tile_m(4q)+r in both SIMT policies) is one 16-byte store, wholly inside the group's
    // maps or wholly past them. False: not this case.
    template <class Mma>
    __device__ bool store_quads(const IgemmEpilogue& epi, const ConvGemmShape& s, int m0, int m_end,
                                const Mma& mma) const {
        if (!epi.y_nhwc || s.Mg % 4 != 0 || reinterpret_cast<uintptr_t>(epi.y) % 16 != 0) return false;
        static_assert(Tile::TM % 4 == 0, "whole groups of 4 maps");
#pragma unroll
        for (int q = 0; q < Tile::TM / 4; ++q) {
            const int mm = Tile::tile_m(4 * q);
            if (mm >= m_end - m0) break;
            float b[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) b[r] = epi.template bias_at<float>(m0 + mm + r);
#pragma unroll
            for (int j = 0; j < Tile::TN; ++j) {
                if (pix[j] < 0) continue;
                const float4 v = make_float4(conv_epilogue_value(mma.acc[4 * q][j], b[0], epi.relu),
                                             conv_epilogue_value(mma.acc[4 * q + 1][j], b[1], epi.relu),
                                             conv_epilogue_value(mma.acc[4 * q + 2][j], b[2], epi.relu),
                                             conv_epilogue_value(mma.acc[4 * q + 3][j], b[3], epi.relu));
                *reinterpret_cast<float4*>(static_cast<float*>(epi.y) + pix[j] + m0 + mm) = v;  // < NPIX*M
            }
        }
        return true;
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
    __device__ __noinline__ void store_as(const IgemmEpilogue& epi, const ConvGemmShape& s, int m0, int m_end,
                                          const float* Cs) const {
        const int tid = threadIdx.x;
        if (!epi.y_nhwc) {
            // Consecutive threads, consecutive pixels of one map.
            const int n = tid % BN;
            if (pix >= 0)
                for (int mm = tid / BN; mm < BM && mm < m_end - m0; mm += THREADS / BN)
                    epi.template write<TY>(pix + (m0 + mm) * s.OHW, Cs[mm * LDC + n],  // < B*M*OH*OW
                                           epi.template bias_at<TY>(m0 + mm));
        } else {
            // Consecutive threads, consecutive maps of one pixel.
            const int mm = tid % BM;
            if (mm < m_end - m0) {
                const float bias_m = epi.template bias_at<TY>(m0 + mm);
                for (int n = tid / BM; n < BN && n < s.NPIX - n0; n += THREADS / BM)
                    epi.template write<TY>(epi.pixel_offset(s, n0 + n) + m0 + mm, Cs[mm * LDC + n], bias_m);
            }
        }
    }
};
