// tc_grouped.cu — implicit_gemm_f16's grouped configurations ("grp*"): a grouped layer as small GEMMs per
// group on fp16 / bf16 tensor cores (mma.sync m16n8k16, fp32 accumulation), the operands read from an
// input window staged once per block.
//   The packed-group GEMM tile (tc_igemm.cuh, 128 x 32) multiplies 8 groups of 4 maps at once through a
//   block-diagonal filter (1/8 of its products useful at 4 channels a group) and gathers x for every tap
//   from L2. Here a group's GEMM is as narrow as the group:
//     y[pixel, m] = sum over pieces j of A_j[pixel, 0..7] * B_j[0..7, m],
//   where a piece is one tap (kh, kw) of one 8-channel chunk of the group's channels: A_j's rows are the
//   16-byte runs of channels of the pixels' window positions for that tap (one ldmatrix row each, read
//   straight from the staged window: the im2col is an address per lane), B_j the filter's values for
//   those channels and tap. Two pieces make an mma's k of 16. Groups of fewer than 8 channels (1, 2, 4)
//   are packed 8 / Cg to a chunk, with a block-diagonal B (half its products useful at 4 channels).
//   A block takes CS input channels of the layer (a slab: CS / pack_c packs of groups) and loops over output
//   tiles of th x tw pixels (at most TP, chosen per problem to waste few m16 rows and little halo) of the
//   batch: a wave of blocks, each taking every (gridDim.x / slabs)-th tile, so that its set-up is paid once.
//   0. once: copies the slab's filters into shared memory (16-byte cp.async; tap-major, a map's row padded
//      with zeros), and for packs of several groups builds their block-diagonal B fragments from them (each
//      lane's registers in the order the warps read them: one 8-byte load per k-step; a group of whole
//      chunks reads its two registers straight from the rows: on ResNeXt's 14- and 7-pixel layers a block
//      takes two tiles, and building fragments was a third of the kernel's instructions), the pieces' window
//      offsets and the tile pixels' positions;
//   1. per tile: its input window with the halo as [row][column][channel] in the operand dtype (zeros on
//      padding, past the image and past C), copied in while the tile before is multiplied: from NHWC
//      f16 / bf16 x by 16-byte cp.async where C and x allow (two buffers); from f32 x by cp.async into a raw
//      f32 window (NCHW: 16-, 8- or 4-byte copies as x's rows allow; NHWC: 4-byte), rounded to fp16 into the
//      one buffer once the tile before is done (the fast path's NCHW input: loads waited on in place were
//      most of its stalls); else (16-bit NCHW, unaligned x) element by element, waited on in place. Window
//      columns are stored by stride phase (column j at (j % S) * phase_w + j / S), so that neighbouring
//      output columns read neighbouring stored pixels at any stride; a pixel takes an odd number of
//      16-byte chunks (CS / 8 and one more), so that the 8 rows of an ldmatrix fall in distinct banks; that
//      last chunk holds zeros, read by the unused half of a k-step (an odd number of pieces);
//   2. warps take tasks of one n8 map tile of one pack over every m16 pixel tile of the output tile: per
//      k-step of two pieces, one B fragment load and TP / 16 ldmatrix + mma (the first versions, of two
//      m16 tiles a task, spent most of their instructions on each task's set-up and epilogue); a group of
//      16, 32, ... maps: two n8 tiles over half the m16 tiles, each ldmatrix feeding two mmas;
//   3. each task's sums get bias and ReLU; NHWC y whose block maps and M are whole 16-byte vectors (and y
//      aligned) is staged in shared memory and written by 16-byte stores, other y from the fragments (pairs
//      of maps in one 4- or 8-byte store where the maps per group are even and y allows, else element by
//      element, NCHW y along the maps' planes).
//   Non-finite inputs: an mma multiplies the 8 channels of a chunk by the filter column of every map in
//   it, so an Inf or NaN input of one group makes NaN of the outputs of the other groups packed with it
//   at that pixel (Cg < 8), as the packed-group GEMM tiles do. Non-finite weights meet exactly the inputs
//   a direct sum multiplies them by, and a k-step's unused half reads a pixel's chunk of zeros.
#include "tc_grouped.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "conv_shape.cuh"
#include "grid_dependency.cuh"
#include "launch_util.cuh"
#include "mma_operand16.cuh"
#include "nchw_window_copy.cuh"
#include "tensor_io.cuh"

