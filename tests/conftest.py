import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # the oracle module beside the tests

import pyconv  # noqa: E402


def _gpu_reason() -> str:
    try:
        if pyconv.device_count() > 0:
            return ""
    except pyconv.LibraryNotFoundError as exc:
        return f"libconv not loadable: {exc}"
    import pyconv._lib as _lib
    built = _lib.lib().conv_built_with_cuda()
    return "no CUDA device on this machine" if built else "libconv was built without CUDA"


GPU_SKIP_REASON = _gpu_reason()
requires_gpu = pytest.mark.skipif(bool(GPU_SKIP_REASON), reason=GPU_SKIP_REASON or "GPU present")


@pytest.fixture
def rng(request):
    """Fresh random data every run; the seed is printed on failure so a run can be repeated."""
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


# Variants that compute one filter shape only, a limit of their own (winograd: F(2x2, 3x3), 3x3 filters
# at stride 1 and dilation 1). Tests that run every variant on one layer give these their own filter.
OWN_FILTER = {"winograd": dict(KH=3, KW=3, stride=(1, 1), dilation=(1, 1))}
# Variants that compute square output tiles of this edge through linear transforms (Winograd): their
# non-finite outputs are where the oracle's are, but an Inf may come out as NaN (+Inf and -Inf terms meet).
TILE_TRANSFORMS = {"winograd": 2}


# Variants of one problem family, a limit of their own: tests that run every variant on one 2-D layer
# leave them out (family_skip says why), the problem matrix gives them its cases in their family's form
# (as_family), and a test file of their own runs them through everything else.
OWN_FAMILY = {"depthwise_conv1d": "depthwise 1-D convolutions only (H = KH = 1, groups = C = M): "
                                  "tests/test_causal_conv1d.py runs it",
              "fft": "depthwise 2-D convolutions only (groups = C): tests/test_fft.py runs it"}
# Each family's core layer (x shape, w shape, Conv2dPlan keywords): Mamba's causal depthwise conv1d, RepLKNet's
# 31x31 depthwise layer.
FAMILY_CORE = {"depthwise_conv1d": ((2, 32, 1, 64), (32, 1, 1, 4), dict(padding="causal", groups=32)),
               "fft": ((2, 32, 56, 56), (32, 1, 31, 31), dict(padding=15, groups=32))}


def family_skip(name: str) -> None:
    if name in OWN_FAMILY:
        pytest.skip(f"{name} computes {OWN_FAMILY[name]}")


def filter_hw(name: str, default: tuple) -> tuple:
    """(KH, KW) for a test layer run on variant `name`: `default`, or the variant's only filter shape."""
    own = OWN_FILTER.get(name)
    return (own["KH"], own["KW"]) if own else default

