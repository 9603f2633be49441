"""PyTorch and CuPy operands through conv2d, conv1d and Conv2dPlan: fp32, fp16 and bf16 (PyTorch)
tensors, channels_last (used in place, result channels_last), nn.Parameter weights, bias, groups and the
fused epilogues, against the float64 oracle and torch.nn.functional; results as torch tensors / CuPy
arrays on the inputs' device; PyTorch's and CuPy's current streams, producers delayed on a side
stream, `out` and `stream=` of their kinds, DLPack producers, and Conv2dPlan.launch captured in a CUDA
graph.

CPU tensors run everywhere PyTorch is installed (on the cpu variant); CUDA tests skip with the reason
where there is no GPU, no PyTorch or no CuPy."""
import functools
import time

import numpy as np
import pytest
from conftest import OWN_FAMILY, family_skip, filter_hw
from oracle import conv2d_reference, rel_l2
from test_devices_streams import (assert_device_still_works, gpu_sleep, gpu_variants, optional_torch,
                                  precision_of, requires_cupy, requires_torch_cuda, to_numpy)

import pyconv

torch = optional_torch()
requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

# Relative L2 bounds by result dtype for the exact variants: fp32 accumulation, one rounding to the
# result's dtype (fp16: 2^-11, bf16: 2^-8 relative per element).
BOUND = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
TORCH_DTYPES = ["float32", "float16", "bfloat16"]


def tensor(rng, shape, dtype="float32", device="cpu", channels_last=False, scale=1.0):
    t = torch.from_numpy(rng.uniform(-scale, scale, shape).astype(np.float32)).to(getattr(torch, dtype))
    if channels_last:
        t = t.to(memory_format=torch.channels_last)
    return t.to(device)


def as_f64(t) -> np.ndarray:
    """A tensor's exact values in float64 (what the oracle takes)."""
    return t.detach().to("cpu", torch.float64).numpy()


def is_channels_last(t) -> bool:
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def torch_reference(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, epilogue=None):
    """torch.nn.functional in float64 on the CPU: what pyconv promises to match."""
    F = torch.nn.functional
    y = F.conv2d(torch.from_numpy(as_f64(x)), torch.from_numpy(as_f64(w)),
                 None if b is None else torch.from_numpy(as_f64(b)), stride, padding, dilation, groups)
    if epilogue is not None:
        y = F.relu(y)
    if isinstance(epilogue, pyconv.ReluMaxPool):
        y = F.max_pool2d(y, epilogue.kernel, epilogue.stride, ceil_mode=epilogue.ceil_mode)
    return y.numpy()


# ---- the shared check: PyTorch tensors through conv2d on one device ----

CASES = {  # name: (x shape, w shape, with bias, conv2d keywords)
    "plain": ((2, 3, 16, 13), (5, 3, 3, 3), False, dict()),
    "bias_pad_stride": ((2, 4, 15, 17), (6, 4, 3, 5), True, dict(stride=2, padding=(1, 2))),
    "groups_relu": ((2, 6, 12, 12), (9, 2, 3, 3), True, dict(groups=3, padding=1, epilogue="relu")),
    "depthwise_pool": ((2, 8, 14, 14), (8, 1, 3, 3), True,
                       dict(groups=8, padding="same", epilogue=pyconv.ReluMaxPool(2))),
    "dilation_pool_ceil": ((1, 3, 19, 17), (4, 3, 3, 3), True,
                           dict(dilation=2, epilogue=pyconv.ReluMaxPool(3, stride=2, ceil_mode=True))),
}


def check_torch_conv2d(rng, device, dtype, channels_last, case, variant="auto", parameter=False):
    x_shape, w_shape, with_bias, kwargs = CASES[case]
    x = tensor(rng, x_shape, dtype, device, channels_last)
    w = tensor(rng, w_shape, dtype, device, channels_last)
    if parameter:
        w = torch.nn.Parameter(w)  # requires grad: read through data_ptr(), not the array interface
    b = tensor(rng, (w_shape[0],), dtype, device) if with_bias else None
    y = pyconv.conv2d(x, w, b, variant=variant, **kwargs)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
    assert is_channels_last(y) == channels_last, "the result is stored in x's memory format"
    if device != "cpu":
        torch.cuda.synchronize(device)
    padding = kwargs.get("padding", 0)
    expected = torch_reference(x, w, b, kwargs.get("stride", 1), padding, kwargs.get("dilation", 1),
                               kwargs.get("groups", 1), kwargs.get("epilogue"))
    assert tuple(y.shape) == expected.shape
    assert rel_l2(as_f64(y), expected) <= BOUND[dtype], f"{case} {dtype} channels_last={channels_last}"
    return y


