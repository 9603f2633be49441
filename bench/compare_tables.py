"""Two bench tables of the same suite side by side: how much faster (or slower) one build is than another.

    python3 bench/compare_tables.py BEFORE.csv AFTER.csv [--worst 5]

Rows (CSV from `python -m pyconv bench --csv`) are joined on shape, batch, comparison and variant; only rows
timed in both count. Prints, per comparison and batch, the geometric mean of before / after (above 1: the
after build is faster), the count of rows, the worst rows, and cuDNN's own before / after (the two runs'
drift: the same cuDNN timed twice)."""
import argparse
import csv
import math
from collections import defaultdict


def load(path):
    rows = {}
    for r in csv.DictReader(open(path)):
        if r.get("status") == "ok" and r.get("median_ms"):
            rows[(r["shape"], r["B"], r["compare"], r["variant"])] = r
    return rows


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--worst", type=int, default=5)
    args = ap.parse_args()
    before, after = load(args.before), load(args.after)
    groups = defaultdict(list)
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key], after[key]
        ours = float(b["median_ms"]) / float(a["median_ms"])
        cudnn = (float(b["cudnn_ms"]) / float(a["cudnn_ms"])) if b.get("cudnn_ms") and a.get("cudnn_ms") else None
        groups[(key[2], key[1])].append((ours, cudnn, key, b, a))
    print(f"{args.before} -> {args.after}")
    print("| comparison | B | rows | before / after, ours (geo. mean) | slowest row | cuDNN before / after |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    everything = []
    for (compare, batch), items in sorted(groups.items()):
        everything += items
        worst = min(items, key=lambda i: i[0])
        cudnn = [i[1] for i in items if i[1]]
        print(f"| {compare} | {batch} | {len(items)} | {geomean([i[0] for i in items]):.3f} | "
              f"{worst[2][0]} {worst[0]:.3f} ({worst[3]['resolved']} -> {worst[4]['resolved']}) | "
              f"{geomean(cudnn):.3f} |")
    if everything:
        print(f"all rows: {len(everything)}, geo. mean before / after {geomean([i[0] for i in everything]):.3f}")
        print(f"worst {args.worst}:")
        for ours, _, key, b, a in sorted(everything, key=lambda i: i[0])[:args.worst]:
            print(f"  {key[0]} B={key[1]} {key[2]}: {float(b['median_ms']) * 1e3:.1f} -> "
                  f"{float(a['median_ms']) * 1e3:.1f} us ({b['resolved']}[{b.get('config', '')}] -> "
                  f"{a['resolved']}[{a.get('config', '')}])")


if __name__ == "__main__":
    main()
