"""pyconv.torch as PyTorch users run convolutions around it (issue 42): unbatched input, autocast, torch.func
(vmap, grad, jacrev; jacfwd refused in words), torch.compile with engine "fastest" stepping aside for
PyTorch's conv where no timing chose ours (and "pyconv" keeping its op), empty batches, FX symbolic tracing.
Each against F.conv2d / F.conv1d / nn.Conv2d, eager and compiled (fullgraph, aot_eager: CPU, no compiler
needed); CPU tensors run the cpu variant."""
import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

import torch.nn.functional as F  # noqa: E402
from test_torch_op import gen, max_rel, rand  # noqa: E402,F401 - gen: the seeded generator fixture
from torch_support import fresh_dynamo, no_tf32  # noqa: E402,F401 - fixtures; no_tf32 applies to every test here

import pyconv  # noqa: E402
import pyconv.torch as pct  # noqa: E402

CONV2D = torch.ops.pyconv.conv2d.default
CONV1D = torch.ops.pyconv.conv1d.default


def compiled(fn, targets=None):
    """fn under torch.compile(fullgraph=True) by aot_eager (fake kernels, autograd); the call targets of
    dynamo's graphs are appended to `targets`."""
    def backend(gm, example_inputs):
        if targets is not None:
            targets.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)
    return torch.compile(fn, fullgraph=True, backend=backend)


# ---- unbatched input ----

UNBATCHED = {  # name: (pyconv function, F function, x shape, w shape, arguments)
    "conv2d": (pct.conv2d, F.conv2d, (3, 11, 10), (5, 3, 3, 3), dict(stride=2, padding=1)),
    "conv2d_same": (pct.conv2d, F.conv2d, (4, 9, 8), (6, 2, 4, 3), dict(padding="same", groups=2)),
    "conv1d": (pct.conv1d, F.conv1d, (3, 20), (4, 3, 5), dict(padding=2, dilation=2)),
}


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # F.conv2d's own note
@pytest.mark.parametrize("case", sorted(UNBATCHED))
@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_unbatched_input_as_pytorch(gen, fresh_dynamo, case, mode):
    ours, theirs, x_shape, w_shape, kwargs = UNBATCHED[case]
    x, w, b = rand(gen, *x_shape).requires_grad_(), rand(gen, *w_shape), rand(gen, w_shape[0])
    fn = lambda x: ours(x, w, b, **kwargs, fallback=False)  # noqa: E731
    y = (compiled(fn) if mode == "compile" else fn)(x)
    expected = theirs(x, w, b, **kwargs)
    assert y.shape == expected.shape and max_rel(y, expected) <= 1e-5
    grad = torch.randn_like(expected)
    assert max_rel(torch.autograd.grad(y, x, grad)[0], torch.autograd.grad(expected, x, grad)[0]) <= 1e-5


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_unbatched_modules(gen, fresh_dynamo, mode):
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    theirs2, theirs1 = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), torch.nn.Conv1d(3, 4, 3, padding=1)
    ours2 = pct.Conv2d(3, 4, 3, padding=1, padding_mode="reflect", fallback=False)
    ours1 = pct.Conv1d(3, 4, 3, padding=1, fallback=False)
    ours2.load_state_dict(theirs2.state_dict()), ours1.load_state_dict(theirs1.state_dict())
    wrap = compiled if mode == "compile" else (lambda m: m)
    x2, x1 = rand(gen, 3, 8, 9), rand(gen, 3, 12)
    with torch.no_grad():
        assert max_rel(wrap(ours2)(x2), theirs2(x2)) <= 1e-5 and wrap(ours2)(x2).shape == (4, 8, 9)
        assert max_rel(wrap(ours1)(x1), theirs1(x1)) <= 1e-5 and wrap(ours1)(x1).shape == (4, 12)


RANKS = {  # name: (function, F function, x shape, w shape): input ranks F.conv2d / conv1d refuse
    "conv2d_2d": (pct.conv2d, F.conv2d, (9, 9), (4, 3, 3, 3)),
    "conv2d_5d": (pct.conv2d, F.conv2d, (1, 1, 3, 9, 9), (4, 3, 3, 3)),
    "conv1d_1d": (pct.conv1d, F.conv1d, (9,), (4, 3, 3)),
    "conv1d_4d": (pct.conv1d, F.conv1d, (1, 2, 3, 9), (4, 3, 3)),
}


