"""Real networks converted with pyconv.torch.convert: LeNet-5 (the main job's, built in PyTorch) and
torchvision's ResNet-18, MobileNetV2 and ConvNeXt-T (random weights, eval mode) at batch 1 and 32, fp32
and fp16 / bf16, eager, torch.compile and CUDA graph: logits against the unconverted model; SGD steps
on LeNet-5 give the losses and parameters of the same nn.Conv2d model stepped in float64.

Error = max |converted - original| / max |original| over the logits. fp32 (TF32 off on both sides):
<= 1e-4. fp16 / bf16: both models in that dtype are compared with the fp32 original; the converted
model's error may be at most 2x the original's own plus 1e-3 (no less exact than PyTorch's own
half-precision run of the same network).
LeNet-5 also runs on the CPU (the cpu variant); the rest needs CUDA and skips with the reason."""
import copy
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

from torch_support import CUDA_REASON, capture, no_tf32, requires_cuda  # noqa: E402,F401 - no_tf32 applies to every test here

import pyconv.torch as pct  # noqa: E402
import pyconv.tuning  # noqa: E402
from pyconv.lenet import model as lenet_model  # noqa: E402
from pyconv.torch.models import NETWORKS, build  # noqa: E402

try:
    import torchvision
except ImportError:
    torchvision = None
TV_REASON = "" if torchvision is not None else "torchvision is not installed"
requires_torchvision = pytest.mark.skipif(bool(TV_REASON), reason=TV_REASON or "ok")


@pytest.fixture(scope="module", autouse=True)
def short_tuning():
    """auto tunes each new shape once; a short budget keeps four networks' shapes quick."""
    if not CUDA_REASON:
        pyconv.tuning.set_budget_ms(300)
    yield
    if not CUDA_REASON:
        pyconv.tuning.set_budget_ms(3000)


def error(a, b) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).abs().max() / b.abs().max())


def run(model, x, mode, backend="inductor"):
    """The model's output in `mode`: eager, compiled (fullgraph, by `backend`) or replayed from a CUDA graph."""
    with torch.no_grad():
        if mode == "eager":
            return model(x)
        if mode == "compile":
            return torch.compile(model, fullgraph=True, backend=backend)(x)
        static_x = x.clone()
        graph, y = capture(lambda: model(static_x), warmups=2)  # (plans, tunes and warms up outside the capture)
        static_x.copy_(x)
        graph.replay()
        return y.clone()


def check_network(name, device, batch, dtype, mode, gen, backend="inductor"):
    shape = NETWORKS[name][1]
    x32 = torch.rand(batch, *shape, generator=gen).to(device)
    original32 = build(name, device, torch.float32)
    reference = run(original32, x32, "eager")
    pct.reset_fallback_counts()
    if dtype == torch.float32:
        converted = pct.convert(original32, engine="pyconv")
        err = error(run(converted, x32, mode, backend), reference)
        assert err <= 1e-4, f"{name}: max rel error {err:.2e}"
    else:
        original = build(name, device, dtype)
        converted = pct.convert(original, engine="pyconv")
        x = x32.to(dtype)
        theirs = error(run(original, x, mode, backend), reference)
        ours = error(run(converted, x, mode, backend), reference)
        assert ours <= 2 * theirs + 1e-3, f"{name}: {ours:.2e} vs PyTorch's own {theirs:.2e} in {dtype}"
    layers = pct.report(converted)
    assert layers and all(layers.values()), "every converted layer ran"
    if mode == "graph":
        assert not any("capture" in reason for reason in pct.fallback_counts())
    return layers


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


@pytest.mark.parametrize("batch", [1, 4])
def test_lenet5_cpu(batch, gen):
    layers = check_network("lenet5", "cpu", batch, torch.float32, "eager", gen)
    assert {r["epilogue"] for rs in layers.values() for r in rs} == {"relu+maxpool"}, "ReLU + pool fused"
    assert all(r["variant"] == "cpu" for rs in layers.values() for r in rs)


MODES = ["eager", "compile", "graph"]
COMPILED = {(32, torch.float32): "inductor", (1, torch.bfloat16): "aot_eager"}  # (batch, dtype): backend
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@requires_cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch", [1, 32])
@pytest.mark.parametrize("name", ["lenet5"] + [pytest.param(n, marks=requires_torchvision)
                                                for n in ("resnet18", "mobilenet_v2", "convnext_tiny")])
def test_network_cuda(name, batch, dtype, mode, gen):
    backend = COMPILED.get((batch, dtype))
    if mode == "compile" and backend is None:
        pytest.skip("compiled at (32, float32) by inductor and (1, bfloat16) by aot_eager only: compiles take "
                    "minutes; bench/torch_models.py compiles every pair")
    check_network(name, "cuda", batch, dtype, mode, gen, backend or "inductor")


