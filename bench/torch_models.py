"""Whole-model latency and accuracy of pyconv.torch.convert beside the unconverted PyTorch model.

    python bench/torch_models.py [--models lenet5,resnet18,mobilenet_v2,convnext_tiny] [--batches 1,32]
        [--dtypes float32,float16,bfloat16] [--modes eager,compile,graph] [--engine fastest]
        [--reps 50] [--tune-budget-ms 500] [--per-call] [--out bench/results/<gpu>/torch-models]
        [--max-seconds S] [--resume earlier/torch_models.json [--remeasure compile]] [--control] [--torch-layers]

For each network, batch, dtype and mode: the original model and the converted one (engine `fastest`:
each layer runs pyconv's plan or PyTorch's conv, whichever measured faster for its shape) run in the
same process and mode, interleaved; latency = median over --reps forward passes, each timed with
CUDA events (eager and compile: one forward each; graph: one replay each), after warm-up. Max rel
error = max |converted - original| / max |original| of the logits (TF32 off on both sides for fp32), and
each side's against the same network in float64 (bf16 rows: ours beside PyTorch's own bf16 error).
"fell back" lists the layers that ran PyTorch's conv and why (timing or refusal). Prints a markdown
table and the geometric means per mode, batch and dtype, and writes torch_models.json and torch_models.md
under --out (--per-call: also torch_per_call.json, one call's host cost through each path on
bench/per_call.py's layers). --max-seconds stops starting rows after that time; --resume keeps an earlier
run's measured rows and measures the rest, so that the whole table can be built over several GPU calls
(--remeasure: modes whose earlier rows are measured again). --control adds a third model to each row, a deep
copy of the original run the same way (compiled or captured on its own) and interleaved with the other two: its
time over the original's ("copy" beside the ratio) is what the same network measures against itself, the
row's noise. --torch-layers adds the network converted with engine "torch" (every layer on PyTorch's conv, norms
folded and ReLUs fused as in the converted model), timed the same way ("torch layers" beside the ratio): where the
converted model loses and this one loses as much, the cost is the conversion's (folds, modules, guards), not our
kernels'.
Compiled (mode compile), a converted layer of engine "fastest" runs our op where its eager calls ran our plan
in both timed modes (eager and CUDA graph), PyTorch's conv elsewhere; "fell back" lists the latter.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

import pyconv.torch as pct
import pyconv.tuning
from pyconv.torch.models import DEFAULT_NETWORKS, NETWORKS, build


# Rounds of interleaved timing: with 3, the host-bound eager rows at batch 1 moved by up to 20% between runs
# (densenet121 1.19 in one, 0.98 in ten rounds of another, on the H200).
_ROUNDS = 10


def forward_fn(model, x, mode):
    """A no-argument callable running one forward pass in `mode`, and its output."""
    if mode == "compile":
        model = torch.compile(model, fullgraph=True)
    if mode != "graph":
        return (lambda: model(x)), None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(x)
    return graph.replay, out


def latency_ms(fn, reps: int) -> list:
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def measure(name: str, batch: int, dtype, mode: str, engine_name: str, reps: int, control: bool = False,
            torch_layers: bool = False) -> dict:
    if mode == "compile":
        # Each row's two models compile afresh: earlier rows' entries stay on the code objects that networks
        # share (ResNet.forward: resnet18 / 50, resnext50) and reached dynamo's recompile limit (fullgraph: failed).
        torch._dynamo.reset()
    x = torch.rand(batch, *NETWORKS[name][1], device="cuda").to(dtype)
    original = build(name, "cuda", dtype)
    pct.reset_fallback_counts()
    with torch.no_grad():
        reference = original(x).double()  # eager: a compiled original is not a reference (see below)
        # The same network in float64 (its weights the others' before their cast), on the same input: both
        # sides' own error, so that bf16 rows compare ours with PyTorch's bf16 error rather than with itself.
        try:
            exact = build(name, "cuda", torch.float64)(x.double())
        except RuntimeError as exc:  # an op without a float64 kernel: the row keeps its other figures
            print(f"{name}: no float64 reference ({str(exc).splitlines()[0]})", flush=True)
            exact = None
        converted = pct.convert(original, engine=engine_name, example_inputs=x)
        dtype_name = str(dtype).replace("torch.", "")
        # the layers that compile to our op, as decided in convert's calls (compiled calls may add decisions)
        compiled = pct.report(converted).compiled
        models = {"original": original, "converted": converted}
        if control:  # the original against itself: the row's noise (its own parameters, compiled / captured apart)
            models["copy"] = copy.deepcopy(original)
        if torch_layers:  # the conversion without our kernels
            models["torch layers"] = pct.convert(original, engine="torch", example_inputs=x)
        runs = {}
        for label, model in models.items():
            fn, out = forward_fn(model, x, mode)
            for _ in range(5):
                result = fn()
            runs[label] = [fn, out if out is not None else result, []]
        for _ in range(_ROUNDS):  # interleaved rounds: clocks and neighbours affect both alike
            for run in runs.values():
                run[2] += latency_ms(run[0], max(1, reps // _ROUNDS))
    # Both against the original in eager mode: PyTorch 2.11's inductor compiled LeNet-5 (ceil-mode
    # max-pool) 0.28 away from its own eager output on the H100, which a same-mode comparison blamed on us.
    def rel_error(label, against=reference):
        return float((runs[label][1].double() - against).abs().max() / against.abs().max())
    err, original_err = rel_error("converted"), rel_error("original")
    err64, original_err64 = (None, None) if exact is None else (rel_error("converted", exact),
                                                                 rel_error("original", exact))
    t_orig, t_conv = statistics.median(runs["original"][2]), statistics.median(runs["converted"][2])
    control_ratio = statistics.median(runs["copy"][2]) / t_orig if control else None
    torch_layers_ratio = statistics.median(runs["torch layers"][2]) / t_orig if torch_layers else None
    layers = pct.report(converted)
    engine = "engine_captured" if mode == "graph" else "engine"
    fell_back = {layer: r["why"] for layer, records in layers.items() for r in records
                 if r["input"][0] == batch and r["dtype"] == dtype_name and r[engine] == "torch"}
    if mode == "compile" and engine_name != "pyconv":
        fell_back = {layer: "compiled: PyTorch's conv" for layer in layers if compiled[layer] == "torch"}
    return {"model": name, "batch": batch, "dtype": dtype_name, "mode": mode, "engine": engine_name,
            "original_ms": t_orig, "converted_ms": t_conv, "ratio": t_conv / t_orig, "control_ratio": control_ratio,
            "torch_layers_ratio": torch_layers_ratio,
            "max_rel_error": err,
            "original_max_rel_error": original_err, "max_rel_error_f64": err64,
            "original_max_rel_error_f64": original_err64,
            "layers": len(layers), "pyconv_layers": len(layers) - len(fell_back), "fell_back": fell_back,
            "refusals": pct.fallback_counts()}


def per_call_rows(calls: int = 300, repeats: int = 7) -> list:
    """Host cost of one call (no sync between calls) on bench/per_call.py's batch-1 layers: the op's
    eager path (pyconv.torch.conv2d), pyconv.conv2d on tensors, and torch.nn.functional.conv2d."""
    import pyconv
    import torch.nn.functional as F
    from per_call import LAYERS, per_call_us  # bench/ is the script's directory
    rows = []
    with torch.no_grad():
        for name, xs, ws, pad in LAYERS:
            x, w = torch.rand(xs, device="cuda"), torch.rand(ws, device="cuda")
            paths = {"pyconv.torch.conv2d": lambda: pct.conv2d(x, w, padding=pad, fallback=False),
                     "pyconv.conv2d": lambda: pyconv.conv2d(x, w, padding=pad),
                     "F.conv2d": lambda: F.conv2d(x, w, padding=pad)}
            row = {"layer": name}
            for label, fn in paths.items():
                for _ in range(20):
                    fn()
                row[label + " us"] = round(per_call_us(fn, calls, repeats, False), 1)
            rows.append(row)
            print(row, flush=True)
    return rows


def _fell_back(row: dict) -> str:
    """Layers on PyTorch's conv: by timing (counted) and by refusal (named with the reason)."""
    if row["fell_back"] and all(why.startswith("compiled") for why in row["fell_back"].values()):
        return "all: compiled" if row["pyconv_layers"] == 0 else f"{len(row['fell_back'])} compiled"
    timed = sum(why.endswith(" faster") for why in row["fell_back"].values())
    refused = [f"{layer}: {why[:60]}" for layer, why in row["fell_back"].items() if not why.endswith(" faster")]
    return "; ".join(([f"{timed} by timing"] if timed else []) + refused) or "none"


