"""The bench's outputs: one printed table (a line per shape and variant, printed as each shape
finishes), and the same rows as JSON (with the run's facts: device, ceilings, cuDNN, method) and CSV.
Files are rewritten after every shape, so an interrupted run keeps what it measured."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from .timing import MIN_REPS

CSV_COLUMNS = ("shape", "B", "C", "H", "W", "M", "KH", "KW", "stride_h", "stride_w", "pad_h", "pad_w",
               "dilation_h", "dilation_w", "OH", "OW", "variant", "resolved", "status", "message", "unit",
               "median_ms", "min_ms", "max_ms", "calls", "reps", "n_sets", "cache_resident", "gflops",
               "gbytes_per_s", "floor_ms", "floor_bound", "pct_of_floor", "cudnn_precision", "cudnn_ms",
               "ratio_vs_cudnn", "cudnn_note", "note")
SHORT_NOTE = 12  # a cuDNN reason this short ("no torch") stands in the cuDNN column itself


def _g(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


class Table:
    """Fixed-width lines; the shape column is as wide as the longest shape name of the run."""

    def __init__(self, shapes, variants, all_variants):
        self.name_width = max([len("shape")] + [len(s.name) for s in shapes])
        resolved = max(len(v) for v in all_variants) + 1  # "auto>implicit_gemm"
        self.variant_width = max([len("variant")] + [len(v) + (resolved if v.startswith("auto") else 0)
                                                     for v in variants])

    def header(self) -> str:
        return (f"{'shape':{self.name_width}s} {'B':>6s}  {'variant':{self.variant_width}s} {'unit':11s} "
                f"{'median ms':>10s} {'GFLOP/s':>9s} {'GB/s':>8s} {'floor ms':>9s} {'bound':7s} {'%floor':>7s} "
                f"{'cuDNN ms':>10s} {'prec':4s} {'ours/cuDNN':>10s}  note")

    def line(self, row) -> str:
        s = row.shape
        variant = row.variant if row.resolved in ("", row.variant) else f"{row.variant}>{row.resolved}"
        lead = f"{s.name:{self.name_width}s} {s.B:6d}  {variant:{self.variant_width}s} "
        if row.status != "ok":
            return lead + f"{row.status}: {row.message}"
        st = row.stats
        notes = [n for n in (s.note, "cache-resident: all sets fit in cache" if row.cache_resident else "",
                             f"slow: median of {row.reps} rounds" if row.reps and row.reps < MIN_REPS else "",
                             row.cudnn_note if row.cudnn_ms is None and len(row.cudnn_note) > SHORT_NOTE else "")
                 if n]
        cudnn = _g(row.cudnn_ms) if row.cudnn_ms is not None else (
            row.cudnn_note if len(row.cudnn_note) <= SHORT_NOTE else "n/a")
        ratio = f"{row.ratio_vs_cudnn:.3g}" if row.ratio_vs_cudnn is not None else "-"
        return (lead + f"{row.unit:11s} {_g(row.median_ms):>10s} {st['gflops']:9.1f} {st['gbytes_per_s']:8.1f} "
                f"{_g(st['floor_ms'], 3):>9s} {st['floor_bound']:7s} {st['pct_of_floor']:6.1f}% "
                f"{cudnn:>10s} {row.cudnn_precision:4s} {ratio:>10s}  {'; '.join(notes)}")


def _atomic_write(path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path, meta: dict, rows) -> None:
    _atomic_write(path, json.dumps({**meta, "rows": [r.as_dict() for r in rows]}, indent=1) + "\n")


def write_csv(path, rows) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in r.as_dict().items()})
    _atomic_write(path, buf.getvalue())
