"""The public convolution API: conv2d, conv1d, Conv2dPlan, and what variants exist.

One call: operands checked once (pyconv._arrays) -> a cached plan for (device, problem, variant,
config) in which the library resolved `auto` and the launch configuration once -> one C call that
launches on the operands' device and the caller's stream -> the result in the caller's kind of array.
Device arrays in: the call enqueues and returns (no host synchronisation unless sync=True). NumPy in:
the result is ready when the call returns.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import _args, _problem
from . import device as _device
from ._arrays import ITEMSIZE, Operand, as_operand, check_output, layouts_coincide, new_output
from ._lib import ConvError, check, ffi, lib, release_on_collect
from ._memory import require_host
from ._problem import Epilogue, ReluMaxPool, pair  # noqa: F401 - ReluMaxPool re-exported by the package
from ._streams import _torch_current_stream, default_stream, handle_of, wait_for_producers

PRECISIONS = tuple(_problem.PRECISIONS)


@dataclass(frozen=True)
class VariantInfo:
    name: str
    idea: str
    on_device: bool      # runs on the GPU (else on the host: cpu)
    exact: bool          # fp32 arithmetic; False: reduced precision (fp16 / TF32 inside)
    max_rel_error: float  # relative L2 error bound the variant is tested to (fp32 in and out)
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


def variant_id(variant: str, precision: str = "exact") -> int:
    """The library's id for a variant name ('auto' maps to CONV_AUTO, or CONV_AUTO_FAST for the legacy
    calls with precision="fast")."""
    if not isinstance(variant, str):
        raise ConvError(f"variant must be a name (str), got {type(variant).__name__}")
    if precision not in PRECISIONS:
        raise ConvError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if "\x00" in variant:
        raise ConvError(f"variant name {variant!r} contains a NUL character")
    if variant == "auto" and precision == "fast":
        variant = "auto_fast"
    found = ffi().new("int*")
    check(lib().conv_variant_find(variant.encode(), found))
    return found[0]


def make_params(x_shape, w_shape, stride, padding, dilation):
    """Legacy conv_params (f32 NCHW, groups 1) for x_shape and w_shape, checked by the library."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ConvError(f"x must be (B, C, H, W) and w (M, C, KH, KW), got {tuple(x_shape)}, {tuple(w_shape)}")
    B, C, H, W = x_shape
    M, Cw, KH, KW = w_shape
    if C != Cw:
        raise ConvError(f"channel mismatch: x has C={C} channels but w has {Cw} (w is (M, C, KH, KW))")
    (sh, sw), (ph, pw), (dh, dw) = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    p = ffi().new("conv_params*", dict(B=B, C=C, H=H, W=W, M=M, KH=KH, KW=KW, stride_h=sh, stride_w=sw,
                                       pad_h=ph, pad_w=pw, dilation_h=dh, dilation_w=dw))
    oh, ow = ffi().new("int64_t*"), ffi().new("int64_t*")
    check(lib().conv_output_size(p, oh, ow))
    return p, (B, M, oh[0], ow[0])


# ---- plans ----

class _Plan:
    """A C plan handle: the problem bound to a concrete variant, configuration and device."""
    __slots__ = ("handle", "variant", "config", "device", "on_device", "workspace_bytes", "__weakref__")

    def __init__(self, vid: int, problem, config: Optional[str], device: int):
        f, l = ffi(), lib()
        out = f.new("conv_plan**")
        check(l.conv2d_plan_create(vid, problem, config.encode() if config else f.NULL, device, out))
        self.handle = out[0]
        release_on_collect(self, l.conv2d_plan_destroy, self.handle)
        info = f.new("conv_plan_info*")
        check(l.conv2d_plan_get_info(self.handle, info))
        self.variant = f.string(info.variant_name).decode()
        self.config = f.string(info.config_name).decode()
        self.device = int(info.device)
        self.on_device = bool(info.on_device)
        self.workspace_bytes = int(info.workspace_bytes)


_PLAN_CACHE_SIZE = 512
_plans: "OrderedDict[tuple, _Plan]" = OrderedDict()
_plans_lock = threading.Lock()


def _cached_plan(device: int, key: tuple, problem, vid: int, config: Optional[str]) -> _Plan:
    """LRU cache of plans keyed by device, problem, variant and config: a repeated call resolves nothing."""
    k = (device, key, vid, config)
    with _plans_lock:
        plan = _plans.get(k)
        if plan is not None:
            _plans.move_to_end(k)
            return plan
    plan = _Plan(vid, problem, config, device)  # may tune for seconds: outside the lock
    with _plans_lock:
        _plans[k] = plan
        while len(_plans) > _PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def clear_plan_cache() -> None:
    """Forgets the cached plans (e.g. after pyconv.tuning.clear())."""
    with _plans_lock:
        _plans.clear()


