"""conv1d on (B, C, L) signals, checked against the float64 oracle through a 1-row 2-D view."""
import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2

import pyconv


def reference_1d(x, w, stride, padding, dilation):
    return conv2d_reference(x[:, :, None, :], w[:, :, None, :], (1, stride), (0, padding), (1, dilation))[:, :, 0, :]


@pytest.mark.parametrize("variant", [v.name for v in pyconv.variant_info()])
@pytest.mark.parametrize("B, C, L, M, K, stride, padding, dilation", [
    (3, 2, 100, 5, 7, 1, "same", 1),
    (1, 1, 37, 3, 5, 2, 2, 1),
    (2, 4, 64, 6, 3, 1, "same", 3),
    (2, 3, 50, 4, 4, 3, 0, 2),
])
def test_conv1d_matches_oracle(variant, B, C, L, M, K, stride, padding, dilation, rng):
    info = {v.name: v for v in pyconv.variant_info()}[variant]
    if not info.available:
        pytest.skip(f"{variant} unavailable here: {info.reason}")
    x = rng.uniform(-1, 1, (B, C, L)).astype(np.float32)
    w = rng.uniform(-1, 1, (M, C, K)).astype(np.float32)
    pad = dilation * (K - 1) // 2 if padding == "same" else padding
    ref = reference_1d(x, w, stride, pad, dilation)
    y = pyconv.conv1d(x, w, stride=stride, padding=padding, dilation=dilation, variant=variant)
    assert y.shape == ref.shape
    if padding == "same":
        assert y.shape[2] == L
    assert rel_l2(y, ref) <= info.max_rel_error


def test_conv1d_same_needs_odd_kernel_and_stride_1():
    x = np.ones((1, 1, 10), np.float32)
    with pytest.raises(pyconv.ConvError, match="odd kernel size"):
        pyconv.conv1d(x, np.ones((1, 1, 4), np.float32), padding="same")
    with pytest.raises(pyconv.ConvError, match="stride 1"):
        pyconv.conv1d(x, np.ones((1, 1, 3), np.float32), padding="same", stride=2)
    with pytest.raises(pyconv.ConvError, match="must have 3 dimensions"):
        pyconv.conv1d(np.ones((1, 10), np.float32), np.ones((1, 1, 3), np.float32))
    with pytest.raises(pyconv.ConvError, match="padding must be an int or 'same'"):
        pyconv.conv1d(x, np.ones((1, 1, 3), np.float32), padding="valid")


def test_conv1d_into_out(rng):
    x = rng.uniform(-1, 1, (2, 3, 20)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 5)).astype(np.float32)
    out = np.full((2, 4, 16), np.nan, np.float32)
    assert pyconv.conv1d(x, w, variant="cpu", out=out) is out
    assert rel_l2(out, reference_1d(x, w, 1, 0, 1)) <= 1e-5
