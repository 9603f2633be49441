"""pyconv.torch: the ops pyconv::conv2d / conv1d (torch.library.opcheck: schema, fake, autograd
registration, AOT dispatch), the functional calls and Conv2d / Conv1d against torch.nn across stride,
padding (modes included), dilation, groups, bias, memory formats and epilogues, forward and backward;
refusals (warning once + counter, or an error with fallback=False), torch.compile(fullgraph=True),
PyTorch's current stream, CUDA-graph capture, engine "fastest" and convert's fusion.

CPU tensors run on the cpu variant everywhere PyTorch is installed; CUDA cases skip with the reason
where there is no GPU. fp32 on CUDA runs with TF32 off on both sides."""
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

import torch.nn.functional as F  # noqa: E402
from torch_support import capture, no_tf32, requires_cuda  # noqa: E402,F401 - no_tf32 applies to every test here

import pyconv  # noqa: E402
import pyconv.torch as pct  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
NONE = [0, 0, 0, 0, 0, 0]


@pytest.fixture
def gen(rng):
    """A torch generator seeded from the test's fresh seed (printed on failure)."""
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def rand(gen, *shape, device="cpu", dtype=torch.float32):
    return torch.rand(*shape, generator=gen).mul_(2).sub_(1).to(device=device, dtype=dtype)


