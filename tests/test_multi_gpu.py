"""Two or more GPUs: a call runs on the device that owns its operands whatever the current device is,
and leaves the caller's current device as it was (issue 10: operands on cuda:1 with current device 0
gave cudaErrorIllegalAddress and poisoned the process); operands on different devices are refused
naming both; one thread per GPU at once gives right answers on each (per-device __constant__ buffers,
plans and tuning). Skipped below two GPUs."""
import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2
from test_devices_streams import (_sleep_cycles_per_second, assert_device_still_works, current_device, optional_torch,
                                  precision_of,
                                  requires_cupy, requires_torch_cuda)
from test_launch_order import CONFIGS as CHAIN_CONFIGS
from test_launch_order import run_chains
from test_threads import run_threads

import pyconv
from conftest import GPU_SKIP_REASON, family_skip, filter_hw


def _two_gpu_reason() -> str:
    if GPU_SKIP_REASON:
        return GPU_SKIP_REASON
    count = pyconv.device_count()
    return "" if count >= 2 else f"needs 2 GPUs, this machine has {count}"


pytestmark = pytest.mark.skipif(bool(_two_gpu_reason()), reason=_two_gpu_reason() or "ok")

GPU_NAMES = [v.name for v in pyconv.variant_info() if v.on_device]
INFOS = {v.name: v for v in pyconv.variant_info()}
OTHER = 1  # the device the operands live on; device 0 stays current


def random_problem(rng, name="auto"):
    """x and w of a 7x7 layer, or of the filter shape that variant `name` computes (conftest.OWN_FILTER)."""
    x = rng.uniform(-1, 1, (2, 4, 40, 40)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 4, *filter_hw(name, (7, 7)))).astype(np.float32)
    return x, w


@pytest.fixture(autouse=True)
def device_zero_current():
    """Device 0 is current before each test, and must still be afterwards."""
    pyconv._lib.check(pyconv._lib.lib().conv_set_device(0))
    yield
    assert current_device() == 0, "a call left another device current"


@pytest.mark.parametrize("name", GPU_NAMES + ["auto"])
def test_operands_on_device_1_with_device_0_current(name, rng):
    info = INFOS.get(name)
    if info is not None and not info.available:
        pytest.skip(f"{name} unavailable here: {info.reason}")
    family_skip(name)
    precision = precision_of(info) if info is not None else "exact"
    x, w = random_problem(rng, name)
    xd = pyconv.DeviceArray.from_host(x, device=OTHER)
    wd = pyconv.DeviceArray.from_host(w, device=OTHER)
    assert current_device() == 0
    y = pyconv.conv2d(xd, wd, variant=name, precision=precision)
    assert current_device() == 0
    assert isinstance(y, pyconv.DeviceArray) and y.device == OTHER
    bound = info.max_rel_error if info is not None else 1e-5
    assert rel_l2(y.get(), conv2d_reference(x, w)) <= bound
    plan = pyconv.Conv2dPlan(x.shape, w.shape, variant=name, precision=precision, device=OTHER)
    assert plan.device == OTHER
    out = pyconv.DeviceArray(plan.out_shape, device=OTHER)
    out.fill_bytes(0xFF)
    plan.launch(xd, wd, out)
    pyconv.synchronize(OTHER)
    assert current_device() == 0
    assert rel_l2(out.get(), conv2d_reference(x, w)) <= bound


@pytest.mark.parametrize("variant,config", CHAIN_CONFIGS, ids=[f"{v}[{c}]" for v, c in CHAIN_CONFIGS])
def test_every_configuration_on_device_1_in_stream_order(variant, config, rng):
    """Each launch configuration of the performance families with its plan, operands and stream on device 1
    and device 0 current: what a launch reads of its device (shared memory past the default 48 KB, a
    persistent grid's wave, TMA maps, dependent launch) is device 1's, and test_launch_order's chain of
    four calls holds there."""
    run_chains(variant, config, rng, device=OTHER)
    assert current_device() == 0


def test_numpy_on_a_named_device(rng):
    x, w = random_problem(rng)
    y = pyconv.conv2d(x, w, variant="direct", device=OTHER)
    assert isinstance(y, np.ndarray) and rel_l2(y, conv2d_reference(x, w)) <= 1e-5


