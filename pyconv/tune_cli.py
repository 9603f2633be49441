"""`python -m pyconv tune`: pre-tune `auto` on a suite of shapes (so that no first call pays for
tuning), show what it picks, or clear or compact the tuning cache."""
from __future__ import annotations

from . import device, tuning
from .api import PRECISIONS
from .cli import duration, int_range


def add_arguments(parser) -> None:
    from .bench.shapes import SUITES

    parser.add_argument("--suite", default="lenet",
                        help=f"a suite ({', '.join(SUITES)}) or a CSV of shapes, as for bench")
    parser.add_argument("--batch", type=int_range(1), nargs="+", metavar="B", help="batch sizes, replacing the suite's")
    parser.add_argument("--precision", choices=(*PRECISIONS, "both"), default="both",
                        help="auto's precision (pyconv.conv2d's names); both: exact and fast")
    parser.add_argument("--budget-ms", type=duration, help="tuning budget per new shape (default 3000)")
    parser.add_argument("--clear", action="store_true", help="forget every tuning result first")
    parser.add_argument("--compact", action="store_true",
                        help="rewrite the cache file with only the newest result per shape of this build, and stop")


def run(args) -> int:
    from .bench import shapes

    if args.compact:
        kept, dropped = tuning.compact()
        print(f"compacted {tuning.cache_path()}: kept {kept} lines, dropped {dropped}")
        return 0
    if args.clear:
        tuning.clear()
        print(f"cleared {tuning.cache_path()}")
    if args.budget_ms is not None:
        tuning.set_budget_ms(args.budget_ms)
    if device.device_count() == 0:
        print("no usable GPU: auto is the cpu variant here, nothing to tune")
        return 0
    suite = shapes.load_suite(args.suite, args.batch)
    precisions = ("exact", "fast") if args.precision == "both" else (args.precision,)
    print(f"tuning cache: {tuning.cache_path()} ({device.device_name(0)})")
    for shape in suite:
        for precision in precisions:
            choice = tuning.describe(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation,
                                     precision, groups=shape.groups)
            print(f"{shape.name:44s} B={shape.B:<6d} {precision:5s} -> {choice}", flush=True)
    return 0
