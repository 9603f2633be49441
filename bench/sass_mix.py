"""Instruction mix of pyconv's kernels, from their SASS: how many of each opcode a kernel holds, overall and
inside its innermost loops (the instructions between a backward branch and its target, where a mainloop's
time goes). For a kernel bound by instruction issue (ncu: issue slots busy, "Not Selected" stalls), the
share of FFMA / HMMA among the loop's instructions is its ceiling.

    python3 bench/sass_mix.py REGEX [--lib path/to/libconv.so] [--top 25]
    e.g. python3 bench/sass_mix.py 'conv_igemm_pipelined_kernel.*Li128ELi128E.*XunrollTileLoaderIfLb0ELb0E'

REGEX is matched against the mangled kernel names (cuobjdump -sass); every match is reported. Needs
cuobjdump (the CUDA toolkit) and a built libconv.so (default: the installed pyconv's).
"""
import argparse
import collections
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s+Function : (\S+)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
BRANCH_TARGET = re.compile(r"BRA\s+(?:`\(\S+\)\s*)?(?:\S+,\s*)?0x([0-9a-f]+)")


def kernels(sass: str):
    """{mangled name: [(address, opcode, text)]} from cuobjdump -sass output."""
    out, name = {}, None
    for line in sass.splitlines():
        m = FUNCTION.match(line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = INSTRUCTION.search(line)
        if name and m:
            out[name].append((int(m.group(1), 16), m.group(3), line))
    return out


def loop_bodies(code):
    """The instructions of the innermost backward-branch ranges (target <= address of the branch)."""
    ranges = []
    for addr, op, text in code:
        m = BRANCH_TARGET.search(text)
        if op.startswith("BRA") and m and int(m.group(1), 16) <= addr:
            ranges.append((int(m.group(1), 16), addr))
    inner = [r for r in ranges if not any(o != r and r[0] <= o[0] and o[1] <= r[1] for o in ranges)]
    return [[c for c in code if lo <= c[0] <= hi] for lo, hi in inner]


def mix(code, top: int) -> str:
    counts = collections.Counter(op.split(".")[0] for _, op, _ in code)
    total = sum(counts.values())
    return f"{total} instructions: " + ", ".join(f"{op} {n} ({100 * n / total:.0f}%)" for op, n in counts.most_common(top))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("regex")
    parser.add_argument("--lib", help="libconv.so (default: the installed pyconv's)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    lib = args.lib
    if lib is None:
        import pyconv._lib as pl  # the library the package loads

        lib = pl.library_path()
    sass = subprocess.run(["cuobjdump", "-sass", lib], capture_output=True, text=True, check=True).stdout
    found = 0
    for name, code in kernels(sass).items():
        if not re.search(args.regex, name):
            continue
        found += 1
        print(name)
        print("  whole kernel:", mix(code, args.top))
        for body in sorted(loop_bodies(code), key=len, reverse=True)[:3]:
            print(f"  loop {body[0][0]:#x}-{body[-1][0]:#x}:", mix(body, args.top))
    if not found:
        print(f"no kernel matches {args.regex!r}", file=sys.stderr)
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
