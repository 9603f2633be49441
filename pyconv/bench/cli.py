"""`python -m pyconv bench`: variants on a suite of shapes — median op time, GFLOP/s, GB/s, the shape's
floor from ceilings measured on this machine and the % of it reached, with cuDNN beside every row when
PyTorch is importable — as one table, a summary per batch and comparison, and as JSON / CSV / markdown /
PNG on request.

Two kinds of run: --compare exact fast half (comparisons.py) times the library's choice (auto, tuned
first) in each comparison's dtypes and layouts against cuDNN at the matching precision; without
--compare, every variant at its own precision on fp32 NCHW operands (the per-variant table).
Without a usable GPU it says so and times the cpu variant only, against CPU ceilings measured with
NumPy; GPU variants asked for by name are listed as unavailable, with the library's reason.
"""
from __future__ import annotations

import datetime
import platform
import sys
import time

from .. import _lib, api, device, tuning
from ..cli import duration, int_range, output_path
from . import comparisons, report, roofline, runner, shapes, summary, timing
from .ceilings import measure_cpu, measure_gpu
from .cudnn import Cudnn, load_torch

METHOD = ("op time = median per-call time of timed rounds of several calls, after warm-up, auto tuned "
          "first (GPU: each round one CUDA-graph replay between two events, for ours and cuDNN alike, "
          "cuDNN with cudnn.benchmark, every engine tried (benchmark_limit 0), timed twice, the faster run "
          "the anchor; host: perf_counter around synchronous calls); cold: operand sets cycled so that "
          "together they are at least twice the last-level cache; hot: one set; floor = max(min bytes (x, w, y "
          "in their dtypes, once) / copy bandwidth, flops / rate of the unit: the variant's for ours, the "
          "precision's for cuDNN), ceilings measured at the start of the run")


def add_arguments(parser) -> None:
    parser.add_argument("--suite", default="lenet",
                        help=f"{', '.join(shapes.SUITES)}, or a CSV file of shapes (columns: C,H,W,M,K or KH,KW; "
                             "optional name, B, stride, pad, dilation, group; see pyconv/bench/shapes.py)")
    parser.add_argument("--compare", nargs="+", metavar="NAME",
                        help="comparisons against cuDNN (spaces or commas): exact (fp32 vs cuDNN fp32), fast "
                             "(fp32 I/O, reduced precision allowed, vs cuDNN TF32), fp16 / bf16 (NHWC in and "
                             "out vs cuDNN channels_last), half (fp16 and bf16), all; each times auto unless "
                             "--variants names others")
    parser.add_argument("--variants", nargs="+", metavar="NAME",
                        help="variants to time (spaces or commas); default: auto with --compare, else every "
                             "GPU variant plus auto and auto_fast, or only cpu without a GPU")
    parser.add_argument("--batch", nargs="+", metavar="B", type=_batch_list,
                        help="batch sizes (spaces or commas), replacing the suite's")
    parser.add_argument("--json", metavar="PATH", type=output_path, help="write the rows and the run's facts as JSON")
    parser.add_argument("--csv", metavar="PATH", type=output_path, help="write the rows as CSV")
    parser.add_argument("--markdown", metavar="PATH", type=output_path,
                        help="write the summary and every row as markdown tables")
    parser.add_argument("--plot", metavar="PATH", type=output_path,
                        help="draw time per variant per shape against cuDNN and the floor (needs matplotlib: "
                             "pyconv[plot])")
    parser.add_argument("--budget-ms", type=duration, default=timing.DEFAULT_BUDGET_MS,
                        help=f"timed rounds per case fill about this many ms (default {timing.DEFAULT_BUDGET_MS:g}); "
                             f"a case slower than that keeps its {timing.PROBE_REPS}-round probe")
    parser.add_argument("--tune-budget-ms", type=duration,
                        help="auto's tuning budget per new problem (default: the library's, 3000 ms)")
    parser.add_argument("--max-seconds", type=duration,
                        help="start no new shape after this many seconds; the rest are listed as not run (with "
                             "a limit, each layer runs at all its batches before the next)")
    parser.add_argument("--no-cudnn", action="store_true", help="do not time cuDNN even if PyTorch is there")
    parser.add_argument("--no-hot", action="store_true",
                        help="time each side only cold (cycling through operand sets larger than the cache), not "
                             "also hot (one set, as a harness timing one set back to back sees it)")
    parser.add_argument("--unit", action="append", metavar="VARIANT=UNIT", default=[],
                        help="the unit a variant's floor is taken on (fp32, fp16, fp16_tensor, tf32_tensor), "
                             "instead of the unit it declares in the library's variant table")


def _split(values) -> list:
    return [item for value in values or () for item in value.replace(",", " ").split()]


def _batch_list(text: str) -> list:
    """One --batch value: batch sizes >= 1, commas allowed ("1,32")."""
    return [int_range(1)(b) for b in _split([text])]


