"""One convolution of real torch tensors on pyconv's kernels (or PyTorch's): the custom op's real kernel
and the eager path of pyconv.torch.conv2d.

Per call: a key of the operands' metadata and the call's Spec -> a cached _Entry (the C plan from
pyconv.api's plan cache, the output's shape and memory format, the workspace size, or "PyTorch's conv")
-> torch.empty for y and the workspace on the input's device (PyTorch's allocator, so CUDA-graph
capture and stream order are PyTorch's) -> one cffi call of conv2d_plan_launch on PyTorch's current
stream. No pointer queries, no host synchronisation, no Python objects beyond the output on a hit.

A miss builds the entry: what our kernels cannot take is refused in words (_fallback); engine
"fastest" times our plan against PyTorch's conv on the call's own operands once, host time and GPU
time apart, and decides for both modes a layer runs in: eager calls (ours only where 5% faster in host
time, which is all that counts in a model bound by the host, as at batch 1, and in GPU time) and CUDA-
graph capture (GPU time only); every decision is kept for decisions().
New shapes tune within the engine's own budget (set_tuning_budget_ms), so that a converted network's
first forward takes seconds, not minutes.
"""
from __future__ import annotations

import os
import re
import threading
import time
from typing import NamedTuple, Optional

import cffi
import torch

from .. import _problem, api, tuning
from .._lib import ConvError, ConvRuntimeError, cdef_source, error_for, ffi, header_path, library_path
from . import _fallback

_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
ENGINES = ("fastest", "pyconv", "torch")


class Spec(NamedTuple):
    """Everything about a call but its operands, hashable (part of the plan key)."""
    stride: tuple           # (h, w)
    padding: tuple          # (h, w), zeros on both sides
    dilation: tuple         # (h, w)
    groups: int
    epilogue: tuple         # (kind, pool_h, pool_w, pool_stride_h, pool_stride_w, ceil): _fallback.EPILOGUE_*
    variant: str            # a pyconv variant name or "auto"
    precision: str          # "exact", "tf32", "half", "fast", or "default": as PyTorch would (TF32 per its cuDNN flag)
    engine: str             # "fastest": ours or PyTorch's, whichever is faster here; "pyconv"; "torch"
    fallback: bool          # False: raise where ours refuses instead of running PyTorch's conv


def _launcher():
    """conv2d_plan_launch declared with integer parameters, from conv.h's own declaration: torch hands
    out pointers as ints, and passing them as uintptr_t saves a cffi cast per pointer per call (the
    same ABI as void* on every platform libconv builds for)."""
    text = cdef_source(header_path().read_text())
    decl = re.search(r"int conv2d_plan_launch\([^;]*\);", text).group(0)
    decl = re.sub(r"(const )?\w+\s*\*\s*(\w+)", r"uintptr_t \2", decl)
    ffi = cffi.FFI()
    ffi.cdef(decl)
    return ffi.dlopen(str(library_path())).conv2d_plan_launch


class _Entry:
    """What a key runs: a C plan (handle not None) or PyTorch's conv (reason: why, None if timed/asked)."""
    __slots__ = ("plan", "handle", "out_shape", "out_strides", "dtype", "device", "memory_format",
                 "workspace_bytes", "reason", "record", "captured")

    def __init__(self, x, memory_format, record: dict, plan=None, out_shape=None, reason=None):
        self.plan = plan              # keeps the C plan (and so the handle) alive while cached here
        self.handle = None if plan is None else int(ffi().cast("uintptr_t", plan.handle))
        self.out_shape = None if out_shape is None else tuple(out_shape)  # (a plain tuple: _fast_empty takes no Size)
        self.out_strides = None       # y's strides: channels-last where x is NHWC, else contiguous
        if out_shape is not None:
            _, m, oh, ow = out_shape
            self.out_strides = (oh * ow * m, 1, ow * m, m) if memory_format is _CL else (m * oh * ow, oh * ow, ow, 1)
        self.dtype = x.dtype
        self.device = x.device
        self.memory_format = memory_format
        self.workspace_bytes = 0 if plan is None else plan.workspace_bytes
        self.reason = reason
        self.record = record
        self.captured = None          # the entry that runs during CUDA-graph capture where it is another one


