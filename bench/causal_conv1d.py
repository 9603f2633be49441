"""Causal depthwise conv1d (sequence models' short conv) and its decoding step: pyconv against PyTorch
(cuDNN through F.conv1d) and the HBM floor, on the suite pyconv/bench/suites/causal_conv1d.csv.

    python bench/causal_conv1d.py --out DIR [--batches 1,8] [--lengths 128,512,2048] [--dtypes bfloat16,...]

Every time is the median of CUDA-event timings of a CUDA graph of back-to-back calls (after warm-up),
per call, operands hot. Rows, per suite layer x batch x length x dtype x layout:
  ours         pyconv.torch.causal_conv1d(x, w, b, "silu")
  cudnn        F.conv1d(x, w, b, padding=K-1, groups=D) alone (its output has L+K-1 columns)
  torch block  the same, sliced to L, then F.silu: what a model runs instead of ours
  floor        a device-to-device copy of x (reads x once, writes as many bytes): the HBM floor of the op
The decoding step (--update): pyconv.torch.causal_conv1d_update against PyTorch's ops (roll the state,
write the token, multiply-sum, bias, SiLU), at batch 1-256, and its floor (state, token, output, weights).
Writes causal_conv1d.md and causal_conv1d.json under --out.
--package-src DIR (issue 44): Dao-AILab's causal-conv1d package beside them, built from the checkout in DIR for this
GPU alone (bench/causal_conv1d_package.py): its causal_conv1d_fn(x, w, b, activation="silu") on the same x (time,
error; widths 2 to 4 only, its limit) and its causal_conv1d_update on a state of its own. A call it refuses is
recorded as None with the reason in package_note.
"""
import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import pyconv.torch as pct

SUITE = Path(__file__).resolve().parents[1] / "pyconv" / "bench" / "suites" / "causal_conv1d.csv"


def graph_ms(fn, calls=20, reps=15):
    """Median ms per call of `calls` back-to-back calls captured in one CUDA graph."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def package_fields(K, ours, time_call, err_call=None):
    """The package's columns of a row: its time (and error, where err_call gives it), None and a note where the
    width is not one it takes or a call raises."""
    fields = dict(package_ms=None, speedup_vs_package=None)
    if err_call is not None:
        fields["package_rel_err"] = None
    if not 2 <= K <= 4:
        return dict(fields, package_note=f"K={K}: the package takes widths 2 to 4")
    try:
        if err_call is not None:
            fields["package_rel_err"] = err_call()
        fields["package_ms"] = time_call()
        fields["speedup_vs_package"] = fields["package_ms"] / ours
        return dict(fields, package_note=None)
    except Exception as e:  # a dtype or layout it does not take: keep the row, say why
        return dict(fields, package_note=first_line(e))


def sequence_row(model, D, K, B, L, dtype, channel_last, package=None):
    shape = (B, L, D) if channel_last else (B, D, L)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    x = x.transpose(1, 2) if channel_last else x
    w, b = torch.randn(D, 1, K, device="cuda", dtype=dtype), torch.randn(D, device="cuda", dtype=dtype)
    w2 = w[:, 0].contiguous()
    ours = graph_ms(lambda: pct.causal_conv1d(x, w2, b, "silu"))
    cudnn = graph_ms(lambda: F.conv1d(x, w, b, padding=K - 1, groups=D))
    block = graph_ms(lambda: F.silu(F.conv1d(x, w, b, padding=K - 1, groups=D)[..., :L]))
    floor = graph_ms(lambda: x.clone(memory_format=torch.preserve_format))
    y = pct.causal_conv1d(x, w2, b, "silu")
    ref = F.silu(F.conv1d(x.double(), w.double(), b.double(), padding=K - 1, groups=D)[..., :L])
    err = float((y.double() - ref).norm() / ref.norm())
    row = dict(model=model, D=D, K=K, B=B, L=L, dtype=str(dtype).replace("torch.", ""),
               layout="channel-last" if channel_last else "channel-first", ours_ms=ours, cudnn_ms=cudnn,
               torch_block_ms=block, floor_ms=floor, pct_of_floor=100 * floor / ours,
               speedup_vs_cudnn=cudnn / ours, speedup_vs_block=block / ours, rel_err_vs_fp64=err,
               gb_per_s=2 * x.numel() * x.element_size() / ours / 1e6)
    if package is not None:  # theirs on the same x, w (D, K), b; channel-last x as the (B, L, D) transposed view
        def theirs():
            return package.causal_conv1d_fn(x, w2, b, activation="silu")

        def their_err():
            return float((theirs().double() - ref).norm() / ref.norm())
        row.update(package_fields(K, ours, lambda: graph_ms(theirs), their_err))
    return row


def update_row(D, K, B, dtype, package=None, S=None):
    """S: the state's length, K-1 (the causal-conv1d package's tests) by default or K (Mamba's blocks)."""
    S = K - 1 if S is None else S
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    state = torch.randn(B, D, S, device="cuda", dtype=dtype)
    w, b = torch.randn(D, K, device="cuda", dtype=dtype), torch.randn(D, device="cuda", dtype=dtype)
    work = torch.empty(B, D, S + 1, device="cuda", dtype=dtype)

    def theirs():  # PyTorch's ops, as causal-conv1d's reference update: the window, its dot, the shift
        work[:, :, :S].copy_(state)
        work[:, :, S].copy_(x)
        state.copy_(work[:, :, 1:])
        return F.silu((work[:, :, -K:] * w).sum(-1) + b)

    ours = graph_ms(lambda: pct.causal_conv1d_update(x, state, w, b, "silu"), calls=50)
    torch_ms = graph_ms(theirs, calls=50)
    nbytes = (2 * B * D * S + 2 * B * D + D * K + D) * x.element_size()
    src, dst = (torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device="cuda") for _ in range(2))
    floor = graph_ms(lambda: dst.copy_(src), calls=50)  # reads nbytes/2 and writes as many: nbytes moved
    row = dict(D=D, K=K, S=S, B=B, dtype=str(dtype).replace("torch.", ""), ours_ms=ours, torch_ms=torch_ms,
               bytes=nbytes, floor_ms=floor, pct_of_floor=100 * floor / ours, speedup_vs_torch=torch_ms / ours)
    if package is not None:
        # Theirs: x (B, D), conv_state (B, D, state_len >= K-1), shifted in place as ours is: a copy of its own,
        # so that neither op's state is the other's.
        their_state = state.clone()
        row.update(package_fields(K, ours, lambda: graph_ms(
            lambda: package.causal_conv1d_update(x, their_state, w, b, activation="silu"), calls=50)))
    return row


