"""Devices, streams and asynchrony with pyconv's own device arrays (DeviceArray, pyconv.Stream, any
__cuda_array_interface__ producer): results on the inputs' device, the stream rule, producers named in
the array interface waited for on the GPU (not the host), device calls that enqueue and return, `out`
and Conv2dPlan.launch checks on device memory, and a kernel fault reported by pyconv.synchronize()
(in a child process, so that this process's CUDA context stays usable).

Runs on a GPU machine; skipped with the reason elsewhere. The delays that make a missing wait visible
come from torch.cuda._sleep (skipped without PyTorch). The helpers at the top are shared with
test_interop, test_threads and test_multi_gpu."""
import functools
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import GPU_SKIP_REASON, requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import _lib

pytestmark = requires_gpu


# ---- helpers shared by the GPU test files ----

def optional_torch():
    """PyTorch when installed (it may lack CUDA), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_cuda_reason() -> str:
    """Why PyTorch CUDA tests cannot run here ('' when they can)."""
    torch = optional_torch()
    if torch is None:
        return "PyTorch is not installed"
    if GPU_SKIP_REASON:
        return GPU_SKIP_REASON
    if not torch.cuda.is_available():
        return "PyTorch has no usable CUDA device"
    return ""


def cupy_reason() -> str:
    """Why CuPy tests cannot run here ('' when they can)."""
    if GPU_SKIP_REASON:
        return GPU_SKIP_REASON
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no GPU"
    except Exception as exc:  # noqa: BLE001 - ImportError, or CuPy built for another CUDA
        return f"CuPy is not usable: {type(exc).__name__}: {exc}"
    return ""


requires_torch_cuda = pytest.mark.skipif(bool(torch_cuda_reason()), reason=torch_cuda_reason() or "ok")
requires_cupy = pytest.mark.skipif(bool(cupy_reason()), reason=cupy_reason() or "ok")


def current_device() -> int:
    device = _lib.ffi().new("int*")
    _lib.check(_lib.lib().conv_get_device(device))
    return device[0]


def gpu_variants():
    """The GPU variants usable here, with the precision each needs."""
    return [v for v in pyconv.variant_info() if v.available and v.on_device]


def precision_of(info) -> str:
    return "exact" if info.exact else "fast"


def to_numpy(a) -> np.ndarray:
    """Any result (NumPy, torch, CuPy, DeviceArray) as a NumPy array of its logical shape."""
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, pyconv.DeviceArray):
        return a.get()
    if type(a).__module__.startswith("torch"):
        a = a.detach()
        return (a.float() if str(a.dtype) == "torch.bfloat16" else a).cpu().numpy()
    if type(a).__module__.startswith("cupy"):
        return a.get()
    raise TypeError(type(a))


def memcpy_d2d(dst: int, src: int, nbytes: int, stream) -> None:
    f = _lib.ffi()
    _lib.check(_lib.lib().conv_memcpy_d2d(f.cast("void*", dst), f.cast("void*", src), nbytes,
                                          pyconv.device.stream_handle(stream)))


class DeviceView:
    """A __cuda_array_interface__ (v3) view of part of another device array: `shape` in C order from
    element `offset` of `base` (a DeviceArray or anything with .ptr), read-only or naming a stream if
    asked. Lets tests build overlapping operands, read-only outputs and producers on a stream."""

    def __init__(self, base, shape, offset=0, dtype=np.float32, readonly=False, stream=None, strides=None):
        self.base = base
        itemsize = np.dtype(dtype).itemsize
        iface = {"shape": tuple(shape), "typestr": np.dtype(dtype).str, "version": 3,
                 "data": (base.ptr + offset * itemsize, readonly), "strides": strides}
        if stream is not None:
            iface["stream"] = stream
        self.__cuda_array_interface__ = iface


@functools.lru_cache(maxsize=None)
def _sleep_cycles_per_second() -> float:
    torch = optional_torch()
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    cycles = 20_000_000
    start = time.perf_counter()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    return cycles / max(time.perf_counter() - start, 1e-4)


def gpu_sleep(seconds: float, stream=None) -> None:
    """Keeps `stream` (a handle, a stream object; None: the legacy default stream) busy on the GPU for
    about `seconds`, without blocking the host (torch.cuda._sleep)."""
    torch = optional_torch()
    handle = pyconv.device.stream_handle(stream)
    handle = int(_lib.ffi().cast("uintptr_t", handle))
    target = torch.cuda.default_stream() if handle == 0 else torch.cuda.ExternalStream(handle)
    with torch.cuda.stream(target):
        torch.cuda._sleep(int(seconds * _sleep_cycles_per_second()))


def random_problem(rng, x_shape=(2, 3, 17, 15), w_shape=(5, 3, 3, 3), dtype=np.float32):
    x = rng.uniform(-1, 1, x_shape).astype(dtype)
    w = rng.uniform(-1, 1, w_shape).astype(dtype)
    return x, w


def assert_device_still_works(device=None):
    """A normal device call after a refusal gives the right answer (the context is not poisoned and no
    error is left behind)."""
    rng = np.random.default_rng()
    x, w = random_problem(rng)
    b = rng.uniform(-1, 1, 5).astype(np.float32)
    xd = pyconv.DeviceArray.from_host(x, device=device)
    wd = pyconv.DeviceArray.from_host(w, device=device)
    bd = pyconv.DeviceArray.from_host(b, device=device)
    y = pyconv.conv2d(xd, wd, bd, padding=1)
    assert isinstance(y, pyconv.DeviceArray) and y.device == xd.device
    assert rel_l2(y.get(), conv2d_reference(x, w, padding=(1, 1), bias=b)) <= 1e-5
    pyconv.synchronize()


def refused_on_device(match, call, *args, error=pyconv.ConvError, **kwargs):
    with pytest.raises(error, match=match) as info:
        call(*args, **kwargs)
    assert_device_still_works()
    return info.value


# ---- results of the caller's kind, on the inputs' device ----

def test_device_arrays_in_device_array_out(rng):
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    y = pyconv.conv2d(xd, wd, padding=1)
    assert isinstance(y, pyconv.DeviceArray) and y.device == xd.device and y.shape == (2, 5, 17, 15)
    assert rel_l2(y.get(), conv2d_reference(x, w, padding=(1, 1))) <= 1e-5
    y = pyconv.conv2d(xd, wd, padding=1, sync=True)
    assert rel_l2(y.get(), conv2d_reference(x, w, padding=(1, 1))) <= 1e-5


def test_device_x_with_host_weights_and_bias(rng):
    """Host weights or bias beside device x are uploaded for the call; the result stays on the device."""
    x, w = random_problem(rng)
    b = rng.uniform(-1, 1, 5).astype(np.float32)
    y = pyconv.conv2d(pyconv.DeviceArray.from_host(x), w, b)
    assert isinstance(y, pyconv.DeviceArray)
    assert rel_l2(y.get(), conv2d_reference(x, w, bias=b)) <= 1e-5


def test_numpy_in_numpy_out_on_a_named_device(rng):
    x, w = random_problem(rng)
    y = pyconv.conv2d(x, w, variant="direct", device=0)
    assert isinstance(y, np.ndarray)
    assert rel_l2(y, conv2d_reference(x, w)) <= 1e-5


def test_pinned_numpy_through_a_gpu_variant(rng):
    x = pyconv.pinned_empty((2, 3, 17, 15))
    x[...] = rng.uniform(-1, 1, x.shape)
    w = rng.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    y = pyconv.conv2d(x, w, variant="direct")
    assert rel_l2(y, conv2d_reference(np.array(x), w)) <= 1e-5


def test_channels_last_device_array(rng):
    """A DeviceArray laid out NHWC is used in place; the result is NHWC too."""
    x, w = random_problem(rng, (2, 6, 13, 11), (4, 6, 3, 3))
    xd = pyconv.DeviceArray(x.shape, np.float32, layout="NHWC")
    memory = pyconv.DeviceArray.from_host(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    memcpy_d2d(xd.ptr, memory.ptr, xd.nbytes, None)
    y = pyconv.conv2d(xd, pyconv.DeviceArray.from_host(w), variant="direct")
    assert isinstance(y, pyconv.DeviceArray) and y.layout == "NHWC" and y.shape == (2, 4, 11, 9)
    assert rel_l2(y.get(), conv2d_reference(x, w)) <= 1e-5


# ---- out and launch checks on device memory ----

def test_numpy_out_with_device_inputs_is_refused(rng):
    """The issue's crash: a host `out` for device inputs (the kernel wrote through a host pointer)."""
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    out = np.empty((2, 5, 15, 13), np.float32)
    refused_on_device(r"out is in host memory, but the result is written in device 0", pyconv.conv2d, xd, wd,
                      out=out)