namespace {

// Operand elements in a 16-byte chunk: an ldmatrix row, one piece's k.
constexpr int TGC_CHUNK = 8;
// Filter values a thread loads (a run of w) before it stores them, where they are rounded or reordered
// (tgc_stage_filters): six 16-byte loads of f32 (72 values a thread on ResNeXt's 32-channel groups: three
// round trips), two of 16-bit values.
template <class TX>
constexpr int tgc_w_run() {
    return sizeof(TX) == 4 ? 24 : 16;
}

// x (B, H, W, C) or (B, C, H, W), w (M, KH, KW, Cg) or (M, Cg, KH, KW), y (B, OH, OW, M) or (B, M, OH, OW);
// every count < 2^31 (the dispatcher's batch chunks).
struct tgc_shape : ConvShape32 {
    int Cg, Mg, G;            // channels and maps per group, groups
    int lg_cg, lg_cpp;        // log2 of Cg and of cpp (both powers of two: supports())
    int gpp, pack_m;          // groups and maps of a pack
    int cpp, packs, nt;       // chunks per pack, packs per block, n8 tiles per pack
    int pieces, ksteps;       // taps x chunks of a pack, and the k-steps of two pieces that cover them
    int slabs;                // blocks across C (CS channels each)
    int th, tw, tiles_w, tiles, items;  // output tile, tiles across and per plane, tiles of the batch
    int in_h, in_w, phase_w;  // the tile's input window; stored columns per stride phase
    int pix_chunks, row_chunks, window_chunks;  // 16-byte chunks per stored pixel, window row, window
    int y_maps, y_row;        // maps of a block (packs * pack_m); y staging elements per pixel (padded)
    int w_stride, direct_b;   // staged filter elements a map; B read from them (a pack is one group)
    int w_offset, b_offset, table_offset, wtable_offset, pix_offset, y_offset;  // bytes from shared memory's start
    int raw_row, x_copy;      // f32 x: floats per raw window row; elements per copy of NCHW x (nchw_copy_vector)
    int x_nhwc, y_nhwc, w_mkkc, x_vec, w_vec, y_vec, y_pair, relu;
};

// Where window column j is stored: by stride phase (no division at strides 1 and 2).
__device__ __forceinline__ int tgc_stored_col(const tgc_shape& s, int j) {
    if (s.stride_w == 1) return j;
    if (s.stride_w == 2) return (j & 1) * s.phase_w + (j >> 1);
    return j % s.stride_w * s.phase_w + j / s.stride_w;
}

// Item i of a launch (the batch's output tiles, image-major): its image and first output row and column.
struct TgcTile {
    int b, oh0, ow0;
};
__device__ __forceinline__ TgcTile tgc_tile(const tgc_shape& s, int i) {
    const int tile = i % s.tiles;
    return {i / s.tiles, tile / s.tiles_w * s.th, tile % s.tiles_w * s.tw};
}

// Line e of a window's columns (`per` lines a column: its 8-channel chunks): NHWC with a column's lines in
// neighbouring lanes, NCHW with neighbouring columns in neighbouring lanes, so that a warp's accesses of one
// pixel (NHWC) or one channel's row (NCHW) are one run.
__device__ __forceinline__ void tgc_line(const tgc_shape& s, int per, int e, int& ch, int& j) {
    ch = s.x_nhwc ? e % per : e / s.in_w;
    j = s.x_nhwc ? e / per : e % s.in_w;
}

// Stages the window (rows from ih0, columns from iw0) of channels [c0, c0 + CS), zeros outside the image and
// past C, in one of three ways:
//   NHWC 16-bit x, C % 8 == 0, x 16-byte aligned (x_vec): chunks by 16-byte cp.async into win, in flight
//     until the caller waits;
//   f32 x: by cp.async into raw (NCHW: copies of x_copy elements, nchw_window_copy.cuh; NHWC: elements),
//     in flight until the caller waits, then rounded into win by tgc_convert_raw;
//   else (16-bit NCHW or unaligned x): element by element into win, done on return.
// In the first two a thread takes one line of a window column and walks it down the rows: one address step a
// row.
template <int CS, int THREADS, class TO, class TX>
__device__ __forceinline__ void tgc_stage_window(const tgc_shape& s, const TX* __restrict__ x, int b, int c0, int ih0,
                                                 int iw0, uint4* win, float* raw) {
    constexpr int CHUNKS = CS / TGC_CHUNK;
    if constexpr (std::is_same<TX, TO>::value) {
        if (s.x_vec) {  // NHWC (a column's chunks in neighbouring lanes); a chunk is whole or all past C
            for (int e = threadIdx.x; e < s.in_w * CHUNKS; e += THREADS) {
                const int ch = e % CHUNKS, j = e / CHUNKS, iw = iw0 + j, c = c0 + ch * TGC_CHUNK;
                const bool col_in = (unsigned)iw < (unsigned)s.W && c < s.C;
                uint4* dst = win + tgc_stored_col(s, j) * s.pix_chunks + ch;
                int off = ((b * s.H + ih0) * s.W + iw) * s.C + c;  // x's offset at row ih0 (read where in)
#pragma unroll 4
                for (int i = 0; i < s.in_h; ++i, off += s.W * s.C, dst += s.row_chunks) {
                    const bool in = col_in && (unsigned)(ih0 + i) < (unsigned)s.H;
                    cp_async_16_zfill(dst, x + (in ? off : 0), in);
                }
            }
            return;
        }
    }
    if constexpr (std::is_same<TX, float>::value) {
        if (!s.x_nhwc) {  // raw [channel][row][raw_row], window column j at lead + j (nchw_window_copy.cuh)
            nchw_copy_window<THREADS, true>(s.x_copy, x + (b * s.C + c0) * s.H * s.W, s.H, s.W, CS, s.C - c0, ih0,
                                            iw0 - nchw_copy_lead(iw0, s.x_copy), s.in_h, s.raw_row, raw);
            return;
        }
        // NHWC: raw [row][column][channel], a column's channels in neighbouring lanes
        for (int e = threadIdx.x; e < s.in_w * CS; e += THREADS) {
            const int ch = e % CS, j = e / CS, iw = iw0 + j, c = c0 + ch;
            const bool col_in = (unsigned)iw < (unsigned)s.W && c < s.C;
            float* dst = raw + j * CS + ch;
            int off = ((b * s.H + ih0) * s.W + iw) * s.C + c;  // x's offset at row ih0 (read where in)
#pragma unroll 4
            for (int i = 0; i < s.in_h; ++i, off += s.W * s.C, dst += s.raw_row) {
                const bool in = col_in && (unsigned)(ih0 + i) < (unsigned)s.H;
                cp_async_4_zfill(dst, x + (in ? off : 0), in);
            }
        }
    } else {  // (8 loads a chunk here, tried, changed ptxas's allocation of the whole kernel: fp16 NHWC ran
              // 10-25% slower on the cp.async path)
        const int total = s.in_h * s.in_w * CS;
        for (int e = threadIdx.x; e < total; e += THREADS) {
            int ch, i, j;
            if (s.x_nhwc) {  // channels fastest
                ch = e % CS;
                const int pix = e / CS;
                j = pix % s.in_w;
                i = pix / s.in_w;
            } else {  // columns fastest
                j = e % s.in_w;
                const int r = e / s.in_w;
                i = r % s.in_h;
                ch = r / s.in_h;
            }
            const int ih = ih0 + i, iw = iw0 + j, c = c0 + ch;
            const bool in = (unsigned)ih < (unsigned)s.H && (unsigned)iw < (unsigned)s.W && c < s.C;
            const TX v = conv_ldg(x + (in ? (s.x_nhwc ? ((b * s.H + ih) * s.W + iw) * s.C + c
                                                      : ((b * s.C + c) * s.H + ih) * s.W + iw)
                                          : 0));
            TO* dst = reinterpret_cast<TO*>(win + i * s.row_chunks + tgc_stored_col(s, j) * s.pix_chunks) + ch;
            *dst = in ? mma16_operand<TO>(v) : mma16_zero<TO>();
        }
    }
}

// Rounds the raw f32 window (tgc_stage_window, its copies complete and seen; NCHW: window column j at lead + j
// of its raw rows) into win, a chunk a thread as there (NCHW: neighbouring columns in neighbouring lanes, so
// that their reads of a channel fall in distinct banks).
template <int CS, int THREADS, class TO>
__device__ __forceinline__ void tgc_convert_raw(const tgc_shape& s, const float* raw, int lead, uint4* win) {
    constexpr int CHUNKS = CS / TGC_CHUNK;
    const int raw_row = s.raw_row, k_step = s.x_nhwc ? 1 : s.in_h * raw_row;
    for (int e = threadIdx.x; e < s.in_w * CHUNKS; e += THREADS) {
        int ch, j;
        tgc_line(s, CHUNKS, e, ch, j);
        const float* src = raw + (s.x_nhwc ? j * CS + ch * TGC_CHUNK : ch * TGC_CHUNK * k_step + lead + j);
        uint4* dst = win + tgc_stored_col(s, j) * s.pix_chunks + ch;
#pragma unroll 2
        for (int i = 0; i < s.in_h; ++i, src += raw_row, dst += s.row_chunks) {
            float v[TGC_CHUNK];
#pragma unroll
            for (int k = 0; k < TGC_CHUNK; ++k) v[k] = src[k * k_step];
            *dst = mma16_pack8<TO>(v);
        }
    }
}

// Copies the filters of the block's groups (from g0 on: (CS / Cg) * Mg maps of Cg * KK values, contiguous in
// w in either layout) into s_w as operands, a map every w_stride elements, its values in MKKC order (tap-major:
// a B register's two channels are neighbours), then zeros up to w_stride. 16-byte cp.async where w is 16-bit,
// MKKC and aligned (the slab's first value is: c0 is a multiple of 32), else element by element (f32 w
// rounded to fp16, MCKK w reordered).
template <int CS, int THREADS, class TO, class TX>
__device__ __forceinline__ void tgc_stage_filters(const tgc_shape& s, const TX* __restrict__ w, int g0, TO* s_w) {
    const int per_map = s.Cg * s.KH * s.KW;
    const int maps = min(CS / s.Cg, s.G - g0) * s.Mg, count = maps * per_map;
    const TX* src = w + g0 * s.Mg * per_map;
    int done = 0;
    if constexpr (std::is_same<TX, TO>::value) {
        if (s.w_vec && s.w_mkkc) {
            if (s.w_stride == per_map) {  // the maps back to back: one run
                const int chunks = count / TGC_CHUNK;
                for (int e = threadIdx.x; e < chunks; e += THREADS)
                    cp_async_16_zfill(s_w + e * TGC_CHUNK, src + e * TGC_CHUNK, true);
                done = chunks * TGC_CHUNK;
            } else {  // padded rows of whole chunks (Cg % 8 == 0): chunk q of map m, carried
                const int per = per_map / TGC_CHUNK, dm = THREADS / per, dq = THREADS % per;
                for (int m = threadIdx.x / per, q = threadIdx.x % per; m < maps; m += dm, q += dq) {
                    if (q >= per) { q -= per; if (++m >= maps) break; }
                    cp_async_16_zfill(s_w + m * s.w_stride + q * TGC_CHUNK, src + (m * per + q) * TGC_CHUNK, true);
                }
                done = count;
            }
        }
    }
    // The rest (f32 w rounded, MCKK w reordered) in runs of tgc_w_run values of w a thread (16-byte loads
    // where w allows), all loaded before they are stored: run value k is map m's value q = hi * lo_n + lo
    // (MCKK: channel hi, tap lo; MKKC: tap hi, channel lo), at s_w's place r = tap * Cg + ci. A value at a time
    // in s_w's order (strided loads, each waited on) was a third of the f32 fast path's stall samples, and a
    // thread's values THREADS apart (one carry and one 8-byte address a value) a fifth of its instructions.
    constexpr int RUN = tgc_w_run<TX>(), RUN_STEP = RUN * THREADS;
    const int KK = s.KH * s.KW, lo_n = s.w_mkkc ? s.Cg : KK, hi_n = per_map / lo_n;
    // 16-byte loads where src + done is 16-byte aligned (done and RUN are multiples of 8: so is every run)
    const bool vec = s.w_vec && (reinterpret_cast<uintptr_t>(src + done) & 15) == 0;
    const int d_m = RUN_STEP / per_map, d_hi = RUN_STEP % per_map / lo_n, d_lo = RUN_STEP % lo_n;
    const int first = done + RUN * threadIdx.x;
    int m0 = first / per_map, hi0 = first % per_map / lo_n, lo0 = first % lo_n;  // a run's first value, carried
    for (int e = first; e < count; e += RUN_STEP) {
        alignas(16) TX v[RUN];
        if (vec && e + RUN <= count) {
            constexpr int PER = 16 / sizeof(TX);
#pragma unroll
            for (int i = 0; i < RUN / PER; ++i)
                *reinterpret_cast<uint4*>(v + i * PER) = __ldg(reinterpret_cast<const uint4*>(src + e) + i);
        } else {
#pragma unroll
            for (int k = 0; k < RUN; ++k) v[k] = conv_ldg(src + min(e + k, count - 1));
        }
        int m = m0, hi = hi0, lo = lo0;
#pragma unroll
        for (int k = 0; k < RUN; ++k) {
            const int r = s.w_mkkc ? hi * s.Cg + lo : (lo << s.lg_cg) + hi;
            if (e + k < count) s_w[m * s.w_stride + r] = mma16_operand<TO>(v[k]);
            if (++lo == lo_n) {
                lo = 0;
                if (++hi == hi_n) { hi = 0; ++m; }
            }
        }
        lo0 += d_lo;
        if (lo0 >= lo_n) { lo0 -= lo_n; ++hi0; }
        hi0 += d_hi;
        if (hi0 >= hi_n) { hi0 -= hi_n; ++m0; }
        m0 += d_m;
    }
    const int pad_chunks = (s.w_stride - per_map) / TGC_CHUNK;  // whole chunks where there are any
    for (int e = threadIdx.x; e < maps * pad_chunks; e += THREADS)
        reinterpret_cast<uint4*>(s_w + (e / pad_chunks) * s.w_stride + per_map)[e % pad_chunks] =
            make_uint4(0u, 0u, 0u, 0u);
}

// Builds the B fragments of packs of several groups (Cg < 8, a block-diagonal B) from the staged filters s_w
// (maps from g0 * Mg on) as [pack][n8 tile][k-step][lane] pairs of registers: k = 16 ks + {2t, 2t+1, 2t+8,
// 2t+9} of map n = 8 n8 + lane / 4 (t = lane % 4) is piece k / 8's channel k % 8: the filter's value where
// that channel is in the map's group, else a zero of the block diagonal (and past the pack's pieces, maps and
// the layer's groups). Loads are unconditional (from a clamped place, the zeros selected after); a register's
// two channels, neighbours in s_w, are one 4-byte load where they are of one group.
template <int WARPS, class TO>
__device__ __forceinline__ void tgc_build_fragments(const tgc_shape& s, const TO* s_w, int g0, uint2* s_b) {
    const int KK = s.KH * s.KW, l = threadIdx.x % 32, nq = l / 4, t2 = 2 * (l % 4);
    // A warp's (pack, n8 tile, k-step) triples, k-steps fastest, WARPS apart: carried, not divided.
    int ks = threadIdx.x / 32, n8 = 0, pk = 0;
    const auto carry = [&] {
        while (ks >= s.ksteps) {
            ks -= s.ksteps;
            if (++n8 == s.nt) { n8 = 0; ++pk; }
        }
    };
    for (carry(); pk < s.packs; ks += WARPS, carry()) {
        const int n = n8 * 8 + nq, gm = n / s.Mg;  // the map in the pack, its group in the pack
        const int g = g0 + pk * s.gpp + gm, ml = pk * s.pack_m + n;  // ml: from g0 * Mg
        const bool map_ok = n < s.pack_m && g < s.G;
        const TO* wm = s_w + (map_ok ? ml : 0) * s.w_stride;  // a map's values, tap-major
        uint32_t h[2];
#pragma unroll
        for (int hp = 0; hp < 2; ++hp) {  // the k-step's two pieces (one tap each): registers {2t, 2t+1}, {2t+8, 2t+9}
            const int piece = 2 * ks + hp;
            const bool in = map_ok && piece < s.pieces;
            const bool ok0 = in && t2 >> s.lg_cg == gm, ok1 = in && (t2 + 1) >> s.lg_cg == gm;
            const TO* wt = wm + min(piece, KK - 1) * s.Cg;
            const uint32_t v = s.Cg >= 2 ? *reinterpret_cast<const uint32_t*>(wt + (t2 & (s.Cg - 1)))  // aligned: even
                                         : mma16_bits(wt[0]) * 0x10001u;  // one channel: the map's group's
            h[hp] = (ok0 ? v & 0xffffu : 0u) | (ok1 ? v & 0xffff0000u : 0u);
        }
        s_b[((pk * s.nt + n8) * s.ksteps + ks) * 32 + l] = make_uint2(h[0], h[1]);
    }
}

// A block takes the maps of input channels [c0, c0 + CS) (its slab: blockIdx.x % slabs, so that the blocks
// in flight read whole pixels) for output tiles blockIdx.x / slabs, then every gridDim.x / slabs-th after it
// (persistent: its filters are staged once), the next tile's window copied in while this one's is
// multiplied. The launch bounds ask for 16 warps an SM (up to 128 registers a thread): without a minimum
// ptxas chose 56-72 registers for f32 x and spilled, and 96 with a spill for 16-bit x at TP = 128 once the
// k-step loop lost its per-tile select (the 16-bit tiles were measured with these bounds since).
template <int TP, int CS, int WARPS, class TO, class TX, class TY>
__global__ void __launch_bounds__(32 * WARPS, 512 / (32 * WARPS))
    tc_grouped_kernel(tgc_shape s, const TX* __restrict__ x, const TX* __restrict__ w, const TY* __restrict__ bias,
                      TY* __restrict__ y) {
    constexpr int THREADS = 32 * WARPS, MT = TP / 16;
    constexpr bool RAW = std::is_same<TX, float>::value;  // tgc_stage_window's raw f32 window
    extern __shared__ uint4 tgc_smem[];
    static_assert(CS / TGC_CHUNK % 2 == 0, "a stored pixel's chunks: CS / 8 and a chunk of zeros");
    // A window, then a second one (or the raw f32 window).
    uint4* s_x = tgc_smem;
    float* s_raw = reinterpret_cast<float*>(s_x + s.window_chunks);
    uint2* s_b = reinterpret_cast<uint2*>(reinterpret_cast<char*>(tgc_smem) + s.b_offset);
    int* s_piece = reinterpret_cast<int*>(reinterpret_cast<char*>(tgc_smem) + s.table_offset);
    int2* s_wpiece = reinterpret_cast<int2*>(reinterpret_cast<char*>(tgc_smem) + s.wtable_offset);
    int* s_pix = reinterpret_cast<int*>(reinterpret_cast<char*>(tgc_smem) + s.pix_offset);
    int* s_abase = s_pix + TP;
    TY* s_y = reinterpret_cast<TY*>(reinterpret_cast<char*>(tgc_smem) + s.y_offset);  // y_vec: [pixel][y_row]

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int slab = blockIdx.x % s.slabs, step = gridDim.x / s.slabs;  // gridDim.x: whole slabs
    const int c0 = slab * CS, g0 = c0 >> s.lg_cg;                        // CS is whole packs, a pack whole groups

    // In bytes: each piece's offset from a pixel's first chunk in its pack (-1: the unused half of the last
    // k-step, read from the pixel's chunk of zeros) and (direct_b) each k-step's two pieces' offsets in a
    // staged map (past the pieces: its zeros); each tile pixel's (row << 16 | column) and its first window
    // chunk's offset (0 past the tile). Then the windows' chunks of zeros (never staged over).
    const int per_map = s.Cg * s.KH * s.KW;
    const auto w_piece = [&](int j) {
        return (int)sizeof(TO) * (j < s.pieces ? (j >> s.lg_cpp) * s.Cg + (j & (s.cpp - 1)) * TGC_CHUNK : per_map);
    };
    for (int j = threadIdx.x; j < 2 * s.ksteps; j += THREADS) {
        int off = -1;
        if (j < s.pieces) {
            const int tap = j >> s.lg_cpp, c8 = j & (s.cpp - 1), kh = tap / s.KW, col = (tap - kh * s.KW) * s.dil_w;
            off = 16 * (kh * s.dil_h * s.row_chunks + (col % s.stride_w * s.phase_w + col / s.stride_w) * s.pix_chunks + c8);
        }
        s_piece[j] = off;
        if (s.direct_b && j % 2 == 0) s_wpiece[j / 2] = make_int2(w_piece(j), w_piece(j + 1));
    }
    for (int p = threadIdx.x; p < TP; p += THREADS) {
        const int r = p < s.th * s.tw ? p / s.tw : 0, c = p < s.th * s.tw ? p % s.tw : 0;
        s_pix[p] = r << 16 | c;
        s_abase[p] = 16 * (r * s.stride_h * s.row_chunks + c * s.pix_chunks);
    }
    for (int e = threadIdx.x; e < (RAW ? 1 : 2) * s.window_chunks / s.pix_chunks; e += THREADS)
        s_x[e * s.pix_chunks + CS / TGC_CHUNK] = make_uint4(0u, 0u, 0u, 0u);
    grid_wait_prior();  // launched as a programmatic dependent (grid_dependency.cuh)
    TO* s_w = reinterpret_cast<TO*>(reinterpret_cast<char*>(tgc_smem) + s.w_offset);
    // The window of item i into buffer buf (f32 x: into the raw window).
    const auto stage = [&](int i, int buf) {
        const TgcTile t = tgc_tile(s, i);
        tgc_stage_window<CS, THREADS, TO>(s, x, t.b, c0, t.oh0 * s.stride_h - s.pad_h, t.ow0 * s.stride_w - s.pad_w,
                                          s_x + buf * s.window_chunks, s_raw);
    };
    int item = blockIdx.x / s.slabs;
    // 16-bit x: the filters' copies, then the first window's, in flight while the fragments are built. f32 x:
    // the window's copies first, in flight while the filters are loaded and rounded (ResNeXt's 14- and 7-pixel
    // layers take two or three tiles a block: the filters' load is a large part of a block's time).
    if (RAW && item < s.items) stage(item, 0);
    tgc_stage_filters<CS, THREADS>(s, w, g0, s_w);
    cp_async_commit();
    if (!RAW && item < s.items) stage(item, 0);
    cp_async_commit();
    cp_async_wait<1>();  // 16-bit x: the filters (the first window's copies stay in flight)
    __syncthreads();
    if (!s.direct_b) tgc_build_fragments<WARPS>(s, s_w, g0, s_b);  // seen by every warp after the loop's first barrier
    // The raw window of item i rounded into the window buffer.
    const auto convert = [&](int i) {
        const int iw0 = tgc_tile(s, i).ow0 * s.stride_w - s.pad_w;
        tgc_convert_raw<CS, THREADS, TO>(s, s_raw, nchw_copy_lead(iw0, s.x_copy), s_x);
    };
    if constexpr (RAW) {  // the first window rounded into buffer 0
        cp_async_wait<0>();
        __syncthreads();
        if (item < s.items) convert(item);
    }

    const int tile_px = s.th * s.tw;
    // ldmatrix.x4 rows: lanes 0-15 give pixels 0-15 of an m16 tile at a k-step's first piece, lanes 16-31
    // the same pixels at its second.
    const int a_row = lane % 16, a_half = lane / 16;
    const int g4 = lane / 4, t2 = 2 * (lane % 4);
    // The y vector stores: this thread's first (pixel, vector) and its step, carried (no division a store).
    constexpr int VY = 16 / sizeof(TY);
    const int vecs = s.y_maps / VY, m_slab = slab * s.y_maps;
    const int vp0 = s.y_vec ? threadIdx.x / vecs : 0, vv0 = s.y_vec ? threadIdx.x % vecs : 0;
    const int vdp = s.y_vec ? THREADS / vecs : 0, vdv = s.y_vec ? THREADS % vecs : 0;
    // Two windows: the next one's copies in flight while this one is multiplied. f32 x: one window, rounded
    // from the raw one (the next one's copies in flight the same way) after this one is done.
#pragma unroll 1
    for (int cur = 0; item < s.items; item += step) {
        const bool more = item + step < s.items;
        if constexpr (RAW) __syncthreads();  // this item's window rounded in, and the raw one read
        if (more) stage(item + step, cur ^ 1);
        cp_async_commit();
        if constexpr (!RAW) {
            cp_async_wait<1>();  // this item's window (the next one's copies stay in flight)
            __syncthreads();
        }
        const uint4* win = s_x + cur * s.window_chunks;
        const TgcTile t = tgc_tile(s, item);
        const int b = t.b, oh0 = t.oh0, ow0 = t.ow0;
        // The warp's tasks: nt of them a pack, WARPS apart (carried, not divided). A task multiplies MT m16 x n8
        // tiles: where a pack of one group has an even number of n8 tiles (16, 32, ... maps), a run of two of
        // them over MT / 2 m16 tiles, so that each A fragment read by ldmatrix feeds two mmas (with one, the
        // warps waited on shared memory: MIO throttle; runs of four were no faster), else one n8 tile over
        // the MT m16 tiles.
        const int ntt = s.direct_b && s.nt % 2 == 0 ? 2 : 1;
        int q = warp, pk = 0;
        const auto carry = [&] {
            while (q >= s.nt) {
                q -= s.nt;
                ++pk;
            }
        };
#pragma unroll 1
        for (carry(); pk < s.packs; q += WARPS, carry()) {
            const int gfirst = g0 + pk * s.gpp;
            if (gfirst >= s.G) continue;  // the last slab's packs past C (the same for the whole warp)
            // A pixel's chunk of zeros, from its first chunk in the pack.
            const int zeros = (CS / TGC_CHUNK - pk * s.cpp) * 16;
            // Task q with NTT n8 tiles a run: its first n8 tile and its m16 tiles, its sums with bias and ReLU
            // stored; b_of(ks, bv) gives the runs' B fragments of k-step ks.
            const auto task = [&](auto ntt_c, auto b_of) {
                constexpr int NTT = decltype(ntt_c)::value, MTT = MT / NTT;
                const int n8 = q / NTT * NTT, mt0 = q % NTT * MTT;
                // This lane's pixels' first chunk in the pack as shared addresses (rows past the tile: pixel 0).
                const uint32_t win_at = (uint32_t)__cvta_generic_to_shared(win) + pk * s.cpp * 16;
                uint32_t a_at[MTT];
#pragma unroll
                for (int i = 0; i < MTT; ++i) a_at[i] = win_at + s_abase[(mt0 + i) * 16 + a_row];
                float acc[MTT][NTT][4];
                mma_zero(acc);
                for (int ks = 0; ks < s.ksteps; ++ks) {
                    const int off = s_piece[2 * ks + a_half];
                    const uint32_t k_at = off >= 0 ? off : zeros;
                    uint2 bv[NTT];
                    b_of(ks, n8, bv);
#pragma unroll
                    for (int i = 0; i < MTT; ++i) {
                        if ((mt0 + i) * 16 >= tile_px) continue;  // the same for the whole warp
                        uint32_t a[4];
                        ldmatrix_x4(a, a_at[i] + k_at);
#pragma unroll
                        for (int j = 0; j < NTT; ++j) mma16_m16n8k16<TO>(acc[i][j], a, bv[j].x, bv[j].y);
                    }
                }
                // This lane's maps of n8 tile n8 + j (columns t2, t2 + 1): in the pack and the layer, and their bias.
                const auto lane_maps = [&](int j, int& m0, bool (&ok)[2], float (&bsum)[2]) {
                    const int n0 = (n8 + j) * 8 + t2;
                    m0 = gfirst * s.Mg + n0;
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        ok[e] = n0 + e < s.pack_m && m0 + e < s.M;
                        bsum[e] = ok[e] && bias ? conv_load(bias, m0 + e) : 0.0f;
                    }
                };
                // The sums with bias and ReLU, store(j, p, m0, ok, v0, v1) for each pair of this lane's maps at
                // tile row p. Each way of storing them instantiates the loops of its own, so that the code a
                // launch runs is one stretch (with the ways' branches interleaved per element, Nsight Compute
                // put 29% of g32_3's stall samples on instruction fetch; fp16 ResNeXt layers ran 1-5% slower).
                const auto each_sum = [&](auto store) {
#pragma unroll
                    for (int j = 0; j < NTT; ++j) {
                        int m0;
                        bool ok[2];
                        float bsum[2];
                        lane_maps(j, m0, ok, bsum);
#pragma unroll
                        for (int i = 0; i < MTT; ++i) {
                            if ((mt0 + i) * 16 >= tile_px) continue;  // the same for the whole warp
#pragma unroll
                            for (int h = 0; h < 2; ++h) {  // rows g4 and g4 + 8 of the m16 tile
                                const int p = (mt0 + i) * 16 + g4 + 8 * h;
                                store(j, p, m0, ok, conv_epilogue_value(acc[i][j][2 * h], bsum[0], s.relu),
                                      conv_epilogue_value(acc[i][j][2 * h + 1], bsum[1], s.relu));
                            }
                        }
                    }
                };
                if (s.y_vec) {  // the block's maps of each pixel staged for whole-vector stores (rows < TP)
                    each_sum([&](int j, int p, int, const bool (&ok)[2], float v0, float v1) {
                        TY* at = s_y + p * s.y_row + pk * s.pack_m + (n8 + j) * 8 + t2;
                        if (ok[1] && s.pack_m % 2 == 0) {  // an even pack: both maps or neither, at an even offset
                            mma16_store_pair(at, v0, v1);
                        } else {
                            if (ok[0]) at[0] = conv_store_as<TY>(v0);
                            if (ok[1]) at[1] = conv_store_as<TY>(v1);
                        }
                    });
                    return;
                }
                // Else y directly: NHWC by map pairs where y allows, NCHW one map at a time.
                each_sum([&](int, int p, int m0, const bool (&ok)[2], float v0, float v1) {
                    const int pix = s_pix[p], oh = oh0 + (pix >> 16), ow = ow0 + (pix & 0xffff);
                    if (p >= tile_px || oh >= s.OH || ow >= s.OW) return;
                    if (s.y_nhwc) {
                        TY* py = y + ((b * s.OH + oh) * s.OW + ow) * s.M + m0;
                        if (s.y_pair && ok[1]) {
                            mma16_store_pair(py, v0, v1);
                        } else {
                            if (ok[0]) py[0] = conv_store_as<TY>(v0);
                            if (ok[1]) py[1] = conv_store_as<TY>(v1);
                        }
                    } else {
                        TY* py = y + ((b * s.M + m0) * s.OH + oh) * s.OW + ow;
                        if (ok[0]) py[0] = conv_store_as<TY>(v0);
                        if (ok[1]) py[s.OH * s.OW] = conv_store_as<TY>(v1);
                    }
                });
            };
            if (s.direct_b) {  // B from each lane's map's staged row (past the pack's maps: its last, not stored)
                const auto b_rows = [&](int ks, int n8, auto& bv) {
                    const int2 o = s_wpiece[ks];
#pragma unroll
                    for (int j = 0; j < (int)(sizeof(bv) / sizeof(bv[0])); ++j) {
                        const char* wl = reinterpret_cast<const char*>(
                            s_w + (pk * s.pack_m + min((n8 + j) * 8 + g4, s.pack_m - 1)) * s.w_stride + t2);
                        bv[j] = make_uint2(*reinterpret_cast<const uint32_t*>(wl + o.x),
                                           *reinterpret_cast<const uint32_t*>(wl + o.y));
                    }
                };
                if (ntt == 2) task(std::integral_constant<int, 2>(), b_rows);
                else task(std::integral_constant<int, 1>(), b_rows);
            } else {
                task(std::integral_constant<int, 1>(), [&](int ks, int n8, uint2 (&bv)[1]) {
                    bv[0] = s_b[((pk * s.nt + n8) * s.ksteps + ks) * 32 + lane];
                });
            }
        }
        if (s.y_vec) {  // NHWC y by 16-byte vectors of the block's y_maps maps a pixel
            __syncthreads();
            for (int p = vp0, v = vv0; p < tile_px; p += vdp, v += vdv) {
                if (v >= vecs) { v -= vecs; ++p; if (p >= tile_px) break; }
                const int pix = s_pix[p], oh = oh0 + (pix >> 16), ow = ow0 + (pix & 0xffff), m = m_slab + v * VY;
                if (oh >= s.OH || ow >= s.OW || m >= s.M) continue;  // M % VY == 0: vectors whole or out
                *reinterpret_cast<uint4*>(y + ((b * s.OH + oh) * s.OW + ow) * s.M + m) =
                    *reinterpret_cast<const uint4*>(s_y + p * s.y_row + v * VY);
            }
        }
        if constexpr (RAW) {  // the next raw window complete, every read of this window (and of the y staging) done
            cp_async_wait<0>();
            __syncthreads();
            if (more) convert(item + step);
        } else {
            __syncthreads();  // every read of this window (and of the y staging) is done before they are refilled
            cur ^= 1;
        }
    }
    grid_launch_dependents();  // x, w and bias are read
}

