"""`python -m pyconv [command]`: the library's facts and a sample convolution (default), build
flags for C/C++ (--includes, --libdir, --ldflags), and the subcommands in COMMANDS."""
from __future__ import annotations

import argparse
import importlib
import sys
import time

import numpy as np

from . import _lib

# name -> (module with add_arguments(parser) and run(args) -> exit code, one-line help)
COMMANDS = {
    "info": ("pyconv.cli", "print the library, the devices and the variants, and convolve a sample"),
    "tune": ("pyconv.tune_cli", "pre-tune auto on a suite of shapes, show its choices, or clear the cache"),
    "bench": ("pyconv.bench.cli", "time variants on a suite of shapes: op time, GFLOP/s, %% of the measured floor, cuDNN beside"),
    "lenet": ("pyconv.lenet.cli", "LeNet-5 on the Fashion-MNIST test set: op and layer times per conv layer, accuracy"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=64, help="images in the sample (default 64)")


def run(args) -> int:
    from . import api, device

    f, l = _lib.ffi(), _lib.lib()
    print(f"pyconv {f.string(l.conv_version()).decode()}  library: {_lib.library_path()}")
    print(f"built with CUDA: {'yes' if l.conv_built_with_cuda() else 'no'}")
    count = device.device_count()
    for i in range(count):
        print(f"device {i}: {device.device_name(i)}")
    if count == 0:
        print("no usable GPU: running on the CPU")
    print("\nvariants:")
    for v in api.variant_info():
        state = "available" if v.available else f"unavailable: {v.reason}"
        kind = "exact" if v.exact else f"<= {v.max_rel_error:g}"
        print(f"  {v.name:16s} {'gpu' if v.on_device else 'cpu':3s} {kind:9s} {state}")
        print(f"  {'':16s} {v.idea}")
    if args.batch < 1:
        print("error: --batch must be >= 1", file=sys.stderr)
        return 2
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
    include, libdir = _lib.include_dir(), _lib.library_dir()
    if args.includes:
        print(f"-I{include}")
    if args.libdir:
        print(libdir)
    if args.ldflags:
        print(f"-L{libdir} -Wl,-rpath,{libdir} -lconv")
    return args.includes or args.libdir or args.ldflags


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyconv", description=__doc__)
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
        args = parser.parse_args(["info"] + list(argv if argv is not None else sys.argv[1:]))
    try:
        return modules[args.command].run(args)
    except (_lib.ConvError, _lib.ConvRuntimeError, _lib.LibraryNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
