"""An eval-mode BatchNorm2d folded into the Conv2d before it (a BatchNorm1d into a Conv1d), at the calls where
nothing can tell.

Inference of a conv, batch-norm pair is one conv with folded parameters:
    s = gamma / sqrt(running_var + eps),  w' = w * s (per output map),  b' = (b - running_mean) * s + beta.
At batch 1 an eager model is bound by the host, where the norm's own call costs about as much as the conv's
(folding them saved 16-34% of five torchvision networks' forward on the H200); under CUDA graphs it is a
kernel per layer.

convert (fuse=True) pairs a conv with the norm that takes its output and nothing else: adjacent in an
nn.Sequential, or found in a module's forward traced by torch.fx (every submodule a leaf; a forward that does
not trace pairs nothing). The norm stays in the model with its parameters, buffers and state_dict keys; its
class becomes PassThroughBatchNorm2d / 1d. At each call the conv folds only where the result cannot differ
from running both: the norm in eval mode with running statistics on the conv's device, autograd recording
nothing, no hook that would see the conv's output or the norm's input (module or global), nothing compiling or
tracing, no torch.func transform or dispatch mode. It then hands its output to the norm, which returns that
very tensor (per thread); any other input it normalises as usual. While a CUDA graph captures, both run (a
graph keeps reading the parameters themselves, as the original's does), the conv through the plan its folded
calls made. nn.DataParallel's replicas, copies and saved models run both.
The folded parameters are computed in float32 (float64 for float64 weights) and kept until a parameter or
running statistic changes (its version counter), is replaced, or its memory is (`.data =`, as module.to() does).
"""
from __future__ import annotations

import threading
from collections import Counter
from operator import is_
from typing import NamedTuple, Optional

import torch
from torch import fx, nn
from torch.nn.modules import module as _module_globals
from torch.nn.utils.parametrize import type_before_parametrizations

from . import _engine, _op

_get_ident = threading.get_ident
# nn.BatchNorm1d's and 2d's forward, called by name rather than through super(): under torch.compile a super() call
# puts guards on each norm's class and MRO that every call of the compiled model checks (module.py, _conv_forward)
_norm_forward = nn.modules.batchnorm._BatchNorm.forward


class _PassThrough:
    """What a folded norm adds to its nn.BatchNorm1d / 2d: the tensor its conv handed over comes back as it is
    (already normalised); any other input is normalised as the base class does."""

    # What torch._dynamo.mark_static(cls) sets (without importing dynamo: a second): torch.compile treats the norm
    # as it does nn.BatchNorm2d, without the aliasing guard over every norm's buffers it puts on a user class.
    _dynamo_marked_static = True

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_pyconv_handed", None)  # a tensor in flight between two calls of this process
        return state

    def _replicate_for_data_parallel(self):
        replica = super()._replicate_for_data_parallel()
        replica.__dict__.pop("_pyconv_handed", None)  # its own hand-overs (none: replicas' convs do not fold)
        return replica

    def forward(self, input):
        if not _op._is_compiling():
            handed = self.__dict__.get("_pyconv_handed")
            if handed and handed.pop(_get_ident(), None) is input:
                return input
        return _norm_forward(self, input)


# Each class holds the method that _norm_forward looks up on its own: PyTorch 2.11's dynamo guards, at every
# compiled call, that a class between the one it is found in and the module's own (here _PassThrough) still lacks it.
class PassThroughBatchNorm2d(_PassThrough, nn.BatchNorm2d):
    """nn.BatchNorm2d folded into the Conv2d before it (see _PassThrough)."""

    _check_input_dim = nn.BatchNorm2d._check_input_dim


class PassThroughBatchNorm1d(_PassThrough, nn.BatchNorm1d):
    """nn.BatchNorm1d folded into the Conv1d before it (see _PassThrough)."""

    _check_input_dim = nn.BatchNorm1d._check_input_dim


