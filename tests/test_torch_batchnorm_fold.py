"""convert folds an eval-mode BatchNorm2d into the Conv2d before it (BatchNorm1d into a Conv1d) at inference
calls (pyconv/torch/batchnorm.py), and runs both wherever folding could be seen: training mode, autograd
recording, hooks, a conv output with another user, running statistics absent, parameters changed since the
last fold, DataParallel replicas, torch.func and dispatch modes, CUDA-graph capture.

Models with random weights and running statistics (never the defaults, which fold to the identity), compared
with the unconverted model to a max relative error of 1e-5; CPU tensors (the cpu variant) unless marked."""
import copy
import pickle
import sys
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
# no_tf32 applies to every test here
from torch_support import assert_close, capture, gen, no_tf32, requires_cuda, uniform  # noqa: E402,F401

import pyconv.torch as pct  # noqa: E402
from pyconv.torch.batchnorm import PassThroughBatchNorm2d  # noqa: E402

OURS = dict(engine="pyconv", fallback=False)


class Block(nn.Module):
    """A residual block as torchvision's: convs and batch norms called in forward, one ReLU module reused."""

    def __init__(self, c, bias=False):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=bias), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, (1, 3), padding=(0, 1), groups=2, bias=not bias), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)


def randomise(model, gen):
    """Random affine parameters and running statistics for every batch norm; eval mode."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                if m.track_running_stats:
                    m.running_mean.copy_(uniform(gen, m.num_features))
                    m.running_var.copy_(uniform(gen, m.num_features).abs() + 0.2)
                if m.affine:
                    m.weight.copy_(uniform(gen, m.num_features) + 1.5)
                    m.bias.copy_(uniform(gen, m.num_features))
    return model.eval()


def net(gen):
    """A stem as an nn.Sequential (conv, bn, ReLU) and two residual blocks."""
    return randomise(nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   Block(8), Block(8, bias=True)), gen)


def batch_norm_calls(monkeypatch) -> list:
    """Records each F.batch_norm call (what an nn.BatchNorm2d that runs calls)."""
    calls, real = [], F.batch_norm
    monkeypatch.setattr(F, "batch_norm", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_inference_folds_every_pair_and_matches(gen, monkeypatch):
    model = net(gen)
    converted = pct.convert(model, **OURS)
    bns = [m for m in converted.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 5 and all(type(m) is PassThroughBatchNorm2d for m in bns)
    assert sorted(converted.state_dict()) == sorted(model.state_dict()), "the same keys: the BN layers stay"
    report = pct.report(converted)
    assert report.folded == {"0": "1", "3.conv1": "3.bn1", "3.conv2": "3.bn2", "4.conv1": "4.bn1", "4.conv2": "4.bn2"}
    assert "folds the norm 3.bn1" in str(report)
    x = uniform(gen, 2, 3, 17, 13)
    calls = batch_norm_calls(monkeypatch)
    for inference in (torch.no_grad, torch.inference_mode):
        with inference():
            assert_close(converted(x), model(x))
            assert len(calls) == 5, "the original's 5 batch norms ran; none of the converted model's"
        calls.clear()
    params_free = pct.convert(model, **OURS).requires_grad_(False)  # nothing to record even with grad enabled
    assert_close(params_free(x), model(x).detach())
    assert len(calls) == 5


class SeparableBlock1d(nn.Module):
    """A QuartzNet-style block: depthwise and pointwise Conv1d, BatchNorm1d, ReLU, and a residual 1x1 conv + norm."""

    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(c, c, 5, padding=2, groups=c), nn.Conv1d(c, c, 1, bias=False),
                                  nn.BatchNorm1d(c), nn.ReLU())
        self.res, self.res_bn = nn.Conv1d(c, c, 1), nn.BatchNorm1d(c)

    def forward(self, x):
        return self.body(x) + self.res_bn(self.res(x))


def test_conv1d_folds_batch_norm_1d(gen, monkeypatch):
    model = net1d(gen)
    converted = pct.convert(model, **OURS)
    assert pct.report(converted).folded == {"0": "1", "3.body.1": "3.body.2", "3.res": "3.res_bn",
                                            "4.body.1": "4.body.2", "4.res": "4.res_bn"}
    x = uniform(gen, 2, 3, 37)
    calls = batch_norm_calls(monkeypatch)
    with torch.no_grad():
        assert_close(converted(x), model(x))
    assert len(calls) == 5, "the original's 5 norms ran; none of the converted model's"
    model.train(), converted.train()
    with torch.no_grad():
        assert_close(converted(x), model(x))


@pytest.mark.parametrize("dims", [2, 1])
def test_unbatched_input_runs_the_norm_as_the_original(gen, dims):
    """An unbatched x: the original's norm sees the conv's (C, ...) output as a batch (BatchNorm1d, where L equals
    the features) or refuses it (BatchNorm2d); the converted model does the same, unfolded."""
    conv = nn.Conv2d(3, 6, 3, padding=1) if dims == 2 else nn.Conv1d(3, 6, 3, padding=1)
    model = randomise(nn.Sequential(conv, nn.BatchNorm2d(6) if dims == 2 else nn.BatchNorm1d(6)), gen)
    converted = pct.convert(model, **OURS)
    assert pct.report(converted).folded == {"0": "1"}
    x = uniform(gen, 3, 7, 7) if dims == 2 else uniform(gen, 3, 6)
    with torch.no_grad():
        if dims == 2:
            with pytest.raises(ValueError, match="expected 4D input"):
                model(x)
            with pytest.raises(ValueError, match="expected 4D input"):
                converted(x)
        else:
            assert_close(converted(x), model(x))


def test_training_mode_and_autograd_run_the_batch_norm(gen):
    """train(): batch statistics, running statistics updated as the original's; with grad: gradients equal."""
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 4, 3, 16, 16)
    model.train(), converted.train()
    with torch.no_grad():  # nothing to record, but training mode normalises with the batch's statistics
        assert_close(converted(x), model(x))
    for ours, theirs in zip(converted.modules(), model.modules()):
        if isinstance(theirs, nn.BatchNorm2d):
            assert_close(ours.running_mean, theirs.running_mean)
            assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 1
    model.eval(), converted.eval()
    xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    outs = [converted(xs[0]), model(xs[1])]
    assert_close(outs[0], outs[1])
    for out in outs:
        out.square().sum().backward()
    assert_close(xs[0].grad, xs[1].grad, 1e-4)
    assert_close(converted[0].weight.grad, model[0].weight.grad, 1e-4)


