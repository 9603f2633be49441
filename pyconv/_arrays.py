"""The caller's arrays as operands the library can read or write — the one place that checks kind,
device, dtype, shape, layout, writeability and overlap before a pointer goes to libconv — and new
outputs of the caller's kind.

Accepted: NumPy arrays (host), PyTorch tensors (CPU or CUDA, parameters included: read through
data_ptr(), never through __cuda_array_interface__, which torch refuses for tensors that require
grad), anything with __cuda_array_interface__ (CuPy, Numba, pyconv.DeviceArray) and DLPack producers
(__dlpack__ / __dlpack_device__). 4-D tensors may be NCHW (C-contiguous) or NHWC (channels_last);
weights MCKK or MKKC the same way.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ._lib import ConvError, check, ffi, lib

_NUMPY_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16"}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
# Memory order of the dimensions, outermost first.
_ORDERS = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1)}


@dataclass
class Operand:
    """An array the library can use in place."""
    shape: tuple             # logical dims: (B, C, H, W) / (M, C/groups, KH, KW) / (B, C, L) ...
    ptr: int
    dtype: str               # "float32", "float16", "bfloat16"
    layout: str              # "NCHW" (dense C order) or "NHWC" (channels last)
    device: int              # CUDA device, -1 for host memory
    kind: str                # "numpy", "torch", "cai", "dlpack"
    keep: object             # the object owning the memory, alive for the call
    stream: Optional[int] = None  # a stream the producer asks consumers to wait on (CUDA array interface v3)
    readonly: bool = False
    strided: bool = False    # a NumPy view in neither layout: copied by dense() once the problem is valid

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]

    def reshaped(self, shape) -> "Operand":
        """The same memory seen with another shape (a strided NumPy view stays a view, uncopied)."""
        keep = self.keep.reshape(shape) if self.strided else self.keep
        return Operand(tuple(shape), self.ptr, self.dtype, self.layout, self.device, self.kind, keep, self.stream,
                       self.readonly, self.strided)

    def dense(self, layout: str = "NCHW") -> "Operand":
        """This operand, with a strided NumPy view copied dense in `layout` order (after the sizes were
        checked: a zero-stride view of a huge batch must be refused before it is copied)."""
        if not self.strided:
            return self
        if layout == "NHWC" and len(self.shape) == 4:
            a = np.ascontiguousarray(self.keep.transpose(_ORDERS["NHWC"]))
            return Operand(self.shape, a.ctypes.data, self.dtype, "NHWC", -1, "numpy", a.transpose(0, 3, 1, 2))
        a = np.ascontiguousarray(self.keep)
        return Operand(self.shape, a.ctypes.data, self.dtype, "NCHW", -1, "numpy", a)


def _dense_in(shape, strides, order) -> bool:
    """strides (in elements) are those of a dense array whose dims lie in memory in `order` (an empty array is:
    NumPy gives it zero strides, e.g. a K = 1 decoding state of shape (B, D, 0))."""
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def layout_of(shape, strides, name: str) -> str:
    """NCHW when C-contiguous (preferred where both match), NHWC when channels-last dense."""
    if strides is None or _dense_in(shape, strides, tuple(range(len(shape)))):
        return "NCHW"
    if len(shape) == 4 and _dense_in(shape, strides, _ORDERS["NHWC"]):
        return "NHWC"
    raise ConvError(f"{name} must be dense in NCHW (C-contiguous) or NHWC (channels_last) order, got shape "
                    f"{tuple(shape)} with strides {tuple(strides)} (in elements); make it contiguous first "
                    f"(.contiguous() / .contiguous(memory_format=torch.channels_last) / np.ascontiguousarray)")


def layouts_coincide(shape) -> bool:
    """NCHW and NHWC order the memory of this 4-D shape the same way (C == 1, or H == W == 1), so an
    array of it is in both layouts at once (layout_of reports NCHW)."""
    return len(shape) == 4 and (shape[1] == 1 or shape[2] * shape[3] == 1)


def is_torch(a) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def _is_dlpack_device_array(a) -> bool:
    """A DLPack producer whose memory is CUDA memory (NumPy's own DLPack export is host memory)."""
    return (hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray)
            and a.__dlpack_device__()[0] in (2, 3, 13))  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


