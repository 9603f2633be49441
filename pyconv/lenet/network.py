"""The whole forward pass over a batch: the two conv layers on pyconv, the rest in NumPy, timed.

The host buffers between the layers are allocated once per batch size (Buffers) and reused by
every variant; with a GPU they are page-locked so the layers' copies can overlap.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import device
from . import model
from .layers import LayerTimes, PipelineOptions, make_layer

# The bounds a reduced-precision variant is held to against the exact `cpu` predictions.
MIN_AGREEMENT = 0.995       # share of images whose predicted class is the same
MAX_ACCURACY_LOSS = 0.002   # accuracy (as a fraction) it may lose


class Buffers:
    """Host arrays of every intermediate of one batch: input, C1 out, S2 out, C3 out.

    Page-locked when `pinned` (needed for overlapped copies), plain NumPy otherwise.
    """

    def __init__(self, batch: int, pinned: bool):
        empty = device.pinned_empty if pinned else (lambda shape: np.empty(shape, np.float32))
        self.x = empty((batch,) + model.INPUT_SHAPE)
        self.c1 = empty((batch,) + model.C1_OUT)
        self.s2 = empty((batch,) + model.S2_OUT)
        self.c3 = empty((batch,) + model.C3_OUT)


@dataclass
class Result:
    conv: dict[str, LayerTimes]                         # "C1", "C3"
    host_ms: dict[str, float] = field(default_factory=dict)  # the NumPy layers, by name
    probabilities: np.ndarray | None = None             # (B, 10)

    @property
    def predictions(self) -> np.ndarray:
        return self.probabilities.argmax(axis=1)

    @property
    def rest_ms(self) -> float:
        return sum(self.host_ms.values())

    def accuracy(self, labels: np.ndarray) -> float:
        return float((self.predictions == labels).mean())


def forward(buffers: Buffers, weights: model.Weights, variant: str, options: PipelineOptions,
            progress) -> Result:
    """Runs the network on buffers.x (already filled with resized images) with `variant` ('auto'
    resolves per layer) for the convolutions."""
    result = Result(conv={})
    batch = len(buffers.x)

    result.conv["C1"] = _conv_layer("C1", weights.c1, buffers.x, buffers.c1, variant, options, progress)
    progress.start(f"S2 ReLU, max-pool on {batch} images (NumPy)")
    begin = time.perf_counter()
    model.relu_maxpool(buffers.c1, model.POOL1, out=buffers.s2)
    result.host_ms["S2 ReLU + max-pool 2x2"] = (time.perf_counter() - begin) * 1e3
    progress.finish()

    result.conv["C3"] = _conv_layer("C3", weights.c3, buffers.s2, buffers.c3, variant, options, progress)
    progress.start(f"S4 ReLU, max-pool, F5, F6 on {batch} images (NumPy)")
    begin = time.perf_counter()
    pooled = model.relu_maxpool(buffers.c3, model.POOL3)
    middle = time.perf_counter()
    result.probabilities = model.softmax(model.head(pooled, weights))
    end = time.perf_counter()
    progress.finish()
    result.host_ms["S4 ReLU + max-pool 4x4 (ceil)"] = (middle - begin) * 1e3
    result.host_ms["F5 + ReLU, F6, softmax"] = (end - middle) * 1e3
    return result


def _conv_layer(name, w, h_x, h_y, variant, options, progress) -> LayerTimes:
    layer = make_layer(w, h_x.shape, variant, options)  # plans, workspaces, buffers: not timed
    progress.start(f"{name} conv {w.shape[1]}->{w.shape[0]} {w.shape[2]}x{w.shape[3]} on {len(h_x)} images "
                   f"({layer.variant})", total=len(h_x))
    times = layer.run(h_x, h_y, progress)
    progress.finish()
    return times
