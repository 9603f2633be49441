// conv_shape.cuh — the problem's geometry in the int32 that kernels index with, filled in one place.
// Kernel families embed it in their own shape struct (ConvGemmShape, regblock_shape, mma_shape,
// rowwin_shape) beside the fields only they need. Every value fits int32: the dispatcher validates
// the problem and splits the batch so that one launch's x, y and w each have < 2^31 elements.
#pragma once

#include "cuda_util.cuh"

struct ConvShape32 {
    int C, H, W, M, KH, KW;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int OH, OW;  // the convolution's output (before any pooling)
};

static inline ConvShape32 conv_shape32(const conv_problem* p) {
    ConvShape32 s;
    s.C = (int)p->C; s.H = (int)p->H; s.W = (int)p->W; s.M = (int)p->M; s.KH = (int)p->KH; s.KW = (int)p->KW;
    s.stride_h = (int)p->stride_h; s.stride_w = (int)p->stride_w;
    s.pad_h = (int)p->pad_h; s.pad_w = (int)p->pad_w;
    s.dil_h = (int)p->dilation_h; s.dil_w = (int)p->dilation_w;
    s.OH = (int)conv_out_h(p); s.OW = (int)conv_out_w(p);
    return s;
}
