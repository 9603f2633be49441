"""How far each stage of the GPU network is from its floor: the bytes it must move and the flops it
must do for one batch, against what this GPU measurably does (pyconv.bench.ceilings: device copy
bandwidth, each arithmetic unit's peak; plus the host<->device copy rates measured here).

floor(stage) = max(bytes read + written / copy rate, flops / peak of the unit its variant uses),
summed over a layer's launches (two where the pool is a separate pass).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._lib import check, ffi, lib
from ..bench import ceilings as bench_ceilings
from ..device import DeviceArray, Event, Stream, device_name, pinned_empty, use_device
from . import data, device_net, network

UNITS = {1: "fp32", 2: "fp16", 3: "fp16_tensor", 4: "tf32_tensor"}  # conv_unit -> ceilings unit
TRANSFER_BYTES = 64 << 20   # one host<->device copy: long enough to reach the link's rate
TRANSFER_REPS = 3
ITEMSIZE = {"float32": 4, "float16": 2}


@dataclass(frozen=True)
class Rates:
    ceilings: bench_ceilings.Ceilings
    h2d_gbytes_per_s: float
    d2h_gbytes_per_s: float

    def describe(self) -> str:
        return (f"{self.ceilings.describe()}; host->device {self.h2d_gbytes_per_s:.1f} GB/s, device->host "
                f"{self.d2h_gbytes_per_s:.1f} GB/s (page-locked)")


def measure(device: int) -> Rates:
    """This GPU's ceilings and its page-locked copy rates each way (best of a few 64 MiB copies)."""
    with use_device(device):
        ceilings = bench_ceilings.measure_gpu(device_name(device))
        host = pinned_empty((TRANSFER_BYTES,), np.uint8)
        host.fill(1)
        dev = DeviceArray((TRANSFER_BYTES,), np.uint8, device=device)
        stream, start, stop = Stream(), Event(), Event()
        f, l = ffi(), lib()
        best = {}
        for name, copy in (("h2d", lambda: l.conv_memcpy_h2d(dev.handle, f.cast("void*", host.ctypes.data),
                                                               TRANSFER_BYTES, stream.handle)),
                           ("d2h", lambda: l.conv_memcpy_d2h(f.cast("void*", host.ctypes.data), dev.handle,
                                                               TRANSFER_BYTES, stream.handle))):
            times = []
            for _ in range(TRANSFER_REPS + 1):  # the first sets up the DMA mapping: not counted
                start.record(stream)
                check(copy())
                stop.record(stream)
                stop.synchronize()
                times.append(start.elapsed_ms(stop))
            best[name] = TRANSFER_BYTES / (min(times[1:]) * 1e-3) / 1e9
    return Rates(ceilings, best["h2d"], best["d2h"])


def stage_work(recipe: device_net.Recipe, n: int, probabilities: bool = False) -> dict:
    """stage -> [(bytes, flops, unit), ...] of n images: one entry per launch."""
    x_item = ITEMSIZE[recipe[0][1][0].dtype]
    pixels = data.NETWORK_SIZE * data.NETWORK_SIZE
    work = {"upload": [(n * device_net.IMAGE_BYTES, 0.0, "h2d")],
            "resize": [(n * (device_net.IMAGE_BYTES + pixels * x_item), 0.0, "fp32")]}
    for layer, steps in recipe:
        entries = []
        for step in steps:
            in_bytes = n * int(np.prod(step.in_shape)) * ITEMSIZE[step.dtype]
            out_bytes = n * int(np.prod(step.out_shape)) * ITEMSIZE[step.out_dtype]
            weight_bytes = step.w.nbytes + (0 if step.bias is None else step.bias.nbytes)
            conv_out = (step.w.shape[0],) + tuple(h - k + 1 for h, k in zip(step.in_shape[1:], step.w.shape[2:]))
            flops = 2.0 * n * np.prod(conv_out) * np.prod(step.w.shape[1:])
            unit = UNITS.get(network.variant_caps(step.variant).unit, "fp32")
            entries.append((in_bytes + weight_bytes + out_bytes, float(flops), unit))
        work[layer.name] = entries
    out_bytes = n * device_net.CLASS_BYTES + (n * network.CLASSES * 4 if probabilities else 0)
    work["softmax"] = [(n * network.CLASSES * 4 + out_bytes, 0.0, "fp32")]
    work["download"] = [(out_bytes, 0.0, "d2h")]
    return work


def floor_ms(entries: list, rates: Rates) -> float:
    total = 0.0
    for nbytes, flops, unit in entries:
        if unit == "h2d":
            total += nbytes / (rates.h2d_gbytes_per_s * 1e9) * 1e3
        elif unit == "d2h":
            total += nbytes / (rates.d2h_gbytes_per_s * 1e9) * 1e3
        else:
            memory = nbytes / (rates.ceilings.copy_gbytes_per_s * 1e9)
            rate = rates.ceilings.rate(unit) or rates.ceilings.rate("fp32")
            total += max(memory, flops / (rate * 1e9)) * 1e3
    return total


def table_rows(result: network.Result, n: int, rates: Rates | None) -> list[dict]:
    """One dict per stage: name, ms, bytes, and with rates: floor ms and % of floor."""
    work = stage_work(result.recipe, n)
    rows = []
    for stage, ms in result.stage_ms.items():
        row = {"stage": stage, "ms": ms, "bytes": sum(e[0] for e in work[stage])}
        if rates is not None:
            floor = floor_ms(work[stage], rates)
            row.update(floor_ms=floor, percent_of_floor=100.0 * floor / ms if ms > 0 else None)
        rows.append(row)
    return rows