def max_rel(a, b) -> float:
    """max |a - b| / max |b|, in float64."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


# ---- opcheck ----

OPCHECK_CASES = {  # name: (x shape, w shape, bias, stride, padding, dilation, groups, epilogue)
    "plain": ((2, 3, 9, 8), (4, 3, 3, 3), False, [1, 1], [0, 0], [1, 1], 1, NONE),
    "bias_stride_pad": ((2, 4, 11, 9), (6, 4, 3, 2), True, [2, 1], [1, 2], [1, 1], 1, NONE),
    "groups_dilation_relu": ((1, 6, 10, 10), (6, 2, 3, 3), True, [1, 1], [2, 2], [2, 2], 3, [1, 0, 0, 0, 0, 0]),
    "relu_maxpool_ceil": ((2, 3, 13, 12), (5, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1, [2, 3, 3, 2, 2, 1]),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(OPCHECK_CASES))
@pytest.mark.parametrize("channels_last", [False, True])
def test_opcheck_conv2d(gen, device, case, channels_last):
    x_shape, w_shape, bias, stride, padding, dilation, groups, epilogue = OPCHECK_CASES[case]
    x, w = rand(gen, *x_shape, device=device), rand(gen, *w_shape, device=device)
    if channels_last:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    b = rand(gen, w_shape[0], device=device) if bias else None
    x.requires_grad_(), w.requires_grad_()
    torch.library.opcheck(torch.ops.pyconv.conv2d.default,
                          (x, w, b, stride, padding, dilation, groups, epilogue, "auto", "default", "pyconv", True))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_conv1d(gen, device):
    x, w, b = rand(gen, 2, 4, 21, device=device), rand(gen, 6, 2, 5, device=device), rand(gen, 6, device=device)
    x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
    torch.library.opcheck(torch.ops.pyconv.conv1d.default,
                          (x, w, b, 2, 1, 2, 2, [2, 1, 2, 1, 2, 0], "auto", "default", "pyconv", True))


@pytest.mark.parametrize("op", ["pyconv::conv2d", "pyconv::conv1d"])
def test_ops_reach_their_kernels_without_custom_ops_wrapper(op):
    """CPU and CUDA tensors reach the kernel through its own registration (custom_op's, for other devices, checks
    each result for aliasing: 27 us a call on the H200 host, paid at every layer of a compiled model); the
    opchecks above run through it."""
    for key in ("CPU", "CUDA"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, key), (op, key)
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeExplicitAutograd")


# ---- functional and modules against torch.nn ----

def _check_forward_backward(ours, theirs, inputs, bound=1e-5):
    """Same outputs and same gradients for every input that requires grad."""
    y_ours, y_theirs = ours(*inputs), theirs(*inputs)
    assert y_ours.shape == y_theirs.shape and y_ours.dtype == y_theirs.dtype
    assert max_rel(y_ours, y_theirs) <= bound
    grad = torch.randn_like(y_theirs)
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    g_ours = torch.autograd.grad(y_ours, leaves, grad)
    g_theirs = torch.autograd.grad(y_theirs, leaves, grad)
    for a, b in zip(g_ours, g_theirs):
        assert max_rel(a, b) <= bound
    return y_ours


CONV2D_CASES = {  # name: (x shape, nn.Conv2d arguments)
    "plain": ((2, 3, 12, 11), dict(in_channels=3, out_channels=5, kernel_size=3)),
    "stride_pad_rect": ((2, 4, 15, 13), dict(in_channels=4, out_channels=6, kernel_size=(3, 5), stride=(2, 1),
                                             padding=(1, 2))),
    "dilation_nobias": ((1, 3, 17, 16), dict(in_channels=3, out_channels=4, kernel_size=3, dilation=2, bias=False)),
    "groups": ((2, 6, 9, 9), dict(in_channels=6, out_channels=9, kernel_size=3, groups=3, padding=1)),
    "depthwise": ((2, 8, 10, 10), dict(in_channels=8, out_channels=8, kernel_size=3, groups=8, padding=1)),
    "same_even": ((2, 3, 10, 9), dict(in_channels=3, out_channels=4, kernel_size=(4, 2), padding="same")),
    "reflect": ((2, 3, 9, 10), dict(in_channels=3, out_channels=5, kernel_size=3, padding=1,
                                     padding_mode="reflect")),
    "replicate": ((1, 2, 8, 8), dict(in_channels=2, out_channels=3, kernel_size=3, padding=2, stride=2,
                                     padding_mode="replicate")),
    "circular": ((2, 3, 7, 9), dict(in_channels=3, out_channels=4, kernel_size=(3, 5), padding=(1, 2),
                                    padding_mode="circular")),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CONV2D_CASES))
def test_conv2d_module_matches_nn(gen, device, case):
    x_shape, kwargs = CONV2D_CASES[case]
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    theirs = torch.nn.Conv2d(**kwargs).to(device)
    ours = pct.Conv2d(**kwargs, fallback=False).to(device)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    x = rand(gen, *x_shape, device=device).requires_grad_()
    _check_forward_backward(lambda t: ours(t), lambda t: theirs(t), (x,))
    wgrad_ours = torch.autograd.grad(ours(x).square().sum(), ours.weight)[0]
    wgrad_theirs = torch.autograd.grad(theirs(x).square().sum(), theirs.weight)[0]
    assert max_rel(wgrad_ours, wgrad_theirs) <= 1e-5
    assert all(d["engine"] == "pyconv" for d in ours.decisions()) and ours.decisions()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("epilogue", ["relu", "pool", "pool_ceil"])
def test_conv2d_epilogues_forward_backward(gen, device, epilogue):
    x = rand(gen, 2, 3, 14, 13, device=device).requires_grad_()
    w = rand(gen, 5, 3, 3, 3, device=device).requires_grad_()
    b = rand(gen, 5, device=device).requires_grad_()
    pool = {"relu": None, "pool": pyconv.ReluMaxPool(2),
            "pool_ceil": pyconv.ReluMaxPool(3, 2, ceil_mode=True)}[epilogue]

    def theirs(x, w, b):
        y = F.relu(F.conv2d(x, w, b, padding=1))
        return y if pool is None else F.max_pool2d(y, pool.kernel, pool.stride, ceil_mode=pool.ceil_mode)

    ours = lambda x, w, b: pct.conv2d(x, w, b, padding=1, epilogue=pool or "relu", fallback=False)  # noqa: E731
    _check_forward_backward(ours, theirs, (x, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_channels_last_and_parameters(gen, device):
    layer = torch.nn.Conv2d(4, 6, 3, padding=1).to(device).to(memory_format=torch.channels_last)
    x = rand(gen, 2, 4, 9, 10, device=device).to(memory_format=torch.channels_last)
    with torch.no_grad():
        y = pct.conv2d(x, layer.weight, layer.bias, padding=1, fallback=False)  # nn.Parameter operands
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert max_rel(y, layer(x)) <= 1e-5
    assert pct.decisions()[-1]["layout"] == "NHWC"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("x_shape, w_shape", [((2, 3, 9, 9), (1, 3, 3, 3)),     # one map: y in both layouts
                                              ((2, 3, 3, 3), (4, 3, 3, 3)),     # a 1x1 result plane
                                              ((2, 1, 9, 9), (4, 1, 3, 3))])    # one channel: x in both layouts
def test_layouts_that_coincide(gen, device, x_shape, w_shape):
    """Channels-last tensors whose memory is also NCHW (C = 1, M = 1, 1x1 planes) run on our kernels,
    right, in the memory format PyTorch's conv gives."""
    x = rand(gen, *x_shape, device=device).to(memory_format=torch.channels_last)
    w = rand(gen, *w_shape, device=device)
    y = pct.conv2d(x, w, fallback=False)
    expected = F.conv2d(x, w)
    assert max_rel(y, expected) <= 1e-5 and y.shape == expected.shape
    assert pct.decisions()[-1]["engine"] == "pyconv"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kwargs", [dict(kernel_size=5, stride=2, padding=2), dict(kernel_size=4, padding="same"),
                                    dict(kernel_size=3, dilation=2, groups=2, padding=1, padding_mode="reflect")])
