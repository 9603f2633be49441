#!/usr/bin/env python3
"""The README's generated tables: the variant table from the C capability table (cuda/core/variants.def),
the results table from a GPU's bench summary (bench/results/<gpu>/summary.csv) and the large-kernel table from
the H200's large_kernel suite (bench/results/nvidia-h200/large_kernel*.csv). Standard library only:
no GPU, no libconv, no pyconv import.

    python bench/readme_tables.py                # print every table
    python bench/readme_tables.py variants       # print one
    python bench/readme_tables.py --write        # rewrite README.md between its marker comments
    python bench/readme_tables.py --check        # exit 1 if README.md's tables differ from the generated ones

The README holds each table between <!-- NAME:begin --> and <!-- NAME:end --> (NAME: variants, results,
large_kernel);
tests/test_readme_tables.py fails when they are out of step.
"""
from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VARIANTS_DEF = REPO / "cuda" / "core" / "variants.def"
VARIANTS_DIR = REPO / "cuda" / "variants"
RESULTS_GPU = "nvidia-h100-80gb-hbm3"       # the GPU whose summary the README shows
RESULTS_DIR = REPO / "bench" / "results" / RESULTS_GPU
README = REPO / "README.md"

FIELDS = ("name", "on_device", "unit", "max_rel_error", "in_dt", "out_dt", "layouts", "wlayouts", "epilogues",
          "groups", "bias", "dilation", "idea")

# conv_unit -> (what does the arithmetic, the precision a call must allow: conv_compute as pyconv names it;
# registry.c's CONV_UNIT_COMPUTE)
UNITS = {
    "CONV_UNIT_CPU": ("host CPU, fp32", "exact"),
    "CONV_UNIT_FP32": ("CUDA cores, fp32", "exact"),
    "CONV_UNIT_FP16": ("CUDA cores, fp16 runs summed in fp32", "fast"),
    "CONV_UNIT_TENSOR_HALF": ("tensor cores, fp16 / bf16, fp32 sums", "half"),
    "CONV_UNIT_TENSOR_TF32": ("tensor cores, tf32, fp32 sums", "tf32"),
}
# the bit-set macros of cuda/core/conv_internal.h, by their members
DTYPES = {"CONV_DT_F32": ["f32"], "CONV_DT_F16": ["f16"], "CONV_DT_BF16": ["bf16"],
          "CONV_DT_ALL": ["f32", "f16", "bf16"]}
LAYOUTS = {"CONV_LY_NCHW": ["NCHW"], "CONV_LY_ALL": ["NCHW", "NHWC"]}
WLAYOUTS = {"CONV_WL_MCKK": ["MCKK"], "CONV_WL_ALL": ["MCKK", "MKKC"]}
EPILOGUES = {"CONV_EP_NONE": ["none"], "CONV_EP_RELU": ["none", "ReLU"], "CONV_EP_ALL": ["none", "ReLU", "ReLU + max-pool"],
             "CONV_EP_SILU": ["SiLU"]}


def _strip_comments(text: str) -> str:
    """C comments out, string literals kept (a '/*' inside an idea string stays)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _split_args(body: str) -> list:
    """Top-level comma-separated arguments of a macro call (commas in strings or parentheses kept)."""
    args, depth, cur, i = [], 0, [], 0
    while i < len(body):
        c = body[i]
        if c == '"':
            j = i + 1
            while body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            cur.append(body[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    args.append("".join(cur).strip())
    return args


def _c_string(expr: str) -> str:
    """The value of adjacent C string literals ("a" "b" -> ab), with the simple escapes."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', expr)
    if not parts:
        raise ValueError(f"not a string literal: {expr!r}")
    text = "".join(parts)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def _bits(expr: str, table: dict) -> list:
    """A bit set written as MACRO or MACRO | MACRO, as the list of its members."""
    members = []
    for token in (t.strip() for t in expr.split("|")):
        if token not in table:
            raise ValueError(f"unknown constant {token!r} in variants.def (known: {', '.join(table)})")
        members += [m for m in table[token] if m not in members]
    return members


def parse_variants(text: str) -> list:
    """One dict per CONV_VARIANT(...) line of variants.def, in id order."""
    text = _strip_comments(text)
    variants, pos = [], 0
    while True:
        start = text.find("CONV_VARIANT(", pos)
        if start < 0:
            return variants
        i, depth = start + len("CONV_VARIANT("), 1
        while depth:
            c = text[i]
            if c == '"':
                i += 1
                while text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        args = _split_args(text[start + len("CONV_VARIANT("):i - 1])
        if len(args) != len(FIELDS):
            raise ValueError(f"CONV_VARIANT with {len(args)} arguments, expected {len(FIELDS)}: {args[:1]}")
        v = dict(zip(FIELDS, args))
        v["idea"] = _c_string(v["idea"])
        variants.append(v)
        pos = i