_entries: dict = {}
_records: list = []
_lock = threading.Lock()
# Set (per thread) by a module whose call adds a bias that its CUDA-graph captures leave out: a folded batch norm's
# (batchnorm.py) where the conv has none. Such a capture runs PyTorch's conv without a bias, which saves cuDNN's
# separate bias kernel: PyTorch's side of the graph timing leaves it out too.
capture_without_bias = threading.local()
_launch = None
_empty = torch.empty
_U8 = torch.uint8
_CL = torch.channels_last
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# The allocation functions inductor's generated code calls (C++, no argument parsing or dispatch: 0.55 against
# x.new_empty's 1.38 us on a CPU): size, strides and dtype, on the host / the current CUDA device. Internal to
# PyTorch; where a version lacks them, x.new_empty.
_guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_fast_empty_cpu = getattr(_guards, "_empty_strided_cpu", None)
_cuda_device = getattr(torch._C, "_cuda_getDevice", None)  # (CPU-only builds lack it: no CUDA tensor there)
_fast_empty_cuda = getattr(_guards, "_empty_strided_cuda", None) if _cuda_device is not None else None


def _no_fast_empty() -> None:
    global _fast_empty_cpu, _fast_empty_cuda
    _fast_empty_cpu = _fast_empty_cuda = None


capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: False)  # (CPU-only builds lack it)
DEFAULT_TUNING_BUDGET_MS = 300.0
_tuning_budget_ms: Optional[float] = DEFAULT_TUNING_BUDGET_MS
# What torch.backends.cudnn.allow_tf32 reads, without the module property (1.4 us of every fp32 call).
_cudnn_allow_tf32 = getattr(torch._C, "_get_cudnn_allow_tf32", lambda: torch.backends.cudnn.allow_tf32)


# What the call sites of compiled graphs (_lowering.py) run from their second call: forgotten with the entries.
sites: dict = {}


def _forget_after_fork() -> None:
    """A forked child starts without the parent's entries: their plans may be GPU plans it cannot run
    (pyconv.api forgets its plans too), and a lock a parent thread held stays held."""
    global _lock
    _lock = threading.Lock()
    _entries.clear()
    _workspaces.clear()
    sites.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _dense(t):
    """(t, NHWC?): t as it is when C-contiguous or channels-last dense, else a contiguous copy."""
    if t.is_contiguous():
        return t, False
    if t.dim() == 4 and t.is_contiguous(memory_format=_CL):
        return t, True
    return t.contiguous(), False


def _precision(spec: Spec, dtype, device: int) -> str:
    if spec.precision != "default":
        return spec.precision
    if dtype is not torch.float32:
        # the operands are fp16/bf16 already: fp32 accumulation, as cuDNN's; not "fast", whose fp16 partial sums
        # (the `fp16` variant, twice the error bound) the tuner chose for some of mobilenet_v2's fp16 layers
        return "half"
    return "tf32" if device >= 0 and _cudnn_allow_tf32() else "exact"


def _key(x, w, b, spec: Spec):
    """(x, w, b as the kernels take them, x's device, the entries' key, x NHWC?, w NHWC?). Every call
    makes one: written for host time (the contiguous case first, _precision inlined)."""
    x_nhwc = w_nhwc = False
    if not x.is_contiguous():
        x, x_nhwc = _dense(x)
    if not w.is_contiguous():
        w, w_nhwc = _dense(w)
    if b is not None:
        b = b.contiguous()
    dev = x.get_device()
    dtype = x.dtype
    precision = spec.precision
    if precision == "default":
        precision = _precision(spec, dtype, dev)
    key = (x.shape, dtype, x_nhwc, dev, w.shape, w.dtype, w_nhwc, w.get_device(),
           None if b is None else (b.shape, b.dtype, b.get_device()), spec, precision)
    return x, w, b, dev, key, x_nhwc, w_nhwc