def _e(value) -> str:
    return "-" if value is None else f"{value:.1e}"


# The controls a row may carry (--control, --torch-layers): their label and field.
_CONTROLS = (("copy", "control_ratio"), ("torch layers", "torch_layers_ratio"))


def _ratio(row: dict) -> str:
    """converted / original, and in brackets: with --control the original's copy / original (the row's noise),
    with --torch-layers the network converted on PyTorch's conv / original."""
    beside = [f"{label} {row[key]:.2f}" for label, key in _CONTROLS if row.get(key) is not None]
    return f"{row['ratio']:.2f}" + (f" ({', '.join(beside)})" if beside else "")


def markdown(rows: list) -> str:
    lines = ["| model | batch | dtype | mode | original ms | converted ms | ratio | max rel err, converted "
             "(original) vs eager original | vs float64: converted / original | pyconv layers | fell back to PyTorch |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['mode']} | failed: {r['error']} |||||||")
            continue
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['mode']} | {r['original_ms']:.3f} | "
                     f"{r['converted_ms']:.3f} | {_ratio(r)} | {r['max_rel_error']:.1e} ({r['original_max_rel_error']:.1e}) | "
                     f"{_e(r.get('max_rel_error_f64'))} / {_e(r.get('original_max_rel_error_f64'))} | "
                     f"{r['pyconv_layers']}/{r['layers']} | {_fell_back(r)} |")
    return "\n".join(lines)