_PASS_THROUGH = {nn.BatchNorm2d: PassThroughBatchNorm2d, nn.BatchNorm1d: PassThroughBatchNorm1d}


def norm_name(bn) -> str:
    """BatchNorm2d or BatchNorm1d, folded or not."""
    return next(base.__name__ for base in _PASS_THROUGH if isinstance(bn, base))


def _no_hooks(conv, bn) -> bool:
    return not (conv._forward_hooks or bn._forward_pre_hooks or bn._forward_hooks
                or _module_globals._global_forward_hooks or _module_globals._global_forward_pre_hooks)


class _Folded(NamedTuple):
    """A conv's folded parameters and what they were folded from (conv.__dict__["_pyconv_folded"])."""
    sources: tuple      # (weight, bias, gamma, beta, mean, var): strong references, so no id or address reuse
    versions: tuple     # their _version and data_ptr() when folded
    eps: float
    call: tuple         # (w', b', True): conv_parameters' answer
    zero_bias: object   # zeros like b': the capture's bias where the conv has none


def conv_parameters(conv, bn, x, weight, bias) -> Optional[tuple]:
    """(w, b, folded) for this call of conv: bn folded in (folded True: hand the output over), or, while a CUDA
    graph captures, the parameters themselves with a zero bias where the conv has none (folded False: bn runs
    after it); None: the call as it comes, bn after it."""
    # (unbatched x: the norm would see a (C, ...) output as a batch, or refuse it, as the original's does)
    if bn.training or type(x) is not _op._Tensor or x.dim() != conv._DIMS or _op._is_compiling() or _op._tracing() \
            or _op._dispatch_modes() or _op._transforms_active():  # (torch.func's wrappers must not be cached)
        return None
    buffers, parameters = bn._buffers, bn._parameters  # (bn.running_mean: nn.Module.__getattr__, ~1 us each)
    mean, var = buffers.get("running_mean"), buffers.get("running_var")
    if mean is None or var is None or not _no_hooks(conv, bn):
        return None
    gamma, beta = parameters.get("weight"), parameters.get("bias")
    if _op._grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias, gamma, beta)):
        return None
    cached = conv.__dict__.get("_pyconv_folded")
    if x.is_cuda and _engine.capturing():
        # A graph keeps reading the parameters themselves, as the original's does (a replay after they change
        # computes with the new values): conv and bn both run. The eager calls planned the conv with a bias (the
        # folded one), which a plan first seen while capturing could not be: a zero bias takes that plan. Where the
        # capture runs PyTorch's conv, the call as it comes: its cuDNN path adds a bias in a kernel of its own.
        if conv._captured_by_torch(x):
            return None
        zeros = None if bias is not None or cached is None else cached.zero_bias
        if zeros is None or zeros.dtype != weight.dtype or zeros.device != weight.device:
            return None
        return weight, zeros, False
    sources = (weight, bias, gamma, beta, mean, var)
    try:  # in-place changes count in _version; `.data =` (module.to(), .half(), .cuda()) brings new memory
        # (spelled out: generators over the six cost more than the rest of this function)
        versions = (weight._version, weight.data_ptr(), mean._version, mean.data_ptr(), var._version, var.data_ptr(),
                    None if bias is None else (bias._version, bias.data_ptr()),
                    None if gamma is None else (gamma._version, gamma.data_ptr()),
                    None if beta is None else (beta._version, beta.data_ptr()))
    except RuntimeError:  # inference tensors (made under torch.inference_mode) keep no version: a change is unseen
        return None
    if cached is not None and cached.eps == bn.eps and cached.versions == versions \
            and all(map(is_, cached.sources, sources)):
        return cached.call
    if mean.get_device() != weight.get_device():  # (a cached fold was made on one device: memory is per device)
        return None  # the norm's own call says what is wrong
    w, b = _fold(weight, bias, gamma, beta, mean, var, bn.eps)
    folded = conv.__dict__["_pyconv_folded"] = _Folded(sources, versions, bn.eps, (w, b, True), torch.zeros_like(b))
    return folded.call