@pytest.mark.parametrize("case", sorted(RANKS))
def test_other_ranks_are_pytorchs_error(case):
    fn, theirs, x_shape, w_shape = RANKS[case]
    x, w = torch.ones(x_shape), torch.ones(w_shape)
    with pytest.raises(RuntimeError) as pytorchs:
        theirs(x, w)
    with pytest.raises(RuntimeError, match="unbatched") as ours:
        fn(x, w)
    assert str(ours.value) == str(pytorchs.value), "PyTorch's own words"


def test_weight_of_another_rank_is_refused_in_words():
    with pytest.raises(RuntimeError, match=r"Expected 4D weight for conv2d.*\[4, 3, 3\]"):
        pct.conv2d(torch.ones(1, 3, 9, 9), torch.ones(4, 3, 3))
    with pytest.raises(RuntimeError, match=r"Expected 3D weight for conv1d"):
        pct.conv1d(torch.ones(1, 3, 9), torch.ones(4, 3, 3, 3))


# ---- autocast ----

@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_autocast_bf16_follows_pytorchs_conv_rule(gen, fresh_dynamo, mode):
    """Under CPU autocast (bf16) a converted model runs its convs in bf16, as nn.Conv2d does: bf16
    outputs within bf16 error of the original's, fp32 gradients on the fp32 parameters."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
    converted = pct.convert(model, engine="pyconv", fallback=False)
    run = compiled(converted) if mode == "compile" else converted
    x = rand(gen, 2, 3, 10, 9)
    with torch.autocast("cpu", torch.bfloat16):
        y, expected = run(x), model(x)
    assert y.dtype == expected.dtype == torch.bfloat16 and max_rel(y, expected) <= 2e-2
    grad = torch.randn_like(expected)
    ours = torch.autograd.grad(y, [converted[0].weight, converted[0].bias, converted[2].weight], grad)
    theirs = torch.autograd.grad(expected, [model[0].weight, model[0].bias, model[2].weight], grad)
    for a, b in zip(ours, theirs):
        assert a.dtype == torch.float32 and max_rel(a, b) <= 3e-2


def test_autocast_functional_conv1d_and_off(gen):
    x, w, b = rand(gen, 2, 3, 16), rand(gen, 4, 3, 3).requires_grad_(), rand(gen, 4)
    with torch.autocast("cpu", torch.bfloat16):
        y, expected = pct.conv1d(x, w, b, fallback=False), F.conv1d(x, w, b)
        with torch.no_grad():  # the direct path
            assert pct.conv1d(x, w, b).dtype == torch.bfloat16
        off = torch.autocast("cpu", enabled=False)
        with off:
            assert pct.conv1d(x, w, b).dtype == torch.float32, "autocast disabled inside: fp32"
    assert y.dtype == expected.dtype == torch.bfloat16 and max_rel(y, expected) <= 2e-2
    g = torch.randn_like(expected)
    assert max_rel(torch.autograd.grad(y, w, g)[0], torch.autograd.grad(expected, w, g)[0]) <= 3e-2


# ---- torch.func ----

def test_vmap_over_input(gen):
    x, w, b = rand(gen, 2, 5, 3, 9, 8), rand(gen, 4, 3, 3, 3), rand(gen, 4)
    expected = F.relu(F.conv2d(x.flatten(0, 1), w, b, padding=1)).unflatten(0, (2, 5)).movedim(0, 1)
    y = torch.func.vmap(lambda t: pct.conv2d(t, w, b, padding=1, epilogue="relu", fallback=False), in_dims=1)(x)
    assert y.shape == expected.shape and max_rel(y, expected) <= 1e-5
    per_sample = torch.func.vmap(lambda t: pct.conv2d(t, w, b, padding=1))(x[0])  # unbatched samples
    assert max_rel(per_sample, F.conv2d(x[0], w, b, padding=1)) <= 1e-5
    x1, w1 = rand(gen, 3, 2, 3, 15), rand(gen, 6, 3, 3)
    y1 = torch.func.vmap(lambda t: pct.conv1d(t, w1, stride=2, fallback=False))(x1)
    assert max_rel(y1, F.conv1d(x1.flatten(0, 1), w1, stride=2).unflatten(0, (3, 2))) <= 1e-5


def test_vmap_over_weight_and_bias(gen):
    x, ws, bs = rand(gen, 2, 4, 8, 8), rand(gen, 3, 6, 2, 3, 3), rand(gen, 3, 6)
    y = torch.func.vmap(lambda w, b: pct.conv2d(x, w, b, groups=2, fallback=False))(ws, bs)
    expected = torch.stack([F.conv2d(x, w, b, groups=2) for w, b in zip(ws, bs)])
    assert y.shape == expected.shape and max_rel(y, expected) <= 1e-5
    xs = rand(gen, 3, 2, 2, 8, 8)  # input and weight both mapped
    y = torch.func.vmap(lambda x, w: pct.conv2d(x, w, stride=2))(xs, ws[:, :, :, :2])
    assert max_rel(y, torch.stack([F.conv2d(x, w[:, :, :2], stride=2) for x, w in zip(xs, ws)])) <= 1e-5


def test_grad_jacrev_and_per_sample_grads(gen):
    x, w, b = rand(gen, 2, 3, 7, 6), rand(gen, 4, 3, 3, 3), rand(gen, 4)
    pool = pyconv.ReluMaxPool(2)

    def ours(x, w):
        return pct.conv2d(x, w, b, padding=1, epilogue=pool, fallback=False)

    def theirs(x, w):
        return F.max_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2)

    for argnums in (0, 1):
        assert max_rel(torch.func.grad(lambda x, w: ours(x, w).square().sum(), argnums)(x, w),
                       torch.func.grad(lambda x, w: theirs(x, w).square().sum(), argnums)(x, w)) <= 1e-5
        assert max_rel(torch.func.jacrev(ours, argnums)(x, w), torch.func.jacrev(theirs, argnums)(x, w)) <= 1e-5
    # per-sample weight gradients: vmap over grad, the samples unbatched
    ours_ps = torch.func.vmap(torch.func.grad(lambda w, t: ours(t, w).square().sum()), in_dims=(None, 0))(w, x)
    theirs_ps = torch.func.vmap(torch.func.grad(lambda w, t: theirs(t, w).square().sum()), in_dims=(None, 0))(w, x)
    assert ours_ps.shape == (2,) + w.shape and max_rel(ours_ps, theirs_ps) <= 1e-5


def test_forward_mode_refused_in_words_or_pytorchs(gen):
    x, w = rand(gen, 3, 6, 6), rand(gen, 2, 3, 3, 3)
    with pytest.raises(RuntimeError, match=r"pyconv.*jacfwd.*engine='fastest'"):
        torch.func.jacfwd(lambda t: pct.conv2d(t, w))(x)
    for engine in ("fastest", "torch"):  # PyTorch's conv under torch.func transforms: every rule
        jac = torch.func.jacfwd(lambda t: pct.conv2d(t, w, engine=engine))(x)
        assert max_rel(jac, torch.func.jacfwd(lambda t: F.conv2d(t, w))(x)) <= 1e-6


# ---- torch.compile: engine "fastest" steps aside for inductor, "pyconv" keeps the op ----

def _net():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 4, 3, groups=2),
                         nn.Flatten(2), nn.Conv1d(4, 2, 3, padding=1)).eval()


@pytest.mark.parametrize("engine", ["fastest", "torch", "pyconv"])
def test_compile_graph_per_engine(gen, fresh_dynamo, engine):
    """Compiled, engines "fastest" and "torch" run PyTorch's conv (inductor lowers and fuses it; no
    planning, no timing); "pyconv" keeps its op."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    model = _net()
    targets = []
    run = compiled(pct.convert(model, engine=engine), targets)
    pct.clear()
    x = rand(gen, 2, 3, 10, 6).requires_grad_()
    y = run(x)
    ours = sum(t in (CONV2D, CONV1D) for t in targets)
    # (PyTorch's conv as the original modules trace it: the Conv1d as conv1d; the fused ReLU + pool after it)
    theirs = (targets.count(torch.conv2d), targets.count(torch.conv1d))
    assert (ours, theirs) == ((3, (0, 0)) if engine == "pyconv" else (0, (2, 1)))
    assert bool(pct.decisions()) == (engine == "pyconv")
    expected = model(x)
    assert max_rel(y, expected) <= 1e-5
    grad = torch.randn_like(expected)
    assert max_rel(torch.autograd.grad(y, x, grad)[0], torch.autograd.grad(expected, x, grad)[0]) <= 1e-5


