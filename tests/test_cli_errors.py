"""`python -m pyconv` refuses bad usage before it runs anything, in one line and with exit status 2:
output paths it could not write (checked while parsing, so a run's results are never lost after the
run), numbers out of range, GPUs the machine lacks, corrupt data files, a library that does not load;
Ctrl-C exits 130 without a traceback; and the tuning cache sweeps the temporary file of a writer that
was killed mid-write. Each case runs the command in its own process, bounded in time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyconv
from idx_files import make_data_dir, write_idx
from pyconv.cli import SAMPLE_MAX_BATCH

TIMEOUT_S = 60
READ_ONLY = "/proc/pyconv-test/results"  # no process, root included, can create a file under /proc


def pyconv_cli(cwd, *args, env=None, **popen):
    """`python -m pyconv ARGS` on the pyconv this test imported (run from cwd, outside the checkout, with
    that package's parent on the path), the library found as in this process."""
    path = [str(Path(pyconv.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), **(env or {})}
    argv = [sys.executable, "-m", "pyconv", *map(str, args)]
    if popen:
        return subprocess.Popen(argv, cwd=cwd, env=env, text=True, **popen)
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, env=env)


def assert_refused(result, command: str, *words: str) -> None:
    """Exit 2, one `python -m pyconv <command>: error:` line naming `words`, no traceback, nothing run."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"python -m pyconv {command}: error: "), result.stderr
    for word in words:
        assert word in error, error
    assert result.stdout == "", result.stdout  # not even the run's header: nothing was run


# The test split as idx files of DATA_IMAGES images, uncompressed (the messages name the files).
DATA_IMAGES = 20


# ---- output paths: checked while parsing ----

def _bad_paths(tmp_path: Path) -> dict:
    """name -> (a path no file can be written at, what the message says)."""
    (tmp_path / "a-file").write_text("")
    return {"directory": (tmp_path, "is a directory"),
            "under a file": (tmp_path / "a-file" / "r.out", "is not a directory"),
            "read-only": (Path(READ_ONLY) / "r.out", "cannot create a file in /proc")}


@pytest.mark.parametrize("kind", ["directory", "under a file", "read-only"])
@pytest.mark.parametrize("command, option", [("lenet", "--json"), ("bench", "--json"), ("bench", "--csv"),
                                             ("bench", "--markdown"), ("bench", "--plot")])
def test_an_unwritable_output_is_refused_before_the_run(tmp_path, command, option, kind):
    path, reason = _bad_paths(tmp_path)[kind]
    before = sorted(tmp_path.rglob("*"))
    result = pyconv_cli(tmp_path, command, option, path)
    assert_refused(result, command, option, str(path), reason)
    assert sorted(tmp_path.rglob("*")) == before  # the check leaves nothing behind


def test_a_refused_run_leaves_no_empty_output(tmp_path):
    out = tmp_path / "r.json"
    make_data_dir(tmp_path, n=DATA_IMAGES, gz=False)
    result = pyconv_cli(tmp_path, "lenet", "--data", tmp_path, "--variant", "no_such_variant", "--json", out)
    assert_refused(result, "lenet", "unknown variant 'no_such_variant'")
    assert not out.exists()


def test_an_output_in_a_new_directory_is_written(tmp_path):
    """The check lets through what the writer can do: it creates missing directories."""
    out = tmp_path / "new" / "dir" / "r.json"
    make_data_dir(tmp_path, n=DATA_IMAGES, gz=False)
    result = pyconv_cli(tmp_path, "lenet", "--data", tmp_path, "--batch", "10", "--no-torch", "--repeats", "1",
                        "--quiet", "--json", out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"results written to {out}" in result.stdout
    assert json.loads(out.read_text())["images"] == 10


# ---- numbers and devices: checked while parsing ----

@pytest.mark.parametrize("command, option, value", [
    ("info", "--batch", "0"),
    ("info", "--batch", str(SAMPLE_MAX_BATCH + 1)),
    ("lenet", "--batch", "0"),
    ("lenet", "--batch", "ten"),
    ("lenet", "--images", "0"),
    ("lenet", "--images", "-5"),
    ("lenet", "--streams", "0"),
    ("lenet", "--repeats", "0"),
    ("lenet", "--devices", "0,x"),
    ("bench", "--budget-ms", "-1"),
    ("bench", "--budget-ms", "nan"),
    ("bench", "--tune-budget-ms", "inf"),
    ("bench", "--max-seconds", "-5"),
    ("bench", "--batch", "0"),
    ("bench", "--batch", "1,x"),
    ("tune", "--budget-ms", "-1"),
    ("tune", "--batch", "0"),
])
def test_a_number_out_of_range_is_refused_while_parsing(tmp_path, command, option, value):
    assert_refused(pyconv_cli(tmp_path, command, option, value), command, f"argument {option}: ")


def test_too_many_images_says_what_memory_holds(tmp_path):
    result = pyconv_cli(tmp_path, "lenet", "--images", 10 ** 12)
    assert_refused(result, "lenet", "--images", "1,000,000,000,000 images need", "GB of host memory", "enough for")


@pytest.mark.parametrize("extra", [0, 4])
def test_a_gpu_the_machine_lacks_is_refused_with_the_count(tmp_path, extra):
    count = pyconv.device_count()
    result = pyconv_cli(tmp_path, "lenet", "--devices", count + extra)
    assert_refused(result, "lenet", "argument --devices", f"this machine has {count} usable GPU(s)")


# ---- input and environment errors found while running: one line, exit 2 ----

@pytest.mark.parametrize("damage, message", [
    ("no images", "t10k-images-idx3-ubyte holds no images"),
    ("truncated", "t10k-images-idx3-ubyte is corrupt: its header says (20, 28, 28)"),
    ("bad magic", "t10k-images-idx3-ubyte is not an idx file"),
    ("labels bad magic", "t10k-labels-idx1-ubyte is not an idx file"),
    ("no labels", "has 20 images but"),
])
def test_a_bad_data_file_is_named(tmp_path, damage, message):
    make_data_dir(tmp_path, n=DATA_IMAGES, gz=False)
    images, labels = tmp_path / "t10k-images-idx3-ubyte", tmp_path / "t10k-labels-idx1-ubyte"
    if damage == "no images":
        make_data_dir(tmp_path, n=0, gz=False)
    elif damage == "truncated":
        images.write_bytes(images.read_bytes()[:1000])
    elif damage == "bad magic":
        write_idx(images, np.zeros((20, 28, 28)), header=b"\x08\x00\x00\x03")
    elif damage == "labels bad magic":
        write_idx(labels, np.zeros(20), header=b"\x00\x00\x08\x03")
    elif damage == "no labels":
        write_idx(labels, np.zeros(0))
    assert_refused(pyconv_cli(tmp_path, "lenet", "--data", tmp_path), "lenet", message)


def test_an_unknown_variant_is_a_usage_error(tmp_path):
    result = pyconv_cli(tmp_path, "bench", "--variants", "cpu", "nonesuch")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "python -m pyconv bench: error: unknown variant(s) nonesuch" in result.stderr


def test_a_library_that_does_not_load_is_one_line(tmp_path):
    missing = tmp_path / "no-libconv.so"
    for args in (["info"], ["lenet", "--devices", "0"]):  # the second loads it while parsing
        result = pyconv_cli(tmp_path, *args, env={"PYCONV_LIBRARY": str(missing)})
        assert_refused(result, args[0], "cannot load libconv", str(missing))


def _sigint_as_at_a_terminal():
    """In the child before exec: SIGINT's default action, which Python turns into KeyboardInterrupt. A suite
    started in the background of a non-interactive shell (`pytest &`, as some CI runners do) inherits SIGINT
    ignored, and Python keeps an ignored SIGINT ignored: Ctrl-C would never reach the command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_without_a_traceback(tmp_path):
    # 70,000 images: minutes on a CPU, long enough on a GPU for the signal to land inside the run.
    proc = pyconv_cli(tmp_path, "lenet", "--images", "70000", "--repeats", "100", "--no-torch", "--quiet",
                      env={"PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      preexec_fn=_sigint_as_at_a_terminal)
    try:
        assert proc.stdout.readline().startswith("LeNet-5")  # the header: the run has started
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_a_reader_that_goes_away_is_no_error_message(tmp_path):
    """`python -m pyconv ... | head -1`: the closed pipe ends the command quietly (exit 1, no traceback and no
    "Exception ignored" at the exit's flush)."""
    proc = pyconv_cli(tmp_path, "info", "--batch", "4", env={"PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline()  # the first line, then the reader goes
        proc.stdout.close()
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode in (0, 1) and err == "", err


# ---- the tuning cache's temporary files (cuda/core/tune_cache.c) ----

def test_a_killed_writers_temp_file_is_swept(tmp_path):
    cache = tmp_path / "tuning.txt"
    cache.write_text("# pyconv tuning cache v2\n")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"tuning.txt.tmp.{dead.pid}"
    kept = [tmp_path / f"tuning.txt.tmp.{os.getpid()}",  # a live writer's
            tmp_path / f"tuning.txt.tmp.{dead.pid}x", tmp_path / "tuning.txt.tmp.",  # not <file>.tmp.<pid>
            tmp_path / f"other.txt.tmp.{dead.pid}"]  # another cache's
    for path in [stale, *kept]:
        path.write_text("half a cache")
    result = pyconv_cli(tmp_path, "tune", "--compact", env={"PYCONV_TUNE_CACHE": str(cache)})
    assert result.returncode == 0, result.stderr
    assert not stale.exists()
    assert all(path.exists() for path in kept)
