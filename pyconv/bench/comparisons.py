"""What is compared with what: the problem settings our side runs at, and cuDNN's precision beside it.

  exact  fp32 in and out, NCHW, fp32 arithmetic (our exact variants through `auto`)
         vs cuDNN fp32 with TF32 off
  fast   fp32 in and out, NCHW, reduced precision allowed (TF32 / fp16 / bf16 operands: `auto_fast`)
         vs cuDNN with TF32 on
  fp16   fp16 in and out, NHWC activations and MKKC (channels-last) filters, `auto` at precision "half"
         (fp32 sums, as cuDNN's: not the fp16 variant's fp16 partial sums) vs cuDNN fp16 channels_last
  bf16   the same in bf16 vs cuDNN bf16 channels_last
  half   both fp16 and bf16

Without --compare the bench runs the per-variant table instead (VARIANTS): every variant at its own
precision on fp32 NCHW operands, with cuDNN at the precision of the unit each variant computes on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .._lib import ConvError


@dataclass(frozen=True)
class Comparison:
    name: str
    dtype: str                 # x, w and y ("float32", "float16", "bfloat16")
    layout: str                # x and y: "NCHW" or "NHWC" (w is MCKK with NCHW, MKKC with NHWC)
    precision: Optional[str]   # the compute the problem allows; None: each variant's own
    cudnn: Optional[str]       # cuDNN's precision (cudnn.UNIT_OF_PRECISION); None: from each variant's unit
    auto: str                  # the name the library's own choice goes by in this comparison

    @property
    def w_layout(self) -> str:
        return "MKKC" if self.layout == "NHWC" else "MCKK"


COMPARISONS = {c.name: c for c in (
    Comparison("exact", "float32", "NCHW", "exact", "fp32", "auto"),
    Comparison("fast", "float32", "NCHW", "fast", "tf32", "auto_fast"),
    Comparison("fp16", "float16", "NHWC", "half", "fp16", "auto"),
    Comparison("bf16", "bfloat16", "NHWC", "half", "bf16", "auto"),
)}
ALIASES = {"half": ("fp16", "bf16"), "all": tuple(COMPARISONS)}
VARIANTS = Comparison("variants", "float32", "NCHW", None, None, "auto")
AUTO_NAMES = ("auto", "auto_fast")


def parse(names) -> list:
    """Comparisons named on the command line (aliases expanded, order kept, duplicates dropped)."""
    out = []
    for name in names:
        expanded = ALIASES.get(name, (name,))
        unknown = [n for n in expanded if n not in COMPARISONS]
        if unknown:
            raise ConvError(f"--compare takes {', '.join(list(COMPARISONS) + list(ALIASES))}; got {name!r}")
        out += [COMPARISONS[n] for n in expanded]
    return list(dict.fromkeys(out))


def variants_in(comparison: Comparison, names) -> list:
    """The variants to run in a comparison: the library's choice (`auto`, named as the comparison names
    it) where `names` is empty or asks for auto / auto_fast, and the named variants as they are. The
    per-variant table runs the names as given (auto and auto_fast at their own precisions)."""
    if comparison.precision is None:
        return list(names)
    if not names:
        return [comparison.auto]
    return list(dict.fromkeys(comparison.auto if n in AUTO_NAMES else n for n in names))
