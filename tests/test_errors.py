"""Bad input gets a clear error naming the problem — never a crash, a hang or garbage."""
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import GPU_SKIP_REASON, requires_gpu

import pyconv


class FakeDeviceArray:
    """Exposes only __cuda_array_interface__: enough to reach the checks, never dereferenced."""

    def __init__(self, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x10000, False),
                                         "strides": strides, "version": 3}


X = np.ones((2, 3, 10, 10), np.float32)
W = np.ones((4, 3, 3, 3), np.float32)


def raises(match, *args, **kwargs):
    with pytest.raises(pyconv.ConvError, match=match):
        pyconv.conv2d(*args, **kwargs)


def test_wrong_ndim():
    raises(r"x must have 4 dimensions", X[0], W)
    raises(r"w must have 4 dimensions", X, W[0])


def test_channel_mismatch():
    raises(r"channel mismatch: x has C=3 channels but w has 2", X, W[:, :2])


def test_non_numeric_dtype_rejected():
    raises(r"x must hold real numbers", X.astype(np.complex64), W)
    raises(r"w must hold real numbers", X, W.astype(object))


def test_device_arrays_must_be_float32_and_contiguous():
    raises(r"x must be float32 on the device, got float64", FakeDeviceArray((2, 3, 10, 10), "<f8"), W)
    raises(r"w must be C-contiguous", X, FakeDeviceArray((4, 3, 3, 3), strides=(4, 144, 48, 16)))


@pytest.mark.parametrize("shape, name", [((0, 3, 10, 10), "B"), ((2, 3, 0, 10), "H"), ((2, 3, 10, 0), "W")])
def test_zero_sizes(shape, name):
    raises(rf"{name} must be >= 1, got 0", np.ones(shape, np.float32), W)


def test_zero_maps_and_kernel():
    raises(r"M must be >= 1", X, np.ones((0, 3, 3, 3), np.float32))
    raises(r"KH must be >= 1", X, np.ones((4, 3, 0, 3), np.float32))


@pytest.mark.parametrize("kwargs, match", [
    (dict(stride=0), r"stride_h must be >= 1, got 0"),
    (dict(stride=(1, -2)), r"stride_w must be >= 1, got -2"),
    (dict(dilation=0), r"dilation_h must be >= 1"),
    (dict(padding=-1), r"pad_h must be >= 0, got -1"),
    (dict(stride=(1, 2, 3)), r"stride must be an int or an \(h, w\) pair"),
    (dict(padding=1.5), r"padding must be an int"),
])
def test_bad_stride_padding_dilation(kwargs, match):
    raises(match, X, W, **kwargs)


def test_kernel_larger_than_padded_input():
    raises(r"kernel extent 11x11 .* larger than the padded input 10x10", X, np.ones((4, 3, 11, 11), np.float32))
    raises(r"kernel extent 13x13 .* padded input 12x12", X, W, dilation=6, padding=1)


def test_sizes_past_32bit_indexing_are_rejected_with_a_message():
    # One image of 50000 x 50000 = 2.5e9 elements cannot be indexed with int32 (the batch can).
    with pytest.raises(pyconv.ConvError, match=r"more than 2\^30 elements"):
        pyconv.conv2d(FakeDeviceArray((1, 1, 50000, 50000)), FakeDeviceArray((1, 1, 3, 3)))


def test_unknown_variant_and_precision():
    raises(r"unknown variant 'nope' \(known: auto, auto_fast, cpu, direct", X, W, variant="nope")
    raises(r"precision must be one of", X, W, precision="approximate")


def test_bad_launch_configuration():
    assert pyconv.variant_configs("cpu") == []
    raises(r"variant 'cpu' has no launch configuration 'x'; it has \[\]", X, W, variant="cpu", config="x")
    raises(r"config pins a launch configuration of a named variant; auto picks its own", X, W, config="x")
    import pyconv._lib as _lib
    l, f = _lib.lib(), _lib.ffi()
    count, name = f.new("int*"), f.new("const char**")
    assert l.conv_variant_config_count(-1, count) == l.CONV_ERR_INVALID_ARGUMENT
    assert "not to auto" in f.string(l.conv_last_error()).decode()
    assert l.conv_variant_config_name(0, 0, name) == l.CONV_ERR_INVALID_ARGUMENT
    assert "variant 'cpu' has no launch configuration 0 (it has 0)" in f.string(l.conv_last_error()).decode()
    assert l.conv_variant_config_count(99, count) == l.CONV_ERR_INVALID_ARGUMENT


def test_bad_out():
    raises(r"out must be a writeable C-contiguous float32 NumPy array of shape \(2, 4, 8, 8\)",
           X, W, variant="cpu", out=np.empty((2, 4, 8, 7), np.float32))


def test_host_variant_rejects_device_arrays():
    raises(r"variant 'cpu' runs on host memory", FakeDeviceArray((2, 3, 10, 10)), W, variant="cpu")


@pytest.mark.skipif(not GPU_SKIP_REASON, reason="this machine has a GPU; see test_no_visible_gpu_*")
def test_gpu_variant_without_gpu_says_why():
    with pytest.raises(pyconv.ConvNoDeviceError, match=r"(no usable CUDA device|without a CUDA compiler)"):
        pyconv.conv2d(X, W, variant="direct")
    with pytest.raises(pyconv.ConvNoDeviceError):
        pyconv.DeviceArray((4,))


def _python(code, **env):
    environment = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                          timeout=120)


def test_no_visible_gpu_runs_on_cpu_and_gpu_calls_say_why():
    """With no GPU visible (as on a machine without one), import works, auto runs on the CPU and a
    GPU variant raises an error that says why. Runs on every machine."""
    code = ("import numpy as np, pyconv\n"
            "x = np.ones((1, 1, 8, 8), np.float32); w = np.ones((2, 1, 3, 3), np.float32)\n"
            "assert pyconv.device_count() == 0\n"
            "assert float(pyconv.conv2d(x, w)[0, 0, 0, 0]) == 9.0\n"
            "try:\n    pyconv.conv2d(x, w, variant='direct')\n"
            "except pyconv.ConvNoDeviceError as e:\n    print('ERR', e)\n")
    result = _python(code, CUDA_VISIBLE_DEVICES="")
    assert result.returncode == 0, result.stderr
    assert "ERR CONV_ERR_NO" in result.stdout


def test_missing_library_names_the_path():
    code = ("import pyconv\n"
            "try:\n    pyconv.variants()\n"
            "except pyconv.LibraryNotFoundError as e:\n    print('ERR', e)\n")
    result = _python(code, PYCONV_LIBRARY="/nonexistent/libconv.so")
    assert result.returncode == 0, result.stderr
    assert "ERR cannot load libconv: /nonexistent/libconv.so: no such file" in result.stdout


@requires_gpu
def test_allocation_larger_than_free_memory_says_how_many_bytes():
    free, total = pyconv.mem_info()
    ask = total * 4
    with pytest.raises(pyconv.ConvOutOfMemoryError, match=rf"cannot allocate {ask} bytes on the GPU: \d+ bytes free"):
        pyconv.DeviceArray((ask,), np.uint8)
    pyconv.DeviceArray((16,))  # the device still works afterwards
