"""pyconv.torch.convert with what PyTorch users attach to convs, and report's table.

Hooks (forward, pre, with kwargs, always_call, full backward) keep running on the modules they were
registered on and see what they saw on the unconverted model: a conv whose output a hook sees, or whose
ReLU / pool has hooks, is not fused, and report says why; with inplace=True the handles still remove
them. Pruned (torch.nn.utils.prune), hook-style normalised (torch.nn.utils.weight_norm / spectral_norm)
and parametrized (parametrizations.weight_norm, spectral_norm, a custom parametrization) convs compute with the parametrized weight on every forward and keep the original's
state_dict keys. report(model) prints a table and is still the {layer: decisions} dict.

CPU tensors (the cpu variant), random weights and data from the `rng` fixture's seed, compared with the
unconverted model to a max relative error of 1e-5."""
import copy

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

from torch import nn  # noqa: E402
from torch.nn.utils import parametrizations, parametrize, prune  # noqa: E402
# no_tf32 applies to every test here
from torch_support import assert_close, gen, no_tf32, uniform  # noqa: E402,F401

import pyconv  # noqa: E402
import pyconv.torch as pct  # noqa: E402

OURS = dict(engine="pyconv", fallback=False)  # every converted layer on pyconv, or an error
INPLACE = pytest.mark.parametrize("inplace", [False, True], ids=["copy", "inplace"])


def _net():
    """conv, ReLU, pool, conv, ReLU: what convert fuses when nothing is hooked."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 4, 3, padding=1), nn.ReLU()).eval()


def _convert(model, inplace):
    """(reference, converted): an unconverted copy made first, and convert's answer."""
    reference = copy.deepcopy(model)
    return reference, pct.convert(model, inplace=inplace, **OURS)


# ---- hooks ----

def _hook_all(conv, seen: list):
    """Forward pre-hooks and hooks of every kind on conv, each recording what it sees in `seen`; the
    kwargs pre-hook scales the input and the plain hook the output, so that their answers count too."""
    conv.register_forward_pre_hook(lambda m, args: seen.append(("pre", args[0].clone())))
    conv.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 0.5,), kwargs), with_kwargs=True)
    conv.register_forward_hook(lambda m, args, out: seen.append(("out", out.clone())) or out * 2)
    conv.register_forward_hook(lambda m, args, kwargs, out: seen.append(("kwargs", args[0].clone(), out.clone())),
                               with_kwargs=True, always_call=True)


@INPLACE
def test_forward_hooks_see_what_they_saw(gen, inplace):
    model = _net()
    reference, seen_original, seen = copy.deepcopy(model), [], []
    _hook_all(reference[0], seen_original)
    _hook_all(model[0], seen)
    converted = pct.convert(model, inplace=inplace, **OURS)
    assert isinstance(converted[0], pct.Conv2d) and (converted is model) == inplace
    assert converted[0].epilogue is None and type(converted[1]) is nn.ReLU and type(converted[2]) is nn.MaxPool2d
    assert converted[3].epilogue == "relu", "the unhooked conv still fuses"
    x = uniform(gen, 2, 3, 10, 10)
    with torch.no_grad():
        assert_close(converted(x), reference(x))
    assert [s[0] for s in seen] == ["pre", "out", "kwargs"] == [s[0] for s in seen_original]
    for ours, theirs in zip(seen, seen_original):
        for a, b in zip(ours[1:], theirs[1:]):
            assert_close(a, b)
    assert pct.report(converted).not_fused == {"0": "ReLU not fused: a hook sees this conv's output"}


