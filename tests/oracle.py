"""The independent float64 oracle: direct definition of the convolution in NumPy, sharing no code
with libconv. (cross-correlation, zero padding on both sides, NCHW x, MCKK w)"""
import numpy as np


def conv2d_reference(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    B, C, H, W = x.shape
    M, _, KH, KW = w.shape
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = np.zeros((B, M, OH, OW))
    for kh in range(KH):
        for kw in range(KW):
            # every output position's input sample for this filter tap: (B, C, OH, OW)
            patch = xp[:, :, kh * dh: kh * dh + sh * (OH - 1) + 1: sh, kw * dw: kw * dw + sw * (OW - 1) + 1: sw]
            y += np.einsum("bchw,mc->bmhw", patch, w[:, :, kh, kw])
    return y


def rel_l2(actual, expected) -> float:
    expected = np.asarray(expected, np.float64)
    return float(np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected))
