"""What `python -m pyconv lenet` prints on stdout: plain-text tables of times, floors and accuracy."""
from __future__ import annotations

from . import device_net, network

STAGE_LABELS = {"upload": "H2D uint8 images", "resize": "resize 28x28 -> 86x86 (bilinear)",
                "softmax": "softmax + argmax", "download": "D2H predictions"}
STAGE_LABELS.update({layer.name: layer.label for layer in network.LAYERS})


def table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Columns padded to their widest cell; the first `left` columns (names) left-aligned, the
    others (numbers) right-aligned."""
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header)] + [line(row) for row in rows])


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def accuracy_line(result: network.Result, labels) -> str:
    correct = int((result.classes == labels).sum())
    return f"accuracy: {correct / len(labels):.4f} ({correct} of {len(labels)} correct)"


def stage_table(rows: list[dict], variants: dict) -> str:
    """The per-stage table of one batch: time, bytes moved, and the floor where measured."""
    floors = "floor_ms" in rows[0]
    header = ["stage (one batch)", "variant", "ms", "MB"] + (["floor ms", "% of floor"] if floors else [])
    body = []
    for row in rows:
        cells = [STAGE_LABELS[row["stage"]], variants.get(row["stage"], ""), ms(row["ms"]), f"{row['bytes'] / 1e6:.2f}"]
        if floors:
            pct = row["percent_of_floor"]
            cells += [ms(row["floor_ms"]), "-" if pct is None else f"{pct:.0f}%"]
        body.append(cells)
    body.append(["sum of the stages", "", ms(sum(r["ms"] for r in rows)), f"{sum(r['bytes'] for r in rows) / 1e6:.2f}"]
                + ([ms(sum(r["floor_ms"] for r in rows)), ""] if floors else []))
    return table(header, body, left=2)


def gpu(summary: dict, labels) -> str:
    """The report of one precision on the GPU: stages, end to end, PyTorch beside it, streaming."""
    result = summary["result"]
    batch = summary["batch"]
    lines = [f"== {summary['mode'].label}: batch of {batch} images ==",
             stage_table(summary["stages"], result.variants), "",
             f"end to end, page-locked uint8 images on the host -> predictions on the host, one stream: "
             f"{ms(result.median_ms)} ms (median of {len(result.end_to_end_ms)} runs after a warm-up; "
             f"{batch / result.median_ms / 1e3:.2f} million images/s)"]
    for t in summary["torch"]:
        same = float((t.classes == result.classes[:batch]).mean())
        lines.append(f"PyTorch {summary['torch_version']} + cuDNN, {t.config}, same images and weights: "
                     f"{ms(t.median_ms)} ms -> pyconv is {t.median_ms / result.median_ms:.1f}x faster; "
                     f"predictions agree on {same:.2%} of images")
    if summary["torch_note"]:
        lines.append(summary["torch_note"])
    if result.streamed_ms:
        lines.append(f"streamed: {summary['images_label']} in batches of {batch} over {summary['lanes']}: "
                     f"{ms(result.median_ms_streamed)} ms (median of {len(result.streamed_ms)} passes after one "
                     f"warm-up pass) = {summary['images'] / result.median_ms_streamed / 1e3:.2f} million images/s")
    lines += [accuracy_line(result, labels), ""]
    return "\n".join(lines)


def notes(floors: bool, rates) -> str:
    text = ("stage ms: CUDA events between the stages of one batch on one stream, median of the runs "
            "(C1 and C3 are the course's op times, their ReLU + max-pool fused into the same kernel). "
            "MB: bytes read + written by the stage.")
    if floors:
        text += (f"\nfloor: max(bytes / copy rate, flops / peak of the unit the variant uses), from this GPU's "
                 f"measured ceilings: {rates.describe()}.")
    else:
        text += "\n--floors adds each stage's floor from this GPU's measured ceilings (about a second to measure)."
    return text


def host(result: network.Result, labels, batch: int, images_label: str) -> str:
    rows = [[STAGE_LABELS[stage], ms(value)] for stage, value in result.stage_ms.items()]
    rows.append(["total", ms(result.median_ms)])
    return "\n".join([
        f"{images_label} on the host in batches of {batch} (cpu variant, fused epilogues; NumPy resize and softmax)",
        table(["stage (all batches)", "ms"], rows), "",
        f"end to end on the host: {result.median_ms / 1e3:.2f} s (one run, perf_counter)",
        accuracy_line(result, labels)])


def variant_rows(rows: list[dict]) -> str:
    """The `--variant all` table: one row per variant; a variant that could not run gets dashes and
    its reason under the table."""
    body, notes_ = [], []
    for row in rows:
        if "error" in row:
            body.append([row["name"], row["precision"]] + ["-"] * 5 + ["did not run (below)"])
            notes_.append(f"  {row['name']}: {row['error']}")
            continue
        result = row["result"]
        body.append([row["name"], row["precision"], result.variants.get("C1", ""), ms(result.stage_ms.get("C1")),
                     ms(result.stage_ms.get("C3")), ms(result.median_ms), f"{row['accuracy']:.4f}", row["agreement"]])
    text = table(["variant", "precision", "C1 runs as", "C1 ms", "C3 ms", "end to end ms", "accuracy",
                  "predictions vs cpu"], body, left=3)
    if notes_:
        text += "\n\n" + "\n".join(notes_)
    return text + (
        "\n\nC1, C3 ms: with ReLU + max-pool (fused where the variant declares the epilogue, else a separate "
        f"`{device_net.POOL_VARIANT}` pass, shown as 'variant + {device_net.POOL_VARIANT}'); GPU: CUDA events, "
        "median after a warm-up; cpu: perf_counter, one run. end to end: host uint8 images to host predictions.")
