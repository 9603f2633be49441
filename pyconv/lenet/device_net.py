"""The network on one CUDA stream of one GPU: one upload of the uint8 images, every layer on the
device, one download of the predictions, no host synchronisation in between.

    stream:  H2D images -> resize -> C1 (+ReLU+pool) -> C3 (+ReLU+pool) -> F5 -> F6 -> softmax/argmax -> D2H

A Recipe is the network's launches with every choice made once (auto resolved to a concrete variant
and configuration on the full batch's shape): a list of Steps per layer. A layer is one step when its
variant fuses the epilogue; a C1/C3 variant that cannot fuse ReLU + max-pool (it declares no such
epilogue) runs its convolution, then the pool as a second step: a 1x1 depthwise convolution by 1.0
on `direct` with the pool epilogue, which is exact (v * 1 + 0 == v) and keeps every variant comparable.
A DeviceNetwork is one lane: a stream with its own buffers and plans (a plan owns its workspace, so two
lanes never share one) for batches of up to `capacity` images; work on one stream runs in order, so
a lane's next batch reuses its buffers safely without any host wait.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import api
from .._lib import check, ffi, lib
from ..device import DeviceArray, Event, Stream, use_device
from . import data, device_ops, network

IMAGE_BYTES = data.IMAGE_SIZE * data.IMAGE_SIZE     # one uint8 image
CLASS_BYTES = 4                                     # one int32 prediction
STAGES = ("upload", "resize") + tuple(layer.name for layer in network.LAYERS) + ("softmax", "download")
POOL_VARIANT = "direct"   # the separate ReLU + max-pool pass of variants that do not fuse it


@dataclass(frozen=True, eq=False)
class Step:
    """One plan launch of a layer: shapes per image, the host weights in the step's dtype."""
    in_shape: tuple
    out_shape: tuple
    w: np.ndarray
    bias: np.ndarray | None
    groups: int
    epilogue: object
    variant: str
    precision: str
    config: str | None
    dtype: str            # x and w
    out_dtype: str        # y and bias

    def plan(self, n: int, device: int) -> api.Conv2dPlan:
        return api.Conv2dPlan((n,) + self.in_shape, self.w.shape, groups=self.groups, bias=self.bias is not None,
                              epilogue=self.epilogue, variant=self.variant, precision=self.precision,
                              config=self.config, dtype=self.dtype, out_dtype=self.out_dtype, device=device)


Recipe = list  # [(network.Layer, [Step, ...]), ...] in network order


def make_recipe(mode: network.Mode, batch: int, weights, device: int) -> Recipe:
    """The steps of every layer for `mode`, auto resolved on `batch` images on `device`."""
    arrays = network.layer_weights(weights)
    recipe = []
    for layer in network.LAYERS:
        dtype, out_dtype = mode.dtypes(layer)
        w, bias = arrays[layer.name]
        w = w.astype(dtype)
        bias = None if bias is None else bias.astype(out_dtype)
        if layer.name in network.CONV_LAYERS:
            variant, precision = mode.variant, mode.precision
        else:
            variant, precision = network.HEAD_VARIANT, "exact"
        conv = Step(layer.in_shape, layer.out_shape, w, bias, 1, layer.epilogue, variant, precision, None, dtype,
                    out_dtype)
        if layer.name in network.CONV_LAYERS and not network.fuses_pool(variant):
            channels = layer.w_shape[0]
            steps = [dataclasses.replace(conv, out_shape=layer.conv_shape, epilogue=None),
                     Step(layer.conv_shape, layer.out_shape, np.ones((channels, 1, 1, 1), out_dtype), None, channels,
                          layer.epilogue, POOL_VARIANT, "exact", None, out_dtype, out_dtype)]
        else:
            steps = [conv]
        recipe.append((layer, [_resolved(step, batch, device) for step in steps]))
    return recipe


def _resolved(step: Step, batch: int, device: int) -> Step:
    """The step with auto replaced by what it resolves to on the full batch (tuned once, then cached),
    so that every lane and batch size runs the same kernel."""
    if step.variant != "auto":
        return step
    plan = step.plan(batch, device)
    return dataclasses.replace(step, variant=plan.variant, config=plan.config)


def describe(recipe: Recipe) -> dict:
    """layer -> the variants that run it, e.g. {"C1": "direct_regblock[r4]", ...}."""
    return {layer.name: " + ".join(f"{s.variant}[{s.config}]" if s.config else s.variant for s in steps)
            for layer, steps in recipe}