def test_conv1d_module_matches_nn(gen, device, kwargs):
    theirs = torch.nn.Conv1d(4, 6, **kwargs).to(device)
    ours = pct.Conv1d(4, 6, **kwargs, fallback=False).to(device)
    ours.load_state_dict(theirs.state_dict())
    x = rand(gen, 3, 4, 23, device=device).requires_grad_()
    _check_forward_backward(lambda t: ours(t), lambda t: theirs(t), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_conv1d_functional_pool(gen, device):
    x, w, b = rand(gen, 2, 3, 30, device=device), rand(gen, 4, 3, 3, device=device), rand(gen, 4, device=device)
    y = pct.conv1d(x, w, b, padding=1, epilogue=pyconv.ReluMaxPool(3, ceil_mode=True), fallback=False)
    ref = F.max_pool1d(F.relu(F.conv1d(x, w, b, padding=1)), 3, ceil_mode=True)
    assert y.shape == ref.shape and max_rel(y, ref) <= 1e-5


# ---- refusals ----

def test_refused_dtype_falls_back_once_and_counts(gen):
    pct.reset_fallback_counts()
    x, w = rand(gen, 1, 2, 6, 6, dtype=torch.float64), rand(gen, 3, 2, 3, 3, dtype=torch.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            y = pct.conv2d(x, w)
    assert [type(c.message) for c in caught] == [pct.FallbackWarning], "one warning per reason"
    assert "float64" in str(caught[0].message)
    assert sum(pct.fallback_counts().values()) == 3
    assert torch.equal(y, F.conv2d(x, w))
    with pytest.raises(pyconv.ConvUnsupportedError, match="float64"):
        pct.conv2d(x, w, fallback=False)


def test_changed_attributes_take_effect(gen):
    layer = pct.Conv2d(3, 4, 3, fallback=False)
    x = rand(gen, 1, 3, 8, 8)
    with torch.no_grad():
        plain = layer(x)
        layer.epilogue, layer.padding = "relu", (1, 1)
        assert torch.equal(layer(x)[:, :, 1:-1, 1:-1], plain.relu())


def test_wrong_bias_shape_is_pytorchs_error(gen):
    with pytest.warns(pct.FallbackWarning, match="bias"), pytest.raises(RuntimeError):
        pct.conv2d(rand(gen, 1, 3, 6, 6), rand(gen, 4, 3, 3, 3), rand(gen, 3))


def test_bad_options_raise_with_the_argument():
    with pytest.raises(pyconv.ConvError, match="engine"):
        pct.Conv2d(2, 3, 3, engine="cudnn")
    with pytest.raises(pyconv.ConvError, match="precision"):
        pct.Conv2d(2, 3, 3, precision="fp16")
    with pytest.raises(pyconv.ConvError, match="epilogue"):
        pct.Conv2d(2, 3, 3, epilogue="gelu")
    with pytest.raises(pyconv.ConvError, match="variant"):
        pct.conv2d(torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3), variant="no_such_variant")


def test_mismatched_operands_raise_pytorchs_error(gen):
    with pytest.warns(pct.FallbackWarning), pytest.raises(RuntimeError):
        pct.conv2d(rand(gen, 1, 3, 6, 6), rand(gen, 4, 2, 3, 3))  # channel mismatch: PyTorch's own message


# ---- engine "fastest", convert, compile ----

def test_conv2d_remembers_inputs_decided_for_pytorchs_conv(gen):
    """A Conv2d sends an input the engine decided for PyTorch's conv straight there on later calls (the
    engine's lookup cost more than the conv at batch 1); changed attributes and pct.clear() forget it."""
    layer = pct.Conv2d(3, 4, 3, padding=1, engine="torch")
    x = rand(gen, 2, 3, 8, 8)
    with torch.no_grad():
        first, second = layer(x), layer(x)
        pick = layer.__dict__["_pyconv_decided"][1][(x.shape, x.dtype, x.get_device())]
        assert pick.entry is None and pick.memory_format == torch.contiguous_format and not pick.captured
        assert max_rel(second, F.conv2d(x, layer.weight, layer.bias, padding=1)) <= 1e-6
        assert torch.equal(first, second)
        layer.stride = 2
        assert "_pyconv_decided" not in layer.__dict__
        assert max_rel(layer(x), F.conv2d(x, layer.weight, layer.bias, stride=2, padding=1)) <= 1e-6
        pct.clear()
        layer(x)
        assert layer.__dict__["_pyconv_decided"][0] == pyconv.torch._engine.generation


def _reference(layer, x):
    return F.conv2d(x, layer.weight, layer.bias, layer.stride, layer.padding, layer.dilation, layer.groups)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_runs_its_remembered_plan_without_the_lookup(gen, device, monkeypatch):
    """A Conv2d whose input the engine decided for our plan runs that plan on later eager calls without the
    engine's lookup (its key), and with the same result."""
    from pyconv.torch import _engine
    layer = pct.Conv2d(3, 4, 3, padding=1, engine="pyconv").to(device)
    x = rand(gen, 2, 3, 8, 7, device=device)
    keys = []
    key = _engine._key
    monkeypatch.setattr(_engine, "_key", lambda *a: keys.append(1) or key(*a))
    with torch.no_grad():
        first = layer(x)
        pick = layer.__dict__["_pyconv_decided"][1][(x.shape, x.dtype, x.get_device())]
        assert pick.entry is not None and pick.entry.handle is not None and not pick.captured
        keys.clear()
        second = layer(rand(gen, 2, 3, 8, 7, device=device).copy_(x))
        assert keys == [] and max_rel(second, _reference(layer, x)) <= 1e-5
        assert torch.equal(first, second)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_output_allocation_takes_the_fast_function_or_falls_back_for_good(gen, device, channels_last, monkeypatch):
    """y comes from PyTorch's internal allocation function (size, strides, dtype) where this PyTorch has it, with
    F.conv2d's strides; one that takes other arguments (a TypeError) is dropped for x.new_empty, the call and
    every later one still right."""
    from pyconv.torch import _engine
    name = "_fast_empty_cuda" if device == "cuda" else "_fast_empty_cpu"
    fast = getattr(_engine, name)
    if fast is None:
        pytest.skip(f"this PyTorch ({torch.__version__}) has no {name[6:]}: x.new_empty throughout")
    for kept in ("_fast_empty_cpu", "_fast_empty_cuda"):  # both restored after the test (the fallback drops both)
        monkeypatch.setattr(_engine, kept, getattr(_engine, kept))
    calls = []
    monkeypatch.setattr(_engine, name, lambda *a: calls.append(a) or fast(*a))
    x = rand(gen, 2, 3, 9, 7, device=device)
    w = rand(gen, 5, 3, 3, 3, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    ref = F.conv2d(x, w, padding=1)
    y = pct.conv2d(x, w, padding=1, engine="pyconv")
    assert calls and y.stride() == ref.stride() and max_rel(y, ref) <= 1e-5

    def other_signature(*a):
        raise TypeError("takes 4 arguments")
    monkeypatch.setattr(_engine, name, other_signature)
    for _ in range(2):
        y = pct.conv2d(x, w, padding=1, engine="pyconv")
        assert y.stride() == ref.stride() and max_rel(y, ref) <= 1e-5
    assert _engine._fast_empty_cpu is None and _engine._fast_empty_cuda is None


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_remembered_plan_steps_aside_for_what_it_was_not_made_for(gen, device):
    """What can change between calls of one input shape takes the full path and gives nn.Conv2d's result:
    x or w in another memory format, a weight of another dtype or shape, the bias removed, autograd
    recording, autocast."""
    layer = pct.Conv2d(4, 6, 3, padding=1, engine="pyconv").to(device)
    x = rand(gen, 2, 4, 9, 8, device=device)
    cl = torch.channels_last
    with torch.no_grad():
        layer(x)  # remembered: NCHW x, MCKK w, a bias
        assert max_rel(layer(x.to(memory_format=cl)), _reference(layer, x)) <= 1e-5
        y = layer(x.to(memory_format=cl))
        assert y.is_contiguous(memory_format=cl)
        layer.weight.data = layer.weight.data.to(memory_format=cl)
        assert max_rel(layer(x), _reference(layer, x)) <= 1e-5
        layer.weight.data = rand(gen, 6, 4, 3, 3, device=device)  # new values, same shape: read at each call
        assert max_rel(layer(x), _reference(layer, x)) <= 1e-5
        layer.bias = None
        assert max_rel(layer(x), _reference(layer, x)) <= 1e-5
        layer.weight.data = rand(gen, 8, 4, 3, 3, device=device)  # 8 output maps: another plan
        assert layer(x).shape[1] == 8 and max_rel(layer(x), _reference(layer, x)) <= 1e-5
    y = layer(x)  # grad enabled, weight requires grad: recorded
    assert y.grad_fn is not None
    y.sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
        y = layer(x)
        assert y.dtype == torch.bfloat16 == torch.nn.functional.conv2d(x, layer.weight).dtype


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "after_eager_calls"])
def test_jit_trace_and_export_record_the_op(gen, warm):
    """torch.jit.trace of a Conv2d and of pct.conv2d records pyconv::conv2d (not an empty tensor written by
    pointer, nor PyTorch's conv after a refusal), fresh or after eager calls the layer remembered; the traced
    module computes on new inputs, and torch.export.export works after the trace."""
    layer = pct.Conv2d(3, 8, 3, padding=1, engine="pyconv", fallback=False)
    x, new = rand(gen, 2, 3, 16, 16), rand(gen, 2, 3, 16, 16)
    with torch.no_grad():
        if warm:
            layer(x), layer(x)
        traced = torch.jit.trace(layer, x)
        w, b = layer.weight.detach(), layer.bias.detach()
        functional = torch.jit.trace(lambda t: pct.conv2d(t, w, b, padding=1), x)
        for t in (traced, functional):
            assert [n.kind() for n in t.graph.nodes()].count("pyconv::conv2d") == 1
            assert max_rel(t(new), _reference(layer, new)) <= 1e-5
    exported = torch.export.export(layer, (x,))
    assert "pyconv.conv2d" in str(exported.graph)
    with torch.no_grad():
        assert max_rel(exported.module()(new), _reference(layer, new)) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("engine", ["pyconv", "torch"])
