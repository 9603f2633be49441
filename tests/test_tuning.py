"""The auto-tuner: a new shape is tuned once, remembered in the cache file, read back by a new
process, and forgotten by clear(); exact requests never get reduced precision. The cache file:
its version header, keys of one build only, compaction, and several processes and threads sharing it
(one tunes a shape, the others wait for its result).

The file's own tests run without a GPU through a harness: a small C program built here from the
library's C sources with a fake measurement (it sleeps and says so), which drives the cache exactly
as auto does (conv_tune_cache_resolve) under a build id of the test's choosing."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import GPU_SKIP_REASON, requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import tuning

SHAPE = ((64, 4, 40, 40), (16, 4, 7, 7))
HEADER = "# pyconv tuning cache v2"
REPO = Path(__file__).resolve().parents[1]


def cache_entries(path) -> list[str]:
    """The lines of a cache file after its header (which must be there)."""
    lines = Path(path).read_text().splitlines()
    assert lines[0] == HEADER, lines
    return lines[1:]


@pytest.fixture
def cache_file(tmp_path):
    path = tmp_path / "tuning.txt"
    tuning.set_cache_path(str(path))
    yield path
    tuning.set_cache_path(None)


def test_budget_must_be_non_negative():
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(pyconv.ConvError, match="budget must be a finite number of ms >= 0"):
            tuning.set_budget_ms(bad)


@pytest.mark.skipif(not GPU_SKIP_REASON, reason="this machine has a GPU (see the GPU tests)")
def test_without_gpu_auto_is_cpu_and_nothing_is_tuned(cache_file):
    assert tuning.describe(*SHAPE).startswith("cpu[")
    assert not cache_file.exists()


# ---- the cache file through the library: compaction and the version header ----

def test_compact_without_a_file_creates_none(cache_file):
    assert tuning.compact() == (0, 0)
    assert not cache_file.exists()


@pytest.mark.parametrize("header", [None, "# pyconv tuning cache v1"])
def test_compact_replaces_a_file_of_another_version(cache_file, header):
    old = ["NVIDIA H100|0.1.0|B1 C1 H8 W8 M1 K3x3|exact\tdirect\tdefault\t0.1",
           "NVIDIA H100|0.1.0|B2 C1 H8 W8 M1 K3x3|exact\tdirect\tdefault\t0.2"]
    cache_file.write_text("\n".join(([header] if header else []) + old) + "\n")
    assert tuning.compact() == (0, len(old) + (header is not None))   # the old header line too
    assert cache_file.read_text() == HEADER + "\n"


def test_compact_drops_other_builds_and_malformed_lines(cache_file):
    lines = ["Test GPU|0000000000000000|cuda 0/0|B1 C1 H8 W8 M1\tcpu\tdefault\t0.5",  # another build
             "a line that is no result",
             "Test GPU|0000000000000000|cuda 0/0|B1 C1 H8 W8 M1\tno_such_variant\tdefault\t0.5"]
    cache_file.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
    assert tuning.compact() == (0, 3)
    assert cache_entries(cache_file) == []


def test_cli_compacts(tmp_path):
    path = tmp_path / "tuning.txt"
    path.write_text(HEADER + "\nTest GPU|0000000000000000|cuda 0/0|B1\tcpu\tdefault\t0.5\n")
    env = dict(os.environ, PYCONV_TUNE_CACHE=str(path))
    run = subprocess.run([sys.executable, "-m", "pyconv", "tune", "--compact"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"compacted {path}: kept 0 lines, dropped 1"
    assert path.read_text() == HEADER + "\n"


# ---- the build id (cmake/build_id.cmake) ----

def build_id(source_dir: Path, out_dir: Path, settings: str = "test settings") -> str:
    header = out_dir / "conv_build_id.h"
    subprocess.run(["cmake", f"-DSOURCE_DIR={source_dir}", f"-DOUTPUT={header}", f"-DSETTINGS={settings}",
                    "-P", str(REPO / "cmake" / "build_id.cmake")], check=True, capture_output=True, timeout=60)
    return re.search(r'#define CONV_BUILD_ID "([0-9a-f]{16})"', header.read_text()).group(1)


@pytest.mark.skipif(shutil.which("cmake") is None or not (REPO / "cmake" / "build_id.cmake").is_file(),
                    reason="needs cmake and a source checkout")
def test_build_id_follows_sources_and_settings(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO / "cuda", source / "cuda")
    shutil.copytree(REPO / "include", source / "include")               # conv.h, conv_ops.h, conv_bench.h
    first = build_id(source, tmp_path)
    assert build_id(source, tmp_path) == first                          # a hash, not a time stamp
    assert build_id(source, tmp_path, "other flags") != first            # compiler, architectures
    table = source / "cuda" / "core" / "variants.def"
    table.write_text(table.read_text() + "\n")
    assert build_id(source, tmp_path) != first                           # any edit under cuda/
    table.write_text(table.read_text()[:-1])
    assert build_id(source, tmp_path) == first
    for name in ("conv.h", "conv_ops.h", "conv_bench.h"):               # any public header
        header = source / "include" / name
        header.write_text(header.read_text() + "/* */\n")
        assert build_id(source, tmp_path) != first, name
        header.write_text(header.read_text()[:-len("/* */\n")])
        assert build_id(source, tmp_path) == first, name


# ---- the cache file, several processes and threads: the harness ----

HARNESS = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tune_cache.h"

/* A fake tuning: says which problem it tunes, sleeps, and gives the cpu variant with this process's
 * id as its time, so that a reader can tell which process tuned. */
typedef struct job { int id; double seconds; } job;

static int measure(void* context, conv_tune_result* result) {
    const job* j = context;
    printf("tuning %d\n", j->id);
    fflush(stdout);
    usleep((useconds_t)(j->seconds * 1e6));
    result->best = (conv_tune_candidate){CONV_ID_cpu, 0};
    result->median_ms = (float)getpid();
    return CONV_OK;
}

static int accepts(void* context, const conv_tune_result* result) {
    (void)context;
    return result->best.variant == CONV_ID_cpu;
}

static conv_problem problem(int id) {
    conv_problem p;
    conv_problem_init(&p);
    p.B = 1; p.C = 1; p.H = 8 + id; p.W = 8; p.M = 1; p.KH = 3; p.KW = 3;
    return p;
}

static void* resolve(void* context) {
    job* j = context;
    const conv_problem p = problem(j->id);
    const conv_tuner tuner = {measure, accepts, j};
    conv_tune_result r;
    if (conv_tune_cache_resolve("Test GPU", &p, &tuner, &r) != CONV_OK) printf("failed %d\n", j->id);
    else printf("result %d %.0f\n", j->id, r.median_ms);
    fflush(stdout);
    return NULL;
}

double conv_tune_budget_ms(void);  /* (conv_internal.h) the budget the calling thread's tuning gets */

static void* print_budget(void* name) {
    conv_tune_set_thread_budget_ms(250.0);
    printf("%s %g\n", (const char*)name, conv_tune_budget_ms());
    return NULL;
}

/* harness <cache> resolve <seconds> <id>... | get <id>... | compact | threads | budget */
int main(int argc, char** argv) {
    conv_tune_set_cache_path(argv[1]);
    const char* mode = argv[2];
    if (strcmp(mode, "resolve") == 0) {
        for (int i = 4; i < argc; ++i) {
            job j = {atoi(argv[i]), atof(argv[3])};
            resolve(&j);
        }
    } else if (strcmp(mode, "get") == 0) {
        for (int i = 3; i < argc; ++i) {
            const conv_problem p = problem(atoi(argv[i]));
            conv_tune_result r;
            if (conv_tune_cache_get("Test GPU", &p, &r) == CONV_OK) printf("result %s %.0f\n", argv[i], r.median_ms);
            else printf("miss %s\n", argv[i]);
        }
    } else if (strcmp(mode, "compact") == 0) {
        int kept = -1, dropped = -1;
        const int status = conv_tune_compact(&kept, &dropped);
        printf("compact %d %d %d\n", status, kept, dropped);
    } else if (strcmp(mode, "threads") == 0) {
        /* A slow tuning of problem 1 on one thread must not hold up problem 2 on another. */
        job slow = {1, 3.0}, quick = {2, 0.0};
        pthread_t thread;
        pthread_create(&thread, NULL, resolve, &slow);
        usleep(300000);
        resolve(&quick);
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "budget") == 0) {
        /* A thread's own budget is its own: the process's stays for the others, and -1 removes it. */
        conv_tune_set_budget_ms(1000.0);
        pthread_t thread;
        pthread_create(&thread, NULL, print_budget, "thread");
        pthread_join(thread, NULL);
        printf("main %g\n", conv_tune_budget_ms());
        conv_tune_set_thread_budget_ms(40.0);
        double own = 0.0;
        conv_tune_get_thread_budget_ms(&own);
        printf("own %g %g\n", own, conv_tune_budget_ms());
        conv_tune_set_thread_budget_ms(-1.0);
        conv_tune_get_thread_budget_ms(&own);
        printf("removed %g %g\n", own, conv_tune_budget_ms());
    }
    return 0;
}
"""