def _fold(weight, bias, gamma, beta, mean, var, eps: float) -> tuple:
    with torch.no_grad():
        math = torch.float64 if weight.dtype == torch.float64 else torch.float32
        scale = torch.rsqrt(var.to(math) + eps)
        if gamma is not None:
            scale = scale * gamma.to(math)
        w = torch.empty_like(weight)  # weight's memory format: the plans the layer remembered still apply
        w.copy_(weight.to(math) * scale.reshape(-1, *([1] * (weight.dim() - 1))))
        b = -mean.to(math) * scale if bias is None else (bias.to(math) - mean.to(math)) * scale
        if beta is not None:
            b = b + beta.to(math)
        return w, b.to(weight.dtype)


def hand_over(bn, y):
    """y, which the conv computed with bn folded in: bn's next call in this thread with y returns it."""
    # setdefault: one atomic step, so that two threads' first calls cannot each make a dict and lose one hand-over
    # (whose norm would then normalise the folded output again)
    bn.__dict__.setdefault("_pyconv_handed", {})[_get_ident()] = y
    return y


# ---- pairing (convert) ----

class _ChildrenAsLeaves(fx.Tracer):
    """Traces one module's own forward: each submodule it calls is a call_module node."""

    def is_leaf_module(self, m, qualname) -> bool:
        return True


def _traced_calls(parent) -> Optional[fx.Graph]:
    try:
        return _ChildrenAsLeaves().trace(parent)
    except Exception:  # a forward FX cannot trace (data-dependent control flow, ...): nothing paired there
        return None


def pairs(model: nn.Module, uses: Counter, norms: dict) -> list:
    """(conv, bn, why-not or None) for each layer of a class in `norms` ({conv class: its norm class}) whose
    output only a norm of that class takes (exactly that class or its pass-through: a subclass may change
    forward)."""
    def paired(conv, bn) -> bool:
        norm = norms.get(type_before_parametrizations(conv))
        return norm is not None and type(bn) in (norm, _PASS_THROUGH[norm])

    found, called = [], Counter()
    for parent in model.modules():
        if isinstance(parent, nn.Sequential):
            children = list(parent._modules.values())
            found += [(a, b) for a, b in zip(children, children[1:]) if paired(a, b)]
            continue
        if not any(type_before_parametrizations(m) in norms for m in parent._modules.values()):
            continue
        graph = _traced_calls(parent)
        if graph is None:
            continue
        for node in graph.nodes:
            if node.op != "call_module":
                continue
            m = parent.get_submodule(node.target)
            called[id(m)] += 1
            users = list(node.users)
            if type_before_parametrizations(m) not in norms or len(users) != 1:
                continue
            user = users[0]
            if user.op == "call_module" and user.args == (node,) and not user.kwargs:
                bn = parent.get_submodule(user.target)
                if paired(m, bn):
                    found.append((m, bn))
    result = []
    for conv, bn in found:
        why = None
        if uses[id(conv)] > 1 or called[id(conv)] > 1:
            why = "this conv also runs elsewhere in the model"
        elif uses[id(bn)] > 1 or called[id(bn)] > 1:
            why = f"the {norm_name(bn)} also runs elsewhere in the model"
        elif bn.num_features != conv.out_channels:
            why = f"the {norm_name(bn)}'s features are not the conv's maps"
        elif conv.epilogue is not None:
            why = f"the conv's epilogue runs before the {norm_name(bn)}"
        result.append((conv, bn, why))
    return result


def attach(conv, bn) -> None:
    """conv folds bn from its next call (bn becomes a PassThroughBatchNorm2d / 1d, the same object)."""
    bn.__class__ = _PASS_THROUGH.get(type(bn), type(bn))
    # module._BATCHNORM; not a submodule: the module tree and state_dict stay as they were
    conv.__dict__["_pyconv_bn"] = bn