def _variants(values, infos, have_gpu: bool, compare: bool) -> list:
    """The names asked for, checked; the default: [] (auto) in comparisons, else every variant."""
    names = _split(values)
    if not names:
        if compare:
            return []
        return ([v.name for v in infos if v.on_device and v.available] + ["auto", "auto_fast"]) if have_gpu \
            else ["cpu"]
    known = [v.name for v in infos] + list(comparisons.AUTO_NAMES)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise _lib.ConvError(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return list(dict.fromkeys(names))


def run(args) -> int:
    infos = api.variant_info()
    have_gpu = device.device_count() > 0
    if not have_gpu:
        reason = next((v.reason for v in infos if v.on_device), "")
        print(f"no usable GPU ({reason}): timing the cpu variant only")
    compared = comparisons.parse(_split(args.compare)) if args.compare else [comparisons.VARIANTS]
    variants = _variants(args.variants, infos, have_gpu, bool(args.compare))
    suite = shapes.load_suite(args.suite, [b for batches in args.batch or () for b in batches])
    if args.max_seconds is not None:
        suite = shapes.by_layer(suite)
    overrides = roofline.parse_overrides(args.unit)
    if args.tune_budget_ms is not None:
        tuning.set_budget_ms(args.tune_budget_ms)
    if args.plot:
        import importlib.util
        if importlib.util.find_spec("matplotlib") is None:  # say so now, not after an hour of timing
            raise _lib.ConvError("--plot needs matplotlib: pip install 'pyconv[plot]' (or pip install matplotlib)")

    gpu_name = device.device_name(0) if have_gpu else ""
    gpu_ceilings = measure_gpu(gpu_name) if have_gpu else None
    torch, why = load_torch() if have_gpu else (None, "no GPU")
    cudnn = Cudnn(None if args.no_cudnn else torch, "--no-cudnn" if args.no_cudnn else why)
    bench = runner.Runner(variants, compared, args.budget_ms, cudnn, torch, overrides, gpu_ceilings, measure_cpu,
                          hot=not args.no_hot)
    if not have_gpu or "cpu" in variants:
        bench.cpu_ceilings()

    f, l = _lib.ffi(), _lib.lib()
    meta = {"tool": "python -m pyconv bench", "command": " ".join(sys.argv),
            "suite": shapes.label(args.suite),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "device": gpu_name or "cpu only (no usable GPU)",
            "libconv": f.string(l.conv_version()).decode(), "library": str(_lib.library_path()),
            "cudnn": cudnn.describe(), "gpu_timer": "torch graph" if torch else "conv2d_time",
            "method": METHOD, "budget_ms": args.budget_ms, "tune_budget_ms": args.tune_budget_ms, "hot": not args.no_hot,
            "compare": [c.name for c in compared], "variants": variants}
    cases = bench.cases()

    print(f"pyconv bench: suite {args.suite}, {len(suite)} shapes x {len(cases)} cases "
          f"({', '.join(sorted({c.name for c, _ in cases}))}) on {meta['device']} "
          f"(libconv {meta['libconv']}, {meta['library']})")
    if gpu_ceilings:
        print(f"GPU ceilings, measured now: {gpu_ceilings.describe()}")
    cpu_in_header = bench.cpu_measured is not None
    if cpu_in_header:
        print(f"CPU ceilings, measured now: {bench.cpu_measured.describe()}")
    print(f"cuDNN: {meta['cudnn']}")
    print(f"method: {METHOD}")
    table = report.Table(suite, cases, [v.name for v in infos])
    print(table.header())

    rows, start = [], time.monotonic()

    def save() -> None:  # after every shape, so that an interrupted run keeps what it measured
        meta["ceilings"] = {k: c.as_dict() for k, c in (("gpu", gpu_ceilings), ("cpu", bench.cpu_measured)) if c}
        if args.json:
            report.write_json(args.json, meta, rows)
        if args.csv:
            report.write_csv(args.csv, rows)
        if args.markdown:
            report.write_markdown(args.markdown, meta, rows)

    for i, shape in enumerate(suite):
        if args.max_seconds is not None and time.monotonic() - start > args.max_seconds:
            rows += [runner.Row(s, v, c.name, c.dtype, c.layout, status="not run",
                                message=f"--max-seconds {args.max_seconds:g} reached")
                     for s in suite[i:] for c, v in cases]
            print(f"--max-seconds {args.max_seconds:g} reached: {len(suite) - i} shapes not run")
            save()
            break
        shape_rows = bench.run_shape(shape)
        for row in shape_rows:
            print(table.line(row), flush=True)
        rows += shape_rows
        save()
    if bench.cpu_measured and not cpu_in_header:
        print(f"CPU ceilings (measured for host rows): {bench.cpu_measured.describe()}")
    dicts = [r.as_dict() for r in rows]
    print("\nsummary:")
    for line in summary.lines(dicts):
        print("  " + line)
    print(summary.markdown(summary.compute(meta["suite"], dicts)), end="")
    if args.plot:
        from .plot import plot
        plot(dicts, args.plot, f"pyconv bench {args.suite} on {meta['device']}")
        print(f"plot: {args.plot}")
    errors = sum(r.status == "error" for r in rows)
    if errors:
        print(f"{errors} rows failed with an error (see the table)", file=sys.stderr)
    return 1 if errors else 0
