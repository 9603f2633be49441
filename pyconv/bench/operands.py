"""Operand sets for timing: enough (x, w, y) sets that cycling through them defeats the last-level
cache, so that a small shape is timed reading memory as it would in a network rather than re-reading
the cache; filled with fresh random numbers, never zeros (zeros hide unwritten outputs and can run
faster than real data).
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import device
from .._lib import ffi
from .roofline import min_bytes
from .shapes import Shape

CACHE_FACTOR = 2   # the sets together are at least twice the cache: a set is gone by its next turn
MAX_SETS = 256     # past this (sets under 1/128 of the cache), a shape is timed warm, and its row says so
MEMORY_SHARE = 4   # the sets take at most 1/4 of the free memory: cuDNN and workspaces need room


def set_count(shape: Shape, cache_bytes: int, free_bytes: int) -> int:
    """How many sets to cycle through for this shape."""
    one = min_bytes(shape)
    wanted = math.ceil(CACHE_FACTOR * cache_bytes / one)
    affordable = free_bytes // (MEMORY_SHARE * one)
    return max(1, min(wanted, MAX_SETS, affordable))


def free_bytes(on_device: bool) -> int:
    """Memory the sets may come out of: free device memory, or available host memory."""
    if on_device:
        return device.mem_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _random(shape, rng) -> np.ndarray:
    a = rng.random(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a *= 2
    a -= 1
    return a


class OperandSets:
    """n sets of x, w (random in [-1, 1)) and y, on the device or on the host."""

    def __init__(self, shape: Shape, n: int, on_device: bool, cache_bytes: int, rng=None):
        rng = rng or np.random.default_rng()
        self.n = n
        self.on_device = on_device
        self.cache_resident = n * min_bytes(shape) < cache_bytes  # MAX_SETS could not defeat the cache
        if on_device:
            self.xs = [device.DeviceArray.from_host(_random(shape.x_shape, rng)) for _ in range(n)]
            self.ws = [device.DeviceArray.from_host(_random(shape.w_shape, rng)) for _ in range(n)]
            self.ys = [device.DeviceArray(shape.y_shape) for _ in range(n)]
        else:
            self.xs = [_random(shape.x_shape, rng) for _ in range(n)]
            self.ws = [_random(shape.w_shape, rng) for _ in range(n)]
            self.ys = [np.empty(shape.y_shape, np.float32) for _ in range(n)]

    def pointers(self, i: int) -> tuple:
        """(x, w, y) of set i as cffi float pointers."""
        return tuple(ffi().cast("float*", _address(a[i])) for a in (self.xs, self.ws, self.ys))

    def pointer_arrays(self) -> tuple:
        """(xs, ws, ys) as cffi arrays of n float pointers, for conv2d_time."""
        return tuple(ffi().new("float*[]", [ffi().cast("float*", _address(a)) for a in arrays])
                     for arrays in (self.xs, self.ws, self.ys))


def _address(a) -> int:
    return a.ctypes.data if isinstance(a, np.ndarray) else a.ptr