class Remembered(NamedTuple):
    """What a converted Conv2d / Conv1d remembers of this engine's eager decision for an input (shape, dtype,
    device; Conv1d's as (B, C, 1, L) views), so that
    its later eager calls skip the lookup: PyTorch's conv (entry None), or our plan's entry with what the
    operands must still be for it to apply (_op.run_remembered checks them at each call)."""
    entry: Optional[_Entry]   # our plan; None: PyTorch's conv
    memory_format: object     # the format PyTorch's conv answers in (entry None)
    captured: bool            # CUDA-graph capture runs the other engine: a call while capturing asks here
    x_nhwc: bool              # the operands' layouts, shapes and precision the entry was made for
    w_nhwc: bool
    w_shape: tuple
    bias_shape: Optional[tuple]
    precision: str


def remembered(x, w, b, spec: Spec) -> Optional[Remembered]:
    """This engine's decision for eager calls on these operands, for a module to remember (our plan, or
    PyTorch's conv by engine "torch" or as "fastest" timed it); None where there is none to remember (not
    seen, or a refusal, which is counted at every call)."""
    x, w, b, _, key, x_nhwc, w_nhwc = _key(x, w, b, spec)
    entry = _entries.get(key)
    if entry is None or entry.reason is not None:
        return None
    return _remembered(entry, x_nhwc, w_nhwc, w, b, key[-1])


def _remembered(entry: _Entry, x_nhwc: bool, w_nhwc: bool, w, b, precision: str) -> Remembered:
    return Remembered(entry if entry.handle is not None else None, entry.memory_format, entry.captured is not None,
                      x_nhwc, w_nhwc, w.shape, None if b is None else b.shape, precision)


def set_tuning_budget_ms(ms: Optional[float]) -> None:
    """Time to tune each new layer shape in, for auto's plans made by pyconv.torch (default 300 ms: a
    converted resnet50's first forward on a new machine takes seconds); None: pyconv.tuning's budget, as
    direct calls (3000 ms unless set). Results go to the same cache as any other tuning."""
    global _tuning_budget_ms
    if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms < float("inf")):
        raise ConvError(f"ms must be a finite number >= 0 or None, got {ms!r}")
    _tuning_budget_ms = None if ms is None else float(ms)


def conv2d(x, w, b, spec: Spec):
    """epilogue(conv(x, w) + b) for 4-D tensors on one device; y in x's memory format and dtype."""
    x, w, b, dev, key, x_nhwc, w_nhwc = _key(x, w, b, spec)
    entry = _entries.get(key)
    if entry is None:
        entry = _new_entry(key, x, w, b, spec, x_nhwc, w_nhwc)
    if entry.captured is not None and capturing():
        entry = entry.captured
    if entry.handle is None:
        if entry.reason is not None:
            _fallback.count(entry.reason)
        return _fallback.torch_conv(x, w, b, spec).contiguous(memory_format=entry.memory_format)
    return _run(entry, x, w, b, dev)


def _run(entry: _Entry, x, w, b, dev: int, y=None):
    # y: the output, or None to allocate it: by inductor's allocation functions where this PyTorch has them (and,
    # for CUDA, x is on the current device, which they allocate on), else x.new_empty, which takes x's dtype and
    # device without parsing them (measured 6.8 vs 8.6 us for torch.empty with them on the H200 host)
    if y is None:
        if dev >= 0:
            fast = _fast_empty_cuda if _fast_empty_cuda is not None and _cuda_device() == dev else None
        else:
            fast = _fast_empty_cpu
        if fast is not None:
            try:
                y = fast(entry.out_shape, entry.out_strides, entry.dtype)
            except TypeError:  # a PyTorch whose internal function takes other arguments: x.new_empty from now on
                _no_fast_empty()
        if y is None:
            y = (x.new_empty_strided(entry.out_shape, entry.out_strides) if entry.memory_format is _CL
                 else x.new_empty(entry.out_shape))
    ws_bytes = entry.workspace_bytes
    stream = _raw_stream(dev) if dev >= 0 else 0
    ws = None
    if ws_bytes and dev >= 0 and ws_bytes <= _SHARED_WORKSPACE_BYTES:
        ws = _stream_workspace(entry.device, dev, stream, ws_bytes)
    elif ws_bytes:
        ws = _empty(ws_bytes, dtype=_U8, device=entry.device)  # freed in stream order
    status = _launch(entry.handle, x.data_ptr(), w.data_ptr(), 0 if b is None else b.data_ptr(), y.data_ptr(),
                     0 if ws is None else ws.data_ptr(), ws_bytes, stream)
    if status:
        raise error_for(status)
    return y