def test_conv1d_remembers_its_decisions_too(gen, device, engine, monkeypatch):
    """Conv1d keeps Conv2d's memo: later eager calls skip the engine's lookup (PyTorch's conv through
    F.conv1d, or our plan on (B, C, 1, L) views), with F.conv1d's result; a channels-last input, a removed
    bias or a weight of more output channels take the full path."""
    from pyconv.torch import _engine
    layer = pct.Conv1d(4, 6, 3, padding=1, engine=engine).to(device)
    x = rand(gen, 2, 4, 37, device=device)
    grouped = pct.Conv1d(6, 4, 7, padding="same", dilation=2, groups=2, engine=engine).to(device)
    xg = rand(gen, 2, 6, 16, device=device)
    with torch.no_grad():  # the remembered calls give the first call's values to the bit
        assert all(torch.equal(grouped(xg), grouped(xg)) for _ in range(3))
    keys = []
    key = _engine._key
    monkeypatch.setattr(_engine, "_key", lambda *a: keys.append(1) or key(*a))

    def reference(t):
        return F.conv1d(t, layer.weight, layer.bias, 1, 1)

    with torch.no_grad():
        first = layer(x)
        pick = layer.__dict__["_pyconv_decided"][1][(x.shape, x.dtype, x.get_device())]
        assert (pick.entry is None) == (engine == "torch")
        keys.clear()
        assert torch.equal(layer(x), first) and keys == [] and max_rel(first, reference(x)) <= 1e-5
        channels_last = x.transpose(1, 2).contiguous().transpose(1, 2)
        assert max_rel(layer(channels_last), reference(x)) <= 1e-5
        layer.bias = None
        assert max_rel(layer(x), reference(x)) <= 1e-5
        layer.weight.data = rand(gen, 9, 4, 3, device=device)
        assert layer(x).shape == (2, 9, 37) and max_rel(layer(x), reference(x)) <= 1e-5


