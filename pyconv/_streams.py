"""Which CUDA stream a call runs on, and making it wait for the operands' producers.

The rule (README, "Devices, streams and synchronisation"):
1. the `stream=` argument: a pyconv.Stream, an int handle, a torch.cuda.Stream, a cupy.cuda.Stream,
   or anything with `.cuda_stream` or `.ptr`;
2. else the producer's current stream: PyTorch's current stream on the operands' device for torch
   tensors, CuPy's current stream for CuPy arrays;
3. else the legacy default stream.
A producer that names a stream (CUDA array interface v3) is waited for with an event on the launch
stream (cudaStreamWaitEvent): the GPU waits, the host does not.
"""
from __future__ import annotations

import sys

from ._lib import ConvError, check, ffi, lib

# CUDA array interface / DLPack stream numbers with a fixed meaning.
_LEGACY, _PER_THREAD = 1, 2
_PER_THREAD_HANDLE = 2  # cudaStreamPerThread as a handle value


def handle_of(stream) -> int:
    """The cudaStream_t value of a stream object (0: the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError(f"stream must be a stream object or an int handle, got {stream!r}")
    if isinstance(stream, int):
        if stream < 0 or stream >= 2**64:
            raise ConvError(f"stream handle {stream} is not a pointer value")
        return stream
    for attr in ("handle_int", "cuda_stream", "ptr"):  # pyconv.Stream, torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    raise TypeError(f"stream must be a pyconv.Stream, torch.cuda.Stream, cupy.cuda.Stream, an object with "
                    f".cuda_stream or .ptr, or an int handle; got {type(stream).__name__}")


def _torch_current_stream(device: int) -> int:
    torch = sys.modules["torch"]
    # The raw handle without building a Stream object (a third of a call's host time otherwise);
    # torch.compile's generated code reads it the same way.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def default_stream(operands, device: int) -> int:
    """The stream handle a call on `device` runs on when no `stream=` is given: rules 2 and 3 above."""
    for op in operands:
        if op is None:
            continue
        if op.kind == "torch" and op.device >= 0:
            return _torch_current_stream(device)
        if type(op.keep).__module__.startswith("cupy"):
            with sys.modules["cupy"].cuda.Device(device):
                return sys.modules["cupy"].cuda.get_current_stream().ptr
    return 0


def _as_handle(interface_stream: int) -> int:
    if interface_stream == _LEGACY:
        return 0
    if interface_stream == _PER_THREAD:
        return _PER_THREAD_HANDLE
    return interface_stream


def wait_for_producers(operands, stream: int) -> None:
    """Makes `stream` wait (on the GPU) for the streams the operands' producers named."""
    for op in operands:
        if op is None or op.device < 0:
            continue
        if op.stream not in (None, 0) and _as_handle(op.stream) != stream:
            check(lib().conv_stream_wait_stream(ffi().cast("void*", stream), ffi().cast("void*", _as_handle(op.stream))))