class DeviceWeights:
    """A recipe's weights and biases uploaded to one GPU, read by every lane there."""

    def __init__(self, recipe: Recipe, device: int):
        self.device = device
        self.arrays = {id(step): (DeviceArray.from_host(step.w, device=device),
                                  None if step.bias is None else DeviceArray.from_host(step.bias, device=device))
                       for _, steps in recipe for step in steps}


class DeviceNetwork:
    """One lane: a stream on `weights.device` with buffers for `capacity` images and plans for each
    batch size in `sizes`. `probabilities`: also compute and download (n, 10) probabilities."""

    def __init__(self, recipe: Recipe, weights: DeviceWeights, capacity: int, sizes, probabilities: bool = False):
        self.device, self.capacity = weights.device, capacity
        with use_device(self.device):
            self.stream = Stream()
            self.events = [Event() for _ in range(len(STAGES) + 1)]

        def buffer(shape, dtype):  # allocated and freed in this lane's stream order
            return DeviceArray((capacity,) + tuple(shape), dtype, device=self.device, stream=self.stream)

        self.images = buffer((data.IMAGE_SIZE, data.IMAGE_SIZE), np.uint8)
        first = recipe[0][1][0]
        self.x_dtype = first.dtype
        self.x = buffer(first.in_shape, first.dtype)
        # Per layer, per step: (plans by batch size, x, w, bias, y); each step reads the previous one's y.
        self.layers = []
        source = self.x
        for _, steps in recipe:
            launches = []
            for step in steps:
                y = buffer(step.out_shape, step.out_dtype)
                w, bias = weights.arrays[id(step)]
                plans = {n: step.plan(n, self.device) for n in sorted(sizes)}
                launches.append((plans, source, w, bias, y))
                source = y
            self.layers.append(launches)
        self.logits = source                                     # (capacity, 10, 1, 1) float32
        self.classes = buffer((), np.int32)
        self.probabilities = buffer((network.CLASSES,), np.float32) if probabilities else None

    def enqueue(self, images: int, n: int, classes: int, probabilities: int = 0, timed: bool = False) -> None:
        """Queues one batch: n uint8 images at host address `images` in, n int32 classes out to host
        address `classes`, and, where this lane computes them and `probabilities` is not 0, n x 10
        float32 probabilities out to that address. Host memory must be page-locked and stay alive until
        the stream is synchronised.
        timed: events between the stages, read by stage_ms() once the stream is done."""
        if not 0 < n <= self.capacity:
            raise ValueError(f"a batch of {n} images does not fit this lane (1..{self.capacity})")
        f, l = ffi(), lib()
        s = self.stream.handle
        marks = iter(self.events if timed else ())

        def mark():
            event = next(marks, None)
            if event is not None:
                event.record(self.stream)

        with use_device(self.device):
            mark()
            check(l.conv_memcpy_h2d(f.cast("void*", self.images.ptr), f.cast("void*", images), n * IMAGE_BYTES, s))
            mark()
            device_ops.resize_bilinear_u8(self.images.ptr, n, (data.IMAGE_SIZE, data.IMAGE_SIZE), self.x.ptr,
                                          self.x.shape[2:], self.x_dtype, s)
            mark()
            for launches in self.layers:
                for plans, x, w, bias, y in launches:
                    plans[n].launch(x.ptr, w.ptr, y.ptr, stream=self.stream, bias=None if bias is None else bias.ptr)
                mark()
            device_ops.softmax_argmax(self.logits.ptr, n, network.CLASSES,
                                      self.probabilities.ptr if self.probabilities is not None else 0,
                                      self.classes.ptr, s)
            mark()
            check(l.conv_memcpy_d2h(f.cast("void*", classes), f.cast("void*", self.classes.ptr), n * CLASS_BYTES, s))
            if self.probabilities is not None and probabilities:
                check(l.conv_memcpy_d2h(f.cast("void*", probabilities), f.cast("void*", self.probabilities.ptr),
                                        n * network.CLASSES * 4, s))
            mark()

    def stage_ms(self) -> dict:
        """stage -> ms between the events of the last timed batch (the stream must be done)."""
        return {stage: start.elapsed_ms(stop) for stage, start, stop in zip(STAGES, self.events, self.events[1:])}

    def synchronize(self) -> None:
        self.stream.synchronize()