# ---- empty batches ----

EMPTY = {  # name: (function, F function, x shape, w shape, bias)
    "B0": (pct.conv2d, F.conv2d, (0, 3, 8, 8), (4, 3, 3, 3), True),
    "C0": (pct.conv2d, F.conv2d, (2, 0, 8, 8), (4, 0, 3, 3), True),
    "C0_groups": (pct.conv2d, F.conv2d, (2, 0, 9, 9), (4, 0, 3, 3), False),
    "B0_conv1d": (pct.conv1d, F.conv1d, (0, 3, 12), (4, 3, 3), True),
    "C0_conv1d": (pct.conv1d, F.conv1d, (2, 0, 12), (4, 0, 3), True),
}


@pytest.mark.parametrize("case", sorted(EMPTY))
@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_empty_operands_as_pytorch(gen, fresh_dynamo, case, mode):
    ours, theirs, x_shape, w_shape, bias = EMPTY[case]
    groups = 2 if case.endswith("groups") else 1
    x, w = rand(gen, *x_shape).requires_grad_(), rand(gen, *w_shape)
    b = rand(gen, w_shape[0]) if bias else None
    expected = theirs(x, w, b, padding=1, groups=groups)
    pct.reset_fallback_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pct.FallbackWarning)
        for engine in ("pyconv", "fastest"):
            fn = lambda x: ours(x, w, b, padding=1, groups=groups, engine=engine)  # noqa: E731
            y = (compiled(fn) if mode == "compile" else fn)(x)
            assert y.shape == expected.shape and y.dtype == expected.dtype and torch.equal(y, expected)
            assert torch.autograd.grad(y.sum(), x)[0].shape == x.shape
            with torch.no_grad():  # the direct path
                assert torch.equal(fn(x), expected)
    assert pct.fallback_counts() == {}


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_no_output_channels_is_pytorchs_error(gen, fresh_dynamo, mode):
    x, w = rand(gen, 2, 3, 8, 8), rand(gen, 0, 3, 3, 3)
    with pytest.raises(RuntimeError) as pytorchs:
        F.conv2d(x, w)
    fn = lambda x: pct.conv2d(x, w)  # noqa: E731
    with pytest.raises(RuntimeError, match="expected weight to be at least 1 at dimension 0"):
        (compiled(fn) if mode == "compile" else fn)(x)
    assert "weight" in str(pytorchs.value)


