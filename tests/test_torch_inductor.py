"""pyconv.torch under inductor (torch.compile's default backend): the ops pyconv::conv2d / conv1d lowered to a
direct call of their kernel (pyconv/torch/_lowering.py), checked in the generated code and against float64
references across layouts, bias, epilogues and conv1d; dynamic shapes (the dispatcher's call) and gradients.

Inductor compiles C++ for CPU graphs (a compiler on the machine, as the build needs) and Triton for CUDA ones.
Its caches are off here: a graph from an earlier run would not show this run's code."""
import copy
import os
import re
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

import torch.nn.functional as F  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402
from torch_support import assert_close, fresh_dynamo, gen, no_tf32, requires_cuda, uniform  # noqa: E402,F401 - fixtures

import pyconv  # noqa: E402
import pyconv.torch as pct  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


@pytest.fixture(autouse=True)
def fresh_inductor(fresh_dynamo):
    with torch._inductor.config.patch(force_disable_caches=True):
        yield


def compiled_code(fn, *args, **compile_options):
    """(fn(*args) compiled by inductor with fullgraph, the generated code of its graphs as one string)."""
    out, code = run_and_get_code(torch.compile(fn, fullgraph=True, **compile_options), *args)
    return out, "\n".join(code)


CASES = {  # name: (x shape, w shape, bias, keyword arguments of pct.conv2d, reference after F.conv2d)
    "plain": ((2, 3, 9, 8), (4, 3, 3, 3), False, dict(), None),
    "bias_stride_groups": ((2, 6, 11, 9), (9, 2, 3, 2), True, dict(stride=(2, 1), padding=(1, 2), groups=3), None),
    "relu": ((1, 4, 10, 10), (8, 4, 3, 3), True, dict(padding=2, dilation=2, epilogue="relu"), F.relu),
    "relu_maxpool": ((2, 3, 13, 12), (5, 3, 3, 3), True, dict(padding=1, epilogue=pyconv.ReluMaxPool(3, 2, True)),
                     lambda y: F.max_pool2d(F.relu(y), 3, 2, ceil_mode=True)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_inductor_calls_the_conv2d_kernel_directly(gen, device, channels_last, case):
    x_shape, w_shape, bias, kwargs, after = CASES[case]
    x, w = uniform(gen, *x_shape).to(device), uniform(gen, *w_shape).to(device)
    b = uniform(gen, w_shape[0]).to(device) if bias else None
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    fn = lambda x: torch.sigmoid(pct.conv2d(x * 2, w, b, **kwargs, fallback=False))  # noqa: E731 - fused around
    y, code = compiled_code(fn, x)
    assert "extern_kernels.pyconv_conv2d(" in code and "torch.ops.pyconv.conv2d.default(" not in code
    kw = {k: v for k, v in kwargs.items() if k != "epilogue"}
    ref = F.conv2d(x.double() * 2, w.double(), None if b is None else b.double(), **kw)
    ref = torch.sigmoid(ref if after is None else after(ref))
    assert y.shape == ref.shape and y.dtype == x.dtype
    assert_close(y.double(), ref, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_inductor_calls_the_conv1d_kernel_directly(gen, device):
    x, w, b = (uniform(gen, 2, 4, 21).to(device), uniform(gen, 6, 2, 5).to(device), uniform(gen, 6).to(device))
    fn = lambda x: pct.conv1d(x + 1, w, b, stride=2, padding=1, dilation=2, groups=2, fallback=False)  # noqa: E731
    y, code = compiled_code(fn, x)
    assert "extern_kernels.pyconv_conv1d(" in code and "torch.ops.pyconv.conv1d.default(" not in code
    assert_close(y.double(), F.conv1d(x.double() + 1, w.double(), b.double(), stride=2, padding=1, dilation=2,
                                      groups=2), 1e-5)


def test_dynamic_shapes_call_the_op_through_the_dispatcher(gen):
    """With symbolic sizes the lowering steps aside: the op's call, right for every size the graph runs."""
    w = uniform(gen, 5, 3, 3, 3)
    fn = torch.compile(lambda x: pct.conv2d(x, w, padding=1, fallback=False), fullgraph=True, dynamic=True)
    for shape in ((2, 3, 9, 8), (3, 3, 12, 7)):
        x = uniform(gen, *shape)
        y, code = run_and_get_code(fn, x)
        if code:  # the first call compiles; a size that fits its symbols runs without compiling again
            assert "torch.ops.pyconv.conv2d.default(" in "\n".join(code)
        assert_close(y.double(), F.conv2d(x.double(), w.double(), padding=1), 1e-5)


def test_gradients_through_the_lowered_op(gen):
    """Training under inductor: the forward graph calls the kernel directly, the backward is PyTorch's."""
    x, w, b = uniform(gen, 2, 3, 9, 8), uniform(gen, 4, 3, 3, 3), uniform(gen, 4)
    w.requires_grad_(), b.requires_grad_()
    fn = torch.compile(lambda x, w, b: pct.conv2d(x, w, b, padding=1, epilogue="relu", fallback=False).square().sum(),
                       fullgraph=True)
    (loss, code) = run_and_get_code(fn, x, w, b)
    assert "extern_kernels.pyconv_conv2d(" in "\n".join(code)
    loss.backward()
    w64, b64 = w.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ref = F.relu(F.conv2d(x.double(), w64, b64, padding=1)).square().sum()
    ref.backward()
    assert_close(loss.double(), ref, 1e-5)
    assert_close(w.grad.double(), w64.grad, 1e-5)
    assert_close(b.grad.double(), b64.grad, 1e-5)


def test_lowering_can_be_turned_off_for_a_process():
    """PYCONV_TORCH_LOWERING=0: graphs compiled in that process call the op through the dispatcher (the way back
    where a PyTorch version's inductor mishandles the lowering), with the same results."""
    code = """if True:
        import torch, torch.nn.functional as F
        import pyconv.torch as pct
        from torch._inductor.utils import run_and_get_code
        torch._inductor.config.force_disable_caches = True
        x, w = torch.rand(2, 3, 8, 8), torch.rand(4, 3, 3, 3)
        y, code = run_and_get_code(torch.compile(lambda x: pct.conv2d(x, w, fallback=False), fullgraph=True), x)
        assert "torch.ops.pyconv.conv2d.default(" in code[0] and "extern_kernels.pyconv_conv2d(" not in code[0]
        assert float((y - F.conv2d(x, w)).abs().max()) <= 1e-5 * float(F.conv2d(x, w).abs().max())
    """
    env = {**os.environ, "PYCONV_TORCH_LOWERING": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_compiled_op_bench_runs():
    """bench/torch_compiled_op.py (the figures of the lowering) runs and prints its three columns."""
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "torch_compiled_op.py")
    result = subprocess.run([sys.executable, script, "--device", "cpu", "--convs", "2", "--calls", "3"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    row = result.stdout.strip().splitlines()[-1]
    assert row.startswith("| ") and all(float(cell) > 0 for cell in row.strip("| ").split(" | "))


def test_a_lowering_that_cannot_be_registered_says_so(monkeypatch):
    """Inductor's lowering API is internal: where a PyTorch version has moved it, the first trace warns in words
    and the ops stay callable through the dispatcher."""
    from pyconv.torch import _lowering

    def moved(**_):
        raise AttributeError("module 'torch._inductor.lowering' has no attribute 'register_lowering'")
    monkeypatch.setitem(_lowering._state, "tried", False)
    monkeypatch.setattr(_lowering, "_register", moved)
    with pytest.warns(RuntimeWarning, match="through PyTorch's dispatcher .*AttributeError: module"):
        _lowering.ensure_registered()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _lowering.ensure_registered()  # once a process: no second warning


@pytest.mark.parametrize("device", DEVICES)
def test_lowered_calls_repeat_right_on_views_and_changed_inputs(gen, device):
    """The generated code's later calls of a site skip the engine's lookup: they must still read each call's
    operands (new values each time) and take strided views the engine copies (a step-2 slice of the channels)."""
    w, b = uniform(gen, 4, 3, 3, 3).to(device), uniform(gen, 4).to(device)
    inputs = {"dense": lambda x: x[:, :3] + 0.5, "view": lambda x: x[:, ::2]}
    for label, take in inputs.items():
        torch._dynamo.reset()
        run = torch.compile(lambda x: pct.conv2d(take(x), w, b, padding=1, fallback=False), fullgraph=True)
        for _ in range(3):
            x = uniform(gen, 2, 6, 9, 8).to(device)
            ref = F.conv2d(take(x.double()), w.double(), b.double(), padding=1)
            assert_close(run(x).double(), ref, 1e-5)


def test_cpp_wrapper_calls_the_op_through_the_dispatcher(gen):
    """Inductor's C++ wrapper (as AOTInductor's) cannot call a Python extern kernel: the lowering steps aside for
    it, and the compiled graph calls the op (it failed to compile with the lowering)."""
    x, w = uniform(gen, 2, 3, 8, 8), uniform(gen, 4, 3, 3, 3)
    with torch._inductor.config.patch(cpp_wrapper=True):
        y = torch.compile(lambda x: torch.relu(pct.conv2d(x, w, padding=1, fallback=False)) + 1, fullgraph=True)(x)
    assert_close(y.double(), torch.relu(F.conv2d(x.double(), w.double(), padding=1)) + 1, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_lowered_conv_keeps_the_traced_layout_in_channels_last_graphs(gen, device):
    """Where inductor runs a graph's aten convs channels-last (its layout optimisation, forced here), our conv2d
    between two of them still reads and writes the layout it was traced with (NCHW here): its plan is the one the
    engine decided for those operands. Right against float64."""
    nn = torch.nn
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 12, (3, 2), padding=(1, 0)),
                          nn.ReLU(), nn.Conv2d(12, 5, 1)).eval().to(device)
    reference = copy.deepcopy(model).double()
    pct.Conv2d.adopt(model[2], engine="pyconv", fallback=False)
    x = uniform(gen, 2, 3, 11, 9).to(device)
    with torch.no_grad(), torch._inductor.config.patch(force_layout_optimization=True):
        y, code = compiled_code(model, x)
    call = next(line for line in code.splitlines() if "extern_kernels.pyconv_conv2d(" in line)
    out = call.rsplit("out=", 1)[1].rstrip(")").strip()  # the buffer inductor allocated for it
    assert re.search(rf"\b{out} = empty_strided_\w+\(\(2, 12, 11, 8\), \(1056, 88, 8, 1\)", code)
    assert "(2, 8, 11, 9), (792, 1, 72, 8)" in code  # the first conv's output: NHWC
    assert_close(y.double(), reference(x.double()), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_site_writes_into_the_buffer_inductor_allocated(gen, device):
    """The generated code passes the conv's output buffer (inductor allocates or reuses it): from its second call a
    site's plan writes into it in place; a buffer whose strides place values elsewhere than the plan's y (the
    plan writes NCHW, the buffer is channels-last) makes the site copy into it, right at every call."""
    from pyconv.torch import _engine, _lowering
    pct.clear()  # (other tests' sites)
    w, b = uniform(gen, 6, 3, 3, 3).to(device), uniform(gen, 6).to(device)
    run = torch.compile(lambda x: torch.relu(pct.conv2d(x * 2, w, b, padding=1, fallback=False)), fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            x = uniform(gen, 2, 3, 9, 7).to(device)
            ref = torch.relu(F.conv2d(x.double() * 2, w.double(), b.double(), padding=1))
            assert_close(run(x).double(), ref, 1e-5)
    (hit,) = _engine.sites.values()
    assert hit is not _lowering._FULL_PATH and hit[0] is not None  # our plan, in place
    x = uniform(gen, 2, 3, 9, 7).to(device)
    args = ([1, 1], [1, 1], [1, 1], 1, [0] * 6, "auto", "default", "pyconv", False)
    from torch._inductor.select_algorithm import extern_kernels
    kernel = extern_kernels.pyconv_conv2d
    ref = F.conv2d(x.double(), w.double(), b.double(), padding=1)
    for memory_format in (torch.contiguous_format, torch.channels_last):
        out = torch.full((2, 6, 9, 7), float("nan"), device=device).contiguous(memory_format=memory_format)
        site = f"test site {memory_format}"
        for _ in range(2):  # the site's first call, then its remembered path
            out.fill_(float("nan"))
            assert kernel(x, w, b, args=args, site=site, out=out) is out
            assert_close(out.double(), ref, 1e-5)
        in_place = memory_format is torch.contiguous_format
        assert (_engine.sites[site] is not _lowering._FULL_PATH) == in_place


def test_compiled_sites_decide_again_after_clear(gen, monkeypatch):
    """A compiled graph's call of the op remembers its plan per call site; pyconv.torch.clear() forgets it with
    the engine's decisions, so the next call decides again: here (the op called with engine "fastest") PyTorch's
    conv, which the site then calls directly, right at every call."""
    from pyconv.torch import _engine
    w, b = uniform(gen, 6, 3, 3, 3), uniform(gen, 6)
    op_arguments = ([1, 1], [1, 1], [1, 1], 1, [0] * 6, "auto", "default", "fastest", True)
    run = torch.compile(lambda x: torch.ops.pyconv.conv2d(torch.relu(x), w, b, *op_arguments), fullgraph=True)
    monkeypatch.setattr(_engine, "capturing", lambda: False)  # (host tensors: no capture to ask CUDA about)
    monkeypatch.setattr(_engine, "_graph_ms", lambda ours, theirs, device: None)
    with torch.no_grad():
        for timings, ours in (((0.01, 0.02, None, None), True), ((0.02, 0.01, None, None), False)):
            pct.clear()
            assert not _engine.sites
            monkeypatch.setattr(_engine, "_measure", lambda ours, theirs, device, timings=timings: timings)
            for _ in range(3):
                x = uniform(gen, 2, 3, 9, 7)
                assert_close(run(x).double(), F.conv2d(torch.relu(x.double()), w.double(), b.double(), padding=1),
                             1e-5)
            assert [hit[0] is not None for hit in _engine.sites.values()] == [ours]  # our plan / PyTorch's conv


@requires_cuda
def test_reduce_overhead_mode_replays_our_op(gen):
    """torch.compile(mode="reduce-overhead") records the compiled graph, the lowered call of our op included, in a
    CUDA graph (cudagraph trees) and replays it: right at every call, each with a new input."""
    nn = torch.nn
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 6, 3, padding=1)).eval().cuda()
    reference = copy.deepcopy(model).double()
    pct.Conv2d.adopt(model[2], engine="pyconv", fallback=False)
    run = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for _ in range(5):  # warm-up calls, the recording, then replays
            x = uniform(gen, 2, 3, 9, 7).cuda()
            assert_close(run(x).double(), reference(x.double()), 1e-5)