def test_device_out_with_numpy_inputs_is_refused(rng):
    x, w = random_problem(rng)
    out = pyconv.DeviceArray((2, 5, 15, 13))
    refused_on_device(r"out is in device 0, but the result is written in host memory", pyconv.conv2d, x, w,
                      out=out)


def test_device_out_overlapping_x_or_w_is_refused(rng):
    x = rng.uniform(-1, 1, (1, 4, 8, 8)).astype(np.float32)
    base = pyconv.DeviceArray((2 * x.size,))
    x_device = pyconv.DeviceArray.from_host(x)  # alive until the copy from it is done
    memcpy_d2d(base.ptr, x_device.ptr, x.nbytes, None)
    xv = DeviceView(base, x.shape)
    w = pyconv.DeviceArray.from_host(np.ones((4, 4, 1, 1), np.float32))
    refused_on_device(r"out overlaps x in memory", pyconv.conv2d, xv, w, out=DeviceView(base, x.shape))
    refused_on_device(r"out overlaps x in memory", pyconv.conv2d, xv, w, out=DeviceView(base, x.shape, offset=100))
    wv = DeviceView(base, (4, 4, 1, 1), offset=x.size)
    refused_on_device(r"out overlaps w in memory", pyconv.conv2d, pyconv.DeviceArray.from_host(x), wv,
                      out=DeviceView(base, x.shape, offset=x.size - 8))
    # Adjacent, not overlapping: fine.
    y = pyconv.conv2d(xv, w, out=DeviceView(base, x.shape, offset=x.size), sync=True)
    assert rel_l2(base.get()[x.size:].reshape(x.shape), conv2d_reference(x, np.ones((4, 4, 1, 1)))) <= 1e-5
    assert y is not None