// The output tile of at most TP pixels that moves the least: over the widths up to OW (the rows as
// many as fit), the fewest of (window pixels staged + m16 rows multiplied) over the plane's tiles.
static void tgc_pick_tile(int TP, const conv_problem* p, int& th, int& tw) {
    const long long OH = conv_out_h(p), OW = conv_out_w(p);
    long long best = -1;
    th = tw = 1;
    for (long long w = 1; w <= OW && w <= TP; ++w) {
        const long long h = OH < TP / w ? OH : TP / w;
        const long long tiles = (OH + h - 1) / h * ((OW + w - 1) / w);
        const long long window = ((h - 1) * p->stride_h + (p->KH - 1) * p->dilation_h + 1) *
                                 ((w - 1) * p->stride_w + (p->KW - 1) * p->dilation_w + 1);
        const long long cost = tiles * (window + (h * w + 15) / 16 * 16);
        if (best < 0 || cost < best) {
            best = cost;
            th = (int)h;
            tw = (int)w;
        }
    }
}

// Fills s's geometry (no pointers' properties but x_copy, the elements per copy of NCHW f32 x: the launch's,
// or for sizing before the operands are known the most the layer allows, the most room) and returns the
// shared memory of a launch (two windows or for f32 x a window and the raw one, the staged filters, their B
// fragments, the piece and pixel tables, and where y may take 16-byte stores the y staging), or 0 where that
// passes int range (far beyond any GPU's shared memory).
template <int TP, int CS>
static size_t tgc_layout(const conv_problem* p, size_t y_elem, int x_copy, tgc_shape& s) {
    static_cast<ConvShape32&>(s) = conv_shape32(p);
    s.x_copy = x_copy;
    s.G = (int)p->groups;
    s.Cg = (int)(p->C / p->groups);
    s.Mg = (int)(p->M / p->groups);
    const int pack_c = s.Cg % TGC_CHUNK == 0 ? s.Cg : TGC_CHUNK;  // a pack's channels: a chunk, or whole chunks
    s.gpp = pack_c / s.Cg;
    s.pack_m = s.gpp * s.Mg;
    s.cpp = pack_c / TGC_CHUNK;
    s.lg_cg = conv_floor_log2(s.Cg);
    s.lg_cpp = conv_floor_log2(s.cpp);
    s.packs = CS / pack_c;
    s.nt = (s.pack_m + 7) / 8;
    s.slabs = (s.C + CS - 1) / CS;
    tgc_pick_tile(TP, p, s.th, s.tw);
    s.tiles_w = (s.OW + s.tw - 1) / s.tw;
    s.tiles = (s.OH + s.th - 1) / s.th * s.tiles_w;
    s.items = (int)(p->B * s.tiles);  // < 2^31: supports()
    const long long pieces = p->KH * p->KW * s.cpp;
    const long long in_h = (s.th - 1) * p->stride_h + (p->KH - 1) * p->dilation_h + 1;
    const long long in_w = (s.tw - 1) * p->stride_w + (p->KW - 1) * p->dilation_w + 1;
    const long long phase_w = (in_w + p->stride_w - 1) / p->stride_w;
    const long long pix_chunks = CS / TGC_CHUNK + 1;  // and a chunk of zeros
    const long long window_chunks = in_h * p->stride_w * phase_w * pix_chunks;
    const long long ksteps = (pieces + 1) / 2;
    // A pack of one group (Cg % 8 == 0) reads B from the staged filters, its maps' rows padded with zeros (the
    // unused half of a k-step) to 4 mod 8 words, so that a warp's 8 maps x 4 register pairs fall in distinct
    // banks; packs of several groups read fragments built once a block (the block diagonal's zeros).
    s.direct_b = s.gpp == 1;
    const long long per_map = (long long)s.Cg * p->KH * p->KW;
    const long long w_stride = s.direct_b ? per_map + (s.Cg / TGC_CHUNK * p->KH * p->KW % 2 ? 16 : 8) : per_map;
    const long long b_bytes = s.direct_b ? 0 : (long long)s.packs * s.nt * ksteps * 32 * 8;
    // After the window: a second one, or for f32 x the raw window (in_h rows of raw_row floats: NHWC in_w
    // pixels' CS channels, NCHW a plane's columns from the lead; CS planes).
    const bool nhwc = p->x_layout == CONV_NHWC;
    const long long raw_row = nhwc ? in_w * CS : nchw_copy_row_floats((int)in_w, x_copy);
    const long long second = p->x_dtype == CONV_F32 ? (in_h * raw_row * (nhwc ? 1 : CS) * 4 + 15) / 16 : window_chunks;
    const long long w_offset = (window_chunks + second) * 16;
    const long long w_bytes = ((long long)CS / s.Cg * s.Mg * w_stride * 2 + 15) / 16 * 16;
    const long long b_offset = w_offset + w_bytes, table_offset = b_offset + b_bytes;
    const long long wtable_offset = table_offset + 2 * ksteps * 4;  // 8-byte aligned: ksteps int pairs
    const long long pix_offset = wtable_offset + ksteps * 8, y_offset = (pix_offset + 2 * TP * 4 + 15) / 16 * 16;
    // 16-byte stores of y: NHWC, whole vectors of maps per block and in M (the pointer's alignment: the launch).
    s.y_maps = s.packs * s.pack_m;
    const int vy = (int)(16 / y_elem);
    const bool y_vec_shape = p->y_layout == CONV_NHWC && s.y_maps % vy == 0 && s.M % vy == 0;
    s.y_row = s.y_maps + vy;  // a pixel's maps and 16 bytes: the fragments' rows in distinct banks
    const long long bytes = y_offset + (y_vec_shape ? (long long)TP * s.y_row * (long long)y_elem : 0);
    if (bytes >= (1ll << 31)) return 0;
    s.y_vec = y_vec_shape;  // the launch clears it where y is not 16-byte aligned
    s.pieces = (int)pieces;
    s.ksteps = (int)ksteps;
    s.in_h = (int)in_h;
    s.in_w = (int)in_w;
    s.raw_row = (int)raw_row;
    s.phase_w = (int)phase_w;
    s.pix_chunks = (int)pix_chunks;
    s.row_chunks = (int)(p->stride_w * phase_w * pix_chunks);
    s.window_chunks = (int)window_chunks;
    s.w_offset = (int)w_offset;
    s.w_stride = (int)w_stride;
    s.wtable_offset = (int)wtable_offset;
    s.b_offset = (int)b_offset;
    s.table_offset = (int)table_offset;
    s.pix_offset = (int)pix_offset;
    s.y_offset = (int)y_offset;
    return (size_t)bytes;
}