# Eager calls on one CUDA stream share a workspace up to this size (split-K partials at small batches): a stream
# runs its kernels in order, so none overlaps the last (cuBLAS keeps one per stream alike). It saves the
# allocation, about 2 us of a 17 us call on the H200 host. Larger ones (im2col matrices at large batches) are
# allocated per call, so that no stream holds them; at most _SHARED_WORKSPACES streams keep one.
_SHARED_WORKSPACE_BYTES = 8 << 20
_SHARED_WORKSPACES = 16
_workspaces: dict = {}  # (device index, raw stream) -> uint8 tensor allocated on that stream


def _stream_workspace(device, dev: int, stream: int, nbytes: int):
    if capturing():  # a graph's kernels take theirs from the graph's pool: replays may run on any stream
        return _empty(nbytes, dtype=_U8, device=device)
    key = (dev, stream)
    ws = _workspaces.get(key)
    if ws is None or ws.numel() < nbytes:
        if len(_workspaces) >= _SHARED_WORKSPACES:
            _workspaces.clear()
        # a larger one replaces it: the old is freed in stream order after the kernels already enqueued
        ws = _workspaces[key] = _empty(nbytes, dtype=_U8, device=device)
    return ws


# ---- a new key ----

def _refusal(x, w, b, spec: Spec) -> Optional[str]:
    """Why our kernels cannot take these operands, before asking the library (which checks the rest)."""
    for t, name in ((x, "input"), (w, "weight"), (b, "bias")):
        if t is None:
            continue
        if t.dtype not in _DTYPES:
            return f"{name} dtype {t.dtype} (pyconv takes float32, float16 and bfloat16)"
        if t.dtype != x.dtype or t.device != x.device:
            return f"{name} is {t.dtype} on {t.device} but the input {x.dtype} on {x.device}"
        if t.device.type not in ("cpu", "cuda"):
            return f"{name} on {t.device} (pyconv runs CPU and CUDA tensors)"
    if x.dim() != 4 or w.dim() != 4:
        return f"input and weight of {x.dim()} and {w.dim()} dimensions (pyconv takes 4-D, conv1d as 4-D)"
    if b is not None and tuple(b.shape) != (w.shape[0],):  # the library reads M values: checked here
        return f"bias of shape {tuple(b.shape)} for {w.shape[0]} output channels"
    on_gpu = x.device.type == "cuda"
    if spec.variant != "auto" and spec.variant in api.variants() and (spec.variant == "cpu") == on_gpu:
        return f"variant '{spec.variant}' runs on {'the host' if on_gpu else 'the GPU'}, the tensors are on {x.device}"
    return None


def _epilogue_argument(epilogue: tuple):
    kind, ph, pw, sh, sw, ceil = epilogue
    if kind == _fallback.EPILOGUE_RELU_MAXPOOL:
        return _problem.ReluMaxPool((ph, pw), (sh, sw), bool(ceil))
    return "relu" if kind == _fallback.EPILOGUE_RELU else None


def _plan(x, w, b, spec: Spec, precision: str, x_nhwc: bool, w_nhwc: bool):
    """(pyconv.api's cached plan, output shape) for the operands on their device."""
    dev = x.get_device()
    variant = "cpu" if dev < 0 and spec.variant == "auto" else spec.variant
    problem, key, out_shape = _problem.make_problem(
        tuple(x.shape), tuple(w.shape), bias=b is not None, stride=spec.stride, padding=spec.padding,
        dilation=spec.dilation, groups=spec.groups, epilogue=_epilogue_argument(spec.epilogue),
        precision=precision, x_dtype=_DTYPES[x.dtype], x_layout="NHWC" if x_nhwc else "NCHW",
        w_layout="MKKC" if w_nhwc else "MCKK")
    with tuning.thread_budget(_tuning_budget_ms):
        plan = api._cached_plan(dev, key, problem, api.variant_id(variant), None)
    return plan, torch.Size(out_shape)


