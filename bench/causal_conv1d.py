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
"""
import argparse
import csv
import json
import statistics
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


def sequence_row(model, D, K, B, L, dtype, channel_last):
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
    return dict(model=model, D=D, K=K, B=B, L=L, dtype=str(dtype).replace("torch.", ""),
                layout="channel-last" if channel_last else "channel-first", ours_ms=ours, cudnn_ms=cudnn,
                torch_block_ms=block, floor_ms=floor, pct_of_floor=100 * floor / ours,
                speedup_vs_cudnn=cudnn / ours, speedup_vs_block=block / ours, rel_err_vs_fp64=err,
                gb_per_s=2 * x.numel() * x.element_size() / ours / 1e6)


def update_row(D, K, B, dtype):
    S = K - 1
    x = torch.randn(B, D, device="cuda", dtype=dtype)
    state = torch.randn(B, D, S, device="cuda", dtype=dtype)
    w, b = torch.randn(D, K, device="cuda", dtype=dtype), torch.randn(D, device="cuda", dtype=dtype)
    work = torch.empty(B, D, K, device="cuda", dtype=dtype)

    def theirs():  # PyTorch's ops, as causal-conv1d's reference update: the window, its dot, the shift
        work[:, :, :S].copy_(state)
        work[:, :, S].copy_(x)
        state.copy_(work[:, :, 1:])
        return F.silu((work * w).sum(-1) + b)

    ours = graph_ms(lambda: pct.causal_conv1d_update(x, state, w, b, "silu"), calls=50)
    torch_ms = graph_ms(theirs, calls=50)
    nbytes = (2 * B * D * S + 2 * B * D + D * K + D) * x.element_size()
    src, dst = (torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device="cuda") for _ in range(2))
    floor = graph_ms(lambda: dst.copy_(src), calls=50)  # reads nbytes/2 and writes as many: nbytes moved
    return dict(D=D, K=K, B=B, dtype=str(dtype).replace("torch.", ""), ours_ms=ours, torch_ms=torch_ms,
                bytes=nbytes, floor_ms=floor, pct_of_floor=100 * floor / ours, speedup_vs_torch=torch_ms / ours)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--lengths", default="128,512,2048")
    ap.add_argument("--dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--layouts", default="channel-first,channel-last")
    ap.add_argument("--update-batches", default="1,16,64,256")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    layers = list(csv.DictReader(SUITE.open()))
    rows, updates = [], []
    for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
        for layer in layers:
            D, K = int(layer["D"]), int(layer["K"])
            cases = [(1, 16384)] if layer["model"] == "pytorch-192902" else [
                (int(B), int(L)) for B in args.batches.split(",") for L in args.lengths.split(",")]
            for B, L in cases:
                for layout in args.layouts.split(","):
                    rows.append(sequence_row(layer["model"], D, K, B, L, dtype, layout == "channel-last"))
                    print(json.dumps(rows[-1]), flush=True)
        for D in (2048, 4096, 8192):
            for B in [int(v) for v in args.update_batches.split(",")]:
                updates.append(update_row(D, 4, B, dtype))
                print(json.dumps(updates[-1]), flush=True)
    gpu = torch.cuda.get_device_name()
    (out / "causal_conv1d.json").write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, rows=rows,
                                                            updates=updates), indent=1))
    lines = [f"# Causal depthwise conv1d + SiLU (bench/causal_conv1d.py), {gpu}, torch {torch.__version__}", "",
             "Medians of CUDA-graph replays, per call, operands hot. cuDNN: F.conv1d(padding=K-1, groups=D) alone; "
             "block: that sliced to L then F.silu; floor: a copy of x (read x + write as many bytes).", "",
             "| model | D | K | B | L | dtype | layout | ours us | cuDNN us | block us | floor us | % of floor | "
             "x cuDNN | x block | rel err |", "|" + "---|" * 15]
    for r in rows:
        lines.append(f"| {r['model']} | {r['D']} | {r['K']} | {r['B']} | {r['L']} | {r['dtype']} | {r['layout']} | "
                     f"{1e3 * r['ours_ms']:.1f} | {1e3 * r['cudnn_ms']:.1f} | {1e3 * r['torch_block_ms']:.1f} | "
                     f"{1e3 * r['floor_ms']:.1f} | {r['pct_of_floor']:.0f} | {r['speedup_vs_cudnn']:.2f} | "
                     f"{r['speedup_vs_block']:.2f} | {r['rel_err_vs_fp64']:.1e} |")
    lines += ["", "## Decoding step (causal_conv1d_update, K = 4, one token)", "",
              "| D | B | dtype | ours us | PyTorch ops us | floor us | % of floor | x PyTorch |", "|" + "---|" * 8]
    for u in updates:
        lines.append(f"| {u['D']} | {u['B']} | {u['dtype']} | {1e3 * u['ours_ms']:.2f} | {1e3 * u['torch_ms']:.2f} | "
                     f"{1e3 * u['floor_ms']:.2f} | {u['pct_of_floor']:.0f} | {u['speedup_vs_torch']:.2f} |")
    (out / "causal_conv1d.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
