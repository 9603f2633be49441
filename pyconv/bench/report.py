"""The bench's outputs: one printed table (a line per shape, comparison and variant, printed as each
shape finishes), the same rows as JSON (with the run's facts: device, ceilings, cuDNN, method, and the
summary) and CSV, and a markdown file (the summary tables, then every row). Files are rewritten after
every shape, so an interrupted run keeps what it measured."""
from __future__ import annotations

import json

from . import summary
from .files import atomic_write, csv_text
from .timing import MIN_REPS

CSV_COLUMNS = ("shape", "B", "C", "H", "W", "M", "KH", "KW", "stride_h", "stride_w", "pad_h", "pad_w",
               "dilation_h", "dilation_w", "groups", "OH", "OW", "compare", "dtype", "layout", "variant", "resolved",
               "config", "status", "message", "unit", "timer", "median_ms", "min_ms", "max_ms", "calls", "reps",
               "n_sets", "cache_resident", "gflops", "gbytes_per_s", "floor_ms", "floor_bound", "pct_of_floor",
               "cudnn_precision", "cudnn_ms", "cudnn_floor_ms", "cudnn_pct_of_floor", "speedup_vs_cudnn",
               "cudnn_note", "hot_ms", "cudnn_hot_ms", "speedup_hot_vs_cudnn", "cudnn_runs", "cudnn_unstable")
SHORT_NOTE = 12  # a cuDNN reason this short ("no torch") stands in the cuDNN column itself


def _g(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _variant(variant: str, resolved: str, config: str) -> str:
    """auto>implicit_gemm[128x128]: the name asked for, then what ran where it differs, and the launch
    configuration where the variant has several."""
    ran = resolved if resolved not in ("", variant) else ""
    cfg = f"[{config}]" if config and config != "default" else ""
    return f"{variant}>{ran}{cfg}" if ran else f"{variant}{cfg}"


class Table:
    """Fixed-width lines; the shape column is as wide as the longest shape name of the run."""

    def __init__(self, shapes, cases, all_variants):
        """cases: (comparison, variant name) pairs of the run."""
        self.name_width = max([len("shape")] + [len(s.name) for s in shapes])
        self.compare_width = max([len("cmp")] + [len(c.name) for c, _ in cases])
        resolved = max(len(v) for v in all_variants) + 12  # "auto>implicit_gemm[128x64x32]"
        self.variant_width = max([len("variant")] + [len(v) + (resolved if v.startswith("auto") else 0)
                                                     for _, v in cases])

    def header(self) -> str:
        return (f"{'shape':{self.name_width}s} {'B':>6s} {'cmp':{self.compare_width}s} "
                f"{'variant':{self.variant_width}s} {'unit':11s} {'median ms':>10s} {'GFLOP/s':>9s} {'GB/s':>8s} "
                f"{'floor ms':>9s} {'bound':7s} {'%floor':>7s} {'cuDNN ms':>10s} {'prec':4s} {'%floor':>7s} "
                f"{'cuDNN/ours':>10s} {'hot ms':>9s} {'cuDNN hot':>9s} {'hot c/o':>7s}  note")

    def line(self, row) -> str:
        s = row.shape
        lead = (f"{s.name:{self.name_width}s} {s.B:6d} {row.compare:{self.compare_width}s} "
                f"{_variant(row.variant, row.resolved, row.config):{self.variant_width}s} ")
        if row.status != "ok":
            return lead + f"{row.status}: {row.message}"
        st = row.stats
        notes = [n for n in ("cache-resident: all sets fit in cache" if row.cache_resident else "",
                             f"slow: median of {row.reps} rounds" if row.reps and row.reps < MIN_REPS else "",
                             row.cudnn_note if row.cudnn_ms is None and len(row.cudnn_note) > SHORT_NOTE else "",
                             _unstable(row.cudnn_runs) if row.cudnn_unstable else "")
                 if n]
        cudnn = _g(row.cudnn_ms) if row.cudnn_ms is not None else (
            row.cudnn_note if len(row.cudnn_note) <= SHORT_NOTE else "n/a")
        speedup = f"{row.speedup_vs_cudnn:.3g}" if row.speedup_vs_cudnn is not None else "-"
        return (lead + f"{row.unit:11s} {_g(row.median_ms):>10s} {st['gflops']:9.1f} {st['gbytes_per_s']:8.1f} "
                f"{_g(st['floor_ms'], 3):>9s} {st['floor_bound']:7s} {st['pct_of_floor']:6.1f}% "
                f"{cudnn:>10s} {row.cudnn_precision:4s} {_pct(row.cudnn_stats.get('pct_of_floor')):>7s} "
                f"{speedup:>10s} {_g(row.hot_ms):>9s} {_g(row.cudnn_hot_ms):>9s} "
                f"{_g(row.speedup_hot_vs_cudnn, 3):>7s}  {'; '.join(notes)}")


def _unstable(runs) -> str:
    return f"cuDNN unstable: {_g(runs[0])} then {_g(runs[1])} ms"


def write_json(path, meta: dict, rows) -> None:
    dicts = [r.as_dict() for r in rows]
    stats = [s.as_dict() for s in summary.compute(meta.get("suite", ""), dicts)]
    atomic_write(path, json.dumps({**meta, "summary": stats, "rows": dicts}, indent=1) + "\n")


def write_csv(path, rows) -> None:
    atomic_write(path, csv_text([r.as_dict() for r in rows], CSV_COLUMNS))


def markdown_rows(dicts) -> str:
    """Every row as a markdown table: ours and cuDNN side by side, each with its % of its floor."""
    out = ["| shape | B | comparison | ours (variant > what ran) | ours ms | % floor | cuDNN | cuDNN ms | "
           "% floor | cuDNN / ours | ours hot ms | cuDNN hot ms | hot: cuDNN / ours |",
           "| --- | ---: | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for d in dicts:
        ours = _variant(d["variant"], d.get("resolved", ""), d.get("config", ""))
        if d["status"] != "ok":
            why = (d.get("message") or "").replace("|", "/")
            out.append(f"| {d['shape']} | {d['B']} | {d['compare']} | {ours} | {d['status']}: {why} | | | | | | | | |")
            continue
        cudnn = _g(d.get("cudnn_ms")) + (f" ({_unstable(d['cudnn_runs'])})" if d.get("cudnn_unstable") else "")
        out.append(f"| {d['shape']} | {d['B']} | {d['compare']} | {ours} | {_g(d['median_ms'])} | "
                   f"{_pct(d['pct_of_floor'])} | {d['cudnn_precision']} | {cudnn} | "
                   f"{_pct(d.get('cudnn_pct_of_floor'))} | {_g(d.get('speedup_vs_cudnn'), 3)} | "
                   f"{_g(d.get('hot_ms'))} | {_g(d.get('cudnn_hot_ms'))} | {_g(d.get('speedup_hot_vs_cudnn'), 3)} |")
    return "\n".join(out) + "\n"


def write_markdown(path, meta: dict, rows) -> None:
    dicts = [r.as_dict() for r in rows]
    stats = summary.compute(meta.get("suite", ""), dicts)
    text = (f"# pyconv bench: suite {meta.get('suite')} on {meta.get('device')}\n\n"
            f"{meta.get('date', '')}; libconv {meta.get('libconv', '')}; cuDNN: {meta.get('cudnn', '')}\n\n"
            f"Method: {meta.get('method', '')}\n\n## Summary\n\n{summary.markdown(stats)}\n"
            f"## Every shape\n\n{markdown_rows(dicts)}")
    atomic_write(path, text)
