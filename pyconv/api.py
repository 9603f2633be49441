"""The public convolution API: conv2d, conv1d, and what variants exist."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import device as _device
from ._arrays import Operand, as_operand, host_output, is_device_array
from ._lib import ConvError, check, ffi, lib

PRECISIONS = ("exact", "fast")


@dataclass(frozen=True)
class VariantInfo:
    name: str
    idea: str
    on_device: bool      # runs on the GPU (else on the host: cpu)
    exact: bool          # fp32 arithmetic; False: reduced precision (fp16 / TF32 inside)
    max_rel_error: float  # relative L2 error bound the variant is tested to
    available: bool      # usable in this build on this machine
    reason: str          # why not, when not available


def variant_info() -> list[VariantInfo]:
    """Every variant the library knows, with whether it can run here and, if not, why."""
    f, l = ffi(), lib()
    infos = []
    for i in range(l.conv_variant_count()):
        info = f.new("conv_variant_info*")
        check(l.conv_variant_get_info(i, info))
        reason = "" if info.available else f.string(l.conv_last_error()).decode()
        infos.append(VariantInfo(f.string(info.name).decode(), f.string(info.idea).decode(),
                                 bool(info.on_device), bool(info.exact), float(info.max_rel_error),
                                 bool(info.available), reason))
    return infos


def variants() -> list[str]:
    """Names of the variants usable on this machine ('auto' resolves among these)."""
    return [v.name for v in variant_info() if v.available]


def variant_configs(variant: str) -> list[str]:
    """Names of a variant's launch configurations (what auto's tuner sweeps; [] if it has one
    launch only). Pass one as `config=` to pin it instead of the variant's default."""
    f, l = ffi(), lib()
    vid = variant_id(variant)
    count = f.new("int*")
    check(l.conv_variant_config_count(vid, count))
    names = []
    for i in range(count[0]):
        name = f.new("const char**")
        check(l.conv_variant_config_name(vid, i, name))
        names.append(f.string(name[0]).decode())
    return names


def _config_index(variant: str, config: str) -> int:
    if variant == "auto":
        raise ConvError("config pins a launch configuration of a named variant; auto picks its own")
    names = variant_configs(variant)
    if config not in names:
        raise ConvError(f"variant '{variant}' has no launch configuration {config!r}; it has {names}")
    return names.index(config)


def _pair(value, name: str) -> tuple[int, int]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2:
        raise ConvError(f"{name} must be an int or an (h, w) pair, got {value!r}")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise ConvError(f"{name} must be an int or an (h, w) pair of ints, got {value!r}")
    return int(items[0]), int(items[1])


def variant_id(variant: str, precision: str = "exact") -> int:
    """The library's id for a variant name ('auto' maps to CONV_AUTO or CONV_AUTO_FAST)."""
    if precision not in PRECISIONS:
        raise ConvError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not isinstance(variant, str):
        raise ConvError(f"variant must be a name (str), got {type(variant).__name__}")
    if variant == "auto":
        variant = "auto_fast" if precision == "fast" else "auto"
    found = ffi().new("int*")
    check(lib().conv_variant_find(variant.encode(), found))
    return found[0]


def make_params(x_shape, w_shape, stride, padding, dilation):
    """conv_params for NCHW x and MCKK w, checked by the library (one place)."""
    B, C, H, W = x_shape
    M, Cw, KH, KW = w_shape
    if C != Cw:
        raise ConvError(f"channel mismatch: x has C={C} channels but w has {Cw} (w is (M, C, KH, KW))")
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    p = ffi().new("conv_params*", dict(B=B, C=C, H=H, W=W, M=M, KH=KH, KW=KW, stride_h=sh, stride_w=sw,
                                       pad_h=ph, pad_w=pw, dilation_h=dh, dilation_w=dw))
    oh, ow = ffi().new("int64_t*"), ffi().new("int64_t*")
    check(lib().conv_output_size(p, oh, ow))
    return p, (B, M, oh[0], ow[0])


def _wait_for_producer(op: Operand) -> None:
    # CUDA array interface v3: the producer names a stream the consumer must wait on before reading.
    if op.on_device and op.stream not in (None, 0):
        check(lib().conv_stream_synchronize(ffi().cast("void*", op.stream)))


