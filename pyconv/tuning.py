"""The auto-tuner's cache: where it lives, clearing and compacting it, its time budget, and
pre-tuning shapes.

`auto` tunes a new shape on its first call by itself; pre-tuning a list of shapes moves that cost
out of the first real call (e.g. before timing, or before a graph capture). The cache file is shared
by every process on the machine: one process tunes a shape while the others wait for its result, and
results are keyed by GPU model, library build, CUDA driver and runtime, so that a rebuilt library
tunes again."""
from __future__ import annotations

import contextlib
import os

import numpy as np

from . import _args, api
from ._lib import ConvError, LibraryNotFoundError, check, ffi, lib, library_path
from ._problem import make_problem


def cache_path() -> str:
    buf = ffi().new("char[4096]")
    check(lib().conv_tune_get_cache_path(buf, 4096))
    return ffi().string(buf).decode()


def set_cache_path(path: str | os.PathLike | None) -> None:
    """Use another cache file (None: $PYCONV_TUNE_CACHE, else ~/.cache/pyconv/tuning.txt)."""
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str, a path or None, got {type(path).__name__}")
        path = os.fsencode(path)
        if not path or b"\x00" in path:
            raise ConvError(f"path must be a file name without NUL characters, got {path!r}")
    check(lib().conv_tune_set_cache_path(ffi().NULL if path is None else path))


def clear() -> None:
    """Forgets every tuning result, in memory and on disk."""
    check(lib().conv_tune_clear())


def compact() -> tuple[int, int]:
    """Rewrites the cache file keeping only the newest line per shape and only this build's lines;
    returns (lines kept, lines dropped)."""
    try:
        compact_file = lib().conv_tune_compact
    except AttributeError:
        raise LibraryNotFoundError(f"{library_path()} has no conv_tune_compact: it was built from older "
                                   "sources; rebuild it") from None
    kept, dropped = ffi().new("int*"), ffi().new("int*")
    check(compact_file(kept, dropped))
    return kept[0], dropped[0]


def _ms(ms) -> float:
    if isinstance(ms, bool) or not isinstance(ms, (int, float, np.integer, np.floating)):
        raise TypeError(f"ms must be a number, got {type(ms).__name__} {ms!r}")
    return float(ms)


def set_budget_ms(ms: float) -> None:
    """Time budget for tuning one new shape (default 3000 ms), for every thread without its own."""
    check(lib().conv_tune_set_budget_ms(_ms(ms)))


@contextlib.contextmanager
def thread_budget(ms: float | None):
    """Within the block, this thread tunes each new shape within `ms` (None: the process's budget),
    whatever other threads use; the thread's earlier budget returns after it. pyconv.torch's layers tune
    inside one of these (pyconv.torch.set_tuning_budget_ms)."""
    new = -1.0 if ms is None else _ms(ms)
    if new < 0 and ms is not None:
        raise ConvError(f"ms must be >= 0 or None, got {ms!r}")
    old = ffi().new("double*")
    check(lib().conv_tune_get_thread_budget_ms(old))
    check(lib().conv_tune_set_thread_budget_ms(new))
    try:
        yield
    finally:
        check(lib().conv_tune_set_thread_budget_ms(old[0]))


def describe(x_shape, w_shape, stride=1, padding=0, dilation=1, precision: str = "exact", groups: int = 1) -> str:
    """What auto picks for a shape, tuning it first if new: 'variant[config] 0.512 ms (tuned)'.
    w_shape is (M, C/groups, KH, KW)."""
    problem, _, _ = make_problem(_args.shape(x_shape, "x_shape", 4), _args.shape(w_shape, "w_shape", 4), stride=stride, padding=padding,
                                 dilation=dilation, groups=groups, precision=precision)
    buf = ffi().new("char[512]")
    check(lib().conv_tune_describe_problem(api.variant_id("auto", precision), problem, buf, 512))
    return ffi().string(buf).decode()
