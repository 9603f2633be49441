// fft_passes.cuh — the block's 1-D FFTs in shared memory: batches of complex sequences of one length n
// (n = 2^a 3^b 5^c, at most FFT_MAX_N), transformed together by the threads of a block, one Stockham
// pass per radix (8, 5, 4, 3 or 2): each pass reads every element once and writes it once, into the
// other buffer, and the last leaves the spectra in natural order (no bit reversal). Pass p of radix R
// over the sequences' elements j + r * n/R (r < R) multiplies them by the twiddles w^(r * (j mod Ns))
// of the n-th roots (Ns: the product of the radices before it), takes their R-point DFT in registers and
// stores it at (j - j mod Ns) * R + j mod Ns + r * Ns (Govindaraju et al., "High performance discrete
// Fourier transforms on graphics processors", SC 2008). SIGN -1: the forward transform
// X[k] = sum x[j] e^(-2 pi i jk / n); +1 the inverse without its 1/n.
#pragma once

#include <cuda_runtime.h>

constexpr int FFT_MAX_N = 256;    // the longest sequence
constexpr int FFT_MAX_PASSES = 8;  // 2^8 in passes of 2 at most (the radices taken largest first: 3 or 4 passes)

// One transform length: its radices in pass order.
struct FftDim {
    int n, passes;
    unsigned char radix[FFT_MAX_PASSES];
};

// n's radices, 8 first (fewest passes): false where n has a prime factor above 5 or needs more passes.
static inline bool fft_dim_plan(int n, FftDim* d) {
    d->n = n;
    d->passes = 0;
    static const int radices[] = {8, 5, 4, 3, 2};
    for (int r : radices)
        while (n % r == 0) {
            if (d->passes == FFT_MAX_PASSES) return false;
            d->radix[d->passes++] = (unsigned char)r;
            n /= r;
        }
    return n == 1;
}

// The smallest length >= need whose only prime factors are 2, 3 and 5.
static inline int fft_good_length(int need) {
    for (int n = need > 1 ? need : 1;; ++n) {
        int m = n;
        for (int r = 2; r <= 5; ++r)
            while (m % r == 0) m /= r;
        if (m == 1) return n;
    }
}

__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ float2 cscale(float2 a, float s) { return make_float2(a.x * s, a.y * s); }
__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
    return make_float2(fmaf(a.x, b.x, -a.y * b.y), fmaf(a.x, b.y, a.y * b.x));
}
__device__ __forceinline__ float2 cconj(float2 a) { return make_float2(a.x, -a.y); }
// a * (SIGN * i): a quarter turn in the transform's direction.
template <int SIGN>
__device__ __forceinline__ float2 cquarter(float2 a) {
    return SIGN < 0 ? make_float2(a.y, -a.x) : make_float2(-a.y, a.x);
}

// The R-point DFT of v in place, e^(SIGN 2 pi i / R) its root.
template <int SIGN>
__device__ __forceinline__ void dft2(float2* v) {
    const float2 a = v[0];
    v[0] = cadd(a, v[1]);
    v[1] = csub(a, v[1]);
}

template <int SIGN>
__device__ __forceinline__ void dft3(float2* v) {
    const float h = 0.86602540378443865f;  // sin(2 pi / 3)
    const float2 t = cadd(v[1], v[2]), u = cscale(cquarter<SIGN>(csub(v[1], v[2])), h);
    const float2 m = make_float2(fmaf(-0.5f, t.x, v[0].x), fmaf(-0.5f, t.y, v[0].y));
    v[0] = cadd(v[0], t);
    v[1] = cadd(m, u);
    v[2] = csub(m, u);
}

template <int SIGN>
__device__ __forceinline__ void dft4(float2* v) {
    const float2 t0 = cadd(v[0], v[2]), t1 = csub(v[0], v[2]), t2 = cadd(v[1], v[3]),
                 t3 = cquarter<SIGN>(csub(v[1], v[3]));
    v[0] = cadd(t0, t2);
    v[1] = cadd(t1, t3);
    v[2] = csub(t0, t2);
    v[3] = csub(t1, t3);
}

