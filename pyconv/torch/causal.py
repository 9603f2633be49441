"""pyconv.torch.causal_conv1d and causal_conv1d_update: sequence models' short causal depthwise conv.

Drop-ins for the conv of Mamba-style blocks, with the argument order of the causal-conv1d package:
    y = causal_conv1d(x, weight, bias=None, activation=None)
        x (B, D, L), contiguous or channel-last (x.stride(1) == 1: a (B, L, D) tensor transposed), kept;
        weight (D, K) or (D, 1, K); bias (D,) or None; activation None, "silu" / "swish" or "relu".
        y[b, d, l] = act(bias[d] + sum_k weight[d, k] * x[b, d, l - (K-1) + k]), zeros before the start:
        nn.Conv1d(D, D, K, groups=D, padding=K-1)(x)[..., :L] then the activation, in x's dtype and layout.
    y = causal_conv1d_update(x, conv_state, weight, bias=None, activation=None)
        one decoding step: x (B, D) or (B, D, T) new tokens, conv_state (B, D, S >= K-1) updated in place.
Both are ops (pyconv::causal_conv1d, pyconv::causal_conv1d_update) with fake kernels, so torch.compile
traces them whole, and run on PyTorch's current stream without synchronising (CUDA-graph capture
works). causal_conv1d is differentiable: its backward is PyTorch's own conv1d and activation gradients.
CUDA tensors run pyconv's depthwise_conv1d kernels; CPU tensors the cpu variant (the whole sequence)
or PyTorch's ops (the update). weight and bias are cast to x's dtype.
"""
from __future__ import annotations

import os
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import api
from ..causal import update_problem
from .._lib import ConvError, error_for, ffi, lib
from . import _engine

_ACTIVATIONS = {None: 0, "relu": 1, "silu": 2, "swish": 2}
_EPILOGUES = (None, "relu", "silu")  # by activation code: pyconv's epilogue names


def _activation_code(activation) -> int:
    if activation not in _ACTIVATIONS:
        raise ConvError(f"activation must be None, 'silu', 'swish' or 'relu', got {activation!r}")
    return _ACTIVATIONS[activation]


def _activate(y: Tensor, code: int) -> Tensor:
    return F.silu(y) if code == 2 else F.relu(y) if code == 1 else y


def _reference(x: Tensor, weight: Tensor, bias: Optional[Tensor], code: int) -> Tensor:
    """The causal conv in PyTorch's ops: what the kernels replace, and the graph the backward differentiates."""
    D, K = weight.shape
    y = F.conv1d(x, weight.unsqueeze(1), bias, padding=K - 1, groups=D)[..., :x.shape[-1]]
    return _activate(y, code)


# ---- the whole sequence ----

def _channel_last(x: Tensor) -> bool:
    """(B, D, L) stored as (B, L, D): a (B, L, D) tensor transposed, as Mamba-style code passes it."""
    B, D, L = x.shape
    return x.stride() == (L * D, 1, D) and D > 1 and L > 1


_plans: dict = {}
os.register_at_fork(after_in_child=_plans.clear)  # a parent's plans hold its CUDA context's kernels


def _plan(x: Tensor, K: int, has_bias: bool, code: int, nhwc: bool):
    """A Conv2dPlan of the (B, D, 1, L) causal depthwise problem, cached on what it depends on."""
    B, D, L = x.shape
    key = (B, D, L, K, x.dtype, x.device, has_bias, code, nhwc)
    plan = _plans.get(key)
    if plan is None:
        dtype = str(x.dtype).replace("torch.", "")
        plan = api.Conv2dPlan((B, D, 1, L), (D, 1, 1, K), padding="causal", groups=D, bias=has_bias,
                              epilogue=_EPILOGUES[code], variant="depthwise_conv1d" if x.is_cuda else "cpu",
                              dtype=dtype, layout="NHWC" if nhwc else "NCHW",
                              device=x.device.index if x.is_cuda else None)
        if len(_plans) > 1024:
            _plans.clear()
        _plans[key] = plan
    return plan


@torch.library.custom_op("pyconv::causal_conv1d", mutates_args=())
def causal_conv1d_op(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: int) -> Tensor:
    """x (B, D, L) contiguous or channel-last, weight (D, K) contiguous, bias (D,) or None, all of x's
    dtype; activation 0 none, 1 ReLU, 2 SiLU."""
    nhwc = _channel_last(x)
    plan = _plan(x, weight.shape[1], bias is not None, activation, nhwc)
    y = torch.empty_like(x)  # x's strides: channel-last stays channel-last
    device = x.get_device()
    status = _engine.launch_function()(int(ffi().cast("uintptr_t", plan._plan.handle)), x.data_ptr(),
                                       weight.data_ptr(), 0 if bias is None else bias.data_ptr(), y.data_ptr(),
                                       0, 0, _engine._raw_stream(device) if device >= 0 else 0)
    if status:
        raise error_for(status)
    return y


@causal_conv1d_op.register_fake
def _causal_conv1d_fake(x, weight, bias, activation):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    x, weight, bias, activation = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.activation = activation


