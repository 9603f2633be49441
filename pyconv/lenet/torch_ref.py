"""The same network in PyTorch + cuDNN, in the same process, from the same page-locked uint8 images
and the same weights to predictions on the host, timed the same way (wall clock, median after
warm-up). Optional: `pip install pyconv[torch]`; imported only when asked for.

    u8 -> GPU, / 255, F.interpolate bilinear (align_corners=False) to 86x86, conv, ReLU, max-pool 2,
    conv, ReLU, max-pool 4 (ceil mode), flatten, linear, ReLU, linear, softmax, argmax -> host

Configurations: fp32 (TF32 off, the exact comparison), and for the fast comparison TF32 (fp32 tensors,
TF32 allowed in cuDNN and matmul) and fp16 channels-last; cudnn.benchmark on (cuDNN picks its
fastest algorithm per shape during the warm-up).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from . import data, model, train

INSTALL_HINT = "pip install pyconv[torch] (or pip install torch) gives the PyTorch + cuDNN comparison"
CONFIGS = {"exact": ("fp32",), "fast": ("tf32", "fp16 channels-last")}
WARMUP = 3


def import_torch():
    """torch with a usable GPU, or (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, f"PyTorch is not installed: {INSTALL_HINT}"
    if not torch.cuda.is_available():
        return None, f"PyTorch {torch.__version__} sees no CUDA device (a CPU-only build?)"
    return torch, ""


@dataclass
class TorchResult:
    config: str
    runs_ms: list
    classes: np.ndarray

    @property
    def median_ms(self) -> float:
        return statistics.median(self.runs_ms)


class TorchNetwork:
    """train.py's network (the one definition of LeNet-5 in PyTorch) with the given weights, in the
    configuration's dtype and memory format, behind the same preprocessing and classification."""

    def __init__(self, torch, weights: model.Weights, config: str, device: int):
        self.torch, self.config = torch, config
        self.device = torch.device("cuda", device)
        self.dtype = torch.float16 if config.startswith("fp16") else torch.float32
        self.memory_format = torch.channels_last if config.endswith("channels-last") else torch.contiguous_format
        net = train.load_into(torch, train.build_network(torch), weights)
        self.net = net.to(self.device, self.dtype, memory_format=self.memory_format).eval()

    def _forward(self, images):
        torch, F = self.torch, self.torch.nn.functional
        x = images.to(self.device, non_blocking=True)[:, None].to(self.dtype).div_(255)
        x = F.interpolate(x, size=(data.NETWORK_SIZE, data.NETWORK_SIZE), mode="bilinear", align_corners=False)
        logits = self.net(x.contiguous(memory_format=self.memory_format))
        return torch.softmax(logits.float(), 1).argmax(1).to(torch.int32).cpu()

    def run(self, images: np.ndarray, repeats: int) -> TorchResult:
        torch = self.torch
        backends = torch.backends
        saved = (backends.cudnn.benchmark, backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32)
        tf32 = self.config == "tf32"
        backends.cudnn.benchmark, backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = True, tf32, tf32
        try:
            host = torch.from_numpy(images)  # the caller's page-locked array, shared, not copied
            with torch.no_grad(), torch.cuda.device(self.device):
                for _ in range(WARMUP):
                    classes = self._forward(host)
                runs = []
                for _ in range(repeats):
                    torch.cuda.synchronize()
                    begin = time.perf_counter()
                    classes = self._forward(host)  # .cpu() waits for the predictions
                    runs.append((time.perf_counter() - begin) * 1e3)
        finally:
            backends.cudnn.benchmark, backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = saved
        return TorchResult(self.config, runs, classes.numpy())


def compare(images: np.ndarray, weights: model.Weights, precision: str, device: int, repeats: int):
    """([TorchResult per configuration of the precision], seconds the comparison took, why not or '')."""
    begin = time.perf_counter()
    torch, why = import_torch()
    if torch is None:
        return [], time.perf_counter() - begin, why
    results = [TorchNetwork(torch, weights, config, device).run(images, repeats) for config in CONFIGS[precision]]
    return results, time.perf_counter() - begin, ""
