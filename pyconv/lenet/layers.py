"""A convolution layer of the network over a whole batch of host arrays, and what it cost.

`make_layer` binds one layer's weights to a variant: a GPU variant gets the stream pipeline of
gpu_layer.py, the host variant `cpu` gets CpuConvLayer below. Both read a host input and write a
host output, so the rest of the network does not care where the convolution ran.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import api


@dataclass
class LayerTimes:
    """Milliseconds of one conv layer over the whole batch."""
    variant: str                  # the concrete variant that ran ('auto' resolved)
    on_device: bool
    op_ms: float                  # the convolution alone: CUDA events around the launch (GPU),
                                  # perf_counter around the launches (cpu)
    layer_ms: float               # with transfers, one stream, no overlap (cpu: = op_ms)
    h2d_ms: float | None = None   # GPU: the input's host-to-device copy, one stream
    d2h_ms: float | None = None   # GPU: the output's device-to-host copy, one stream
    overlapped_ms: float | None = None  # GPU: with transfers, chunks on several streams


@dataclass(frozen=True)
class PipelineOptions:
    streams: int = 4     # CUDA streams the chunks are spread over
    chunks: int = 16     # chunks the batch is cut into (at most one image each)
    repeats: int = 5     # timed GPU runs after one warm-up; the median is reported


def chunk_bounds(batch: int, chunks: int) -> list[tuple[int, int]]:
    """[start, stop) of `chunks` nearly equal consecutive slices of the batch (none empty)."""
    chunks = max(1, min(chunks, batch))
    edges = np.linspace(0, batch, chunks + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


class CpuConvLayer:
    """The host variant over the batch in slices, so a long run can show progress."""

    SLICE = 500  # images per launch: progress every second or so on two cores, no cost in speed

    def __init__(self, w: np.ndarray, x_shape, variant: str):
        self.w = np.ascontiguousarray(w, np.float32)
        self.batch, self.in_shape = x_shape[0], tuple(x_shape[1:])
        self.slices = chunk_bounds(self.batch, -(-self.batch // self.SLICE))
        # One plan per slice size (the last slice may be shorter); made here, not in the timed loop.
        self.plans = {n: api.Conv2dPlan((n,) + self.in_shape, self.w.shape, variant=variant)
                      for n in {stop - start for start, stop in self.slices}}
        self.variant = next(iter(self.plans.values())).variant
        self.out_shape = (self.batch,) + tuple(next(iter(self.plans.values())).out_shape[1:])

    def run(self, h_x: np.ndarray, h_y: np.ndarray, progress) -> LayerTimes:
        seconds = 0.0
        for start, stop in self.slices:
            plan = self.plans[stop - start]
            begin = time.perf_counter()
            plan.launch(h_x[start:stop], self.w, h_y[start:stop])  # synchronous on the host
            seconds += time.perf_counter() - begin
            progress.update(stop)
        ms = seconds * 1e3
        return LayerTimes(self.variant, False, ms, ms)


def make_layer(w: np.ndarray, x_shape, variant: str, options: PipelineOptions):
    """The layer for `variant` (a name or 'auto', resolved once for the whole batch's shape)."""
    plan = api.Conv2dPlan(tuple(x_shape), w.shape, variant=variant)
    if not plan.on_device:
        return CpuConvLayer(w, x_shape, plan.variant)
    from .gpu_layer import GpuConvLayer  # only needed, and only usable, with a GPU
    return GpuConvLayer(w, x_shape, plan, options)
