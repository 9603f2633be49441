"""pyconv.torch.Conv2d and Conv1d: torch.nn.Conv2d / Conv1d whose convolution runs on pyconv.

Subclasses of PyTorch's modules: the same constructor (plus keyword-only pyconv options), parameters,
initialisation, state_dict keys and padding modes (reflect / replicate / circular pad with F.pad, as
PyTorch does, then our conv). adopt(conv) turns an existing torch module into one of these in place
(what convert does), keeping its hooks and parametrizations. The options are plain attributes; the
parsed form (a Spec) is memoised on them, so a forward call parses nothing.
"""
from __future__ import annotations

from typing import Optional

import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from .. import _problem
from .._lib import ConvError
from . import _engine, _op, batchnorm
from ._fallback import torch_conv

_Tensor = _op._Tensor
_is_compiling = _op._is_compiling
_tracing = _op._tracing


# Attributes the parsed Spec depends on: setting one drops the memoised Spec.
_SPEC_ATTRIBUTES = frozenset(("kernel_size", "stride", "padding", "dilation", "groups", "padding_mode", "epilogue",
                              "variant", "precision", "engine", "fallback"))


_CACHES = ("_pyconv_spec", "_pyconv_decided", "_pyconv_folded")  # what __setattr__ drops and __getstate__ leaves out
# The batch norm folded in (batchnorm.py) goes too where the epilogue changes (it would run before the norm) and
# from copies: copy.deepcopy of the conv alone (fuse_conv_bn_eval's) would keep a copy of the norm that no call
# reaches. A copied or saved model runs its norms again.
_BATCHNORM = "_pyconv_bn"


