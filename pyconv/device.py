"""GPU memory, streams and events through libconv's own helpers (no other CUDA binding needed)."""
from __future__ import annotations

import math

import numpy as np

from . import _args, _dlpack
from ._lib import ConvError, check, ffi, lib, release_on_collect
from ._streams import handle_of


def device_count() -> int:
    """Number of usable CUDA devices; 0 without a driver, a GPU, or a CUDA build."""
    count = ffi().new("int*")
    check(lib().conv_device_count(count))
    return count[0]


def device_name(device: int = 0) -> str:
    device = _args.device_index(device)
    buf = ffi().new("char[256]")
    check(lib().conv_device_name(device, buf, 256))
    return ffi().string(buf).decode()


def mem_info() -> tuple[int, int]:
    """(free, total) bytes of the current device."""
    free, total = ffi().new("size_t*"), ffi().new("size_t*")
    check(lib().conv_mem_info(free, total))
    return free[0], total[0]


def synchronize(device: int | None = None) -> None:
    """Waits for all work on a device (default: the current one). A kernel that faulted earlier is
    reported here as a ConvRuntimeError naming the last pyconv kernel launched on that device."""
    f, l = ffi(), lib()
    if device is None:
        check(l.conv_device_synchronize())
        return
    device = _args.device_index(device)
    previous = f.new("int*")
    check(l.conv_get_device(previous))
    check(l.conv_set_device(device))
    try:
        check(l.conv_device_synchronize())
    finally:
        l.conv_set_device(previous[0])


def empty_cache() -> None:
    """Returns the memory pyconv's pool holds unused (outputs and workspaces of calls on non-PyTorch
    arrays) to the driver. PyTorch tensors' memory is PyTorch's: torch.cuda.empty_cache()."""
    check(lib().conv_pool_trim())


def stream_handle(stream) -> object:
    """A void* for libconv from None (legacy default stream), an int handle, or any stream object
    (pyconv, torch, cupy: see pyconv._streams.handle_of)."""
    return ffi().cast("void*", handle_of(stream))


class Stream:
    """A non-blocking CUDA stream owned by libconv."""

    def __init__(self):
        ptr = ffi().new("void**")
        check(lib().conv_stream_create(ptr))
        self.handle = ptr[0]
        release_on_collect(self, lib().conv_stream_destroy, self.handle)

    def synchronize(self) -> None:
        check(lib().conv_stream_synchronize(self.handle))

    @property
    def ptr(self) -> int:
        return int(ffi().cast("uintptr_t", self.handle))

    handle_int = ptr


class Event:
    """A CUDA event, for timing work on a stream."""

    def __init__(self):
        ptr = ffi().new("void**")
        check(lib().conv_event_create(ptr))
        self.handle = ptr[0]
        release_on_collect(self, lib().conv_event_destroy, self.handle)

    def record(self, stream=None) -> None:
        check(lib().conv_event_record(self.handle, stream_handle(stream)))

    def synchronize(self) -> None:
        check(lib().conv_event_synchronize(self.handle))

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to `end` (both recorded, `end` completed)."""
        ms = ffi().new("float*")
        check(lib().conv_event_elapsed_ms(self.handle, end.handle, ms))
        return ms[0]


class _DeviceScope:
    """Makes `device` current for a block and restores the caller's device after it."""

    def __init__(self, device: int | None):
        self.device = device
        self.previous = None

    def __enter__(self):
        if self.device is not None:
            f, l = ffi(), lib()
            previous = f.new("int*")
            check(l.conv_get_device(previous))
            if previous[0] != self.device:
                check(l.conv_set_device(self.device))
                self.previous = previous[0]
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            lib().conv_set_device(self.previous)


def use_device(device: int) -> _DeviceScope:
    """`with use_device(d):` makes GPU d current inside the block (for calls on "the current device",
    e.g. creating a Stream or Event there) and restores the caller's device after it."""
    return _DeviceScope(device)