def _forget_after_fork() -> None:
    """In a forked child: the parent's plans may be GPU plans, which cannot run here (the library refuses
    CUDA in a child forked after CUDA started), and a lock another parent thread held stays held. The
    child starts with none of them; auto then plans on what this process can use."""
    global _plans_lock
    _plans_lock = threading.Lock()
    _plans.clear()
    _calls.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _current_device() -> int:
    d = ffi().new("int*")
    check(lib().conv_get_device(d))
    return d[0]


def _gpu_usable() -> bool:
    return _device.device_count() > 0


# ---- running ----

def _device_argument(device) -> Optional[int]:
    """None, or the index of a GPU of this machine (0 also where there is none: then the host runs it)."""
    return None if device is None else _args.device_index(device, count=_device.device_count())


def _config_argument(config, variant) -> Optional[str]:
    """config: None or the name of one of the variant's launch configurations."""
    if config is None:
        return None
    config = _args.text(config, "config")
    if variant == "auto":
        raise ConvError("config pins a launch configuration of a named variant; auto picks its own")
    return config


def _out_dtype_argument(out_dtype, like: Operand) -> str:
    """The result's dtype name: out_dtype (a name, NumPy or torch dtype) or x's."""
    if out_dtype is None:
        return like.dtype
    name = _dtype_name(out_dtype) if isinstance(out_dtype, (str, np.dtype, type)) or \
        type(out_dtype).__module__ == "torch" else None
    if name not in ITEMSIZE:
        raise ConvError(f"out_dtype must be float32, float16 or bfloat16 (a name or a NumPy / torch dtype), got "
                        f"{out_dtype!r}")
    if name == "bfloat16" and like.kind == "numpy":
        raise ConvError("out_dtype='bfloat16' needs PyTorch tensors: NumPy has no bfloat16 (use float32 or float16)")
    return name


def _call_device(ops, device_arg) -> int:
    """The device that holds the operands (all one), or -1 when they are all host memory; `device=`
    must agree with device operands (for host operands it picks the GPU, in _plan_for_call)."""
    if device_arg is not None:
        device_arg = _device_argument(device_arg)
    device = -1
    for op, _ in ops:
        if op is not None and op.device >= 0 and op.device != device:
            if device >= 0:
                where = ", ".join(f"{name} on device {o.device}" for o, name in ops if o is not None and o.device >= 0)
                raise ConvError(f"operands are on different devices ({where}); move them to one device")
            device = op.device
    if device >= 0 and device_arg is not None and device_arg != device:
        raise ConvError(f"device={device_arg}, but the operands are on device {device}")
    return device


def _torch_allocates_on(device: int, stream: int):
    """A context in which PyTorch's allocator serves `stream` (not its current stream): memory a call writes
    on `stream` then goes back to that stream's pool when freed, so nothing reuses it before the call's
    kernels are done. (record_stream would record an event on `stream` at the free, which crashes once a
    pyconv.Stream or foreign stream has been destroyed.)"""
    if stream == _torch_current_stream(device):
        return contextlib.nullcontext()
    torch = sys.modules["torch"]
    return torch.cuda.stream(torch.cuda.ExternalStream(stream, device=torch.device("cuda", device)))


def _workspace(plan: _Plan, like: Operand, stream: int, stream_object=None):
    """Scratch for one call: from PyTorch's allocator for torch operands, else from pyconv's pool,
    freed in the stream's order once the call's kernels are done."""
    if like.kind == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        with _torch_allocates_on(plan.device, stream):
            ws = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=torch.device("cuda", plan.device))
        return ws, ws.data_ptr()
    ws = _device.DeviceArray((plan.workspace_bytes,), np.uint8, device=plan.device,
                             stream=_owner_or_handle(stream_object, stream))
    return ws, ws.ptr


def _owner_or_handle(stream, handle: int):
    """The stream object to allocate on: a pyconv.Stream itself (kept alive by what is allocated on
    it), else the handle."""
    return stream if isinstance(stream, _device.Stream) else handle


def _launch(plan: _Plan, x: int, w: int, bias: Optional[int], y: int, stream: int, like: Operand,
            stream_object=None) -> None:
    f = ffi()
    keep, ws_ptr = (None, 0)
    if plan.workspace_bytes:
        keep, ws_ptr = (_workspace(plan, like, stream, stream_object) if plan.on_device
                        else _host_workspace(plan.workspace_bytes))
    # plan_launch: where every operand lives is known here (framework metadata, or one pointer query
    # per array interface operand in _arrays), so the C side does not ask CUDA again.
    check(lib().conv2d_plan_launch(plan.handle, f.cast("void*", x), f.cast("void*", w),
                                f.cast("void*", bias or 0), f.cast("void*", y), f.cast("void*", ws_ptr),
                                plan.workspace_bytes, f.cast("void*", stream)))
    if isinstance(keep, _device.DeviceArray):
        keep.used_on(stream)
    del keep  # device scratch goes back to its pool in stream order; host scratch after the (blocking) call


def _host_workspace(nbytes: int):
    a = np.empty(nbytes, np.uint8)
    return a, a.ctypes.data


