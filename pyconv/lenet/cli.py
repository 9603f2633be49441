"""`python -m pyconv lenet`: the modified LeNet-5 on the real Fashion-MNIST test set, with the op and
layer time of each convolution, the time of the rest of the network, and the accuracy.

    python -m pyconv lenet --batch 10000 --variant auto     (a variant name, auto, or all)

Without a GPU it runs the `cpu` variant and says so. Results go to stdout, progress to stderr.
Bad input (unknown variant, batch out of range, missing or corrupt data) exits non-zero with a
message; errors of the library itself are reported by pyconv.cli.main.
"""
from __future__ import annotations

import argparse
import os
import sys
import zipfile

from .. import _lib, api, device
from . import data, model, network, report
from .layers import PipelineOptions
from .progress import Progress

USAGE_ERROR, DATA_ERROR, CHECK_FAILED = 2, 1, 1


class UsageError(Exception):
    """A bad argument: the message says which and what is allowed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=None,
                        help="first N images of the test set (default: all 10,000)")
    parser.add_argument("--variant", default="auto",
                        help="a variant (see `python -m pyconv info`), auto (fastest exact one; cpu "
                             "without a GPU), or all (a table of every available variant)")
    parser.add_argument("--data", metavar="DIR",
                        help=f"directory with the Fashion-MNIST idx files (default: $PYCONV_LENET_DATA, else "
                             f"{data.DEFAULT_DIR} from `apt-get install {data.DEBIAN_PACKAGE}`, else the test "
                             f"set shipped with pyconv)")
    parser.add_argument("--streams", type=int, default=PipelineOptions.streams,
                        help=f"CUDA streams for the overlapped layer time (default {PipelineOptions.streams})")
    parser.add_argument("--chunks", type=int, default=PipelineOptions.chunks,
                        help=f"chunks the batch is cut into over the streams (default {PipelineOptions.chunks})")
    parser.add_argument("--repeats", type=int, default=PipelineOptions.repeats,
                        help=f"timed GPU runs per layer, median reported (default {PipelineOptions.repeats})")
    parser.add_argument("--weights", metavar="FILE.npz", help="other weights (default: the shipped ones)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args) -> int:
    try:
        return _run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except data.DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return DATA_ERROR


def _run(args) -> int:
    for name in ("streams", "chunks", "repeats"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.batch is not None and args.batch < 1:
        raise UsageError(f"--batch must be at least 1, got {args.batch}")
    infos = {v.name: v for v in api.variant_info()}
    gpu = device.device_count() > 0
    variant = _check_variant(args.variant, infos, gpu)
    progress = Progress(enabled=not args.quiet)

    directory = data.find_data_dir(args.data)
    images, labels = data.load_split("test", directory)
    batch = len(images) if args.batch is None else args.batch
    if batch > len(images):
        raise UsageError(f"--batch {batch} is more than the {len(images)} images of the test set")
    images, labels = images[:batch], labels[:batch]
    try:
        weights = model.load_weights(args.weights)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read the weights: {exc}") from exc
    options = PipelineOptions(streams=min(args.streams, args.chunks, batch), chunks=min(args.chunks, batch),
                              repeats=args.repeats)

    _print_header(batch, directory, args.weights, variant, gpu, weights)
    buffers = network.Buffers(batch, pinned=gpu)  # page-locked only where there are copies to overlap
    progress.start(f"resizing {batch} images to 86x86")
    data.resize(images, out=buffers.x)
    progress.finish()
    if variant == "all":
        return _run_all(buffers, weights, labels, infos, options, progress)
    result = network.forward(buffers, weights, variant, options, progress)
    print(report.single(result, labels, options))
    return 0


def _check_variant(name: str, infos: dict, gpu: bool) -> str:
    """The variant to run: `name` checked, and auto -> cpu where there is no GPU."""
    if name == "all":
        return name
    if name == "auto":
        return "auto" if gpu else "cpu"
    if name not in infos:
        raise UsageError(f"unknown variant {name!r}; choose auto, all, or one of: {', '.join(infos)}")
    if not infos[name].available:
        raise UsageError(f"variant {name!r} cannot run here: {infos[name].reason}")
    return name


def _print_header(batch, directory, weights_path, variant, gpu, weights) -> None:
    print(f"LeNet-5 (modified, 86x86 input) on {batch} Fashion-MNIST test images from {directory}")
    if gpu:
        print(f"device: {device.device_name(0)}")
    else:
        why = ("libconv was built without CUDA" if not _lib.lib().conv_built_with_cuda()
               else "no CUDA device was found")
        print(f"device: none ({why}): running the cpu variant (OpenMP on {os.cpu_count()} cores)")
    if variant == "auto":
        print("variant: auto (the fastest exact fp32 variant for each layer's shape)")
    elif variant != "all":
        print(f"variant: {variant}")
    meta = weights.meta
    source = weights_path or "shipped weights"
    if meta:
        print(f"weights: {source}; {meta.get('recipe', '')}; test accuracy after training "
              f"{meta.get('test_accuracy', float('nan')):.4f}")
    else:
        print(f"weights: {source}")
    print()


def _run_all(buffers, weights, labels, infos, options, progress) -> int:
    """Every available variant on the same images, checked against cpu's predictions."""
    names = ["cpu"] + [name for name, v in infos.items() if v.available and name != "cpu"]
    rows, reference, failed = [], None, []
    for i, name in enumerate(names):
        info = infos[name]
        progress.note(f"[{i + 1}/{len(names)}] variant {name}")
        row = {"name": name, "precision": "exact fp32" if info.exact else f"reduced, rel. err <= {info.max_rel_error:g}"}
        try:
            result = network.forward(buffers, weights, name, options, progress)
        except _lib.ConvUnsupportedError as exc:
            row["error"] = f"unsupported: {exc.message}"
            rows.append(row)
            continue
        except _lib.ConvRuntimeError as exc:
            row["error"] = f"failed: {exc}"
            failed.append(f"{name} failed: {exc}")
            rows.append(row)
            continue
        row["result"], row["accuracy"] = result, result.accuracy(labels)
        if reference is None:
            reference = row
            row["agreement"] = "reference"
        else:
            row["agreement"], problem = _compare(row, reference, info)
            if problem:
                failed.append(f"{name}: {problem}")
        rows.append(row)
    print(report.variant_rows(rows, options))
    unavailable = [f"  {name}: {v.reason}" for name, v in infos.items() if not v.available]
    if unavailable:
        print("\nnot available here:\n" + "\n".join(unavailable))
    for problem in failed:
        print(f"error: {problem}", file=sys.stderr)
    return CHECK_FAILED if failed else 0


def _compare(row: dict, reference: dict, info) -> tuple[str, str]:
    """(agreement cell, problem or ''): exact variants must predict exactly as cpu does; reduced
    precision ones within network.MIN_AGREEMENT and network.MAX_ACCURACY_LOSS."""
    same = (row["result"].predictions == reference["result"].predictions)
    agreement = float(same.mean())
    cell = f"{agreement:.2%} same"
    loss = reference["accuracy"] - row["accuracy"]
    if info.exact and not same.all():
        return cell, f"exact variant differs from cpu on {int((~same).sum())} images"
    if not info.exact and (agreement < network.MIN_AGREEMENT or loss > network.MAX_ACCURACY_LOSS):
        return cell, (f"agrees with cpu on {agreement:.2%} of images (needs {network.MIN_AGREEMENT:.1%}) "
                      f"and loses {loss:.4f} accuracy (at most {network.MAX_ACCURACY_LOSS})")
    return cell, ""
