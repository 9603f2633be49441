"""`python -m pyconv lenet`: the modified LeNet-5 on Fashion-MNIST, images in to predictions out.

    python -m pyconv lenet --batch 10000                      one batch, exact fp32, PyTorch beside it
    python -m pyconv lenet --batch 10000 --images 70000 --precision both --floors --json FILE.json
    python -m pyconv lenet --variant all                      every variant for C1/C3, checked against cpu

On a GPU: one upload, every layer on the device, one download (device_net.py), a per-stage table,
the end-to-end time, PyTorch + cuDNN on the same images when torch is importable, and with --images
more than one batch the images streamed over several streams (and GPUs: --devices all). Without a GPU
the same network on the host with the `cpu` variant. Results go to stdout, progress to stderr. Bad
arguments (sizes out of range, GPUs this machine lacks, an unwritable --json) are refused while
parsing, before any work; bad input found later (unknown variant, missing or corrupt data) raises
UsageError or data.DataError; pyconv.cli.main reports both, and the library's errors, in one line.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zipfile

import numpy as np

from .. import _lib, api, device
from .._memory import host_available
from ..cli import UsageError, int_range, output_path
from . import data, model, network
from .progress import Progress

CHECK_FAILED = 1
DEFAULT_BATCH = 10000
DEFAULT_STREAMS = 4
DEFAULT_REPEATS = 5
# Host memory per image of a run: the uint8 image (repeated to --images), its page-locked copy, and its
# class and 10 probabilities.
IMAGE_HOST_BYTES = 2 * data.IMAGE_SIZE ** 2 + 4 + 4 * network.CLASSES


def _image_count(text: str) -> int:
    """--images: at least 1, and no more than this process can still allocate (more is repeated data, so
    the bound is memory, not the data set): the machine's available memory or its cgroup's limit, as every
    other host allocation is checked (pyconv._memory), where Linux says; else the machine's total."""
    images = int_range(1)(text)
    memory = host_available()
    where = "this process can allocate"
    if memory is None:
        memory, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine has"
    if images * IMAGE_HOST_BYTES > memory:
        raise argparse.ArgumentTypeError(
            f"{images:,} images need {images * IMAGE_HOST_BYTES / 1e9:,.1f} GB of host memory ({IMAGE_HOST_BYTES} "
            f"bytes each: the image, a page-locked copy, the results); {where} {memory / 1e9:.1f} GB, "
            f"enough for {memory // IMAGE_HOST_BYTES:,}")
    return images