// tgc_layout with the widest copies of NCHW f32 x at address x_at allows (nchw_copy_vector; 0: the most the
// layer's rows allow, for sizing before the operands are known), or with 4-byte copies where the raw window's
// rows for wider ones (up to 3 more floats each) would pass the block's shared memory `most`: the 128-pixel
// tiles at stride 2 are near it. Returns tgc_layout's bytes (those of the 4-byte layout where it falls back).
template <int TP, int CS>
static size_t tgc_layout_fitting(const conv_problem* p, size_t y_elem, uintptr_t x_at, int most, tgc_shape& s) {
    const int v = nchw_copy_vector(p, x_at);
    const size_t bytes = tgc_layout<TP, CS>(p, y_elem, v, s);
    return v > 1 && (bytes == 0 || bytes > (size_t)most) ? tgc_layout<TP, CS>(p, y_elem, 1, s) : bytes;
}

template <int TP, int CS, int WARPS>
struct TgcLaunch {
    template <class TO, class TX, class TY>
    static int run(const conv_problem* p, const conv_tensors* t, cudaStream_t stream) {
        tgc_shape s;
        int most = 0;
        const int status = conv_smem_per_block_optin(&most);
        if (status != CONV_OK) return status;
        const size_t smem = tgc_layout_fitting<TP, CS>(p, sizeof(TY), (uintptr_t)t->x, most, s);
        s.x_nhwc = p->x_layout == CONV_NHWC;
        s.y_nhwc = p->y_layout == CONV_NHWC;
        s.w_mkkc = p->w_layout == CONV_MKKC;
        s.x_vec = std::is_same<TX, TO>::value && s.x_nhwc && s.C % TGC_CHUNK == 0 && (uintptr_t)t->x % 16 == 0;
        s.w_vec = (uintptr_t)t->w % 16 == 0;
        s.y_vec = s.y_vec && (uintptr_t)t->y % 16 == 0;
        s.y_pair = s.y_nhwc && s.Mg % 2 == 0 && (uintptr_t)t->y % (2 * sizeof(TY)) == 0;
        s.relu = p->epilogue >= CONV_EPILOGUE_RELU;
        const auto kernel = tc_grouped_kernel<TP, CS, WARPS, TO, TX, TY>;
        const int opt_in = conv_allow_smem(kernel, smem, "implicit_gemm_f16: the grouped tile");
        if (opt_in != CONV_OK) return opt_in;
        // A wave of blocks, whole slabs of them, each looping over the tiles (at most all of them).
        int64_t wave = 0;
        const int wave_status = conv_wave_blocks(kernel, 32 * WARPS, smem, &wave);
        if (wave_status != CONV_OK) return wave_status;
        const int64_t per_slab = wave / s.slabs > 1 ? wave / s.slabs : 1;
        const dim3 grid((unsigned)(s.slabs * (per_slab < s.items ? per_slab : s.items)));
        CONV_LAUNCH_DEPENDENT("tc_grouped_kernel", kernel, grid, 32 * WARPS, smem, stream, s,
                              static_cast<const TX*>(t->x), static_cast<const TX*>(t->w),
                              static_cast<const TY*>(t->bias), static_cast<TY*>(t->y));
        return CONV_OK;
    }
};

}  // namespace