def sgd_losses(model, batches, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for x, labels in batches:
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
def test_lenet5_sgd_matches_nn_conv2d(device, gen):
    """Five SGD steps of the converted LeNet against the same nn.Conv2d model stepped in float64 on the CPU.

    The losses agree to 1e-5. The parameters agree to about 2e-7 of their largest value, except after a
    jump in one step, most likely a max-pool window whose two largest inputs lie closer than fp32's rounding
    of the sums (its gradient goes to the other input in one model; the momentum steps carry that on). On the
    H100 that happened in about one run in five, to either fp32 model: ours 4.6e-4 off on c1.weight (seed 481143856),
    and the unconverted fp32 model on cuDNN 2.3e-4 off on c3.weight (seed 2841449270) where ours stayed within
    2e-7 (this test compared those two at 1e-4 before). So the parameters are held to 2e-3; a wrong gradient
    is off by more than 1e-2."""
    batches = [(torch.rand(16, *lenet_model.INPUT_SHAPE, generator=gen),
                torch.randint(10, (16,), generator=gen)) for _ in range(5)]
    original = build("lenet5", device, torch.float32).train()
    exact = copy.deepcopy(original).double().cpu()
    converted = pct.convert(original, engine="pyconv", fallback=False)
    ours = sgd_losses(converted, [(x.to(device), labels.to(device)) for x, labels in batches])
    truth = sgd_losses(exact, [(x.double(), labels) for x, labels in batches])
    assert ours == pytest.approx(truth, rel=1e-5)
    for (name, p), q in zip(exact.named_parameters(), converted.parameters()):
        assert error(q, p) <= 2e-3, name


def _bench_module(name: str = "torch_models"):
    """bench/<name>.py as a module (a script beside the package, not in it; it imports its neighbours)."""
    import importlib.util
    from pathlib import Path
    bench = Path(__file__).resolve().parent.parent / "bench"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", bench / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(bench))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return module


def test_profile_tallies_kernels_and_ops_per_forward():
    """bench/torch_profile.py's sums: per forward, each kernel's launches and GPU time and each op's calls and host
    time; and the ops the two models call a different number of times."""
    from types import SimpleNamespace
    profile = _bench_module("torch_profile")
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(name, device, us):
        return SimpleNamespace(name=name, device_type=device, device_time=us if device == cuda else 0.0,
                               self_cpu_time_total=0.0 if device == cuda else us)
    events = [event("gemm", cuda, 4.0), event("gemm", cuda, 6.0), event("aten::conv2d", cpu, 10.0),
              event("aten::add_", cpu, 2.0)]
    kernels, ops = profile.tally(events, 2)
    assert kernels == {"gemm": [1.0, 5.0]}
    assert ops == {"aten::conv2d": [0.5, 5.0], "aten::add_": [0.5, 1.0]}
    assert profile.op_differences({"a": [2, 1.0], "b": [1, 1.0]}, {"a": [2, 3.0], "c": [1, 1.0]}) == \
        [("b", 1, 0), ("c", 0, 1)]


def test_bench_resumes_and_summarises():
    """The model bench's table can be built over several GPU calls: --resume measures only the rows an earlier
    run did not (failed rows again, and the modes --remeasure names), and the summary gives each mode / batch /
    dtype's geometric mean."""
    bench = _bench_module()
    done = [{"model": "a", "batch": 1, "dtype": "float32", "mode": "eager", "ratio": 0.5},
            {"model": "b", "batch": 1, "dtype": "float32", "mode": "eager", "ratio": 2.0},
            {"model": "a", "batch": 1, "dtype": "float32", "mode": "graph", "error": "RuntimeError: x"}]
    remaining = bench.planned(["a", "b"], [1], ["float32"], ["eager", "graph"], bench.resumed(done, set()))
    assert remaining == [("a", 1, "float32", "graph"), ("b", 1, "float32", "graph")]
    again = bench.planned(["a", "b"], [1], ["float32"], ["eager", "graph"], bench.resumed(done, {"eager"}))
    assert len(again) == 4  # --remeasure eager: its rows too
    table = bench.summary(done).splitlines()
    assert "| eager | 1 | float32 | 2 | 1.00 | 1 (2.00) | - | - | 0 |" in table
    assert "| graph | 1 | float32 | 0 | - | 0 | - | - | 1 |" in table


def test_bench_control_shows_each_rows_noise():
    """--control times a copy of the original beside the two models, --torch-layers the network converted on
    PyTorch's conv: the table gives their ratios beside each row's, and the summary their geometric means over the
    rows that have one."""
    bench = _bench_module()
    row = {"model": "a", "batch": 1, "dtype": "float32", "mode": "compile", "original_ms": 2.0,
           "converted_ms": 2.1, "ratio": 1.05, "max_rel_error": 1e-6, "original_max_rel_error": 0.0, "layers": 2,
           "pyconv_layers": 1, "fell_back": {"c1": "compiled: PyTorch's conv"}}
    assert "| 1.05 |" in bench.markdown([row])  # measured without --control (and rows of older tables)
    rows = [dict(row, control_ratio=1.04), dict(row, model="b", ratio=0.9, control_ratio=0.99), dict(row, model="c")]
    assert "| 1.05 (copy 1.04) |" in bench.markdown(rows[:1])
    assert "| compile | 1 | float32 | 3 | 1.00 | 2 (1.05) | 1.01 (2) | - | 0 |" in bench.summary(rows).splitlines()
    rows[1]["torch_layers_ratio"] = 0.95
    assert "| 0.90 (copy 0.99, torch layers 0.95) |" in bench.markdown(rows[1:2])
    assert "| 1.05 |" in bench.markdown(rows[2:])
    assert "| compile | 1 | float32 | 3 | 1.00 | 2 (1.05) | 1.01 (2) | 0.95 (1) | 0 |" in bench.summary(rows).splitlines()


def test_build_calibrates_batch_norms_deterministically():
    """build() gives every batch norm the statistics of two seeded random batches (not the defaults 0 and 1,
    under which deep networks' outputs collapse), the same in every build and dtype."""
    a, b = build("replknet31b_s2", "cpu"), build("replknet31b_s2", "cpu", torch.float64)
    norms = [m for m in a.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and not any(m.training for m in a.modules())
    assert all(float((m.running_var - 1).abs().max()) > 1e-3 for m in norms), "calibrated, not the defaults"
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x.double(), y.double()) if x.is_floating_point() else torch.equal(x, y), name
    assert [m.momentum for m in norms] == [0.1] * len(norms), "momentum restored"