def test_handles_remove_hooks_after_convert_inplace(gen):
    model = _net()
    conv, calls = model[0], []
    handles = [conv.register_forward_pre_hook(lambda m, args: calls.append("pre")),
               conv.register_forward_pre_hook(lambda m, args, kwargs: calls.append("pre kwargs"), with_kwargs=True),
               conv.register_forward_hook(lambda m, args, out: calls.append("out")),
               conv.register_forward_hook(lambda m, args, kwargs, out: calls.append("out kwargs"), with_kwargs=True,
                                          always_call=True),
               conv.register_full_backward_hook(lambda m, grad_in, grad_out: calls.append("backward"))]
    converted = pct.convert(model, inplace=True, **OURS)
    assert converted[0] is conv and isinstance(conv, pct.Conv2d), "the same module object, now ours"
    x = uniform(gen, 2, 3, 10, 10).requires_grad_()
    converted(x).sum().backward()
    assert calls == ["pre", "pre kwargs", "out", "out kwargs", "backward"]
    for handle in handles:
        handle.remove()
    calls.clear()
    converted(x).sum().backward()
    assert calls == []
    assert not (conv._forward_pre_hooks or conv._forward_pre_hooks_with_kwargs or conv._forward_hooks
                or conv._forward_hooks_with_kwargs or conv._forward_hooks_always_called or conv._backward_hooks)


def test_a_copy_keeps_copies_of_the_hooks(gen):
    """inplace=False: the copy runs the hooks; the handles act on the original (as copy.deepcopy's)."""
    model = _net()
    calls = []
    handle = model[0].register_forward_hook(lambda m, args, out: calls.append(m))
    converted = pct.convert(model, **OURS)
    handle.remove()
    with torch.no_grad():
        converted(uniform(gen, 1, 3, 8, 8))
        model(uniform(gen, 1, 3, 8, 8))
    assert calls == [converted[0]]


@pytest.mark.parametrize("hooked", ["relu", "pool"])
def test_a_hooked_relu_or_pool_is_not_fused(gen, hooked):
    model = _net()
    reference, seen_original, seen = copy.deepcopy(model), [], []
    index = 1 if hooked == "relu" else 2
    reference[index].register_forward_hook(lambda m, args, out: seen_original.append(out.clone()))
    model[index].register_forward_hook(lambda m, args, out: seen.append(out.clone()))
    converted = pct.convert(model, **OURS)
    if hooked == "relu":
        assert converted[0].epilogue is None and type(converted[1]) is nn.ReLU
        assert converted[0].not_fused == "ReLU not fused: the ReLU has hooks"
    else:
        assert converted[0].epilogue == "relu" and type(converted[1]) is nn.Identity
        assert type(converted[2]) is nn.MaxPool2d
        assert converted[0].not_fused == "MaxPool2d not fused: the pool has hooks"
    x = uniform(gen, 2, 3, 10, 10)
    with torch.no_grad():
        assert_close(converted(x), reference(x))
    assert len(seen) == len(seen_original) == 1
    assert_close(seen[0], seen_original[0])


def test_full_backward_hooks_see_the_same_gradients(gen):
    model = _net()
    reference, seen_original, seen = copy.deepcopy(model), [], []
    for net, record in ((reference, seen_original.append), (model, seen.append)):
        net[0].register_full_backward_hook(lambda m, g_in, g_out, record=record: record((g_in[0], g_out[0])))
        net[3].register_full_backward_pre_hook(lambda m, grad_out, record=record: record((grad_out[0],)))
    converted = pct.convert(model, **OURS)
    assert converted[0].epilogue is None and converted[3].epilogue is None, "both see the conv's gradient"
    x = uniform(gen, 2, 3, 10, 10).requires_grad_()
    grad = uniform(gen, 2, 4, 5, 5)
    converted(x).backward(grad)
    x_grad = x.grad.clone()
    x.grad = None
    reference(x).backward(grad)
    assert_close(x_grad, x.grad)
    assert len(seen) == len(seen_original) == 2
    for ours, theirs in zip(seen, seen_original):
        for a, b in zip(ours, theirs):
            assert_close(a, b)
    for ours, theirs in zip(converted.parameters(), reference.parameters()):
        assert_close(ours.grad, theirs.grad)


