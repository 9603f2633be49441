"""The demo's device ops of libconv (include/conv_ops.h) on raw device pointers:
both enqueue on `stream` (a cffi stream handle; None: the legacy default stream) on the current device
and never synchronise the host."""
from __future__ import annotations

from .._lib import check, ffi, lib
from .._problem import DTYPES


def _handle(stream):
    return ffi().NULL if stream is None else stream


def resize_bilinear_u8(images: int, n: int, in_hw: tuple, y: int, out_hw: tuple, y_dtype: str, stream) -> None:
    """y (n, 1, out_h, out_w) in y_dtype = bilinear resize of uint8 images (n, in_h, in_w) / 255,
    bit for bit pyconv.lenet.data.resize in float32."""
    f = ffi()
    check(lib().conv_resize_bilinear_u8(f.cast("void*", images), n, in_hw[0], in_hw[1], f.cast("void*", y),
                                        out_hw[0], out_hw[1], DTYPES[y_dtype], _handle(stream)))


def softmax_argmax(logits: int, n: int, k: int, probabilities: int, classes: int, stream) -> None:
    """probabilities (n, k) float32 and classes (n,) int32 of fp32 logits (n, k); a 0 pointer: not wanted."""
    f = ffi()
    check(lib().conv_softmax_argmax(f.cast("void*", logits), n, k, f.cast("void*", probabilities),
                                    f.cast("void*", classes), _handle(stream)))