def summary(rows: list) -> str:
    """Per mode, batch and dtype: the geometric mean of converted / original over the networks measured, how
    many rows were above 1.00 (and the largest), the geometric means of the original's copy / original over the
    rows measured with --control (the noise) and of the network on PyTorch's conv / original over those with
    --torch-layers ("-" without), and the rows that failed; a markdown table."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["mode"], r["batch"], r["dtype"]), []).append(r)
    lines = ["| mode | batch | dtype | networks | geo. mean | above 1.00 (largest) | copy / original (geo. mean) "
             "| torch layers / original (geo. mean) | failed |", "|---|---|---|---|---|---|---|---|---|"]
    for (mode, batch, dtype), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        ratios = [r["ratio"] for r in group if "error" not in r]
        above = [x for x in ratios if x > 1.0]
        geo = f"{statistics.geometric_mean(ratios):.2f}" if ratios else "-"
        worst = f" ({max(above):.2f})" if above else ""
        controls = []
        for _, key in _CONTROLS:
            values = [r[key] for r in group if r.get(key) is not None]
            controls.append(f"{statistics.geometric_mean(values):.2f} ({len(values)})" if values else "-")
        lines.append(f"| {mode} | {batch} | {dtype} | {len(ratios)} | {geo} | {len(above)}{worst} | "
                     f"{' | '.join(controls)} | {len(group) - len(ratios)} |")
    return "\n".join(lines)


def resumed(rows: list, remeasure) -> list:
    """The rows of an earlier run (--resume) to keep: those that measured, but for the modes named in
    --remeasure (rows an engine change made stale)."""
    return [r for r in rows if "error" not in r and r["mode"] not in remeasure]


def planned(models, batches, dtypes, modes, done: list) -> list:
    """(model, batch, dtype, mode) still to measure, in the bench's order: those without a row in `done`
    (rows of an earlier run, --resume) that measured."""
    measured = {(r["model"], r["batch"], r["dtype"], r["mode"]) for r in done if "error" not in r}
    return [(m, b, d, mode) for m in models for b in batches for d in dtypes for mode in modes
            if (m, b, d, mode) not in measured]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_NETWORKS), help=f"any of {', '.join(NETWORKS)}")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16")
    parser.add_argument("--modes", default="eager,compile,graph")
    parser.add_argument("--engine", default="fastest", choices=["fastest", "pyconv"])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--per-call", action="store_true", help="also time one call's host cost per path")
    parser.add_argument("--tune-budget-ms", type=float, default=500,
                        help="auto's tuning budget per new shape (the default 3000 makes a first run long)")
    parser.add_argument("--resume", type=Path, default=None,
                        help="a torch_models.json of an earlier run: its measured rows are kept, not measured again")
    parser.add_argument("--remeasure", default="",
                        help="modes (comma-separated) whose --resume rows are measured again, e.g. compile")
    parser.add_argument("--control", action="store_true",
                        help="also time a copy of the original, interleaved: each row's noise (\"copy\" beside "
                             "the ratio)")
    parser.add_argument("--torch-layers", action="store_true",
                        help="also time the network converted with engine \"torch\" (no layer on our kernels), "
                             "interleaved: what the conversion costs without them (\"torch layers\" beside the ratio)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="start no row after this many seconds (the rest: --resume in a later run)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("error: the model bench needs a CUDA device")
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    pyconv.tuning.set_budget_ms(args.tune_budget_ms)
    gpu = torch.cuda.get_device_name().lower().replace(" ", "-")
    out = args.out or Path(__file__).parent / "results" / gpu / "torch-models"
    out.mkdir(parents=True, exist_ok=True)
    rows = resumed(json.loads(args.resume.read_text()), set(filter(None, args.remeasure.split(",")))) \
        if args.resume else []
    remaining = planned(args.models.split(","), [int(b) for b in args.batches.split(",")],
                        args.dtypes.split(","), args.modes.split(","), rows)
    started = time.monotonic()
    for i, (name, batch, dtype_name, mode) in enumerate(remaining):
        if args.max_seconds is not None and time.monotonic() - started > args.max_seconds:
            print(f"--max-seconds {args.max_seconds:g}: {len(remaining) - i} rows not run (--resume "
                  f"{out / 'torch_models.json'} runs them): {remaining[i:]}", flush=True)
            break
        try:
            row = measure(name, batch, getattr(torch, dtype_name), mode, args.engine, args.reps, args.control,
                          args.torch_layers)
        except Exception as exc:  # noqa: BLE001 - one failed row must not lose the others
            row = {"model": name, "batch": batch, "dtype": dtype_name, "mode": mode,
                   "error": f"{type(exc).__name__}: {exc}"[:300]}
        rows.append(row)
        print(markdown([row]).splitlines()[-1], flush=True)
        (out / "torch_models.json").write_text(json.dumps(rows, indent=1))
    if args.per_call:
        (out / "torch_per_call.json").write_text(json.dumps(per_call_rows(), indent=1))
    table, groups = markdown(rows), summary(rows)
    (out / "torch_models.md").write_text(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}\n\n"
                                         f"{groups}\n\n{table}\n")
    print(table + "\n\n" + groups)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