@requires_cuda
def test_conv2d_remembered_plan_follows_the_tf32_flag(gen):
    """fp32 at precision None is exact or TF32 by PyTorch's cuDNN flag at each call: a plan remembered with
    the flag off is not run once it is on (the call plans TF32), and runs again when it is off."""
    pct.clear()  # (decisions of other tests' layers of this shape)
    layer = pct.Conv2d(8, 16, 3, padding=1, engine="pyconv").cuda()
    x = rand(gen, 2, 8, 12, 12, device="cuda")
    with torch.no_grad():
        exact = layer(x)
        assert [d["precision"] for d in layer.decisions()] == ["exact"]
        torch.backends.cudnn.allow_tf32 = True
        layer(x)
        assert sorted(d["precision"] for d in layer.decisions()) == ["exact", "tf32"]
        torch.backends.cudnn.allow_tf32 = False
        assert max_rel(layer(x), exact) <= 1e-6 and max_rel(exact, _reference(layer, x)) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_operands_keep_fp32_sums(gen, device, dtype):
    """fp16 / bf16 tensors at precision None plan at "half", as cuDNN computes them: fp32 sums, never the fp16
    variant's fp16 partial sums ("fast", which the tuner chose for some fp16 layers of mobilenet_v2 on the H200,
    its 3-channel 3x3 stride-2 stem among them: the kind of layer here)."""
    pct.clear()
    x = rand(gen, 1, 3, 30, 30, device=device).to(dtype)
    w = rand(gen, 32, 3, 3, 3, device=device).to(dtype)
    with torch.no_grad():
        y = pct.conv2d(x, w, stride=2, padding=1, fallback=False)
    (decision,) = pct.decisions()
    assert decision["precision"] == "half" and decision["variant"] != "fp16"
    reference = F.conv2d(x.double(), w.double(), stride=2, padding=1)
    assert y.dtype == dtype and max_rel(y, reference) <= (1e-2 if dtype == torch.bfloat16 else 2e-3)


def test_engine_fastest_records_its_choice(gen):
    x, w = rand(gen, 2, 3, 12, 12), rand(gen, 4, 3, 3, 3)
    y = pct.conv2d(x, w, padding=1, engine="fastest")
    assert max_rel(y, F.conv2d(x, w, padding=1)) <= 1e-5
    record = [d for d in pct.decisions() if d["input"] == (2, 3, 12, 12) and d["pyconv_host_ms"] is not None][-1]
    assert record["engine"] in ("pyconv", "torch") and record["torch_host_ms"] > 0 and "faster" in record["why"]