# ---- FX ----

def test_fx_symbolic_trace_records_the_op(gen):
    layer = pct.Conv2d(3, 4, 3, padding=1, fallback=False)
    traced = torch.fx.symbolic_trace(torch.nn.Sequential(layer))
    assert [n.target for n in traced.graph.nodes if n.op == "call_function"] == [CONV2D]
    x = rand(gen, 2, 3, 6, 6)
    with torch.no_grad():
        assert max_rel(traced(x), F.conv2d(x, layer.weight, layer.bias, padding=1)) <= 1e-5


# times of engine "fastest" (ours host, PyTorch host, ours GPU, PyTorch GPU ms) and graph replays (ours, PyTorch)
OURS_FASTER = ((0.010, 0.020, 0.004, 0.009), (0.004, 0.009))
THEIRS_FASTER = ((0.020, 0.010, 0.009, 0.004), (0.009, 0.004))
OURS_IN_EAGER_ONLY = ((0.010, 0.020, 0.004, 0.009), (0.009, 0.004))


def _decide_with(monkeypatch, timings):
    from pyconv.torch import _engine
    monkeypatch.setattr(_engine, "_measure", lambda ours, theirs, device: timings[0])
    monkeypatch.setattr(_engine, "_graph_ms", lambda ours, theirs, device: timings[1])
    monkeypatch.setattr(_engine, "capturing", lambda: False)  # (host tensors: no capture to ask CUDA about)


# how a converted model's layers decide: (engine, timings of engine "fastest")
DECIDED = {"theirs faster": ("fastest", THEIRS_FASTER), "ours faster": ("fastest", OURS_FASTER),
           "engine pyconv": ("pyconv", THEIRS_FASTER)}


def _folded_after_a_call(gen, model, shape, monkeypatch, decided="theirs faster") -> tuple:
    """(original, converted, x): a deep copy of model, model converted and called once on a fresh x, so that its
    layers have decided (as DECIDED[decided] says) and its batch norms folded, and x."""
    engine, timings = DECIDED[decided]
    _decide_with(monkeypatch, timings)
    pct.clear()
    original = copy.deepcopy(model)
    converted = pct.convert(model, engine=engine)
    x = rand(gen, *shape)
    with torch.no_grad():
        converted(x)
    assert pct.report(converted).folded  # folded in eager calls
    return original, converted, x