def test_changed_parameters_and_statistics_are_folded_again(gen):
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 1, 3, 12, 12)
    with torch.no_grad():
        converted(x)
        for m in (model, converted):  # in place (optimizer steps, load_state_dict) and replaced
            m[0].weight.mul_(1.5)
            m[1].running_var.add_(0.5)
            m[3].bn2.bias = nn.Parameter(m[3].bn2.bias + 1)
            m[3].bn1.eps = 0.1
        assert_close(converted(x), model(x))
        # new memory under the same tensor object, its version unchanged (as module.to() does), one at a time
        for change in (lambda m: m[3].conv2, lambda m: m[3].bn2, lambda m: m[0], lambda m: m[1]):
            for m in (model, converted):
                layer = change(m)
                tensor = layer.weight if isinstance(layer, nn.Conv2d) else layer.running_mean
                tensor.data = tensor.data * -1 + 0.5
            assert_close(converted(x), model(x))
        converted.load_state_dict(randomise(net(gen), gen).state_dict())
        model.load_state_dict(converted.state_dict())
        assert_close(converted(x), model(x))


def test_hooks_see_what_they_saw(gen, monkeypatch):
    """A forward hook on the conv, a pre-hook on the batch norm, a global hook: that call runs both, and the
    hooks see the unconverted model's tensors."""
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 2, 3, 12, 12)
    for where in ("conv", "bn", "global"):
        seen, seen_original = [], []
        handles = []
        for m, log in ((converted, seen), (model, seen_original)):
            record = (lambda log: lambda mod, args, *out: log.append(args[0].clone()))(log)
            if where == "conv":
                handles.append(m[3].conv2.register_forward_hook(
                    lambda mod, args, out, log=log: log.append(out.clone())))
            elif where == "bn":
                handles.append(m[3].bn2.register_forward_pre_hook(record))
        if where == "global":
            handles.append(nn.modules.module.register_module_forward_pre_hook(
                lambda mod, args: (seen if any(mod is c for c in converted.modules()) else seen_original).append(
                    args[0].clone()) if isinstance(mod, nn.BatchNorm2d) else None))
        try:
            with torch.no_grad():
                assert_close(converted(x), model(x))
        finally:
            for h in handles:
                h.remove()
        assert len(seen) == len(seen_original) > 0
        for a, b in zip(seen, seen_original):
            assert_close(a, b)


class TwoUsers(nn.Module):
    """The conv's output feeds the batch norm and the sum: nothing may be folded."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


class Untraceable(nn.Module):
    """Data-dependent control flow: torch.fx cannot trace the forward, so nothing in it is paired."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        if x.sum() > 0:
            return self.bn(self.conv(x))
        return self.bn(self.conv(-x))


