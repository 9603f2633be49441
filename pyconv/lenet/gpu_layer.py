"""A conv layer on the GPU, timed two ways: the whole batch on one stream, and chunks on several
streams so that the copies of one chunk overlap the convolution of another.

One stream, whole batch (the course's measurement):
    H2D(all of x) -> conv(all) -> D2H(all of y)      events between the steps give the op time
                                                     (kernel only) and each copy's time
Several streams, the batch cut into chunks, chunk i on lane i % S:
    lane 0: H2D(x0) conv(x0) D2H(y0)                 H2D(x4) ...
    lane 1:         H2D(x1)  conv(x1) D2H(y1)           ...
A lane is a stream with its own device buffers for one chunk and its own plans; work on one
stream runs in order, so chunk i+S may reuse lane buffers only after chunk i's D2H, which the
stream guarantees without any host synchronisation. The host arrays must be page-locked
(pyconv.pinned_empty) for the copies to be asynchronous and so overlap; they must stay alive until
run() returns, which synchronises every stream.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from .. import api
from .._lib import check, ffi, lib
from ..device import DeviceArray, Event, Stream
from .layers import LayerTimes, PipelineOptions, chunk_bounds


@dataclass
class _Lane:
    stream: Stream
    d_x: DeviceArray      # (largest chunk, C, H, W)
    d_y: DeviceArray      # (largest chunk, M, OH, OW)
    plans: dict           # chunk size -> Conv2dPlan


def _h2d(device_ptr: int, host_ptr: int, nbytes: int, stream: Stream) -> None:
    check(lib().conv_memcpy_h2d(ffi().cast("void*", device_ptr), ffi().cast("void*", host_ptr),
                                nbytes, stream.handle))


def _d2h(host_ptr: int, device_ptr: int, nbytes: int, stream: Stream) -> None:
    check(lib().conv_memcpy_d2h(ffi().cast("void*", host_ptr), ffi().cast("void*", device_ptr),
                                nbytes, stream.handle))


def _check_host(a: np.ndarray, shape, name: str) -> None:
    # The copies take raw pointers: a wrong shape, dtype or layout would read or write past the array.
    if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous
            and a.shape == tuple(shape)):
        raise ValueError(f"{name} must be a C-contiguous float32 array of shape {tuple(shape)}")


class GpuConvLayer:
    def __init__(self, w: np.ndarray, x_shape, plan: api.Conv2dPlan, options: PipelineOptions):
        self.plan = plan                      # the whole batch, variant already resolved
        self.variant = plan.variant
        self.x_shape, self.out_shape = tuple(x_shape), tuple(plan.out_shape)
        self.in_bytes = int(np.prod(self.x_shape[1:])) * 4     # one image's input, float32
        self.out_bytes = int(np.prod(self.out_shape[1:])) * 4  # one image's output
        self.repeats = max(1, options.repeats)
        self.d_w = DeviceArray.from_host(np.ascontiguousarray(w, np.float32))  # waits for the copy
        self.d_x, self.d_y = DeviceArray(self.x_shape), DeviceArray(self.out_shape)
        self.chunks = chunk_bounds(self.x_shape[0], options.chunks)
        largest = max(stop - start for start, stop in self.chunks)
        sizes = {stop - start for start, stop in self.chunks}
        # Each lane has its own plans because a plan owns one workspace: kernels running at the same
        # time on two streams must not share it.
        self.lanes = [_Lane(Stream(), DeviceArray((largest,) + self.x_shape[1:]),
                            DeviceArray((largest,) + self.out_shape[1:]),
                            {n: api.Conv2dPlan((n,) + self.x_shape[1:], w.shape, variant=self.variant)
                             for n in sizes})
                      for _ in range(min(max(1, options.streams), len(self.chunks)))]
        self.events = [Event() for _ in range(4)]

    def run(self, h_x: np.ndarray, h_y: np.ndarray, progress) -> LayerTimes:
        """y = conv(x) for the whole batch, h_y written by the overlapped pipeline; the median times
        of `repeats` runs of each path after one warm-up of each (first launches load the kernels
        and the first copies set up their DMA). `progress` is not updated: the runs take
        milliseconds, and the caller reports the step."""
        _check_host(h_x, self.x_shape, "x")
        _check_host(h_y, self.out_shape, "y")
        try:
            self._one_stream(h_x, h_y)
            self._overlapped(h_x, h_y)
            one = [self._one_stream(h_x, h_y) for _ in range(self.repeats)]
            overlapped = [self._overlapped(h_x, h_y) for _ in range(self.repeats)]
        except BaseException:
            self._drain_quietly()
            raise
        h2d, op, d2h, layer = (statistics.median(column) for column in zip(*one))
        return LayerTimes(self.variant, True, op, layer, h2d_ms=h2d, d2h_ms=d2h,
                          overlapped_ms=statistics.median(overlapped))

    def _one_stream(self, h_x, h_y) -> tuple[float, float, float, float]:
        """(H2D, op, D2H, layer) ms of the whole batch on one stream, no overlap."""
        stream, (e0, e1, e2, e3) = self.lanes[0].stream, self.events
        self._synchronize()
        begin = time.perf_counter()
        e0.record(stream)
        _h2d(self.d_x.ptr, h_x.ctypes.data, h_x.nbytes, stream)
        e1.record(stream)
        self.plan.launch(self.d_x, self.d_w, self.d_y, stream)
        e2.record(stream)
        _d2h(h_y.ctypes.data, self.d_y.ptr, h_y.nbytes, stream)
        e3.record(stream)
        stream.synchronize()
        layer_ms = (time.perf_counter() - begin) * 1e3
        return e0.elapsed_ms(e1), e1.elapsed_ms(e2), e2.elapsed_ms(e3), layer_ms

    def _overlapped(self, h_x, h_y) -> float:
        """Layer ms of the chunked pipeline: from the first enqueue until every stream is done."""
        self._synchronize()
        begin = time.perf_counter()
        for i, (start, stop) in enumerate(self.chunks):
            lane = self.lanes[i % len(self.lanes)]
            n = stop - start
            _h2d(lane.d_x.ptr, h_x.ctypes.data + start * self.in_bytes, n * self.in_bytes, lane.stream)
            # The lane's buffers hold the largest chunk; this one uses their first n images (raw pointers).
            lane.plans[n].launch(lane.d_x.ptr, self.d_w, lane.d_y.ptr, lane.stream)
            _d2h(h_y.ctypes.data + start * self.out_bytes, lane.d_y.ptr, n * self.out_bytes, lane.stream)
        self._synchronize()
        return (time.perf_counter() - begin) * 1e3

    def _synchronize(self) -> None:
        for lane in self.lanes:
            lane.stream.synchronize()

    def _drain_quietly(self) -> None:
        # After a failure, nothing may still read or write the caller's host arrays once run() has
        # returned; the statuses are ignored because the exception on its way out is the first error.
        for lane in self.lanes:
            lib().conv_stream_synchronize(lane.stream.handle)
