"""Turning the caller's arrays into (pointer, shape, where) operands — the one place that checks
ndim, shape, dtype and contiguity before a pointer goes to libconv."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._lib import ConvError


@dataclass
class Operand:
    """A float32 C-contiguous array the library can read: host (NumPy) or device memory."""
    shape: tuple
    ptr: int
    on_device: bool
    keep: object  # the object owning the memory, kept alive for the call
    stream: int | None = None  # stream the producer asked consumers to wait on (CUDA array interface)

    def reshaped(self, shape) -> "Operand":
        return Operand(tuple(shape), self.ptr, self.on_device, self.keep, self.stream)


def _c_contiguous(shape, strides, itemsize) -> bool:
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def is_device_array(a) -> bool:
    return hasattr(a, "__cuda_array_interface__")


def as_operand(a, name: str, ndim: int, layout: str) -> Operand:
    """Checks and wraps `a`. NumPy input of another real dtype is converted to float32 and a
    non-contiguous NumPy array is copied (both documented); device arrays must already be float32
    and C-contiguous, since converting them would be a hidden device copy."""
    if is_device_array(a):
        iface = a.__cuda_array_interface__
        shape = tuple(int(n) for n in iface["shape"])
        if len(shape) != ndim:
            raise ConvError(f"{name} must have {ndim} dimensions {layout}, got shape {shape}")
        if np.dtype(iface["typestr"]) != np.float32:
            raise ConvError(f"{name} must be float32 on the device, got {np.dtype(iface['typestr'])}; "
                            f"convert it first (e.g. .float() in PyTorch, .astype('float32') in CuPy)")
        strides = iface.get("strides")
        if strides is not None and not _c_contiguous(shape, strides, 4):
            raise ConvError(f"{name} must be C-contiguous on the device, got strides {tuple(strides)}; "
                            f"make it contiguous first (e.g. .contiguous() or cupy.ascontiguousarray)")
        return Operand(shape, int(iface["data"][0]), True, a, iface.get("stream"))
    try:
        array = np.asarray(a)
    except Exception as exc:  # noqa: BLE001 - anything that is not array-like
        raise ConvError(f"{name} must be a NumPy array or a device array, got {type(a).__name__}") from exc
    if array.ndim != ndim:
        raise ConvError(f"{name} must have {ndim} dimensions {layout}, got shape {array.shape}")
    if array.dtype != np.float32:
        if array.dtype.kind not in "fiu":
            raise ConvError(f"{name} must hold real numbers (float32), got dtype {array.dtype}")
        array = array.astype(np.float32)
    array = np.ascontiguousarray(array)
    return Operand(array.shape, array.ctypes.data, False, array)


def host_output(out, shape, name="out") -> np.ndarray:
    """`out` checked as a float32 C-contiguous NumPy array of `shape`, or a new one."""
    if out is None:
        return np.empty(shape, np.float32)
    if not isinstance(out, np.ndarray) or out.dtype != np.float32 or not out.flags.c_contiguous \
            or out.shape != tuple(shape) or not out.flags.writeable:
        raise ConvError(f"{name} must be a writeable C-contiguous float32 NumPy array of shape "
                        f"{tuple(shape)}, got {type(out).__name__} "
                        f"{getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}")
    return out