def _dtype_name(dtype) -> Optional[str]:
    """A dtype's name ("float32", ...), None for what is no dtype."""
    if isinstance(dtype, (np.dtype, type)):
        try:
            return np.dtype(dtype).name
        except TypeError:
            return None
    return str(dtype).replace("torch.", "")


# (device argument, operand signature, arguments) -> (plan, output shape, y dtype): a repeated call
# builds no problem and resolves nothing (arguments given as lists are not hashable and skip it).
_calls: dict = {}
_PLAIN_TYPES = frozenset((int, str, type(None), ReluMaxPool))


def _plan_for_call(xo: Operand, wo: Operand, bo: Optional[Operand], dev: int, device_arg, args: tuple):
    stride, padding, dilation, groups, epilogue, variant, precision, config, out_dtype = args
    if wo.dtype != xo.dtype:
        raise ConvError(f"w has dtype {wo.dtype} but x has {xo.dtype}; pass both in one dtype")
    y_dtype = _out_dtype_argument(out_dtype, xo)
    if bo is not None and (bo.shape != (wo.shape[0],) or bo.dtype != y_dtype):
        raise ConvError(f"bias must have shape ({wo.shape[0]},) and the result's dtype {y_dtype}, got "
                        f"{bo.shape} {bo.dtype}")
    config = _config_argument(config, variant)
    vid = variant_id(variant)
    precision = _precision_for(variant, vid, precision)
    problem, key, out_shape = _problem.make_problem(
        xo.shape, wo.shape, bias=bo is not None, stride=stride, padding=padding, dilation=dilation, groups=groups,
        epilogue=epilogue, precision=precision, x_dtype=xo.dtype, y_dtype=y_dtype, x_layout=xo.layout,
        w_layout="MCKK" if wo.layout == "NCHW" else "MKKC")
    if dev >= 0:
        plan_device = dev
    elif variant == "cpu" or not _gpu_usable():
        plan_device = -1
    else:  # host operands on a GPU variant: the GPU `device=` names, else the current one
        plan_device = _device_argument(device_arg) if device_arg is not None else _current_device()
    return _cached_plan(plan_device, key, problem, vid, config), out_shape, y_dtype


_COMPUTE_NAMES = {v: k for k, v in _problem.PRECISIONS.items()}


def _precision_for(variant: str, vid: int, precision: Optional[str]) -> str:
    """precision=None: "exact" for auto; a named variant runs at the precision its arithmetic needs."""
    if precision is not None:
        return precision
    if variant in ("auto", "auto_fast"):
        return "fast" if variant == "auto_fast" else "exact"
    caps = ffi().new("conv_variant_caps*")
    check(lib().conv_variant_get_caps(vid, caps))
    return _COMPUTE_NAMES[caps.compute]


def _memory(op: Operand) -> np.ndarray:
    """A dense host operand's memory, in memory order, as flat bytes: the same for NumPy arrays and torch CPU
    tensors of any dtype (bfloat16 has no NumPy type) and either layout."""
    return np.frombuffer(ffi().buffer(ffi().cast("char*", op.ptr), op.nbytes), np.uint8)


def _data_ptr(y) -> int:
    """The pointer of an output this module created (torch, CuPy, DeviceArray or NumPy)."""
    if hasattr(y, "data_ptr"):
        return y.data_ptr()
    if isinstance(y, np.ndarray):
        return y.ctypes.data
    if hasattr(y, "data") and hasattr(y.data, "ptr"):
        return y.data.ptr
    return y.ptr


def _host_need(xo: Operand, wo: Operand, bo: Optional[Operand], plan: _Plan, out_shape, y_dtype, out, dev: int):
    """Bytes of new host memory a call takes: dense copies of strided views, a host result, host workspace."""
    need = sum(op.nbytes for op in (xo, wo, bo) if op is not None and op.strided)
    if out is None and dev < 0:
        need += math.prod(out_shape) * ITEMSIZE[y_dtype]
    if not plan.on_device:
        need += plan.workspace_bytes
    return need


def _layout_from_out(xo: Operand, yo: Optional[Operand]) -> Operand:
    """x as NHWC where its two layouts coincide (C = 1, or a 1x1 plane) and `out` is NHWC: the result's
    layout is x's, and such an x is in both."""
    if yo is not None and yo.layout == "NHWC" and xo.layout == "NCHW" and layouts_coincide(xo.shape) \
            and not layouts_coincide(yo.shape):
        return dataclasses.replace(xo, layout="NHWC")
    return xo


