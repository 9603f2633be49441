"""Host cost of pyconv's conv op inside a torch.compile'd (inductor) model, beside nn.Conv2d's.

    python bench/torch_compiled_op.py [--device cuda] [--convs 20] [--channels 4] [--size 4] [--batch 1]

A chain of `--convs` 1x1 convs (ReLU and + 1 between, which inductor fuses into one kernel a step), compiled
with fullgraph: nn.Conv2d (inductor's extern cuDNN / oneDNN call), pyconv.torch.Conv2d with engine "pyconv"
(inductor's direct call of the op's kernel, pyconv/torch/_lowering.py) and the same through PyTorch's
dispatcher (PYCONV_TORCH_LOWERING=0, in a child process: the lowering is registered once per process). Small
layers, so that the host's time is the forward's time: each figure is the median over 7 rounds of (wall time of
`--calls` forwards without a sync) / calls, with a sync before and after each round (per_call.py's timing).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch
import torch._inductor.config as inductor_config

import pyconv.torch as pct
from per_call import per_call_us  # bench/, the script's directory


def build(engine, convs: int, channels: int, device: str) -> torch.nn.Module:
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            make = (lambda: pct.Conv2d(channels, channels, 1, engine=engine)) if engine else \
                (lambda: torch.nn.Conv2d(channels, channels, 1))
            self.convs = torch.nn.ModuleList([make() for _ in range(convs)])

        def forward(self, x):
            for conv in self.convs:
                x = torch.relu(conv(x)) + 1
            return x
    return Chain().to(device).eval()


def measure(engines: list, args) -> dict:
    torch.set_num_threads(1)
    inductor_config.force_disable_caches = True  # a cached graph may be the other column's
    x = torch.rand(args.batch, args.channels, args.size, args.size, device=args.device)
    out = {}
    with torch.no_grad():
        for engine in engines:
            fn = torch.compile(build(engine, args.convs, args.channels, args.device), fullgraph=True)
            for _ in range(3):
                fn(x)
            sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
            out[engine or "nn.Conv2d"] = per_call_us(lambda: fn(x), args.calls, 7, False, sync)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--convs", type=int, default=20)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # the dispatcher's column
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(["pyconv"], args)))
        return 0
    figures = measure([None, "pyconv"], args)
    child = subprocess.run([sys.executable, __file__, "--child", *(argv if argv is not None else sys.argv[1:])],
                           env={**os.environ, "PYCONV_TORCH_LOWERING": "0"}, capture_output=True, text=True,
                           check=True)
    dispatcher = json.loads(child.stdout.strip().splitlines()[-1])["pyconv"]
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"{args.convs} compiled 1x1 convs of {args.channels} channels, {args.size}x{args.size}, batch "
          f"{args.batch}, {name}, torch {torch.__version__}: us a forward (median of 7 rounds of {args.calls})")
    print("| nn.Conv2d | engine pyconv, lowered | engine pyconv, through the dispatcher |")
    print("| --- | --- | --- |")
    print(f"| {figures['nn.Conv2d']:.1f} | {figures['pyconv']:.1f} | {dispatcher:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
