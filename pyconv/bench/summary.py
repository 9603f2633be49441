"""Who wins where. Per suite x batch x comparison x variant (compute): on how many shapes both sides
ran, the geometric mean of cuDNN's time / ours (above 1: ours is faster; operands cold, and hot), on how
many shapes ours is faster, on how many cuDNN's two runs differ by more than 10%, and the median % of the
floor each side reaches (each on its own unit: ours on the unit its
variant computes on, cuDNN on the unit of its precision). As markdown (the README's tables), JSON and
CSV. For the per-variant table, also which variant is fastest how often, and how close auto and
auto_fast come to the fastest single variant on each shape (lines).

    python -m pyconv.bench.summary RESULTS.json [...] [--markdown PATH] [--json PATH] [--csv PATH]
    (RESULTS.json: from `python -m pyconv bench --json`; several suites give one table)
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass
from typing import Optional

from .files import atomic_write, csv_text

PER_SHAPE_LIMIT = 40  # more shapes than this: only the totals
AUTO_SLACK = 1.05     # auto's bar: within 5% of the fastest single variant on every shape
CSV_COLUMNS = ("suite", "B", "compare", "variant", "cudnn", "shapes", "timed", "geomean_speedup", "wins",
               "median_pct_of_floor", "cudnn_median_pct_of_floor", "geomean_speedup_hot", "cudnn_unstable")


@dataclass(frozen=True)
class Stat:
    suite: str
    B: int
    compare: str
    variant: str
    cudnn: str                  # cuDNN's precision(s) in the group, "/"-joined
    shapes: int                 # rows in the group (a shape each)
    timed: int                  # shapes where ours and cuDNN both have a time
    geomean_speedup: Optional[float]   # geometric mean of cuDNN time / ours over the timed shapes
    wins: int                   # timed shapes where ours is faster
    median_pct_of_floor: Optional[float]
    cudnn_median_pct_of_floor: Optional[float]
    geomean_speedup_hot: Optional[float] = None  # the same with both sides' operands hot (one set)
    cudnn_unstable: int = 0     # timed shapes whose two cuDNN runs differ by more than 10%

    def as_dict(self) -> dict:
        return asdict(self)


def _median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def compute(suite: str, rows) -> list:
    """Stats of one run's rows (dicts as in the JSON), in the order the groups first appear."""
    groups = OrderedDict()
    for r in rows:
        groups.setdefault((r["B"], r.get("compare", "variants"), r["variant"]), []).append(r)
    stats = []
    for (b, compare, variant), group in groups.items():
        timed = [r for r in group if r["status"] == "ok" and r.get("cudnn_ms") and r.get("median_ms")]
        speedups = [r["cudnn_ms"] / r["median_ms"] for r in timed]
        hot = [r["speedup_hot_vs_cudnn"] for r in timed if r.get("speedup_hot_vs_cudnn")]
        ok = [r for r in group if r["status"] == "ok"]
        stats.append(Stat(
            suite, b, compare, variant, "/".join(sorted({r["cudnn_precision"] for r in timed})), len(group),
            len(timed), _geomean(speedups), sum(s > 1 for s in speedups), _median(r.get("pct_of_floor") for r in ok),
            _median(r.get("cudnn_pct_of_floor") for r in timed), _geomean(hot),
            sum(bool(r.get("cudnn_unstable")) for r in timed)))
    return stats


def _geomean(values) -> Optional[float]:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def markdown(stats) -> str:
    out = ["| suite | B | comparison | ours | cuDNN | shapes timed | cuDNN / ours (geo. mean) | ours faster | "
           "median % of floor, ours | median % of floor, cuDNN | operands hot: cuDNN / ours | cuDNN unstable |",
           "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in stats:
        share = f"{s.wins} ({100 * s.wins / s.timed:.0f}%)" if s.timed else "-"
        out.append(f"| {s.suite} | {s.B} | {s.compare} | {s.variant} | {s.cudnn or '-'} | {s.timed} of {s.shapes} | "
                   f"{_fmt(s.geomean_speedup, '.2f', 'x')} | {share} | {_fmt(s.median_pct_of_floor, '.1f', '%')} | "
                   f"{_fmt(s.cudnn_median_pct_of_floor, '.1f', '%')} | {_fmt(s.geomean_speedup_hot, '.2f', 'x')} | "
                   f"{s.cudnn_unstable} |")
    return "\n".join(out) + "\n"


def _fastest(rows, exact: Optional[bool]):
    """(variant, ms, cuDNN ms or None) of the fastest ok non-auto row of one kind (exact: on the fp32
    unit; None: any), cuDNN at its fastest among the precisions those rows compare with."""
    ok = [r for r in rows if r["status"] == "ok" and (exact is None or (r["unit"] == "fp32") == exact)
          and not r["variant"].startswith("auto")]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["median_ms"])
    cudnn = [r["cudnn_ms"] for r in ok if r.get("cudnn_ms")]
    return best["variant"], best["median_ms"], min(cudnn) if cudnn else None