def _describe(x, w, b, spec: Spec, precision: str, x_nhwc: bool) -> dict:
    return {"device": str(x.device), "input": tuple(x.shape), "weight": tuple(w.shape), "bias": b is not None,
            "dtype": _DTYPES.get(x.dtype, str(x.dtype)), "layout": "NHWC" if x_nhwc else "NCHW",
            "stride": spec.stride, "padding": spec.padding, "dilation": spec.dilation, "groups": spec.groups,
            "epilogue": ("none", "relu", "relu+maxpool")[spec.epilogue[0]], "precision": precision,
            "engine": None, "engine_captured": None, "variant": None, "config": None, "why": None,
            "pyconv_host_ms": None, "torch_host_ms": None, "pyconv_gpu_ms": None, "torch_gpu_ms": None,
            "pyconv_graph_ms": None, "torch_graph_ms": None}


def launch_function():
    """conv2d_plan_launch with integer parameters (_launcher), made once: what every plan launch of
    pyconv.torch calls."""
    global _launch
    if _launch is None:
        _launch = _launcher()
    return _launch


def _new_entry(key, x, w, b, spec: Spec, x_nhwc: bool, w_nhwc: bool) -> _Entry:
    if spec.engine not in ENGINES:
        raise ConvError(f"engine must be one of {ENGINES}, got {spec.engine!r}")
    launch_function()  # _run calls _launch
    precision = key[-1]
    record = _describe(x, w, b, spec, precision, x_nhwc)
    memory_format = _fallback.memory_format_of(x_nhwc)
    if x.numel() == 0 or w.numel() == 0:  # B, C or M = 0: PyTorch's conv gives its (empty) result or error
        record.update(engine="torch", why="an empty operand: PyTorch's conv answers it")
        return _keep(key, spec, record, _Entry(x, memory_format, record))
    reason = _refusal(x, w, b, spec) if spec.engine != "torch" else None
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    if reason is None and capturing and spec.engine != "torch":
        reason = "a new shape first seen during CUDA-graph capture (planning and tuning cannot be captured: " \
                 "run the model once before capturing it)"
    entry = None
    if reason is None and spec.engine != "torch":
        try:
            plan, out_shape = _plan(x, w, b, spec, precision, x_nhwc, w_nhwc)
            entry = _Entry(x, memory_format, record, plan, out_shape)
            record.update(engine="pyconv", variant=plan.variant, config=plan.config, why="pyconv's plan")
        except (ConvError, ConvRuntimeError) as exc:
            if isinstance(exc, ConvError) and not spec.fallback:
                raise  # invalid arguments are the caller's error, not a case our kernels refuse
            reason = str(exc)
    if entry is None:
        if reason is not None:
            _fallback.refuse(reason, spec.fallback)
        record.update(engine="torch", why=reason or "engine='torch' asked for")
        entry = _Entry(x, memory_format, record, reason=reason)
    elif spec.engine == "fastest":
        entry = _fastest(entry, key, x, w, b, spec, record)
    if capturing:
        return entry  # not kept: the next eager call plans it properly
    return _keep(key, spec, record, entry)


def _keep(key, spec: Spec, record: dict, entry: _Entry) -> _Entry:
    if record["engine_captured"] is None:  # one engine for both modes
        record["engine_captured"] = record["engine"]
    with _lock:
        _entries[key] = entry
        _records.append((spec, record))
    return entry


# ---- engine "fastest": ours against PyTorch's conv, on this call's operands, in each mode ----