// (Ungrouped layers of up to CS channels as one group were measured on these tiles, H200, fp16: 0.51x the
// GEMM tiles' speed on modern5's 27 pointwise layers of 16-64 channels at batch 128, 0.48x on cnn5's 26
// such layers at batch 32, faster on none: they stay the GEMM tiles'.)
template <int TP, int CS, int WARPS>
int tc_grouped_supports(const conv_problem* p) {
    if (p->groups < 2)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the grp configurations run grouped layers (groups >= 2); this one "
                              "has groups=%lld", (long long)p->groups);
    const long long Cg = p->C / p->groups;
    // A pack is a chunk of 8 / Cg groups or one group of whole chunks, and a block's CS channels whole packs.
    if (!(Cg == 1 || Cg == 2 || Cg == 4 || (Cg % TGC_CHUNK == 0 && CS % Cg == 0)))
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the grp%d_c%d configuration takes groups of 1, 2, 4 or a multiple "
                              "of 8 channels that divides %d; this layer has %lld channels per group", TP, CS, CS,
                              Cg);
    if (p->y_dtype != p->x_dtype)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the grp configurations write y in x's dtype (x %s, y %s)",
                              conv_dtype_name(p->x_dtype), conv_dtype_name(p->y_dtype));
    int most = 0;
    const int status = conv_smem_per_block_optin(&most);
    if (status != CONV_OK) return status;
    const size_t y_elem = conv_dtype_size(p->y_dtype);
    tgc_shape s;
    const size_t bytes = tgc_layout_fitting<TP, CS>(p, y_elem, 0, most, s);
    if (bytes == 0 || bytes > (size_t)most)
        return conv_set_error(CONV_ERR_UNSUPPORTED,
                              "implicit_gemm_f16: the grp%d_c%d tile's input window (%lld x %lld pixels x %d "
                              "channels: KH=%lld, KW=%lld, stride %lld x %lld, dilation %lld x %lld) and filters "
                              "need %s%zu bytes of shared memory, the GPU gives a block %d", TP, CS,
                              (long long)((s.th - 1) * p->stride_h + (p->KH - 1) * p->dilation_h + 1),
                              (long long)((s.tw - 1) * p->stride_w + (p->KW - 1) * p->dilation_w + 1), CS,
                              (long long)p->KH, (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w,
                              (long long)p->dilation_h, (long long)p->dilation_w, bytes == 0 ? "over " : "",
                              bytes == 0 ? (size_t)1 << 31 : bytes, most);
    if (p->B * s.tiles * s.slabs >= (1ll << 31))
        return conv_set_error(CONV_ERR_UNSUPPORTED, "implicit_gemm_f16: the grp tiles of this batch pass gridDim.x");
    return CONV_OK;
}

template <int TP, int CS, int WARPS>
int tc_grouped_run(const conv_problem* p, const conv_tensors* t, void*, size_t, void* stream) {
    using L = TgcLaunch<TP, CS, WARPS>;
    const cudaStream_t s = conv_stream(stream);
    switch (p->x_dtype) {
    case CONV_F16: return L::template run<__half, __half, __half>(p, t, s);
    case CONV_BF16: return L::template run<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>(p, t, s);
    default: return L::template run<__half, float, float>(p, t, s);  // f32 rounded to fp16
    }
}

// The configurations TcVariant lists (tc_igemm_host.cuh).
#define TGC_CONFIG(TP, CS, WARPS)                                                                                 \
    template int tc_grouped_supports<TP, CS, WARPS>(const conv_problem*);                                        \
    template int tc_grouped_run<TP, CS, WARPS>(const conv_problem*, const conv_tensors*, void*, size_t, void*);
TGC_CONFIG(128, 64, 8)
TGC_CONFIG(128, 32, 4)
TGC_CONFIG(64, 32, 4)