def _empty_result(xo: Operand, wo: Operand, bo, out, stride, padding, dilation, groups, epilogue, out_dtype, device):
    """x with no images (B = 0) or no channels (C = 0): the empty result F.conv2d gives, (0, M, OH, OW) and
    (B, 0, OH, OW), with every other argument checked as for any call, and nothing launched."""
    dev = _call_device(((xo, "x"), (wo, "w"), (bo, "bias")), device)
    B, C, H, W = xo.shape
    M, Cg, KH, KW = wo.shape
    if C != Cg * _problem.integer(groups, "groups"):
        raise ConvError(f"channel mismatch: x has C={C} channels but w has {Cg} per group x groups={groups}")
    y_dtype = _out_dtype_argument(out_dtype, xo)
    # The output size of the same layer with one image of one channel per group.
    _, _, (_, _, OH, OW) = _problem.make_problem((1, groups, H, W), (M, 1, KH, KW), stride=stride, padding=padding,
                                                 dilation=dilation, groups=groups, epilogue=epilogue)
    shape = (B, M if C else 0, OH, OW)
    if out is not None:
        check_output(_out_operand(out), shape, y_dtype, xo.layout, dev, ())
        return out
    return new_output(xo, shape, y_dtype, xo.layout, dev, 0)


def _run(xo: Operand, wo: Operand, bo: Optional[Operand], out, *, stride, padding, dilation, groups, epilogue,
         variant: str, precision: str, out_dtype, stream, config, sync: bool, device):
    sync = _args.flag(sync, "sync")
    if xo.shape[0] == 0 or xo.shape[1] == 0:
        return _empty_result(xo, wo, bo, out, stride, padding, dilation, groups, epilogue, out_dtype, device)
    yo = _out_operand(out) if out is not None else None
    xo = _layout_from_out(xo, yo)
    ops = ((xo, "x"), (wo, "w"), (bo, "bias"))
    dev = _call_device(ops, device)
    stream_handle = handle_of(stream) if stream is not None else None  # checked on every path
    args = (stride, padding, dilation, groups, epilogue, variant, precision, config, out_dtype)
    # True, 1.0 and 1 are equal as dict keys but not as arguments (only 1 is valid): arguments of exactly
    # these types key as they are, anything else (tuples, dtypes, ...) by its repr.
    key_args = args if _PLAIN_TYPES.issuperset(map(type, args)) else repr(args)
    signature = (dev, device, xo.shape, xo.dtype, xo.layout, wo.shape, wo.dtype, wo.layout,
                 None if bo is None else (bo.shape, bo.dtype), key_args)
    hit = _calls.get(signature)
    if hit is None:
        hit = _plan_for_call(xo, wo, bo, dev, device, args)
        if len(_calls) >= 4 * _PLAN_CACHE_SIZE:
            _calls.clear()
        _calls[signature] = hit
    plan, out_shape, y_dtype = hit
    on_host = dev < 0
    if not on_host and not plan.on_device:
        raise ConvError(f"variant '{plan.variant}' runs on host memory, but the operands are on device {dev}: "
                        f"choose a GPU variant for device arrays")
    if yo is not None:  # every check before any copy or allocation
        check_output(yo, out_shape, y_dtype, xo.layout, -1 if on_host else plan.device, ops)
    require_host(_host_need(xo, wo, bo, plan, out_shape, y_dtype, out, dev), "the result and copies of the inputs")
    if xo.strided or wo.strided or (bo is not None and bo.strided):
        xo, wo, bo = xo.dense(), wo.dense(), bo.dense() if bo is not None else None
        ops = ((xo, "x"), (wo, "w"), (bo, "bias"))
    if on_host and not plan.on_device:  # host operands, host variant: run in place, blocking
        y = new_output(xo, out_shape, y_dtype, xo.layout, -1, 0) if out is None else out
        yo = yo or _out_operand(y)
        _launch(plan, xo.ptr, wo.ptr, bo.ptr if bo else None, yo.ptr, 0, xo)
        return y
    s = stream_handle if stream_handle is not None else default_stream((xo, wo, bo), plan.device)
    if on_host:
        return _run_host_operands_on_gpu(plan, xo, wo, bo, out, yo, out_shape, y_dtype, s)
    uploads = []  # host operands of a device call (e.g. NumPy weights): copied to the device for this call

    def ptr(op: Optional[Operand]):
        if op is None or op.device >= 0:
            return op.ptr if op is not None else None
        copy = _device.DeviceArray.from_host(_memory(op), stream=s, device=plan.device)
        uploads.append(copy)
        return copy.ptr

    wait_for_producers((xo, wo, bo), s)
    if out is None:
        torch_result = stream_handle is not None and "torch" in sys.modules and xo.kind in ("torch", "dlpack")
        with _torch_allocates_on(plan.device, s) if torch_result else contextlib.nullcontext():
            y = new_output(xo, out_shape, y_dtype, xo.layout, plan.device, _owner_or_handle(stream, s))
        y_ptr = _data_ptr(y)
    else:
        y = out
        y_ptr = yo.ptr
    _launch(plan, ptr(xo), ptr(wo), ptr(bo), y_ptr, s, xo, stream)
    if out is None and isinstance(y, _device.DeviceArray):
        y.used_on(s)
    if sync or uploads:
        check(lib().conv_stream_synchronize(ffi().cast("void*", s)))
    return y