def _pointer(a) -> int:
    if isinstance(a, int):
        return a
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    return int(a.__cuda_array_interface__["data"][0])


class Conv2dPlan:
    """One convolution shape bound to one concrete variant, with its workspace allocated once.

    `launch` only enqueues the kernels on a stream: no allocation, no synchronisation, no argument
    conversion, so it can be timed, captured, and overlapped with copies on other streams.
    Shapes and the variant are checked when the plan is made.
    """

    def __init__(self, x_shape, w_shape, stride=1, padding=0, dilation=1, variant: str = "auto",
                 precision: str = "exact", config: str | None = None):
        f, l = ffi(), lib()
        self.params, self.out_shape = make_params(tuple(x_shape), tuple(w_shape), stride, padding, dilation)
        requested = variant_id(variant, precision)
        # config: one launch configuration of the variant (variant_configs), checked against the shape here.
        self.config = None if config is None else _config_index(variant, config)
        chosen = f.new("int*")
        check(l.conv2d_auto_choice(requested, self.params, chosen))  # tunes a new shape here, not in launch
        # An auto plan launches through auto, which also applies the tuned launch configuration of
        # the chosen variant (a launch by the variant's own id would take its default configuration).
        self.variant_id = requested
        info = f.new("conv_variant_info*")
        check(l.conv_variant_get_info(chosen[0], info))
        self.variant = f.string(info.name).decode()
        self.on_device = bool(info.on_device)
        if self.config is not None:
            check(l.conv_variant_config_supports(self.variant_id, self.config, self.params))
        ws_bytes = f.new("size_t*")
        check(l.conv2d_workspace_size(self.variant_id, self.params, ws_bytes))
        self.workspace_bytes = ws_bytes[0]
        self._workspace = _device.DeviceArray((self.workspace_bytes,), np.uint8) if self.workspace_bytes else None

    def launch(self, x, w, y, stream=None) -> None:
        """Enqueues y = conv(x, w). x, w, y: arrays (device arrays for a GPU variant, NumPy for cpu)
        or raw pointers (int) of the plan's shapes, C-contiguous float32."""
        f = ffi()
        ws = self._workspace.handle if self._workspace is not None else f.NULL
        args = (self.params, f.cast("float*", _pointer(x)), f.cast("float*", _pointer(w)),
                f.cast("float*", _pointer(y)), ws, self.workspace_bytes, _device.stream_handle(stream))
        if self.config is None:
            check(lib().conv2d_forward(self.variant_id, *args))
        else:
            check(lib().conv2d_forward_config(self.variant_id, self.config, *args))


def _conv(x: Operand, w: Operand, out, out_shape, params, variant: str, precision: str, stream, config=None):
    """Runs the convolution on operands; returns the output in the caller's kind of array."""
    x_shape, w_shape = x.shape, w.shape
    p = params
    plan = Conv2dPlan(x_shape, w_shape, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w),
                      (p.dilation_h, p.dilation_w), variant, precision, config)
    on_device = x.on_device or w.on_device or is_device_array(out)
    if not plan.on_device:
        if on_device:
            raise ConvError(f"variant '{plan.variant}' runs on host memory: pass NumPy arrays, or choose "
                            f"a GPU variant for device arrays")
        y = host_output(out, out_shape)
        plan.launch(x.ptr, w.ptr, y)
        return y

    keep = []  # device copies of host operands, alive until the call is done

    def on_gpu(op: Operand) -> int:
        if op.on_device:
            _wait_for_producer(op)
            return op.ptr
        copy = _device.DeviceArray.from_host(op.keep, stream)
        keep.append(copy)
        return copy.ptr

    xp, wp = on_gpu(x), on_gpu(w)
    if not on_device:
        host = host_output(out, out_shape)
        y_dev = _device.DeviceArray(out_shape)
        plan.launch(xp, wp, y_dev, stream)
        return y_dev.get(stream, out=host)
    if out is None:
        result = _device.DeviceArray(out_shape)
    else:
        y_op = as_operand(out, "out", len(out_shape), "like the result")
        if y_op.shape != tuple(out_shape):
            raise ConvError(f"out must be a float32 device array of shape {tuple(out_shape)}, got {y_op.shape}")
        result = out
    plan.launch(xp, wp, result, stream)
    check(lib().conv_stream_synchronize(_device.stream_handle(stream)))  # kernel faults surface here
    return result