template <int SIGN>
__device__ __forceinline__ void dft5(float2* v) {
    // X[k] = sum_j v[j] (cos(2 pi jk/5) + SIGN i sin(2 pi jk/5)), pairing j and 5 - j.
    const float c1 = 0.30901699437494742f, c2 = -0.80901699437494742f;  // cos(2 pi / 5), cos(4 pi / 5)
    const float s1 = 0.95105651629515357f, s2 = 0.58778525229247313f;   // sin(2 pi / 5), sin(4 pi / 5)
    const float2 a1 = cadd(v[1], v[4]), b1 = cquarter<SIGN>(csub(v[1], v[4]));
    const float2 a2 = cadd(v[2], v[3]), b2 = cquarter<SIGN>(csub(v[2], v[3]));
    const float2 x0 = v[0];
    const float2 r1 = make_float2(x0.x + c1 * a1.x + c2 * a2.x, x0.y + c1 * a1.y + c2 * a2.y);
    const float2 r2 = make_float2(x0.x + c2 * a1.x + c1 * a2.x, x0.y + c2 * a1.y + c1 * a2.y);
    const float2 i1 = make_float2(s1 * b1.x + s2 * b2.x, s1 * b1.y + s2 * b2.y);
    const float2 i2 = make_float2(s2 * b1.x - s1 * b2.x, s2 * b1.y - s1 * b2.y);
    v[0] = cadd(x0, cadd(a1, a2));
    v[1] = cadd(r1, i1);
    v[4] = csub(r1, i1);
    v[2] = cadd(r2, i2);
    v[3] = csub(r2, i2);
}

template <int SIGN>
__device__ __forceinline__ void dft8(float2* v) {
    // Two 4-point DFTs (even and odd elements), the odd one turned by the eighth roots, then combined.
    const float h = 0.70710678118654752f;
    float2 e[4] = {v[0], v[2], v[4], v[6]}, o[4] = {v[1], v[3], v[5], v[7]};
    dft4<SIGN>(e);
    dft4<SIGN>(o);
    o[1] = cmul(o[1], make_float2(h, SIGN * h));
    o[2] = cquarter<SIGN>(o[2]);
    o[3] = cmul(o[3], make_float2(-h, SIGN * h));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        v[k] = cadd(e[k], o[k]);
        v[k + 4] = csub(e[k], o[k]);
    }
}

template <int R, int SIGN>
__device__ __forceinline__ void dft_radix(float2* v) {
    if constexpr (R == 2) dft2<SIGN>(v);
    else if constexpr (R == 3) dft3<SIGN>(v);
    else if constexpr (R == 4) dft4<SIGN>(v);
    else if constexpr (R == 5) dft5<SIGN>(v);
    else dft8<SIGN>(v);
}

// One pass over `count` sequences of n elements, sequence q at src + q * ld (and dst + q * ld).
// tw: the n-th roots e^(-2 pi i j / n), j < n (conjugated here for the inverse). A thread keeps one position j
// (< n/R <= 128 <= the block's threads) and its R - 1 twiddles for the whole pass and walks the sequences: no
// index division or twiddle load per element. Threads past the last whole multiple of n/R sit the pass out.
template <int R, int SIGN>
__device__ void fft_pass(const float2* __restrict__ src, float2* __restrict__ dst, int count, int n, int ld, int ns,
                         const float2* __restrict__ tw) {
    const int nr = n / R, qstep = blockDim.x / nr;
    if ((int)threadIdx.x >= qstep * nr) return;
    const int j = threadIdx.x % nr, k = j % ns, step = n / (ns * R);
    float2 t[R];
#pragma unroll
    for (int r = 1; r < R; ++r) {
        const float2 w = tw[r * k * step];
        t[r] = SIGN < 0 ? w : cconj(w);
    }
    const float2* s = src + j;
    float2* d = dst + (j - k) * R + k;
    for (int q = threadIdx.x / nr; q < count; q += qstep) {
        float2 v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = s[q * ld + r * nr];
        if (ns > 1) {
#pragma unroll
            for (int r = 1; r < R; ++r) v[r] = cmul(v[r], t[r]);
        }
        dft_radix<R, SIGN>(v);
#pragma unroll
        for (int r = 0; r < R; ++r) d[q * ld + r * ns] = v[r];
    }
}

// The transform of `count` sequences held in a (b: scratch of the same size). Returns the buffer that holds
// the spectra (a or b, by the number of passes). Every thread of the block calls it; it ends on a barrier.
template <int SIGN>
__device__ float2* fft_run(float2* a, float2* b, int count, int ld, const FftDim& dim, const float2* tw) {
    int ns = 1;
    for (int p = 0; p < dim.passes; ++p) {
        const int r = dim.radix[p];
        switch (r) {
        case 8: fft_pass<8, SIGN>(a, b, count, dim.n, ld, ns, tw); break;
        case 5: fft_pass<5, SIGN>(a, b, count, dim.n, ld, ns, tw); break;
        case 4: fft_pass<4, SIGN>(a, b, count, dim.n, ld, ns, tw); break;
        case 3: fft_pass<3, SIGN>(a, b, count, dim.n, ld, ns, tw); break;
        default: fft_pass<2, SIGN>(a, b, count, dim.n, ld, ns, tw); break;
        }
        __syncthreads();
        float2* t = a;
        a = b;
        b = t;
        ns *= r;
    }
    return a;
}
