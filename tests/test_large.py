"""Batches whose x and y pass 2^31 elements: the dispatcher splits them into launches that each fit
int32 indexing (at most 2^30 elements each), so every variant handles them. Checked on images around the split points."""
import numpy as np
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import _lib

H = W = 32                     # one image: 1024 input elements, 2048 output elements (M=2, 3x3, pad 1)
B = (1 << 21) + 3              # x: 2.15e9 elements, y: 4.3e9 elements (8.6 GB and 17.2 GB)
BLOCK = 4096                   # distinct random images, repeated through the batch


def fill_device(dst, block: np.ndarray, total_bytes: int):
    """Repeats a host block through device memory (no 8 GB host array needed)."""
    f, l = _lib.ffi(), _lib.lib()
    for offset in range(0, total_bytes, block.nbytes):
        n = min(block.nbytes, total_bytes - offset)
        _lib.check(l.conv_memcpy_h2d(f.cast("void*", dst.ptr + offset), f.cast("void*", block.ctypes.data), n, f.NULL))
    _lib.check(l.conv_stream_synchronize(f.NULL))


def read_images(y, first: int, count: int, per_image: int) -> np.ndarray:
    f, l = _lib.ffi(), _lib.lib()
    out = np.empty(count * per_image, np.float32)
    _lib.check(l.conv_memcpy_d2h(f.cast("void*", out.ctypes.data), f.cast("void*", y.ptr + first * per_image * 4),
                                 out.nbytes, f.NULL))
    _lib.check(l.conv_stream_synchronize(f.NULL))
    return out


@requires_gpu
@pytest.mark.parametrize("variant", ["direct", "auto"])
def test_batch_past_2_pow_31_elements(variant, rng):
    free, _ = pyconv.mem_info()
    need = B * H * W * 4 * 3
    if free < need + (1 << 30):
        pytest.skip(f"needs {need} bytes of GPU memory, {free} free")
    block = rng.uniform(-1, 1, (BLOCK, 1, H, W)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 1, 3, 3)).astype(np.float32)
    x = pyconv.DeviceArray((B, 1, H, W))
    fill_device(x, block, x.nbytes)
    y = pyconv.DeviceArray((B, 2, H, W))
    y.fill_bytes(0xFF)
    pyconv.conv2d(x, w, padding=1, variant=variant, out=y)
    per_image = 2 * H * W
    # Launches hold at most 2^30 elements (image 2^19 of y starts the second one) and y passes 2^31
    # at image 2^20: check around both, and the first and last images.
    for first in (0, (1 << 19) - 2, (1 << 20) - 2, B - 3):
        got = read_images(y, first, 3, per_image).reshape(3, 2, H, W)
        images = np.stack([block[(first + i) % BLOCK] for i in range(3)])
        ref = conv2d_reference(images, w, (1, 1), (1, 1), (1, 1))
        assert not np.isnan(got).any()
        assert rel_l2(got, ref) <= 1e-5