def _run_host_operands_on_gpu(plan: _Plan, xo, wo, bo, out, yo, out_shape, y_dtype, stream: int):
    """NumPy in, NumPy out on a GPU variant: upload, run, download; blocking."""
    y = new_output(xo, out_shape, y_dtype, xo.layout, -1, 0) if out is None else out
    yo = yo or _out_operand(y)
    d = [None if op is None else _device.DeviceArray.from_host(_memory(op), stream=stream, device=plan.device)
         for op in (xo, wo, bo)]
    host = _memory(yo)
    y_dev = _device.DeviceArray(host.shape, host.dtype, device=plan.device, stream=stream)
    _launch(plan, d[0].ptr, d[1].ptr, d[2].ptr if d[2] is not None else None, y_dev.ptr, stream, xo)
    host[...] = y_dev.get(stream)
    return y


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, *, epilogue: Epilogue = None,
           variant: str = "auto", precision: Optional[str] = None, out=None, out_dtype=None, stream=None,
           config: Optional[str] = None, sync: bool = False, device: Optional[int] = None) -> Any:
    """2-D convolution (cross-correlation, as torch.nn.functional.conv2d), then the fused epilogue.

    x: (B, C, H, W), w: (M, C/groups, KH, KW), bias: (M,) or None — NumPy arrays, PyTorch tensors (CPU
    or CUDA, parameters too), CuPy arrays, or any __cuda_array_interface__ / DLPack device array, used
    in place. float32, float16 or bfloat16 (bfloat16 through PyTorch); x and w of one dtype; 4-D tensors
    NCHW (contiguous) or NHWC (channels_last), used as they are.
    stride, dilation: int or (h, w); padding: int, (h, w), "valid", "same" (stride 1; an odd total is
    split as PyTorch does, the larger half after) or "causal" (along W only: dilation_w*(KW-1) zeros
    before, none after; see conv1d); groups: C and M divisible by it.
    epilogue: None, "relu", "silu" (v * sigmoid(v)) or pyconv.ReluMaxPool(kernel, stride=None,
    ceil_mode=False), applied to (conv + bias) before the store.
    variant: a name from pyconv.variants(), or "auto" (the fastest variant for the problem here);
    precision: "exact" (fp32 arithmetic), "tf32" (TF32 operands), "half" (fp16 / bf16 operands, fp32 sums, as
    cuDNN's) or "fast" (any of these, and fp16 partial sums: the `fp16` variant);
    default: "exact" for auto, and the precision a named variant's arithmetic needs.
    out: an output array of the result's shape (B, M, OH, OW), dtype and layout, not overlapping the
    inputs; out_dtype: the result's dtype (default x's).
    stream: the stream to run on (pyconv.Stream, torch/cupy stream, int handle); default: PyTorch's or
    CuPy's current stream for their arrays, else the legacy default stream. device: the GPU for NumPy
    inputs (default the current one); device arrays run on their own device.
    Returns an array of the caller's kind: NumPy for NumPy inputs (ready on return), a torch tensor for
    torch inputs, a CuPy array for CuPy inputs, else a pyconv.DeviceArray — on the inputs' device, with
    the work enqueued on the stream (sync=True waits for it).
    """
    y = _via_torch_op("conv2d", 4, x, w, bias, stride, padding, dilation, groups, epilogue, variant, precision, out,
                      out_dtype, stream, config, sync, device)
    if y is not None:
        return y
    xo = as_operand(x, "x", 4, "(B, C, H, W)")
    wo = as_operand(w, "w", 4, "(M, C/groups, KH, KW)")
    bo = as_operand(bias, "bias", 1, "(M,)") if bias is not None else None
    return _run(xo, wo, bo, out, stride=stride, padding=padding, dilation=dilation, groups=groups,
                epilogue=epilogue, variant=variant, precision=precision, out_dtype=out_dtype, stream=stream,
                config=config, sync=sync, device=device)


def _recorder(x, w, bias) -> Optional[str]:
    """What must record this call of torch tensors, which it sees only through pyconv.torch's operator:
    "autograd" (one requires grad, with grad enabled) or "torch.jit.trace" (tracing); None for neither."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor = torch.Tensor  # (no generator: every torch call asks, and one costs ~0.5 us)
    if not (isinstance(x, tensor) or isinstance(w, tensor)):
        return None
    if torch._C._get_tracing_state():  # a call by pointers would leave the trace an empty tensor
        return "torch.jit.trace"
    if torch.is_grad_enabled() and ((isinstance(x, tensor) and x.requires_grad)
                                    or (isinstance(w, tensor) and w.requires_grad)
                                    or (isinstance(bias, tensor) and bias.requires_grad)):
        return "autograd"
    return None


def _given(options: dict) -> list:
    """The names of the options (out, out_dtype, stream, config, sync, device) a call sets."""
    return [k for k, value in options.items() if value is not None and not (k == "sync" and value is False)]


def _torch_op_takes(padding, epilogue) -> bool:
    """pyconv.torch's conv ops take neither causal padding nor SiLU (pyconv.torch.causal_conv1d does)."""
    return not (isinstance(padding, str) and padding == "causal") and not (isinstance(epilogue, str) and
                                                                           epilogue == "silu")