@pytest.mark.parametrize("times, graphed, eager, captured", [
    # ours faster on the GPU, slower on the host of a GPU-light layer (no graph timing: the host's tensors)
    ((0.020, 0.010, 0.008, 0.009), None, "torch", "pyconv"),
    # ours faster in eager calls, PyTorch's faster replayed from a graph
    ((0.010, 0.020, 0.004, 0.009), (0.009, 0.004), "pyconv", "torch"),
])
def test_fastest_decides_eager_calls_and_graph_capture_apart(gen, monkeypatch, times, graphed, eager, captured):
    """Engine "fastest" decides eager calls and CUDA-graph capture apart (times: ours host, PyTorch host, ours GPU,
    PyTorch GPU ms; graphed: ours, PyTorch's replayed from a graph, which captures follow where measured); where
    they disagree each mode runs its own, in the op and through a Conv2d's memo."""
    from pyconv.torch import _engine
    monkeypatch.setattr(_engine, "_measure", lambda ours, theirs, device: times)
    monkeypatch.setattr(_engine, "_graph_ms", lambda ours, theirs, device: graphed)
    launches = []
    run = _engine._run
    monkeypatch.setattr(_engine, "_run", lambda *a: launches.append(1) or run(*a))
    monkeypatch.setattr(_engine, "capturing", lambda: False)  # (host tensors: no capture to ask CUDA about)
    pct.clear()  # decided anew, with the times above
    layer = pct.Conv2d(3, 5, 3, padding=1, engine="fastest")
    x = rand(gen, 2, 3, 9, 7)
    expected = F.conv2d(x, layer.weight, layer.bias, padding=1)
    verdict = {"pyconv": "pyconv faster", "torch": "PyTorch faster"}
    with torch.no_grad():
        assert max_rel(layer(x), expected) <= 1e-5
        record = layer.decisions()[-1]
        assert (record["engine"], record["engine_captured"]) == (eager, captured)
        assert record["why"] == f"eager: {verdict[eager]}; graphs: {verdict[captured]}"
        assert (record["pyconv_host_ms"], record["torch_gpu_ms"]) == (times[0], times[3])
        assert (record["pyconv_graph_ms"], record["torch_graph_ms"]) == (graphed or (None, None))
        for capturing in (False, True, False):
            monkeypatch.setattr(_engine, "capturing", lambda: capturing)
            launches.clear()
            for call in (lambda: layer(x), lambda: pct.conv2d(x, layer.weight, layer.bias, padding=1,
                                                              engine="fastest")):
                assert max_rel(call(), expected) <= 1e-5
            ours = captured if capturing else eager
            assert len(launches) == (2 if ours == "pyconv" else 0), (capturing, launches)


@requires_cuda
def test_fastest_decides_graph_capture_by_graph_replays(gen, monkeypatch):
    """On the GPU engine "fastest" also times each side replayed from a CUDA graph of calls, and capture follows
    those times, not the back-to-back GPU times (whose launch gaps hide a short kernel's cost); the timing
    captures leave eager calls and a later capture of the layer working."""
    from pyconv.torch import _engine
    x, w, b = rand(gen, 1, 16, 14, 14, device="cuda"), rand(gen, 32, 16, 3, 3, device="cuda"), \
        rand(gen, 32, device="cuda")
    expected = F.conv2d(x, w, b, padding=1)
    pct.clear()
    with torch.no_grad():
        assert max_rel(pct.conv2d(x, w, b, padding=1, engine="fastest"), expected) <= 1e-5
    record = [d for d in pct.decisions() if d["input"] == (1, 16, 14, 14)][-1]
    assert record["pyconv_graph_ms"] > 0 and record["torch_graph_ms"] > 0, record
    faster = "pyconv" if record["pyconv_graph_ms"] <= record["torch_graph_ms"] else "torch"
    assert record["engine_captured"] == faster
    graph_ms = _engine._graph_ms
    for graphed, captured in (((0.009, 0.004), "torch"), ((0.004, 0.009), "pyconv")):
        gpu = (0.004, 0.009) if captured == "torch" else (0.009, 0.004)  # the back-to-back times say the opposite
        monkeypatch.setattr(_engine, "_measure", lambda ours, theirs, device: (0.010, 0.020) + gpu)
        monkeypatch.setattr(_engine, "_graph_ms", lambda ours, theirs, device: graph_ms(ours, theirs, device)
                            and graphed)
        pct.clear()
        layer = pct.Conv2d(16, 32, 3, padding=1, engine="fastest").cuda()
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
            assert max_rel(layer(x), expected) <= 1e-5
            record = layer.decisions()[-1]
            assert (record["engine_captured"], record["pyconv_graph_ms"]) == (captured, graphed[0]), record
            graph, y = capture(lambda: layer(x))
            x2 = rand(gen, 1, 16, 14, 14, device="cuda")
            x.copy_(x2)
            graph.replay()
            assert max_rel(y, F.conv2d(x2, w, b, padding=1)) <= 1e-5
        x.copy_(rand(gen, 1, 16, 14, 14, device="cuda"))
        expected = F.conv2d(x, w, b, padding=1)


