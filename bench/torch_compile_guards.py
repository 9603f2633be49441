"""What a compiled converted network pays for dynamo's guards, beside the original's.

    python bench/torch_compile_guards.py --model mobilenet_v2 [--batch 1] [--dtype float32] [--device cuda]
        [--rounds 10] [--reps 10]

Each call of a torch.compile'd model first checks the guards of its cached graphs on the host ("TorchDynamo
Cache Lookup"), with the host's caches cold from the forward before; at batch 1 a compiled forward is bound
by the host, so every guard a converted module adds shows in its latency. For the original model, a deep copy
of it (the control: the same guards, its own parameters) and the converted one (engine "fastest"), each
compiled (fullgraph) and timed interleaved: the latency (CUDA events, medians; wall time on the CPU) with guards
checked, then with their evaluation skipped (torch.compiler.set_stance skip_guard_eval_unsafe, which is safe
here: nothing changes between calls), then each side's cache lookup per call from the profiler. A converted
model level with the original once guards are skipped, and slower with them, pays in guards.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

import pyconv.torch as pct
from pyconv.torch.models import NETWORKS, build
from torch_models import latency_ms  # bench/, the script's directory

LOOKUP = "TorchDynamo Cache Lookup"


def latencies(fns: dict, x, rounds: int, reps: int, cuda: bool) -> dict:
    """{label: median ms of one call}, the sides interleaved round by round."""
    times = {label: [] for label in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            if cuda:  # CUDA events, as the model bench times
                times[label] += latency_ms(lambda fn=fn: fn(x), reps)
                continue
            for _ in range(reps):
                began = time.perf_counter()
                fn(x)
                times[label].append((time.perf_counter() - began) * 1e3)
    return {label: statistics.median(t) for label, t in times.items()}


def lookup_us(fn, x, calls: int, cuda: bool) -> float:
    """Median host microseconds of dynamo's cache lookup (guard evaluation) per call of fn."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn(x)
        if cuda:
            torch.cuda.synchronize()
    spans = [e.cpu_time_total for e in prof.events() if e.name == LOOKUP]
    return statistics.median(spans) if spans else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2", help=f"any of {', '.join(NETWORKS)}")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    dtype = getattr(torch, args.dtype)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.rand(args.batch, *NETWORKS[args.model][1], device=args.device).to(dtype)
    original = build(args.model, args.device, dtype)
    models = {"original": original, "copy": copy.deepcopy(original),
              "converted": pct.convert(copy.deepcopy(original), engine="fastest", example_inputs=x)}
    with torch.no_grad():
        fns = {label: torch.compile(m, fullgraph=True) for label, m in models.items()}
        for fn in fns.values():
            for _ in range(3):
                fn(x)
        rows = {}
        for label, skip in (("guards checked", False), ("guards skipped", True)):
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=skip):
                rows[label] = latencies(fns, x, args.rounds, args.reps, cuda)
        lookups = {label: lookup_us(fn, x, 20, cuda) for label, fn in fns.items()}
    name = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"{args.model}, batch {args.batch}, {args.dtype}, {name}, torch {torch.__version__}: ms a call "
          "(ratio to the original)")
    print("| | " + " | ".join(fns) + " |\n|---|" + "---|" * len(fns))
    for label, times in rows.items():
        base = times["original"]
        print(f"| {label} | " + " | ".join(f"{t:.3f} ({t / base:.3f})" for t in times.values()) + " |")
    print(f"| cache lookup (us a call) | " + " | ".join(f"{v:.0f}" for v in lookups.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
