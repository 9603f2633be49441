"""Builds and imports Dao-AILab's causal-conv1d package from a checkout of its source, for bench/causal_conv1d.py.

Issue 44 asks for that package's kernels beside cuDNN in the causal conv1d table: it is what Mamba-style models
call instead of F.conv1d. The GPU machine has no network and no wheel of it, so `load(src_dir, build_dir)`
compiles its CUDA extension `causal_conv1d_cuda` from the checkout with torch.utils.cpp_extension.load
(csrc/causal_conv1d.cpp and the fwd, bwd and update .cu files; the nvcc flags of its setup.py), registers the
extension in sys.modules under that name, puts the checkout first on sys.path and imports the checkout's
`causal_conv1d` package, so that its `causal_conv1d_fn` / `causal_conv1d_update` run exactly as its users
call them. It is whichever commit the checkout is (the bench names it), not a released wheel.

One difference from its setup.py: ONE target, the current GPU's compute capability (or $CAUSAL_CONV1D_ARCH, e.g.
"90", where no GPU can be asked), instead of its nine with nvcc 13, so the build costs minutes rather than tens
of minutes. MAX_JOBS (ninja's parallel jobs) defaults to os.cpu_count(). CAUSAL_CONV1D_SPLIT_COMPILE=1 adds
nvcc's `--split-compile 0` (its optimizer and ptxas on every core; nvcc says the code is the same or nearly, and
the SASS of all three .cu files for sm_90 came out identical with nvcc 13.0), which cuts the time of the bwd
file, one nvcc process otherwise. Where it cannot build (no GPU and no $CAUSAL_CONV1D_ARCH, no nvcc, no ninja,
a compile or import error) load prints why and returns None.

The build is kept in build_dir: a second load rebuilds nothing. For that, csrc/ is staged in build_dir/csrc,
each file copied only where its bytes changed (a carried checkout arrives with new times, and ninja goes by
them); its Python package is imported from the checkout itself. causal_conv1d_bwd.cu is most of the build
(about a thousand kernel instances): on a GPU machine whose commands have a time limit, build first on its own,
    python3 bench/causal_conv1d_package.py SRC_DIR [BUILD_DIR]     (BUILD_DIR: default SRC_DIR-build)
in the background (setsid) if need be; a load meanwhile waits for it. A build killed half-way leaves torch's
lock file, on which the next load would wait forever: load removes it where no other load holds the folder.
"""
import fcntl
import importlib
import os
import shutil
import sys
import time
from pathlib import Path

SOURCES = ("csrc/causal_conv1d.cpp", "csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu",
           "csrc/causal_conv1d_update.cu")
# setup.py's nvcc flags (its CUDA branch), less its -gencode list: see arch_flags.
NVCC_FLAGS = ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math", "--ptxas-options=-v",
              "-lineinfo", "--threads", "4"]


def arch():
    """The one target, as "90": $CAUSAL_CONV1D_ARCH, else the current GPU's compute capability."""
    override = os.environ.get("CAUSAL_CONV1D_ARCH", "").strip()
    if override:
        return override.replace(".", "").replace("sm_", "")
    import torch
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def arch_flags(target):
    return ["-gencode", f"arch=compute_{target},code=sm_{target}"]


def nvcc_flags(target):
    split = ["--split-compile", "0"] if os.environ.get("CAUSAL_CONV1D_SPLIT_COMPILE", "0") == "1" else []
    return NVCC_FLAGS + split + arch_flags(target)


def default_build_dir(src_dir):
    src = Path(src_dir).resolve()
    return src.parent / (src.name + "-build")


def _stage(src, build):
    """build/csrc: a copy of src/csrc whose files keep their times while their bytes are unchanged."""
    staged = build / "csrc"
    staged.mkdir(parents=True, exist_ok=True)
    for f in sorted((src / "csrc").iterdir()):
        if f.is_file():
            dest = staged / f.name
            if not dest.is_file() or dest.read_bytes() != f.read_bytes():
                shutil.copyfile(f, dest)
    return staged


def _tail(text, lines=30):
    """The error lines of a build log and its last lines (ptxas -v makes the log long)."""
    all_lines = text.splitlines()
    errors = [line for line in all_lines if "error" in line.lower()][:20]
    return "\n".join(errors + ["..."] + all_lines[-lines:]) if errors else "\n".join(all_lines[-lines:])


