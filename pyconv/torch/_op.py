"""The PyTorch operators pyconv::conv2d and pyconv::conv1d, and the functions that call them.

Each op has a real kernel (_engine: our plan on the tensor's device and PyTorch's current stream), a
fake kernel (the output's shape, dtype and memory format, so torch.compile(fullgraph=True) traces it
without a graph break) and an autograd formula whose backward is PyTorch's own convolution gradient
(aten.convolution_backward), so a model trains with our forward.

pyconv.torch.conv2d / conv1d take what F.conv2d / conv1d take around the op: unbatched input (the op
itself stays 4-D / 3-D), empty batches, autocast (PyTorch's convolution rule) and torch.func transforms
(a vmap rule; grad / vjp / jacrev through an autograd.Function). They go through the op where PyTorch
must see it (compiling, a dispatch mode or torch.func transform active, autograd recording); otherwise
they call the real kernel directly, which skips the dispatcher's per-call cost and gives the same result.
Compiled with engine "fastest" (or "torch"), they run PyTorch's conv instead (see _pytorchs_conv), except in
a converted layer whose timings chose ours (module.py).
"""
import functools
# No `from __future__ import annotations`: custom_op reads these annotations as types.
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _problem, api
from .._lib import ConvError
from . import _engine, _lowering
from ._engine import Spec
from ._fallback import EPILOGUE_RELU, EPILOGUE_RELU_MAXPOOL, torch_conv

aten = torch.ops.aten


# ---- the ops ----

def _spec(stride, padding, dilation, groups, epilogue, variant, precision, engine, fallback) -> Spec:
    return Spec(tuple(stride), tuple(padding), tuple(dilation), groups, tuple(epilogue), variant, precision,
                engine, fallback)


def _conv2d_kernel(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride: List[int], padding: List[int],
                   dilation: List[int], groups: int, epilogue: List[int], variant: str, precision: str, engine: str,
                   fallback: bool) -> Tensor:
    """epilogue(conv2d(input, weight) + bias); epilogue is [kind, pool_h, pool_w, pool_stride_h,
    pool_stride_w, ceil] with kind 0 none, 1 ReLU, 2 ReLU + max-pool."""
    return _engine.conv2d(input, weight, bias, _spec(stride, padding, dilation, groups, epilogue, variant,
                                                     precision, engine, fallback))


def _conv1d_kernel(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride: int, padding: int, dilation: int,
                   groups: int, epilogue: List[int], variant: str, precision: str, engine: str,
                   fallback: bool) -> Tensor:
    """conv2d_op on (B, C, 1, L) views; epilogue as conv2d_op's, its pool window (1, k)."""
    spec = _spec((1, stride), (0, padding), (1, dilation), groups, epilogue, variant, precision, engine, fallback)
    y = _engine.conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, spec)
    return y.view(y.shape[0], y.shape[1], y.shape[3])


conv2d_op = torch.library.custom_op("pyconv::conv2d", _conv2d_kernel, mutates_args=())
conv1d_op = torch.library.custom_op("pyconv::conv1d", _conv1d_kernel, mutates_args=())

# The same kernels registered for the CPU and CUDA dispatch keys themselves, ahead of custom_op's registration
# (CompositeExplicitAutograd, still there for other devices), which wraps each call in a check that the output
# aliases no input (ours never does: it is allocated here) and a look-up of the op's schema: 27 us of the op's
# 37 us a call on the H200 host with PyTorch 2.11, three times what the kernel itself costs. A compiled model
# calls the op through the dispatcher at every layer that runs ours.
_KERNELS = torch.library.Library("pyconv", "IMPL")
for _key in ("CPU", "CUDA"):
    _KERNELS.impl("conv2d", _conv2d_kernel, _key)
    _KERNELS.impl("conv1d", _conv1d_kernel, _key)


