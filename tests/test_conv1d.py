"""conv1d on (B, C, L) signals, checked against the float64 oracle through a 1-row 2-D view: PyTorch's
argument order (x, w, bias, stride, padding, dilation, groups), 'same' (odd and even kernels, PyTorch's
split) and 'valid', groups, epilogues pooled along L, fp16, out=."""
import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2

import pyconv

INFOS = {v.name: v for v in pyconv.variant_info()}


def reference_1d(x, w, stride=1, padding=0, dilation=1, *, padding_extra=0, **kwargs):
    y = conv2d_reference(x[:, :, None, :], w[:, :, None, :], (1, stride), (0, padding), (1, dilation),
                         padding_extra=(0, padding_extra), **kwargs)
    return y[:, :, 0, :]


def same_padding(K, dilation):
    """PyTorch's 'same': total d*(K-1), the larger half after."""
    total = dilation * (K - 1)
    return total // 2, total % 2


@pytest.mark.parametrize("variant", list(INFOS))
@pytest.mark.parametrize("B, C, L, M, K, stride, padding, dilation", [
    (3, 2, 100, 5, 7, 1, "same", 1),
    (1, 1, 37, 3, 5, 2, 2, 1),
    (2, 4, 64, 6, 3, 1, "same", 3),
    (2, 3, 50, 4, 4, 3, 0, 2),
    (2, 3, 40, 4, 4, 1, "same", 1),
    (1, 2, 33, 3, 6, 1, "valid", 2),
])
def test_conv1d_matches_oracle(variant, B, C, L, M, K, stride, padding, dilation, rng):
    info = INFOS[variant]
    if not info.available:
        pytest.skip(f"{variant} unavailable here: {info.reason}")
    x = rng.uniform(-1, 1, (B, C, L)).astype(np.float32)
    w = rng.uniform(-1, 1, (M, C, K)).astype(np.float32)
    if padding == "same":
        pad, extra = same_padding(K, dilation)
    else:
        pad, extra = (0 if padding == "valid" else padding), 0
    ref = reference_1d(x, w, stride, pad, dilation, padding_extra=extra)
    try:
        y = pyconv.conv1d(x, w, stride=stride, padding=padding, dilation=dilation, variant=variant,
                          precision="exact" if info.exact else "fast")
    except pyconv.ConvUnsupportedError as exc:
        assert str(exc).strip()
        pytest.skip(f"{variant}: {exc}")
    assert isinstance(y, np.ndarray) and y.shape == ref.shape
    if padding == "same":
        assert y.shape[2] == L
    assert rel_l2(y, ref) <= info.max_rel_error


@pytest.mark.parametrize("variant", ["cpu", "auto"])
def test_conv1d_bias_groups_positionally(variant, rng):
    x = rng.uniform(-1, 1, (2, 6, 30)).astype(np.float32)
    w = rng.uniform(-1, 1, (9, 2, 5)).astype(np.float32)
    b = rng.uniform(-1, 1, 9).astype(np.float32)
    y = pyconv.conv1d(x, w, b, 2, 1, 1, 3, variant=variant)
    ref = reference_1d(x, w, 2, 1, 1, groups=3, bias=b)
    assert y.shape == ref.shape and rel_l2(y, ref) <= 1e-5


@pytest.mark.parametrize("variant", ["cpu", "auto"])
def test_conv1d_epilogues_pool_along_L(variant, rng):
    x = rng.uniform(-1, 1, (2, 3, 41)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 5)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, 4).astype(np.float32)
    y = pyconv.conv1d(x, w, b, epilogue="relu", variant=variant)
    assert rel_l2(y, reference_1d(x, w, bias=b, epilogue="relu")) <= 1e-5
    for pool, kwargs in ((pyconv.ReluMaxPool(2), dict(pool=(1, 2))),
                         (pyconv.ReluMaxPool(3, stride=2, ceil_mode=True),
                          dict(pool=(1, 3), pool_stride=(1, 2), pool_ceil=True)),
                         (pyconv.ReluMaxPool((4,)), dict(pool=(1, 4)))):
        y = pyconv.conv1d(x, w, b, epilogue=pool, variant=variant)
        ref = reference_1d(x, w, bias=b, epilogue="relu_maxpool", **kwargs)
        assert y.shape == ref.shape and rel_l2(y, ref) <= 1e-5


def test_conv1d_float16(rng):
    x = rng.uniform(-1, 1, (2, 3, 50)).astype(np.float16)
    w = rng.uniform(-1, 1, (4, 3, 5)).astype(np.float16)
    y = pyconv.conv1d(x, w, padding="same")
    assert y.dtype == np.float16 and y.shape == (2, 4, 50)
    assert rel_l2(y, reference_1d(x, w, 1, 2)) <= 1e-3


def test_conv1d_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.uniform(-1, 1, (2, 4, 37)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 2, 4)).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    for kwargs in (dict(padding="same", groups=2), dict(padding="valid", dilation=2, groups=2),
                   dict(stride=3, padding=2, groups=2)):
        expected = torch.nn.functional.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                              **kwargs).numpy()
        y = pyconv.conv1d(x, w, b, **kwargs)
        assert y.shape == expected.shape and rel_l2(y, expected) <= 1e-5


def test_conv1d_into_out(rng):
    x = rng.uniform(-1, 1, (2, 3, 20)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 5)).astype(np.float32)
    out = np.full((2, 4, 16), np.nan, np.float32)
    assert pyconv.conv1d(x, w, variant="cpu", out=out) is out
    assert rel_l2(out, reference_1d(x, w)) <= 1e-5
    buffer = np.zeros(2 * 3 * 20 + 8, np.float32)
    xs = buffer[:x.size].reshape(x.shape)
    xs[...] = x
    with pytest.raises(pyconv.ConvError, match=r"out overlaps x"):
        pyconv.conv1d(xs, np.ones((3, 3, 1), np.float32), out=buffer[8:8 + x.size].reshape(x.shape))


def test_conv1d_strided_out_is_refused_not_written_to_a_copy(rng):
    x = rng.uniform(-1, 1, (2, 3, 20)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 5)).astype(np.float32)
    out = np.zeros((2, 4, 32), np.float32)[:, :, ::2]
    with pytest.raises(pyconv.ConvError, match=r"out must be dense"):
        pyconv.conv1d(x, w, out=out)
    assert rel_l2(pyconv.conv1d(x, w), reference_1d(x, w)) <= 1e-5
