"""pyconv.torch.convert: a model whose nn.Conv2d / nn.Conv1d layers run on pyconv.

Every nn.Conv2d and nn.Conv1d (exactly those classes, or those parametrized by torch.nn.utils.parametrize:
subclasses may change forward) becomes a pyconv.torch.Conv2d / Conv1d in place (Conv2d.adopt): the
same module object, so that its hooks, the handles that remove them, parametrizations, pruning's
weight_orig and mask, and the state_dict keys all stay. In an nn.Sequential, a Conv2d followed by ReLU,
or by ReLU and a MaxPool2d without padding or dilation, takes them into its fused epilogue (a Conv1d a
following ReLU), and they become nn.Identity, so that the module tree and state_dict keys stay the
same; not where a hook would see a different tensor or be lost (report(model) says so). A Conv2d whose
output only a BatchNorm2d takes (a Conv1d's: a BatchNorm1d; in an nn.Sequential, or in a forward torch.fx
can trace) folds it in at inference calls (batchnorm.py: eval mode, nothing for autograd to record, no hook
to see the difference); the norm stays in the model, with its state_dict keys, for every other call. With
engine "fastest" (the default) each layer's first call of a shape times ours against PyTorch's conv and
keeps the faster (report(model) prints what each layer chose).
"""
from __future__ import annotations

import copy
from collections import Counter
from typing import Optional

import torch
from torch import nn
from torch.nn.modules.utils import _pair
from torch.nn.utils import parametrize

from .._problem import ReluMaxPool
from . import batchnorm
from .module import _BATCHNORM, Conv1d, Conv2d

_SWAPS = {nn.Conv2d: Conv2d, nn.Conv1d: Conv1d}


def _fusible_pool(m) -> bool:
    return (type(m) is nn.MaxPool2d and _pair(m.padding) == (0, 0) and _pair(m.dilation) == (1, 1)
            and not m.return_indices)


def _sees_output(m) -> bool:
    """Hooks on m that see its output or the gradient of it: fusing what follows would change that."""
    return bool(m._forward_hooks or m._backward_hooks or m._backward_pre_hooks)


def _hooked(m) -> bool:
    """Any forward or backward hook on m: fused into a conv, m becomes an nn.Identity without them."""
    return _sees_output(m) or bool(m._forward_pre_hooks)


def _fuse(seq: nn.Sequential, uses: Counter) -> None:
    """Conv2d, ReLU[, MaxPool2d] and Conv1d, ReLU runs of a Sequential into the conv's epilogue, where no
    hook changes what it sees and the conv runs nowhere else (its epilogue would apply there too)."""
    names = list(seq._modules)
    for i, name in enumerate(names[:-1]):
        conv, relu = seq._modules[name], seq._modules[names[i + 1]]
        kind = parametrize.type_before_parametrizations(conv)
        if kind not in (Conv2d, Conv1d) or conv.epilogue is not None or type(relu) is not nn.ReLU:
            continue
        why = ("a hook sees this conv's output" if _sees_output(conv) else "the ReLU has hooks" if _hooked(relu)
               else "this conv also runs elsewhere in the model" if uses[id(conv)] > 1 else None)
        conv.not_fused = why and f"ReLU not fused: {why}"  # None again where a later convert fuses it
        if why:
            continue
        conv.epilogue = "relu"
        seq._modules[names[i + 1]] = nn.Identity()
        pool = seq._modules[names[i + 2]] if i + 2 < len(names) else None
        if kind is Conv2d and _fusible_pool(pool):
            if _hooked(pool):
                conv.not_fused = "MaxPool2d not fused: the pool has hooks"
            else:
                stride = pool.stride if pool.stride is not None else pool.kernel_size
                conv.epilogue = ReluMaxPool(_pair(pool.kernel_size), _pair(stride), bool(pool.ceil_mode))
                seq._modules[names[i + 2]] = nn.Identity()
        conv.spec()  # checks the fused epilogue now


def convert(model: nn.Module, *, variant: str = "auto", precision: Optional[str] = None, engine: str = "fastest",
            fallback: bool = True, fuse: bool = True, example_inputs=None, inplace: bool = False) -> nn.Module:
    """`model` (a copy unless inplace) with every nn.Conv2d / nn.Conv1d on pyconv.

    variant, precision, engine, fallback: each layer's options (see pyconv.torch.conv2d); engine
    "fastest" keeps PyTorch's conv for a layer where that measured faster. fuse: take ReLU / ReLU +
    MaxPool2d that follow a conv in an nn.Sequential into its epilogue, and fold a BatchNorm2d / 1d that takes a
    Conv2d's / Conv1d's output into it at inference calls (eval mode, no grad). example_inputs: a tensor or
    tuple run through the model once (without grad) so that every layer plans, and with "fastest"
    decides, now rather than on its first real call.

    Each conv is converted as the same object (Conv2d.adopt), so its forward and backward hooks run as
    before, and pruned or parametrized convs compute their weight at every forward with the same
    state_dict keys. inplace=True keeps the very modules: the handles that remove hooks still work. The
    copy (inplace=False) carries copies of the hooks as copy.deepcopy makes them: handles returned
    before convert act on the original model, and a hook object's own state is copied.

    With fuse, finding batch norms to fold runs the forward of each module that holds a conv under torch.fx's
    symbolic tracer (with proxies, not tensors; a forward it cannot trace is skipped), which patches
    nn.Module's __call__ and __getattr__ for the process meanwhile: convert while no other thread runs a model."""
    if not inplace:
        # Tensors that prune's and weight_norm's forward pre-hooks compute from the parameters are plain
        # attributes deepcopy refuses while they have a grad_fn: the copy takes their values, and its own
        # hooks compute them again from its parameters at every forward.
        computed = {id(t): t.detach().clone() for m in model.modules() for t in vars(m).values()
                    if isinstance(t, torch.Tensor) and not t.is_leaf}
        model = copy.deepcopy(model, computed)
    for m in list(model.modules()):
        swap = _SWAPS.get(parametrize.type_before_parametrizations(m))
        if swap is not None:
            swap.adopt(m, variant=variant, precision=precision, engine=engine, fallback=fallback)
    if fuse:
        parents = list(model.modules())  # each once, however often it is shared
        uses = Counter(id(child) for parent in parents for child in parent._modules.values())
        for parent in parents:
            if isinstance(parent, nn.Sequential):
                _fuse(parent, uses)
        for conv, bn, why in batchnorm.pairs(model, uses, {Conv2d: nn.BatchNorm2d, Conv1d: nn.BatchNorm1d}):
            if why is None:
                batchnorm.attach(conv, bn)
            else:
                conv.not_fused = f"{batchnorm.norm_name(bn)} not folded: {why}"
    if example_inputs is not None:
        with torch.no_grad():
            model(*(example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)))
    return model