def test_read_only_device_out_is_refused(rng):
    x, w = random_problem(rng)
    base = pyconv.DeviceArray((2 * 5 * 15 * 13,))
    refused_on_device(r"out is read-only", pyconv.conv2d, pyconv.DeviceArray.from_host(x),
                      pyconv.DeviceArray.from_host(w), out=DeviceView(base, (2, 5, 15, 13), readonly=True))


@pytest.fixture
def device_plan():
    return pyconv.Conv2dPlan((2, 3, 17, 15), (5, 3, 3, 3), variant="direct")


def test_launch_checks_device_arrays(device_plan, rng):
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    y = pyconv.DeviceArray(device_plan.out_shape)
    launch = device_plan.launch
    refused_on_device(r"x must be \(2, 3, 17, 15\) float32 NCHW, got \(1, 3, 17, 15\)", launch,
                      pyconv.DeviceArray((1, 3, 17, 15)), wd, y)
    refused_on_device(r"y must be \(2, 5, 15, 13\) float32 NCHW, got \(2, 5, 15, 12\)", launch, xd, wd,
                      pyconv.DeviceArray((2, 5, 15, 12)))
    refused_on_device(r"x must be .* float32 NCHW, got .* float16", launch,
                      pyconv.DeviceArray(x.shape, np.float16), wd, y)
    refused_on_device(r"x has dtype float64 on the device", launch, pyconv.DeviceArray(x.shape, np.float64), wd, y)
    refused_on_device(r"x must be .* NCHW, got .* NHWC", launch, pyconv.DeviceArray(x.shape, layout="NHWC"), wd, y)
    refused_on_device(r"y is read-only", launch, xd, wd, DeviceView(y, y.shape, readonly=True))
    refused_on_device(r"y is on the host, but this plan runs on device 0", launch, xd, wd,
                      np.empty(device_plan.out_shape, np.float32))
    refused_on_device(r"x is on the host, but this plan runs on device 0", launch, x, wd, y)
    base = pyconv.DeviceArray((64 + int(np.prod(device_plan.out_shape)),))  # holds both views
    refused_on_device(r"y .*(same memory as|overlaps) x", launch, DeviceView(base, x.shape), wd,
                      DeviceView(base, device_plan.out_shape, offset=64))
    device_plan.launch(xd, wd, y)
    pyconv.synchronize()
    assert rel_l2(y.get(), conv2d_reference(x, w)) <= 1e-5