class _PyconvOptions:
    """What both modules add: the constructor's options, the memoised Spec, the forward on pyconv,
    decisions() and the repr. A subclass names its op (`_run`: _op.conv2d_spec or conv1d_spec)."""

    not_fused: Optional[str] = None  # set by convert: why a ReLU / pool after this conv stayed out of its epilogue
    # What a compiled model runs (_default_compiled_forward, and for engine "fastest" _remember_decision): with
    # engine "fastest" where every input this layer has seen ran our plan both in eager calls and in CUDA graphs,
    # our op (_op_forward); else with engine "fastest" / "torch" and no epilogue nn.Conv2d's / Conv1d's own
    # _conv_forward; with engine "pyconv" our op too; else None, _decided_forward (the same conv, with more guards)
    _compiled_forward = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, *, epilogue=None, variant: str = "auto",
                 precision: Optional[str] = None, engine: str = "pyconv", fallback: bool = True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)
        self._set_options(epilogue, variant, precision, engine, fallback)

    def _conv_forward(self, input, weight, bias):
        if _is_compiling():
            # Traced: every attribute, method and class the trace reads becomes a guard that each call of the
            # compiled model checks before it runs (a super() call: the module's class, its MRO and the method's
            # code, per layer). So the compiled forward is read from one attribute (one guard a layer): PyTorch's
            # conv as nn.Conv2d's own _conv_forward, or our op with its arguments held in the function
            # (_op_forward). Guards cost as the host's caches are cold after a forward: on mobilenet_v2 this and
            # the norm's forward (batchnorm.py) took its extra cache lookup from 0.15-0.2 ms to none (CPU).
            compiled_forward = self._compiled_forward
            if compiled_forward is not None:
                return compiled_forward(self, input, weight, bias)
            return self._decided_forward(input, weight, bias)
        bn = self.__dict__.get(_BATCHNORM)  # the batch norm convert paired with this conv (batchnorm.py)
        if bn is not None:
            call = batchnorm.conv_parameters(self, bn, input, weight, bias)
            if call is not None:
                w, b, folded = call
                y = self._unpaired_forward(input, w, b)
                return batchnorm.hand_over(bn, y) if folded else y
        return self._unpaired_forward(input, weight, bias)

    def _unpaired_forward(self, input, weight, bias):
        # An eager call goes straight to what the engine decided for its input before: PyTorch's conv (engine
        # "fastest" timed it faster, or "torch") or our plan. In an eager model at batch 1 the engine's
        # per-call lookup, not the decision, made the converted network slower. Remembered per (shape,
        # dtype, device) and engine generation, with whether CUDA-graph capture runs the other engine (then
        # asked at each call). PyTorch's conv is right for any input, so a remembered answer for it can cost
        # only speed; our plan is run only where run_remembered finds the operands still what it was made
        # for. Every layer of an eager model pays this path at every call, so it checks only what can change
        # between calls (the memo holds inputs of zero padding, the module's dimensions and no F.pad only;
        # changed attributes drop it). PyTorch's conv's result comes as it is, as the original module's did
        # (its memory format may differ from x's where only w is channels-last).
        dictionary = self.__dict__
        memo = dictionary.get("_pyconv_decided")
        if memo is not None and memo[0] == _engine.generation and type(input) is _Tensor and not _tracing():
            pick = memo[1].get((input.shape, input.dtype, input.get_device()))
            if pick is not None:
                spec = dictionary["_pyconv_spec"][0]
                if pick.captured and _engine.capturing():  # capture runs the other engine than eager calls
                    if pick.entry is not None:
                        return self._torch_conv(input, weight, bias, spec)
                elif pick.entry is None:
                    return self._torch_conv(input, weight, bias, spec)
                else:
                    y = self._run_remembered(pick, input, weight, bias, spec)
                    if y is not None:
                        return y
        return self._decided_forward(input, weight, bias)

    def _captured_by_torch(self, input) -> bool:
        """Whether a CUDA-graph capture of this input runs PyTorch's conv, as remembered from eager calls."""
        memo = self.__dict__.get("_pyconv_decided")
        pick = None if memo is None or memo[0] != _engine.generation else \
            memo[1].get((input.shape, input.dtype, input.get_device()))
        return pick is not None and (pick.entry is None) != pick.captured

    def _decided_forward(self, input, weight, bias, ours=False):
        """_conv_forward past the memo: the engine's call, and what to remember of its decision. ours: while
        compiling, our op (engine "pyconv") whatever the engine (_op_forward's full path)."""
        if self.padding_mode != "zeros":  # PyTorch's own padding modes, then our unpadded conv
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
        spec, extra = self.spec()
        if ours:
            spec = spec._replace(engine="pyconv")
        # nothing to remember: padded by F.pad, unbatched, compiling, or traced (the trace records the op;
        # traced sizes make no keys)
        if self.padding_mode != "zeros" or type(input) is not _Tensor or _is_compiling() or _tracing() \
                or input.dim() != self._DIMS:
            return self._run(input, weight, bias, spec, extra)
        dictionary = self.__dict__
        memo = dictionary.get("_pyconv_decided")
        if memo is None or memo[0] != _engine.generation:
            memo = dictionary["_pyconv_decided"] = (_engine.generation, {})
        signature = (input.shape, input.dtype, input.get_device())  # memo: _engine.Remembered or None
        # a folded norm's bias where the conv has none: a capture on PyTorch's conv runs without it
        folded_bias = bias is not None and self.bias is None
        if folded_bias:
            _engine.capture_without_bias.on = True
        try:
            y = self._run(input, weight, bias, spec, extra)  # (a remembered input gets here while captured)
        finally:
            if folded_bias:
                _engine.capture_without_bias.on = False
        if signature not in memo[1] and extra is None and not _op._any_autocast():  # the engine saw it as it is
            memo[1][signature] = self._remember(input, weight, bias, spec)
            if spec.engine == "fastest":
                self._remember_decision(memo[1], spec)
        return y

    def _remember_decision(self, picks: dict, spec) -> None:
        """Engine "fastest": what a compiled model runs, from the eager decisions so far. Our op where every
        input seen ran our plan in eager calls and in CUDA-graph capture; else PyTorch's conv. A compiled
        model guards on the attribute: where it changes, the next call compiles again."""
        ours = all(pick is not None and pick.entry is not None and not pick.captured for pick in picks.values())
        # The op with engine "pyconv": decided. Its operands there may not be the ones decided for (a folded norm
        # runs after the conv in a compiled model: the conv has no bias there), and with engine "fastest" the
        # engine timed those anew inside the compiled model's first call, where host noise sent some layers to
        # PyTorch's conv (googlenet b16 on the H200: 0.92 of the original's time, 0.72 with engine "pyconv").
        # (A new function of the same code and arguments passes the compiled graph's guard: no recompile.)
        self.__dict__["_compiled_forward"] = self._op_compiled_forward(spec) if ours \
            else self._default_compiled_forward()

    def _op_compiled_forward(self, spec):
        """_op_forward for this layer's op and spec, run with engine "pyconv"."""
        return _op_forward(self._OP, self._DIMS, _op.op_arguments(spec._replace(engine="pyconv"), self._DIMS))

    def _default_compiled_forward(self):
        """The compiled forward without decisions: engine "pyconv", our op (None where F.pad or an odd 'same'
        padding comes first, or while the constructor has not set every option yet); "fastest" / "torch",
        PyTorch's conv (None with an epilogue)."""
        options = self.__dict__
        if options.get("engine") != "pyconv":
            return self._TORCH_CONV_FORWARD if options.get("epilogue") is None else None
        try:
            spec, extra = self.spec()
        except Exception:  # options the constructor has not set yet, or bad ones, which spec() refuses at the call
            return None
        if extra is not None or self.padding_mode != "zeros":
            return None
        return self._op_compiled_forward(spec)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in _SPEC_ATTRIBUTES:
            for cache in _CACHES:
                self.__dict__.pop(cache, None)
            self.__dict__["_compiled_forward"] = self._default_compiled_forward()  # the decisions went
            if name == "epilogue":
                self.__dict__.pop(_BATCHNORM, None)

    def __getstate__(self):
        # The memoised Spec and the engine's decisions (plans of this process, memory formats that pickle's
        # protocol 2, torch.save's, cannot write) are caches: pickle, torch.save and copy.deepcopy keep the
        # module without them, and the copy asks the engine again at its first call.
        state = super().__getstate__()
        for cache in _CACHES + (_BATCHNORM, "_compiled_forward"):  # (the last: a function, made again)
            state.pop(cache, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__["_compiled_forward"] = self._default_compiled_forward()

    def _replicate_for_data_parallel(self):
        # nn.DataParallel's replicas share a shallow copy of this __dict__: a BatchNorm2d link would point at the
        # original's norm, not the replica's (a fold with another device's statistics, or a norm applied twice)
        replica = super()._replicate_for_data_parallel()
        replica.__dict__.pop(_BATCHNORM, None)
        return replica

    def spec(self):
        """(Spec, F.pad widths or None) of the current attributes (memoised outside tracing)."""
        if _op._is_compiling():
            return self._make_spec()
        hit = self.__dict__.get("_pyconv_spec")
        if hit is None:
            hit = self.__dict__["_pyconv_spec"] = self._make_spec()
        return hit

    def _set_options(self, epilogue, variant: str, precision: Optional[str], engine: str, fallback: bool) -> None:
        self.epilogue, self.variant, self.precision = epilogue, variant, precision
        self.engine, self.fallback = engine, fallback
        self.spec()  # refuses bad options now, not at the first forward

    def decisions(self) -> list:
        """pyconv.torch.decisions() of this layer's calls so far: per input shape, which engine ran it
        (pyconv's variant and configuration, or PyTorch's conv) and why."""
        spec, _ = self.spec()
        return _engine.decisions_for(spec, self._kernel_shape())

    def compiled_engine(self) -> str:
        """The engine torch.compile gives this layer now: "pyconv" (our op) or "torch" (PyTorch's conv)."""
        forward = self.__dict__.get("_compiled_forward")
        if forward is None:  # _decided_forward: the op unless _op._pytorchs_conv steps aside
            return "pyconv" if self.engine == "pyconv" else "torch"
        return "torch" if forward is self._TORCH_CONV_FORWARD else "pyconv"

    def extra_repr(self) -> str:
        options = f"variant={self.variant!r}, engine={self.engine!r}"
        if self.epilogue is not None:
            options += f", epilogue={self.epilogue!r}"
        if self.precision is not None:
            options += f", precision={self.precision!r}"
        return f"{super().extra_repr()}, {options}"

    @classmethod
    def from_torch(cls, conv, **options):
        """A new module of this class sharing `conv`'s parameters (the same Parameter objects) and arguments.
        conv's hooks stay on conv (adopt keeps them)."""
        if not all(t is None or isinstance(t, nn.Parameter) for t in (conv.weight, conv.bias)):
            # parametrize's properties and prune's / weight_norm's forward pre-hooks compute the weight on
            # conv itself: a new module would run a stale copy of it
            raise ConvError(f"{type(conv).__name__}'s weight or bias is computed (torch.nn.utils.parametrize, prune "
                            f"or weight_norm), which a new module would lose: use {cls.__name__}.adopt(conv) or "
                            "pyconv.torch.convert, which convert the module itself and keep them")
        new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, device="meta", dtype=conv.weight.dtype,
                  **options)
        new.weight = conv.weight
        new.bias = conv.bias
        new.train(conv.training)
        return new

    @classmethod
    def adopt(cls, conv, *, epilogue=None, variant: str = "auto", precision: Optional[str] = None,
              engine: str = "pyconv", fallback: bool = True):
        """`conv` itself (a torch.nn.Conv2d / Conv1d as this class's base, parametrized or not) made a module of
        this class by swapping its class: the same object keeps its hooks and the handles that remove
        them, parametrizations, pruning's weight_orig and mask, and so its state_dict keys. Returns conv."""
        torch_class = cls.__bases__[-1]
        if parametrize.type_before_parametrizations(conv) is not torch_class:  # a subclass may change forward
            raise ConvError(f"{cls.__name__}.adopt takes an nn.{torch_class.__name__}, got {type(conv).__name__}")
        old_class, new_class = type(conv), cls
        if parametrize.is_parametrized(conv):
            # parametrize swapped conv's class for a subclass of it holding the properties (weight, ...):
            # the same subclass of ours, so that remove_parametrizations leaves one of ours
            new_class = type(old_class.__name__, (cls,), dict(vars(old_class)))
        conv.__class__ = new_class
        try:
            conv._set_options(epilogue, variant, precision, engine, fallback)
        except BaseException:  # a refused option leaves conv as it was
            conv.__class__ = old_class
            for name in ("epilogue", "variant", "precision", "engine", "fallback", "_compiled_forward"):
                conv.__dict__.pop(name, None)
            raise
        return conv