def _via_torch_op(name: str, ndim: int, x, w, bias, stride, padding, dilation, groups, epilogue, variant, precision,
                  out, out_dtype, stream, config, sync, device):
    """conv2d's / conv1d's result through pyconv.torch's operator where the call goes there
    (_torch_op_route), else None (the generic path)."""
    plain = out is None and out_dtype is None and stream is None and config is None and sync is False and device is None
    route = _torch_op_route(x, w, bias, ndim, variant, plain and _torch_op_takes(padding, epilogue))
    if route is None:
        return None
    options = None if route == "plain" else dict(out=out, out_dtype=out_dtype, stream=stream, config=config,
                                                 sync=sync, device=device)
    return _through_torch_op(name, route, x, w, bias, stride, padding, dilation, groups, epilogue, variant,
                             precision, options)


def _torch_op_route(x, w, bias, ndim: int, variant, plain: bool) -> Optional[str]:
    """Whether and why the call goes through pyconv.torch's operator: "autograd" or "torch.jit.trace" (it
    must record the call), "plain" (no option set, on CUDA tensors: pyconv.torch's engine runs it for less
    host time), or None (the generic path)."""
    recorder = _recorder(x, w, bias)
    if recorder is not None:
        return recorder
    return "plain" if plain and _plain_torch_call(x, w, bias, ndim, variant) else None


def _plain_torch_call(x, w, bias, ndim: int, variant) -> bool:
    """CUDA torch tensors of one supported dtype and device, x of `ndim` dimensions, a GPU variant or auto:
    pyconv.torch's engine runs the call for a third of the generic path's host cost (its plans are keyed on
    the tensors' own metadata), with the same result, stream and allocator."""
    torch = sys.modules.get("torch")
    if torch is None or type(x) is not torch.Tensor or type(w) is not torch.Tensor or x.dim() != ndim \
            or variant == "cpu":
        return False
    if bias is not None and (type(bias) is not torch.Tensor or bias.dtype != x.dtype or bias.device != x.device):
        return False
    return (x.is_cuda and x.dtype == w.dtype and x.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and x.device == w.device)


_op_precisions: dict = {}
_torch_op = None  # pyconv.torch._op once a call went through it


def _through_torch_op(name: str, route: str, x, w, bias, stride, padding, dilation, groups, epilogue, variant,
                      precision, options: dict):
    """The call through the operator pyconv.torch registers with autograd (PyTorch's convolution gradients),
    so that gradients reach tensors that require them, and that torch.jit.trace records: returning a
    detached result, or one written by pointer, would drop them silently. route: _torch_op_route's. What the
    operator has no place for is refused in words: options (the call's) and operands that are not tensors."""
    if route != "plain":
        given = _given(options)
        if given:
            remedy = "call under torch.no_grad()" if route == "autograd" else "call it outside the trace"
            what = "on tensors that require grad" if route == "autograd" else "while torch.jit.trace records"
            raise ConvError(f"{', '.join(given)} cannot be used {what} ({route} records this call through "
                            f"pyconv.torch.{name}); {remedy}, or drop {given[0]}=")
        tensor = sys.modules["torch"].Tensor
        for a, arg in ((x, "x"), (w, "w"), (bias, "bias")):
            if a is not None and not isinstance(a, tensor):
                raise ConvError(f"{arg} is a {type(a).__module__}.{type(a).__name__}, but {route} records this "
                                f"call through pyconv.torch.{name}, which takes torch tensors: pass {arg} as one "
                                "(torch.as_tensor)")
    global _torch_op
    if _torch_op is None:
        from .torch import _op  # torch's operator registrations, on first use (an import statement costs ~1 us)
        _torch_op = _op
    key = (variant, precision)
    op_precision = _op_precisions.get(key)
    if op_precision is None:  # pyconv.conv2d's precision rule, not PyTorch's TF32 flags
        op_precision = _op_precisions[key] = _precision_for(variant, variant_id(variant), precision)
    if name == "conv1d":
        return _torch_op.conv1d(x, w, bias, stride, padding, dilation, groups, epilogue=epilogue, variant=variant,
                                precision=op_precision, engine="pyconv", fallback=False)
    return _torch_op.conv2d_positional(x, w, bias, stride, padding, dilation, groups, epilogue, variant,
                                       op_precision, "pyconv", False)