@pytest.mark.parametrize("decided", sorted(DECIDED))
def test_compiled_converted_model_traces_as_the_original(gen, fresh_dynamo, monkeypatch, decided):
    """Compiled after eager calls (its layers have decided, its batch norms folded), a converted conv + batch norm
    + ReLU network traces to the original's graph: the same calls (our op for PyTorch's conv where our plan won
    both timed modes) and the same inputs, none read through the conv's link to its norm or its memo (each read
    is a guard that every compiled call checks)."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1), m.running_var.uniform_(0.5, 2), m.weight.uniform_(0.5, 2)
    original, converted, x = _folded_after_a_call(gen, model, (2, 3, 10, 9), monkeypatch, decided)
    ours = decided != "theirs faster"
    graphs = {}
    with torch.no_grad():
        for name, m in (("original", original), ("converted", converted)):
            def backend(gm, example_inputs, name=name):
                graphs[name] = gm
                return gm.forward
            y = torch.compile(m, fullgraph=True, backend=backend)(x)
            assert max_rel(y, original(x)) <= 1e-5

    def calls(gm):
        return [n.target for n in gm.graph.nodes if n.op == "call_function"]

    def inputs(gm):
        return [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    expected = [CONV2D if ours and target is torch.conv2d else target for target in calls(graphs["original"])]
    assert calls(graphs["converted"]) == expected
    assert len(inputs(graphs["converted"])) == len(inputs(graphs["original"]))
    assert not any("pyconv" in name for name in inputs(graphs["converted"])), inputs(graphs["converted"])


@pytest.mark.parametrize("decided", sorted(DECIDED))
def test_compiled_converted_model_guards_little_more_than_the_original(gen, fresh_dynamo, monkeypatch, decided):
    """Each call of a compiled model checks its guards first, on the host, with caches cold from the forward
    before: on the H200 a converted mobilenet_v2's guards took 0.59 ms a call against the original's 0.28 while
    its convs and norms reached their bases through super() (guards on each layer's class and MRO) and its norms'
    buffers drew aliasing guards; PyTorch 2.11 also guarded each conv's and folded norm's class hierarchy (a method
    found in nn.Conv2d or nn.BatchNorm2d); a conv compiled to our op read its options through spec() (70 guards).
    Now each conv adds about one guard to the original's (its one attribute read), folded or not, on PyTorch's conv
    or on our op; what the model adds once (our functions' globals) depends on PyTorch's version, so the test
    counts the guards of networks of 2 and 6 units (a conv + batch norm + ReLU, then a conv on its own)."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    nn = torch.nn

    def extra_guards(units: int) -> int:
        layers = []
        for i in range(units):
            layers += [nn.Conv2d(3 if i == 0 else 8, 8, 3, padding=1, bias=i % 2 == 0), nn.BatchNorm2d(8),
                       nn.ReLU(), nn.Conv2d(8, 8, 1, bias=i % 2 == 1)]
        original, converted, x = _folded_after_a_call(gen, nn.Sequential(*layers).eval(), (1, 3, 9, 7), monkeypatch,
                                                      decided)
        assert len(pct.report(converted).folded) == units
        guards = {}
        with torch.no_grad():
            for name, m in (("original", original), ("converted", converted)):
                torch._dynamo.reset()
                guards[name] = torch._dynamo.explain(m)(x).out_guards
        return len(guards["converted"]) - len(guards["original"])
    per_unit = (extra_guards(6) - extra_guards(2)) / 4
    assert per_unit <= 2, per_unit


def test_compiled_converted_conv_follows_an_engine_changed_after_compiling(gen, fresh_dynamo):
    """The compiled graph reads the conv's engine through one attribute (its guard): setting engine "pyconv"
    after compiling recompiles with our op in the graph, and setting "fastest" back runs the first graph again."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    nn = torch.nn
    converted = pct.convert(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()).eval(), engine="fastest",
                            fuse=False)
    x = rand(gen, 1, 3, 8, 7)
    targets = []
    run = compiled(converted, targets)
    with torch.no_grad():
        expected = F.relu(F.conv2d(x, converted[0].weight, converted[0].bias, padding=1))
        results = [run(x)]
        first = list(targets)
        converted[0].engine = "pyconv"
        results.append(run(x))
        second = targets[len(first):]
        converted[0].engine = "fastest"
        results.append(run(x))
    assert first and not any(t in (CONV2D, CONV1D) for t in first)
    assert CONV2D in second
    assert len(targets) == len(first) + len(second)  # the first graph again: no third compile
    for y in results:
        assert max_rel(y, expected) <= 1e-5


@pytest.mark.parametrize("timings, ours", [(OURS_FASTER, True), (THEIRS_FASTER, False), (OURS_IN_EAGER_ONLY, False)])
@pytest.mark.parametrize("conv", ["conv2d", "conv1d"])
def test_compiled_fastest_runs_our_op_where_both_timed_modes_chose_ours(gen, fresh_dynamo, monkeypatch, timings,
                                                                        ours, conv):
    """Engine "fastest" compiles a converted layer to our op where its eager calls so far ran our plan in both
    timed modes (eager and CUDA graph), else to PyTorch's conv; the compiled result is the conv's either way."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    _decide_with(monkeypatch, timings)
    pct.clear()
    nn = torch.nn
    layer = nn.Conv2d(3, 6, 3, padding=1) if conv == "conv2d" else nn.Conv1d(3, 6, 3, padding=1)
    converted = pct.convert(nn.Sequential(layer, nn.ReLU()).eval(), engine="fastest", fuse=False)
    x = rand(gen, 2, 3, 9, 7) if conv == "conv2d" else rand(gen, 2, 3, 13)
    targets = []
    with torch.no_grad():
        converted(x)  # decided
        y = compiled(converted, targets)(x)
    op, function = (CONV2D, torch.conv2d) if conv == "conv2d" else (CONV1D, torch.conv1d)
    assert (op in targets, function in targets) == (ours, not ours)
    assert pct.report(converted).compiled == {"0": "pyconv" if ours else "torch"}  # what the report says
    functional = F.conv2d if conv == "conv2d" else F.conv1d
    assert max_rel(y, F.relu(functional(x, layer.weight, layer.bias, padding=1))) <= 1e-5


def test_compiled_fastest_runs_what_was_decided_without_timing_again(gen, fresh_dynamo, monkeypatch):
    """A compiled layer that runs our op runs it as decided: a conv whose batch norm was folded in eager calls (and
    decided with the folded bias) meets other operands in the compiled graph (no bias, the norm after it), which
    engine "fastest" would time anew inside the compiled model; none is timed there."""
    from pyconv.torch import _engine
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1), model[1].running_var.uniform_(0.5, 2)
    original, converted, x = _folded_after_a_call(gen, model, (2, 3, 9, 7), monkeypatch, "ours faster")
    timed = []
    measure = _engine._measure
    monkeypatch.setattr(_engine, "_measure", lambda *a: timed.append(1) or measure(*a))
    targets = []
    with torch.no_grad():
        y = compiled(converted, targets)(x)
    assert CONV2D in targets and not timed
    assert max_rel(y, original(x)) <= 1e-5


def test_compiled_fastest_follows_later_decisions_and_copies_start_over(gen, fresh_dynamo, monkeypatch):
    """A new input that our plan also won leaves the compiled graph as it is; one that PyTorch's conv won turns the
    layer's compiled forward back to PyTorch's conv (the next compiled call compiles again); a copy keeps no
    decisions, and so compiles to PyTorch's conv."""
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    pct.clear()
    layer = pct.Conv2d(3, 4, 3, padding=1, engine="fastest")
    targets = []
    run = compiled(layer, targets)
    x, x1, x2 = rand(gen, 1, 3, 8, 8), rand(gen, 3, 3, 8, 8), rand(gen, 2, 3, 8, 8)
    with torch.no_grad():
        _decide_with(monkeypatch, OURS_FASTER)
        layer(x)
        run(x)
        assert CONV2D in targets
        compiled_once = len(targets)
        layer(x1)  # ours too
        run(x)
        assert len(targets) == compiled_once  # not compiled again
        _decide_with(monkeypatch, THEIRS_FASTER)
        layer(x2)
        del targets[:]
        y = run(x)
        assert targets and CONV2D not in targets and torch.conv2d in targets
        assert max_rel(y, F.conv2d(x, layer.weight, layer.bias, padding=1)) <= 1e-5
        del targets[:]
        copied = copy.deepcopy(layer)
        compiled(copied, targets)(x)
        assert CONV2D not in targets and torch.conv2d in targets