def test_what_is_not_paired(gen):
    shared = nn.Conv2d(4, 4, 3, padding=1)
    cases = {"two users": TwoUsers(), "untraceable": Untraceable(),
             "shared conv": nn.Sequential(shared, nn.BatchNorm2d(4), shared, nn.BatchNorm2d(4)),
             "no running statistics": nn.Sequential(nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)),
             "conv after the norm": nn.Sequential(nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3))}
    x = uniform(gen, 2, 4, 9, 9)
    for name, model in cases.items():
        model = randomise(model, gen)
        converted = pct.convert(model, **OURS)
        with torch.no_grad():
            assert_close(converted(x), model(x)), name
        folded = [m for m in converted.modules() if "_pyconv_folded" in vars(m)]
        assert folded == [], name
    assert pct.convert(cases["shared conv"], **OURS)[0].not_fused == \
        "BatchNorm2d not folded: this conv also runs elsewhere in the model"
    assert not any(type(m) is PassThroughBatchNorm2d for m in pct.convert(net(gen), fuse=False, **OURS).modules())


def test_copies_run_the_batch_norm_again(gen):
    """deepcopy / pickle of a converted model leave the pairing behind (results equal); fuse_conv_bn_eval of a
    paired conv (a deep copy of the conv alone) gives conv then batch norm, not the norm twice."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 1, 3, 12, 12)
    with torch.no_grad():
        expected = model(x)
        converted(x)
        for copied in (copy.deepcopy(converted), pickle.loads(pickle.dumps(converted))):
            assert_close(copied(x), expected)
            assert not any("_pyconv_handed" in vars(m) or "_pyconv_bn" in vars(m) for m in copied.modules())
        fused = fuse_conv_bn_eval(converted[3].conv1, converted[3].bn1)
        y = uniform(gen, 1, 8, 6, 6)
        assert_close(fused(y), model[3].bn1(model[3].conv1(y)))
        converted[3].conv1.epilogue = "relu"  # a new epilogue would run before the norm: unpaired
        assert "_pyconv_bn" not in vars(converted[3].conv1)


def test_data_parallel_replicas_run_the_norm(gen):
    """nn.DataParallel's replicas are shallow copies of each module: a replica's conv must not fold the original's
    norm (another device's statistics, or the norm applied twice); it runs conv then its own norm."""
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 1, 3, 12, 12)
    with torch.no_grad():
        converted(x)  # the original's convs have folded and handed over once
    replicas = {id(m): m._replicate_for_data_parallel() for m in converted.modules()}
    for m in converted.modules():  # as torch.nn.parallel.replicate wires the replicas' children
        replica = replicas[id(m)]
        replica._modules = {k: replicas[id(c)] for k, c in m._modules.items()}
        for k, p in m._parameters.items():  # replicas hold copies of the parameters as plain attributes
            setattr(replica, k, None if p is None else p.detach().clone())
    root = replicas[id(converted)]
    assert not any("_pyconv_bn" in vars(m) or "_pyconv_handed" in vars(m) for m in root.modules())
    with torch.no_grad():
        assert_close(root(x), model(x))
        assert_close(converted(x), model(x))


