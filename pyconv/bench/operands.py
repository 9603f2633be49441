"""Operand sets for timing: enough (x, w, y) sets that cycling through them defeats the last-level
cache, so that a small shape is timed reading memory as it would in a network rather than re-reading
the cache ("cold"; first() gives one set, timed "hot" beside it); filled with random numbers in [-1, 1), never zeros (zeros hide unwritten outputs and can
run faster than real data).

Sets are in one dtype and layout (a comparison's: comparisons.py): NHWC activations with MKKC filters,
or NCHW with MCKK; arrays always have the logical shapes (B, C, H, W), (M, C/groups, KH, KW) and
(B, M, OH, OW). Kinds of array: NumPy on the host; on the GPU, PyTorch tensors when PyTorch is there
(it has bfloat16, fills on the device, and its CUDA graphs time every problem), else pyconv
DeviceArrays (fp32 NCHW: what conv2d_time takes).
"""
from __future__ import annotations

import copy
import math
import os

import numpy as np

from .. import device
from .._lib import ConvError
from .roofline import min_bytes
from .shapes import Shape

CACHE_FACTOR = 2   # the sets together are at least twice the cache: a set is gone by its next turn
MAX_SETS = 256     # past this (sets under 1/128 of the cache), a shape is timed warm, and its row says so
MEMORY_SHARE = 4   # the sets take at most 1/4 of the free memory: cuDNN and workspaces need room
_MEMORY_ORDER = (0, 2, 3, 1)  # NHWC / MKKC: the dims of a logical 4-D array in memory order


def set_count(shape: Shape, cache_bytes: int, free_bytes: int, dtype: str = "float32") -> int:
    """How many sets to cycle through for this shape."""
    one = min_bytes(shape, dtype)
    wanted = math.ceil(CACHE_FACTOR * cache_bytes / one)
    affordable = free_bytes // (MEMORY_SHARE * one)
    return max(1, min(wanted, MAX_SETS, affordable))


def free_bytes(on_device: bool) -> int:
    """Memory the sets may come out of: free device memory, or available host memory."""
    if on_device:
        return device.mem_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _host_random(shape, layout: str, dtype: str, rng) -> np.ndarray:
    if dtype == "bfloat16":
        raise ConvError("bfloat16 operands on the host: NumPy has no bfloat16 (time bf16 on the GPU)")
    memory = tuple(shape[d] for d in _MEMORY_ORDER) if layout == "NHWC" else tuple(shape)
    a = rng.random(math.prod(memory), dtype=np.float32).reshape(memory)
    a *= 2
    a -= 1
    a = a.astype(dtype, copy=False)
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


def _host_empty(shape, layout: str, dtype: str) -> np.ndarray:
    if layout == "NHWC":
        return np.empty(tuple(shape[d] for d in _MEMORY_ORDER), dtype).transpose(0, 3, 1, 2)
    return np.empty(shape, dtype)


def _torch_arrays(torch, shape, layout: str, dtype: str, n: int, fill: bool) -> list:
    memory_format = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    arrays = [torch.empty(shape, dtype=getattr(torch, dtype), device="cuda", memory_format=memory_format)
              for _ in range(n)]
    for a in arrays if fill else ():
        a.uniform_(-1, 1)
    return arrays


class OperandSets:
    """n sets of x, w (random in [-1, 1)) and y in `dtype` and `layout`, on the host or the device.

    torch: the imported torch module (device sets are then tensors) or None (DeviceArrays)."""

    def __init__(self, shape: Shape, n: int, on_device: bool, cache_bytes: int, rng=None, *,
                 dtype: str = "float32", layout: str = "NCHW", torch=None):
        rng = rng or np.random.default_rng()
        self.n = n
        self.on_device = on_device
        self.dtype, self.layout = dtype, layout
        self.torch = torch if on_device else None
        self.cache_resident = n * min_bytes(shape, dtype) < cache_bytes  # MAX_SETS could not defeat the cache
        shapes = (shape.x_shape, shape.w_shape, shape.y_shape)
        if on_device and torch is not None:
            self.xs, self.ws, self.ys = (_torch_arrays(torch, s, layout, dtype, n, fill) for s, fill in
                                         zip(shapes, (True, True, False)))
        elif on_device:
            if (dtype, layout) != ("float32", "NCHW"):
                raise ConvError(f"{dtype} {layout} operands on the GPU need PyTorch (pip install torch); "
                                "without it the bench times fp32 NCHW problems only")
            # One random host set, uploaded n times: the values only have to be non-zero and varied.
            x, w = (_host_random(s, layout, dtype, rng) for s in shapes[:2])
            self.xs = [device.DeviceArray.from_host(x) for _ in range(n)]
            self.ws = [device.DeviceArray.from_host(w) for _ in range(n)]
            self.ys = [device.DeviceArray(shape.y_shape) for _ in range(n)]
        else:
            self.xs, self.ws = ([_host_random(s, layout, dtype, rng) for _ in range(n)] for s in shapes[:2])
            self.ys = [_host_empty(shape.y_shape, layout, dtype) for _ in range(n)]

    def first(self) -> "OperandSets":
        """Set 0 alone, sharing its arrays: timed over and over, its operands stay in the cache ("hot", as a
        harness that times one set back to back sees them)."""
        hot = copy.copy(self)
        hot.n = 1
        hot.xs, hot.ws, hot.ys = self.xs[:1], self.ws[:1], self.ys[:1]
        hot.cache_resident = True
        return hot

    def pointers(self, i: int) -> tuple:
        """(x, w, y) of set i as integer addresses."""
        return tuple(address(a[i]) for a in (self.xs, self.ws, self.ys))


def address(a) -> int:
    """The address of an array's first element in memory order (NumPy, torch tensor, DeviceArray)."""
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0]
    return a.data_ptr() if hasattr(a, "data_ptr") else a.ptr
