"""What `python -m pyconv lenet` prints on stdout: plain-text tables of times and accuracy."""
from __future__ import annotations

from .layers import LayerTimes, PipelineOptions
from .network import Result

CONV_LABELS = {"C1": "C1 conv 1->4 7x7, 86x86 -> 80x80", "C3": "C3 conv 4->16 7x7, 40x40 -> 34x34"}


def table(header: list[str], rows: list[list[str]], left: int = 2) -> str:
    """Columns padded to their widest cell; the first `left` columns (names) left-aligned, the
    others (numbers) right-aligned."""
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header)] + [line(row) for row in rows])


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def overlap_label(options: PipelineOptions) -> str:
    return f"{options.streams} streams x {options.chunks} chunks"


def single(result: Result, labels, options: PipelineOptions) -> str:
    """The per-layer report of one variant."""
    on_device = any(t.on_device for t in result.conv.values())
    if on_device:
        conv_header = ["conv layer", "variant", "op ms", "H2D ms", "D2H ms", "layer ms (1 stream)",
                       f"layer ms (overlapped, {overlap_label(options)})"]
        conv_rows = [[CONV_LABELS[name], t.variant, ms(t.op_ms), ms(t.h2d_ms), ms(t.d2h_ms),
                      ms(t.layer_ms), ms(t.overlapped_ms)] for name, t in result.conv.items()]
    else:  # no copies to time or overlap
        conv_header = ["conv layer", "variant", "op ms", "layer ms"]
        conv_rows = [[CONV_LABELS[name], t.variant, ms(t.op_ms), ms(t.layer_ms)]
                     for name, t in result.conv.items()]
    host_rows = [[name, ms(value)] for name, value in result.host_ms.items()]
    host_rows.append(["total (rest of the network)", ms(result.rest_ms)])
    correct = int((result.predictions == labels).sum())
    lines = [
        table(conv_header, conv_rows),
        "",
        table(["rest of the network, host NumPy", "ms"], host_rows, left=1),
        "",
        f"accuracy: {correct / len(labels):.4f} ({correct} of {len(labels)} correct)",
        "",
    ]
    if on_device:
        lines += [f"op ms: kernel only, CUDA events around the launch on the whole batch, median of "
                  f"{options.repeats} runs after a warm-up.",
                  "layer ms: host wall clock from the first copy to the last, with the H2D of the input "
                  "and the D2H of the output (page-locked host memory); 1 stream: copy, convolve, copy "
                  "the whole batch in turn; overlapped: the batch in chunks spread over several streams, "
                  "so one chunk's copies run during another's convolution."]
    else:
        lines += ["op ms: perf_counter around the cpu variant's launches (OpenMP C on the host); there "
                  "are no transfers, so the layer time is the op time. One run."]
    return "\n".join(lines)


def variant_rows(rows: list[dict], options: PipelineOptions) -> str:
    """The `--variant all` table: one row per variant; a variant that could not run gets dashes
    and its reason under the table."""
    body, notes = [], []
    for row in rows:
        if "error" in row:
            body.append([row["name"], row["precision"]] + ["-"] * 5 + ["did not run (below)"])
            notes.append(f"  {row['name']}: {row['error']}")
            continue
        c1, c3 = row["result"].conv["C1"], row["result"].conv["C3"]
        body.append([row["name"], row["precision"], ms(c1.op_ms), ms(c3.op_ms), ms(_layer(c1)),
                     ms(_layer(c3)), f"{row['accuracy']:.4f}", row["agreement"]])
    text = table(["variant", "precision", "C1 op ms", "C3 op ms", "C1 layer ms", "C3 layer ms",
                  "accuracy", "predictions vs cpu"], body)
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text + (
        f"\n\nop ms: kernel only (GPU: CUDA events around the launch on the whole batch, median of "
        f"{options.repeats} runs after a warm-up; cpu: perf_counter, one run). layer ms: with the "
        f"transfers, overlapped over {overlap_label(options)} (cpu: no transfers, = op ms).")


def _layer(t: LayerTimes) -> float:
    return t.overlapped_ms if t.overlapped_ms is not None else t.layer_ms