def _compile_harness(out_dir: Path, objects: list[Path], build: str) -> Path:
    include = out_dir / build
    include.mkdir()
    (include / "conv_build_id.h").write_text(f'#define CONV_BUILD_ID "{build}"\n')
    exe = out_dir / f"harness-{build}"
    subprocess.run(["cc", "-std=gnu11", "-O1", "-pthread", f"-I{include}", f"-I{REPO / 'include'}",
                    f"-I{REPO / 'cuda' / 'core'}", str(REPO / "cuda" / "core" / "tune_cache.c"),
                    str(out_dir / "harness.c"), *map(str, objects), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """{build id: harness executable} for two builds of the same sources."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler on this machine")
    out = tmp_path_factory.mktemp("harness")
    (out / "harness.c").write_text(HARNESS)
    # The library's other C sources as a CPU-only build would compile them.
    sources = [p for p in sorted((REPO / "cuda").rglob("*.c")) if p.name != "tune_cache.c"]
    objects = [out / f"{p.stem}.o" for p in sources]
    for source, obj in zip(sources, objects):
        subprocess.run(["cc", "-std=gnu11", "-O1", "-c", f"-I{REPO / 'include'}", f"-I{REPO / 'cuda' / 'core'}",
                        '-DCONV_VERSION_STRING="test"', str(source), "-o", str(obj)],
                       check=True, capture_output=True, text=True, timeout=300)
    return {build: _compile_harness(out, objects, build) for build in ("build-a", "build-b")}


def run_harness(exe: Path, cache: Path, *args) -> list[str]:
    done = subprocess.run([str(exe), str(cache), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def start_harness(exe: Path, cache: Path, *args) -> subprocess.Popen:
    return subprocess.Popen([str(exe), str(cache), *map(str, args)], stdout=subprocess.PIPE, text=True)


def test_thread_budget_is_the_threads_own(harness, tmp_path):
    out = run_harness(harness["build-a"], tmp_path / "cache.txt", "budget")
    assert out == ["thread 250", "main 1000", "own 40 40", "removed -1 1000"]


def test_thread_budget_in_python():
    """pyconv.tuning.thread_budget sets this thread's budget for the block and restores the one before;
    other threads keep theirs."""
    import threading
    from pyconv._lib import ffi, lib

    def own():
        ms = ffi().new("double*")
        lib().conv_tune_get_thread_budget_ms(ms)
        return ms[0]
    seen = []
    with tuning.thread_budget(120):
        assert own() == 120
        with tuning.thread_budget(None):
            assert own() == -1
        assert own() == 120
        other = threading.Thread(target=lambda: seen.append(own()))
        other.start()
        other.join()
    assert own() == -1 and seen == [-1]
    for bad, error in ((-5, pyconv.ConvError), (float("nan"), pyconv.ConvError), ("1", TypeError), (True, TypeError)):
        with pytest.raises(error):
            with tuning.thread_budget(bad):
                pass
    assert own() == -1


def test_cache_file_format(harness, tmp_path):
    cache = tmp_path / "dir" / "tuning.txt"                 # its directory is made too
    out = run_harness(harness["build-a"], cache, "resolve", 0, 1)
    assert out[0] == "tuning 1" and out[1].startswith("result 1 ")
    (line,) = cache_entries(cache)
    key, variant, config, ms = line.split("\t")
    assert re.fullmatch(r"Test GPU\|build-a\|cuda \d+/\d+\|B1 C1 H9 W8 M1 K3x3 .*", key), key
    assert variant == "cpu" and config
    assert float(ms) == float(out[1].split()[2])
    # Read back by a new process, without tuning.
    assert run_harness(harness["build-a"], cache, "resolve", 0, 1) == [out[1]]


@pytest.mark.parametrize("header", [None, "# pyconv tuning cache v1", "# pyconv tuning cache v3"])
def test_file_of_another_version_is_ignored_then_replaced(harness, tmp_path, header):
    scratch = tmp_path / "scratch.txt"
    run_harness(harness["build-a"], scratch, "resolve", 0, 1)
    (line,) = cache_entries(scratch)                       # a line this build would accept ...
    cache = tmp_path / "tuning.txt"
    cache.write_text("\n".join(([header] if header else []) + [line]) + "\n")
    assert run_harness(harness["build-a"], cache, "get", 1) == ["miss 1"]   # ... but not in that file
    out = run_harness(harness["build-a"], cache, "resolve", 0, 1)
    assert out[0] == "tuning 1"
    assert len(cache_entries(cache)) == 1                  # replaced: the header and the new line
    assert not list(tmp_path.glob("tuning.txt.tmp*"))


def test_another_build_tunes_again_and_compaction_keeps_this_build(harness, tmp_path):
    cache = tmp_path / "tuning.txt"
    run_harness(harness["build-a"], cache, "resolve", 0, 1, 2)
    out = run_harness(harness["build-b"], cache, "resolve", 0, 1)
    assert out[0] == "tuning 1"                            # build-a's winner is not reused
    assert len(cache_entries(cache)) == 3
    assert run_harness(harness["build-b"], cache, "compact") == ["compact 0 1 2"]
    (line,) = cache_entries(cache)
    assert "|build-b|" in line
    assert run_harness(harness["build-a"], cache, "get", 1, 2) == ["miss 1", "miss 2"]
    assert run_harness(harness["build-b"], cache, "get", 1) == [out[1]]


def test_compaction_keeps_the_newest_line_per_key(harness, tmp_path):
    cache = tmp_path / "tuning.txt"
    run_harness(harness["build-a"], cache, "resolve", 0, 1, 2)
    first, second = cache_entries(cache)
    newer = first.rsplit("\t", 1)[0] + "\t7.000000"
    cache.write_text("\n".join([HEADER, first, second, "garbage", newer]) + "\n")
    assert run_harness(harness["build-a"], cache, "compact") == ["compact 0 2 2"]
    assert cache_entries(cache) == [newer, second]
    assert run_harness(harness["build-a"], cache, "get", 1) == ["result 1 7"]


def test_processes_wait_for_one_tuner(harness, tmp_path):
    """Six processes want the same three problems at once: each is tuned by one of them, and every
    process gets that one's result."""
    cache = tmp_path / "tuning.txt"
    procs = [start_harness(harness["build-a"], cache, "resolve", 0.3, 1, 2, 3) for _ in range(6)]
    outputs = [p.communicate(timeout=120)[0].splitlines() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    tunings = [line for out in outputs for line in out if line.startswith("tuning")]
    assert sorted(tunings) == ["tuning 1", "tuning 2", "tuning 3"], outputs
    results = {tuple(line for line in out if line.startswith("result")) for out in outputs}
    assert len(results) == 1, outputs                      # the same winner everywhere
    assert len(cache_entries(cache)) == 3


def test_concurrent_appends_stay_whole(harness, tmp_path):
    cache = tmp_path / "tuning.txt"
    procs = [start_harness(harness["build-a"], cache, "resolve", 0, *range(20 * k, 20 * k + 20)) for k in range(8)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    lines = cache_entries(cache)
    assert len(lines) == 160
    assert all(re.fullmatch(r"Test GPU\|build-a\|[^\t]+\tcpu\t[^\t]+\t\d+\.\d{6}", line) for line in lines)
    out = run_harness(harness["build-a"], cache, "get", *range(160))
    assert not [line for line in out if line.startswith("miss")]


def test_threads_tune_other_keys_meanwhile(harness, tmp_path):
    out = run_harness(harness["build-a"], tmp_path / "tuning.txt", "threads")
    assert out.index("tuning 1") < out.index("tuning 2")
    assert [line.split()[1] for line in out if line.startswith("result")] == ["2", "1"], out


def test_a_crashed_tuner_leaves_no_lock(harness, tmp_path):
    cache = tmp_path / "tuning.txt"
    tuner = start_harness(harness["build-a"], cache, "resolve", 60, 1)
    assert tuner.stdout.readline().strip() == "tuning 1"
    waiter = start_harness(harness["build-a"], cache, "resolve", 0, 1)
    time.sleep(0.5)
    assert waiter.poll() is None                           # waits for the tuner ...
    tuner.send_signal(signal.SIGKILL)
    tuner.wait(timeout=10)
    out = waiter.communicate(timeout=30)[0].splitlines()   # ... then, the lock gone, tunes itself
    assert out[0] == "tuning 1" and out[1] == f"result 1 {waiter.pid}"


# ---- on the GPU ----

@requires_gpu
@pytest.mark.parametrize("precision", ["exact", "half", "fast"])
def test_tuned_once_and_remembered(cache_file, precision):
    tuning.clear()
    first = tuning.describe(*SHAPE, precision=precision)
    assert "(tuned)" in first, first
    lines = cache_entries(cache_file)
    compute = {"exact": 0, "half": 2, "fast": 3}[precision]  # the key's problem: "... c<compute> b0 e0"
    assert len(lines) == 1 and lines[0].endswith(tuple("0123456789")) and f" c{compute} " in lines[0]
    assert tuning.describe(*SHAPE, precision=precision) == first      # from memory: no second line
    assert len(cache_entries(cache_file)) == 1
    # A new process reads the file instead of tuning again.
    code = (f"import pyconv.tuning as t; t.set_cache_path({str(cache_file)!r}); "
            f"print(t.describe({SHAPE[0]}, {SHAPE[1]}, precision={precision!r}))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == first
    assert len(cache_entries(cache_file)) == 1
    chosen = {v.name: v for v in pyconv.variant_info()}[first.split("[")[0]]
    if precision == "exact":
        assert chosen.exact
    tuning.clear()
    assert not cache_file.exists()


@requires_gpu
def test_two_processes_tune_a_shape_once(tmp_path):
    """Started together, two processes want the same new shape: one tunes (its PYCONV_TUNE_LOG lines
    are the only ones), the other waits and takes its result."""
    cache = tmp_path / "tuning.txt"
    env = dict(os.environ, PYCONV_TUNE_CACHE=str(cache), PYCONV_TUNE_LOG="1")
    code = f"import pyconv.tuning as t; print(t.describe({SHAPE[0]}, {SHAPE[1]}))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    logging = [err for _, err in outputs if "pyconv tune:" in err]
    assert len(logging) == 1, outputs
    assert outputs[0][0] == outputs[1][0]
    assert len(cache_entries(cache)) == 1


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


TUNE_LINE = re.compile(r"pyconv tune: (\w+\[[\w]+\]) ([0-9.]+) ms \(\d+ runs\)")
FINAL_LINE = re.compile(r"pyconv tune: final (\w+\[[\w]+\]) ([0-9.]+) ms a call \(graph of (\d+) calls over (\d+) "
                        r"operand sets\)")


@requires_gpu
def test_close_candidates_are_timed_again_as_graphs(tmp_path):
    """The finals: the candidates within 25% of the first pass's best (at most 4) are timed again in CUDA-graph
    replays of back-to-back calls over operand sets that pass the L2, and the fastest there is the choice. A
    small shape: dozens of candidates take about a launch's time there, so several are close."""
    env = dict(os.environ, PYCONV_TUNE_CACHE=str(tmp_path / "tuning.txt"), PYCONV_TUNE_LOG="1")
    code = "import pyconv.tuning as t; print(t.describe((1, 8, 12, 12), (8, 8, 3, 3), padding=1, precision='fast'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = {name: float(ms) for name, ms in TUNE_LINE.findall(proc.stderr)}
    finals = {name: (float(ms), int(calls), int(sets)) for name, ms, calls, sets in FINAL_LINE.findall(proc.stderr)}
    assert len(finals) >= 2, proc.stderr
    assert len(finals) <= 4
    best_first = min(first.values())
    for name, (ms, calls, sets) in finals.items():
        assert first[name] <= 1.25 * best_first * 1.0001, (name, first[name], best_first)
        assert ms > 0 and calls >= sets >= 1
    chosen = proc.stdout.split()[0]
    # the log rounds to 0.1 us: candidates that tie there are all the fastest
    assert finals[chosen][0] == min(ms for ms, _, _ in finals.values()), (chosen, finals)