def load(src_dir, build_dir, verbose=False):
    """The checkout's `causal_conv1d` package, its CUDA extension built for one target in build_dir; None (after
    printing why) where it cannot be built or imported."""
    src, build = Path(src_dir).resolve(), Path(build_dir).resolve()
    missing = [s for s in SOURCES + ("causal_conv1d/__init__.py",) if not (src / s).is_file()]
    if missing:
        print(f"causal-conv1d package: {src} is not a causal-conv1d checkout (no {', '.join(missing)})", flush=True)
        return None
    try:
        import torch
        from torch.utils import cpp_extension
        if cpp_extension.CUDA_HOME is None or not (Path(cpp_extension.CUDA_HOME) / "bin" / "nvcc").exists():
            print("causal-conv1d package: no nvcc (CUDA_HOME not found): not built", flush=True)
            return None
        if not cpp_extension.is_ninja_available():
            print("causal-conv1d package: no ninja (torch.utils.cpp_extension.load needs it): not built", flush=True)
            return None
        if not os.environ.get("CAUSAL_CONV1D_ARCH") and not torch.cuda.is_available():
            print("causal-conv1d package: no GPU to build for (set CAUSAL_CONV1D_ARCH, e.g. 90): not built",
                  flush=True)
            return None
        target = arch()
        os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
        build.mkdir(parents=True, exist_ok=True)
        split = " --split-compile 0;" if "--split-compile" in nvcc_flags(target) else ""
        print(f"causal-conv1d package: building causal_conv1d_cuda from {src} for sm_{target} alone in {build} "
              f"(MAX_JOBS={os.environ['MAX_JOBS']};{split} many minutes the first time, seconds once built)",
              flush=True)
        t0 = time.time()
        with open(build / "load.lock", "w") as owner:
            try:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print("causal-conv1d package: another process is building there: waiting for it", flush=True)
                fcntl.flock(owner, fcntl.LOCK_EX)
            # No other load holds the folder now: torch's lock file there is a killed build's (torch versions
            # that wait while it exists would wait forever) or one that newer torch keeps (and flocks): either way
            # no one's.
            (build / "lock").unlink(missing_ok=True)
            csrc = _stage(src, build)
            ext = cpp_extension.load(name="causal_conv1d_cuda", sources=[str(csrc / Path(s).name) for s in SOURCES],
                                     extra_cflags=["-O3"], extra_cuda_cflags=nvcc_flags(target),
                                     extra_include_paths=[str(csrc)], build_directory=str(build), verbose=verbose)
        print(f"causal-conv1d package: built and loaded in {time.time() - t0:.0f} s", flush=True)
    except Exception as e:  # a compile error's message holds ninja's whole log
        print(f"causal-conv1d package: build failed ({type(e).__name__}):\n{_tail(str(e))}", flush=True)
        home = getattr(sys.modules.get("torch.utils.cpp_extension"), "CUDA_HOME", None)
        if home and not (Path(home) / "include" / "cuda_runtime_api.h").exists():
            print(f"causal-conv1d package: CUDA_HOME={home} has no include/cuda_runtime_api.h (an nvcc on PATH "
                  "that is a wrapper script?): set CUDA_HOME to the toolkit's folder, e.g. /usr/local/cuda",
                  flush=True)
        return None
    sys.modules["causal_conv1d_cuda"] = ext
    # A module of that name from elsewhere (e.g. bench/causal_conv1d.py imported as a module) would shadow theirs.
    for name in [n for n in sys.modules if n == "causal_conv1d" or n.startswith("causal_conv1d.")]:
        if not str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(src)):
            del sys.modules[name]
    # First on sys.path: bench/ (the script's folder, sys.path[0]) holds a causal_conv1d.py of its own.
    while str(src) in sys.path:
        sys.path.remove(str(src))
    sys.path.insert(0, str(src))
    try:
        package = importlib.import_module("causal_conv1d")
        if not str(package.__file__).startswith(str(src)):
            raise ImportError(f"causal_conv1d was imported from {package.__file__}, not from {src}")
        package.causal_conv1d_fn, package.causal_conv1d_update  # noqa: B018 (both must be there)
    except Exception as e:
        print(f"causal-conv1d package: built, but importing it failed ({type(e).__name__}): "
              f"{str(e).splitlines()[0] if str(e) else ''}", flush=True)
        return None
    return package


if __name__ == "__main__":  # build (or check the build) alone: SRC_DIR [BUILD_DIR]
    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: python3 {sys.argv[0]} SRC_DIR [BUILD_DIR]   (BUILD_DIR: default SRC_DIR-build)")
    package = load(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else default_build_dir(sys.argv[1]))
    sys.exit(0 if package is not None else 1)