def pointer_device(ptr: int) -> int:
    """The CUDA device of a pointer, -1 for host memory."""
    device = ffi().new("int*")
    check(lib().conv_pointer_device(ffi().cast("void*", ptr), device))
    return device[0]


_torch_dtypes: dict = {}  # torch dtype object -> our name, filled on first use
_torch_dtypes_by_name: dict = {}  # and back


def _torch_dtype(dtype) -> Optional[str]:
    if not _torch_dtypes:
        torch = sys.modules["torch"]
        _torch_dtypes.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"})
        _torch_dtypes_by_name.update({name: t for t, name in _torch_dtypes.items()})
    return _torch_dtypes.get(dtype)


def _torch_operand(a, name: str) -> Operand:
    # The per-call path of every torch call: C++-side queries only (is_contiguous, get_device).
    dtype = _torch_dtype(a.dtype)
    if dtype is None:
        raise ConvError(f"{name} has dtype {a.dtype}; pyconv takes float32, float16 or bfloat16 tensors "
                        f"(convert with .float(), .half() or .bfloat16())")
    if a.is_contiguous():
        layout = "NCHW"
    else:
        layout = layout_of(tuple(a.shape), a.stride(), name)
    device = a.get_device()  # -1 on the CPU
    if device < 0 and not a.is_cpu:
        raise ConvError(f"{name} is on device {a.device}; pyconv takes CPU or CUDA tensors")
    return Operand(tuple(a.shape), a.data_ptr(), dtype, layout, device, "torch", a)


