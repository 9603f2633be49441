"""Per configuration, how much faster a candidate build is than the base in a `bench/config_ab.sh` summary.

    python3 bench/config_ab_ratios.py OUT_DIR/summary.md

The summary holds, for each comparison and batch, rows `layer | the base's configurations | the candidate's |
cuDNN` (us), one row a layer and round. For each configuration this prints the geometric mean over the layers of
base / candidate, each side's faster round (above 1: the candidate is faster), the number of layers, and the layer
that lost most and the one that gained most. Layers a side refuses ("-") are left out. config_ab.sh appends it to
its summary; the geometric means of cuDNN / fastest that it prints beside each table mix the configurations."""
import argparse
import re
import statistics
import sys
from collections import defaultdict

HEADER = re.compile(r"^## (.+), (\w+), B = (\d+): base \| candidate")


def sections(text):
    """[(configurations, comparison, batch, {layer: [row values]})] in the order of the summary."""
    out = []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            out.append((m.group(1).split(), m.group(2), int(m.group(3)), defaultdict(list)))
        elif out and line.startswith(" ") and "|" in line:
            cells = [c.strip() for c in line.split("|")]
            out[-1][3][cells[0]].append(cells[1:])
    return out


def number(cell):
    try:
        return float(cell)
    except ValueError:
        return None  # "-": the configuration refuses the layer


def ratios(configs, rows):
    """{configuration: [(base / candidate, layer, base us, candidate us)]}, the faster round of each side."""
    n = len(configs)
    out = {}
    for i, config in enumerate(configs):
        moved = []
        for layer, rounds in rows.items():
            base = [number(r[i]) for r in rounds if len(r) > n + i]
            cand = [number(r[n + i]) for r in rounds if len(r) > n + i]
            if not base or not cand or None in base or None in cand:
                continue
            b, c = min(base), min(cand)
            moved.append((b / c, layer, b, c))
        out[config] = sorted(moved)
    return out


def report(text):
    lines = []
    for configs, compare, batch, rows in sections(text):
        for config, moved in ratios(configs, rows).items():
            if not moved:
                lines.append(f"{compare} B={batch} {config}: no layer timed on both builds")
                continue
            worst, best = moved[0], moved[-1]
            lines.append(f"{compare} B={batch} {config}: base / candidate {statistics.geometric_mean([m[0] for m in moved]):.3f} over "
                         f"{len(moved)} layers; most lost {worst[1]} {worst[2]:g} -> {worst[3]:g} us, most gained "
                         f"{best[1]} {best[2]:g} -> {best[3]:g} us")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", help="config_ab.sh's summary.md")
    args = parser.parse_args()
    lines = report(open(args.summary).read())
    print("\n".join(lines) if lines else "no tables in the summary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
