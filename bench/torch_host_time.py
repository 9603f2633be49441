"""Where a converted network's eager time goes: host and GPU apart, per forward and per conv layer.

    python bench/torch_host_time.py [--model googlenet] [--batch 16] [--dtype float32] [--reps 15]

For the original model, the converted one (engine "fastest") and the converted one on PyTorch's conv
everywhere (engine "torch": the converted module's own cost), each forward is timed three ways: the
host's time to enqueue it while the GPU sleeps (so that the host never waits: one forward's launches
fit the launch queue), the GPU's time with the host ahead (events around the forward, after the sleep),
and plain eager latency (events around the forward, nothing else queued). Then the host time of each
conv layer inside the "fastest" model and inside the "torch" one (perf_counter around each conv's call, its
batch-norm fold included, under the same sleep), beside the host time engine "fastest" measured for that
layer alone: where the model's eager time exceeds both the original's and the GPU time, these show which
layers cost more in the model than their timing alone predicted. Medians over --reps forwards. (A network
of many launches a forward, as densenet121's ~430, may fill the launch queue while the GPU sleeps: then the
host waits, and its per-forward host time is not the host's own.)
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import pyconv.torch as pct
import pyconv.tuning
from pyconv.torch.models import NETWORKS, build
from torch_models import latency_ms  # bench/, the script's directory

SLEEP_CYCLES = 100_000_000  # ~50 ms on the H100 / H200: longer than any one forward's enqueueing


def forward_times(model, x, reps: int) -> tuple:
    """(host ms, GPU ms, eager ms) medians of one forward."""
    host, gpu = [], []
    for _ in range(reps):
        torch.cuda._sleep(SLEEP_CYCLES)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        began = time.perf_counter()
        model(x)
        host.append((time.perf_counter() - began) * 1e3)
        stop.record()
        stop.synchronize()
        gpu.append(start.elapsed_time(stop))
    eager = latency_ms(lambda: model(x), reps)
    return statistics.median(host), statistics.median(gpu), statistics.median(eager)


def layer_host_times(model, x, reps: int) -> dict:
    """{layer name: median host ms of its conv call inside the model} for the converted convs. Each layer's
    _conv_forward is wrapped for the run (an instance attribute; hooks would stop the batch-norm folds)."""
    convs = {name: m for name, m in model.named_modules() if isinstance(m, (pct.Conv2d, pct.Conv1d))}
    times = {name: [] for name in convs}

    def timed(m, name):
        call = type(m)._conv_forward

        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return call(m, *args, **kwargs)
            finally:
                times[name].append((time.perf_counter() - began) * 1e3)
        return wrapper
    for name, m in convs.items():
        m._conv_forward = timed(m, name)
    try:
        for _ in range(reps):
            torch.cuda._sleep(SLEEP_CYCLES)
            model(x)
            torch.cuda.synchronize()
    finally:
        for m in convs.values():
            del m._conv_forward
    return {name: statistics.median(t) for name, t in times.items() if t}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="googlenet", choices=sorted(NETWORKS))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("error: this tool needs a CUDA device")
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    pyconv.tuning.set_budget_ms(300)
    dtype = getattr(torch, args.dtype)
    x = torch.rand(args.batch, *NETWORKS[args.model][1], device="cuda").to(dtype)
    original = build(args.model, "cuda", dtype)
    with torch.no_grad():
        models = {"original": original, "fastest": pct.convert(original, example_inputs=x),
                  "torch": pct.convert(original, engine="torch", example_inputs=x)}
        for m in models.values():
            for _ in range(5):
                m(x)
        print(f"{args.model} b{args.batch} {args.dtype} on {torch.cuda.get_device_name()}, torch {torch.__version__}")
        for label, m in models.items():
            host, gpu, eager = forward_times(m, x, args.reps)
            print(f"  {label:9s} host {host:7.3f} ms  gpu {gpu:7.3f} ms  eager {eager:7.3f} ms")
        in_model = layer_host_times(models["fastest"], x, args.reps)
        torch_in_model = layer_host_times(models["torch"], x, args.reps)
    report = pct.report(models["fastest"])
    print("  each conv layer's host time (ms; its batch norm's fold included) in the model, engine fastest and engine\n"
          "  torch (PyTorch's conv through our module), beside engine fastest's own timing of it alone:")
    print(f"  {'layer':40s} {'engine':7s} {'in model':>9s} {'torch in model':>14s} {'ours alone':>10s} {'torch alone':>11s}")
    for name, records in report.items():
        record = next((r for r in records if r["input"][0] == args.batch), None)
        if record is None or name not in in_model:
            continue
        times = [in_model[name], torch_in_model.get(name), record.get("pyconv_host_ms"), record.get("torch_host_ms")]
        print(f"  {name:40s} {record['engine']:7s} "
              + " ".join("-".rjust(w) if v is None else f"{v:{w}.4f}" for v, w in zip(times, (9, 14, 10, 11))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
