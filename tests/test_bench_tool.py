"""The benchmark tool (pyconv.bench, cuda/bench/ceilings.cu, cuda/bench/timing.cu): suites and CSV shapes, the
comparisons, the roofline arithmetic, the measuring protocol, the summary and its tables (on fake timings),
the CLI end to end on the CPU, and on a GPU the measured ceilings, conv2d_time and the PyTorch graph timer
(every operand set computed correctly inside the captured graph) and cuDNN beside every comparison."""
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import _lib
from pyconv.bench import ceilings, comparisons, operands, report, roofline, runner, shapes, summary, timing

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


def test_cnn5_suite_ships_with_alexnets_grouped_layers_grouped():
    suite = shapes.load_suite("cnn5")
    assert len(suite) == 2 * 123 and {s.B for s in suite} == {1, 32}
    assert [s.B for s in suite[:123]] == [1] * 123  # batch-major: every layer at B=1 first
    grouped = [s for s in suite if s.groups > 1]
    assert len(grouped) == 2 * 3 and {s.name for s in grouped} == {"alexnet/conv2", "alexnet/conv4", "alexnet/conv5"}
    conv2 = next(s for s in grouped if s.name == "alexnet/conv2")
    assert conv2.groups == 2 and conv2.w_shape == (256, 48, 5, 5)
    conv1 = next(s for s in suite if s.name == "alexnet/conv1")
    assert (conv1.KH, conv1.stride, conv1.out_hw, conv1.groups) == (11, (4, 4), (55, 55), 1)


ANCHORS = Path(__file__).resolve().parent.parent.parent / "shared" / "anchors"