def test_launch_with_raw_pointers_is_unchecked_but_runs(device_plan, rng):
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    y = pyconv.DeviceArray(device_plan.out_shape)
    y.fill_bytes(0xFF)
    device_plan.launch(xd.ptr, wd.ptr, y.ptr, stream=0)
    assert rel_l2(y.get(), conv2d_reference(x, w)) <= 1e-5


def test_host_plan_refuses_device_arrays(rng):
    plan = pyconv.Conv2dPlan((2, 3, 17, 15), (5, 3, 3, 3), variant="cpu")
    x, w = random_problem(rng)
    refused_on_device(r"x is on device 0, but this plan runs on the host", plan.launch,
                      pyconv.DeviceArray.from_host(x), w, np.empty(plan.out_shape, np.float32))


# ---- the stream rule ----

class _HasCudaStream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _HasPtr:
    def __init__(self, handle):
        self.ptr = handle


@pytest.mark.parametrize("make", [lambda s: s, lambda s: s.ptr, lambda s: _HasCudaStream(s.ptr),
                                  lambda s: _HasPtr(s.ptr)],
                         ids=["pyconv.Stream", "int", ".cuda_stream", ".ptr"])
def test_stream_argument_forms(make, rng):
    s = pyconv.Stream()
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    y = pyconv.conv2d(xd, wd, stream=make(s))
    s.synchronize()
    assert rel_l2(y.get(s), conv2d_reference(x, w)) <= 1e-5


@pytest.mark.parametrize("stream, error", [(object(), TypeError), ("1", TypeError), (-3, pyconv.ConvError)])
def test_bad_stream_with_device_arrays(stream, error, rng):
    x, w = random_problem(rng)
    refused_on_device(r"stream", pyconv.conv2d, pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w),
                      stream=stream, error=error)


@pytest.mark.skipif(bool(torch_cuda_reason()), reason=torch_cuda_reason() or "ok")
def test_device_call_enqueues_and_returns(rng):
    """Device arrays in: the call returns while the GPU is still busy with earlier work on its stream
    (no host synchronisation), and the result is right once that work is done. The factor between the
    GPU's delay and the call's wall time is generous: this checks behaviour, not speed."""
    x, w = random_problem(rng, (4, 8, 32, 32), (16, 8, 3, 3))
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    pyconv.conv2d(xd, wd, padding=1, sync=True)  # the plan is made and cached (auto may tune)
    delay = 0.5
    gpu_sleep(delay)  # the legacy default stream, which DeviceArray calls use
    start = time.perf_counter()
    y = pyconv.conv2d(xd, wd, padding=1)
    took = time.perf_counter() - start
    assert took < delay / 4, f"conv2d blocked the host {took:.3f} s behind a {delay} s GPU delay"
    assert rel_l2(y.get(), conv2d_reference(x, w, padding=(1, 1))) <= 1e-5


@pytest.mark.skipif(bool(torch_cuda_reason()), reason=torch_cuda_reason() or "ok")
def test_sync_true_blocks(rng):
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    pyconv.conv2d(xd, wd, sync=True)
    delay = 0.3
    gpu_sleep(delay)
    start = time.perf_counter()
    pyconv.conv2d(xd, wd, sync=True)
    assert time.perf_counter() - start > delay / 3, "sync=True must wait for the stream"