def test_capabilities_on_device_1(rng):
    """fp16, NHWC, groups, bias and the pooled epilogue on device 1, from NumPy (device=1)."""
    x = rng.uniform(-1, 1, (2, 6, 20, 18)).astype(np.float16)
    w = rng.uniform(-1, 1, (9, 2, 3, 3)).astype(np.float16)
    b = rng.uniform(-1, 1, 9).astype(np.float16)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    y = pyconv.conv2d(x_nhwc, w, b, padding=1, groups=3, epilogue=pyconv.ReluMaxPool(2), device=OTHER)
    assert isinstance(y, np.ndarray) and y.dtype == np.float16
    ref = conv2d_reference(x, w, padding=(1, 1), groups=3, bias=b, epilogue="relu_maxpool")
    assert rel_l2(y, ref) <= 1e-3


def test_mixed_devices_are_refused_naming_both(rng):
    x, w = random_problem(rng)
    x0 = pyconv.DeviceArray.from_host(x, device=0)
    w1 = pyconv.DeviceArray.from_host(w, device=OTHER)
    with pytest.raises(pyconv.ConvError, match=r"x on device 0.*w on device 1"):
        pyconv.conv2d(x0, w1)
    assert_device_still_works(OTHER)
    x1 = pyconv.DeviceArray.from_host(x, device=OTHER)
    b0 = pyconv.DeviceArray.from_host(np.ones(16, np.float32), device=0)
    with pytest.raises(pyconv.ConvError, match=r"x on device 1.*bias on device 0"):
        pyconv.conv2d(x1, w1, b0)
    out0 = pyconv.DeviceArray((2, 16, 34, 34), device=0)
    with pytest.raises(pyconv.ConvError, match=r"out is in device 0, but the result is written in device 1"):
        pyconv.conv2d(x1, w1, out=out0)
    with pytest.raises(pyconv.ConvError, match=r"device=0, but the operands are on device 1"):
        pyconv.conv2d(x1, w1, device=0)
    plan = pyconv.Conv2dPlan(x.shape, w.shape, variant="direct", device=OTHER)
    with pytest.raises(pyconv.ConvError, match=r"x is on device 0, but this plan runs on device 1"):
        plan.launch(x0, w1, pyconv.DeviceArray(plan.out_shape, device=OTHER))
    assert current_device() == 0
    assert_device_still_works(0)
    assert_device_still_works(OTHER)


@requires_torch_cuda
def test_torch_tensors_on_cuda_1(rng):
    torch = optional_torch()
    x, w = random_problem(rng)
    xt = torch.from_numpy(x).to("cuda:1").half().to(memory_format=torch.channels_last)
    wt = torch.nn.Parameter(torch.from_numpy(w).to("cuda:1").half())
    assert torch.cuda.current_device() == 0
    y = pyconv.conv2d(xt, wt, epilogue="relu")
    assert isinstance(y, torch.Tensor) and y.device == torch.device("cuda", 1) and y.dtype == torch.float16
    assert y.requires_grad  # the Parameter's graph is recorded on device 1 too
    assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    ref = conv2d_reference(xt.double().cpu().numpy(), wt.detach().double().cpu().numpy(), epilogue="relu")
    assert rel_l2(y.detach().double().cpu().numpy(), ref) <= 1e-3
    with pytest.raises(pyconv.ConvError, match=r"x on device 1.*w on device 0"):
        pyconv.conv2d(xt, wt.detach().to("cuda:0"))


@requires_torch_cuda
def test_torch_current_stream_of_the_operands_device(rng):
    """The stream rule picks PyTorch's current stream on the operands' device (1), not the current
    device's."""
    torch = optional_torch()
    x, w = random_problem(rng)
    xt, wt = torch.from_numpy(x).to("cuda:1"), torch.from_numpy(w).to("cuda:1")
    pyconv.conv2d(xt, wt)
    torch.cuda.synchronize(1)
    s1 = torch.cuda.Stream(device=1)
    s1.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(s1):  # also makes device 1 current inside the block
        y = pyconv.conv2d(xt, wt)
    s1.synchronize()
    assert rel_l2(y.cpu().numpy(), conv2d_reference(x, w)) <= 1e-5


