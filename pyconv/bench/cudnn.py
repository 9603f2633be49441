"""cuDNN beside our numbers: torch.nn.functional.conv2d on the same operands (the very same device
memory), in the same process, timed by the same protocol as ours (timing.measure over CUDA-graph
replays of several calls, median per call), with cudnn.benchmark on so that cuDNN picks its fastest
algorithm for each shape before the capture.

Precisions: "fp32" (TF32 off) beside exact variants; "tf32" (TF32 on) beside TF32 tensor-core
variants; "fp16" (half operands, channels_last, as cuDNN is fastest) beside fp16 variants, CUDA-core
or tensor-core. PyTorch is optional: imported on first use; without it, or without CUDA in it, every
row says why.
"""
from __future__ import annotations

from contextlib import contextmanager

from .timing import Side

PRECISION_OF_UNIT = {"fp32": "fp32", "tf32_tensor": "tf32", "fp16": "fp16", "fp16_tensor": "fp16"}


class Cudnn:
    def __init__(self, off_reason: str = ""):
        """off_reason: why cuDNN is not to be timed at all (no GPU, --no-cudnn); torch is then not imported."""
        self.torch = None
        if off_reason:
            self.reason = off_reason
            return
        try:
            import torch
        except ImportError:
            self.reason = "no torch"
            return
        if not torch.cuda.is_available():
            self.reason = f"torch {torch.__version__} without CUDA"
            return
        if not torch.backends.cudnn.is_available():
            self.reason = f"torch {torch.__version__} without cuDNN"
            return
        self.torch = torch
        self.reason = ""
        torch.backends.cudnn.benchmark = True

    @property
    def available(self) -> bool:
        return self.torch is not None

    def describe(self) -> str:
        if not self.available:
            return self.reason
        t = self.torch
        return (f"torch {t.__version__}, cuDNN {t.backends.cudnn.version()}, cudnn.benchmark=True; "
                f"fp32 with TF32 off, tf32, fp16 channels_last")

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
        """(xs, ws) as torch tensors over our device sets, converted for fp16."""
        t = self.torch
        xs = [t.as_tensor(a, device="cuda") for a in sets.xs]
        ws = [t.as_tensor(a, device="cuda") for a in sets.ws]
        if precision == "fp16":
            xs = [x.half().contiguous(memory_format=t.channels_last) for x in xs]
            ws = [w.half().contiguous(memory_format=t.channels_last) for w in ws]
        return xs, ws

    def run_for(self, shape, sets, precision: str) -> Side:
        """A timing.measure side: conv2d calls cycling through the sets, captured into one graph."""
        t = self.torch
        conv = t.nn.functional.conv2d
        xs, ws = self.operands(sets, precision)
        n = len(xs)
        kwargs = dict(stride=shape.stride, padding=shape.pad, dilation=shape.dilation)

        def run(calls: int, warmup: int, reps: int) -> list:
            with self._tf32(precision == "tf32"):
                # Eager calls first, on a side stream as torch asks before a capture: cudnn.benchmark
                # chooses its algorithm and sizes its workspace here, outside the graph.
                side = t.cuda.Stream()
                side.wait_stream(t.cuda.current_stream())
                with t.cuda.stream(side):
                    for i in range(n):
                        conv(xs[i], ws[i], **kwargs)
                t.cuda.current_stream().wait_stream(side)
                graph = t.cuda.CUDAGraph()
                outs = [None] * n  # n outputs alive, cycling like ours
                with t.cuda.graph(graph):
                    for i in range(calls):
                        outs[i % n] = conv(xs[i % n], ws[i % n], **kwargs)
                for _ in range(warmup):
                    graph.replay()
                events = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(reps)]
                for start, stop in events:
                    start.record()
                    graph.replay()
                    stop.record()
                t.cuda.synchronize()
                times = [start.elapsed_time(stop) / calls for start, stop in events]
                del graph, outs
                return times
        return Side(run, n)

    def release(self) -> None:
        """Gives torch's cached blocks back, so that the next shape's cudaMalloc finds the memory."""
        if self.available:
            self.torch.cuda.empty_cache()