def conv1d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, *, epilogue: Epilogue = None,
           variant: str = "auto", precision: Optional[str] = None, out=None, out_dtype=None, stream=None,
           config: Optional[str] = None, sync: bool = False, device: Optional[int] = None) -> Any:
    """1-D convolution of (B, C, L) signals with (M, C/groups, K) filters, on conv2d's kernels.

    padding: an int, "valid", "same" (as torch.nn.functional.conv1d) or "causal" (dilation*(K-1) zeros
    before, none after: L_out = L, output l sees inputs <= l; sequence models' short conv, with groups = C
    and epilogue "silu"). The epilogues "relu" and "silu" apply; ReluMaxPool pools along L with a (1, k)
    window. Returns (B, M, L_out) of the same kind as conv2d. One decoding step of the causal case:
    pyconv.conv1d_causal_update."""
    y = _via_torch_op("conv1d", 3, x, w, bias, stride, padding, dilation, groups, epilogue, variant, precision, out,
                      out_dtype, stream, config, sync, device)
    if y is not None:
        return y
    xo = as_operand(x, "x", 3, "(B, C, L)")
    wo = as_operand(w, "w", 3, "(M, C/groups, K)")
    bo = as_operand(bias, "bias", 1, "(M,)") if bias is not None else None
    stride2, pad, dilation2, epilogue = _problem.conv1d_as_2d(stride, padding, dilation, epilogue)
    (B, C, L), (M, Cg, K) = xo.shape, wo.shape
    if L < 1 or K < 1:
        raise ConvError(f"x's length L and w's width K must be >= 1, got x {xo.shape} and w {wo.shape}")
    x4, w4 = xo.reshaped((B, C, 1, L)), wo.reshaped((M, Cg, 1, K))
    out4 = None
    if out is not None:
        oo = as_operand(out, "out", 3, "(B, M, L_out)")
        out4 = _Reshaped(oo, (oo.shape[0], oo.shape[1], 1, oo.shape[2]))
    y = _run(x4, w4, bo, out4, stride=stride2, padding=pad, dilation=dilation2, groups=groups, epilogue=epilogue,
             variant=variant, precision=precision, out_dtype=out_dtype, stream=stream, config=config, sync=sync,
             device=device)
    if out is not None:
        return out
    shape3 = (y.shape[0], y.shape[1], y.shape[3])
    return y.reshape(shape3)


class _Reshaped:
    """An operand seen with another shape of the same memory (conv1d's `out` as 4-D)."""

    def __init__(self, op: Operand, shape):
        self.op = op.reshaped(shape)


def _out_operand(out) -> Operand:
    """The output array as an operand; conv1d passes its 3-D `out` seen as 4-D."""
    return out.op if isinstance(out, _Reshaped) else as_operand(out, "out", 4, "(B, M, OH, OW)")


def _plan_from(x_shape, w_shape, arguments: dict) -> "Conv2dPlan":
    """Conv2dPlan.__reduce__'s constructor (pickle calls it with positional arguments only)."""
    return Conv2dPlan(x_shape, w_shape, **arguments)