@pytest.mark.parametrize("times, ours", [
    ((0.020, 0.015, 0.005, 0.004), False),  # host-bound: ours slower on the host loses whatever the GPU saves
    ((0.020, 0.015, 0.004, 0.005), False),
    ((0.014, 0.015, 0.004, 0.005), True),   # faster by 5% in both
    ((0.0145, 0.015, 0.004, 0.005), False),  # a near tie on the host: PyTorch's conv
    ((0.014, 0.015, 0.0048, 0.005), False),  # a near tie on the GPU
    ((0.014, 0.015, 0.006, 0.005), False),  # slower on the GPU: a GPU-bound model would pay it
    ((0.020, 0.015, 0.080, 0.100), True),   # GPU-bound on both paths: the GPU decides
    ((0.020, 0.015, 0.098, 0.100), False),  # ... within the margin
    ((0.015, 0.020, 0.100, 0.080), False),
    ((0.010, 0.020, None, None), True),     # host tensors: their time
    ((0.0099, 0.010, None, None), False),
    ((0.020, 0.010, None, None), False),
])
def test_eager_choice_wins_by_a_margin_in_either_regime(times, ours):
    from pyconv.torch import _engine
    assert _engine._ours_in_eager(*times) is ours


def test_layers_tune_within_the_engines_budget(gen, monkeypatch):
    """New shapes plan (and tune) within pyconv.torch's budget on the calling thread: 300 ms a shape by
    default, pyconv.tuning's where set to None; bad budgets are refused."""
    import contextlib

    from pyconv import tuning
    budgets = []

    @contextlib.contextmanager
    def recorded(ms):
        budgets.append(ms)
        yield
    monkeypatch.setattr(tuning, "thread_budget", recorded)
    w = rand(gen, 2, 3, 3, 3)
    try:
        pct.conv2d(rand(gen, 1, 3, 7, 6), w)
        pct.set_tuning_budget_ms(None)
        pct.conv2d(rand(gen, 1, 3, 7, 7), w)
    finally:
        pct.set_tuning_budget_ms(pct.DEFAULT_TUNING_BUDGET_MS)
    assert budgets == [pct.DEFAULT_TUNING_BUDGET_MS, None] and pct.DEFAULT_TUNING_BUDGET_MS == 300
    for bad in (-1, float("inf"), float("nan"), "300", True):
        with pytest.raises(pyconv.ConvError, match="finite number"):
            pct.set_tuning_budget_ms(bad)


def _small_net():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True),
                         nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.ReLU(inplace=True),
                         nn.Conv2d(8, 4, 1), nn.Flatten(), nn.Linear(4 * 5 * 5, 3))


def test_convert_fuses_and_matches(gen):
    torch.manual_seed(0)
    model = _small_net().eval()
    converted = pct.convert(model, engine="pyconv", fallback=False)
    kinds = [type(m).__name__ for m in converted]
    assert kinds == ["Conv2d", "Identity", "Identity", "Conv2d", "Identity", "Conv2d", "Flatten", "Linear"]
    assert isinstance(converted[0], pct.Conv2d) and isinstance(converted[0].epilogue, pyconv.ReluMaxPool)
    assert converted[3].epilogue == "relu" and converted[5].epilogue is None
    assert list(converted.state_dict()) == list(model.state_dict())
    assert type(model[0]) is torch.nn.Conv2d, "convert copies unless inplace=True"
    x = rand(gen, 2, 3, 9, 10)
    with torch.no_grad():
        assert max_rel(converted(x), model(x)) <= 1e-5
    layers = pct.report(converted)
    assert set(layers) == {"0", "3", "5"} and all(r and r[0]["engine"] == "pyconv" for r in layers.values())


def test_convert_conv1d_inplace(gen):
    nn = torch.nn
    model = nn.Sequential(nn.Conv1d(3, 6, 5, padding=2), nn.ReLU(), nn.Conv1d(6, 2, 3, padding_mode="circular",
                                                                           padding=1)).eval()
    with torch.no_grad():
        x = rand(gen, 2, 3, 17)
        expected = model(x)
        same = pct.convert(model, engine="pyconv", fallback=False, inplace=True, example_inputs=x)
        assert same is model and isinstance(model[0], pct.Conv1d) and model[0].epilogue == "relu"
        assert type(model[1]) is nn.Identity and isinstance(model[2], pct.Conv1d)
        assert max_rel(model(x), expected) <= 1e-5
    assert all(len(r) == 1 for r in pct.report(model).values()), "example_inputs planned every layer"


def test_opcheck_on_the_fallback_path(gen):
    x, w = rand(gen, 1, 2, 6, 6, dtype=torch.float64), rand(gen, 3, 2, 3, 3, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pct.FallbackWarning)
        torch.library.opcheck(torch.ops.pyconv.conv2d.default,
                              (x.requires_grad_(), w, None, [1, 1], [1, 1], [1, 1], 1, [1, 0, 0, 0, 0, 0], "auto",
                               "default", "pyconv", True))


