"""bench/config_ab_ratios.py: per configuration, base / candidate from a bench/config_ab.sh summary (its tables:
each layer's row per round, the base's configurations, the candidate's, cuDNN)."""
import importlib.util
import os
import shutil
import subprocess
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("config_ab_ratios", REPO / "bench" / "config_ab_ratios.py")
ratios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ratios)

SUMMARY = """tests (candidate): 12 passed

## lk_q8 plane, exact, B = 1: base | candidate (us, each round), cuDNN
 net/a | 10.0 | 4.0 | 8.0 | 4.4 | 30.0 
 net/b | 6.0 | - | 6.6 | - | 12.0 
 net/a | 9.0 | 4.2 | 9.5 | 4.0 | 30.1 
 net/b | 6.2 | - | 6.0 | - | 12.1 
sweep-base-exact-b1.md:# geometric mean cuDNN / fastest: 2.9x over 2 layers

## lk_q8 plane, fp16, B = 32: base | candidate (us, each round), cuDNN
 net/a | - | 20.0 | - | 10.0 | 99.0 
"""


def test_each_configuration_takes_each_sides_faster_round():
    (configs, compare, batch, rows), _ = ratios.sections(SUMMARY)
    assert (configs, compare, batch) == (["lk_q8", "plane"], "exact", 1)
    by_config = ratios.ratios(configs, rows)
    # lk_q8: net/a 9.0 / 8.0, net/b 6.0 / 6.0; plane: net/a 4.0 / 4.0, net/b refused on both
    assert [(round(r, 6), layer) for r, layer, _, _ in by_config["lk_q8"]] == [(1.0, "net/b"), (1.125, "net/a")]
    assert [(r, layer) for r, layer, _, _ in by_config["plane"]] == [(1.0, "net/a")]


def test_report_gives_the_geometric_mean_and_the_layers_that_moved_most():
    lines = ratios.report(SUMMARY)
    assert len(lines) == 4
    assert lines[0].startswith(f"exact B=1 lk_q8: base / candidate {math.sqrt(1.125):.3f} over 2 layers")
    assert "most lost net/b 6 -> 6 us, most gained net/a 9 -> 8 us" in lines[0]
    assert lines[2] == "fp16 B=32 lk_q8: no layer timed on both builds"
    assert lines[3].startswith("fp16 B=32 plane: base / candidate 2.000 over 1 layers")


@pytest.mark.parametrize("text", ["", "tests (candidate): 3 passed\n"])
def test_a_summary_without_tables_reports_nothing(text):
    assert ratios.report(text) == []


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")
def test_config_ab_skips_what_its_time_budget_leaves_no_room_for(tmp_path):
    """bench/config_ab.sh with MAX_SECONDS spent runs no sweep and no sanitizer (none could on this machine) and
    still writes its summary, says what it skipped, and packs: under `timeout` it was killed before packing."""
    base, candidate = tmp_path / "base.so", tmp_path / "candidate.so"
    base.write_bytes(b"")
    candidate.write_bytes(b"")
    env = dict(os.environ, MAX_SECONDS="0", TESTS="", CONFIG="plane", PACK_RESULTS="1")
    done = subprocess.run(["bash", str(REPO / "bench" / "config_ab.sh"), str(base), str(candidate),
                           str(tmp_path / "ab")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "ab" / "summary.md").read_text()
    assert "MAX_SECONDS=0 spent" in summary and "no tables in the summary" in summary
    assert "memcheck" not in summary
    assert (tmp_path / "ab" / "details.tgz").exists()
    assert not (tmp_path / "ab" / "base.so").exists() and not (tmp_path / "ab" / "candidate.so").exists()
