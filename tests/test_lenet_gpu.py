"""LeNet-5 end to end on the GPU: the device resize and softmax/argmax against NumPy, the whole
network of every variant against the cpu network (exact: the same predictions; reduced precision:
within network.py's bounds), the multi-stream / multi-GPU pipeline writing every output exactly
once, and the command with both precisions, the floors and the JSON file."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import pyconv
from conftest import family_skip, filter_hw, requires_gpu
from pyconv.cli import main
from pyconv.lenet import data, device_ops, host_net, model, network, pipeline
from pyconv.lenet.progress import Progress

pytestmark = requires_gpu

GPU_SUBSET = 2000  # images every variant is checked on (all 10,000 with `--variant all`)
QUIET = Progress(enabled=False)


@pytest.fixture(scope="module")
def test_set():
    return data.load_split("test")


@pytest.fixture(scope="module")
def cpu_subset(test_set):
    images, labels = test_set[0][:GPU_SUBSET], test_set[1][:GPU_SUBSET]
    return images, labels, host_net.run(images, len(images), model.load_weights(), QUIET)


def run_gpu(images, mode, batch=None, streams=2, devices=(0,)):
    return pipeline.run_gpu(pipeline.pinned_images(images), mode, model.load_weights(), list(devices), streams,
                            batch or len(images), repeats=1, probabilities=True)


# ---- the device helpers ----

@pytest.mark.parametrize("in_hw, out_size, dtype", [((28, 28), 86, "float32"), ((28, 28), 86, "float16"),
                                                    ((20, 31), 41, "float32"), ((5, 3), 2, "float32")])
def test_device_resize_is_numpy_resize(rng, in_hw, out_size, dtype):
    n = 37
    images = rng.integers(0, 256, (n,) + in_hw, dtype=np.uint8)
    d_images = pyconv.DeviceArray.from_host(images)
    d_y = pyconv.DeviceArray((n, 1, out_size, out_size), dtype)
    d_y.fill_bytes(0xFF)  # poison: NaN in both dtypes
    device_ops.resize_bilinear_u8(d_images.ptr, n, in_hw, d_y.ptr, (out_size, out_size), dtype, None)
    got = d_y.get()
    expected = data.resize(images, out_size)
    if dtype == "float32":
        assert np.array_equal(got, expected)  # bit for bit: float64 without FMA, rounded once
    else:  # rounded once from float64 here, via float32 there: at most one fp16 step apart
        assert not np.isnan(got).any()
        assert np.all(np.abs(got.astype(np.float32) - expected) <= np.spacing(expected.astype(np.float16)))


def test_device_softmax_argmax(rng):
    n, k = 1001, 10
    logits = rng.standard_normal((n, k)).astype(np.float32) * 8
    logits[0] = 1.0                          # a tie over the whole row: class 0
    logits[1, [3, 7]] = logits[1].max() + 1  # a tie between 3 and 7: class 3
    d_logits = pyconv.DeviceArray.from_host(logits)
    d_p, d_c = pyconv.DeviceArray((n, k), np.float32), pyconv.DeviceArray((n,), np.int32)
    d_p.fill_bytes(0xFF)
    d_c.fill_bytes(0xFF)
    device_ops.softmax_argmax(d_logits.ptr, n, k, d_p.ptr, d_c.ptr, None)
    z = np.exp(logits.astype(np.float64) - logits.max(1, keepdims=True))
    np.testing.assert_allclose(d_p.get(), z / z.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.array_equal(d_c.get(), logits.argmax(1))


@pytest.mark.parametrize("k", [1, 1024])
def test_device_softmax_argmax_row_lengths(rng, k):
    logits = rng.standard_normal((5, k)).astype(np.float32)
    d_logits, d_c = pyconv.DeviceArray.from_host(logits), pyconv.DeviceArray((5,), np.int32)
    device_ops.softmax_argmax(d_logits.ptr, 5, k, 0, d_c.ptr, None)  # no probabilities wanted
    assert np.array_equal(d_c.get(), logits.argmax(1))


def test_device_helpers_refuse_bad_sizes():
    d = pyconv.DeviceArray((4, 2048), np.float32)
    refused = (pyconv.ConvError, pyconv.ConvUnsupportedError)
    with pytest.raises(refused, match="k must be"):
        device_ops.softmax_argmax(d.ptr, 4, 2048, 0, d.ptr, None)
    with pytest.raises(refused, match="n must be"):
        device_ops.resize_bilinear_u8(d.ptr, -1, (28, 28), d.ptr, (86, 86), "float32", None)


# ---- the whole network against cpu ----

def _variants(exact: bool):
    return [pytest.param(v.name, id=v.name, marks=pytest.mark.skipif(
                not v.available, reason=f"{v.name} is not available here: {v.reason}"))
            for v in pyconv.variant_info() if v.on_device and v.exact == exact]


@pytest.mark.parametrize("name", _variants(exact=True))
def test_exact_variant_predicts_as_cpu(cpu_subset, name):
    images, labels, reference = cpu_subset
    family_skip(name)
    if filter_hw(name, (7, 7)) != (7, 7):
        pytest.skip(f"{name} computes {filter_hw(name, (7, 7))} filters only; LeNet's are 7x7")
    result = run_gpu(images, network.Mode.of(name, "exact"), batch=700)  # three batches, the last shorter
    assert np.array_equal(result.classes, reference.classes)
    np.testing.assert_allclose(result.probabilities, reference.probabilities, atol=1e-5)


@pytest.mark.parametrize("name", _variants(exact=False))
def test_reduced_precision_variant_within_bounds(cpu_subset, name):
    images, labels, reference = cpu_subset
    result = run_gpu(images, network.Mode.of(name, "fast"))
    agreement, problem = network.agreement_problem(result, reference, labels, exact=False)
    assert not problem, problem


@pytest.mark.parametrize("precision", ["exact", "fast"])
def test_auto(cpu_subset, precision):
    images, labels, reference = cpu_subset
    result = run_gpu(images, network.Mode.of("auto", precision))
    agreement, problem = network.agreement_problem(result, reference, labels, exact=precision == "exact")
    assert not problem, problem
    assert set(result.variants) == {layer.name for layer in network.LAYERS}


# ---- the pipeline ----

def _pipeline_writes_every_output(test_set, devices):
    images = test_set[0][:23]
    weights = model.load_weights()
    mode = network.Mode.of("direct", "exact")
    pipe = pipeline.Pipeline(mode, weights, devices, streams=3, batch=5, total=23, probabilities=True)
    h_images = pipeline.pinned_images(images)
    classes = pyconv.pinned_empty((23,), np.int32)
    probabilities = pyconv.pinned_empty((23, 10), np.float32)
    classes.fill(-1)
    probabilities.fill(np.nan)  # poison: every element must be written by some batch
    assert pipe.run(h_images, classes, probabilities) > 0
    reference = host_net.run(images, 23, weights, QUIET)
    assert np.array_equal(classes, reference.classes)
    np.testing.assert_allclose(probabilities, reference.probabilities, atol=1e-5)
    wall, stages = pipe.time_one_batch(h_images, classes)
    assert wall > 0 and set(stages) == set(pipeline.device_net.STAGES) and all(v >= 0 for v in stages.values())


def test_pipeline_writes_every_output(test_set):
    _pipeline_writes_every_output(test_set, [0])


@pytest.mark.skipif(pyconv.device_count() < 2, reason="needs two GPUs")
def test_pipeline_over_every_gpu(test_set):
    _pipeline_writes_every_output(test_set, list(range(pyconv.device_count())))


def test_pipeline_refuses_wrong_host_arrays(test_set):
    pipe = pipeline.Pipeline(network.Mode.of("direct", "exact"), model.load_weights(), [0], 1, 4, 8)
    images = pipeline.pinned_images(test_set[0][:8])
    with pytest.raises(ValueError, match="classes"):
        pipe.run(images, np.empty(8, np.int64))
    with pytest.raises(ValueError, match="images"):
        pipe.run(images[:4], np.empty(8, np.int32))


# ---- the command ----

def test_command_both_precisions_floors_json(tmp_path, capsys):
    path = tmp_path / "lenet.json"
    rc = main(["lenet", "--batch", "1000", "--images", "3000", "--precision", "both", "--floors", "--no-torch",
               "--repeats", "2", "--json", str(path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "% of floor" in out and "streamed: 3,000" in out and "million images/s" in out
    record = json.loads(path.read_text())
    for precision in ("exact", "fast"):
        entry = record[precision]
        assert entry["streamed"]["images"] == 3000 and entry["end_to_end_ms"]["median"] > 0
        assert [s["stage"] for s in entry["stages"]] == list(pipeline.device_net.STAGES)
        assert all(s["floor_ms"] > 0 for s in entry["stages"])


def test_command_without_torch_says_how_to_compare(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert main(["lenet", "--batch", "200", "--repeats", "1"]) == 0
    assert "pip install pyconv[torch]" in capsys.readouterr().out


def test_command_compares_with_torch(capsys):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    assert main(["lenet", "--batch", "500", "--precision", "both", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    for config in ("fp32", "tf32", "fp16 channels-last"):
        assert f"cuDNN, {config}, same images and weights" in out