def conv2d(x, w, stride=1, padding=0, dilation=1, variant: str = "auto", out=None,
           precision: str = "exact", stream=None, config: str | None = None):
    """2-D convolution (cross-correlation, as in PyTorch), no bias.

    x: (B, C, H, W) float32; w: (M, C, KH, KW) float32 — NumPy arrays, or device arrays exposing
    ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors, pyconv.DeviceArray), used in place.
    stride, padding, dilation: an int or an (h, w) pair. Padding is zeros on both sides.
    variant: a name from pyconv.variants(), or "auto" (the fastest variant for the shape; with
    precision="exact", the default, only fp32-exact variants; "fast" also allows TF32/FP16 inside).
    out: optional output of shape (B, M, OH, OW), of the same kind as the result.
    stream: CUDA stream (pyconv.Stream or an int handle); default: the legacy default stream.
    config: pin one of the variant's launch configurations (pyconv.variant_configs(variant));
    default: the variant's own choice for the shape.
    Returns a NumPy array for NumPy inputs, a device array (pyconv.DeviceArray, or `out`) when x or
    w is a device array. NumPy input of another real dtype is converted to float32; a
    non-contiguous NumPy array is copied. The call returns when the result is ready.
    """
    xo = as_operand(x, "x", 4, "(B, C, H, W)")
    wo = as_operand(w, "w", 4, "(M, C, KH, KW)")
    params, out_shape = make_params(xo.shape, wo.shape, stride, padding, dilation)
    return _conv(xo, wo, out, out_shape, params, variant, precision, stream, config)


def conv1d(x, w, stride=1, padding=0, dilation=1, variant: str = "auto", out=None,
           precision: str = "exact", stream=None):
    """1-D convolution of (B, C, L) signals with (M, C, K) filters, on the same kernels as conv2d.

    padding: an int, or "same": dilation*(K-1)/2 zero halo cells on both sides, so that the output
    has length L (needs stride 1 and an odd K, as a symmetric halo requires).
    Returns (B, M, L_out), of the same kind as conv2d's result.
    """
    xo = as_operand(x, "x", 3, "(B, C, L)")
    wo = as_operand(w, "w", 3, "(M, C, K)")
    for value, name in ((stride, "stride"), (dilation, "dilation")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConvError(f"{name} must be an int for conv1d, got {value!r}")
    if isinstance(padding, str):
        if padding != "same":
            raise ConvError(f"padding must be an int or 'same', got {padding!r}")
        K = wo.shape[2]
        if stride != 1 or K % 2 == 0:
            raise ConvError(f"padding='same' needs stride 1 and an odd kernel size, got stride={stride}, K={K}")
        padding = dilation * (K - 1) // 2
    elif isinstance(padding, bool) or not isinstance(padding, (int, np.integer)):
        raise ConvError(f"padding must be an int or 'same' for conv1d, got {padding!r}")
    B, C, L = xo.shape
    M, Cw, K = wo.shape
    params, out_shape = make_params((B, C, 1, L), (M, Cw, 1, K), (1, stride), (0, padding), (1, dilation))
    out_shape_1d = (out_shape[0], out_shape[1], out_shape[3])
    x2, w2 = xo.reshaped((B, C, 1, L)), wo.reshaped((M, Cw, 1, K))
    if out is None:
        result = _conv(x2, w2, None, out_shape, params, variant, precision, stream)
        if isinstance(result, np.ndarray):
            return result.reshape(out_shape_1d)
        result.shape = out_shape_1d  # a fresh DeviceArray of ours: same memory, 1-D shape
        return result
    if is_device_array(out):
        op = as_operand(out, "out", 3, "(B, M, L_out)")
        if op.shape != out_shape_1d:
            raise ConvError(f"out must have shape {out_shape_1d}, got {op.shape}")
        _conv(x2, w2, _Reshaped(op, out_shape), out_shape, params, variant, precision, stream)
    else:
        _conv(x2, w2, host_output(out, out_shape_1d).reshape(out_shape), out_shape, params, variant,
              precision, stream)
    return out


class _Reshaped:
    """A device operand seen with another (same-size) shape, for conv1d's `out`."""

    def __init__(self, op: Operand, shape):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<f4", "data": (op.ptr, False),
                                         "strides": None, "version": 3, "stream": op.stream}