_TIMING_CALLS, _TIMING_ROUNDS = 10, 3
# GPU cycles the stream sleeps before the timed calls (about 3 ms on the H100 / H200): the host enqueues them
# meanwhile without waiting (its time is its own) and the events see the kernels back to back, as a graph
# replays them.
_SLEEP_CYCLES = 5_000_000
_sleep = getattr(torch.cuda, "_sleep", None)
# A layer whose GPU time is this many times the host time of both paths keeps the GPU busy in eager models too.
_GPU_BOUND = 2.0
# Eager calls run our plan only where it wins by this factor on the clocks compared: a near tie costs the
# converted layer's extra work for nothing, and a layer's timing alone is noisy by a few percent. Measured on
# an H200 (build/diag's eager_margin run, fp32, batch 1, six networks): margins 0 / 5 / 10% gave 0.92 / 0.89 /
# 0.90 of the original's time in geometric mean, densenet121 1.07 / 1.03 / 1.00.
_EAGER_MARGIN = 1.05


def _time_ms(fn, device) -> tuple:
    """(host ms, GPU ms or None on the host) per call of `fn` over back-to-back calls."""
    fn()
    if device.type != "cuda":
        start = time.perf_counter()
        for _ in range(_TIMING_CALLS):
            fn()
        return (time.perf_counter() - start) * 1e3 / _TIMING_CALLS, None
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if _sleep is not None:
        _sleep(_SLEEP_CYCLES)
    start.record()
    began = time.perf_counter()
    for _ in range(_TIMING_CALLS):
        fn()
    host = time.perf_counter() - began
    stop.record()
    stop.synchronize()
    return host * 1e3 / _TIMING_CALLS, start.elapsed_time(stop) / _TIMING_CALLS


def _measure(ours, theirs, device) -> tuple:
    """(ours host, PyTorch host, ours GPU, PyTorch GPU) ms per call, each the best of a few rounds,
    interleaved (clocks and neighbours affect both); the GPU times None on the host."""
    rounds = [(_time_ms(ours, device), _time_ms(theirs, device)) for _ in range(_TIMING_ROUNDS)]

    def best(side: int, clock: int):  # clock 0: host, 1: GPU (None on the host)
        times = [r[side][clock] for r in rounds]
        return None if times[0] is None else min(times)
    return best(0, 0), best(1, 0), best(0, 1), best(1, 1)


def _graph_ms(ours, theirs, device) -> Optional[tuple]:
    """(ours, PyTorch's) GPU ms per call replayed from a CUDA graph of _TIMING_CALLS calls: what a captured
    model pays. Back-to-back launches leave a gap of a few microseconds between kernels, as long as a batch-1
    layer's kernels themselves, which a graph's replay does not: timed that way, a path of one short kernel
    looked faster than PyTorch's in graphs where it was slower (mobilenet_v2 bf16, batch 1, H200: predicted
    264 us of convs against PyTorch's 371, replayed 285 against 200). None on the host, or where either
    side does not capture (its stream timing decides then)."""
    if device.type != "cuda":
        return None
    current, side = torch.cuda.current_stream(device), torch.cuda.Stream(device)
    side.wait_stream(current)
    graphs = []
    try:
        with torch.cuda.stream(side):
            for fn in (ours, theirs):
                graph = torch.cuda.CUDAGraph()
                graphs.append(graph)
                graph.capture_begin(capture_error_mode="thread_local")  # other threads' calls are not ours
                try:
                    for _ in range(_TIMING_CALLS):
                        fn()
                finally:
                    graph.capture_end()
    except (RuntimeError, ConvError, ConvRuntimeError):
        current.wait_stream(side)
        return None
    current.wait_stream(side)
    best = [float("inf"), float("inf")]
    for _ in range(_TIMING_ROUNDS):  # interleaved, as _measure's
        for side_index, graph in enumerate(graphs):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            graph.replay()  # the first replay uploads the graph
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            best[side_index] = min(best[side_index], start.elapsed_time(stop) / _TIMING_CALLS)
    for graph in graphs:
        graph.reset()  # its memory pool back to PyTorch's allocator
    return tuple(best)