def test_a_shared_conv_is_not_fused(gen):
    """One conv in two places: fusing the ReLU after one would apply it at the other too."""
    conv = nn.Conv2d(4, 4, 3, padding=1)
    model = nn.Sequential(nn.Sequential(conv, nn.ReLU()), conv).eval()
    reference, converted = _convert(model, False)
    assert converted[0][0] is converted[1] and converted[1].epilogue is None
    assert converted[1].not_fused == "ReLU not fused: this conv also runs elsewhere in the model"
    x = uniform(gen, 2, 4, 6, 6)
    with torch.no_grad():
        assert_close(converted(x), reference(x))


# ---- pruned and parametrized convs ----

@INPLACE
def test_pruned_conv(gen, inplace):
    model = _net()
    reference = copy.deepcopy(model)  # before pruning: deepcopy refuses a pruned model (its weight has a grad_fn)
    for m in (model, reference):
        prune.l1_unstructured(m[0], "weight", 0.5)
        prune.l1_unstructured(m[3], "bias", 0.5)
    keys = list(model.state_dict())
    converted = pct.convert(model, inplace=inplace, **OURS)
    assert list(converted.state_dict()) == keys and "0.weight_orig" in keys and "0.weight_mask" in keys
    assert isinstance(converted[0].epilogue, pyconv.ReluMaxPool), "pruning's pre-hook does not stop fusion"
    x = uniform(gen, 2, 3, 10, 10)
    with torch.no_grad():
        assert_close(converted(x), reference(x))
        for m in (converted, reference):  # a changed mask counts on the next forward
            m[0].weight_mask[:2].zero_()
        assert_close(converted(x), reference(x))
    for m in (converted, reference):
        prune.remove(m[0], "weight")
    assert isinstance(converted[0], pct.Conv2d) and isinstance(converted[0].weight, nn.Parameter)
    with torch.no_grad():
        assert_close(converted(x), reference(x))


@INPLACE
@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")
@pytest.mark.parametrize("norm", ["weight_norm", "spectral_norm"])
def test_hook_style_norm_on_conv1d(gen, inplace, norm):
    """torch.nn.utils.weight_norm / spectral_norm (forward pre-hooks computing `weight`, as on the Conv1d
    layers of many audio models): a copy and the model compute the same."""
    model = nn.Sequential(nn.Conv1d(3, 6, 5, padding=2), nn.ReLU(), nn.Conv1d(6, 4, 3)).eval()
    reference = copy.deepcopy(model)
    for m in (model, reference):
        getattr(torch.nn.utils, norm)(m[0])
    reference.load_state_dict(model.state_dict())  # spectral_norm's random start vectors too
    keys = list(model.state_dict())
    converted = pct.convert(model, inplace=inplace, **OURS)
    assert list(converted.state_dict()) == keys and converted[0].epilogue == "relu"
    x = uniform(gen, 2, 3, 19)
    with torch.no_grad():
        assert_close(converted(x), reference(x))


class _Symmetric(nn.Module):
    """A custom parametrization: the kernel's spatial part made symmetric."""

    def forward(self, w):
        return (w + w.transpose(-1, -2)) / 2


PARAMETRIZE = {
    "weight_norm": lambda conv: parametrizations.weight_norm(conv),
    "spectral_norm": lambda conv: parametrizations.spectral_norm(conv),
    "custom": lambda conv: parametrize.register_parametrization(conv, "weight", _Symmetric()),
}