@requires_torch_cuda
def test_grouped_tiles_on_device_1_after_a_delayed_producer(rng):
    """implicit_gemm_f16's grp tiles (persistent blocks, cp.async window copies; ResNeXt's 4 channels a group)
    on cuda:1, called on a side stream whose producer of x is still asleep on the GPU: the call runs in that
    stream's order on device 1 and device 0 is current again after the block; a refused layer (3 channels a
    group) leaves device 1 usable."""
    torch = optional_torch()
    x = rng.uniform(-1, 1, (2, 128, 19, 21)).astype(np.float32)
    w = rng.uniform(-1, 1, (128, 4, 3, 3)).astype(np.float32)
    src, wt = (torch.from_numpy(a).to("cuda:1").half().to(memory_format=torch.channels_last) for a in (x, w))
    xt = torch.zeros_like(src)
    torch.cuda.synchronize(1)
    s1 = torch.cuda.Stream(device=1)
    kw = dict(padding=1, groups=32, variant="implicit_gemm_f16", config="grp64_c32")
    with torch.cuda.stream(s1):
        torch.cuda._sleep(int(0.05 * _sleep_cycles_per_second()))  # the producer: x written after 50 ms
        xt.copy_(src)
        y = pyconv.conv2d(xt, wt, **kw)
    assert torch.cuda.current_device() == 0
    s1.synchronize()
    assert y.device == torch.device("cuda", 1) and y.dtype == torch.float16
    ref = conv2d_reference(src.double().cpu().numpy(), wt.double().cpu().numpy(), padding=(1, 1), groups=32)
    assert rel_l2(y.double().cpu().numpy(), ref) <= INFOS["implicit_gemm_f16"].max_rel_error
    x3 = torch.zeros((2, 96, 9, 9), device="cuda:1", dtype=torch.float16).to(memory_format=torch.channels_last)
    w3 = torch.zeros((96, 3, 3, 3), device="cuda:1", dtype=torch.float16).to(memory_format=torch.channels_last)
    with pytest.raises(pyconv.ConvUnsupportedError, match="groups of 1, 2, 4 or a multiple of 8"):
        pyconv.conv2d(x3, w3, **kw)
    assert_device_still_works(OTHER)


@requires_cupy
def test_cupy_arrays_on_device_1(rng):
    import cupy
    x, w = random_problem(rng)
    with cupy.cuda.Device(OTHER):
        xc, wc = cupy.asarray(x), cupy.asarray(w)
    y = pyconv.conv2d(xc, wc)
    assert isinstance(y, cupy.ndarray) and y.device.id == OTHER
    assert cupy.cuda.Device().id == 0
    with cupy.cuda.Device(OTHER):
        result = y.get()
    assert rel_l2(result, conv2d_reference(x, w)) <= 1e-5


@pytest.mark.parametrize("name", ["direct_const", "direct", "auto"])
def test_one_thread_per_gpu_at_once(name, rng):
    """Each GPU in its own thread, its own filters, several calls in flight: right on every device."""
    info = INFOS.get(name)
    if info is not None and not info.available:
        pytest.skip(f"{name} unavailable here: {info.reason}")
    precision = precision_of(info) if info is not None else "exact"
    bound = info.max_rel_error if info is not None else 1e-5
    devices = list(range(pyconv.device_count()))
    x, _ = random_problem(rng)
    filters = [rng.uniform(-1, 1, (16, 4, 7, 7)).astype(np.float32) for _ in devices]
    refs = [conv2d_reference(x, w) for w in filters]

    def work(device, barrier):
        xd = pyconv.DeviceArray.from_host(x, device=device)
        wd = pyconv.DeviceArray.from_host(filters[device], device=device)
        barrier.wait()
        results = [pyconv.conv2d(xd, wd, variant=name, precision=precision) for _ in range(10)]
        for y in results:
            assert y.device == device
            assert rel_l2(y.get(), refs[device]) <= bound, f"{name} on device {device}"

    run_threads(work, len(devices))
    assert current_device() == 0