def test_threads_share_a_converted_model(gen):
    """Each thread's conv hands its own output to the batch norm (the hand-over is per thread)."""
    model = net(gen)
    converted = pct.convert(model, **OURS)
    xs = [uniform(gen, 1, 3, 10 + i, 12) for i in range(4)]
    with torch.no_grad():
        expected = [model(x) for x in xs]
    errors = []

    def run(i):
        try:
            with torch.no_grad():
                for _ in range(20):
                    assert_close(converted(xs[i]), expected[i])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between a conv and its batch norm
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_torch_func_and_dispatch_modes_run_both(gen):
    """Under torch.func.vmap (batched wrappers, which the fold cache must not keep) and a dispatch mode (a mode
    sees the original's norms) nothing is folded; results equal the original's."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Norms(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.count += "batch_norm" in func.__name__
            return func(*args, **(kwargs or {}))

    model = net(gen)
    converted = pct.convert(model, **OURS)
    xs = uniform(gen, 3, 1, 3, 10, 10)
    with torch.no_grad():
        assert_close(torch.func.vmap(converted)(xs), torch.func.vmap(model)(xs))
        assert "_pyconv_folded" not in vars(converted[0])
        with Norms() as ours:
            y = converted(xs[0])
        with Norms() as theirs:
            assert_close(y, model(xs[0]))
        assert ours.count == theirs.count == 5


def test_jit_trace_records_both(gen):
    model = net(gen)
    converted = pct.convert(model, **OURS)
    x = uniform(gen, 1, 3, 12, 12)
    with torch.no_grad():
        traced = torch.jit.trace(converted, x, check_trace=False)
        assert_close(traced(x * 2), model(x * 2))


def net1d(gen):
    return randomise(nn.Sequential(nn.Conv1d(3, 8, 3, stride=2, padding=1), nn.BatchNorm1d(8), nn.ReLU(),
                                   SeparableBlock1d(8), SeparableBlock1d(8)), gen)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dims", [2, 1])
def test_cuda_eager_and_graphs(gen, dtype, dims):
    """On the GPU in every dtype (bf16 / fp16 against float64: within twice PyTorch's own error); a CUDA graph
    captures conv and batch norm unfolded, so that a replay after a parameter change follows it as the
    original's does."""
    model = (net(gen) if dims == 2 else net1d(gen)).cuda()
    converted = pct.convert(model, engine="fastest").to(dtype)
    exact = copy.deepcopy(model).double()
    model = model.to(dtype)
    x = (uniform(gen, 2, 3, 20, 20) if dims == 2 else uniform(gen, 2, 3, 77)).cuda()
    with torch.no_grad():
        truth = exact(x.double())
        ours, theirs = converted(x.to(dtype)).double(), model(x.to(dtype)).double()
        err, their_err = float((ours - truth).abs().max()), float((theirs - truth).abs().max())
        assert err <= max(2 * their_err, 1e-5 * float(truth.abs().max())), (err, their_err)
        graphs = {}
        pct.reset_fallback_counts()
        for name, m in (("ours", converted), ("theirs", model)):
            static = x.to(dtype)
            graphs[name] = capture(lambda: m(static))
        # the capture ran conv then norm through the plans the folded eager calls made (a zero bias where the conv
        # has none), not PyTorch's conv for shapes first seen while capturing
        assert not any("capture" in reason for reason in pct.fallback_counts()), pct.fallback_counts()
        if dims == 2:  # (on the H200 some of these layers capture ours; the test needs one)
            assert any(r["engine_captured"] == "pyconv" for records in pct.report(converted).values() for r in records)
        for m in (converted, model):
            m[1].running_mean.add_(0.25)
        for g, _ in graphs.values():
            g.replay()
        torch.testing.assert_close(graphs["ours"][1].double(), graphs["theirs"][1].double(),
                                   rtol=0, atol=2 * max(their_err, 1e-5 * float(truth.abs().max())) + 1e-6)


@requires_cuda
@pytest.mark.parametrize("eager, captured", [("pyconv", "torch"), ("torch", "torch"), ("torch", "pyconv")])
def test_a_capture_on_pytorchs_conv_passes_no_zero_bias(gen, monkeypatch, eager, captured):
    """Where a CUDA graph captures PyTorch's conv for a folded layer without a bias, the conv is called as the
    original calls it: bias None (cuDNN adds a bias in a kernel of its own, one more per layer), and the engine
    timed PyTorch's side for graphs so; where it captures ours, through the folded calls' plan (no capture-time
    fallback). Replays follow a running-mean change either way."""
    from pyconv.torch import _engine
    # (ours host, PyTorch host, ours GPU, PyTorch GPU) and the graph replays' (ours, PyTorch) that decide so
    times = (0.010, 0.020, 0.004, 0.009) if eager == "pyconv" else (0.020, 0.010, 0.004, 0.009)
    graphed = (0.004, 0.009) if captured == "pyconv" else (0.009, 0.004)
    monkeypatch.setattr(_engine, "_measure", lambda ours, theirs, device: times)
    timed = []  # what each side of the graph timing computes
    monkeypatch.setattr(_engine, "_graph_ms", lambda ours, theirs, device: timed.append((ours(), theirs())) or graphed)
    pct.clear()
    model = randomise(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)), gen).cuda()
    model, converted = copy.deepcopy(model), pct.convert(model, engine="fastest")
    x = uniform(gen, 2, 3, 10, 11).cuda()
    convs, real = [], F.conv2d  # the bias of each F.conv2d call while capturing

    def spy(*a, **k):
        if torch.cuda.is_current_stream_capturing():
            convs.append(a[2] if len(a) > 2 else k.get("bias"))
        return real(*a, **k)
    monkeypatch.setattr(F, "conv2d", spy)
    with torch.no_grad():
        assert_close(converted(x), model(x), 1e-5)
        record = pct.report(converted)["0"][-1]
        assert (record["engine"], record["engine_captured"]) == (eager, captured), record
        # PyTorch's side was timed as its capture runs: without the folded bias (ours: with it, as its plan)
        folded_bias = converted[0].__dict__["_pyconv_folded"].call[1]
        (ours, theirs), = timed
        assert_close(ours - theirs, folded_bias.view(1, -1, 1, 1).expand_as(ours), 1e-5)
        pct.reset_fallback_counts()
        graph, y = capture(lambda: converted(x))
        assert convs == ([None] if captured == "torch" else []), convs
        assert not pct.fallback_counts(), pct.fallback_counts()
        for m in (converted, model):
            m[1].running_mean.add_(0.25)
        graph.replay()
        assert_close(y, model(x), 1e-5)