# ---- CPU tensors (the cpu variant) ----

@requires_torch
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_cpu_tensors(dtype, channels_last, case, rng):
    check_torch_conv2d(rng, "cpu", dtype, channels_last, case, variant="cpu", parameter=True)


@requires_torch
def test_torch_cpu_auto_and_conv1d(rng):
    x = tensor(rng, (2, 4, 30))
    w = tensor(rng, (6, 2, 5))
    b = tensor(rng, (6,))
    y = pyconv.conv1d(x, w, b, padding="same", groups=2, variant="cpu")
    assert isinstance(y, torch.Tensor) and y.shape == (2, 6, 30)
    expected = torch.nn.functional.conv1d(x.double(), w.double(), b.double(), padding="same", groups=2)
    assert rel_l2(as_f64(y), expected.numpy()) <= 1e-5


@requires_torch
def test_torch_cpu_plan_launch(rng):
    x = tensor(rng, (2, 3, 12, 12), "bfloat16", channels_last=True)
    w = tensor(rng, (4, 3, 3, 3), "bfloat16", channels_last=True)
    b = tensor(rng, (4,), "bfloat16")
    plan = pyconv.Conv2dPlan(x.shape, w.shape, padding=1, bias=True, epilogue="relu", variant="cpu",
                             dtype="bfloat16", layout="NHWC", w_layout="MKKC")
    y = torch.empty(plan.out_shape, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    plan.launch(x, w, y, bias=b)
    assert rel_l2(as_f64(y), torch_reference(x, w, b, padding=1, epilogue="relu")) <= BOUND["bfloat16"]
    with pytest.raises(pyconv.ConvError, match=r"y must be .* bfloat16 NHWC, got .* NCHW"):
        plan.launch(x, w, torch.empty(plan.out_shape, dtype=torch.bfloat16), bias=b)
    with pytest.raises(pyconv.ConvError, match=r"x has dtype torch.float64"):
        plan.launch(x.double(), w, y, bias=b)


@requires_torch
def test_torch_plan_launch_depthwise_channels_last(rng):
    """A channels-last depthwise filter (M, 1, KH, KW) is C-contiguous too: an NHWC/MKKC plan takes it."""
    x = tensor(rng, (2, 6, 9, 9), "float32", channels_last=True)
    w = tensor(rng, (6, 1, 3, 3), "float32", channels_last=True)
    plan = pyconv.Conv2dPlan(x.shape, w.shape, padding=1, groups=6, variant="cpu", layout="NHWC", w_layout="MKKC")
    y = torch.empty(plan.out_shape).to(memory_format=torch.channels_last)
    plan.launch(x, w, y)
    expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1, groups=6).numpy()
    assert rel_l2(as_f64(y), expected) <= 1e-5


# ---- CUDA tensors ----

@requires_torch_cuda
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_cuda_tensors(dtype, channels_last, case, rng):
    check_torch_conv2d(rng, "cuda", dtype, channels_last, case, parameter=(case == "plain"))


@requires_torch_cuda
@pytest.mark.parametrize("name", [v.name for v in pyconv.variant_info() if v.on_device])
def test_every_gpu_variant_on_torch_tensors(name, rng):
    """fp32 NCHW CUDA tensors (what every variant declares) through each variant, result a CUDA tensor."""
    info = {v.name: v for v in pyconv.variant_info()}[name]
    if not info.available:
        pytest.skip(f"{name} unavailable here: {info.reason}")
    family_skip(name)
    x = tensor(rng, (2, 4, 40, 40), device="cuda")
    w = torch.nn.Parameter(tensor(rng, (16, 4) + filter_hw(name, (7, 7)), device="cuda"))
    y = pyconv.conv2d(x, w, variant=name, precision=precision_of(info))
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == torch.float32
    torch.cuda.synchronize()
    assert rel_l2(as_f64(y), conv2d_reference(as_f64(x), as_f64(w))) <= info.max_rel_error


