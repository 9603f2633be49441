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
