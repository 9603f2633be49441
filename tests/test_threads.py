"""Many threads calling pyconv at once, each with its own filters (and on the GPU its own stream):
every result must be right every time. The target is shared state: the plan cache, auto's tuning,
scratch memory, and direct_const's __constant__ filter buffer (issue 10: one wrong answer in 320 calls
when two threads used different filters). Threads start together at a barrier and enqueue several
calls before checking any, so kernels of different threads overlap on the GPU."""
import threading

import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2
from test_devices_streams import optional_torch, precision_of, requires_torch_cuda

import pyconv
from conftest import OWN_FAMILY, family_skip, filter_hw, requires_gpu

THREADS = 8
CALLS = 8  # per thread, enqueued before any is checked


def run_threads(work, count=THREADS):
    """Runs work(index, barrier) in `count` threads; re-raises the first failure with its thread."""
    barrier = threading.Barrier(count)
    errors = []

    def body(index):
        try:
            work(index, barrier)
        except BaseException as exc:  # noqa: BLE001 - reported below, with the thread that failed
            barrier.abort()
            errors.append((index, exc))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    real = [(i, e) for i, e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real:
        index, exc = real[0]
        raise AssertionError(f"thread {index}: {type(exc).__name__}: {exc}") from exc


# ---- host: the cpu variant and the plan cache ----

def test_threads_on_the_cpu_variant_with_different_filters_and_shapes():
    """Host calls from 8 threads, half on one shared shape (one cached plan), half on shapes of their
    own (plans made concurrently)."""
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (2, 3, 20, 18)).astype(np.float32)

    def work(index, barrier):
        local = np.random.default_rng(index + 1000)
        w = local.uniform(-1, 1, (4 + (index % 2) * index, 3, 3, 3)).astype(np.float32)
        b = local.uniform(-1, 1, w.shape[0]).astype(np.float32)
        ref = conv2d_reference(x, w, padding=(1, 1), bias=b, epilogue="relu")
        barrier.wait()
        for _ in range(CALLS):
            y = pyconv.conv2d(x, w, b, padding=1, epilogue="relu", variant="cpu")
            assert rel_l2(y, ref) <= 1e-5

    pyconv.clear_plan_cache()
    run_threads(work)


# ---- GPU: every variant from 8 threads at once, different filters, one stream each ----

GPU_NAMES = [v.name for v in pyconv.variant_info() if v.on_device]
INFOS = {v.name: v for v in pyconv.variant_info()}


@requires_gpu
@pytest.mark.parametrize("name", GPU_NAMES)
def test_threads_on_a_gpu_variant_with_different_filters(name):
    """8 threads x one variant (LeNet C3's shape, or 3x3 filters for a variant of that shape only), each with its own filters
    and pyconv.Stream, CALLS calls each in flight at once. direct_const included: its __constant__
    filters must not be overwritten by another thread's upload while a kernel reads them."""
    info = INFOS[name]
    if not info.available:
        pytest.skip(f"{name} unavailable here: {info.reason}")
    family_skip(name)
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (4, 4, 40, 40)).astype(np.float32)
    xd = pyconv.DeviceArray.from_host(x)
    filters = [rng.uniform(-1, 1, (16, 4) + filter_hw(name, (7, 7))).astype(np.float32) for _ in range(THREADS)]
    refs = [conv2d_reference(x, w) for w in filters]
    precision = precision_of(info)
    pyconv.conv2d(xd, pyconv.DeviceArray.from_host(filters[0]), variant=name, precision=precision, sync=True)

    def work(index, barrier):
        stream = pyconv.Stream()
        wd = pyconv.DeviceArray.from_host(filters[index])
        barrier.wait()
        results = [pyconv.conv2d(xd, wd, variant=name, precision=precision, stream=stream) for _ in range(CALLS)]
        stream.synchronize()
        for call, y in enumerate(results):
            error = rel_l2(y.get(stream), refs[index])
            assert error <= info.max_rel_error, f"{name}: call {call} of thread {index}: error {error:.2e}"

    run_threads(work)


@requires_gpu
def test_threads_alternating_variants_on_one_device():
    """Every GPU variant at once: thread i runs variant i mod n, all with different filters."""
    names = [n for n in GPU_NAMES if INFOS[n].available and n not in OWN_FAMILY]
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (2, 4, 40, 40)).astype(np.float32)
    xd = pyconv.DeviceArray.from_host(x)
    count = max(THREADS, len(names))
    filters = [rng.uniform(-1, 1, (16, 4) + filter_hw(names[i % len(names)], (7, 7))).astype(np.float32)
               for i in range(count)]
    refs = [conv2d_reference(x, w) for w in filters]

    def work(index, barrier):
        info = INFOS[names[index % len(names)]]
        stream = pyconv.Stream()
        wd = pyconv.DeviceArray.from_host(filters[index])
        barrier.wait()
        results = [pyconv.conv2d(xd, wd, variant=info.name, precision=precision_of(info), stream=stream)
                   for _ in range(CALLS)]
        for y in results:
            assert rel_l2(y.get(stream), refs[index]) <= info.max_rel_error, info.name

    run_threads(work, count)


@requires_gpu
def test_threads_tuning_new_shapes_at_once():
    """auto on shapes no thread has seen: plans are made (and tuned) concurrently in one process."""
    rng = np.random.default_rng()
    shapes = [((1 + i, 3, 21 + i, 19), (6, 3, 3, 3)) for i in range(4)]
    data = [(rng.uniform(-1, 1, xs).astype(np.float32), rng.uniform(-1, 1, ws).astype(np.float32)) for xs, ws in shapes]
    pyconv.clear_plan_cache()

    def work(index, barrier):
        x, w = data[index % len(data)]
        xd, wd = pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w)
        barrier.wait()
        y = pyconv.conv2d(xd, wd, padding=1)
        assert rel_l2(y.get(), conv2d_reference(x, w, padding=(1, 1))) <= 1e-5

    run_threads(work)


@requires_torch_cuda
@pytest.mark.parametrize("name", ["direct_const", "auto"])
def test_threads_with_torch_streams(name):
    """PyTorch tensors from 8 threads, each under its own torch.cuda.stream (the current-stream rule)."""
    torch = optional_torch()
    if name != "auto" and not INFOS[name].available:
        pytest.skip(f"{name} unavailable here: {INFOS[name].reason}")
    g = torch.Generator(device="cpu").manual_seed(int(np.random.default_rng().integers(1 << 30)))
    x = torch.rand((4, 4, 40, 40), generator=g).cuda() * 2 - 1
    filters = [(torch.rand((16, 4, 7, 7), generator=g) * 2 - 1).cuda() for _ in range(THREADS)]
    refs = [conv2d_reference(x.double().cpu().numpy(), w.double().cpu().numpy()) for w in filters]
    pyconv.conv2d(x, filters[0], variant=name)
    torch.cuda.synchronize()

    def work(index, barrier):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.default_stream())
        barrier.wait()
        with torch.cuda.stream(stream):
            results = [pyconv.conv2d(x, filters[index], variant=name) for _ in range(CALLS)]
        stream.synchronize()
        for y in results:
            assert rel_l2(y.double().cpu().numpy(), refs[index]) <= 1e-5

    run_threads(work)