@INPLACE
@pytest.mark.parametrize("kind", sorted(PARAMETRIZE))
def test_parametrized_conv(gen, inplace, kind):
    model = _net()
    PARAMETRIZE[kind](model[0])
    PARAMETRIZE[kind](model[3])
    keys = list(model.state_dict())
    reference, converted = _convert(model, inplace)
    assert list(converted.state_dict()) == keys
    conv = converted[0]
    assert parametrize.is_parametrized(conv, "weight") and isinstance(conv, pct.Conv2d)
    assert parametrize.type_before_parametrizations(conv) is pct.Conv2d
    x = uniform(gen, 2, 3, 10, 10)
    with torch.no_grad():
        assert_close(converted(x), reference(x))
        for ours, theirs in zip(conv.parametrizations.weight.parameters(),
                                reference[0].parametrizations.weight.parameters()):
            noise = uniform(gen, *ours.shape)  # a changed original counts on the next forward
            ours.add_(noise), theirs.add_(noise)
        assert_close(converted(x), reference(x))
    converted.load_state_dict(reference.state_dict())
    for m in (converted, reference):
        parametrize.remove_parametrizations(m[0], "weight")
    assert type(converted[0]) is pct.Conv2d, "removing the parametrization leaves our module"
    with torch.no_grad():
        assert_close(converted(x), reference(x))


def test_parametrized_conv_trains_the_same(gen):
    """Gradients reach the parametrization's originals as on the unconverted model."""
    model = _net().train()
    parametrizations.weight_norm(model[0])
    reference, converted = _convert(model, False)
    x, grad = uniform(gen, 2, 3, 10, 10), uniform(gen, 2, 4, 5, 5)
    converted(x).backward(grad)
    reference(x).backward(grad)
    assert "0.parametrizations.weight.original0" in dict(converted.named_parameters())
    for ours, theirs in zip(converted.parameters(), reference.parameters()):
        assert_close(ours.grad, theirs.grad)


def test_parametrized_conv1d_root_with_a_hook(gen):
    """The model itself a weight-normalised, hooked Conv1d: converted in place of the same object."""
    conv = parametrizations.weight_norm(nn.Conv1d(3, 5, 3, padding=1))
    seen = []
    handle = conv.register_forward_hook(lambda m, args, out: seen.append(out))
    reference = copy.deepcopy(conv)
    same = pct.convert(conv, inplace=True, **OURS)
    assert same is conv and parametrize.type_before_parametrizations(conv) is pct.Conv1d
    x = uniform(gen, 2, 3, 11)
    with torch.no_grad():
        assert_close(conv(x), reference(x))
    assert len(seen) == 2, "the hook ran on both (deepcopy copied it onto the reference)"
    handle.remove()
    with torch.no_grad():
        conv(x)
    assert len(seen) == 2


def test_from_torch_refuses_a_computed_weight_in_words():
    conv = nn.Conv2d(3, 4, 3)
    prune.l1_unstructured(conv, "weight", 0.5)
    with pytest.raises(pyconv.ConvError, match="Conv2d.adopt"):
        pct.Conv2d.from_torch(conv)


def test_a_refused_option_leaves_the_model_as_it_was():
    model = _net()
    with pytest.raises(pyconv.ConvError):
        pct.convert(model, variant="no_such_variant", inplace=True)
    assert type(model[0]) is nn.Conv2d and "variant" not in vars(model[0])
    with pytest.raises(pyconv.ConvError, match="takes an nn.Conv2d"):
        pct.Conv2d.adopt(nn.Conv1d(1, 1, 1))


# ---- report ----

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _net()
        self.spare = nn.Conv2d(3, 3, 1)  # never called

    def forward(self, x):
        return self.body(x)