def lines(rows) -> list:
    """The per-variant table's rows: per shape the fastest exact and reduced-precision variant against
    cuDNN, then which variants are fastest how often."""
    shapes = OrderedDict()
    for r in rows:
        if r.get("compare", "variants") == "variants":
            shapes.setdefault((r["shape"], r["B"]), []).append(r)
    out, winners = [], {True: Counter(), False: Counter()}
    width = max((len(name) for name, _ in shapes), default=5)
    for (name, b), shape_rows in shapes.items():
        parts = []
        for exact in (True, False):
            best = _fastest(shape_rows, exact)
            if best is None:
                continue
            variant, ms, cudnn = best
            winners[exact][variant] += 1
            vs = f" (cuDNN {cudnn:.4g} ms: {cudnn / ms:.2f}x)" if cudnn else ""
            parts.append(f"{'exact' if exact else 'fast'}: {variant} {ms:.4g} ms{vs}")
        if len(shapes) <= PER_SHAPE_LIMIT:
            out.append(f"{name:{width}s} B={b:<6d} " + ("; ".join(parts) or "nothing ran"))
    for exact, counts in winners.items():
        if counts:
            out.append(f"fastest {'exact' if exact else 'fast'} variant: "
                       + ", ".join(f"{v} on {n}" for v, n in counts.most_common()) + f" of {len(shapes)} shapes")
    return out + auto_against_best(shapes)


def auto_against_best(shapes) -> list:
    """Per auto variant, on the shapes where it and a single variant ran: on how many its time is within
    AUTO_SLACK of the fastest single variant it chooses among (auto: the exact ones; auto_fast: all), and
    the worst shape. Single variants run their default configurations; auto tunes over all of them."""
    out = []
    for auto, exact in (("auto", True), ("auto_fast", None)):
        ratios = []
        for (name, b), shape_rows in shapes.items():
            ran = [r for r in shape_rows if r["variant"] == auto and r["status"] == "ok"]
            best = _fastest(shape_rows, exact)
            if ran and best:
                ratios.append((ran[0]["median_ms"] / best[1], name, b, ran[0].get("resolved", auto), best[0]))
        if not ratios:
            continue
        worst = max(ratios)
        within = sum(1 for r in ratios if r[0] <= AUTO_SLACK)
        out.append(f"{auto} within {AUTO_SLACK - 1:.0%} of the fastest single variant on {within} of {len(ratios)} "
                   f"shapes; worst {worst[0]:.2f}x ({worst[1]} B={worst[2]}: {worst[3]} against {worst[4]})")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyconv.bench.summary", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="JSON files of `python -m pyconv bench --json`")
    parser.add_argument("--markdown", metavar="PATH", help="write the summary table as markdown")
    parser.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    parser.add_argument("--csv", metavar="PATH", help="write the summary as CSV")
    args = parser.parse_args(argv)
    status, stats = 0, []
    for path in args.results:
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"{path}: cannot read it ({exc})")
            status = 1
            continue
        print(f"{path}: suite {data.get('suite')} on {data.get('device')}")
        for line in lines(data["rows"]):
            print("  " + line)
        stats += compute(data.get("suite", path), data["rows"])
    table = markdown(stats)
    print(table, end="")
    if args.markdown:
        atomic_write(args.markdown, table)
    if args.json:
        atomic_write(args.json, json.dumps([s.as_dict() for s in stats], indent=1) + "\n")
    if args.csv:
        atomic_write(args.csv, csv_text([s.as_dict() for s in stats], CSV_COLUMNS))
    return status


if __name__ == "__main__":
    sys.exit(main())