def _backward(ctx, grad):
    """PyTorch's gradients of the same function (_reference), taken from its own ops."""
    operands = ctx.saved_tensors
    needs = [bool(need) and t is not None for need, t in zip(ctx.needs_input_grad[:3], operands)]
    with torch.enable_grad():
        leaves = [None if t is None else t.detach().requires_grad_(need) for t, need in zip(operands, needs)]
        y = _reference(*leaves, ctx.activation)
        inputs = [leaf for leaf, need in zip(leaves, needs) if need]
        grads = iter(torch.autograd.grad(y, inputs, grad) if inputs else ())
    return tuple(next(grads) if need else None for need in needs) + (None,)


causal_conv1d_op.register_autograd(_backward, setup_context=_setup_context)


def _weight_2d(weight: Tensor, dtype) -> Tensor:
    if weight.dim() == 3:
        if weight.shape[1] != 1:
            raise ConvError(f"weight must be (D, K) or (D, 1, K), got {tuple(weight.shape)}")
        weight = weight.squeeze(1)
    if weight.dim() != 2:
        raise ConvError(f"weight must be (D, K) or (D, 1, K), got {tuple(weight.shape)}")
    return weight.to(dtype).contiguous()


def causal_conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation=None) -> Tensor:
    """act(bias + causal depthwise conv1d of x with weight): see the module's docstring."""
    code = _activation_code(activation)
    if x.dim() != 3:
        raise ConvError(f"x must be (B, D, L), got {tuple(x.shape)}")
    weight = _weight_2d(weight, x.dtype)
    if weight.shape[0] != x.shape[1] or (bias is not None and tuple(bias.shape) != (x.shape[1],)):
        raise ConvError(f"x (B, D, L) = {tuple(x.shape)} needs weight (D, K) and bias (D,), got weight "
                        f"{tuple(weight.shape)}" + ("" if bias is None else f" and bias {tuple(bias.shape)}"))
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ConvError(f"x must be float32, float16 or bfloat16, got {x.dtype}")
    if not (x.is_contiguous() or _channel_last(x)):
        x = x.contiguous()
    if bias is not None:
        bias = bias.to(x.dtype).contiguous()
    if x.numel() == 0:
        return _reference(x, weight, bias, code)
    return causal_conv1d_op(x, weight, bias, code)


# ---- one decoding step ----


@torch.library.custom_op("pyconv::causal_conv1d_update", mutates_args=("conv_state",))
def causal_conv1d_update_op(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor],
                            activation: int) -> Tensor:
    """x (B, D, T) contiguous, conv_state (B, D, S) contiguous (updated in place), weight (D, K), bias (D,)
    or None, all of x's dtype; activation as causal_conv1d_op's."""
    B, D, T = x.shape
    S, K = conv_state.shape[2], weight.shape[1]
    if not x.is_cuda:  # PyTorch's ops on the host: the window, its conv, the shifted state
        window = torch.cat([conv_state, x], dim=2)
        y = _activate(F.conv1d(window[..., S - (K - 1):], weight.unsqueeze(1), bias, groups=D), code=activation)
        conv_state.copy_(window[..., -S:])
        return y
    y = torch.empty_like(x)
    f = ffi()
    dtype = str(x.dtype).replace("torch.", "")
    problem = update_problem(B, D, T, K, dtype, bias is not None, _EPILOGUES[activation])
    status = lib().conv1d_causal_update(problem, S,
                                        f.cast("void*", x.data_ptr()), f.cast("void*", conv_state.data_ptr()),
                                        f.cast("void*", weight.data_ptr()),
                                        f.cast("void*", 0 if bias is None else bias.data_ptr()),
                                        f.cast("void*", y.data_ptr()),
                                        f.cast("void*", _engine._raw_stream(x.get_device())))
    if status:
        raise error_for(status)
    return y


@causal_conv1d_update_op.register_fake
def _update_fake(x, conv_state, weight, bias, activation):
    return torch.empty_like(x)


def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                         activation=None) -> Tensor:
    """One decoding step: see the module's docstring. Returns y of x's shape; conv_state shifts in place."""
    code = _activation_code(activation)
    one_token = x.dim() == 2
    x3 = x.unsqueeze(2) if one_token else x
    if x3.dim() != 3 or conv_state.dim() != 3:
        raise ConvError(f"x must be (B, D) or (B, D, T) and conv_state (B, D, S), got {tuple(x.shape)} and "
                        f"{tuple(conv_state.shape)}")
    weight = _weight_2d(weight, x.dtype)
    B, D, _ = x3.shape
    if tuple(conv_state.shape[:2]) != (B, D) or weight.shape[0] != D or conv_state.shape[2] < weight.shape[1] - 1:
        raise ConvError(f"x (B, D, T) = {tuple(x3.shape)} needs conv_state (B, D, S >= K-1) and weight (D, K), got "
                        f"conv_state {tuple(conv_state.shape)} and weight {tuple(weight.shape)}")
    if conv_state.dtype != x.dtype or not conv_state.is_contiguous() or conv_state.device != x.device:
        raise ConvError("conv_state must be contiguous, on x's device and of x's dtype (it is updated in place), got "
                        f"{conv_state.dtype} on {conv_state.device}, contiguous={conv_state.is_contiguous()}")
    if bias is not None:
        bias = bias.to(x.dtype).contiguous()
    y = causal_conv1d_update_op(x3.contiguous(), conv_state, weight, bias, code)
    return y.squeeze(2) if one_token else y
