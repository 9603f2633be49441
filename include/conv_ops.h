/* conv_ops.h — the non-convolution steps of a network on the device, as the LeNet demo
 * (pyconv.lenet) runs them: an input resize and a softmax + argmax (cuda/ops/). Not part of the
 * convolution ABI (conv.h, which this file includes for the status codes and the dtypes). Fused conv
 * layers need nothing here: they are a conv_problem's bias flag and CONV_EPILOGUE_RELU_MAXPOOL on the
 * variants that declare them.
 *
 * Device pointers on the current device; each op runs on `stream` (NULL: the legacy default stream)
 * and never syncs the host. Every function returns a conv_status; conv_last_error() has the detail.
 *
 * This file is parsed as written by cffi: plain declarations only, no macros in them.
 */
#ifndef CONV_OPS_H
#define CONV_OPS_H

#include "conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bilinear resize of n uint8 images (n, in_h, in_w), contiguous, to (n, 1, out_h, out_w) contiguous in
 * y_dtype (CONV_F32 or CONV_F16), value = byte / 255, align_corners=False, no antialias (PyTorch's
 * F.interpolate(mode="bilinear") convention; source coordinate clamped at 0, upper tap at the last
 * pixel). Computed in float64 without FMA contraction and rounded once, so that the f32 result is
 * bit-identical to pyconv.lenet.data.resize (NumPy, float64). Device pointers on the current
 * device; runs on `stream`; never syncs. */
int conv_resize_bilinear_u8(const void* x, int64_t n, int in_h, int in_w, void* y, int out_h, int out_w,
                            int y_dtype, void* stream);
/* Row-wise softmax and argmax of fp32 logits (n, k), k <= 1024: probabilities (n, k) fp32 (NULL: not
 * wanted) and classes (n) int32 (NULL: not wanted; ties -> lowest index, as NumPy argmax). */
int conv_softmax_argmax(const void* logits, int64_t n, int k, void* probabilities, void* classes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* CONV_OPS_H */
