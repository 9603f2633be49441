"""GPU memory, streams and events through libconv's own helpers (no other CUDA binding needed)."""
from __future__ import annotations

import weakref

import numpy as np

from ._lib import check, ffi, lib


def device_count() -> int:
    """Number of usable CUDA devices; 0 without a driver, a GPU, or a CUDA build."""
    count = ffi().new("int*")
    check(lib().conv_device_count(count))
    return count[0]


def device_name(device: int = 0) -> str:
    buf = ffi().new("char[256]")
    check(lib().conv_device_name(device, buf, 256))
    return ffi().string(buf).decode()


def mem_info() -> tuple[int, int]:
    """(free, total) bytes of the current device."""
    free, total = ffi().new("size_t*"), ffi().new("size_t*")
    check(lib().conv_mem_info(free, total))
    return free[0], total[0]


def synchronize() -> None:
    check(lib().conv_device_synchronize())


def stream_handle(stream) -> object:
    """A void* for libconv from None (legacy default stream), an int handle, or a Stream."""
    if stream is None:
        return ffi().NULL
    if isinstance(stream, Stream):
        return stream.handle
    return ffi().cast("void*", int(stream))


class Stream:
    """A non-blocking CUDA stream owned by libconv."""

    def __init__(self):
        ptr = ffi().new("void**")
        check(lib().conv_stream_create(ptr))
        self.handle = ptr[0]
        self._finalizer = weakref.finalize(self, lib().conv_stream_destroy, self.handle)

    def synchronize(self) -> None:
        check(lib().conv_stream_synchronize(self.handle))

    @property
    def ptr(self) -> int:
        return int(ffi().cast("uintptr_t", self.handle))


class Event:
    """A CUDA event, for timing work on a stream."""

    def __init__(self):
        ptr = ffi().new("void**")
        check(lib().conv_event_create(ptr))
        self.handle = ptr[0]
        self._finalizer = weakref.finalize(self, lib().conv_event_destroy, self.handle)

    def record(self, stream=None) -> None:
        check(lib().conv_event_record(self.handle, stream_handle(stream)))

    def synchronize(self) -> None:
        check(lib().conv_event_synchronize(self.handle))

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to `end` (both recorded, `end` completed)."""
        ms = ffi().new("float*")
        check(lib().conv_event_elapsed_ms(self.handle, end.handle, ms))
        return ms[0]


class _Allocation:
    """Owns memory from an allocate/free pair of libconv and frees it when collected."""

    def __init__(self, nbytes: int, alloc, free):
        ptr = ffi().new("void**")
        check(alloc(ptr, nbytes))
        self.ptr = int(ffi().cast("uintptr_t", ptr[0]))
        self._finalizer = weakref.finalize(self, free, ptr[0])


class DeviceArray:
    """A C-contiguous array in GPU memory allocated by libconv.

    It exposes ``__cuda_array_interface__`` (so CuPy, PyTorch and Numba can use it without a copy);
    ``get()`` copies it to a NumPy array.
    """

    def __init__(self, shape, dtype=np.float32):
        self.shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.dtype = np.dtype(dtype)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        self._memory = _Allocation(self.nbytes, lib().conv_malloc, lib().conv_free)
        self.ptr = self._memory.ptr

    @classmethod
    def from_host(cls, array, stream=None) -> "DeviceArray":
        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype)
        out.set(host, stream)
        return out

    def set(self, host: np.ndarray, stream=None) -> None:
        """Copies a host array of the same shape and dtype into this one (waits for the copy)."""
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"shape {host.shape} does not match {self.shape}")
        check(lib().conv_memcpy_h2d(self.handle, ffi().cast("void*", host.ctypes.data), self.nbytes,
                                    stream_handle(stream)))
        check(lib().conv_stream_synchronize(stream_handle(stream)))

    def get(self, stream=None, out: np.ndarray | None = None) -> np.ndarray:
        """A NumPy copy, into `out` if given (C-contiguous, same size); waits for the copy."""
        host = np.empty(self.shape, self.dtype) if out is None else out
        if host.nbytes != self.nbytes or not host.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous array of {self.nbytes} bytes")
        check(lib().conv_memcpy_d2h(ffi().cast("void*", host.ctypes.data), self.handle, self.nbytes,
                                    stream_handle(stream)))
        check(lib().conv_stream_synchronize(stream_handle(stream)))
        return host

    def fill_bytes(self, value: int, stream=None) -> None:
        """Sets every byte to `value` (0xFF gives NaN in float32: a poison for tests)."""
        check(lib().conv_memset(self.handle, value, self.nbytes, stream_handle(stream)))

    @property
    def handle(self):
        return ffi().cast("void*", self.ptr)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"


def pinned_empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in page-locked host memory, for copies that overlap with kernels.

    The memory is freed when the last view of the array goes away.
    """
    dtype = np.dtype(dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
    raw = ffi().new("void**")
    check(lib().conv_malloc_host(raw, nbytes))
    address = raw[0]
    owner = ffi().gc(ffi().cast("char*", address), lambda _: lib().conv_free_host(address))
    return np.frombuffer(ffi().buffer(owner, nbytes), dtype=dtype,
                         count=int(np.prod(shape, dtype=np.int64))).reshape(shape)
