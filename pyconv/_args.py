"""Checks of plain arguments shared by the public functions: each refusal is a ConvError (bad value)
or TypeError (wrong type) that names the argument, raised before anything is allocated or asked of the
driver."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ._lib import ConvError

_INT_LIMIT = 2**62  # beyond any real size or index; keeps the C side's int64 fields from overflowing


def integer(value, name: str, wrong_type: type = TypeError) -> int:
    """An int (Python or NumPy, never a bool or a float); another type raises `wrong_type` (the geometry's
    arguments raise ConvError, as they always have: _problem.integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise wrong_type(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if not -_INT_LIMIT <= value <= _INT_LIMIT:
        raise ConvError(f"{name} = {value} is out of range")
    return value


def int1d(value, name: str) -> int:
    """conv1d's one int per geometry argument: an int, or a tuple / list of one (as PyTorch's conv1d takes);
    a ConvError otherwise (geometry, as _problem.integer)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ConvError(f"{name} must be an int or a 1-tuple for conv1d, got {value!r}")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConvError(f"{name} must be an int for conv1d, got {value!r}")
    return int(value)


def flag(value, name: str) -> bool:
    """A bool (True / False, or a NumPy bool): 'no' or 2 are not read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def text(value, name: str) -> str:
    """A non-empty str without NUL characters (it goes to C as a C string)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    if not value or "\x00" in value:
        raise ConvError(f"{name} must be a non-empty name without NUL characters, got {value!r}")
    return value


def shape(value, name: str, ndim: Optional[int] = None) -> tuple:
    """A tuple of sizes >= 0 from a tuple or list (or one int where ndim is None or 1)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and ndim in (None, 1):
        value = (value,)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of ints, got {type(value).__name__} {value!r}")
    if ndim is not None and len(value) != ndim:
        raise ConvError(f"{name} must have {ndim} entries, got {tuple(value)!r}")
    sizes = tuple(integer(n, name) for n in value)
    if any(n < 0 for n in sizes):
        raise ConvError(f"{name} has a negative size: {sizes}")
    return sizes


def device_index(value, name: str = "device", count: Optional[int] = None) -> int:
    """A GPU index: an int >= 0, and one of `count` GPUs where given (index 0 is accepted on a machine
    without GPUs, where it means the host)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a GPU index (int), got {type(value).__name__} {value!r}")
    if not 0 <= value < 2**31:
        raise ConvError(f"{name} must be a GPU index (>= 0), got {value}")
    if count is not None and value >= max(count, 1):
        raise ConvError(f"{name}={value}, but this machine has {count} GPU{'s' if count != 1 else ''}")
    return int(value)


def numeric_dtype(value, name: str = "dtype") -> np.dtype:
    """A NumPy dtype of numbers (bool, int, float, complex) for raw memory: DeviceArray, pinned_empty."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"{name} must be a NumPy dtype, got {value!r}") from None
    if dtype.kind not in "biufc":
        raise ConvError(f"{name} must be a numeric dtype (e.g. float32), got {dtype}")
    return dtype