def _out_size(n, k, stride, padding, dilation):
    return (n + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def _pooled_size(n, k, stride, ceil):
    """max_pool2d's size without padding; in ceil mode the last window must start inside the input."""
    out = (n - k + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= n:
        out = out - 1
    return out


def _output_hw(h, w, kh, kw, stride, padding, dilation, epilogue):
    oh = _out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = _out_size(w, kw, stride[1], padding[1], dilation[1])
    kind, ph, pw, sh, sw, ceil = epilogue
    if kind == EPILOGUE_RELU_MAXPOOL:
        oh, ow = _pooled_size(oh, ph, sh, ceil), _pooled_size(ow, pw, sw, ceil)
    return oh, ow


def _is_nhwc(t) -> bool:
    """Whether _engine runs (and stores) it as NHWC: channels-last dense and not C-contiguous."""
    return t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def _empty(input, weight) -> bool:
    """B, C or M = 0: _engine returns PyTorch's conv's result (or error) for these, and so do the fakes
    (for C = 0 that result has 0 channels, not M)."""
    return input.numel() == 0 or weight.numel() == 0


@conv2d_op.register_fake
def _conv2d_fake(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision, engine,
                 fallback):
    _lowering.ensure_registered()  # where inductor compiles it, the op's call becomes a direct call of its kernel
    if _empty(input, weight):
        return torch_conv(input, weight, bias, _spec(stride, padding, dilation, groups, epilogue, variant, precision,
                                                     engine, fallback))
    oh, ow = _output_hw(input.shape[2], input.shape[3], weight.shape[2], weight.shape[3], stride, padding,
                        dilation, epilogue)
    fmt = torch.channels_last if _is_nhwc(input) else torch.contiguous_format
    return torch.empty((input.shape[0], weight.shape[0], oh, ow), dtype=input.dtype, device=input.device,
                       memory_format=fmt)


@conv1d_op.register_fake
def _conv1d_fake(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision, engine,
                 fallback):
    _lowering.ensure_registered()
    if _empty(input, weight):
        return _conv2d_fake(input.unsqueeze(2), weight.unsqueeze(2), bias, [1, stride], [0, padding], [1, dilation],
                            groups, epilogue, variant, precision, engine, fallback).squeeze(2)
    _, ol = _output_hw(1, input.shape[2], 1, weight.shape[2], (1, stride), (0, padding), (1, dilation), epilogue)
    return input.new_empty((input.shape[0], weight.shape[0], ol))


# ---- autograd: PyTorch's convolution gradients ----

def _grads(grad, x, w, b, y, stride, padding, dilation, groups, epilogue, mask):
    """(dx, dw, db) of y = epilogue(conv(x, w) + b) for 4-D tensors: the epilogue's gradient by aten's
    threshold / max-pool backward (the pooled case recomputes the pre-pool activation with aten's conv,
    whose argmax routes the gradient), then aten.convolution_backward."""
    kind, ph, pw, sh, sw, ceil = epilogue
    if kind == EPILOGUE_RELU:
        grad = aten.threshold_backward(grad, y, 0)
    elif kind == EPILOGUE_RELU_MAXPOOL:
        a = aten.relu(aten.convolution(x, w, b, stride, padding, dilation, False, [0, 0], groups))
        _, indices = aten.max_pool2d_with_indices(a, [ph, pw], [sh, sw], [0, 0], [1, 1], bool(ceil))
        grad = aten.max_pool2d_with_indices_backward(grad, a, [ph, pw], [sh, sw], [0, 0], [1, 1], bool(ceil),
                                                     indices)
        grad = aten.threshold_backward(grad, a, 0)
    return aten.convolution_backward(grad, x, w, None if b is None else [w.shape[0]], stride, padding, dilation,
                                     False, [0, 0], groups, mask)


def _setup_context(ctx, inputs, output):
    input, weight, bias = inputs[:3]
    ctx.save_for_backward(input, weight, bias, output)
    ctx.arguments = inputs[3:8]  # stride, padding, dilation, groups, epilogue


def _mask(ctx, bias):
    return [ctx.needs_input_grad[0], ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2]]


def _conv2d_backward(ctx, grad):
    x, w, b, y = ctx.saved_tensors
    stride, padding, dilation, groups, epilogue = ctx.arguments
    dx, dw, db = _grads(grad, x, w, b, y, stride, padding, dilation, groups, epilogue, _mask(ctx, b))
    return (dx, dw, db) + (None,) * 9


def _conv1d_backward(ctx, grad):
    x, w, b, y = ctx.saved_tensors
    stride, padding, dilation, groups, epilogue = ctx.arguments
    dx, dw, db = _grads(grad.unsqueeze(2), x.unsqueeze(2), w.unsqueeze(2), b, y.unsqueeze(2), [1, stride],
                        [0, padding], [1, dilation], groups, epilogue, _mask(ctx, b))
    return (None if dx is None else dx.squeeze(2), None if dw is None else dw.squeeze(2), db) + (None,) * 9


conv2d_op.register_autograd(_conv2d_backward, setup_context=_setup_context)
conv1d_op.register_autograd(_conv1d_backward, setup_context=_setup_context)


# ---- torch.func: vmap, grad / vjp / jacrev ----

def _vmap(op, info, in_dims, input, weight, bias, *arguments):
    """The ops' batching rule. Only the input batched (per-sample calls, vmap(grad(...)) over a model):
    the vmapped dim folds into the batch dim, one call. A batched weight or bias (model ensembles):
    one call per slice, stacked; correct and rare, where folding into groups would have to reorder
    grouped weights and repeat the input."""
    x_dim, w_dim, b_dim = in_dims[:3]
    if w_dim is None and b_dim is None:
        x = input.movedim(x_dim, 0)
        return op(x.flatten(0, 1), weight, bias, *arguments).unflatten(0, x.shape[:2]), 0

    def take(t, dim, i):
        return t if dim is None else t.select(dim, i)
    return torch.stack([op(take(input, x_dim, i), take(weight, w_dim, i), take(bias, b_dim, i), *arguments)
                        for i in range(info.batch_size)]), 0


conv2d_op.register_vmap(functools.partial(_vmap, conv2d_op))
conv1d_op.register_vmap(functools.partial(_vmap, conv1d_op))


class _FuncConv(torch.autograd.Function):
    """An op under torch.func's transforms. custom_op's registered autograd is an autograd.Function
    without setup_context, which grad / vjp / jacrev refuse far from the cause; this one has it (the
    same gradients), and vmap goes to the op's batching rule. Forward-mode AD (jvp, jacfwd, hessian)
    has no formula: refused in words."""
    generate_vmap_rule = True

    @staticmethod
    def forward(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision, engine,
                fallback, op):
        return op(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision, engine,
                  fallback)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _setup_context(ctx, inputs, output)
        ctx.backward = _conv2d_backward if inputs[-1] is conv2d_op else _conv1d_backward

    @staticmethod
    def backward(ctx, grad):
        return ctx.backward(ctx, grad) + (None,)

    @staticmethod
    def jvp(ctx, *tangents):
        raise RuntimeError("pyconv.torch: forward-mode AD (torch.func.jvp, jacfwd, hessian) has no formula in "
                           "pyconv's conv ops (engine 'pyconv'); use jacrev / vjp / grad, or engine='fastest' or "
                           "'torch', which run PyTorch's conv under torch.func transforms")


# ---- the functions users call ----

_VARIANT_DEFAULT, _ENGINE_DEFAULT = "auto", "pyconv"
_specs: dict = {}
_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_transforms_active = torch._C._are_functorch_transforms_active  # torch.func's tensors are plain torch.Tensor
_any_autocast = torch._C._is_any_autocast_enabled
_tracing = torch._C._get_tracing_state  # torch.jit.trace: the op must be called for the trace to record it


def epilogue_code(epilogue) -> tuple:
    """None, "relu" or pyconv.ReluMaxPool(...) as the ops' [kind, pool_h, pool_w, pool_stride_h,
    pool_stride_w, ceil]."""
    f = _problem.epilogue_fields(epilogue)
    return (f["epilogue"], f.get("pool_h", 0), f.get("pool_w", 0), f.get("pool_stride_h", 0),
            f.get("pool_stride_w", 0), f.get("pool_ceil", 0))


def make_spec(kernel, stride, padding, dilation, groups, epilogue, variant, precision, engine, fallback):
    """(Spec, F.pad widths or None): padding 'same' with an odd total pads the extra row / column
    after, as PyTorch does, and the op gets the symmetric rest."""
    if not isinstance(variant, str):
        raise ConvError(f"variant must be a name (str), got {variant!r}")
    if engine not in _engine.ENGINES:
        raise ConvError(f"engine must be one of {_engine.ENGINES}, got {engine!r}")
    if precision is not None and precision not in _problem.PRECISIONS:
        raise ConvError(f"precision must be None or one of {tuple(_problem.PRECISIONS)}, got {precision!r}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ConvError(f"groups must be an int >= 1, got {groups!r}")
    if not api._torch_op_takes(padding, epilogue):
        what = "epilogue='silu'" if api._torch_op_takes(padding, None) else "padding='causal'"
        raise ConvError(f"pyconv.torch's conv1d / conv2d take no {what}: pyconv.torch.causal_conv1d runs the causal "
                        "depthwise conv1d with SiLU (autograd too), pyconv.conv1d the rest without autograd")
    s, d = _problem.pair(stride, "stride"), _problem.pair(dilation, "dilation")
    (ph, pw), (eh, ew) = _problem.padding_of(padding, kernel, s, d)  # kernel: only for 'same' (else None)
    extra = (0, ew, 0, eh) if eh or ew else None
    spec = Spec(s, (ph, pw), d, groups, epilogue_code(epilogue), variant, precision or "default", engine,
                bool(fallback))
    return spec, extra


def cached_spec(*arguments):
    """make_spec, memoised on its (hashable) arguments outside tracing: a repeated call parses nothing.
    (Traced, it is plain Python for the compiler: no library call.)"""
    if _is_compiling():
        return make_spec(*arguments)
    try:
        hit = _specs.get(arguments)
    except TypeError:  # lists and other unhashable arguments
        return make_spec(*arguments)
    if hit is None:
        hit = make_spec(*arguments)
        api.variant_id(hit[0].variant)  # an unknown name is the caller's error, not a case to fall back on
        if len(_specs) > 4096:
            _specs.clear()
        _specs[arguments] = hit
    return hit


def _direct(x, w, b) -> bool:
    """The real kernel may be called without the dispatcher: nothing is compiling or tracing (dynamo,
    torch.jit.trace), no mode or torch.func transform is active and autograd has nothing to record."""
    return not (_is_compiling() or _dispatch_modes() or _transforms_active() or _tracing() or type(x) is not _Tensor
                or (_grad_enabled() and (x.requires_grad or w.requires_grad or (b is not None and b.requires_grad))))


def _prepared(x, w, b, dims: int, name: str):
    """(x, w, b, unbatched) for the op, which takes batched operands only: F.conv2d / conv1d's unbatched
    input gets a batch dim of 1 (unbatched: True), other ranks get their kind of error; then autocast's
    casts. FX proxies (symbolic_trace) pass as they are: the op is recorded as called."""
    if not isinstance(x, _Tensor):
        return x, w, b, False
    unbatched = x.dim() == dims - 1
    if not unbatched and x.dim() != dims:
        raise RuntimeError(f"Expected {dims - 1}D (unbatched) or {dims}D (batched) input to {name}, but got input of "
                           f"size: {list(x.shape)}")
    if w.dim() != dims:
        raise RuntimeError(f"Expected {dims}D weight for {name}, but got weight of size: {list(w.shape)}")
    if _any_autocast():
        x, w, b = _autocast(x, w, b)
    return (x.unsqueeze(0) if unbatched else x), w, b, unbatched


def _autocast(x, w, b):
    """PyTorch's autocast rule for convolutions: where autocast is on for the input's device type, floating
    operands other than float64 run in its dtype (so does the output). Here rather than by
    torch.library.register_autocast, which casts to one dtype fixed at registration, not the region's."""
    device = x.device.type  # (asking torch.amp about cpu / cuda would put a node in a compiled graph)
    if not ((device in ("cpu", "cuda") or torch.amp.is_autocast_available(device))
            and torch.is_autocast_enabled(device)):
        return x, w, b
    dtype = torch.get_autocast_dtype(device)

    def cast(t):
        return t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != torch.float64 else t
    return cast(x), cast(w), cast(b)


def _pytorchs_conv(spec: Spec) -> bool:
    """Whether PyTorch's own conv (F ops) runs instead of the op: with engine "fastest" (or "torch") while
    compiling, where nothing timed says which is faster inside the compiled graph (a converted layer whose eager
    and CUDA-graph decisions both chose ours compiles with engine "pyconv"), and under torch.func transforms,
    where PyTorch's conv has every rule (forward-mode AD included). Engine "pyconv" keeps the op: asked for."""
    return spec.engine != "pyconv" and (_is_compiling() or _transforms_active())


def _call(op, x, w, b, *arguments):
    """The op; through _FuncConv under torch.func transforms. Not while compiling: dynamo would inline
    _FuncConv and still hand the op functorch's tensors (compiling torch.func.grad over engine "pyconv"
    fails), and asking about transforms there would put a node in the graph."""
    if not _is_compiling() and _transforms_active():
        return _FuncConv.apply(x, w, b, *arguments, op)
    return op(x, w, b, *arguments)


def op_arguments(spec: Spec, dims: int) -> tuple:
    """The arguments after the tensors of conv2d_op (dims 4) or conv1d_op (dims 3, spec on (B, C, 1, L))."""
    geometry = (spec.stride, spec.padding, spec.dilation) if dims == 4 else \
        (spec.stride[1], spec.padding[1], spec.dilation[1])
    return (*geometry, spec.groups, spec.epilogue, spec.variant, spec.precision, spec.engine, spec.fallback)


def conv2d_spec(x, w, b, spec: Spec, extra):
    """conv2d with a prepared Spec (what Conv2d calls)."""
    unbatched = False
    if not (type(x) is _Tensor and x.dim() == 4 == w.dim() and not _any_autocast()):  # else: something to prepare
        x, w, b, unbatched = _prepared(x, w, b, 4, "conv2d")
    if extra is not None:
        x = F.pad(x, extra)
    if _direct(x, w, b):
        y = _engine.conv2d(x, w, b, spec)
    elif _pytorchs_conv(spec):
        y = torch_conv(x, w, b, spec)
    else:
        y = _call(conv2d_op, x, w, b, *op_arguments(spec, 4))
    return y.squeeze(0) if unbatched else y


def run_remembered(pick, x, w, b, spec: Spec):
    """The plan a converted layer remembered for x's shape, dtype and device (pick: _engine.Remembered with an
    entry) run on x, w, b where they are still what it was made for and the kernel may be called directly
    (_direct) with autocast off; else None, and the caller takes the full path. At batch 1 an eager model is
    bound by the host: this is a converted layer's whole call once the engine has decided for our plan (the
    lookup's key alone cost about as much as the launch)."""
    if _any_autocast() or not _direct(x, w, b):
        return None
    dev = x.get_device()
    if (not _layout_is(x, pick.x_nhwc) or not _layout_is(w, pick.w_nhwc) or w.shape != pick.w_shape
            or w.dtype != x.dtype or w.get_device() != dev):
        return None
    if b is None:
        if pick.bias_shape is not None:
            return None
    elif b.shape != pick.bias_shape or b.dtype != x.dtype or b.get_device() != dev or not b.is_contiguous():
        return None
    if spec.precision == "default" and _engine._precision(spec, x.dtype, dev) != pick.precision:
        return None  # the TF32 flag changed since: another key
    return _engine._run(pick.entry, x, w, b, dev)


def _layout_is(t, nhwc: bool) -> bool:
    """t as _engine._key reads it: NCHW (C-contiguous), or NHWC (channels-last and not C-contiguous)."""
    return t.is_contiguous() != nhwc and (not nhwc or t.is_contiguous(memory_format=torch.channels_last))


def conv1d_spec(x, w, b, spec: Spec, extra):
    """conv1d with a prepared (4-D) Spec (what Conv1d calls)."""
    unbatched = False
    if not (type(x) is _Tensor and x.dim() == 3 == w.dim() and not _any_autocast()):  # else: something to prepare
        x, w, b, unbatched = _prepared(x, w, b, 3, "conv1d")
    if extra is not None:
        x = F.pad(x, extra[:2])
    if _direct(x, w, b):
        y = _engine.conv2d(x.unsqueeze(2), w.unsqueeze(2), b, spec)
        y = y.view(y.shape[0], y.shape[1], y.shape[3])
    elif _pytorchs_conv(spec):
        y = torch_conv(x.unsqueeze(2), w.unsqueeze(2), b, spec).squeeze(2)
    else:
        y = _call(conv1d_op, x, w, b, *op_arguments(spec, 3))
    return y.squeeze(0) if unbatched else y


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, epilogue=None,
           variant: str = _VARIANT_DEFAULT, precision: Optional[str] = None, engine: str = _ENGINE_DEFAULT,
           fallback: bool = True):
    """torch.nn.functional.conv2d on pyconv's kernels, then the fused epilogue.

    input (B, C, H, W) or unbatched (C, H, W) and weight (M, C/groups, KH, KW) on one device (CPU: the
    cpu variant), float32, float16 or bfloat16, contiguous or channels_last (kept: the result is in
    input's memory format); under autocast they run in its dtype, as F.conv2d's.
    epilogue: None, "relu" or pyconv.ReluMaxPool(kernel, stride=None, ceil_mode=False).
    variant: "auto" or a name from pyconv.variants(); precision: None (as PyTorch: TF32 for float32 when
    torch.backends.cudnn.allow_tf32, "half" for fp16/bf16: fp32 sums), "exact", "tf32", "half" or "fast".
    engine: "pyconv" (ours; PyTorch's conv only where ours refuse), "fastest" (ours or PyTorch's,
    whichever measured faster for this shape on first use; PyTorch's under torch.compile and torch.func
    transforms) or "torch". fallback=False raises ConvUnsupportedError where ours refuse instead of
    running PyTorch's conv (with a FallbackWarning). Differentiable (PyTorch's conv gradients; torch.func's
    grad, vjp, jacrev and vmap too), traceable by torch.compile, capturable in CUDA graphs once each shape
    has run eagerly."""
    return conv2d_positional(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision,
                             engine, fallback)


def conv2d_positional(input, weight, bias, stride, padding, dilation, groups, epilogue, variant, precision, engine,
                      fallback):
    """conv2d's body, every argument positional: pyconv.conv2d's route for torch tensors calls it without the
    keyword plumbing (its host time per call is a target)."""
    spec, extra = cached_spec(tuple(weight.shape[2:]) if isinstance(padding, str) else None, stride, padding,
                              dilation, groups, epilogue, variant, precision, engine, fallback)
    return conv2d_spec(input, weight, bias, spec, extra)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, epilogue=None,
           variant: str = _VARIANT_DEFAULT, precision: Optional[str] = None, engine: str = _ENGINE_DEFAULT,
           fallback: bool = True):
    """torch.nn.functional.conv1d on pyconv's kernels: (B, C, L) or (C, L) signals, (M, C/groups, K) filters;
    arguments as conv2d's (ints; ReluMaxPool pools along L)."""
    s, p, d, ep = _problem.conv1d_as_2d(stride, padding, dilation, epilogue)
    spec, extra = cached_spec((1,) + tuple(weight.shape[2:]) if isinstance(padding, str) else None, s, p, d, groups,
                              ep, variant, precision, engine, fallback)
    return conv1d_spec(input, weight, bias, spec, extra)
