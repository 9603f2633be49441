"""CI's benchmark gate (.ci/bench_cpu_compare.py) on made-up pytest-benchmark files: times are compared
relative to the machine reference of their own run, and a missing or renamed benchmark fails."""
import json
import subprocess
import sys
from pathlib import Path

GATE = Path(__file__).resolve().parent.parent / ".ci" / "bench_cpu_compare.py"
BASELINE = {"test_machine_reference": 0.3e-3, "test_cpu_variant[a]": 1.5e-3, "test_cpu_variant[b]": 4.9e-3}


def gate(tmp_path, baseline, current):
    paths = []
    for name, mins in (("baseline", baseline), ("current", current)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"benchmarks": [{"name": n, "stats": {"min": t}} for n, t in mins.items()]}))
        paths.append(str(path))
    return subprocess.run([sys.executable, str(GATE), *paths], capture_output=True, text=True, timeout=60)


def test_a_slower_machine_is_not_a_regression(tmp_path):
    # Every time 2.9x the baseline's, the reference's too: the CI run of 2026-11-29, less its noise.
    run = gate(tmp_path, BASELINE, {n: 2.9 * t for n, t in BASELINE.items()})
    assert run.returncode == 0, run.stdout
    assert "2.90x the baseline's time" in run.stdout and "REGRESSED" not in run.stdout


def test_a_benchmark_slower_than_its_machine_fails(tmp_path):
    current = dict(BASELINE, **{"test_cpu_variant[b]": 2.6 * BASELINE["test_cpu_variant[b]"]})
    run = gate(tmp_path, BASELINE, current)
    assert run.returncode == 1
    assert "test_cpu_variant[b]" in run.stdout.splitlines()[-1] and "2.60x relative" in run.stdout
    # The same time on a machine twice as slow as the baseline's is within the limit.
    run = gate(tmp_path, BASELINE, {n: 2 * t for n, t in current.items() if n != "test_machine_reference"}
               | {"test_machine_reference": 2 * BASELINE["test_machine_reference"] * 1.2})
    assert run.returncode == 0, run.stdout


def test_a_faster_machine_tightens_the_limit(tmp_path):
    # The reference twice as fast, the variant as before: relative to the machine it is 2x slower...
    current = dict(BASELINE, test_machine_reference=BASELINE["test_machine_reference"] / 2)
    assert gate(tmp_path, BASELINE, current).returncode == 0
    # ... and 1.5x the baseline's time there is 3x relative: a regression.
    current["test_cpu_variant[a]"] = 1.5 * BASELINE["test_cpu_variant[a]"]
    run = gate(tmp_path, BASELINE, current)
    assert run.returncode == 1 and "3.00x relative" in run.stdout


def test_renamed_or_missing_benchmarks_fail(tmp_path):
    renamed = {("test_cpu_variant[c]" if n == "test_cpu_variant[a]" else n): t for n, t in BASELINE.items()}
    run = gate(tmp_path, BASELINE, renamed)
    assert run.returncode == 1 and "test_cpu_variant[a], test_cpu_variant[c]" in run.stdout
    without_reference = {n: t for n, t in BASELINE.items() if n != "test_machine_reference"}
    run = gate(tmp_path, without_reference, without_reference)
    assert run.returncode == 1 and "test_machine_reference" in run.stdout


def test_the_committed_baseline_has_the_reference_and_the_cpu_benchmarks():
    baseline = GATE.parent.parent / "bench" / "results" / "cpu-ci" / "baseline.json"
    names = {b["name"] for b in json.loads(baseline.read_text())["benchmarks"]}
    assert "test_machine_reference" in names
    assert len([n for n in names if n.startswith("test_cpu_variant[")]) == 4