def test_compile_fullgraph_no_graph_break(gen):
    torch.manual_seed(0)
    model = _small_net().eval()
    converted = pct.convert(model, engine="pyconv", fallback=False)
    compiled = torch.compile(converted, fullgraph=True, backend="aot_eager")
    x = rand(gen, 2, 3, 9, 10, device="cpu")
    with torch.no_grad():
        assert max_rel(compiled(x), model(x)) <= 1e-5
    x.requires_grad_()
    _check_forward_backward(compiled, model, (x,))


# ---- CUDA: streams, graphs, inductor ----

@requires_cuda
def test_runs_on_current_stream_and_device(gen):
    x, w = rand(gen, 4, 3, 32, 32, device="cuda"), rand(gen, 8, 3, 3, 3, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x2 = x * 2  # written after the sleep, on the side stream: a launch elsewhere would read it too early
        y = pct.conv2d(x2, w, padding=1, fallback=False)
        ref = F.conv2d(x2, w, padding=1)
        err = (y - ref).abs().max()
    torch.cuda.current_stream().wait_stream(side)
    assert float(err) <= 1e-5 * float(ref.abs().max())


@requires_cuda
def test_streams_share_their_workspace_in_stream_order(gen):
    """A split-K plan (implicit_gemm at batch 1) takes its workspace from one buffer per stream in eager calls:
    two streams running the layer at once on different inputs each get F.conv2d's results, each stream keeps
    one buffer, and a CUDA-graph capture takes its own (the graph replays right after the streams' buffers are
    written again)."""
    from pyconv.torch import _engine
    pct.clear()
    x, w = rand(gen, 1, 256, 14, 14, device="cuda"), rand(gen, 256, 256, 3, 3, device="cuda")
    run = lambda t: pct.conv2d(t, w, padding=1, variant="implicit_gemm", fallback=False)  # noqa: E731
    run(x)
    key = (0, torch.cuda.current_stream().cuda_stream)
    assert key in _engine._workspaces, "a split-K plan at batch 1: the test needs its workspace"
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    inputs = [[rand(gen, 1, 256, 14, 14, device="cuda") for _ in range(6)] for _ in streams]
    torch.cuda.synchronize()
    outs = [[], []]
    for i in range(6):
        for k, s in enumerate(streams):
            with torch.cuda.stream(s):
                outs[k].append(run(inputs[k][i]))
    torch.cuda.synchronize()
    assert {(0, s.cuda_stream) for s in streams} <= set(_engine._workspaces)
    for k in range(2):
        for t, y in zip(inputs[k], outs[k]):
            assert max_rel(y, F.conv2d(t, w, padding=1)) <= 1e-5
    held = dict(_engine._workspaces)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side), torch.cuda.graph(graph):
        y = run(x)
    assert _engine._workspaces.keys() == held.keys() and all(_engine._workspaces[k] is v for k, v in held.items()), \
        "the capture took a workspace of its own"
    for s, t in zip(streams, (inputs[0][0], inputs[1][0])):
        with torch.cuda.stream(s):
            run(t)
    graph.replay()
    torch.cuda.synchronize()
    assert max_rel(y, F.conv2d(x, w, padding=1)) <= 1e-5


@requires_cuda
def test_cuda_graph_capture_of_a_converted_model(gen):
    torch.manual_seed(0)
    model = _small_net().cuda().eval()
    converted = pct.convert(model, engine="pyconv", fallback=False)
    x = rand(gen, 2, 3, 9, 10, device="cuda")
    with torch.no_grad():
        graph, y = capture(lambda: converted(x))  # (plans and tunes before the capture)
    x.copy_(rand(gen, 2, 3, 9, 10, device="cuda"))
    graph.replay()
    with torch.no_grad():
        assert max_rel(y, model(x)) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes(gen, device, dtype):
    x, w, b = (rand(gen, 2, 8, 16, 16, device=device, dtype=dtype), rand(gen, 16, 8, 3, 3, device=device, dtype=dtype),
               rand(gen, 16, device=device, dtype=dtype))
    y = pct.conv2d(x, w, b, padding=1, fallback=False)
    ref = F.conv2d(x.double(), w.double(), b.double(), padding=1)
    assert y.dtype == dtype and max_rel(y, ref) <= (4e-3 if dtype == torch.float16 else 2e-2)


@requires_cuda
def test_compile_inductor_cuda(gen):
    torch.manual_seed(0)
    model = _small_net().cuda().eval()
    compiled = torch.compile(pct.convert(model, engine="pyconv", fallback=False), fullgraph=True)
    x = rand(gen, 2, 3, 9, 10, device="cuda")
    with torch.no_grad():
        assert max_rel(compiled(x), model(x)) <= 1e-5


def test_pyconv_alone_does_not_import_torch():
    """pyconv itself does not import torch (the extra is optional)."""
    code = "import sys, pyconv; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
