"""CI's benchmark gate (.ci/bench-cpu): compare a pytest-benchmark JSON of bench/test_bench_cpu.py with
the committed baseline, each cpu-variant time taken relative to the machine reference of its own run.

    python3 .ci/bench_cpu_compare.py BASELINE.json CURRENT.json

Exit status 1 when a benchmark's relative min time is more than LIMIT times the baseline's, or when the
two files hold different benchmarks (pytest-benchmark skips one the baseline lacks without a word, so a
renamed benchmark would otherwise compare nothing).

Why relative: CI's machines are shared. On 2026-11-29 every cpu-variant min of one CI run came out
2.3-2.9x the baseline's with no change to the code measured (the CPU code and the Python path were
untouched since the run that passed); a raw-time gate fails such a run. A fixed NumPy matmul timed in
the same run (test_machine_reference) slows with the machine, not with pyconv, so dividing by it leaves
pyconv's own change. The min, not the median: other work only ever adds time.
"""
import json
import sys

LIMIT = 2.5  # catches the C code at -O0 (11-12x here); not gcc's vectorisation off (1.95-2.14x)
REFERENCE = "test_machine_reference"


def mins(path):
    with open(path) as f:
        return {b["name"]: b["stats"]["min"] for b in json.load(f)["benchmarks"]}


def main(baseline_path, current_path):
    base, now = mins(baseline_path), mins(current_path)
    differ = sorted(set(base) ^ set(now))
    if differ:
        print("bench-cpu: the baseline and this run differ in benchmarks " + ", ".join(differ)
              + "; regenerate bench/results/cpu-ci/baseline.json (see .ci/bench-cpu)")
        return 1
    if REFERENCE not in now:
        print(f"bench-cpu: no {REFERENCE} in this run; it is the machine reference every comparison needs")
        return 1
    machine = now[REFERENCE] / base[REFERENCE]
    print(f"bench-cpu: machine reference {now[REFERENCE] * 1e3:.3f} ms, baseline {base[REFERENCE] * 1e3:.3f} ms "
          f"(this machine {machine:.2f}x the baseline's time)")
    failed = []
    for name in sorted(set(now) - {REFERENCE}):
        raw = now[name] / base[name]
        relative = raw / machine
        verdict = "REGRESSED" if relative > LIMIT else "ok"
        print(f"  {name:40s} min {now[name] * 1e3:8.3f} ms, baseline {base[name] * 1e3:8.3f} ms: "
              f"{raw:.2f}x, {relative:.2f}x relative to the machine  {verdict}")
        if relative > LIMIT:
            failed.append(name)
    if failed:
        print(f"bench-cpu: {len(failed)} benchmark(s) more than {LIMIT}x the baseline relative to the machine: "
              + ", ".join(failed))
        return 1
    print(f"bench-cpu: {len(now) - 1} benchmarks within {LIMIT}x of the baseline relative to the machine (min)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