def _op_forward(op, dims: int, arguments: tuple, any_autocast=_op._any_autocast):
    """A layer's compiled forward on our op (engine "pyconv", or "fastest" where our plan won its inputs in both
    timed modes; inductor calls the op's kernel directly, _lowering.py): the op's arguments held in the function,
    so that a compiled call guards on them as one constant (through spec() each option and each function of the
    parsing was a guard: 70 a layer, 13 for PyTorch's conv, at every call of the compiled model). Unbatched input
    and autocast take the layer's full path, which prepares them."""
    def forward(module, input, weight, bias):
        if input.dim() != dims or any_autocast():
            return module._decided_forward(input, weight, bias, True)
        return op(input, weight, bias, *arguments)
    return forward


class Conv2d(_PyconvOptions, nn.Conv2d):
    """torch.nn.Conv2d on pyconv's kernels. Options (keyword-only) as pyconv.torch.conv2d's: epilogue
    (None, "relu", pyconv.ReluMaxPool(...): fused after the conv and bias), variant, precision, engine
    ("pyconv", "fastest", "torch") and fallback."""

    _DIMS = 4
    _TORCH_CONV_FORWARD = staticmethod(nn.Conv2d._conv_forward)
    # Held here, not only by nn.Conv2d: PyTorch 2.11's dynamo guards, at every compiled call, that a class between
    # the one a method is found in and the module's own (_PyconvOptions) still lacks it.
    forward = nn.Conv2d.forward
    _run = staticmethod(_op.conv2d_spec)
    _OP = _op.conv2d_op
    _torch_conv = staticmethod(torch_conv)
    _run_remembered = staticmethod(_op.run_remembered)
    _remember = staticmethod(_engine.remembered)

    def _kernel_shape(self):
        return self.weight.shape

    def _make_spec(self):
        padding = self.padding if self.padding_mode == "zeros" else 0
        return _op.cached_spec(self.kernel_size if isinstance(padding, str) else None, self.stride, padding,
                               self.dilation, self.groups, self.epilogue, self.variant, self.precision, self.engine,
                               self.fallback)