class Report(dict):
    """report()'s answer: {layer name: its decisions()} as a dict, printed as a table with one row per
    layer and input shape (a layer not run yet: one row). not_fused: {layer name: why convert left a
    ReLU / pool after it out of its epilogue, or a batch norm unfolded}; folded: {layer name: the batch norm
    it folds in at inference calls}. The table cuts long "why" texts; the data keeps them.
    compiled: {layer name: "pyconv" or "torch"}, the engine that torch.compile gives the layer now (engine
    "fastest": ours where every input so far ran ours both eagerly and in CUDA graphs).
    Columns: "engine" runs the layer's eager calls, "in graphs" its CUDA-graph captures, "compiled" as above;
    the times are ms per call of each engine as engine "fastest" measured them (host: the host's time, gpu:
    the GPU's over back-to-back launches, graph: the GPU's replaying a CUDA graph of calls, which "in graphs"
    follows)."""

    COLUMNS = ("layer", "input", "device", "dtype layout", "epilogue", "engine", "in graphs", "compiled",
               "variant[config]", "ours host", "torch host", "ours gpu", "torch gpu", "ours graph", "torch graph",
               "why")
    _TIMES = ("pyconv_host_ms", "torch_host_ms", "pyconv_gpu_ms", "torch_gpu_ms", "pyconv_graph_ms",
              "torch_graph_ms")  # the columns before why
    _TIME_COLUMNS = frozenset(range(len(COLUMNS) - 1 - len(_TIMES), len(COLUMNS) - 1))

    def __init__(self, layers: dict, not_fused: dict, folded: Optional[dict] = None, compiled: Optional[dict] = None):
        super().__init__(layers)
        self.not_fused = not_fused
        self.folded = folded or {}  # {layer name: the batch norm it folds in at inference calls}
        self.compiled = compiled or {}

    def rows(self) -> list:
        """The table's rows: one tuple of texts per layer and input shape, in COLUMNS' order, why uncut."""
        rows = []
        for layer, records in self.items():
            note = "; ".join(n for n in (self.not_fused.get(layer),
                                         self.folded.get(layer) and f"folds the norm {self.folded[layer]}") if n)
            for r in records or [None]:
                if r is None:
                    row = [layer] + ["-"] * (len(self.COLUMNS) - 2) + ["not run yet"]
                else:
                    variant = f"{r['variant']}[{r['config']}]" if r["variant"] else "-"
                    row = [layer, "x".join(map(str, r["input"])), r["device"], f"{r['dtype']} {r['layout']}",
                           r["epilogue"], r["engine"], r["engine_captured"], self.compiled.get(layer, "-"), variant]
                    row += ["-" if r[k] is None else f"{r[k]:.4f}" for k in self._TIMES]
                    row.append(r["why"] or "-")
                if note:  # first: the table cuts the end of long texts
                    row[-1] = f"{note}; {row[-1]}"
                rows.append(tuple(row))
        return rows

    def table(self, why_width: int = 48) -> str:
        """The rows as aligned text, "why" cut to why_width characters with "...", without the time columns
        no row has (the GPU-only times of a model run on the host)."""
        body = [r[:-1] + ((r[-1] if len(r[-1]) <= why_width else r[-1][:why_width - 3] + "..."),) for r in self.rows()]
        shown = [i for i, name in enumerate(self.COLUMNS)
                 if i not in self._TIME_COLUMNS or any(r[i] != "-" for r in body) or not body]
        rows = [tuple(row[i] for i in shown) for row in [self.COLUMNS] + body]
        widths = [max(len(row[k]) for row in rows) for k in range(len(shown))]
        numeric = {k for k, i in enumerate(shown) if i in self._TIME_COLUMNS}
        lines = ["  ".join(text.rjust(w) if k in numeric else text.ljust(w)
                           for k, (text, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    __str__ = __repr__ = table  # the REPL and print show the table; dict(report) is the plain data


def report(model: nn.Module) -> Report:
    """{layer name: its decisions()} for every pyconv layer of a converted model; prints as a table."""
    names = {id(m): name for name, m in model.named_modules()}
    layers = {name: m for name, m in model.named_modules() if isinstance(m, (Conv2d, Conv1d))}
    folded = {name: names.get(id(m.__dict__[_BATCHNORM]), "(outside this model)") for name, m in layers.items()
              if _BATCHNORM in m.__dict__}
    return Report({name: m.decisions() for name, m in layers.items()},
                  {name: m.not_fused for name, m in layers.items() if m.not_fused}, folded,
                  {name: m.compiled_engine() for name, m in layers.items()})