def _device_list(text: str) -> list[int]:
    """--devices: all, or GPU indices this machine has, each once."""
    count = device.device_count()
    if text == "all":
        return list(range(count))
    try:
        devices = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be all or GPU indices like 0,1, got {text!r}") from None
    if any(not 0 <= d < count for d in devices) or len(set(devices)) != len(devices):
        raise argparse.ArgumentTypeError(f"{text}: this machine has {count} usable GPU(s)"
                                         + (f", 0..{count - 1}, each to be named once" if count else ""))
    return devices


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int_range(1), default=None,
                        help=f"images per batch (default: {DEFAULT_BATCH}, or all images if fewer)")
    parser.add_argument("--images", type=_image_count, default=None,
                        help="images to classify (default: --batch if given, else the whole test set); more than "
                             "the data set has: the test set (and the training set where installed) repeated")
    parser.add_argument("--variant", default="auto",
                        help="the algorithm of C1 and C3: a variant (see `python -m pyconv info`), auto (the "
                             "fastest at --precision; cpu without a GPU), or all (every variant, checked against cpu)")
    parser.add_argument("--precision", choices=("exact", "fast", "both"), default="exact",
                        help="auto's precision: exact (fp32) or fast (fp16 tensor cores, fp16 image and C1 map); "
                             "both runs one then the other (default exact; a named variant runs at its own)")
    parser.add_argument("--devices", type=_device_list, default=None,
                        help="GPUs to spread the batches over: all, or indices like 0,1 (default: the current one)")
    parser.add_argument("--streams", type=int_range(1), default=DEFAULT_STREAMS,
                        help=f"CUDA streams per GPU the batches are spread over (default {DEFAULT_STREAMS})")
    parser.add_argument("--repeats", type=int_range(1), default=DEFAULT_REPEATS,
                        help=f"timed GPU runs after one warm-up, median reported (default {DEFAULT_REPEATS})")
    parser.add_argument("--floors", action="store_true",
                        help="measure this GPU's ceilings and show each stage's floor (about a second)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch + cuDNN comparison")
    parser.add_argument("--json", metavar="FILE", type=output_path, help="also write the results as JSON to FILE")
    parser.add_argument("--data", metavar="DIR",
                        help=f"directory with the Fashion-MNIST idx files (default: $PYCONV_LENET_DATA, else "
                             f"{data.DEFAULT_DIR} from `apt-get install {data.DEBIAN_PACKAGE}`, else the test "
                             f"set shipped with pyconv)")
    parser.add_argument("--weights", metavar="FILE.npz", help="other weights (default: the shipped ones)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args) -> int:
    started = time.perf_counter()
    infos = {v.name: v for v in api.variant_info()}
    gpu = device.device_count() > 0
    variant = _check_variant(args.variant, infos, gpu)
    devices = _devices(args.devices, gpu)
    progress = Progress(enabled=not args.quiet)

    directory = data.find_data_dir(args.data)
    images, labels, images_label = _dataset(args, directory)
    batch = min(args.batch or DEFAULT_BATCH, len(images))
    try:
        weights = model.load_weights(args.weights)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read the weights: {exc}") from exc
    _print_header(images_label, directory, args.weights, gpu, devices, weights)
    record = {"command": "python -m pyconv lenet " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["lenet"] else None,
              "device": [device.device_name(d) for d in devices] if gpu else "cpu", "images": len(images),
              "images_label": images_label, "batch": batch}

    if variant == "all":
        rc = _run_all(images, labels, batch, weights, infos, gpu, devices, args, progress, record)
    elif not gpu:
        from . import host_net
        result = host_net.run(images, batch, weights, progress)
        print(_report().host(result, labels, batch, images_label))
        record["cpu"] = _results().host_record(result, labels)
        rc = 0
    else:
        rc = _run_gpu(images, labels, images_label, batch, weights, variant, devices, args, progress, record)
    record["process_s"] = time.perf_counter() - started
    if args.json:
        _results().write(args.json, record)
        print(f"\nresults written to {args.json}")
    return rc


def _report():
    from . import report
    return report


def _results():
    from . import results
    return results


def _dataset(args, directory) -> tuple[np.ndarray, np.ndarray, str]:
    """(images, labels, what they are in words) for --images / --batch."""
    images, labels = data.load_split("test", directory)
    if args.images is None and args.batch is not None and args.batch > len(images):
        raise UsageError(f"--batch {args.batch} is more than the {len(images)} images of the test set "
                         f"(--images {args.batch} repeats it)")
    wanted = args.images if args.images is not None else (args.batch or len(images))
    if wanted <= len(images):
        return images[:wanted], labels[:wanted], f"{wanted:,} Fashion-MNIST test images"
    source = "test set"
    try:
        train_images, train_labels = data.load_split("train", args.data)
        images, labels = np.concatenate([images, train_images]), np.concatenate([labels, train_labels])
        source = "test + training sets"
    except data.DataError:
        pass  # only the test set (the one pyconv ships): repeated
    copies = -(-wanted // len(images))
    label = f"{wanted:,} images: the {len(images):,}-image Fashion-MNIST {source}"
    if copies > 1:
        label += f" repeated {copies} times" + (" (only the test set is installed here)" if source == "test set" else "")
    return np.tile(images, (copies, 1, 1))[:wanted], np.tile(labels, copies)[:wanted], label


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


def _devices(devices, gpu: bool) -> list[int]:
    """The GPUs to run on: --devices (checked while parsing), else the current one; none without a GPU."""
    if not gpu:
        return []
    if devices is None:
        current = _lib.ffi().new("int*")
        _lib.check(_lib.lib().conv_get_device(current))
        return [current[0]]
    return devices


def _print_header(images_label, directory, weights_path, gpu, devices, weights) -> None:
    print(f"LeNet-5 (modified, 86x86 input) on {images_label} from {directory}")
    if gpu:
        print("device: " + ", ".join(f"{d}: {device.device_name(d)}" for d in devices))
    else:
        why = ("libconv was built without CUDA" if not _lib.lib().conv_built_with_cuda()
               else "no CUDA device was found")
        print(f"device: none ({why}): running the cpu variant (OpenMP on {os.cpu_count()} cores)")
    meta = weights.meta
    source = weights_path or "shipped weights"
    if meta:
        print(f"weights: {source}; test accuracy after training {meta.get('test_accuracy', float('nan')):.4f}")
    else:
        print(f"weights: {source}")
    print()


def _run_gpu(images, labels, images_label, batch, weights, variant, devices, args, progress, record) -> int:
    from . import floors, pipeline, report, results, torch_ref

    pinned = pipeline.pinned_images(images)
    precisions = ["exact", "fast"] if args.precision == "both" else [args.precision]
    rates = None
    if args.floors:
        progress.start("measuring this GPU's ceilings")
        rates = floors.measure(devices[0])
        progress.finish()
        record["rates"] = results.rates_record(rates)
    lanes = f"{min(args.streams * len(devices), -(-len(images) // batch))} streams on {len(devices)} GPU(s)"
    modes = list(dict.fromkeys(network.Mode.of(variant, p) for p in precisions))  # a named variant has one
    for mode in modes:
        progress.start(f"{mode.label}: plans, then {args.repeats} timed runs after a warm-up")
        result = pipeline.run_gpu(pinned, mode, weights, devices, args.streams, batch, args.repeats)
        progress.finish()
        summary = {"mode": mode, "batch": batch, "result": result, "images": len(images),
                   "images_label": images_label, "lanes": lanes,
                   "stages": floors.table_rows(result, batch, rates), "torch": [], "torch_note": "",
                   "torch_version": ""}
        if not args.no_torch:
            progress.start("the same network in PyTorch + cuDNN")
            summary["torch"], seconds, why = torch_ref.compare(pinned[:batch], weights, mode.precision, devices[0],
                                                               args.repeats)
            progress.finish()
            if why:
                summary["torch_note"] = f"no PyTorch comparison: {why}"
            else:
                summary["torch_version"] = sys.modules["torch"].__version__
                summary["torch_note"] = (f"(the PyTorch comparison took {seconds:.1f} s of this process: import, "
                                         f"cuDNN set-up, warm-up and runs; --no-torch skips it)")
        print(report.gpu(summary, labels))
        record[mode.precision] = results.gpu_record(summary, labels)
    print(report.notes(rates is not None, rates))
    return 0


def _run_all(images, labels, batch, weights, infos, gpu, devices, args, progress, record) -> int:
    """Every available variant for C1 and C3 on the same images, checked against cpu's predictions."""
    from . import host_net, pipeline, report

    names = ["cpu"] + [name for name, v in infos.items() if v.available and v.on_device and gpu]
    pinned = pipeline.pinned_images(images) if gpu else None
    rows, reference, failed = [], None, []
    for i, name in enumerate(names):
        info = infos[name]
        progress.note(f"[{i + 1}/{len(names)}] variant {name}")
        row = {"name": name, "precision": "exact fp32" if info.exact else f"reduced, rel. err <= {info.max_rel_error:g}"}
        try:
            if name == "cpu":
                result = host_net.run(images, batch, weights, progress)
            else:
                mode = network.Mode.of(name, "exact" if info.exact else "fast")
                result = pipeline.run_gpu(pinned, mode, weights, devices, args.streams, batch, args.repeats)
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
            reference, row["agreement"] = result, "reference"
        else:
            agreement, problem = network.agreement_problem(result, reference, labels, info.exact)
            row["agreement"] = f"{agreement:.2%} same"
            if problem:
                failed.append(f"{name}: {problem}")
        rows.append(row)
    print(report.variant_rows(rows))
    record["variants"] = [{"name": r["name"], "error": r.get("error"), "accuracy": r.get("accuracy"),
                           "agreement": r.get("agreement"),
                           "stage_ms": r["result"].stage_ms if "result" in r else None,
                           "end_to_end_ms": r["result"].median_ms if "result" in r else None} for r in rows]
    by_reason: dict = {}  # without a GPU every GPU variant gives the same reason: said once
    for name, v in infos.items():
        if not v.available:
            by_reason.setdefault(v.reason, []).append(name)
    if by_reason:
        print("\nnot available here:\n" + "\n".join(f"  {', '.join(names)}: {reason}"
                                                   for reason, names in by_reason.items()))
    for problem in failed:
        print(f"error: {problem}", file=sys.stderr)
    return CHECK_FAILED if failed else 0
