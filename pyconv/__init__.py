"""pyconv — fast, honest convolution forward passes on NVIDIA GPUs (libconv), from Python.

    import numpy as np, pyconv
    y = pyconv.conv2d(np.random.rand(8, 1, 86, 86).astype("f4"), np.random.rand(4, 1, 7, 7).astype("f4"))

`import pyconv` works on any machine; GPU calls on a machine without a GPU raise ConvNoDeviceError.
"""
from ._lib import (ConvError, ConvNoDeviceError, ConvOutOfMemoryError, ConvRuntimeError,
                   ConvUnsupportedError, LibraryNotFoundError)
from .api import (Conv2dPlan, ReluMaxPool, VariantInfo, clear_plan_cache, conv1d, conv2d, variant_configs,
                  variant_info, variants)
from .causal import conv1d_causal_update
from .device import (DeviceArray, Event, Stream, device_count, device_name, empty_cache, mem_info, pinned_empty,
                     synchronize)

from . import _lib

__version__ = _lib.package_version()   # pyproject.toml's, through the package metadata

__all__ = [
    "ConvError", "ConvNoDeviceError", "ConvOutOfMemoryError", "ConvRuntimeError", "ConvUnsupportedError",
    "LibraryNotFoundError", "Conv2dPlan", "ReluMaxPool", "VariantInfo", "clear_plan_cache", "conv1d",
    "conv1d_causal_update", "conv2d",
    "variant_configs", "variant_info", "variants",
    "DeviceArray", "Event", "Stream", "device_count", "device_name", "empty_cache", "mem_info", "pinned_empty",
    "synchronize",
]
