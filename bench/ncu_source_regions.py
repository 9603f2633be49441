"""Where a kernel's instructions and stall samples fall, from Nsight Compute's source counters: the SASS of one
profiled launch summed over address ranges of the kernel, each with its share of the warp instructions executed,
of the stall samples, its FFMA share and its most executed opcodes, then the stall reasons of one range. It reads
the CSV that this command writes on the GPU machine:

    ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:dwp_kernel --section SourceCounters \\
        --page source --print-source sass --csv python3 bench/profile_config.py ... > plane.sass.csv
    python3 bench/ncu_source_regions.py plane.sass.csv [--step 0x400] [--stalls 0x9c00:0xac00]

Addresses are offsets from the kernel's first instruction. A range of many samples and few instructions waits
(a barrier, a load); one of many instructions and few FFMA is overhead of the kind a kernel bound by issue pays
for. Standard library only.
"""
from __future__ import annotations

import argparse
import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def rows(text: str) -> list:
    """The source rows of the CSV (ncu prints its own lines and the kernel's name before the table)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), None)
    if start is None:
        raise ValueError("no source table (ncu ... --page source --print-source sass --csv)")
    return list(csv.DictReader(lines[start:]))


def number(value: str) -> float:
    try:
        return float(value.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def opcode(source: str) -> str:
    """FFMA of 'FFMA R1, R2, R3, R4' and of '@!P0 FFMA ...'; the opcode without its modifiers."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def regions(table: list, step: int) -> list:
    """[(offset, samples share, instructions share, FFMA share of the range's instructions, top opcodes)] for
    the ranges of `step` bytes that hold at least 0.5% of either."""
    base = int(table[0]["Address"], 16)
    sums = collections.OrderedDict()
    for r in table:
        at = (int(r["Address"], 16) - base) // step * step
        entry = sums.setdefault(at, [0.0, 0.0, collections.Counter()])
        entry[0] += number(r[SAMPLES])
        entry[1] += number(r[EXECUTED])
        entry[2][opcode(r["Source"])] += number(r[EXECUTED])
    samples = sum(e[0] for e in sums.values()) or 1.0
    executed = sum(e[1] for e in sums.values()) or 1.0
    out = []
    for at, (s, i, ops) in sums.items():
        if s / samples >= 0.005 or i / executed >= 0.005:
            out.append((at, s / samples, i / executed, ops["FFMA"] / i if i else 0.0, ops.most_common(4)))
    return out


def stalls(table: list, lo: int, hi: int) -> list:
    """The stall reasons summed over the offsets [lo, hi), most samples first."""
    base = int(table[0]["Address"], 16)
    reasons = [k for k in table[0] if k.startswith("stall_") and "Not Issued" not in k]
    total = collections.Counter()
    for r in table:
        if lo <= int(r["Address"], 16) - base < hi:
            for k in reasons:
                total[k[len("stall_"):]] += number(r[k])
    return total.most_common()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--step", type=lambda v: int(v, 0), default=0x400, help="bytes a range (default 0x400)")
    parser.add_argument("--stalls", help="LO:HI, offsets (hex or decimal) whose stall reasons to list")
    args = parser.parse_args()
    with open(args.csv) as f:
        table = rows(f.read())
    executed = sum(number(r[EXECUTED]) for r in table)
    ffma = sum(number(r[EXECUTED]) for r in table if opcode(r["Source"]) == "FFMA")
    print(f"{executed:.0f} warp instructions, FFMA {100 * ffma / (executed or 1):.1f}%")
    for at, s, i, f, ops in regions(table, args.step):
        top = ", ".join(f"{op} {n:.0f}" for op, n in ops)
        print(f"{at:#07x}  samples {100 * s:5.1f}%  instructions {100 * i:5.1f}%  FFMA {100 * f:3.0f}%  {top}")
    if args.stalls:
        lo, hi = (int(v, 0) for v in args.stalls.split(":"))
        print(f"stalls in {lo:#x}-{hi:#x}:", ", ".join(f"{k} {n:.0f}" for k, n in stalls(table, lo, hi) if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