@requires_torch_cuda
def test_torch_cuda_conv1d(rng):
    for dtype in TORCH_DTYPES:
        x = tensor(rng, (3, 4, 50), dtype, "cuda")
        w = tensor(rng, (8, 2, 4), dtype, "cuda")
        b = tensor(rng, (8,), dtype, "cuda")
        y = pyconv.conv1d(x, w, b, padding="same", groups=2, epilogue=pyconv.ReluMaxPool(2))
        assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == x.dtype
        F = torch.nn.functional
        expected = F.max_pool1d(F.relu(F.conv1d(x.double().cpu(), w.double().cpu(), b.double().cpu(),
                                                padding="same", groups=2)), 2)
        assert rel_l2(as_f64(y), expected.numpy()) <= BOUND[dtype]


@requires_torch_cuda
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_cuda_plan(dtype, rng):
    """Conv2dPlan on CUDA tensors: NHWC x and y, MKKC w, bias, ReLU + max-pool, on the caller's stream."""
    x = tensor(rng, (2, 8, 20, 18), dtype, "cuda", channels_last=True)
    w = tensor(rng, (16, 8, 3, 3), dtype, "cuda", channels_last=True)
    b = tensor(rng, (16,), dtype, "cuda")
    epilogue = pyconv.ReluMaxPool(2)
    plan = pyconv.Conv2dPlan(x.shape, w.shape, padding=1, bias=True, epilogue=epilogue, dtype=dtype,
                             layout="NHWC", w_layout="MKKC")
    assert plan.on_device and plan.device == 0
    y = torch.full(plan.out_shape, float("nan"), dtype=x.dtype, device="cuda").to(memory_format=torch.channels_last)
    plan.launch(x, w, y, stream=torch.cuda.current_stream(), bias=b)
    torch.cuda.synchronize()
    assert rel_l2(as_f64(y), torch_reference(x, w, b, padding=1, epilogue=epilogue)) <= BOUND[dtype]
    with pytest.raises(pyconv.ConvError, match=r"y is on the host, but this plan runs on device 0"):
        plan.launch(x, w, y.cpu(), bias=b)
    with pytest.raises(pyconv.ConvError, match=r"x must be"):
        plan.launch(x.contiguous(), w, y, bias=b)
    assert_device_still_works()


@requires_torch_cuda
def test_torch_out_and_its_refusals(rng):
    x = tensor(rng, (2, 4, 8, 8), device="cuda")
    w = tensor(rng, (4, 4, 1, 1), device="cuda")
    out = torch.full((2, 4, 8, 8), float("nan"), device="cuda")
    assert pyconv.conv2d(x, w, out=out) is out
    torch.cuda.synchronize()
    assert rel_l2(as_f64(out), conv2d_reference(as_f64(x), as_f64(w))) <= 1e-5
    refusals = [
        (r"out is in host memory, but the result is written in device 0", dict(out=torch.empty(2, 4, 8, 8))),
        (r"out is in host memory, but the result is written in device 0",
         dict(out=np.empty((2, 4, 8, 8), np.float32))),
        (r"out must have dtype float32, got bfloat16",
         dict(out=torch.empty(2, 4, 8, 8, dtype=torch.bfloat16, device="cuda"))),
        (r"out overlaps x in memory", dict(out=x)),
        (r"out must be NCHW like the result", dict(out=torch.empty_like(out).to(memory_format=torch.channels_last))),
    ]
    for match, kwargs in refusals:
        with pytest.raises(pyconv.ConvError, match=match):
            pyconv.conv2d(x, w, **kwargs)
        assert_device_still_works()
    big = torch.zeros(2 * x.numel(), device="cuda")
    xs = big[:x.numel()].view(x.shape)
    xs.copy_(x)
    with pytest.raises(pyconv.ConvError, match=r"out overlaps x in memory"):
        pyconv.conv2d(xs, w, out=big[40:40 + x.numel()].view(x.shape))
    wb = torch.zeros(300, device="cuda")
    with pytest.raises(pyconv.ConvError, match=r"out overlaps w in memory"):
        pyconv.conv2d(x[:1], wb[:16].view(4, 4, 1, 1), out=wb[8:8 + 256].view(1, 4, 8, 8))
    assert_device_still_works()