def test_report_prints_a_table_and_is_the_dict(gen):
    pct.clear()  # decisions are kept per layer shape: none from other tests
    model = _Net().eval()
    model.body[0].register_forward_hook(lambda m, args, out: None)
    converted = pct.convert(model, engine="fastest")
    with torch.no_grad():
        converted(uniform(gen, 1, 3, 8, 8))
        converted(uniform(gen, 2, 3, 10, 10))
    report = pct.report(converted)
    assert isinstance(report, dict) and set(report) == {"body.0", "body.3", "spare"}
    assert len(report["body.0"]) == len(report["body.3"]) == 2 and report["spare"] == []
    assert report["body.0"][0]["input"] == (1, 3, 8, 8) and report["body.3"][1]["epilogue"] == "relu"
    assert all(r["engine"] in ("pyconv", "torch") and r["engine_captured"] in ("pyconv", "torch")
               and r["torch_host_ms"] > 0 and r["torch_gpu_ms"] is None for r in report["body.3"])  # host: no graphs
    assert report.not_fused == {"body.0": "ReLU not fused: a hook sees this conv's output"}

    text = str(report)
    lines = text.splitlines()
    assert repr(report) == text and len(lines) == 2 + 5  # header, rule, 2 + 2 + 1 rows
    assert lines[0].split() == ["layer", "input", "device", "dtype", "layout", "epilogue", "engine", "in", "graphs",
                                "compiled", "variant[config]", "ours", "host", "torch", "host", "why"]  # no GPU times
    assert set(lines[1]) == {"-", " "} and max(len(line) for line in lines) <= 170
    # compiled: our op where every input ran ours in both modes (engine "fastest"); a layer not run: PyTorch's conv
    for name, records in report.items():
        ours = bool(records) and all(r["engine"] == r["engine_captured"] == "pyconv" for r in records)
        assert report.compiled[name] == ("pyconv" if ours else "torch")
    for name in report:
        assert any(line.startswith(name + " ") for line in lines[2:])
    assert "1x3x8x8" in text and "2x8x5x5" in text and "not run yet" in text
    row = next(line for line in lines if line.startswith("body.0 "))
    assert "ReLU not fused" in row and row.endswith("..."), "the note first, a long why cut"
    assert "..." not in report["body.0"][0]["why"], "the data keeps the whole text"
    wide = report.table(why_width=1000)
    assert all(r[-1] in wide for r in report.rows())
    assert len(report.rows()) == 5 and report.rows()[-1][:2] == ("spare", "-")


@pytest.mark.parametrize("engine", ["pyconv", "torch", "fastest"])
def test_a_converted_model_that_has_run_copies_and_saves(engine, gen):
    """copy.deepcopy, pickle and torch.save (pickle protocol 2) of a converted model after its forward calls:
    the layers' caches (the engine's plans and decisions) stay behind, and the copy gives the same result,
    deciding again at its first call. Was a TypeError ("cannot pickle '_cffi_backend._CDataBase'" /
    "cannot pickle 'module' object")."""
    import io
    import pickle
    model = pct.convert(nn.Sequential(_net(), nn.Flatten(1), nn.Unflatten(1, (4, 64)),
                                      nn.Conv1d(4, 6, 3, padding=1)).eval(), engine=engine)
    x = uniform(gen, 2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        model(x)  # a second call: what the layers remembered
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
                       torch.load(buffer, weights_only=False)):
            assert not any("_pyconv_decided" in vars(m) for m in copied.modules())
            assert torch.equal(copied(x), expected) and torch.equal(copied(x), expected)


def test_a_converted_conv_that_has_run_fuses_with_batch_norm(gen):
    """torch.nn.utils.fusion.fuse_conv_bn_eval deep-copies the conv: it works on a converted layer after its
    first calls (the copy leaves the engine's decisions behind) and gives conv then batch norm."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    conv, bn = nn.Conv2d(3, 8, 3, padding=1).eval(), nn.BatchNorm2d(8).eval()
    with torch.no_grad():
        bn.running_mean.copy_(uniform(gen, 8))
        bn.running_var.copy_(uniform(gen, 8).abs() + 0.5)
    x = uniform(gen, 2, 3, 12, 12)
    with torch.no_grad():
        expected = bn(conv(x))
        layer = pct.Conv2d.from_torch(conv, **OURS)
        layer(x), layer(x)
        fused = fuse_conv_bn_eval(layer, bn)
        assert type(fused) is pct.Conv2d and "_pyconv_decided" not in vars(fused)
        assert_close(fused(x), expected)