# Streams that live as long as the process: memory allocated on them can be freed on them at any time.
_LASTING_STREAMS = (0, 2)  # the legacy and the per-thread default streams


class _LastUse:
    """For memory on a stream pyconv does not own (an int handle, a torch or CuPy stream object): an
    event recorded on that stream after the last work pyconv queued there. The memory is freed on the
    legacy stream after it, so freeing never touches a stream its owner may have destroyed."""

    def __init__(self, stream: int):
        ptr = ffi().new("void**")
        check(lib().conv_event_create(ptr))
        self.event = ptr[0]
        self.record(stream)

    def record(self, stream: int) -> None:
        check(lib().conv_event_record(self.event, ffi().cast("void*", stream)))


def _free_async(ptr, stream_handle_value: int, device: int, _stream_owner, last_use: "_LastUse | None") -> None:
    with _DeviceScope(device):
        l = lib()
        if last_use is None:
            l.conv_free_async(ptr, ffi().cast("void*", stream_handle_value))
            return
        l.conv_stream_wait_event(ffi().NULL, last_use.event)
        l.conv_free_async(ptr, ffi().NULL)
        l.conv_event_destroy(last_use.event)


class DeviceArray:
    """An array in GPU memory from pyconv's stream-ordered pool (cudaMallocAsync: freeing it never
    synchronises the device; `pyconv.empty_cache()` returns unused pool memory).

    The memory belongs to `stream` (default: the legacy default stream): it is allocated and freed in
    that stream's order, and ``__cuda_array_interface__`` names that stream, so consumers (CuPy,
    PyTorch, Numba, pyconv) wait for the work queued there before reading; it also exports DLPack
    (``__dlpack__``, with the stream handshake). ``get()`` copies the array to NumPy. 4-D arrays may be laid out NHWC (logical shape (B, C, H, W), channels in memory last).
    """

    def __init__(self, shape, dtype=np.float32, *, device: int | None = None, stream=None, layout: str = "NCHW"):
        self.shape = _args.shape(shape, "shape")
        self.dtype = _args.numeric_dtype(dtype)
        if layout not in ("NCHW", "NHWC") or (layout == "NHWC" and len(self.shape) != 4):
            raise ConvError(f"layout must be 'NCHW', or 'NHWC' for a 4-D shape, got {layout!r} for {self.shape}")
        if device is not None:
            device = _args.device_index(device)
        self.layout = layout
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self.stream = handle_of(stream)
        f, l = ffi(), lib()
        if device is None:
            current = f.new("int*")
            check(l.conv_get_device(current))
            device = current[0]
        self.device = int(device)
        raw = f.new("void**")
        with _DeviceScope(self.device):
            check(l.conv_malloc_async(raw, self.nbytes, f.cast("void*", self.stream)))
            self.ptr = int(f.cast("uintptr_t", raw[0]))
            # A pyconv.Stream passed in outlives the memory freed on it; any other stream may be gone by
            # the time this array is, so its last use is marked with an event instead.
            owner = stream if isinstance(stream, Stream) else None
            self._last_use = None if owner is not None or self.stream in _LASTING_STREAMS else _LastUse(self.stream)
        release_on_collect(self, _free_async, raw[0], self.stream, self.device, owner, self._last_use)

    def used_on(self, stream: int) -> None:
        """Marks work just queued on `stream` (its int handle) that uses this array: the memory is not
        freed before that work is done. pyconv marks its own launches; call it after yours."""
        if self._last_use is not None:
            with _DeviceScope(self.device):
                self._last_use.record(stream)

    @classmethod
    def from_host(cls, array, stream=None, device: int | None = None) -> "DeviceArray":
        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype, device=device, stream=stream)
        out.set(host, stream)
        return out

    @property
    def strides(self) -> tuple | None:
        """Byte strides, None for C order."""
        if self.layout != "NHWC":
            return None
        B, C, H, W = self.shape
        item = self.dtype.itemsize
        return (H * W * C * item, item, W * C * item, C * item)

    def set(self, host: np.ndarray, stream=None) -> None:
        """Copies a host array of the same shape and dtype into this one (waits for the copy)."""
        if self.layout != "NCHW":
            raise ValueError("set() copies C-ordered arrays; this one is NHWC")
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"shape {host.shape} does not match {self.shape}")
        with _DeviceScope(self.device):
            check(lib().conv_memcpy_h2d(self.handle, ffi().cast("void*", host.ctypes.data), self.nbytes,
                                        stream_handle(stream)))
            check(lib().conv_stream_synchronize(stream_handle(stream)))

    def get(self, stream=None, out: np.ndarray | None = None) -> np.ndarray:
        """A NumPy copy (logical shape, NHWC arrays as channels-last views), into `out` if given
        (C-contiguous, same size); waits for the copy. Default stream: the array's own."""
        memory = self.shape if self.layout == "NCHW" else (self.shape[0], self.shape[2], self.shape[3], self.shape[1])
        host = np.empty(memory, self.dtype) if out is None else out
        if host.nbytes != self.nbytes or not host.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous array of {self.nbytes} bytes")
        handle = stream_handle(self.stream if stream is None else stream)
        with _DeviceScope(self.device):
            check(lib().conv_memcpy_d2h(ffi().cast("void*", host.ctypes.data), self.handle, self.nbytes, handle))
            check(lib().conv_stream_synchronize(handle))
        return host if self.layout == "NCHW" or out is not None else host.transpose(0, 3, 1, 2)

    def reshape(self, shape) -> "DeviceArray":
        """The same memory with another shape of the same size (C-ordered arrays only)."""
        shape = tuple(int(n) for n in shape)
        if self.layout != "NCHW" or int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot view {self!r} as shape {shape}")
        view = object.__new__(DeviceArray)
        view.__dict__.update(self.__dict__)
        view.shape, view._base = shape, self  # the base owns (and frees) the memory
        return view

    def fill_bytes(self, value: int, stream=None) -> None:
        """Sets every byte to `value` (0xFF gives NaN in float32: a poison for tests)."""
        with _DeviceScope(self.device):
            check(lib().conv_memset(self.handle, value, self.nbytes,
                                    stream_handle(self.stream if stream is None else stream)))

    @property
    def handle(self):
        return ffi().cast("void*", self.ptr)

    @property
    def __cuda_array_interface__(self) -> dict:
        # v3: "stream" names the stream the data is written on; 1 is the legacy default stream.
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": self.strides, "version": 3, "stream": self.stream or 1}

    def __dlpack_device__(self) -> tuple:
        return (_dlpack.KDL_CUDA, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this memory. `stream`: the consumer's stream (1: legacy default, 2:
        per-thread default, -1: no synchronisation), made to wait for the stream the data was written on."""
        if copy:
            raise BufferError("DeviceArray exports its memory in place (copy=True is not supported)")
        if stream is not None and stream != -1:
            consumer = {1: 0, 2: 2}.get(stream, stream)
            if consumer != self.stream:
                with _DeviceScope(self.device):
                    check(lib().conv_stream_wait_stream(ffi().cast("void*", consumer), ffi().cast("void*", self.stream)))
        return _dlpack.export(self, self.shape, self.strides, self.dtype.itemsize, self.device)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device}, layout={self.layout})"


def pinned_empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in page-locked host memory, for copies that overlap with kernels.

    The memory is freed when the last view of the array goes away.
    """
    shape = _args.shape(shape, "shape")
    dtype = _args.numeric_dtype(dtype)
    nbytes = max(math.prod(shape) * dtype.itemsize, 1)
    raw = ffi().new("void**")
    check(lib().conv_malloc_host(raw, nbytes))
    address = raw[0]
    owner = ffi().gc(ffi().cast("char*", address), lambda _: lib().conv_free_host(address))
    return np.frombuffer(ffi().buffer(owner, nbytes), dtype=dtype,
                         count=math.prod(shape)).reshape(shape)
