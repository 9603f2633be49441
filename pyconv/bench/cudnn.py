"""cuDNN beside our numbers: torch.nn.functional.conv2d on the same operands (the very same device
memory), in the same process, timed by the same protocol as ours (timing.graph_run: CUDA-graph
replays of several calls, median per call), with cudnn.benchmark on and benchmark_limit 0 so that cuDNN
tries every engine and picks its fastest for each shape before the capture (its strongest choice is the
anchor). F.conv2d may pick PyTorch's own depthwise kernel over
cuDNN for grouped layers: what is timed is what a PyTorch user gets.

Precisions: "fp32" (TF32 off), "tf32" (TF32 on), "fp16" and "bf16" (channels_last, as
cuDNN is fastest). Operand sets in fp16 / bf16 NHWC are used as they are; fp32 sets are converted
(once per shape) where the per-variant table puts an fp16 variant beside cuDNN fp16. PyTorch is
optional (load_torch imports it when a GPU is there); without it, or without CUDA in it, every row says
why.
"""
from __future__ import annotations

from contextlib import contextmanager

from .timing import Side, graph_run

# The unit whose ceiling bounds cuDNN at a precision (bf16 tensor cores run at the fp16 rate).
UNIT_OF_PRECISION = {"fp32": "fp32", "tf32": "tf32_tensor", "fp16": "fp16_tensor", "bf16": "fp16_tensor"}
# The per-variant table: cuDNN at the precision of the unit a variant computes on.
PRECISION_OF_UNIT = {"fp32": "fp32", "tf32_tensor": "tf32", "fp16": "fp16", "fp16_tensor": "fp16"}
_DTYPE_OF_PRECISION = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def load_torch() -> tuple:
    """(torch, "") where PyTorch with CUDA and cuDNN is importable, else (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "no torch"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} without CUDA"
    if not torch.backends.cudnn.is_available():
        return None, f"torch {torch.__version__} without cuDNN"
    return torch, ""


class Cudnn:
    def __init__(self, torch, reason: str = ""):
        """torch: the module from load_torch, or None with the reason cuDNN is not timed (no torch, no
        GPU, --no-cudnn)."""
        self.torch = torch
        self.reason = "" if torch is not None else reason
        if torch is not None:
            torch.backends.cudnn.benchmark = True
            if hasattr(torch.backends.cudnn, "benchmark_limit"):
                torch.backends.cudnn.benchmark_limit = 0  # try every engine, not the first 10 heuristics name

    @property
    def available(self) -> bool:
        return self.torch is not None

    def describe(self) -> str:
        if not self.available:
            return self.reason
        t = self.torch
        limit = getattr(t.backends.cudnn, "benchmark_limit", None)
        return (f"torch {t.__version__}, cuDNN {t.backends.cudnn.version()}, cudnn.benchmark=True"
                f"{'' if limit is None else f', benchmark_limit={limit}'}; "
                f"fp32 with TF32 off, tf32, fp16 and bf16 channels_last")

    @contextmanager
    def _tf32(self, enabled: bool):
        """TF32 in cuDNN convolutions on or off for the block. PyTorch >= 2.9 has per-operator flags
        (cudnn.conv / cudnn.rnn .fp32_precision) and refuses a mix of them with the legacy allow_tf32,
        so only one of the two APIs is touched; conv and rnn are set alike because a check without an
        operator name refuses flags that differ."""
        cudnn = self.torch.backends.cudnn
        flags = [getattr(cudnn, op) for op in ("conv", "rnn") if hasattr(getattr(cudnn, op, None), "fp32_precision")]
        if flags:
            before = [f.fp32_precision for f in flags]
            for f in flags:
                f.fp32_precision = "tf32" if enabled else "ieee"
        else:
            before = [cudnn.allow_tf32]
            cudnn.allow_tf32 = enabled
        try:
            yield
        finally:
            if flags:
                for f, value in zip(flags, before):
                    f.fp32_precision = value
            else:
                cudnn.allow_tf32 = before[0]

    def operands(self, sets, precision: str) -> tuple:
        """(xs, ws) as torch tensors over our device sets: as they are where their dtype is the
        precision's, else converted to it in channels_last (fp32 sets beside cuDNN fp16 / bf16)."""
        t = self.torch
        xs, ws = ([a if isinstance(a, t.Tensor) else t.as_tensor(a, device="cuda") for a in arrays]
                  for arrays in (sets.xs, sets.ws))
        dtype = _DTYPE_OF_PRECISION[precision]
        if sets.dtype != dtype:
            to = dict(dtype=getattr(t, dtype), memory_format=t.channels_last)
            xs, ws = [x.to(**to) for x in xs], [w.to(**to) for w in ws]
        return xs, ws

    def run_for(self, shape, sets, precision: str) -> Side:
        """A timing.measure side: conv2d calls cycling through the sets, captured into one graph."""
        conv = self.torch.nn.functional.conv2d
        xs, ws = self.operands(sets, precision)
        kwargs = dict(stride=shape.stride, padding=shape.pad, dilation=shape.dilation, groups=shape.groups)
        return graph_run(self.torch, lambda i: conv(xs[i], ws[i], **kwargs), len(xs),
                         lambda: self._tf32(precision == "tf32"))

    def release(self) -> None:
        """Gives torch's cached blocks back, so that the next shape's allocations find the memory."""
        if self.available:
            self.torch.cuda.empty_cache()