def test_groups_suite_has_every_depthwise_and_grouped_layer_of_the_four_networks():
    suite = shapes.load_suite("groups")
    assert len(suite) == 2 * 33 and [s.B for s in suite] == [1] * 33 + [32] * 33
    nets = {s.name.split("/")[0] for s in suite}
    assert nets == {"mobilenetv2", "efficientnet_b0", "convnext_t", "resnext50"}
    for s in suite:
        assert s.groups > 1 and s.C % s.groups == 0 and s.M % s.groups == 0
        depthwise = s.groups == s.C == s.M
        assert depthwise or (s.name.startswith("resnext50") and s.groups == 32)
        assert s.pad == (s.KH // 2, s.KW // 2)  # 'same' padding: the output is the input / stride
        assert s.out_hw == (-(-s.H // s.stride[0]),) * 2
    # the networks' layer counts: MobileNetV2 17 depthwise blocks, EfficientNet-B0 16, ConvNeXt-T 18, ResNeXt-50 16
    with resources_csv("groups") as rows:
        counts = {}
        for r in rows:
            counts[r["net"]] = counts.get(r["net"], 0) + int(r["n_layers"])
            assert int(r["n_layers"]) == len(r["all_layers"].split(";"))
    assert counts == {"mobilenetv2": 17, "efficientnet_b0": 16, "convnext_t": 18, "resnext50": 16}
    convnext = [s for s in suite if s.name.startswith("convnext_t") and s.B == 1]
    assert [(s.C, s.H, s.KH) for s in convnext] == [(96, 56, 7), (192, 28, 7), (384, 14, 7), (768, 7, 7)]
    mobilenet = next(s for s in suite if s.name == "mobilenetv2/dw0" and s.B == 32)
    assert roofline.flops(mobilenet) / 1e9 == pytest.approx(0.2312, abs=1e-4)  # as the anchor file counts


def resources_csv(suite: str):
    """The rows of a packaged suite file, as a context manager."""
    from contextlib import contextmanager
    from importlib import resources

    @contextmanager
    def rows():
        with resources.as_file(resources.files("pyconv.bench") / "suites" / f"{suite}.csv") as path:
            yield list(csv.DictReader(path.read_text().splitlines()))
    return rows()


def test_modern5_suite_has_every_non_depthwise_layer_of_the_five_networks():
    suite = shapes.load_suite("modern5")
    assert len(suite) == 2 * 124 and [s.B for s in suite] == [1] * 124 + [32] * 124
    assert {s.name.split("/")[0] for s in suite} == {"mobilenetv2", "mobilenetv3_l", "efficientnet_b0", "convnext_t",
                                                     "regnety_400mf"}
    for net in {s.name.split("/")[0] for s in suite}:  # distinct within a network (networks share some)
        geometries = [s.geometry for s in suite if s.B == 1 and s.name.startswith(net + "/")]
        assert len(set(geometries)) == len(geometries)
    for s in suite:
        assert not s.groups == s.C == s.M  # depthwise layers are suite groups's
        assert s.C % s.groups == 0 and s.M % s.groups == 0 and s.KH == s.KW and s.dilation == (1, 1)
    with resources_csv("modern5") as rows:
        counts = {}
        for r in rows:
            counts[r["net"]] = counts.get(r["net"], 0) + int(r["n_layers"])
            assert int(r["n_layers"]) == len(r["all_layers"].split(";"))
            assert r["source"].startswith("pytorch/vision:torchvision/models/")
            s = next(s for s in suite if s.name == f"{r['net']}/{r['layer']}")
            assert s.out_hw == (int(r["out_H"]), int(r["out_W"]))
            assert roofline.flops(s) / 1e9 == pytest.approx(float(r["gflop_n1"]), rel=1e-4)
    # the networks' non-depthwise convs: MobileNetV2 35 (stem, 17 blocks' expansions and projections less the
    # first's expansion, the head), MobileNetV3-Large 47 (stem, 15 blocks' 29, 8 squeeze-excitations' 16, the
    # head), EfficientNet-B0 65 (stem, 16 blocks' 31 and their squeeze-excitations' 32, the head), ConvNeXt-T 4
    # (patchify and 3 downsamplings: its pointwise layers are nn.Linear), RegNetY-400MF 85 (stem, 16 blocks of
    # 1x1, grouped 3x3, two squeeze-excitation convs and 1x1, 4 strided projections)
    assert counts == {"mobilenetv2": 35, "mobilenetv3_l": 47, "efficientnet_b0": 65, "convnext_t": 4,
                      "regnety_400mf": 85}
    patchify = next(s for s in suite if s.name == "convnext_t/k4s4_0")
    assert (patchify.C, patchify.H, patchify.KH, patchify.stride, patchify.out_hw) == (3, 224, 4, (4, 4), (56, 56))


def test_large_kernel_suite_is_depthwise_same_padded_and_sourced():
    suite = shapes.load_suite("large_kernel")
    assert len(suite) == 2 * 31 and {s.B for s in suite} == {1, 32}
    assert {s.name.split("/")[0] for s in suite} == {"replknet31b", "slak_t", "unireplknet_t", "unireplknet_s",
                                                     "inceptionnext_t", "mixnet_m"}
    for s in suite:
        sh, sw = s.stride
        assert s.groups == s.C == s.M and sh == sw in (1, 2) and max(s.KH, s.KW) >= 9
        assert s.pad == (s.KH // 2, s.KW // 2) and s.out_hw == (-(-s.H // sh), -(-s.W // sw))
    assert sum(s.stride == (2, 2) for s in suite) == 2 * 2  # MixNet-M's 9x9 at stride 2
    assert max(s.KH * s.KW for s in suite) == 31 * 31 and {(51, 5), (5, 51), (1, 11), (11, 1)} <= {
        (s.KH, s.KW) for s in suite}
    with resources_csv("large_kernel") as rows:
        assert all(r["source"].count(":") >= 1 and int(r["n_layers"]) >= 1 for r in rows)


def test_a_large_band_runs_right_on_the_host(rng):
    """SLaK's 5x51 band (the widest kernel of the suite), on fewer channels: the cpu variant against float64."""
    x = rng.standard_normal((1, 4, 9, 60)).astype(np.float32)
    w = rng.standard_normal((4, 1, 5, 51)).astype(np.float32)
    y = pyconv.conv2d(x, w, padding=(2, 25), groups=4, variant="cpu")
    assert y.shape == (1, 4, 9, 60)
    assert rel_l2(y, conv2d_reference(x, w, padding=(2, 25), groups=4)) <= 1e-5


@pytest.mark.skipif(not (ANCHORS / "h100_cudnn_groups.csv").is_file(), reason="the shared anchors are not here")
def test_every_anchor_layer_with_cudnn_times_is_in_the_groups_suite():
    suite = {(s.geometry, s.B) for s in shapes.load_suite("groups")}
    anchors = shapes.read_csv(ANCHORS / "h100_cudnn_groups.csv")
    assert len(anchors) == 54
    assert all((a.geometry, a.B) in suite for a in anchors)


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
    with pytest.raises(pyconv.ConvError, match="lenet, cnn5, groups, modern5, large_kernel or a CSV"):
        shapes.load_suite("no-such-suite")
    path.write_text("name,C,H,W,M,K,group\ng,8,9,9,4,3,4\n")
    (g,) = shapes.load_suite(str(path), [2])
    assert g.groups == 4 and g.w_shape == (4, 2, 3, 3) and g.as_dict()["groups"] == 4


def test_flops_and_bytes_match_the_anchor_table():
    # shared/anchors/h100_cudnn_lenet.csv: lenet_c1_b100 is 0.2509 GFLOP and 13.20 MB in fp32
    assert roofline.flops(LENET_C1_B100) / 1e9 == pytest.approx(0.2509, abs=1e-4)
    assert roofline.min_bytes(LENET_C1_B100) / 1e6 == pytest.approx(13.20, abs=0.01)


def test_grouped_and_half_precision_work_and_bytes():
    dw = shapes.Shape("dw", 2, 8, 10, 10, 16, 3, 3, pad=(1, 1), groups=8)  # channel multiplier 2
    assert dw.w_shape == (16, 1, 3, 3)
    assert roofline.flops(dw) == 2 * 2 * 16 * 10 * 10 * 1 * 9
    elements = 2 * 8 * 10 * 10 + 16 * 1 * 9 + 2 * 16 * 10 * 10
    assert roofline.min_bytes(dw) == 4 * elements and roofline.min_bytes(dw, "bfloat16") == 2 * elements
    c = ceilings.Ceilings("gpu", "test", 1000.0, {"fp32": 50_000.0}, 1 << 20)
    assert roofline.floor(dw, "fp32", c, "float16").memory_ms == pytest.approx(2 * elements / 1e12 * 1e3)


def test_floor_is_the_larger_of_memory_and_compute():
    c = ceilings.Ceilings("gpu", "test", 1000.0, {"fp32": 50_000.0, "fp16_tensor": 500_000.0}, 1 << 20)
    fp32 = roofline.floor(LENET_C1_B100, "fp32", c)
    assert fp32.memory_ms == pytest.approx(13.20e6 / 1000e9 * 1e3, rel=1e-3)
    assert fp32.compute_ms == pytest.approx(0.2509e9 / 50_000e9 * 1e3, rel=1e-3)
    assert fp32.ms == max(fp32.memory_ms, fp32.compute_ms) and fp32.bound == "memory"
    assert roofline.floor(LENET_C1_B100, "tf32_tensor", c).compute_ms == 0.0  # a unit it lacks
    s = roofline.summary(LENET_C1_B100, "fp32", c, 2 * fp32.ms)
    assert s["pct_of_floor"] == pytest.approx(50.0)


@pytest.mark.parametrize("name, unit", [
    ("cpu", "fp32"), ("direct", "fp32"), ("implicit_gemm", "fp32"), ("fp16", "fp16"), ("wmma", "fp16_tensor"),
    ("wmma_tf32", "tf32_tensor"), ("mma_fp16", "fp16_tensor"),
])
def test_unit_of_a_variant_is_the_unit_it_declares(name, unit):
    assert roofline.unit_of(name, {}) == unit
    assert roofline.unit_of(name, {name: "fp16"}) == "fp16"


def test_every_variant_declares_a_unit_with_a_ceiling():  # new variants included, without naming them
    for info in pyconv.variant_info():
        assert roofline.unit_of(info.name, {}) in ceilings.UNITS


def test_comparisons_parse_and_pick_what_runs():
    assert [c.name for c in comparisons.parse(["exact", "fast", "half"])] == ["exact", "fast", "fp16", "bf16"]
    assert [c.name for c in comparisons.parse(["all", "fp16"])] == ["exact", "fast", "fp16", "bf16"]
    with pytest.raises(pyconv.ConvError, match="--compare takes"):
        comparisons.parse(["tf32"])
    exact, fast, fp16, bf16 = comparisons.parse(["all"])
    assert (exact.precision, exact.cudnn, exact.dtype, exact.layout) == ("exact", "fp32", "float32", "NCHW")
    assert (fast.precision, fast.cudnn, fast.auto) == ("fast", "tf32", "auto_fast")
    # fp16 / bf16 at cuDNN's accumulation: fp32 sums ("half"), not the fp16 variant's fp16 partial sums
    assert [(c.precision, c.auto) for c in comparisons.parse(["half"])] == [("half", "auto"), ("half", "auto")]
    assert (fp16.dtype, fp16.layout, fp16.w_layout, fp16.cudnn) == ("float16", "NHWC", "MKKC", "fp16")
    assert (bf16.dtype, bf16.cudnn) == ("bfloat16", "bf16")
    assert comparisons.variants_in(exact, []) == ["auto"]
    assert comparisons.variants_in(fast, ["auto", "direct", "auto_fast"]) == ["auto_fast", "direct"]
    assert comparisons.variants_in(comparisons.VARIANTS, ["direct", "auto_fast"]) == ["direct", "auto_fast"]


def _row(shape, b, compare, ms, cudnn_ms, pct=None, cudnn_pct=None, status="ok", variant="auto", precision="fp32"):
    return {"shape": shape, "B": b, "compare": compare, "variant": variant, "resolved": "implicit_gemm",
            "config": "128x64", "status": status, "message": "" if status == "ok" else "why", "unit": "fp32",
            "median_ms": ms, "cudnn_ms": cudnn_ms, "cudnn_precision": precision, "pct_of_floor": pct,
            "cudnn_pct_of_floor": cudnn_pct, "speedup_vs_cudnn": cudnn_ms / ms if ms and cudnn_ms else None}


FAKE_ROWS = [
    _row("a", 1, "exact", 1.0, 2.0, 10.0, 5.0), _row("a", 1, "fast", 1.0, 0.5, 20.0, 40.0, precision="tf32"),
    _row("b", 1, "exact", 4.0, 1.0, 30.0, 60.0), _row("b", 1, "fast", 1.0, 1.0, 50.0, 50.0, precision="tf32"),
    _row("c", 1, "exact", 1.0, 8.0, 50.0, 7.0), _row("c", 1, "fast", None, None, status="unsupported"),
    _row("a", 32, "exact", 1.0, 3.0, 90.0, 30.0), _row("a", 32, "fast", 2.0, None, 45.0, None, precision="tf32"),
]


def test_summary_puts_auto_against_the_fastest_single_variant():
    def variant_row(shape, name, ms, unit="fp32"):
        return dict(_row(shape, 1, "variants", ms, None, variant=name), unit=unit, resolved=name)
    rows = [variant_row("a", "direct", 2.0), variant_row("a", "implicit_gemm", 1.0),
            variant_row("a", "wmma", 0.5, unit="fp16_tensor"),
            variant_row("a", "auto", 1.04), variant_row("a", "auto_fast", 0.6),
            variant_row("b", "direct", 1.0), variant_row("b", "auto", 1.0),
            variant_row("b", "auto_fast", 1.0), dict(variant_row("b", "wmma", None), status="unsupported")]
    out = summary.lines(rows)
    # auto's bar is the fastest exact variant (1.0 on a, not wmma's 0.5); auto_fast's is any (0.5)
    assert "auto within 5% of the fastest single variant on 2 of 2 shapes; worst 1.04x (a B=1: auto against " \
           "implicit_gemm)" in out
    assert "auto_fast within 5% of the fastest single variant on 1 of 2 shapes; worst 1.20x (a B=1: auto_fast " \
           "against wmma)" in out


def test_summary_math_on_fake_timings():
    s1_exact, s1_fast, s32_exact, s32_fast = summary.compute("toy", FAKE_ROWS)
    assert (s1_exact.suite, s1_exact.B, s1_exact.compare, s1_exact.variant) == ("toy", 1, "exact", "auto")
    assert s1_exact.cudnn == "fp32"
    assert (s1_exact.shapes, s1_exact.timed, s1_exact.wins) == (3, 3, 2)
    assert s1_exact.geomean_speedup == pytest.approx((2.0 * 0.25 * 8.0) ** (1 / 3))  # cuDNN / ours: 2, 1/4, 8
    assert s1_exact.median_pct_of_floor == 30.0 and s1_exact.cudnn_median_pct_of_floor == 7.0
    assert (s1_fast.shapes, s1_fast.timed, s1_fast.wins, s1_fast.cudnn) == (3, 2, 0, "tf32")  # a tie is no win
    assert s1_fast.geomean_speedup == pytest.approx(math.sqrt(0.5))
    assert s1_fast.median_pct_of_floor == 35.0 and s1_fast.cudnn_median_pct_of_floor == 45.0
    assert s32_exact.geomean_speedup == pytest.approx(3.0) and s32_exact.wins == 1
    # ours ran, cuDNN did not: no ratio, but our % of floor still counts
    assert (s32_fast.timed, s32_fast.geomean_speedup, s32_fast.median_pct_of_floor) == (0, None, 45.0)


def test_summary_tables_in_markdown_json_and_csv(tmp_path):
    table = summary.markdown(summary.compute("toy", FAKE_ROWS)).splitlines()
    assert table[0].startswith("| suite | B | comparison | ours | cuDNN | shapes timed | cuDNN / ours")
    assert table[1].count("|") == table[0].count("|")
    assert table[2] == "| toy | 1 | exact | auto | fp32 | 3 of 3 | 1.59x | 2 (67%) | 30.0% | 7.0% | - | 0 |"
    assert table[5] == "| toy | 32 | fast | auto | - | 0 of 1 | - | - | 45.0% | - | - | 0 |"
    results = tmp_path / "toy.json"
    results.write_text(json.dumps({"suite": "toy", "device": "fake", "rows": FAKE_ROWS}))
    out = {ext: tmp_path / f"summary.{ext}" for ext in ("md", "json", "csv")}
    assert summary.main([str(results), "--markdown", str(out["md"]), "--json", str(out["json"]),
                         "--csv", str(out["csv"])]) == 0
    assert out["md"].read_text().splitlines()[2] == table[2]
    assert json.loads(out["json"].read_text())[0]["geomean_speedup"] == pytest.approx(4 ** (1 / 3))
    first = next(csv.DictReader(out["csv"].read_text().splitlines()))
    assert (first["suite"], first["compare"], first["timed"], first["wins"]) == ("toy", "exact", "3", "2")


def test_markdown_rows_put_cudnn_beside_ours():
    lines = report.markdown_rows(FAKE_ROWS).splitlines()
    assert len(lines) == 2 + len(FAKE_ROWS)
    assert lines[2] == "| a | 1 | exact | auto>implicit_gemm[128x64] | 1 | 10.0% | fp32 | 2 | 5.0% | 2 | - | - | - |"
    assert "| c | 1 | fast | auto>implicit_gemm[128x64] | unsupported: why |" in lines[7]


def test_a_row_reports_both_floors_and_the_speedup():
    s = shapes.Shape("s", 1, 4, 8, 8, 4, 3, 3)
    c = ceilings.Ceilings("gpu", "test", 1000.0, {"fp32": 50_000.0, "fp16_tensor": 500_000.0}, 1 << 20)
    row = runner.Row(s, "auto", "fp16", "float16", "NHWC", resolved="wmma", unit="fp16_tensor", median_ms=0.004,
                     cudnn_precision="fp16", cudnn_ms=0.006, cudnn_runs=(0.006, 0.0065), hot_ms=0.002,
                     cudnn_hot_ms=0.005)
    row.stats = roofline.summary(s, row.unit, c, row.median_ms, row.dtype)
    row.cudnn_stats = roofline.summary(s, "fp16_tensor", c, row.cudnn_ms, row.dtype)
    d = row.as_dict()
    assert d["speedup_vs_cudnn"] == pytest.approx(1.5) and d["groups"] == 1 and d["compare"] == "fp16"
    assert d["pct_of_floor"] == pytest.approx(1.5 * d["cudnn_pct_of_floor"])
    assert d["floor_ms"] == d["cudnn_floor_ms"] == roofline.floor(s, "fp16_tensor", c, "float16").ms
    assert set(report.CSV_COLUMNS) <= set(d)
    line = report.Table([s], [(comparisons.COMPARISONS["fp16"], "auto_fast")], ["implicit_gemm"]).line(row)
    assert " fp16 " in line and "auto>wmma" in line and line.split()[-4:] == ["1.5", "0.002", "0.005", "2.5"]
    assert d["speedup_hot_vs_cudnn"] == pytest.approx(2.5) and d["cudnn_unstable"] is False  # 8% apart: stable


def test_rows_with_both_temperatures_and_an_unstable_cudnn():
    """Hot times give their own geometric mean; cuDNN runs more than 10% apart are counted and shown."""
    rows = [dict(r, hot_ms=r["median_ms"] / 2, cudnn_hot_ms=r["cudnn_ms"], speedup_hot_vs_cudnn=2 * r["cudnn_ms"] /
                 r["median_ms"], cudnn_runs=[r["cudnn_ms"], 1.2 * r["cudnn_ms"]], cudnn_unstable=r["shape"] == "a")
            for r in FAKE_ROWS if r["status"] == "ok" and r["cudnn_ms"]]
    s1_exact = summary.compute("toy", rows)[0]
    assert s1_exact.geomean_speedup_hot == pytest.approx(2 * s1_exact.geomean_speedup)
    assert s1_exact.cudnn_unstable == 1  # shape a
    line = report.markdown_rows(rows).splitlines()[2]
    assert "| 2 (cuDNN unstable: 2 then 2.4 ms) |" in line and line.endswith("| 0.5 | 2 | 4 |")
    s = shapes.Shape("s", 1, 4, 8, 8, 4, 3, 3)
    row = runner.Row(s, "auto", cudnn_ms=0.006, cudnn_runs=(0.0075, 0.006))
    assert row.cudnn_unstable and runner.Row(s, "auto", cudnn_runs=(0.006,)).cudnn_unstable is False


def test_hot_operands_are_the_first_set_alone(rng):
    s = shapes.Shape("s", 2, 3, 8, 8, 4, 3, 3)
    sets = operands.OperandSets(s, 3, False, 1 << 20, rng)
    hot = sets.first()
    assert (hot.n, sets.n, hot.cache_resident) == (1, 3, True)
    assert hot.pointers(0) == sets.pointers(0) and hot.xs[0] is sets.xs[0]


def test_bench_times_the_host_side_hot_and_cold(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("name,C,H,W,M,K,pad\nsmall,3,12,12,4,3,1\n")
    for hot in (True, False):
        result = bench_cli(tmp_path, "--suite", str(path), "--batch", "2", "--variants", "cpu", "--no-cudnn",
                           "--json", str(tmp_path / "r.json"), *(() if hot else ("--no-hot",)))
        assert result.returncode == 0, result.stdout + result.stderr
        data = json.loads((tmp_path / "r.json").read_text())
        (row,) = data["rows"]
        assert data["hot"] is hot and row["median_ms"] > 0
        assert (row["hot_ms"] > 0) if hot else row["hot_ms"] is None


def test_operand_sets_cover_twice_the_cache_within_memory():
    one = roofline.min_bytes(LENET_C1_B100)
    assert operands.set_count(LENET_C1_B100, 50 << 20, 1 << 40) == -(-2 * (50 << 20) // one)
    assert operands.set_count(LENET_C1_B100, 50 << 20, 1 << 40, "float16") == -(-2 * (50 << 20) // (one // 2))
    assert operands.set_count(LENET_C1_B100, 50 << 20, 3 * one) == 1
    tiny = shapes.Shape("tiny", 1, 1, 4, 4, 1, 1, 1)
    assert operands.set_count(tiny, 50 << 20, 1 << 40) == operands.MAX_SETS


def test_host_operand_sets_in_nhwc_and_half(rng):
    s = shapes.Shape("g", 2, 6, 5, 7, 4, 3, 3, groups=2)
    sets = operands.OperandSets(s, 2, False, 0, rng, dtype="float16", layout="NHWC")
    x, w, y = sets.xs[0], sets.ws[0], sets.ys[0]
    assert (x.shape, w.shape, y.shape) == (s.x_shape, s.w_shape, s.y_shape)
    assert x.dtype == w.dtype == y.dtype == np.float16
    assert x.transpose(0, 2, 3, 1).flags.c_contiguous and w.transpose(0, 2, 3, 1).flags.c_contiguous
    assert np.all(np.abs(x) <= 1) and np.count_nonzero(x) > x.size // 2 and not np.array_equal(x, sets.xs[1])
    assert sets.pointers(0) == (x.ctypes.data, w.ctypes.data, y.ctypes.data)
    with pytest.raises(pyconv.ConvError, match="NumPy has no bfloat16"):
        operands.OperandSets(s, 1, False, 0, rng, dtype="bfloat16", layout="NHWC")


def test_host_side_warms_up_before_its_first_timed_round(rng, monkeypatch):
    """The host side's first run calls the plan for HOST_WARMUP_MS before timing (threads another library
    left spinning slowed the first calls 20-fold on a 2-core machine); later runs time at once."""
    monkeypatch.setattr(timing, "HOST_WARMUP_MS", 30.0)

    class Plan:
        stamps = []

        def launch(self, *pointers):
            self.stamps.append(time.perf_counter())
            time.sleep(0.002)

    s = shapes.Shape("s", 1, 2, 6, 6, 3, 3, 3)
    side = timing.host_run(Plan(), operands.OperandSets(s, 2, False, 0, rng))
    start = time.perf_counter()  # the warm-up's deadline is 30 ms after a moment later than this one
    side.run(1, 0, 1)
    assert Plan.stamps[-1] - start >= 0.030  # the timed call began after the warm-up's 30 ms
    before = len(Plan.stamps)
    side.run(1, 0, 2)
    assert len(Plan.stamps) == before + 2


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


def test_bench_cli_compares_on_a_grouped_suite(tmp_path):
    path = tmp_path / "dw.csv"
    path.write_text("name,C,H,W,M,K,pad,group\ndw,6,9,9,6,3,1,6\ngrouped,4,7,7,8,3,0,2\n")
    result = bench_cli(tmp_path, "--suite", str(path), "--batch", "2", "--compare", "exact,half", "--variants", "cpu",
                       "--no-cudnn", "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"),
                       "--csv", str(tmp_path / "r.csv"))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    rows = data["rows"]
    assert [(r["shape"], r["compare"]) for r in rows] == [(n, c) for n in ("dw", "grouped")
                                                          for c in ("exact", "fp16", "bf16")]
    for exact, fp16, bf16 in (rows[:3], rows[3:]):
        assert exact["status"] == fp16["status"] == "ok" and exact["groups"] in (6, 2)
        assert (fp16["dtype"], fp16["layout"], fp16["timer"]) == ("float16", "NHWC", "host clock")
        assert bf16["status"] == "unavailable" and "bfloat16" in bf16["message"]
        assert fp16["floor_ms"] <= exact["floor_ms"]
        bytes_moved = [r["gbytes_per_s"] * r["median_ms"] for r in (exact, fp16)]
        assert bytes_moved[1] == pytest.approx(bytes_moved[0] / 2)  # fp16 moves half the bytes
    assert [s["compare"] for s in data["summary"]] == ["exact", "fp16", "bf16"]
    assert [s["shapes"] for s in data["summary"]] == [2, 2, 2]
    md = (tmp_path / "r.md").read_text()
    assert "## Summary" in md and "| dw | 2 | fp16 | cpu |" in md
    assert (tmp_path / "r.csv").read_text().count("\n") == 1 + 6


def test_bench_cli_keeps_to_its_time_budget(tmp_path):
    result = bench_cli(tmp_path, "--suite", "groups", "--compare", "exact", "--variants", "cpu", "--no-cudnn",
                       "--max-seconds", "0", "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--max-seconds 0 reached: 66 shapes not run" in result.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["rows"]) == 66 and {r["status"] for r in data["rows"]} == {"not run"}
    # with a time limit, layer by layer: where it stops, both batches have the same layers
    assert [(r["shape"], r["B"]) for r in data["rows"][:4]] == [
        ("mobilenetv2/dw0", 1), ("mobilenetv2/dw0", 32), ("mobilenetv2/dw1", 1), ("mobilenetv2/dw1", 32)]
    assert shapes.by_layer(shapes.load_suite("groups")) == [r for layer in zip(
        shapes.load_suite("groups", [1]), shapes.load_suite("groups", [32])) for r in layer]


def test_bench_cli_refuses_an_unknown_comparison(tmp_path):
    result = bench_cli(tmp_path, "--suite", "lenet", "--compare", "exact", "tf33", "--variants", "cpu")
    assert result.returncode == 2 and "--compare takes" in result.stderr


def test_bench_cli_names_an_unknown_variant(tmp_path):
    result = bench_cli(tmp_path, "--suite", "lenet", "--batch", "1", "--variants", "cpu", "nonesuch")
    assert result.returncode == 2 and "unknown variant(s) nonesuch" in result.stderr


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
    # Order-of-magnitude checks of the measuring code (a unit or a factor-of-two slip), not of the GPU's
    # speed: the H100 gave half2 0.86x of fp32 in one run and 1.02x in another.
    assert c.rate("fp16") > 0.5 * c.rate("fp32")
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


def _cuda_torch():
    """torch with CUDA, or skip."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} has no CUDA here")
    return torch


@requires_gpu
def test_the_torch_graph_timer_computes_every_set_of_a_grouped_half_plan(rng):
    torch = _cuda_torch()
    s = shapes.Shape("t", 3, 8, 12, 10, 8, 3, 3, pad=(1, 1), groups=4)
    sets = operands.OperandSets(s, 3, True, 0, rng, dtype="float16", layout="NHWC", torch=torch)
    for y in sets.ys:
        y.fill_(float("nan"))  # an unwritten output fails
    plan = pyconv.Conv2dPlan(s.x_shape, s.w_shape, 1, 1, 1, 4, variant="direct", dtype="float16", layout="NHWC",
                             w_layout="MKKC")
    timer, side = runner.our_side(s, plan, sets)
    assert timer == "torch graph" and side.min_calls == 3
    times = side.run(5, 1, 4)
    assert len(times) == 4 and all(t > 0 for t in times)
    for x, w, y in zip(sets.xs, sets.ws, sets.ys):
        host = [a.double().cpu().numpy() for a in (x, w, y)]
        assert rel_l2(host[2], conv2d_reference(host[0], host[1], padding=(1, 1), groups=4)) <= 2e-3


@requires_gpu
def test_bench_cli_compares_with_cudnn_beside_every_row(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("name,C,H,W,M,K,pad,group\nplain,8,14,14,16,3,1,1\ndw,16,14,14,16,5,2,16\n")
    result = bench_cli(tmp_path, "--suite", str(path), "--batch", "2", "--compare", "all", "--tune-budget-ms", "200",
                       "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [(r["shape"], r["compare"]) for r in rows] == [(n, c) for n in ("plain", "dw")
                                                          for c in ("exact", "fast", "fp16", "bf16")]
    try:
        _cuda_torch()
    except pytest.skip.Exception:  # without torch: fp32 NCHW without groups only, through conv2d_time
        assert [r["status"] for r in rows[:2]] == ["ok", "ok"] and rows[0]["timer"] == "conv2d_time"
        assert all(r["status"] == "unavailable" and "torch" in r["message"].lower() for r in rows[2:])
        return
    assert all(r["status"] == "ok" and r["timer"] == "torch graph" and r["resolved"] for r in rows), rows
    assert [r["cudnn_precision"] for r in rows[:4]] == ["fp32", "tf32", "fp16", "bf16"]
    assert all(r["resolved"] != "fp16" for r in rows if r["compare"] in ("fp16", "bf16"))  # fp32 sums, as cuDNN's
    assert all(r["cudnn_ms"] > 0 and r["cudnn_pct_of_floor"] > 0 and r["speedup_vs_cudnn"] > 0 for r in rows)
    # both temperatures, cuDNN's two cold runs with the faster one as its time
    assert all(r["hot_ms"] > 0 and r["cudnn_hot_ms"] > 0 and r["speedup_hot_vs_cudnn"] > 0 for r in rows)
    assert all(len(r["cudnn_runs"]) == 2 and r["cudnn_ms"] == min(r["cudnn_runs"]) for r in rows)