class Conv2dPlan:
    """One convolution problem bound to one concrete variant and launch configuration, with its
    workspace allocated once: `launch` only checks its arrays and enqueues the kernels (no allocation,
    no synchronisation), so it can be timed, captured in a CUDA graph and overlapped with copies.

    Arguments as conv2d's, plus the operands' dtype ("float32", "float16", "bfloat16"), out_dtype,
    layout ("NCHW" or "NHWC", of x and y), w_layout ("MCKK" or "MKKC"), bias (True: launch takes one)
    and device (the GPU it runs on; default the current one).
    """

    def __init__(self, x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1, *, bias: bool = False,
                 epilogue: Epilogue = None, variant: str = "auto", precision: Optional[str] = None,
                 config: Optional[str] = None, dtype: str = "float32", out_dtype: Optional[str] = None,
                 layout: str = "NCHW", w_layout: str = "MCKK", device: Optional[int] = None):
        if layout not in ("NCHW", "NHWC") or w_layout not in ("MCKK", "MKKC"):
            raise ConvError(f"layout must be NCHW or NHWC and w_layout MCKK or MKKC, got {layout!r}, {w_layout!r}")
        x_shape, w_shape = _args.shape(x_shape, "x_shape", 4), _args.shape(w_shape, "w_shape", 4)
        bias = bias is not None and _args.flag(bias, "bias")  # None: no bias, as in conv2d
        dtype = _args.text(dtype, "dtype")
        out_dtype = None if out_dtype is None else _args.text(out_dtype, "out_dtype")
        config = _config_argument(config, variant)
        self.variant_id = variant_id(variant, precision or "exact")
        precision = _precision_for(variant, self.variant_id, precision)
        problem, self.key, self.out_shape = _problem.make_problem(
            tuple(x_shape), tuple(w_shape), bias=bias, stride=stride, padding=padding, dilation=dilation,
            groups=groups, epilogue=epilogue, precision=precision, x_dtype=dtype, y_dtype=out_dtype,
            x_layout=layout, w_layout=w_layout)
        self.problem = problem
        dev = _device_argument(device)
        self._plan = _Plan(self.variant_id, problem, config, -1 if dev is None else dev)
        self.variant, self.config = self._plan.variant, self._plan.config
        self.device, self.on_device = self._plan.device, self._plan.on_device
        self.workspace_bytes = self._plan.workspace_bytes
        self.x_shape, self.w_shape = tuple(x_shape), tuple(w_shape)
        self.dtype, self.out_dtype = dtype, out_dtype or dtype
        self.layout, self.w_layout, self.has_bias = layout, w_layout, bool(bias)
        self._geometry = (stride, padding, dilation, groups, epilogue, precision)
        if not self.workspace_bytes:
            self._workspace = None
        elif self.on_device:
            self._workspace = _device.DeviceArray((self.workspace_bytes,), np.uint8, device=self.device)
        else:
            self._workspace = np.empty(self.workspace_bytes, np.uint8)

    def __reduce__(self):
        """Pickle, copy.copy and copy.deepcopy give a new plan of the same problem, variant and launch
        configuration (made again where it is unpickled, on the same device number, without tuning): the
        C plan and the workspace are this process's."""
        stride, padding, dilation, groups, epilogue, precision = self._geometry
        arguments = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, bias=self.has_bias,
                         epilogue=epilogue, variant=self.variant, precision=precision, config=self.config,
                         dtype=self.dtype, out_dtype=self.out_dtype, layout=self.layout, w_layout=self.w_layout,
                         device=self.device if self.on_device else None)
        return _plan_from, (self.x_shape, self.w_shape, arguments)

    @property
    def params(self):
        """The legacy conv_params of an fp32 NCHW problem without groups, bias or epilogue (for
        conv2d_time and the bench tool)."""
        fields = dict(self.key)
        return ffi().new("conv_params*", {k: fields[k] for k in (
            "B", "C", "H", "W", "M", "KH", "KW", "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h",
            "dilation_w")})

    def _pointer(self, a, name: str, shape, dtype: str, layout: str, keep: dict, writable: bool = False) -> int:
        if isinstance(a, int) and not isinstance(a, bool):
            if not 0 <= a < 2**64:
                raise ConvError(f"{name} = {a} is not a pointer value")
            return a  # a raw pointer: the caller vouches for it (unchecked)
        if a is None:
            raise ConvError(f"{name} is None")
        op = as_operand(a, name, len(shape), str(shape))
        if writable and op.strided:
            raise ConvError(f"{name} must be dense in {layout} order; it is a strided view")
        # A strided view's layout is known only once copied: its shape, dtype and place are checked first.
        if op.shape != tuple(shape) or op.dtype != dtype or \
                (not op.strided and op.layout != layout and not layouts_coincide(op.shape)):
            raise ConvError(f"{name} must be {tuple(shape)} {dtype} {layout}, got {op.shape} {op.dtype} {op.layout}")
        want = self.device if self.on_device else -1
        if op.device != want:
            raise ConvError(f"{name} is on {'the host' if op.device < 0 else f'device {op.device}'}, but this "
                            f"plan runs on {'the host' if want < 0 else f'device {want}'}")
        if writable and op.readonly:
            raise ConvError(f"{name} is read-only")
        if op.strided:
            require_host(op.nbytes, f"a dense copy of {name}")
            op = op.dense(layout)
        keep[name] = op  # a contiguous copy of a strided NumPy view lives until the launch returns
        return op.ptr

    def launch(self, x, w, y, stream=None, bias=None) -> None:
        """Enqueues y = epilogue(conv(x, w) + bias) on `stream` (default: the legacy default stream).

        x, w, y, bias: arrays of the plan's shapes, dtypes and layouts on the plan's device (host arrays
        for the cpu variant) — checked cheaply — or raw int pointers, which are NOT checked."""
        w_layout = "NCHW" if self.w_layout == "MCKK" else "NHWC"
        keep: dict = {}
        xp = self._pointer(x, "x", self.x_shape, self.dtype, self.layout, keep)
        wp = self._pointer(w, "w", self.w_shape, self.dtype, w_layout, keep)
        yp = self._pointer(y, "y", self.out_shape, self.out_dtype, self.layout, keep, writable=True)
        if self.has_bias != (bias is not None):
            raise ConvError("this plan takes a bias" if self.has_bias else "this plan was made without bias")
        bp = self._pointer(bias, "bias", (self.w_shape[0],), self.out_dtype, "NCHW", keep) if bias is not None else 0
        y_op = keep.get("y")
        for name, op in keep.items():
            if y_op is not None and name != "y" and op.ptr < y_op.ptr + y_op.nbytes and y_op.ptr < op.ptr + op.nbytes:
                raise ConvError(f"y overlaps {name} in memory; pass a separate output array")
        f = ffi()
        ws = self._workspace
        ws_ptr = 0 if ws is None else (ws.ptr if self.on_device else ws.ctypes.data)
        # Raw pointers are not checked here, so the library asks CUDA where they live; checked arrays skip that.
        run = lib().conv2d_plan_run if len(keep) < 3 + (bias is not None) else lib().conv2d_plan_launch
        check(run(self._plan.handle, f.cast("void*", xp), f.cast("void*", wp),
                                    f.cast("void*", bp), f.cast("void*", yp), f.cast("void*", ws_ptr),
                                    self.workspace_bytes, f.cast("void*", handle_of(stream))))
