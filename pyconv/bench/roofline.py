"""The work of a shape, the unit a variant computes on, and the shape's floor on that unit.

floor = max(min_bytes / copy bandwidth, flops / rate of the unit), both ceilings measured
(ceilings.py). flops counts every filter tap, padded ones included (2 per multiply-add), as cuDNN and
the anchors do; min_bytes is x, w and y in float32 (libconv's API is float32 in and out for every
variant), each moved once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .._lib import ConvError
from .ceilings import UNITS, Ceilings
from .shapes import Shape


def flops(s: Shape) -> int:
    oh, ow = s.out_hw
    return 2 * s.B * s.M * oh * ow * s.C * s.KH * s.KW


def min_bytes(s: Shape) -> int:
    oh, ow = s.out_hw
    return 4 * (s.B * s.C * s.H * s.W + s.M * s.C * s.KH * s.KW + s.B * s.M * oh * ow)


@dataclass(frozen=True)
class Floor:
    ms: float
    bound: str        # "memory" or "compute": the larger term
    memory_ms: float
    compute_ms: float  # 0 where the machine lacks the unit (then only memory counts)


def floor(s: Shape, unit: str, ceilings: Ceilings) -> Floor:
    memory_ms = min_bytes(s) / (ceilings.copy_gbytes_per_s * 1e9) * 1e3
    rate = ceilings.rate(unit)
    compute_ms = flops(s) / (rate * 1e9) * 1e3 if rate > 0 else 0.0
    return Floor(max(memory_ms, compute_ms), "compute" if compute_ms > memory_ms else "memory",
                 memory_ms, compute_ms)


# Unit from the variant's name, then from its one-line idea, by whole words (underscores split words):
# tf32 before the generic tensor-core words, those before plain fp16 (the CUDA-core half2 variant is
# named fp16).
_UNIT_PATTERNS = (("tf32_tensor", re.compile(r"\btf32")),
                  ("fp16_tensor", re.compile(r"\b(wmma|mma|tensor)\b")),
                  ("fp16", re.compile(r"\b(fp16|half)")))


def unit_of(name: str, idea: str, on_device: bool, exact: bool, overrides: dict) -> str:
    """The unit whose rate bounds a variant: fp32 for exact variants (and the cpu), else the
    reduced-precision unit its name or idea names; a reduced-precision variant that names none is
    given the fastest unit (fp16 tensor cores), so that its floor is still a floor.
    `overrides` (variant -> unit, from --unit) wins."""
    if name in overrides:
        return overrides[name]
    if exact or not on_device:
        return "fp32"
    for text in (name, idea):
        words = text.lower().replace("_", " ")
        for unit, pattern in _UNIT_PATTERNS:
            if pattern.search(words):
                return unit
    return "fp16_tensor"


def parse_overrides(items) -> dict:
    """--unit VARIANT=UNIT items as a dict."""
    overrides = {}
    for item in items or ():
        name, _, unit = item.partition("=")
        if unit not in UNITS:
            raise ConvError(f"--unit wants VARIANT=UNIT with UNIT one of {', '.join(UNITS)}, got {item!r}")
        overrides[name] = unit
    return overrides


def summary(s: Shape, unit: str, ceilings: Ceilings, ms: float) -> dict:
    """What one measured time means: rates, floor, and how close to it (for rows and extra_info)."""
    f = floor(s, unit, ceilings)
    return {"unit": unit, "gflops": flops(s) / (ms * 1e-3) / 1e9, "gbytes_per_s": min_bytes(s) / (ms * 1e-3) / 1e9,
            "floor_ms": f.ms, "floor_bound": f.bound, "pct_of_floor": 100.0 * f.ms / ms}
