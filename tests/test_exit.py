"""A script that uses the cpu variant exits cleanly, every time, also while another thread is inside a call.

cffi dlcloses libconv when the interpreter tears its handle down at exit; before the library was kept
loaded (RTLD_NODELETE in pyconv's loader, -z nodelete on the library), that unmapped libgomp under its
still-spinning worker threads and the exit crashed (10 of 10 runs with OMP_WAIT_POLICY=active).
Whether the handle is torn down at exit depends on what else still refers to it then, so a second
test closes it explicitly: the crash it guards against is then certain, not a matter of luck.
A daemon thread still convolving when the main thread exits crashed 35 of 100 runs: the interpreter's
final collection destroyed a plan the thread's launch was reading. Plans (and device memory, streams,
events) are no longer released at exit, and the library frees a plan only when the last call using it
returns.
"""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyconv

RUNS = 100
SCRIPT = """
import numpy as np, pyconv
x = np.random.rand(2, 3, 10, 10).astype(np.float32)
w = np.random.rand(4, 3, 3, 3).astype(np.float32)
for _ in range(3):
    y = pyconv.conv2d(x, w, variant="cpu")
assert y.shape == (2, 4, 8, 8)
"""
# The main thread exits while a daemon thread loops over calls: on the GPU when there is one (auto with
# NumPy arrays), and the cpu variant in any case, on two shapes so that several plans are in use.
BUSY_THREAD_SCRIPT = """
import threading, numpy as np, pyconv
x = np.random.rand(16, 3, 32, 32).astype(np.float32)
w = np.random.rand(8, 3, 5, 5).astype(np.float32)
def loop():
    while True:
        pyconv.conv2d(x, w)
        pyconv.conv2d(x[:3], w[:4], variant="cpu", padding=1)
threading.Thread(target=loop, daemon=True).start()
for _ in range(30):
    pyconv.conv2d(x, w)
"""
# What cffi does to the handle at teardown, done on purpose; the library and its OpenMP runtime must
# stay mapped (and the workers alive in them keep running harmlessly until the process ends).
CLOSE_SCRIPT = SCRIPT + """
from pyconv import _lib
ffi, lib, path = _lib.load()
ffi.dlclose(lib)
maps = open("/proc/self/maps").read()
assert str(path.resolve()) in maps and "libgomp" in maps, "dlclose unmapped libconv or libgomp"
"""


def _environment(active_wait: bool) -> dict:
    env = dict(os.environ)
    # The same pyconv (and so the same library) as this test session, with a pool of OpenMP workers
    # whatever the core count: the crash needs worker threads alive at exit.
    env["PYTHONPATH"] = os.pathsep.join([str(Path(pyconv.__file__).resolve().parent.parent),
                                         env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "4"
    env.pop("OMP_WAIT_POLICY", None)
    if active_wait:
        env["OMP_WAIT_POLICY"] = "active"
    return env


def _run_once(script: str, run: int) -> tuple:
    active_wait = run % 2 == 0
    result = subprocess.run([sys.executable, "-c", script], env=_environment(active_wait),
                            capture_output=True, text=True, timeout=120)
    return active_wait, result.returncode, result.stderr[-2000:]


def _assert_clean_exits(script: str, runs: int) -> None:
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda run: _run_once(script, run), range(runs)))
    failed = [(active, code, err) for active, code, err in results if code != 0]
    summary = "; ".join(f"OMP_WAIT_POLICY={'active' if active else 'default'}: exit code {code}"
                        for active, code, _ in failed[:5])
    assert not failed, (f"{len(failed)} of {runs} runs did not exit cleanly (a negative code is a signal: "
                        f"-11 is SIGSEGV): {summary}\nfirst stderr:\n{failed[0][2]}")


def test_scripts_using_openmp_exit_cleanly():
    _assert_clean_exits(SCRIPT, RUNS)


def test_closing_the_library_handle_keeps_it_loaded():
    _assert_clean_exits(CLOSE_SCRIPT, 4)


def test_exit_while_a_daemon_thread_is_inside_a_call():
    _assert_clean_exits(BUSY_THREAD_SCRIPT, RUNS)