def _ours_in_eager(ours_host: float, torch_host: float, ours_gpu, torch_gpu) -> bool:
    """Whether our plan runs a layer's eager calls: faster by _EAGER_MARGIN where the host bounds the model (at
    batch 1 the host's time is all that counts, whatever the GPU saves) and where the GPU does; a layer
    GPU-bound by _GPU_BOUND on both paths is judged by GPU time alone."""
    def wins(ours, theirs):
        return ours * _EAGER_MARGIN <= theirs
    if ours_gpu is None:
        return wins(ours_host, torch_host)
    if min(ours_gpu, torch_gpu) >= _GPU_BOUND * max(ours_host, torch_host):
        return wins(ours_gpu, torch_gpu)
    return wins(ours_host, torch_host) and wins(ours_gpu, torch_gpu)


def _fastest(entry: _Entry, key, x, w, b, spec: Spec, record: dict) -> _Entry:
    """Our plan, or PyTorch's conv where that is faster, for eager calls and for CUDA-graph capture (GPU
    time only): the entry for eager calls, with .captured set where capture runs the other engine. Each
    side is timed through the whole call it takes in a model (pyconv.torch's op path and this lookup, or
    PyTorch's conv as a Conv2d's memo sends it there). A converted layer's eager call runs our plan through
    its memo (_op.run_remembered), so that is what ours is timed through; a functional call that takes the
    engine's lookup costs a few microseconds more of host time than timed."""
    from ._op import conv2d_spec, run_remembered  # the paths a layer's eager call takes (_op imports this)
    fmt = entry.memory_format
    theirs_entry = _Entry(x, fmt, record)
    pick = _remembered(entry, key[2], key[6], w, b, key[-1])

    def ours():
        y = run_remembered(pick, x, w, b, spec)
        return conv2d_spec(x, w, b, spec, None) if y is None else y  # (autocast active: the op's path)

    def theirs():
        return _fallback.torch_conv(x, w, b, spec)

    def theirs_captured():
        return _fallback.torch_conv(x, w, None, spec)

    with _lock:
        _entries[key] = entry  # the timed path finds our plan (another thread may run it meanwhile)
    try:
        with torch.no_grad():
            times = _measure(ours, theirs, x.device)
            graphed = _graph_ms(ours, theirs_captured if getattr(capture_without_bias, "on", False) else theirs,
                                x.device)
    finally:
        with _lock:
            _entries.pop(key, None)
    ours_host, torch_host, ours_gpu, torch_gpu = times
    record.update(pyconv_host_ms=ours_host, torch_host_ms=torch_host, pyconv_gpu_ms=ours_gpu, torch_gpu_ms=torch_gpu)
    if graphed is not None:
        record.update(pyconv_graph_ms=graphed[0], torch_graph_ms=graphed[1])
    ours_graph, torch_graph = graphed or (ours_gpu, torch_gpu)
    eager = entry if _ours_in_eager(*times) else theirs_entry
    captured = eager if ours_gpu is None else entry if ours_graph <= torch_graph else theirs_entry
    if eager is not captured:
        eager.captured = captured
    record.update(engine="pyconv" if eager is entry else "torch",
                  engine_captured="pyconv" if captured is entry else "torch")
    verdict = {entry: "pyconv faster", theirs_entry: "PyTorch faster"}
    record["why"] = verdict[eager] if eager is captured else f"eager: {verdict[eager]}; graphs: {verdict[captured]}"
    return eager


def decisions() -> list:
    """One dict per (operands, arguments) seen: which engine runs it, the variant and configuration,
    why, and the per-call times where engine 'fastest' measured them."""
    with _lock:
        return [dict(r) for _, r in _records]


def decisions_for(spec: Spec, weight_shape) -> list:
    """decisions() of the calls made with this Spec and weight shape (one layer's)."""
    weight_shape = tuple(weight_shape)
    with _lock:
        return [dict(r) for s, r in _records if s == spec and r["weight"] == weight_shape]


generation = 0  # counts clear()s: a module's remembered decisions older than the last one are dropped


def clear() -> None:
    """Forgets every entry and decision (the next call of each shape plans, and times, again) and the streams'
    shared workspaces."""
    global generation
    with _lock:
        _entries.clear()
        _records.clear()
        _workspaces.clear()
        sites.clear()
        generation += 1