@pytest.mark.skipif(bool(torch_cuda_reason()), reason=torch_cuda_reason() or "ok")
@pytest.mark.parametrize("named_as", ["handle", "legacy"])
def test_array_interface_producer_stream_is_waited_for(named_as, rng):
    """x is written on a busy producer stream that its __cuda_array_interface__ names (v3); the call
    runs on another stream and must wait for the producer on the GPU (an event), not read x early.
    x is poisoned (NaN) before the delay, so reading it early shows."""
    x, w = random_problem(rng, (2, 4, 32, 32), (8, 4, 3, 3))
    wd = pyconv.DeviceArray.from_host(w)
    src = pyconv.DeviceArray.from_host(x)
    consumer = pyconv.Stream()
    pyconv.conv2d(src, wd, stream=consumer, sync=True)  # plan cached
    if named_as == "handle":
        producer = pyconv.Stream()
        xd = pyconv.DeviceArray(x.shape, stream=producer)  # its interface names `producer`
    else:  # the legacy stream is named 1 in the interface; a non-blocking consumer does not sync with it
        producer = None
        xd = pyconv.DeviceArray(x.shape)
    xd.fill_bytes(0xFF, stream=producer)
    gpu_sleep(0.3, producer)
    memcpy_d2d(xd.ptr, src.ptr, xd.nbytes, producer)
    y = pyconv.conv2d(xd, wd, stream=consumer)
    assert rel_l2(y.get(consumer), conv2d_reference(x, w)) <= 1e-5


@pytest.mark.skipif(bool(torch_cuda_reason()), reason=torch_cuda_reason() or "ok")
def test_result_names_its_stream_for_the_next_consumer(rng):
    """A DeviceArray result is written on the call's stream and names it in its interface, so a second
    call on another stream waits for the first."""
    x, w = random_problem(rng, (2, 4, 32, 32), (4, 4, 3, 3))
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    first, second = pyconv.Stream(), pyconv.Stream()
    pyconv.conv2d(pyconv.conv2d(xd, wd, stream=first, sync=True), wd, stream=second, sync=True)  # plans
    gpu_sleep(0.3, first)
    h = pyconv.conv2d(xd, wd, stream=first)
    assert h.__cuda_array_interface__["stream"] == first.ptr
    y = pyconv.conv2d(h, wd, stream=second)
    ref = conv2d_reference(conv2d_reference(x, w).astype(np.float32), w)
    assert rel_l2(y.get(second), ref) <= 1e-5


# ---- memory and caches ----

def test_empty_cache_and_clear_plan_cache_leave_pyconv_usable(rng):
    x, w = random_problem(rng)
    xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
    for _ in range(3):
        y = pyconv.conv2d(xd, wd)
        pyconv.synchronize()
        del y
        pyconv.empty_cache()
        pyconv.clear_plan_cache()
    assert rel_l2(pyconv.conv2d(xd, wd).get(), conv2d_reference(x, w)) <= 1e-5


def test_synchronize_without_a_fault_is_quiet():
    pyconv.synchronize()
    pyconv.synchronize(0)
    assert current_device() == 0


# ---- a kernel fault surfaces at the next synchronising call, naming the kernel ----

def test_kernel_fault_is_reported_by_synchronize_in_a_child_process():
    """A plan launched with raw pointers (unchecked) to tiny buffers makes the `direct` kernel read and
    write far past them. That poisons the CUDA context, so it runs in a child process: there
    pyconv.synchronize() must raise ConvRuntimeError naming the kernel. If the driver happens not to
    fault, the test is skipped (nothing is provoked unsafely in this process)."""
    code = textwrap.dedent("""
        import numpy as np, pyconv
        from pyconv import _lib
        f, l = _lib.ffi(), _lib.lib()
        plan = pyconv.Conv2dPlan((1, 1, 16384, 16384), (1, 1, 3, 3), padding=1, variant="direct")
        tiny = []
        for _ in range(3):
            raw = f.new("void**")
            _lib.check(l.conv_malloc(raw, 256))
            tiny.append(int(f.cast("uintptr_t", raw[0])))
        try:
            plan.launch(tiny[0], tiny[1], tiny[2])
            pyconv.synchronize()
            print("NO FAULT")
        except pyconv.ConvRuntimeError as e:
            print("FAULT", type(e).__name__, e)
        try:
            pyconv.synchronize()
            print("SECOND OK")
        except pyconv.ConvRuntimeError as e:
            print("SECOND", e)
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert "FAULT" in result.stdout, f"exit {result.returncode}: {result.stdout[-2000:]} {result.stderr[-3000:]}"
    if "NO FAULT" in result.stdout:
        pytest.skip("the out-of-bounds launch did not fault on this GPU")
    line = next(line for line in result.stdout.splitlines() if line.startswith("FAULT"))
    assert "ConvRuntimeError" in line and "conv_direct" in line, line
    assert "restart the process" in line, line
    assert_device_still_works()  # this process was never touched
