"""The auto-tuner: a new shape is tuned once, remembered in the cache file, read back by a new
process, and forgotten by clear(); exact requests never get reduced precision."""
import subprocess
import sys

import numpy as np
import pytest
from conftest import GPU_SKIP_REASON, requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import tuning

SHAPE = ((64, 4, 40, 40), (16, 4, 7, 7))


@pytest.fixture
def cache_file(tmp_path):
    path = tmp_path / "tuning.txt"
    tuning.set_cache_path(str(path))
    yield path
    tuning.set_cache_path(None)


def test_budget_must_be_non_negative():
    with pytest.raises(pyconv.ConvError, match="budget must be >= 0"):
        tuning.set_budget_ms(-1)


@pytest.mark.skipif(not GPU_SKIP_REASON, reason="this machine has a GPU (see the GPU tests)")
def test_without_gpu_auto_is_cpu_and_nothing_is_tuned(cache_file):
    assert tuning.describe(*SHAPE).startswith("cpu[")
    assert not cache_file.exists()


@requires_gpu
@pytest.mark.parametrize("precision", ["exact", "fast"])
def test_tuned_once_and_remembered(cache_file, precision):
    tuning.clear()
    first = tuning.describe(*SHAPE, precision=precision)
    assert "(tuned)" in first, first
    lines = cache_file.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(tuple("0123456789")) and f"|{precision}\t" in lines[0]
    assert tuning.describe(*SHAPE, precision=precision) == first      # from memory: no second line
    assert len(cache_file.read_text().splitlines()) == 1
    # A new process reads the file instead of tuning again.
    code = (f"import pyconv.tuning as t; t.set_cache_path({str(cache_file)!r}); "
            f"print(t.describe({SHAPE[0]}, {SHAPE[1]}, precision={precision!r}))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == first
    assert len(cache_file.read_text().splitlines()) == 1
    chosen = {v.name: v for v in pyconv.variant_info()}[first.split("[")[0]]
    if precision == "exact":
        assert chosen.exact
    tuning.clear()
    assert not cache_file.exists()


@requires_gpu
def test_tuned_choice_is_correct(cache_file, rng):
    tuning.clear()
    x = rng.uniform(-1, 1, SHAPE[0]).astype(np.float32)
    w = rng.uniform(-1, 1, SHAPE[1]).astype(np.float32)
    ref = conv2d_reference(x, w)
    assert rel_l2(pyconv.conv2d(x, w), ref) <= 1e-5
    fast = pyconv.conv2d(x, w, precision="fast")
    bound = max(v.max_rel_error for v in pyconv.variant_info())
    assert rel_l2(fast, ref) <= bound
