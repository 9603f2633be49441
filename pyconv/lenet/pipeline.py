"""Images in page-locked host memory to predictions in page-locked host memory, on one or more GPUs.

Batches go round robin over the lanes (device_net.DeviceNetwork: a stream with its own buffers),
consecutive batches on different GPUs first, then on different streams of one GPU:
    lane 0 (GPU 0): H2D b0  resize C1 C3 F5 F6 softmax D2H b0        H2D b4 ...
    lane 1 (GPU 1): H2D b1  resize C1 ...
    lane 2 (GPU 0):      H2D b2  resize C1 ...
so one batch's copies overlap another's kernels and every GPU is busy. The host only enqueues; it
waits once, at the end, for every lane.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from .._lib import lib
from ..device import pinned_empty, synchronize
from . import device_net, network


def batch_bounds(total: int, batch: int) -> list[tuple[int, int]]:
    """[start, stop) of consecutive batches of `batch` images (the last one may be shorter)."""
    return [(start, min(start + batch, total)) for start in range(0, total, batch)]


def _check_host(a: np.ndarray, dtype, shape, name: str) -> None:
    # The copies take raw pointers: a wrong shape, dtype or layout would read or write past the array.
    if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous and a.shape == tuple(shape)):
        raise ValueError(f"{name} must be a C-contiguous {np.dtype(dtype)} array of shape {tuple(shape)}")


class Pipeline:
    """`total` images in batches of `batch` over `streams` lanes on each GPU of `devices`."""

    def __init__(self, mode: network.Mode, weights, devices: list[int], streams: int, batch: int, total: int,
                 probabilities: bool = False):
        self.batches = batch_bounds(total, batch)
        self.total, self.batch, self.devices = total, batch, devices
        sizes = {stop - start for start, stop in self.batches}
        self.recipe = device_net.make_recipe(mode, batch, weights, devices[0])
        self.variants = device_net.describe(self.recipe)
        on_device = {d: device_net.DeviceWeights(self.recipe, d) for d in devices}
        lanes = min(streams * len(devices), len(self.batches))
        order = [d for _ in range(streams) for d in devices][:lanes]
        self.lanes = [device_net.DeviceNetwork(self.recipe, on_device[d], batch, sizes, probabilities) for d in order]
        self.probabilities = probabilities
        for d in devices:  # the plans' workspaces come from the legacy stream's pool order: ready before any lane runs
            synchronize(d)

    def run(self, images: np.ndarray, classes: np.ndarray, probabilities: np.ndarray | None = None) -> float:
        """Classifies every image (page-locked (total, 28, 28) uint8) into `classes` (page-locked
        (total,) int32) and, where the lanes compute them, `probabilities` ((total, 10) float32);
        returns the wall-clock ms from the first enqueue until every lane is done."""
        _check_host(images, np.uint8, (self.total, device_net.data.IMAGE_SIZE, device_net.data.IMAGE_SIZE), "images")
        _check_host(classes, np.int32, (self.total,), "classes")
        if self.probabilities:
            _check_host(probabilities, np.float32, (self.total, network.CLASSES), "probabilities")
        self._synchronize()
        begin = time.perf_counter()
        try:
            for i, (start, stop) in enumerate(self.batches):
                probs = probabilities.ctypes.data + start * network.CLASSES * 4 if self.probabilities else 0
                self.lanes[i % len(self.lanes)].enqueue(images.ctypes.data + start * device_net.IMAGE_BYTES,
                                                        stop - start,
                                                        classes.ctypes.data + start * device_net.CLASS_BYTES, probs)
        except BaseException:
            self._drain_quietly()
            raise
        self._synchronize()
        return (time.perf_counter() - begin) * 1e3

    def time_one_batch(self, images: np.ndarray, classes: np.ndarray) -> tuple[float, dict]:
        """(wall-clock ms, stage ms from CUDA events) of the first `batch` images on the first lane alone."""
        n = self.batches[0][1]
        _check_host(images, np.uint8, (self.total, device_net.data.IMAGE_SIZE, device_net.data.IMAGE_SIZE), "images")
        _check_host(classes, np.int32, (self.total,), "classes")
        lane = self.lanes[0]
        self._synchronize()
        begin = time.perf_counter()
        try:
            lane.enqueue(images.ctypes.data, n, classes.ctypes.data, timed=True)
        except BaseException:
            self._drain_quietly()
            raise
        lane.synchronize()
        wall = (time.perf_counter() - begin) * 1e3
        return wall, lane.stage_ms()

    def _synchronize(self) -> None:
        for lane in self.lanes:
            lane.synchronize()

    def _drain_quietly(self) -> None:
        # After a failure nothing may still read or write the caller's host arrays once we return; the
        # statuses are ignored because the exception on its way out is the first error.
        for lane in self.lanes:
            lib().conv_stream_synchronize(lane.stream.handle)


def pinned_images(images: np.ndarray) -> np.ndarray:
    """A page-locked copy of uint8 images, so that uploads are asynchronous and overlap kernels."""
    pinned = pinned_empty(images.shape, np.uint8)
    pinned[...] = images
    return pinned


def run_gpu(images: np.ndarray, mode: network.Mode, weights, devices: list[int], streams: int, batch: int,
            repeats: int, probabilities: bool = False) -> network.Result:
    """The network over `images` ((N, 28, 28) uint8 in page-locked memory: pinned_images): the first
    batch alone on one stream with its stage times (one warm-up, then `repeats` runs), and, when there
    is more than one batch, every image streamed over all lanes (one warm-up pass, then `repeats`)."""
    total = len(images)
    h_images = images
    h_classes = pinned_empty((total,), np.int32)
    h_probabilities = pinned_empty((total, network.CLASSES), np.float32) if probabilities else None
    pipe = Pipeline(mode, weights, devices, streams, batch, total, probabilities)
    pipe.time_one_batch(h_images, h_classes)  # warm-up: modules load, the first copies set up their DMA
    timed = [pipe.time_one_batch(h_images, h_classes) for _ in range(repeats)]
    streamed = []
    if len(pipe.batches) > 1 or probabilities:
        pipe.run(h_images, h_classes, h_probabilities)  # warm-up of every lane
        streamed = [pipe.run(h_images, h_classes, h_probabilities) for _ in range(repeats)]
    stages = {stage: statistics.median(run[stage] for _, run in timed) for stage in device_net.STAGES}
    return network.Result(np.array(h_classes), None if h_probabilities is None else np.array(h_probabilities),
                          stages, [wall for wall, _ in timed], pipe.variants, streamed, pipe.recipe)
