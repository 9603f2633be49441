"""pyconv inside PyTorch models (the optional extra: pip install 'pyconv[torch]').

    import torch, pyconv.torch as pct
    y = pct.conv2d(x, w, b, stride=1, padding=1)                  # a torch op: compile, autograd, graphs
    layer = pct.Conv2d(3, 16, 3, padding=1)                      # a drop-in torch.nn.Conv2d
    fast = pct.convert(model, example_inputs=x)                  # every nn.Conv2d / nn.Conv1d swapped

Sequence models' short conv: pct.causal_conv1d(x, w, bias, activation="silu") and its decoding step
pct.causal_conv1d_update(x, conv_state, w, bias, activation) (ops pyconv::causal_conv1d / _update).

The ops are torch.ops.pyconv.conv2d / conv1d. They run on the tensors' device and PyTorch's current
stream, with output and workspace from PyTorch's allocator; CPU tensors run the cpu variant. Where
our kernels refuse a case, PyTorch's conv runs it with one FallbackWarning per reason and a count in
fallback_counts(), or ConvUnsupportedError with fallback=False. decisions() says, per shape, which
engine ran and why. New shapes tune within set_tuning_budget_ms's budget (default 300 ms a shape).
"""
from ._engine import DEFAULT_TUNING_BUDGET_MS, clear, decisions, set_tuning_budget_ms
from ._fallback import FallbackWarning, fallback_counts
from ._fallback import reset as reset_fallback_counts
from ._op import conv1d, conv2d
from .causal import causal_conv1d, causal_conv1d_update
from .convert import convert, report
from .module import Conv1d, Conv2d

__all__ = ["DEFAULT_TUNING_BUDGET_MS", "Conv1d", "Conv2d", "FallbackWarning", "causal_conv1d", "causal_conv1d_update",
           "clear", "conv1d", "conv2d", "convert",
           "decisions", "fallback_counts", "report", "reset_fallback_counts", "set_tuning_budget_ms"]
