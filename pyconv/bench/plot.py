"""The bench as a picture: median op time per shape for every variant (markers), cuDNN (black lines,
one style per precision) and the floors (grey bars), on a log scale — a marker under the black line
beats cuDNN, a marker near the bar top is near the floor. Large suites get one panel per batch, with
the shapes ordered by floor. matplotlib is an optional extra (`pip install pyconv[plot]`).
"""
from __future__ import annotations

from collections import OrderedDict

from .._lib import ConvError

PANEL_LIMIT = 40  # shapes per panel before the panels split by batch
CUDNN_STYLES = {"fp32": "-", "tf32": "--", "fp16": ":", "bf16": "-."}
MARKERS = "os^vD<>phX*P"  # 12 shapes against 10 colours: distinct pairs for 60 variants


def _label(row) -> str:
    """A variant, and in a comparison run the comparison: auto runs in each."""
    compare = row.get("compare", "variants")
    return row["variant"] if compare == "variants" else f"{compare}: {row['variant']}"


def _groups(rows) -> "OrderedDict":
    """(shape, B) -> {"floor": {kind: ms}, "cudnn": {precision: ms}, "ours": {label: ms}}."""
    groups = OrderedDict()
    for r in rows:
        g = groups.setdefault((r["shape"], r["B"]), {"floor": {}, "cudnn": {}, "ours": {}})
        if r["status"] != "ok":
            continue
        g["ours"][_label(r)] = r["median_ms"]
        kind = "fp32" if r["unit"] == "fp32" else "reduced precision"
        g["floor"][kind] = min(r["floor_ms"], g["floor"].get(kind, float("inf")))
        if r.get("cudnn_ms"):
            g["cudnn"][r["cudnn_precision"]] = r["cudnn_ms"]
    return groups


def _panels(groups) -> list:
    keys = list(groups)
    if len(keys) <= PANEL_LIMIT:
        return [("", keys)]
    batches = sorted({b for _, b in keys})
    return [(f"B={b}", [k for k in keys if k[1] == b]) for b in batches]


def plot(rows, path, title: str) -> None:
    """rows: dicts as in the JSON output. Writes a PNG (or any format matplotlib infers from path)."""
    try:
        import matplotlib
    except ImportError:
        raise ConvError("--plot needs matplotlib: pip install 'pyconv[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    panels = _panels(groups)
    variants = list(OrderedDict.fromkeys(_label(r) for r in rows if r["status"] == "ok"))
    colors = plt.get_cmap("tab10")  # 10 distinct colours, indexed by integer
    widest = max(len(keys) for _, keys in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(min(max(8, 0.18 * widest + 4), 48), 6 * len(panels)),
                             squeeze=False)
    for ax, (label, keys) in zip(axes[:, 0], panels):
        if len(keys) > PANEL_LIMIT:  # many shapes: rising floors are easier to follow than suite order
            keys = sorted(keys, key=lambda k: max(groups[k]["floor"].values(), default=0.0))
        x = range(len(keys))
        for kind, color, width in (("fp32", "0.85", 0.8), ("reduced precision", "0.65", 0.4)):
            heights = [groups[k]["floor"].get(kind, 0.0) for k in keys]
            if any(heights):
                ax.bar(x, heights, width=width, color=color, label=f"floor, {kind}")
        for precision, style in CUDNN_STYLES.items():
            times = [groups[k]["cudnn"].get(precision, float("nan")) for k in keys]
            if any(t == t for t in times):
                ax.plot(x, times, "k" + style, marker="_", markersize=10, linewidth=1.4, label=f"cuDNN {precision}")
        for i, variant in enumerate(variants):
            times = [groups[k]["ours"].get(variant, float("nan")) for k in keys]
            if any(t == t for t in times):
                ax.plot(x, times, linestyle="none", marker=MARKERS[i % len(MARKERS)], markersize=5,
                        color=colors(i % 10), label=variant)
        ax.set_yscale("log")
        ax.set_ylabel("median op time per call (ms)")
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{name} B={b}" for name, b in keys], rotation=90,
                           fontsize=8 if len(keys) <= 20 else 5)
        ax.set_xlim(-0.6, len(keys) - 0.4)
        ax.grid(True, which="major", axis="y", alpha=0.4)
        ax.set_title(f"{title} {label}".strip())
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
