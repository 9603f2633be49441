"""One decoding step of a causal depthwise conv1d: pyconv.conv1d_causal_update.

A sequence model (Mamba, H3, Hyena) runs a short causal depthwise conv1d over its tokens; generating
token by token it keeps, per (batch, channel), the last S >= K-1 inputs (the conv state). One step
convolves that state with the new token(s), returns their outputs and shifts the state, in place.
The whole sequence is pyconv.conv1d(x, w, bias, padding="causal", groups=D, epilogue="silu").
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Optional

import numpy as np

from . import _problem
from . import device as _device
from ._arrays import as_operand, new_output
from ._lib import ConvError, check, ffi, lib
from ._streams import default_stream, handle_of, wait_for_producers


_problems: dict = {}


def update_problem(B: int, D: int, T: int, K: int, dtype: str, bias: bool, activation: Optional[str]):
    """The conv_problem of a step (the causal depthwise conv of T new tokens), made once per signature:
    a decoding loop asks for the same one every token."""
    key = (B, D, T, K, dtype, bias, activation)
    problem = _problems.get(key)
    if problem is None:
        problem = _problem.make_problem((B, D, 1, T), (D, 1, 1, K), bias=bias, padding="causal", groups=D,
                                        epilogue=activation, x_dtype=dtype)[0]
        if len(_problems) > 1024:
            _problems.clear()
        _problems[key] = problem
    return problem


def conv1d_causal_update(x, state, w, bias=None, *, activation: Optional[str] = None, stream=None) -> Any:
    """y for the new tokens x, and state shifted by them (in place).

    x: (B, D) one token or (B, D, T) T tokens; state: (B, D, S), S >= K-1, x's dtype, dense;
    w: (D, K) or (D, 1, K); bias: (D,) or None; activation: None, "relu" or "silu".
    Device arrays of one GPU (torch, CuPy or other CUDA array interface / DLPack arrays): the call
    enqueues on `stream` (default: the framework's current stream) and returns y of x's shape. Host
    arrays (NumPy, PyTorch's CPU tensors) run on the host, through the cpu variant, and return when done."""
    one_token = len(getattr(x, "shape", ())) == 2
    xo = as_operand(x, "x", 2, "(B, D)") if one_token else as_operand(x, "x", 3, "(B, D, T)")
    if one_token:
        xo = xo.reshaped(xo.shape + (1,))
    so = as_operand(state, "state", 3, "(B, D, S)")
    if len(getattr(w, "shape", ())) == 2:
        wo = as_operand(w, "w", 2, "(D, K)")
        wo = wo.reshaped((wo.shape[0], 1, wo.shape[1]))
    else:
        wo = as_operand(w, "w", 3, "(D, 1, K)")
    bo = as_operand(bias, "bias", 1, "(D,)") if bias is not None else None
    (B, D, T), (_, _, S), (Dw, one, K) = xo.shape, so.shape, wo.shape
    if so.shape[:2] != (B, D) or Dw != D or one != 1 or (bo is not None and bo.shape != (D,)):
        raise ConvError(f"conv1d_causal_update: x (B, D, T) = {xo.shape}, state (B, D, S) = {so.shape}, "
                        f"w (D, 1, K) = {wo.shape}" + (f", bias (D,) = {bo.shape}" if bo is not None else "")
                        + ": B and D must agree")
    operands = [(op, name) for op, name in ((xo, "x"), (so, "state"), (wo, "w"), (bo, "bias")) if op is not None]
    on_host = [name for op, name in operands if op.device < 0]
    if on_host and len(on_host) < len(operands):
        raise ConvError(f"conv1d_causal_update: {', '.join(on_host)} in host memory, the rest on device "
                        f"{max(op.device for op, _ in operands)}: pass all host arrays or all device arrays of "
                        "one GPU")
    for op, name in operands:
        if op.strided or op.layout != "NCHW":
            raise ConvError(f"conv1d_causal_update: {name} must be dense (C-contiguous)")
        if op.device != xo.device:
            raise ConvError(f"conv1d_causal_update: {name} is on device {op.device}, x on device {xo.device}")
    if so.dtype != xo.dtype or wo.dtype != xo.dtype or (bo is not None and bo.dtype != xo.dtype):
        raise ConvError(f"conv1d_causal_update: x, state, w and bias must share one dtype, got x {xo.dtype}, "
                        f"state {so.dtype}, w {wo.dtype}" + (f", bias {bo.dtype}" if bo is not None else ""))
    if so.readonly:
        raise ConvError("conv1d_causal_update: state is read-only; it is updated in place")
    if activation not in (None, "relu", "silu"):
        raise ConvError(f"conv1d_causal_update: activation must be None, 'relu' or 'silu', got {activation!r}")
    if on_host:
        kinds = {op.kind for op, _ in operands}
        if len(kinds) > 1 or not kinds <= {"numpy", "torch"}:
            given = ", ".join(f"{name} {type(op.keep).__name__}" for op, name in operands)
            raise ConvError("conv1d_causal_update: host arrays must be all NumPy arrays or all PyTorch CPU "
                            f"tensors, got {given}")
        if not K - 1 <= S <= 1 << 20:
            raise ConvError(f"conv1d_causal_update: state_len must be in [K-1, 2^20] = [{K - 1}, 1048576], got {S}")
        return _update_on_host(x, state, w, bias, D, S, K, one_token, activation, xo.kind == "torch")
    problem = update_problem(B, D, T, K, xo.dtype, bo is not None, activation)
    s = handle_of(stream) if stream is not None else default_stream((xo, so, wo, bo), xo.device)
    wait_for_producers((xo, so, wo, bo), s)
    # as pyconv.conv2d's: a torch result on another stream than PyTorch's current one comes from that
    # stream's pool; a DeviceArray result keeps a pyconv.Stream alive and is freed in its order
    from .api import _owner_or_handle, _torch_allocates_on
    torch_result = stream is not None and "torch" in sys.modules and xo.kind in ("torch", "dlpack")
    with _torch_allocates_on(xo.device, s) if torch_result else contextlib.nullcontext():
        y = new_output(xo, (B, D) if one_token else (B, D, T), xo.dtype, "NCHW", xo.device,
                       _owner_or_handle(stream, s))
    yo = as_operand(y, "y", 2 if one_token else 3, "y")
    f = ffi()
    check(lib().conv1d_causal_update(problem, S, f.cast("void*", xo.ptr), f.cast("void*", so.ptr),
                                     f.cast("void*", wo.ptr), f.cast("void*", bo.ptr if bo is not None else 0),
                                     f.cast("void*", yo.ptr), f.cast("void*", s)))
    if isinstance(y, _device.DeviceArray):
        y.used_on(s)
    return y


def _update_on_host(x, state, w, bias, D: int, S: int, K: int, one_token: bool, activation: Optional[str],
                    torch_tensors: bool):
    """The step on host arrays (NumPy, or PyTorch's CPU tensors), in the caller's kind: the cpu variant's
    conv of the last K-1 state columns followed by the new tokens (its T valid outputs are theirs), then
    the state shifted by the tokens, in place."""
    from .api import conv1d
    concatenate = sys.modules["torch"].cat if torch_tensors else np.concatenate
    x3 = x[:, :, None] if one_token else x
    window = concatenate([state[:, :, S - (K - 1):], x3], 2)
    y = conv1d(window, w.reshape(D, 1, K), bias, groups=D, epilogue=activation, variant="cpu")
    state[...] = concatenate([state, x3], 2)[:, :, x3.shape[2]:]  # (not [-S:]: S may be 0, where K = 1)
    return y[:, :, 0] if one_token else y