def _cai_operand(a, name: str) -> Operand:
    iface = a.__cuda_array_interface__
    shape = tuple(int(n) for n in iface["shape"])
    typestr = np.dtype(iface["typestr"])
    dtype = _NUMPY_DTYPES.get(typestr)
    if dtype is None:
        raise ConvError(f"{name} has dtype {typestr} on the device; pyconv takes float32 or float16 here "
                        f"(bfloat16 through PyTorch tensors or DLPack)")
    strides = iface.get("strides")
    if strides is not None:
        strides = tuple(s // typestr.itemsize for s in strides)
    layout = layout_of(shape, strides, name)
    ptr, readonly = iface["data"]
    stream = iface.get("stream")
    device = pointer_device(ptr) if ptr else -1
    if ptr and device < 0:
        raise ConvError(f"{name} exposes __cuda_array_interface__ but its pointer is host memory")
    return Operand(shape, int(ptr), dtype, layout, device, "cai", a, stream, bool(readonly))


def _numpy_operand(a, name: str) -> Operand:
    if not isinstance(a, np.ndarray):
        try:
            a = np.asarray(a)
        except Exception as exc:  # noqa: BLE001 - anything that is not array-like
            raise ConvError(f"{name} must be an array (NumPy, PyTorch, CuPy, ...), got {type(a).__name__}") from exc
    dtype = _NUMPY_DTYPES.get(a.dtype)
    if dtype is None:
        raise ConvError(f"{name} has dtype {a.dtype}; pyconv takes float32 or float16 NumPy arrays: convert "
                        f"it first (e.g. {name}.astype(np.float32)) — nothing is cast silently")
    strides = tuple(s // a.itemsize for s in a.strides) if a.itemsize and all(s % a.itemsize == 0 for s in a.strides) else None
    try:
        layout = layout_of(a.shape, strides, name) if strides is not None else None
    except ConvError:
        layout = None
    if layout is None:  # a strided view: copied on the host later (cheap and visible, unlike a device copy)
        return Operand(tuple(a.shape), 0, dtype, "NCHW", -1, "numpy", a, None, True, strided=True)
    return Operand(tuple(a.shape), a.ctypes.data, dtype, layout, -1, "numpy", a, None, not a.flags.writeable)


def as_operand(a, name: str, ndim: int, dims: str) -> Operand:
    """Checks and wraps `a` (ndim dimensions named by `dims`, e.g. "(B, C, H, W)")."""
    if a is None:
        raise ConvError(f"{name} is None; expected an array {dims}")
    if is_torch(a):
        op = _torch_operand(a, name)
    elif hasattr(a, "__cuda_array_interface__"):
        op = _cai_operand(a, name)
    elif _is_dlpack_device_array(a):
        op = _dlpack_operand(a, name)
    else:
        op = _numpy_operand(a, name)
    if len(op.shape) != ndim:
        raise ConvError(f"{name} must have {ndim} dimensions {dims}, got shape {op.shape}")
    return op


def _dlpack_operand(a, name: str) -> Operand:
    # Any DLPack producer is viewed through PyTorch or CuPy when one is installed (both import DLPack
    # without a copy); the stream handshake happens in streams.wait_for_producers.
    for module in ("torch", "cupy"):
        lib_ = sys.modules.get(module)
        if lib_ is not None:
            view = lib_.from_dlpack(a)
            op = as_operand(view, name, len(view.shape), "")
            op.keep = (a, view)
            op.kind = "dlpack"
            return op
    raise ConvError(f"{name} is a DLPack device array; import torch or cupy first so that pyconv can read it "
                    f"without a copy, or pass an object with __cuda_array_interface__")


def check_output(out: Operand, shape, dtype: str, layout: str, device: int, inputs) -> None:
    """`out` must be writeable, of the result's shape, dtype and layout, where the call runs, and share no
    memory with the inputs (as PyTorch refuses)."""
    if out.strided:
        raise ConvError(f"out must be dense in NCHW (C-contiguous) or NHWC (channels_last) order; it is a strided view")
    if out.readonly:
        raise ConvError("out is read-only")
    if out.shape != tuple(shape):
        raise ConvError(f"out must have shape {tuple(shape)}, got {out.shape}")
    if out.dtype != dtype:
        raise ConvError(f"out must have dtype {dtype}, got {out.dtype}")
    if out.layout != layout and not layouts_coincide(out.shape):
        raise ConvError(f"out must be {layout} like the result (x's layout), got {out.layout}")
    if out.device != device:
        where = lambda d: "host memory" if d < 0 else f"device {d}"  # noqa: E731
        raise ConvError(f"out is in {where(out.device)}, but the result is written in {where(device)}")
    for op, name in inputs:
        if op is not None and op.ptr < out.ptr + out.nbytes and out.ptr < op.ptr + op.nbytes:
            raise ConvError(f"out overlaps {name} in memory; pass a separate output array")


def new_output(like: Operand, shape, dtype: str, layout: str, device: int, stream):
    """A new array of the caller's kind for the result: a torch tensor for torch inputs (PyTorch's
    allocator), a CuPy array for CuPy inputs, a pyconv.DeviceArray for other device arrays, NumPy on
    the host. NHWC results are channels-last views of logical shape (B, M, OH, OW)."""
    memory = tuple(shape[d] for d in _ORDERS[layout]) if len(shape) == 4 else tuple(shape)
    inverse = tuple(np.argsort(_ORDERS[layout])) if len(shape) == 4 else None
    if like.kind in ("torch", "dlpack") and "torch" in sys.modules and (like.kind == "torch" or is_torch(like.keep[1])):
        torch = sys.modules["torch"]
        _torch_dtype(None)  # fills the maps
        tdtype = _torch_dtypes_by_name[dtype]
        dev = device if device >= 0 else "cpu"
        if layout == "NHWC":
            return torch.empty(shape, dtype=tdtype, device=dev, memory_format=torch.channels_last)
        return torch.empty(shape, dtype=tdtype, device=dev)
    if device < 0:
        if dtype == "bfloat16":
            raise ConvError("a bfloat16 result needs PyTorch tensors (NumPy has no bfloat16)")
        a = np.empty(memory, np.dtype(dtype))
        return a.transpose(inverse) if inverse is not None and layout == "NHWC" else a
    if dtype == "bfloat16":
        raise ConvError("a bfloat16 result needs PyTorch tensors (CuPy, NumPy and DeviceArray have no bfloat16)")
    cupy = sys.modules.get("cupy")
    if cupy is not None and type(like.keep).__module__.startswith("cupy"):
        with cupy.cuda.Device(device):
            a = cupy.empty(memory, dtype)
        return a.transpose(inverse) if inverse is not None and layout == "NHWC" else a
    from .device import DeviceArray
    return DeviceArray(shape, dtype, device=device, stream=stream, layout=layout)
