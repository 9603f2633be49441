"""Who wins where, in a few lines: per shape, the fastest exact variant against cuDNN fp32 and the
fastest reduced-precision one against cuDNN's best reduced precision (tf32 or fp16); then which
variants are fastest how often, on how many shapes the fastest beats cuDNN, and the geometric mean
of ours/cuDNN.

    python -m pyconv.bench.summary RESULTS.json [...]   (the JSON of `python -m pyconv bench`)
"""
from __future__ import annotations

import json
import math
import sys
from collections import Counter, OrderedDict

PER_SHAPE_LIMIT = 40  # more shapes than this: only the totals


def _best(rows, exact: bool):
    """(variant, ms, (cuDNN ms, its precision) or None) of the fastest ok row of one kind, or None.
    auto rows are the library's choice among these, so they are left out of "fastest"; cuDNN is its
    fastest at the precisions those rows compare with (fp32 for exact; tf32 or fp16 for fast)."""
    ok = [r for r in rows if r["status"] == "ok" and (r["unit"] == "fp32") == exact
          and not r["variant"].startswith("auto")]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["median_ms"])
    cudnn = [(r["cudnn_ms"], r["cudnn_precision"]) for r in ok if r.get("cudnn_ms")]
    return best["variant"], best["median_ms"], min(cudnn) if cudnn else None


def lines(rows) -> list:
    shapes = OrderedDict()
    for r in rows:
        shapes.setdefault((r["shape"], r["B"]), []).append(r)
    out, totals, winners = [], {True: [], False: []}, {True: Counter(), False: Counter()}
    width = max((len(name) for name, _ in shapes), default=5)
    for (name, b), shape_rows in shapes.items():
        parts = []
        for exact in (True, False):
            best = _best(shape_rows, exact)
            if best is None:
                continue
            variant, ms, cudnn = best
            winners[exact][variant] += 1
            vs = f" vs cuDNN {cudnn[1]} {cudnn[0]:.4g} ms ({ms / cudnn[0]:.2f}x)" if cudnn else ""
            parts.append(f"{'exact' if exact else 'fast'}: {variant} {ms:.4g} ms{vs}")
            if cudnn:
                totals[exact].append(ms / cudnn[0])
        if len(shapes) <= PER_SHAPE_LIMIT:
            out.append(f"{name:{width}s} B={b:<6d} " + ("; ".join(parts) or "nothing ran"))
    for exact, counts in winners.items():
        if counts:
            out.append(f"fastest {'exact' if exact else 'fast'} variant: "
                       + ", ".join(f"{v} on {n}" for v, n in counts.most_common()) + f" of {len(shapes)} shapes")
    for exact, ratios in totals.items():
        if ratios:
            wins = sum(r < 1 for r in ratios)
            geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            out.append(f"{'exact' if exact else 'fast'} variants: the fastest beats cuDNN on {wins} of "
                       f"{len(ratios)} shapes; geometric mean of ours/cuDNN {geo:.2f}")
    return out


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    status = 0
    for path in paths:
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
    return status


if __name__ == "__main__":
    raise SystemExit(main())