def source_of(name: str) -> str:
    """Where conv_impl_<name> is defined: its folder under cuda/variants/ if it has one, else its file."""
    pattern = re.compile(r"\bconv_impl\s+conv_impl_" + re.escape(name) + r"\b\s*=")
    for path in sorted(VARIANTS_DIR.rglob("*")):
        if path.suffix in (".c", ".cu", ".cpp") and pattern.search(path.read_text(errors="replace")):
            rel = path.relative_to(REPO)
            return f"{rel.parent.as_posix()}/" if path.parent != VARIANTS_DIR else rel.as_posix()
    return "?"


def _cell(text: str) -> str:
    """Table-cell text: no pipes or newlines, C identifiers such as __constant__ as code (not bold)."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return re.sub(r"(?<![`\w])(__\w+?__)(?![`\w])", r"`\1`", text)


def variants_table(def_text: str | None = None) -> str:
    rows = parse_variants(def_text if def_text is not None else VARIANTS_DEF.read_text())
    out = ["| variant | arithmetic | `precision` | x, w | y, bias | layouts: x and y; w | groups, bias, dilation "
           "| epilogues | tested bound | the idea | source |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | ---: | --- | --- |"]
    for v in rows:
        if v["unit"] not in UNITS:
            raise ValueError(f"unknown unit {v['unit']!r} of {v['name']}")
        unit, compute = UNITS[v["unit"]]
        if (v["on_device"] == "1") == (v["unit"] == "CONV_UNIT_CPU"):
            raise ValueError(f"{v['name']}: on_device {v['on_device']} does not match its unit {v['unit']}")
        out.append("| " + " | ".join([
            f"`{v['name']}`", unit, compute,
            ", ".join(_bits(v["in_dt"], DTYPES)), ", ".join(_bits(v["out_dt"], DTYPES)),
            ", ".join(_bits(v["layouts"], LAYOUTS)) + "; " + ", ".join(_bits(v["wlayouts"], WLAYOUTS)),
            " / ".join(["any" if v["groups"] == "1" else "1", "yes" if v["bias"] == "1" else "no",
                        "any" if v["dilation"] == "1" else "1"]),
            ", ".join(_bits(v["epilogues"], EPILOGUES)),
            f"{float(v['max_rel_error']):g}", _cell(v["idea"]), f"`{source_of(v['name'])}`"]) + " |")
    return "\n".join(out) + "\n"


def gpu_name(results_dir: Path = RESULTS_DIR) -> str:
    """The GPU's name from gpu.txt (nvidia-smi's CSV: a header line, then name, driver, ...)."""
    lines = [l for l in (results_dir / "gpu.txt").read_text().splitlines() if l.strip()]
    return lines[1].split(",")[0].strip()


SUITES = {"cnn5": "cnn5", "groups": "groups", "lenet": "LeNet"}
COMPARISONS = ("exact", "fast", "fp16", "bf16")


def results_table(results_dir: Path = RESULTS_DIR) -> str:
    """One line per suite and batch, one column per comparison: cuDNN's time / ours (geometric mean over
    the suite's shapes; above 1: ours is faster) and on how many of them ours is faster."""
    with open(results_dir / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cells, cudnn, order = {}, {}, []
    for r in rows:
        key = (r["suite"], int(r["B"]))
        if key not in order:
            order.append(key)
        if not r["geomean_speedup"]:
            text = "-"
        else:
            text = f"{float(r['geomean_speedup']):.2f}x ({r['wins']} of {r['timed']})"
        cells[key + (r["compare"],)] = text
        cudnn.setdefault(r["compare"], set()).add(r["cudnn"])
    present = [c for c in COMPARISONS if c in cudnn] + sorted(set(cudnn) - set(COMPARISONS))
    head = [f"{c} (cuDNN {'/'.join(sorted(cudnn[c]))})" for c in present]
    out = [f"{gpu_name(results_dir)}: cuDNN's time / ours, geometric mean over the suite's layers (above 1: "
           "ours faster), and on how many layers ours is faster.", "",
           "| suite | B | " + " | ".join(head) + " |",
           "| --- | ---: | " + " | ".join("---:" for _ in head) + " |"]
    for suite, b in order:
        out.append(f"| {SUITES.get(suite, suite)} | {b} | "
                   + " | ".join(cells.get((suite, b, c), "-") for c in present) + " |")
    return "\n".join(out) + "\n"


# The large-kernel depthwise table: one row a class of filters, from the H200's large_kernel suite (fp32 from
# `--compare exact`, fp16 / bf16 from `--compare exact half`, two runs whose commits the README's prose names).
LARGE_KERNEL_DIR = REPO / "bench" / "results" / "nvidia-h200"
LARGE_KERNEL_FP32 = "large_kernel-exact.csv"
LARGE_KERNEL_HALF = "large_kernel.csv"
LARGE_KERNEL_CLASSES = (  # (row label, a layer's filter (KH, KW, stride) -> whether it is in the class)
    ("31x31 (RepLKNet's first stage)", lambda kh, kw, s: kh == kw == 31),
    ("27x27, 29x29", lambda kh, kw, s: kh == kw and kh in (27, 29)),
    ("51x5 - 47x5 bands (SLaK)", lambda kh, kw, s: max(kh, kw) >= 47 and min(kh, kw) == 5),
    ("13x5, 5x13 bands (SLaK's last stage)", lambda kh, kw, s: sorted((kh, kw)) == [5, 13]),
    ("13x13 (UniRepLKNet, RepLKNet's last stage)", lambda kh, kw, s: kh == kw == 13),
    ("1x11, 11x1 (InceptionNeXt)", lambda kh, kw, s: sorted((kh, kw)) == [1, 11]),
    ("9x9, stride 1 (MixNet-M)", lambda kh, kw, s: kh == kw == 9 and s == 1),
    ("9x9, stride 2 (MixNet-M)", lambda kh, kw, s: kh == kw == 9 and s == 2),
)
LARGE_KERNEL_COLUMNS = (("fp32", "exact", "1"), ("fp32", "exact", "32"), ("fp16", "fp16", "1"), ("fp16", "fp16", "32"),
                        ("bf16", "bf16", "32"))


def large_kernel_class(kh: int, kw: int, stride: int) -> str:
    for label, member in LARGE_KERNEL_CLASSES:
        if member(kh, kw, stride):
            return label
    raise ValueError(f"no row of the large-kernel table for a {kh}x{kw} filter at stride {stride}")


def large_kernel_table(results_dir: Path = LARGE_KERNEL_DIR) -> str:
    """cuDNN / ours in geometric mean over each class's layers, per dtype and batch; and ours' % of the fp32 FMA
    floor at batch 32 (each layer where a class has one or two, else the median)."""
    rows = []
    for name in (LARGE_KERNEL_FP32, LARGE_KERNEL_HALF):
        with open(results_dir / name, newline="") as f:
            rows += [(name, r) for r in csv.DictReader(f) if r["status"] == "ok"]
    ratios, floors = {}, {}
    for name, r in rows:
        label = large_kernel_class(int(r["KH"]), int(r["KW"]), int(r["stride_h"]))
        fp32 = r["compare"] == "exact"
        if fp32 != (name == LARGE_KERNEL_FP32):  # each dtype from its own run
            continue
        ratios.setdefault((label, r["compare"], r["B"]), []).append(float(r["speedup_vs_cudnn"]))
        if fp32 and r["B"] == "32":
            floors.setdefault(label, []).append(float(r["pct_of_floor"]))
    out = ["| filters | " + " | ".join(f"{dt} B = {b}" for dt, _, b in LARGE_KERNEL_COLUMNS)
           + " | ours, % of the fp32 FMA floor (B = 32, fp32) |",
           "| --- |" + " --- |" * (len(LARGE_KERNEL_COLUMNS) + 1)]
    for label, _ in LARGE_KERNEL_CLASSES:
        if (label, "exact", "32") not in ratios:
            continue
        cells = [f"{statistics.geometric_mean(ratios[(label, c, b)]):.1f}x" if (label, c, b) in ratios else "-"
                 for _, c, b in LARGE_KERNEL_COLUMNS]
        pct = sorted(floors[label])
        floor = ", ".join(f"{v:.0f}%" for v in pct) if len(pct) <= 2 else f"{statistics.median(pct):.0f}%"
        out.append(f"| {label} | " + " | ".join(cells) + f" | {floor} |")
    return "\n".join(out) + "\n"


TABLES = {"variants": variants_table, "results": results_table, "large_kernel": large_kernel_table}


def _span(text: str, name: str):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"README.md has no {begin} ... {end} pair")
    return i + len(begin), j


