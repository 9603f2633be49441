"""Where a converted network's time differs from the original's: kernel by kernel and op by op (torch.profiler).

    python bench/torch_profile.py --model mobilenet_v2 [--batch 1] [--dtype bfloat16] [--mode graph]
        [--reps 10] [--top 20]

For the original model and the converted one (engine "fastest"), each warmed up in --mode (eager; graph: a
CUDA graph's replay; compile), profiles --reps forwards and prints, per forward: the kernels launched, their
GPU time and the host's time in PyTorch's ops; then each side's kernels with the most GPU time, and the ops
the two sides call a different number of times per forward (in graph mode: while capturing, since a replay
runs no op). That names what a converted model adds (a bias kernel, a layout copy) or saves (folded norms);
bench/torch_host_time.py splits host and GPU time per conv layer instead.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import torch

import pyconv.torch as pct
from pyconv.torch.models import NETWORKS, build
from torch_models import forward_fn  # bench/, the script's directory

_CPU, _CUDA = torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA


def tally(events, reps: int) -> tuple:
    """({kernel name: [launches, GPU us]}, {op name: [calls, host self us]}) per forward, from profiler
    events of `reps` forwards."""
    kernels, ops = defaultdict(lambda: [0.0, 0.0]), defaultdict(lambda: [0.0, 0.0])
    for e in events:
        on_gpu = e.device_type == torch.autograd.DeviceType.CUDA
        entry = kernels[e.name] if on_gpu else ops[e.name]
        entry[0] += 1 / reps
        entry[1] += (e.device_time if on_gpu else e.self_cpu_time_total) / reps
    return dict(kernels), dict(ops)


def op_differences(original: dict, converted: dict) -> list:
    """(op, original's calls, converted's calls) per forward, for the ops called a different number of times."""
    names = sorted(set(original) | set(converted))
    counts = [(n, original.get(n, [0, 0])[0], converted.get(n, [0, 0])[0]) for n in names]
    return [(n, a, b) for n, a, b in counts if round(a, 2) != round(b, 2)]


def _profiled(fn, reps: int, activities) -> list:
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return prof.events()


def _capture_events(model, x) -> list:
    """The ops called while capturing one forward into a CUDA graph (of a model forward_fn has warmed up and
    captured once already: every layer planned)."""
    with torch.profiler.profile(activities=[_CPU]) as prof, torch.cuda.graph(torch.cuda.CUDAGraph()):
        model(x)
    return prof.events()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mobilenet_v2", choices=sorted(NETWORKS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--mode", default="eager", choices=["eager", "graph", "compile"])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("error: the profile needs a CUDA device")
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    dtype = getattr(torch, args.dtype)
    x = torch.rand(args.batch, *NETWORKS[args.model][1], device="cuda").to(dtype)
    original = build(args.model, "cuda", dtype)
    tallies = {}
    with torch.no_grad():
        converted = pct.convert(original, engine="fastest", example_inputs=x)
        for label, model in (("original", original), ("converted", converted)):
            fn, _ = forward_fn(model, x, args.mode)
            for _ in range(5):
                fn()
            kernels, ops = tally(_profiled(fn, args.reps, [_CPU, _CUDA]), args.reps)
            if args.mode == "graph":
                ops = tally(_capture_events(model, x), 1)[1]
            tallies[label] = kernels, ops
            host = "" if args.mode == "graph" else f", host {sum(v[1] for v in ops.values()):.0f} us in ops"
            print(f"{label}: {sum(v[0] for v in kernels.values()):.0f} kernels, "
                  f"{sum(v[1] for v in kernels.values()):.1f} us of GPU time{host} a forward")
    for label, (kernels, _) in tallies.items():
        print(f"\n{label}: kernels with the most GPU time (us a forward, launches a forward)")
        for name, (count, us) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:args.top]:
            print(f"  {us:9.1f} {count:6.1f}  {name[:110]}")
    print("\nops called a different number of times a forward" + (" (while capturing)" if args.mode == "graph" else "")
          + ": original, converted")
    for name, a, b in op_differences(tallies["original"][1], tallies["converted"][1]):
        print(f"  {a:7.1f} {b:7.1f}  {name}")
    print(f"\n{args.model} b{args.batch} {args.dtype} {args.mode} on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
