"""How long a converted network's first forward takes on a machine with an empty tuning cache, and
whether the short tuning it does costs speed afterwards.

    python bench/torch_first_forward.py [--model resnet50] [--batch 1] [--dtype float32] [--out DIR]

Each step runs in a new process (the tuning cache in a temporary folder, shared by the steps):
  1. empty cache, default settings: seconds of convert(model, example_inputs=x), i.e. every layer's
     plan, tuning and engine "fastest" decision, after CUDA and cuDNN are up (both models ran once);
  2. the same in a second process: the cache answers the tuning;
  3. the same with pyconv.tuning's budget (pyconv.torch.set_tuning_budget_ms(None): 3000 ms a shape) in
     another cache file: what full tuning costs;
  4. latency of the converted model (eager, and replays of a CUDA graph; medians of CUDA-event timings)
     with either cache, in alternating processes (--rounds each): "the same speed" or not.
Prints one line per step and writes first_forward.json under --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child(args) -> dict:
    """One process: convert with the cache args.cache (timed), then, with --latency, the converted model's
    eager and CUDA-graph latency."""
    import torch

    import pyconv.torch as pct
    import pyconv.tuning
    from pyconv.torch.models import NETWORKS, build

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    dtype = getattr(torch, args.dtype)
    x = torch.rand(args.batch, *NETWORKS[args.model][1], device="cuda").to(dtype)
    original = build(args.model, "cuda", dtype)
    with torch.no_grad():
        original(x)  # CUDA, cuDNN and PyTorch's own first-call costs out of the timed part
    torch.cuda.synchronize()
    pyconv.tuning.set_cache_path(args.cache)
    pct.set_tuning_budget_ms(None if args.full else pct.DEFAULT_TUNING_BUDGET_MS)
    start = time.perf_counter()
    model = pct.convert(original, example_inputs=x)
    torch.cuda.synchronize()
    result = {"convert_s": time.perf_counter() - start}
    if not args.latency:
        return result
    from torch_models import forward_fn, latency_ms  # bench/, the script's directory: the same protocol
    with torch.no_grad():
        for mode in ("eager", "graph"):
            fn, _ = forward_fn(model, x, mode)
            for _ in range(5):
                fn()
            result[f"{mode} ms"] = statistics.median(latency_ms(fn, args.reps))
    return result


def _run_child(argv: list, env: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child"] + argv, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"child {argv} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="latency processes per tuning, alternating")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default="", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    folder = tempfile.mkdtemp(prefix="pyconv-first-forward-")
    short, full = os.path.join(folder, "short.txt"), os.path.join(folder, "full.txt")
    common = ["--model", args.model, "--batch", str(args.batch), "--dtype", args.dtype, "--reps", str(args.reps)]
    env = dict(os.environ)
    env.pop("PYCONV_TUNE_CACHE", None)
    result = {"model": args.model, "batch": args.batch, "dtype": args.dtype}
    result["first_process_s"] = _run_child(common + ["--cache", short], env)["convert_s"]
    print(f"first forward, empty cache: {result['first_process_s']:.2f} s", flush=True)
    result["second_process_s"] = _run_child(common + ["--cache", short], env)["convert_s"]
    print(f"first forward, second process: {result['second_process_s']:.2f} s", flush=True)
    result["full_tuning_s"] = _run_child(common + ["--cache", full, "--full"], env)["convert_s"]
    print(f"first forward, empty cache, pyconv.tuning's budget: {result['full_tuning_s']:.2f} s", flush=True)
    times = {"short": [], "full": []}
    for _ in range(args.rounds):  # alternating processes: a drift of the GPU's state reaches both alike
        times["short"].append(_run_child(common + ["--cache", short, "--latency"], env))
        times["full"].append(_run_child(common + ["--cache", full, "--full", "--latency"], env))
    for mode in ("eager", "graph"):
        ms = {k: statistics.median(r[f"{mode} ms"] for r in v) for k, v in times.items()}
        result[f"{mode} ms, short tuning"], result[f"{mode} ms, full tuning"] = ms["short"], ms["full"]
        result[f"{mode} short/full"] = ms["short"] / ms["full"]
        print(f"{mode}: short tuning {ms['short']:.3f} ms, full tuning {ms['full']:.3f} ms "
              f"({ms['short'] / ms['full']:.3f}x)", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first_forward.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
