"""DLPack export of pyconv.DeviceArray (``__dlpack__`` / ``__dlpack_device__``), so that
torch.from_dlpack, cupy.from_dlpack, jax and NumPy-likes can take it without a copy.

A capsule named "dltensor" holds a DLManagedTensor whose manager context keeps the array alive; the
consumer renames the capsule and calls the deleter when done; an unconsumed capsule calls it itself.
The stream handshake: the consumer names the stream it will use, and that stream is made to wait
(on the GPU) for the stream the array's data was written on.
"""
from __future__ import annotations

import ctypes

import numpy as np

KDL_CUDA = 2
_DTYPE_CODES = {np.dtype(np.float32): (2, 32), np.dtype(np.float16): (2, 16), np.dtype(np.uint8): (1, 8)}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

# Exports alive until their deleter runs, by the address of their DLManagedTensor.
_alive: dict = {}


@_DELETER
def _delete(managed) -> None:
    _alive.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.py_object)
_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_New.restype = ctypes.py_object
_pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_pythonapi.PyCapsule_IsValid.restype = ctypes.c_int
_pythonapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule) -> None:
    # Still named "dltensor": nobody consumed it, so the deleter is ours to call.
    if _pythonapi.PyCapsule_IsValid(capsule, b"dltensor"):
        address = _pythonapi.PyCapsule_GetPointer(capsule, b"dltensor")
        _alive.pop(address, None)


def export(array, shape, strides_bytes, itemsize: int, device: int):
    """A "dltensor" capsule viewing `array`'s memory (shape and byte strides as given)."""
    if array.dtype not in _DTYPE_CODES:
        raise TypeError(f"DLPack export of dtype {array.dtype} is not supported")
    code, bits = _DTYPE_CODES[array.dtype]
    ndim = len(shape)
    c_shape = (ctypes.c_int64 * ndim)(*shape)
    c_strides = None if strides_bytes is None else (ctypes.c_int64 * ndim)(*(s // itemsize for s in strides_bytes))
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(ctypes.c_void_p(array.ptr), _DLDevice(KDL_CUDA, device), ndim,
                                  _DLDataType(code, bits, 1), c_shape,
                                  c_strides if c_strides is not None else ctypes.POINTER(ctypes.c_int64)(), 0)
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _alive[address] = (managed, c_shape, c_strides, array)
    return _pythonapi.PyCapsule_New(address, b"dltensor", _capsule_destructor)
