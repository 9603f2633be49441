"""`python -m pyconv [command]`: the library's facts and a sample convolution (default), build
flags for C/C++ (--includes, --libdir, --ldflags), and the subcommands in COMMANDS.

Exit status: 0 done, 1 a runtime failure (the library or GPU failed, out of memory, results not
written), 2 a usage or input error (bad argument, output path or data file: nothing was run), 130
interrupted (Ctrl-C). Every error is one line `python -m pyconv <command>: error: ...` on stderr;
an exception of any other type is a bug of pyconv and keeps its traceback."""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import _lib
from .lenet.data import DataError

# name -> (module with add_arguments(parser) and run(args) -> exit code, one-line help)
COMMANDS = {
    "info": ("pyconv.cli", "print the library, the devices and the variants, and convolve a sample"),
    "tune": ("pyconv.tune_cli", "pre-tune auto on a suite of shapes, show its choices, or clear the cache"),
    "bench": ("pyconv.bench.cli", "time variants on a suite of shapes: op time, GFLOP/s, %% of the measured floor, cuDNN beside"),
    "lenet": ("pyconv.lenet.cli", "LeNet-5 on the Fashion-MNIST test set: op and layer times per conv layer, accuracy"),
}


SAMPLE_MAX_BATCH = 10000  # the sample peaks at about 0.33 MB per image: 3.3 GB for 10,000 (measured)
USAGE, FAILURE, INTERRUPTED = 2, 1, 130


class UsageError(Exception):
    """A bad argument or input found after parsing; the message says which and what is allowed."""


# argparse `type=` functions: a bad value is a usage error ("argument --x: ...", exit 2) before any work.

def int_range(low: int = 1, high: int | None = None):
    """An integer in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            bound = f"from {low:,} to {high:,}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be a whole number {bound}, got {text!r}")
        return value
    return parse


def duration(text: str) -> float:
    """A finite number >= 0 (a time budget or limit)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def output_path(text: str) -> str:
    """A file the command can write at the end of its run, checked now so that a run's results are never
    lost to a bad path. The writers create missing directories and replace the file by a rename, so
    what must hold is: the path is no directory or device, and the nearest existing directory on the way
    takes a new file (tried with an unnamed temporary file: nothing is left behind, and it answers for
    root, read-only file systems and /proc alike, where os.access does not)."""
    path = Path(text)
    try:
        if path.exists() and not path.is_file():
            raise argparse.ArgumentTypeError(f"{text}: is {'a directory' if path.is_dir() else 'not a regular file'}")
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: {parent} is not a directory")
        try:
            tempfile.TemporaryFile(dir=parent).close()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"{text}: cannot create a file in {parent}: {exc.strerror}") from None
    except OSError as exc:  # a directory on the way that cannot be searched
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror}") from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int_range(1, SAMPLE_MAX_BATCH), default=64,
                        help=f"images in the sample (default 64, at most {SAMPLE_MAX_BATCH:,})")


def run(args) -> int:
    from . import api, device

    f, l = _lib.ffi(), _lib.lib()
    print(f"pyconv {f.string(l.conv_version()).decode()}  library: {_lib.library_path()}")
    print(f"built with CUDA: {'yes' if l.conv_built_with_cuda() else 'no'}")
    count = device.device_count()
    for i in range(count):
        print(f"device {i}: {device.device_name(i)}")
    variants = api.variant_info()
    # Without a GPU every GPU variant gives the same reason: said once here, not once a variant.
    no_gpu = None if count else next((v.reason for v in variants if v.on_device and not v.available), None)
    if count == 0:
        print("no usable GPU: running on the CPU" + (f"\n  ({no_gpu})" if no_gpu else ""))
    print("\nvariants:")
    width = max(len(v.name) for v in variants)
    for v in variants:
        state = "available" if v.available else "unavailable: no usable GPU" if v.reason == no_gpu \
            else f"unavailable: {v.reason}"
        kind = "exact" if v.exact else f"<= {v.max_rel_error:g}"
        print(f"  {v.name:{width}s} {'gpu' if v.on_device else 'cpu':3s} {kind:9s} {state}")
        print(f"  {'':{width}s} {v.idea}")
    # The sample: LeNet-5's first layer (1 -> 4 maps, 7x7) on random 86x86 images.
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (args.batch, 1, 86, 86)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 1, 7, 7)).astype(np.float32)
    start = time.perf_counter()
    y = api.conv2d(x, w, variant="auto")
    seconds = time.perf_counter() - start
    reference = api.conv2d(x, w, variant="cpu")
    err = np.linalg.norm(y - reference) / np.linalg.norm(reference)
    chosen = f.new("int*")
    params, _ = api.make_params(x.shape, w.shape, 1, 0, 1)
    _lib.check(l.conv2d_auto_choice(api.variant_id("auto"), params, chosen))
    print(f"\nsample: x {x.shape} * w {w.shape} -> y {y.shape} with auto = "
          f"{api.variant_info()[chosen[0]].name}: {seconds * 1e3:.1f} ms with transfers, "
          f"relative L2 difference from cpu {err:.1e}")
    return 0


def _build_flags(args) -> bool:
    libdir = _lib.library_dir()  # PYCONV_LIBRARY's where set: the library Python loads is the one C links
    if args.includes:
        # the headers of an installed package, or include/ of a source checkout (run with PYCONV_LIBRARY)
        print(f"-I{_lib.header_dir()}")
    if args.libdir:
        print(libdir)
    if args.ldflags:
        print(f"-L{libdir} -Wl,-rpath,{libdir} -lconv")
    return args.includes or args.libdir or args.ldflags


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The command for messages from before parsing is done (a type= check may load the library).
    prog = "python -m pyconv " + next((a for a in argv if a in COMMANDS), "info")
    try:
        return _main(argv)
    except SystemExit as exc:  # argparse has printed a usage error (2) or the help (0)
        return exc.code
    except KeyboardInterrupt:
        return INTERRUPTED  # the user stopped it: no traceback (bench has saved its files so far)
    except BrokenPipeError:  # the reader went away (`| head`): nothing to say, and nowhere to say it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return FAILURE
    except (UsageError, DataError, _lib.ConvError, _lib.LibraryNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return USAGE
    except (_lib.ConvRuntimeError, MemoryError, OSError) as exc:  # OSError: results not written (disk full)
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return FAILURE


def _main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyconv", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--includes", action="store_true", help="print -I<dir> of conv.h, conv_ops.h and conv_bench.h")
    parser.add_argument("--libdir", action="store_true", help="print the directory of libconv.so")
    parser.add_argument("--ldflags", action="store_true", help="print the linker flags for libconv")
    sub = parser.add_subparsers(dest="command")
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
        modules[name] = module
    args = parser.parse_args(argv)
    if _build_flags(args):
        return 0
    if args.command is None:
        args = parser.parse_args(["info"] + argv)
    return modules[args.command].run(args)
