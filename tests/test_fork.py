"""A process forked after it used pyconv can use pyconv in the child: os.fork, and multiprocessing's
'fork' Pools and Processes (the default start method on Linux before Python 3.14; PyTorch's DataLoader
workers fork). libgomp parks its worker threads between parallel regions, and a forked child inherits
that state without the threads: its next parallel region waited for them forever (6 of 6 children
hung). The cpu variant now runs serially in such a child, with the same results. CUDA cannot run in a
child forked after CUDA started: there auto on host arrays runs on the CPU, and a GPU variant is
refused in words.

Each case runs in a subprocess with a time limit: a hang fails the test instead of stalling the suite.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pyconv
from conftest import requires_gpu

SETUP = """
import os, sys, multiprocessing as mp, numpy as np, pyconv
rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
x = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
w = rng.standard_normal((8, 3, 5, 5)).astype(np.float32)
expected = pyconv.conv2d(x, w, variant="cpu", padding=2)   # the parent starts OpenMP's pool
def child_result(_=None):
    return pyconv.conv2d(x, w, variant="cpu", padding=2)
"""

CASES = {
    "os.fork": """
pid = os.fork()
if pid == 0:
    os._exit(0 if np.array_equal(child_result(), expected) else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, f"child exit {os.waitstatus_to_exitcode(status)}"
""",
    "multiprocessing fork Pool": """
with mp.get_context("fork").Pool(3) as pool:
    results = pool.map(child_result, range(6))
assert all(np.array_equal(r, expected) for r in results)
""",
    "multiprocessing fork Process": """
def target(queue):
    queue.put(bool(np.array_equal(child_result(), expected)))
queue = mp.get_context("fork").Queue()
p = mp.get_context("fork").Process(target=target, args=(queue,))
p.start()
ok = queue.get(timeout=60)
p.join(60)
assert ok and p.exitcode == 0, (ok, p.exitcode)
""",
    "fork from a thread while another thread convolves": """
import threading
stop = threading.Event()
def busy():
    while not stop.is_set():
        child_result()
t = threading.Thread(target=busy)
t.start()
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if np.array_equal(child_result(), expected) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
stop.set()
t.join()
""",
}


def _run(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="4")  # a pool of workers whatever the core count
    env["PYTHONPATH"] = os.pathsep.join([str(Path(pyconv.__file__).resolve().parent.parent),
                                         env.get("PYTHONPATH", "")])
    try:
        return subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script], env=env,
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung (no exit in {exc.timeout} s): a forked child waits on the parent's threads")


@pytest.mark.parametrize("case", list(CASES))
def test_forked_children_convolve_on_the_cpu(case):
    result = _run(SETUP + CASES[case])
    assert result.returncode == 0, result.stderr[-3000:]


GPU_CHILD = SETUP + """
gpu = pyconv.conv2d(x, w, variant="direct", padding=2)        # the parent starts CUDA
pid = os.fork()
if pid == 0:
    # auto on host arrays: runs, on the CPU (the GPU is out of reach here), with the parent's result
    y = pyconv.conv2d(x, w, padding=2)
    ok = np.allclose(y, expected, rtol=1e-4, atol=1e-4)
    try:
        pyconv.conv2d(x, w, variant="direct", padding=2)
        os._exit(4)
    except pyconv.ConvNoDeviceError as exc:
        os._exit(0 if ok and "forked" in str(exc) and "spawn" in str(exc) else 5)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, f"child exit {os.waitstatus_to_exitcode(status)}"
assert np.allclose(pyconv.conv2d(x, w, variant="direct", padding=2), gpu)  # the parent's GPU still works
"""


@requires_gpu
def test_forked_child_of_a_cuda_parent_runs_host_arrays_and_refuses_the_gpu_in_words():
    result = _run(GPU_CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