@requires_torch_cuda
def test_torch_stream_argument_and_bad_streams(rng):
    x = tensor(rng, (2, 3, 16, 16), device="cuda")
    w = tensor(rng, (4, 3, 3, 3), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    y = pyconv.conv2d(x, w, stream=s)
    s.synchronize()
    assert rel_l2(as_f64(y), conv2d_reference(as_f64(x), as_f64(w))) <= 1e-5
    for stream, error in ((object(), TypeError), ("s", TypeError), (-1, pyconv.ConvError)):
        with pytest.raises(error, match=r"stream"):
            pyconv.conv2d(x, w, stream=stream)
        assert_device_still_works()


@requires_torch_cuda
def test_numpy_inputs_with_a_torch_stream(rng):
    """stream=torch.cuda.Stream() with NumPy operands (issue 10: a TypeError): the GPU work runs on that
    stream and the NumPy result is ready on return."""
    x = rng.uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    y = pyconv.conv2d(x, w, variant="direct", stream=torch.cuda.Stream())
    assert isinstance(y, np.ndarray) and rel_l2(y, conv2d_reference(x, w)) <= 1e-5


def _warm(x, w, **kwargs):
    """The plan is made (auto may tune, which synchronises) before the timed or delayed call."""
    pyconv.conv2d(x, w, **kwargs)
    torch.cuda.synchronize()


@requires_torch_cuda
def test_torch_call_does_not_block_the_host(rng):
    """Behind a 0.5 s delay on the current stream, conv2d on CUDA tensors returns at once (generous
    factor: a behaviour check, not a timing), and its result is right after synchronising."""
    x = tensor(rng, (8, 16, 32, 32), device="cuda")
    w = tensor(rng, (32, 16, 3, 3), device="cuda")
    b = tensor(rng, (32,), device="cuda")
    _warm(x, w, bias=b, padding=1, epilogue="relu")
    delay = 0.5
    gpu_sleep(delay, torch.cuda.current_stream().cuda_stream)
    start = time.perf_counter()
    y = pyconv.conv2d(x, w, b, padding=1, epilogue="relu")
    took = time.perf_counter() - start
    assert took < delay / 4, f"conv2d blocked the host {took:.3f} s behind a {delay} s GPU delay"
    assert not torch.cuda.current_stream().query(), "the delay should still be running"
    torch.cuda.synchronize()
    assert rel_l2(as_f64(y), torch_reference(x, w, b, padding=1, epilogue="relu")) <= 1e-5


@requires_torch_cuda
def test_producer_delayed_on_a_side_stream(rng):
    """x produced on side stream s after a delay; `with torch.cuda.stream(s): pyconv.conv2d(x, w)` runs
    on s (PyTorch's current stream), so it sees the finished x. The issue's wrong result."""
    src = tensor(rng, (4, 8, 32, 32), device="cuda")
    w = tensor(rng, (16, 8, 3, 3), device="cuda")
    _warm(src, w, padding=1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gpu_sleep(0.3, s.cuda_stream)
        x = src * 2.0  # written on s, after the delay
        y = pyconv.conv2d(x, w, padding=1)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert rel_l2(as_f64(y), conv2d_reference(as_f64(src) * 2, as_f64(w), padding=(1, 1))) <= 1e-5


@requires_torch_cuda
def test_current_stream_is_used_and_restored(rng):
    """Inside `with torch.cuda.stream(s)` the call runs on s: it is queued behind s's delay and done
    once s is."""
    x = tensor(rng, (2, 4, 24, 24), device="cuda")
    w = tensor(rng, (8, 4, 3, 3), device="cuda")
    _warm(x, w)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        gpu_sleep(0.3, s.cuda_stream)
        y = pyconv.conv2d(x, w)
    assert not s.query(), "the call should be queued on s behind the delay"
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    s.synchronize()
    assert rel_l2(as_f64(y), conv2d_reference(as_f64(x), as_f64(w))) <= 1e-5


class _DLPackOnly:
    """A producer that speaks only DLPack (no __cuda_array_interface__), as JAX or TF arrays do."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None, **kwargs):
        return self._t.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@requires_torch_cuda
def test_dlpack_producer(rng):
    x = tensor(rng, (2, 3, 16, 16), device="cuda")
    w = tensor(rng, (4, 3, 3, 3), device="cuda")
    y = pyconv.conv2d(_DLPackOnly(x), _DLPackOnly(w))
    torch.cuda.synchronize()
    assert rel_l2(to_numpy(y), conv2d_reference(as_f64(x), as_f64(w))) <= 1e-5


@requires_torch_cuda
@pytest.mark.parametrize("dtype, layout", [("float32", "NCHW"), ("float16", "NHWC")])
def test_plan_launch_captured_in_a_cuda_graph(dtype, layout, rng):
    """After tuning (the plan is made before capture), Conv2dPlan.launch is captured in a CUDA graph on
    the capture stream; replaying it after x changed in place gives the new right result."""
    nhwc = layout == "NHWC"
    x = tensor(rng, (4, 8, 24, 24), dtype, "cuda", channels_last=nhwc)
    w = tensor(rng, (16, 8, 3, 3), dtype, "cuda", channels_last=nhwc)
    b = tensor(rng, (16,), dtype, "cuda")
    plan = pyconv.Conv2dPlan(x.shape, w.shape, padding=1, bias=True, epilogue="relu", dtype=dtype, layout=layout,
                             w_layout="MKKC" if nhwc else "MCKK")
    y = torch.empty(plan.out_shape, dtype=x.dtype, device="cuda")
    if nhwc:
        y = y.to(memory_format=torch.channels_last)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up launch outside capture
        plan.launch(x, w, y, stream=side, bias=b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.launch(x, w, y, stream=torch.cuda.current_stream(), bias=b)
    for _ in range(2):
        x.copy_(tensor(rng, tuple(x.shape), dtype, "cuda", channels_last=nhwc))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_l2(as_f64(y), torch_reference(x, w, b, padding=1, epilogue="relu")) <= BOUND[dtype]


@requires_torch_cuda
def test_conv2d_captured_in_a_cuda_graph(rng):
    """conv2d itself on CUDA tensors (cached plan, output from PyTorch's allocator, the capture stream
    as PyTorch's current stream) can be captured too."""
    x = tensor(rng, (2, 4, 16, 16), device="cuda")
    w = tensor(rng, (8, 4, 3, 3), device="cuda")
    _warm(x, w, padding=1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = pyconv.conv2d(x, w, padding=1)
    x.copy_(tensor(rng, tuple(x.shape), device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert rel_l2(as_f64(y), conv2d_reference(as_f64(x), as_f64(w), padding=(1, 1))) <= 1e-5


# ---- CuPy ----

def _cupy():
    import cupy
    return cupy


@functools.lru_cache(maxsize=None)
def _cupy_spin():
    cupy = _cupy()
    return cupy.RawKernel(r'''
        extern "C" __global__ void spin(long long cycles) {
            long long start = clock64();
            while (clock64() - start < cycles) { }
        }''', "spin")


@functools.lru_cache(maxsize=None)
def _cupy_cycles_per_second() -> float:
    cupy = _cupy()
    spin = _cupy_spin()
    spin((1,), (1,), (np.int64(1000),))
    cupy.cuda.Device().synchronize()
    cycles = 20_000_000
    start = time.perf_counter()
    spin((1,), (1,), (np.int64(cycles),))
    cupy.cuda.Device().synchronize()
    return cycles / max(time.perf_counter() - start, 1e-4)


def cupy_sleep(seconds: float) -> None:
    """Busy-waits on CuPy's current stream for about `seconds` (no host block)."""
    _cupy_spin()((1,), (1,), (np.int64(seconds * _cupy_cycles_per_second()),))


def cupy_array(rng, shape, dtype=np.float32, channels_last=False):
    cupy = _cupy()
    a = rng.uniform(-1, 1, shape).astype(dtype)
    if channels_last:
        return cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
    return cupy.asarray(a)


@requires_cupy
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cupy_arrays(dtype, channels_last, rng):
    cupy = _cupy()
    x = cupy_array(rng, (2, 6, 15, 14), dtype, channels_last)
    w = cupy_array(rng, (9, 2, 3, 3), dtype, channels_last)
    b = cupy_array(rng, (9,), dtype)
    y = pyconv.conv2d(x, w, b, padding=1, groups=3, epilogue=pyconv.ReluMaxPool(2, ceil_mode=True))
    assert isinstance(y, cupy.ndarray) and y.device.id == 0 and y.dtype == dtype
    if channels_last:
        assert y.transpose(0, 2, 3, 1).flags.c_contiguous
    ref = conv2d_reference(x.get().astype(np.float64), w.get().astype(np.float64), padding=(1, 1), groups=3,
                           bias=b.get().astype(np.float64), epilogue="relu_maxpool", pool_ceil=True)
    bound = BOUND[np.dtype(dtype).name]
    assert rel_l2(y.get(), ref) <= bound
    x1, w1 = cupy_array(rng, (2, 6, 30), dtype), cupy_array(rng, (9, 2, 4), dtype)
    y1 = pyconv.conv1d(x1, w1, b, padding="same", groups=3)  # K = 4: one zero before, two after
    assert isinstance(y1, cupy.ndarray) and y1.shape == (2, 9, 30)
    ref1 = conv2d_reference(x1.get()[:, :, None, :].astype(np.float64), w1.get()[:, :, None, :].astype(np.float64),
                            padding=(0, 1), padding_extra=(0, 1), groups=3, bias=b.get().astype(np.float64))
    assert rel_l2(y1.get(), ref1[:, :, 0]) <= bound


@requires_cupy
def test_cupy_plan_and_stream(rng):
    cupy = _cupy()
    x = cupy_array(rng, (2, 4, 20, 20))
    w = cupy_array(rng, (8, 4, 5, 5))
    plan = pyconv.Conv2dPlan(x.shape, w.shape, padding=2)
    y = cupy.full(plan.out_shape, cupy.nan, cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()  # x, w and y were written on the null stream
    plan.launch(x, w, y, stream=s)
    s.synchronize()
    assert rel_l2(y.get(), conv2d_reference(x.get(), w.get(), padding=(2, 2))) <= 1e-5
    with pytest.raises(pyconv.ConvError, match=r"y must be \(2, 8, 20, 20\) float32 NCHW"):
        plan.launch(x, w, cupy.empty((2, 8, 20, 19), cupy.float32))
    assert_device_still_works()


@requires_cupy
def test_cupy_current_stream_with_a_delayed_producer(rng):
    """Inside `with stream:` (a non-blocking CuPy stream) x is produced after a delay; the call runs on
    CuPy's current stream and sees the finished x."""
    cupy = _cupy()
    src = cupy_array(rng, (2, 4, 32, 32))
    w = cupy_array(rng, (8, 4, 3, 3))
    pyconv.conv2d(src, w)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cupy_sleep(0.3)
        x = src * 2
        y = pyconv.conv2d(x, w)
    s.synchronize()
    assert rel_l2(y.get(), conv2d_reference(src.get() * 2.0, w.get())) <= 1e-5


@requires_cupy
def test_cupy_array_interface_stream_is_waited_for(rng):
    """A CuPy array exported while a non-blocking stream is current names that stream (array interface
    v3); a call on another stream (stream=) must wait for it with an event, not read x early."""
    cupy = _cupy()
    src = cupy_array(rng, (2, 4, 32, 32))
    w = cupy_array(rng, (8, 4, 3, 3))
    consumer = pyconv.Stream()
    cupy.cuda.Device().synchronize()
    pyconv.conv2d(src, w, stream=consumer, sync=True)
    producer = cupy.cuda.Stream(non_blocking=True)
    with producer:
        x = cupy.full(src.shape, cupy.nan, cupy.float32)
        cupy_sleep(0.3)
        x[...] = src
        if x.__cuda_array_interface__.get("stream") != producer.ptr:
            producer.synchronize()
            pytest.skip("this CuPy does not name the current stream in __cuda_array_interface__")
        y = pyconv.conv2d(x, w, stream=consumer)
    consumer.synchronize()
    assert rel_l2(y.get(), conv2d_reference(src.get(), w.get())) <= 1e-5


@requires_cupy
def test_cupy_every_gpu_variant(rng):
    cupy = _cupy()
    x = cupy_array(rng, (2, 4, 40, 40))
    for info in (v for v in gpu_variants() if v.name not in OWN_FAMILY):
        w = cupy_array(rng, (16, 4) + filter_hw(info.name, (7, 7)))
        y = pyconv.conv2d(x, w, variant=info.name, precision=precision_of(info))
        assert isinstance(y, cupy.ndarray)
        assert rel_l2(y.get(), conv2d_reference(x.get(), w.get())) <= info.max_rel_error, info.name
