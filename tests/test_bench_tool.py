"""The benchmark tool (pyconv.bench, cuda/bench/ceilings.cu, cuda/bench/timing.cu): suites and CSV shapes, the
roofline arithmetic, the measuring protocol, the CLI end to end on the CPU, and on a GPU the measured
ceilings, conv2d_time (every operand set computed correctly inside the captured graph) and cuDNN."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import _lib
from pyconv.bench import ceilings, operands, roofline, shapes, summary, timing

LENET_C1_B100 = shapes.Shape("lenet/C1", 100, 1, 86, 86, 4, 7, 7)


def bench_cli(cwd, *args):
    """`python -m pyconv bench` on the pyconv this test imported: run from cwd (outside the checkout,
    where `-m` would pick the source tree's pyconv/ first) with that package's parent on the path."""
    path = [str(Path(pyconv.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    return subprocess.run([sys.executable, "-m", "pyconv", "bench", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)


def test_lenet_suite_is_both_layers_at_four_batches():
    suite = shapes.load_suite("lenet")
    assert [(s.name, s.B) for s in suite[:2]] == [("lenet/C1", 100), ("lenet/C3", 100)]
    assert sorted({s.B for s in suite}) == [100, 1000, 5000, 10000] and len(suite) == 8
    assert suite[1].out_hw == (34, 34) and suite[0].out_hw == (80, 80)


def test_cnn5_suite_ships_and_says_which_layers_were_grouped():
    suite = shapes.load_suite("cnn5")
    assert len(suite) == 2 * 123 and {s.B for s in suite} == {1, 32}
    grouped = [s for s in suite if s.note]
    assert len(grouped) == 2 * 3 and all("group=2" in s.note for s in grouped)
    conv1 = next(s for s in suite if s.name == "alexnet/conv1")
    assert (conv1.KH, conv1.stride, conv1.out_hw) == (11, (4, 4), (55, 55))


def test_csv_shapes_in_the_anchor_format_and_errors(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("name,B,C,H,W,M,KH,KW,SH,SW,PH,PW,G,extra\n"
                    "a,2,3,17,13,5,3,5,2,1,1,2,1,x\n"
                    "b,4,3,17,13,5,3,5,2,1,1,2,1,x\n")
    a, b = shapes.load_suite(str(path))
    assert (a.B, a.KH, a.KW, a.stride, a.pad, a.dilation) == (2, 3, 5, (2, 1), (1, 2), (1, 1))
    assert [s.B for s in shapes.load_suite(str(path), [7, 8])] == [7, 8]  # one geometry: deduplicated
    path.write_text("C,H,W,M\n1,8,8,2\n")
    with pytest.raises(pyconv.ConvError, match="'kh' or 'k'"):
        shapes.load_suite(str(path))
    with pytest.raises(pyconv.ConvError, match="lenet, cnn5 or a CSV"):
        shapes.load_suite("no-such-suite")


def test_flops_and_bytes_match_the_anchor_table():
    # shared/anchors/h100_cudnn_lenet.csv: lenet_c1_b100 is 0.2509 GFLOP and 13.20 MB in fp32
    assert roofline.flops(LENET_C1_B100) / 1e9 == pytest.approx(0.2509, abs=1e-4)
    assert roofline.min_bytes(LENET_C1_B100) / 1e6 == pytest.approx(13.20, abs=0.01)


def test_floor_is_the_larger_of_memory_and_compute():
    c = ceilings.Ceilings("gpu", "test", 1000.0, {"fp32": 50_000.0, "fp16_tensor": 500_000.0}, 1 << 20)
    fp32 = roofline.floor(LENET_C1_B100, "fp32", c)
    assert fp32.memory_ms == pytest.approx(13.20e6 / 1000e9 * 1e3, rel=1e-3)
    assert fp32.compute_ms == pytest.approx(0.2509e9 / 50_000e9 * 1e3, rel=1e-3)
    assert fp32.ms == max(fp32.memory_ms, fp32.compute_ms) and fp32.bound == "memory"
    assert roofline.floor(LENET_C1_B100, "tf32_tensor", c).compute_ms == 0.0  # a unit it lacks
    s = roofline.summary(LENET_C1_B100, "fp32", c, 2 * fp32.ms)
    assert s["pct_of_floor"] == pytest.approx(50.0)


@pytest.mark.parametrize("name, idea, exact, unit", [
    ("direct", "anything", True, "fp32"),
    ("wmma", "implicit GEMM on tensor cores (wmma): fp16 operands", False, "fp16_tensor"),
    ("wmma_tf32", "tensor cores, tf32 operands", False, "tf32_tensor"),
    ("fp16", "half2 FMAs over pixel pairs", False, "fp16"),
    ("mystery", "a summation trick", False, "fp16_tensor"),  # names no unit: the fastest
])
def test_unit_of_a_variant(name, idea, exact, unit):
    assert roofline.unit_of(name, idea, True, exact, {}) == unit
    assert roofline.unit_of(name, idea, True, exact, {name: "fp16"}) == "fp16"


def test_operand_sets_cover_twice_the_cache_within_memory():
    one = roofline.min_bytes(LENET_C1_B100)
    assert operands.set_count(LENET_C1_B100, 50 << 20, 1 << 40) == -(-2 * (50 << 20) // one)
    assert operands.set_count(LENET_C1_B100, 50 << 20, 3 * one) == 1
    tiny = shapes.Shape("tiny", 1, 1, 4, 4, 1, 1, 1)
    assert operands.set_count(tiny, 50 << 20, 1 << 40) == operands.MAX_SETS


def test_measure_probes_then_fills_the_budget():
    calls_seen = []

    def run(calls, warmup, reps):
        calls_seen.append((calls, reps))
        return [0.01] * reps  # 10 us per call

    t = timing.measure(timing.Side(run, 4), budget_ms=20)
    assert calls_seen[0] == (4, timing.PROBE_REPS)  # the probe: one call per set
    assert t.calls == 100 and t.reps == 20 and t.median_ms == 0.01

    slow = timing.measure(timing.Side(lambda calls, warmup, reps: [50.0] * reps, 2), budget_ms=20)
    assert slow.reps == timing.PROBE_REPS and slow.calls == 2  # a slow case keeps its probe


def test_bench_cli_times_the_cpu_variant(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("name,C,H,W,M,K,pad\nsmall,3,12,12,4,3,1\n")
    result = bench_cli(tmp_path, "--suite", str(path), "--batch", "2", "--variants", "cpu", "direct", "--no-cudnn",
                       "--json", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv"))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    row, direct = data["rows"]
    assert row["status"] == "ok" and row["variant"] == "cpu" and row["B"] == 2
    if pyconv.device_count() == 0:  # a GPU variant here is listed with the library's reason, not timed
        assert direct["status"] == "unavailable" and direct["message"] and direct["median_ms"] is None
    else:
        assert direct["status"] == "ok"
    assert row["median_ms"] > 0 and row["pct_of_floor"] > 0 and row["floor_ms"] > 0
    assert "cpu" in data["ceilings"] and data["ceilings"]["cpu"]["gflops"]["fp32"] > 0
    assert (tmp_path / "r.csv").read_text().splitlines()[0].startswith("shape,B,C")
    assert "small" in result.stdout and "summary:" in result.stdout
    assert summary.main([str(tmp_path / "r.json")]) == 0


def test_bench_cli_names_an_unknown_variant(tmp_path):
    result = bench_cli(tmp_path, "--suite", "lenet", "--batch", "1", "--variants", "cpu", "nonesuch")
    assert result.returncode == 1 and "unknown variant(s) nonesuch" in result.stderr


def test_gpu_entry_points_say_why_without_a_gpu():
    if pyconv.device_count() > 0:
        pytest.skip("a GPU is present: the GPU tests below cover these entry points")
    f, l = _lib.ffi(), _lib.lib()
    assert l.conv_measure_ceilings(f.new("conv_ceilings*")) in (-3, -4)  # NO_CUDA_BUILD or NO_DEVICE
    assert f.string(l.conv_last_error()).decode()


@requires_gpu
def test_measured_ceilings_are_plausible():
    c = ceilings.measure_gpu(pyconv.device_name(0))
    assert 50 < c.copy_gbytes_per_s < 20_000          # GB/s: from a laptop GPU to HBM3e
    assert 1_000 < c.rate("fp32") < 500_000           # GFLOP/s
    assert c.rate("fp16") > 0.9 * c.rate("fp32")       # half2 is never slower than fp32
    if c.rate("fp16_tensor"):
        assert c.rate("fp16_tensor") > 2 * c.rate("fp32")
    assert c.cache_bytes > 0


@requires_gpu
def test_conv2d_time_computes_every_set_inside_the_graph(rng):
    s = shapes.Shape("t", 3, 4, 20, 18, 8, 3, 3, pad=(1, 1))
    sets = operands.OperandSets(s, 3, True, 0, rng)
    for y in sets.ys:
        y.fill_bytes(0xFF)  # NaN: an unwritten output fails
    params, _ = pyconv.api.make_params(s.x_shape, s.w_shape, s.stride, s.pad, s.dilation)
    side = timing.device_run(pyconv.api.variant_id("direct"), params, sets, None, 0)
    assert side.min_calls == 3
    times = side.run(5, 1, 4)
    assert len(times) == 4 and all(t > 0 for t in times)
    for x, w, y in zip(sets.xs, sets.ws, sets.ys):
        assert rel_l2(y.get(), conv2d_reference(x.get(), w.get(), padding=(1, 1))) <= 1e-5


@requires_gpu
def test_conv2d_time_refuses_the_host_variant():
    s = shapes.Shape("t", 1, 1, 8, 8, 1, 3, 3)
    sets = operands.OperandSets(s, 1, True, 0)
    params, _ = pyconv.api.make_params(s.x_shape, s.w_shape, 1, 0, 1)
    with pytest.raises(pyconv.ConvError, match="runs on the host"):
        timing.device_run(pyconv.api.variant_id("cpu"), params, sets, None, 0).run(1, 0, 1)


@requires_gpu
def test_bench_cli_on_the_gpu_with_cudnn_beside(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("name,C,H,W,M,K,pad\nsmall,3,24,24,8,3,1\n")
    result = bench_cli(tmp_path, "--suite", str(path), "--batch", "4", "--variants", "direct", "auto", "auto_fast",
                       "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert all(r["median_ms"] > 0 and r["n_sets"] >= 1 for r in rows)
    try:
        import torch
        has_cuda_torch = torch.cuda.is_available()
    except ImportError:
        has_cuda_torch = False
    if has_cuda_torch:
        assert all(r["cudnn_ms"] and r["cudnn_ms"] > 0 for r in rows), [r["cudnn_note"] for r in rows]
    else:
        assert all(r["cudnn_ms"] is None and r["cudnn_note"] for r in rows)
