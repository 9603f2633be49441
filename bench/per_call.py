"""Per-call wall time of pyconv.conv2d on PyTorch CUDA tensors beside torch.nn.functional.conv2d.

    python bench/per_call.py [--json PATH] [--calls 300] [--repeats 7]

Batch-1 layers, where the host-side cost of a call dominates: LeNet C1 and C3, and a 64->64 3x3 56x56
layer. Two modes: a sync after every call (latency of one call), and no sync (as a model's forward
runs: calls are enqueued back to back; the loop ends with one sync). Each figure is the median over
`repeats` loops of `calls` calls of (loop wall time / calls), after warm-up (which also tunes auto).
Both sides run exact fp32 (TF32 off in PyTorch).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import pyconv

LAYERS = [  # name, x shape, w shape, padding
    ("lenet_c1_b1", (1, 1, 86, 86), (4, 1, 7, 7), 0),
    ("lenet_c3_b1", (1, 4, 40, 40), (16, 4, 7, 7), 0),
    ("conv64_3x3_56_b1", (1, 64, 56, 56), (64, 64, 3, 3), 1),
]


def per_call_us(fn, calls: int, repeats: int, sync_each: bool, sync=torch.cuda.synchronize) -> float:
    """Median over `repeats` loops of (wall time of `calls` calls of fn) / calls, in us; `sync` waits for the
    device (a no-op for CPU work) after every call where sync_each, else once a loop."""
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
            if sync_each:
                sync()
        sync()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def breakdown(calls: int) -> None:
    """Where one call's host time goes (LeNet C1 b1, no sync): each part alone, median of 5 loops. The
    engine's parts are what pyconv.conv2d on CUDA tensors runs (through pyconv.torch's engine)."""
    import pyconv.torch as pct
    from pyconv import _arrays, _streams
    from pyconv.torch import _engine, _op
    x = torch.rand(1, 1, 86, 86, device="cuda")
    w = torch.rand(4, 1, 7, 7, device="cuda")
    plan = pyconv.Conv2dPlan(x.shape, w.shape, device=0)
    y = torch.empty(plan.out_shape, device="cuda")
    s = torch.cuda.current_stream().cuda_stream
    spec, _ = _op.cached_spec(None, 1, 0, 1, 1, None, "auto", "exact", "pyconv", False)
    pct.conv2d(x, w, precision="exact", fallback=False)
    entry = _engine._entries[_engine._key(x, w, None, spec)[4]]
    parts = {
        "pyconv.conv2d": lambda: pyconv.conv2d(x, w),
        "pyconv.torch.conv2d": lambda: pct.conv2d(x, w, precision="exact", fallback=False),
        "engine: _op.conv2d_spec": lambda: _op.conv2d_spec(x, w, None, spec, None),
        "engine: _engine.conv2d": lambda: _engine.conv2d(x, w, None, spec),
        "engine: _key": lambda: _engine._key(x, w, None, spec),
        "engine: torch.empty(out, memory_format)": lambda: torch.empty(entry.out_shape, dtype=entry.dtype,
                                                                       device=entry.device,
                                                                       memory_format=entry.memory_format),
        "torch.empty(out, dtype, device=torch.device)": lambda: torch.empty(entry.out_shape, dtype=entry.dtype,
                                                                            device=entry.device),
        "torch.empty(out, dtype, device=int)": lambda: torch.empty(entry.out_shape, dtype=entry.dtype, device=0),
        "torch.empty(out, dtype=, device=int, memory_format=)": lambda: torch.empty(
            entry.out_shape, dtype=entry.dtype, device=0, memory_format=entry.memory_format),
        "x.new_empty(out)": lambda: x.new_empty(entry.out_shape),
        "engine: raw stream": lambda: _engine._raw_stream(0),
        "engine: the C launch": lambda: _engine._launch(entry.handle, x.data_ptr(), w.data_ptr(), 0, y.data_ptr(),
                                                        0, 0, _engine._raw_stream(0)),
        "plan.launch(raw pointers): the C call": lambda: plan.launch(x.data_ptr(), w.data_ptr(), y.data_ptr(), s),
        "plan.launch(tensors)": lambda: plan.launch(x, w, y, s),
        "as_operand(tensor)": lambda: _arrays.as_operand(x, "x", 4, ""),
        "default_stream (torch current)": lambda: _streams.default_stream((_arrays.as_operand(x, "x", 4, ""),), 0),
        "torch.empty(out)": lambda: torch.empty((1, 4, 80, 80), device=0),
        "F.conv2d": lambda: F.conv2d(x, w),
    }
    print("per-call parts (us, no sync):")
    for name, fn in parts.items():
        for _ in range(20):
            fn()
        print(f"  {name:<40} {per_call_us(fn, calls, 5, False):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--breakdown", action="store_true", help="also time the parts of one call")
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    rows = []
    for name, xs, ws, pad in LAYERS:
        x = torch.rand(xs, device="cuda")
        w = torch.rand(ws, device="cuda")
        ours = lambda: pyconv.conv2d(x, w, padding=pad)  # noqa: E731
        theirs = lambda: F.conv2d(x, w, padding=pad)  # noqa: E731
        for fn in (ours, theirs):  # warm-up: tuning, cuDNN's benchmark, plan caches
            for _ in range(20):
                fn()
        torch.cuda.synchronize()
        err = (ours() - theirs()).norm().item() / theirs().norm().item()
        for sync_each in (True, False):
            a = per_call_us(ours, args.calls, args.repeats, sync_each)
            b = per_call_us(theirs, args.calls, args.repeats, sync_each)
            rows.append({"layer": name, "sync_each_call": sync_each, "pyconv_us": round(a, 1),
                         "torch_us": round(b, 1), "ratio": round(a / b, 2), "rel_err": err})
    gpu = torch.cuda.get_device_name()
    print(f"per-call wall time, {gpu}, torch {torch.__version__}, median of {args.repeats} x {args.calls} calls")
    print(f"{'layer':<18} {'sync/call':>9} {'pyconv us':>10} {'F.conv2d us':>12} {'ratio':>6}")
    for r in rows:
        print(f"{r['layer']:<18} {str(r['sync_each_call']):>9} {r['pyconv_us']:>10} {r['torch_us']:>12} {r['ratio']:>6}")
    if args.breakdown:
        breakdown(args.calls)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
