"""PyTorch's own convolution, for what our kernels refuse (or lose on time), and the record of refusals.

A refusal (a dtype, a device, a shape our kernels do not take) is said once per reason as a
FallbackWarning and counted per call in fallback_counts(); with fallback=False it raises instead.
"""
from __future__ import annotations

import os
import threading
import warnings
from collections import Counter

import torch
import torch.nn.functional as F

from .._lib import ConvUnsupportedError

EPILOGUE_NONE, EPILOGUE_RELU, EPILOGUE_RELU_MAXPOOL = 0, 1, 2
_UNSUPPORTED = -2  # CONV_ERR_UNSUPPORTED


class FallbackWarning(UserWarning):
    """A convolution ran on PyTorch's conv because pyconv's kernels do not take it (said once per reason)."""


_counts: Counter = Counter()
_warned: set = set()
_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # one a parent thread held at the fork would stay held in the child


os.register_at_fork(after_in_child=_new_lock_after_fork)


def torch_conv(x, w, b, spec):
    """epilogue(conv(x, w) + b) with torch.nn.functional: the reference our kernels replace."""
    y = F.conv2d(x, w, b, spec.stride, spec.padding, spec.dilation, spec.groups)
    kind, ph, pw, sh, sw, ceil = spec.epilogue
    if kind == EPILOGUE_NONE:
        return y
    y = F.relu(y)
    if kind == EPILOGUE_RELU_MAXPOOL:
        y = F.max_pool2d(y, (ph, pw), (sh, sw), 0, 1, bool(ceil))
    return y


def refuse(reason: str, fallback: bool) -> None:
    """Says (once per reason) that PyTorch's conv runs instead, or raises when fallback is off."""
    if not fallback:
        raise ConvUnsupportedError(f"{reason} (fallback=False: PyTorch's conv was not used)", _UNSUPPORTED,
                                   "CONV_ERR_UNSUPPORTED")
    with _lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(f"pyconv.torch: {reason}; PyTorch's conv runs this layer instead "
                  f"(pyconv.torch.fallback_counts() counts such calls)", FallbackWarning, stacklevel=4)


def count(reason: str) -> None:
    with _lock:
        _counts[reason] += 1


def fallback_counts() -> dict:
    """Calls that ran on PyTorch's conv because ours refused them, by reason."""
    with _lock:
        return dict(_counts)


def reset() -> None:
    """Forgets the counts and which reasons were already warned about."""
    with _lock:
        _counts.clear()
        _warned.clear()


def memory_format_of(nhwc: bool):
    return torch.channels_last if nhwc else torch.contiguous_format
