"""The work of a shape, the unit a variant computes on, and the shape's floor on that unit.

floor = max(min_bytes / copy bandwidth, flops / rate of the unit), both ceilings measured
(ceilings.py). flops counts every filter tap, padded ones included (2 per multiply-add; a grouped
layer's output sums C/groups channels), as cuDNN and the anchors do; min_bytes is x, w and y in the
dtypes of the comparison (fp32, or 2 bytes for fp16 / bf16), each moved once.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._lib import ConvError, check, ffi, lib
from .ceilings import UNITS, Ceilings
from .shapes import Shape

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
# conv_unit (include/conv.h) -> the ceiling that bounds it; the host's cores count as fp32.
_UNIT_OF_CAPS = {0: "fp32", 1: "fp32", 2: "fp16", 3: "fp16_tensor", 4: "tf32_tensor"}


def flops(s: Shape) -> int:
    oh, ow = s.out_hw
    return 2 * s.B * s.M * oh * ow * (s.C // s.groups) * s.KH * s.KW


def min_bytes(s: Shape, dtype: str = "float32") -> int:
    oh, ow = s.out_hw
    return ITEMSIZE[dtype] * (s.B * s.C * s.H * s.W + s.M * (s.C // s.groups) * s.KH * s.KW + s.B * s.M * oh * ow)


@dataclass(frozen=True)
class Floor:
    ms: float
    bound: str        # "memory" or "compute": the larger term
    memory_ms: float
    compute_ms: float  # 0 where the machine lacks the unit (then only memory counts)


def floor(s: Shape, unit: str, ceilings: Ceilings, dtype: str = "float32") -> Floor:
    memory_ms = min_bytes(s, dtype) / (ceilings.copy_gbytes_per_s * 1e9) * 1e3
    rate = ceilings.rate(unit)
    compute_ms = flops(s) / (rate * 1e9) * 1e3 if rate > 0 else 0.0
    return Floor(max(memory_ms, compute_ms), "compute" if compute_ms > memory_ms else "memory",
                 memory_ms, compute_ms)


def unit_of(variant: str, overrides: dict) -> str:
    """The unit whose rate bounds a concrete variant: what the variant declares in the library's table
    (conv_variant_caps.unit), unless `overrides` (variant -> unit, from --unit) names another."""
    if variant in overrides:
        return overrides[variant]
    f, l = ffi(), lib()
    vid, caps = f.new("int*"), f.new("conv_variant_caps*")
    check(l.conv_variant_find(variant.encode(), vid))
    check(l.conv_variant_get_caps(vid[0], caps))
    return _UNIT_OF_CAPS[caps.unit]


def parse_overrides(items) -> dict:
    """--unit VARIANT=UNIT items as a dict."""
    overrides = {}
    for item in items or ():
        name, _, unit = item.partition("=")
        if unit not in UNITS:
            raise ConvError(f"--unit wants VARIANT=UNIT with UNIT one of {', '.join(UNITS)}, got {item!r}")
        overrides[name] = unit
    return overrides


def summary(s: Shape, unit: str, ceilings: Ceilings, ms: float, dtype: str = "float32") -> dict:
    """What one measured time means: rates, floor, and how close to it (for rows and extra_info)."""
    f = floor(s, unit, ceilings, dtype)
    return {"unit": unit, "gflops": flops(s) / (ms * 1e-3) / 1e9,
            "gbytes_per_s": min_bytes(s, dtype) / (ms * 1e-3) / 1e9,
            "floor_ms": f.ms, "floor_bound": f.bound, "pct_of_floor": 100.0 * f.ms / ms}
