"""The auto-tuner's cache: where it lives, clearing it, its time budget, and pre-tuning shapes.

`auto` tunes a new shape on its first call by itself; pre-tuning a list of shapes moves that cost
out of the first real call (e.g. before timing, or before a graph capture)."""
from __future__ import annotations

from . import api
from ._lib import check, ffi, lib


def cache_path() -> str:
    buf = ffi().new("char[4096]")
    check(lib().conv_tune_get_cache_path(buf, 4096))
    return ffi().string(buf).decode()


def set_cache_path(path: str | None) -> None:
    """Use another cache file (None: $PYCONV_TUNE_CACHE, else ~/.cache/pyconv/tuning.txt)."""
    check(lib().conv_tune_set_cache_path(path.encode() if path else ffi().NULL))


def clear() -> None:
    """Forgets every tuning result, in memory and on disk."""
    check(lib().conv_tune_clear())


def set_budget_ms(ms: float) -> None:
    """Time budget for tuning one new shape (default 3000 ms)."""
    check(lib().conv_tune_set_budget_ms(float(ms)))


def describe(x_shape, w_shape, stride=1, padding=0, dilation=1, precision: str = "exact") -> str:
    """What auto picks for a shape, tuning it first if new: 'variant[config] 0.512 ms (tuned)'."""
    params, _ = api.make_params(tuple(x_shape), tuple(w_shape), stride, padding, dilation)
    buf = ffi().new("char[512]")
    check(lib().conv_tune_describe(api.variant_id("auto", precision), params, buf, 512))
    return ffi().string(buf).decode()