class Conv1d(_PyconvOptions, nn.Conv1d):
    """torch.nn.Conv1d on pyconv's kernels (as (B, C, 1, L) convolutions); options as Conv2d's, a
    ReluMaxPool epilogue pooling along L."""

    _DIMS = 3
    _TORCH_CONV_FORWARD = staticmethod(nn.Conv1d._conv_forward)
    # Held here, not only by nn.Conv1d: PyTorch 2.11's dynamo guards, at every compiled call, that a class between
    # the one a method is found in and the module's own (_PyconvOptions) still lacks it.
    forward = nn.Conv1d.forward
    _run = staticmethod(_op.conv1d_spec)
    _OP = _op.conv1d_op

    # The engine runs both its plans and PyTorch's conv on (B, C, 1, L) views, as conv1d_spec calls it: so do
    # the remembered calls, whose results are then those of the first call to the bit (F.conv1d's can differ
    # in the last bits from F.conv2d's on the views, for some groups and dilations).
    @staticmethod
    def _torch_conv(x, w, b, spec):
        return torch_conv(x.unsqueeze(2), w.unsqueeze(2), b, spec).squeeze(2)

    @staticmethod
    def _run_remembered(pick, x, w, b, spec):
        y = _op.run_remembered(pick, x.unsqueeze(2), w.unsqueeze(2), b, spec)
        return None if y is None else y.view(y.shape[0], y.shape[1], y.shape[3])

    @staticmethod
    def _remember(x, w, b, spec):
        return _engine.remembered(x.unsqueeze(2), w.unsqueeze(2), b, spec)

    def _kernel_shape(self):
        return (self.weight.shape[0], self.weight.shape[1], 1, self.weight.shape[2])

    def _make_spec(self):  # a Spec on (B, C, 1, L)
        padding = self.padding if self.padding_mode == "zeros" else 0
        stride, padding, dilation, epilogue = _problem.conv1d_as_2d(self.stride, padding, self.dilation,
                                                                    self.epilogue)
        return _op.cached_spec((1,) + tuple(self.kernel_size) if isinstance(padding, str) else None, stride, padding,
                               dilation, self.groups, epilogue, self.variant, self.precision, self.engine,
                               self.fallback)
