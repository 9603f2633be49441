"""pyconv.torch.convert: a model whose nn.Conv2d / nn.Conv1d layers run on pyconv.

Every nn.Conv2d and nn.Conv1d (exactly those classes: subclasses may change forward) becomes a
pyconv.torch.Conv2d / Conv1d sharing its parameters. In an nn.Sequential, a Conv2d followed by ReLU,
or by ReLU and a MaxPool2d without padding or dilation, takes them into its fused epilogue (a Conv1d
a following ReLU), and they become nn.Identity, so that the module tree and state_dict keys stay
the same. With engine "fastest" (the default) each layer's first call of a shape times ours against
PyTorch's conv and keeps the faster (report(model) says what each layer chose).
"""
from __future__ import annotations

import copy
from typing import Optional

import torch
from torch import nn
from torch.nn.modules.utils import _pair

from .._problem import ReluMaxPool
from .module import Conv1d, Conv2d

_SWAPS = {nn.Conv2d: Conv2d, nn.Conv1d: Conv1d}


def _fusible_pool(m) -> bool:
    return (type(m) is nn.MaxPool2d and _pair(m.padding) == (0, 0) and _pair(m.dilation) == (1, 1)
            and not m.return_indices)


def _fuse(seq: nn.Sequential) -> None:
    """Conv2d, ReLU[, MaxPool2d] and Conv1d, ReLU runs of a Sequential into the conv's epilogue."""
    names = list(seq._modules)
    for i, name in enumerate(names[:-1]):
        conv, following = seq._modules[name], seq._modules[names[i + 1]]
        if type(conv) not in (Conv2d, Conv1d) or conv.epilogue is not None or type(following) is not nn.ReLU:
            continue
        conv.epilogue = "relu"
        seq._modules[names[i + 1]] = nn.Identity()
        pool = seq._modules[names[i + 2]] if i + 2 < len(names) else None
        if type(conv) is Conv2d and _fusible_pool(pool):
            stride = pool.stride if pool.stride is not None else pool.kernel_size
            conv.epilogue = ReluMaxPool(_pair(pool.kernel_size), _pair(stride), bool(pool.ceil_mode))
            seq._modules[names[i + 2]] = nn.Identity()
        conv.spec()  # checks the fused epilogue now


def convert(model: nn.Module, *, variant: str = "auto", precision: Optional[str] = None, engine: str = "fastest",
            fallback: bool = True, fuse: bool = True, example_inputs=None, inplace: bool = False) -> nn.Module:
    """`model` (a copy unless inplace) with every nn.Conv2d / nn.Conv1d on pyconv.

    variant, precision, engine, fallback: each layer's options (see pyconv.torch.conv2d); engine
    "fastest" keeps PyTorch's conv for a layer where that measured faster. fuse: take ReLU / ReLU +
    MaxPool2d that follow a conv in an nn.Sequential into its epilogue. example_inputs: a tensor or
    tuple run through the model once (without grad) so that every layer plans, and with "fastest"
    decides, now rather than on its first real call."""
    if not inplace:
        model = copy.deepcopy(model)
    options = dict(variant=variant, precision=precision, engine=engine, fallback=fallback)
    root = _SWAPS.get(type(model))
    if root is not None:
        model = root.from_torch(model, **options)
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):
            swap = _SWAPS.get(type(child))
            if swap is not None:
                parent._modules[name] = swap.from_torch(child, **options)
    if fuse:
        for parent in list(model.modules()):
            if isinstance(parent, nn.Sequential):
                _fuse(parent)
    if example_inputs is not None:
        with torch.no_grad():
            model(*(example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)))
    return model


def report(model: nn.Module) -> dict:
    """{layer name: its decisions()} for every pyconv layer of a converted model."""
    return {name: m.decisions() for name, m in model.named_modules() if isinstance(m, (Conv2d, Conv1d))}