def readme_table(name: str, text: str | None = None) -> str:
    """The text between a table's markers in README.md, without the blank lines around it."""
    text = README.read_text() if text is None else text
    i, j = _span(text, name)
    return text[i:j].strip("\n") + "\n"


def rewrite(text: str) -> str:
    for name, make in TABLES.items():
        i, j = _span(text, name)
        text = text[:i] + "\n" + make() + text[j:]
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="*", metavar="TABLE", help="variants or results (default both)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite README.md between the marker comments")
    group.add_argument("--check", action="store_true", help="exit 1 if README.md's tables are out of step")
    args = parser.parse_args(argv)
    unknown = [t for t in args.tables if t not in TABLES]
    if unknown:
        parser.error(f"unknown table {unknown[0]!r} (known: {', '.join(TABLES)})")
    if args.write:
        text = README.read_text()
        new = rewrite(text)
        if new != text:
            README.write_text(new)
        print(f"README.md: tables {'rewritten' if new != text else 'already in step'}")
        return 0
    if args.check:
        stale = [n for n, make in TABLES.items() if readme_table(n) != make()]
        for n in stale:
            print(f"README.md: the {n} table is out of step; run python bench/readme_tables.py --write",
                  file=sys.stderr)
        return 1 if stale else 0
    for name in args.tables or TABLES:
        print(TABLES[name](), end="")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
