"""A call whose new host memory (the result, dense copies of strided views, host workspace) exceeds what
the machine or its cgroup has available is refused before it allocates, with ConvOutOfMemoryError
naming the bytes. Linux hands out such memory anyway and kills the process when it is written: a
zero-stride view of 12 GB ran for 69 s and was killed."""
import math

import numpy as np
import pytest

import pyconv
from pyconv import _memory
from oracle import conv2d_reference

PLANE = (4096, 4096)  # 64 MiB of float32 per image


def _images_beyond(available: int) -> int:
    """A batch of PLANE images whose copy and result need about twice `available` bytes."""
    return max(2, math.ceil(available / (math.prod(PLANE) * 4)) + 1)


def test_a_zero_stride_view_larger_than_memory_is_refused_before_it_is_copied():
    available = _memory.host_available()
    if available is None:
        pytest.skip("this system does not say how much memory is available (/proc/meminfo)")
    B = _images_beyond(available)
    x = np.broadcast_to(np.float32(1), (B, 1) + PLANE)  # no memory of its own
    w = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(pyconv.ConvOutOfMemoryError, match=r"needs \d+ bytes .* of new host memory"):
        pyconv.conv2d(x, w, variant="cpu")
    plan = pyconv.Conv2dPlan(x.shape, w.shape, variant="cpu")
    with pytest.raises(pyconv.ConvOutOfMemoryError, match="dense copy of x"):
        plan.launch(x, w, np.empty((1, 1, 1, 1), np.float32))  # the copy is refused before y is looked at


def test_the_limit_is_what_is_available(monkeypatch, rng):
    """With 1 GiB available, a 1.5 GiB result is refused and a 0.5 GiB one runs."""
    monkeypatch.setattr(_memory, "host_available", lambda: 1 << 30)
    w = rng.standard_normal((2, 1, 1, 1)).astype(np.float32)
    big = np.broadcast_to(np.float32(0.5), (1, 1, 16384, 12288))  # result: 2 maps x 768 MiB
    with pytest.raises(pyconv.ConvOutOfMemoryError, match=str(2 * 16384 * 12288 * 4 + 16384 * 12288 * 4)):
        pyconv.conv2d(big, w, variant="cpu")
    x = rng.standard_normal((2, 1, 64, 64)).astype(np.float32)
    np.testing.assert_allclose(pyconv.conv2d(x, w, variant="cpu"), conv2d_reference(x, w), rtol=1e-5, atol=1e-6)


def test_host_available_reads_a_number():
    available = _memory.host_available()
    assert available is None or available > 0
