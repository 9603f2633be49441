"""The independent float64 oracle: the convolution and its epilogue by direct definition in NumPy,
sharing no code with libconv. It works in NCHW x / MCKK w / NCHW y; callers transpose other layouts,
and give half-precision data as the float64 of its exact values.

conv2d_reference: cross-correlation as PyTorch's conv2d (zero padding, groups), with optional extra
zeros after the last row/column (padding='same' with an even total), bias, and the epilogues ReLU and
ReLU + max-pool (PyTorch's max_pool2d: no padding, floor or ceil mode, NaN propagating)."""
import numpy as np


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _conv_one_group(xp, w, stride, dilation, OH, OW):
    """xp: padded input (B, Cg, Hp, Wp), w: (Mg, Cg, KH, KW) -> (B, Mg, OH, OW)."""
    (sh, sw), (dh, dw) = stride, dilation
    B = xp.shape[0]
    M, _, KH, KW = w.shape
    y = np.zeros((B, M, OH, OW))
    for kh in range(KH):
        for kw in range(KW):
            # every output position's input sample for this filter tap: (B, Cg, OH, OW)
            patch = xp[:, :, kh * dh: kh * dh + sh * (OH - 1) + 1: sh, kw * dw: kw * dw + sw * (OW - 1) + 1: sw]
            y += np.einsum("bchw,mc->bmhw", patch, w[:, :, kh, kw])
    return y


def pooled_size(size, window, stride, ceil_mode):
    """PyTorch's max_pool2d output size (no padding): in ceil mode a last window counts when it
    starts inside the input."""
    out = (size - window + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size:
        out -= 1
    return out


def relu_reference(y):
    """max(y, 0) with NaN kept."""
    return np.where(y < 0, 0.0, y).astype(y.dtype)


def max_pool_reference(y, window=(2, 2), stride=None, ceil_mode=False):
    """max over (pool_h, pool_w) windows of (B, M, OH, OW), NaN propagating; a partial last window
    (ceil mode) takes the max of its valid part. Keeps y's dtype."""
    (ph, pw) = _pair(window)
    (sh, sw) = _pair(stride if stride is not None else window)
    OH, OW = y.shape[-2:]
    YH, YW = pooled_size(OH, ph, sh, ceil_mode), pooled_size(OW, pw, sw, ceil_mode)
    # -inf beyond the edge never wins: every window starts inside, so it has a valid element.
    need_h, need_w = (YH - 1) * sh + ph, (YW - 1) * sw + pw
    padded = np.pad(y, ((0, 0), (0, 0), (0, max(0, need_h - OH)), (0, max(0, need_w - OW))),
                    constant_values=-np.inf)
    out = None
    for i in range(ph):
        for j in range(pw):
            tap = padded[:, :, i: i + sh * (YH - 1) + 1: sh, j: j + sw * (YW - 1) + 1: sw]
            out = tap.copy() if out is None else np.maximum(out, tap)  # np.maximum propagates NaN
    return out


def conv2d_reference(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), *, groups=1, bias=None,
                     padding_extra=(0, 0), epilogue="none", pool=(2, 2), pool_stride=None, pool_ceil=False):
    """y = epilogue(conv(x, w) + bias) in float64. x: (B, C, H, W), w: (M, C/groups, KH, KW), bias: (M,)
    or None; padding_extra: more (negative: fewer) zeros after the last row/column; epilogue: "none", "relu",
    "silu" (v / (1 + exp(-v))) or "relu_maxpool" (pool window, pool_stride (default: the window), pool_ceil)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    stride, padding, dilation, extra = _pair(stride), _pair(padding), _pair(dilation), _pair(padding_extra)
    (ph, pw), (eh, ew), (dh, dw), (sh, sw) = padding, extra, dilation, stride
    B, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    assert C == Cg * groups and M % groups == 0, "groups must divide C and M, w holding C/groups channels"
    OH = (H + 2 * ph + eh - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw + ew - dw * (KW - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew)))
    Mg = M // groups
    y = np.concatenate([_conv_one_group(xp[:, g * Cg:(g + 1) * Cg], w[g * Mg:(g + 1) * Mg], stride, dilation, OH, OW)
                        for g in range(groups)], axis=1)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)[None, :, None, None]
    if epilogue in ("relu", "relu_maxpool"):
        y = relu_reference(y)
    if epilogue == "silu":
        with np.errstate(over="ignore", invalid="ignore"):
            y = y / (1.0 + np.exp(-y))
    if epilogue == "relu_maxpool":
        y = max_pool_reference(y, pool, pool_stride, pool_ceil)
    elif epilogue not in ("none", "relu", "silu"):
        raise ValueError(f"unknown epilogue {epilogue!r}")
    return y


def rel_l2(actual, expected) -> float:
    expected = np.asarray(expected, np.float64)
    return float(np.linalg.norm(np.asarray(actual, np.float64) - expected) / np.linalg.norm(expected))