def package_commit(src):
    """The checkout's commit: git's where src is a git checkout's top, else its COMMIT file (a `git archive` of
    it has no .git; bench/README says how it is made), else "unknown"."""
    src = Path(src).resolve()
    try:
        top = subprocess.run(["git", "-C", str(src), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True)
        if top.returncode == 0 and Path(top.stdout.strip()).resolve() == src:
            head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
            if head.returncode == 0 and head.stdout.strip():
                return head.stdout.strip()
    except OSError:
        pass
    if (src / "COMMIT").is_file():
        return (src / "COMMIT").read_text().strip() or "unknown"
    return "unknown"


def load_package(src, build):
    """(the causal_conv1d package or None, the JSON's note of it)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # run as a script, this folder is sys.path[0] already
        sys.path.append(here)
    import causal_conv1d_package  # beside this file

    build = Path(build) if build else causal_conv1d_package.default_build_dir(src)
    t0 = time.time()
    package = causal_conv1d_package.load(src, build)
    info = dict(src=str(Path(src).resolve()), commit=package_commit(src), built=package is not None,
                build_s=round(time.time() - t0, 1))
    if package is not None:
        info.update(arch=f"sm_{causal_conv1d_package.arch()}", version=getattr(package, "__version__", None))
    return package, info


def ms_or_dash(value, fmt):
    return "-" if value is None else format(1e3 * value, fmt)


def ratio_or_dash(value):
    return "-" if value is None else f"{value:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--lengths", default="128,512,2048")
    ap.add_argument("--dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--layouts", default="channel-first,channel-last")
    ap.add_argument("--update-batches", default="1,16,64,256")
    ap.add_argument("--package-src", metavar="DIR",
                    help="a checkout of Dao-AILab/causal-conv1d: build its extension for this GPU and time its "
                         "causal_conv1d_fn / causal_conv1d_update beside ours (issue 44)")
    ap.add_argument("--package-build", metavar="DIR",
                    help="where its extension is built (kept: seconds the next time); default DIR-build beside "
                         "--package-src")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    layers = list(csv.DictReader(SUITE.open()))
    package, package_info = load_package(args.package_src, args.package_build) if args.package_src else (None, None)
    rows, updates = [], []
    for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
        for layer in layers:
            D, K = int(layer["D"]), int(layer["K"])
            cases = [(1, 16384)] if layer["model"] == "pytorch-192902" else [
                (int(B), int(L)) for B in args.batches.split(",") for L in args.lengths.split(",")]
            for B, L in cases:
                for layout in args.layouts.split(","):
                    rows.append(sequence_row(layer["model"], D, K, B, L, dtype, layout == "channel-last", package))
                    print(json.dumps(rows[-1]), flush=True)
        for D in (2048, 4096, 8192):
            for B in [int(v) for v in args.update_batches.split(",")]:
                for S in (3, 4):
                    updates.append(update_row(D, 4, B, dtype, package, S))
                    print(json.dumps(updates[-1]), flush=True)
    gpu = torch.cuda.get_device_name()
    result = dict(gpu=gpu, torch=torch.__version__, rows=rows, updates=updates)
    if package_info is not None:
        result["package"] = package_info
    (out / "causal_conv1d.json").write_text(json.dumps(result, indent=1))
    lines = [f"# Causal depthwise conv1d + SiLU (bench/causal_conv1d.py), {gpu}, torch {torch.__version__}", "",
             "Medians of CUDA-graph replays, per call, operands hot. cuDNN: F.conv1d(padding=K-1, groups=D) alone; "
             "block: that sliced to L then F.silu; floor: a copy of x (read x + write as many bytes).", ""]
    if package is not None:
        lines += [f"package: Dao-AILab/causal-conv1d {getattr(package, '__version__', '')} at commit "
                  f"{package_info['commit']}, its CUDA extension built here for {package_info['arch']} alone "
                  "(bench/causal_conv1d_package.py); causal_conv1d_fn(x, w, b, activation=\"silu\") and "
                  "causal_conv1d_update on a state of its own; x package: its time / ours; -: a width outside its "
                  "2 to 4 or a call it refused (package_note in the JSON).", ""]
    elif package_info is not None:
        lines += [f"package: Dao-AILab/causal-conv1d at commit {package_info['commit']} could not be built here "
                  "(the log says why): no package columns.", ""]
    pk = package is not None
    head = ["model", "D", "K", "B", "L", "dtype", "layout", "ours us", "cuDNN us", "block us"] + (
        ["package us"] if pk else []) + ["floor us", "% of floor", "x cuDNN", "x block"] + (
        ["x package"] if pk else []) + ["rel err"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], r["D"], r["K"], r["B"], r["L"], r["dtype"], r["layout"], f"{1e3 * r['ours_ms']:.1f}",
                 f"{1e3 * r['cudnn_ms']:.1f}", f"{1e3 * r['torch_block_ms']:.1f}"] + (
            [ms_or_dash(r["package_ms"], ".1f")] if pk else []) + [
            f"{1e3 * r['floor_ms']:.1f}", f"{r['pct_of_floor']:.0f}", f"{r['speedup_vs_cudnn']:.2f}",
            f"{r['speedup_vs_block']:.2f}"] + ([ratio_or_dash(r["speedup_vs_package"])] if pk else []) + [
            f"{r['rel_err_vs_fp64']:.1e}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    head = ["D", "B", "state", "dtype", "ours us", "PyTorch ops us"] + (["package us"] if pk else []) + [
        "floor us", "% of floor", "x PyTorch"] + (["x package"] if pk else [])
    lines += ["", "## Decoding step (causal_conv1d_update, K = 4, one token; state K-1 = 3 or K = 4 values)", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for u in updates:
        cells = [u["D"], u["B"], u["S"], u["dtype"], f"{1e3 * u['ours_ms']:.2f}", f"{1e3 * u['torch_ms']:.2f}"] + (
            [ms_or_dash(u["package_ms"], ".2f")] if pk else []) + [
            f"{1e3 * u['floor_ms']:.2f}", f"{u['pct_of_floor']:.0f}", f"{u['speedup_vs_torch']:.2f}"] + (
            [ratio_or_dash(u["speedup_vs_package"])] if pk else [])
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    (out / "causal_conv1d.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
