"""Which kernels cuDNN runs for a bench layer: name, grid, block, registers, shared memory, duration.

    python3 bench/cudnn_kernels.py cnn5:resnet50/res2a_branch1 cnn5:googlenet/inception_5a/1x1 \\
        [--batch 32] [--dtype f16] [--layout NHWC]

cuDNN's kernel names say its tile, cluster and pipeline (e.g. `tilesize128x128x64`, `cluster1x2x1`), which
is what to hold a pyconv configuration against when a layer loses. PyTorch's profiler reads them (with
`torch.backends.cudnn.benchmark = True`, as the bench's comparisons do), after warm-up calls that let cuDNN
choose. Needs PyTorch with CUDA; layers are named as in profile_config.py.
"""
import argparse
import json
import os
import sys
import tempfile

from profile_config import layer_shape


def cudnn_kernels(shape, batch: int, dtype: str, layout: str, tf32: bool = False, calls: int = 5):
    import torch  # optional: only this tool needs it

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = tf32  # f32: plain fp32 (the `exact` comparison) unless --tf32 (`fast`)
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    memory = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.rand((batch,) + shape.x_shape[1:], device="cuda", generator=gen) * 2 - 1).to(torch_dtype)
    w = (torch.rand(shape.w_shape, device="cuda", generator=gen) * 2 - 1).to(torch_dtype)
    x, w = x.contiguous(memory_format=memory), w.contiguous(memory_format=memory)
    geometry = dict(stride=shape.stride, padding=shape.pad, dilation=shape.dilation, groups=shape.groups)
    for _ in range(3):  # cuDNN's benchmark search, then its choice
        torch.nn.functional.conv2d(x, w, **geometry)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.nn.functional.conv2d(x, w, **geometry)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        k = kernels.setdefault(e["name"], {"durations": [], "grid": a.get("grid"), "block": a.get("block"),
                                            "registers": a.get("registers per thread"),
                                            "smem": a.get("shared memory"),
                                            "occupancy": a.get("est. achieved occupancy %")})
        k["durations"].append(float(e["dur"]))
    return kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layers", nargs="+", help="c1, c3, or SUITE:NAME (e.g. cnn5:resnet50/res2a_branch1)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f16")
    parser.add_argument("--layout", choices=("NCHW", "NHWC"), default="NHWC")
    parser.add_argument("--tf32", action="store_true", help="f32 on TF32 tensor cores (default: plain fp32)")
    args = parser.parse_args()
    for layer in args.layers:
        shape, batch = layer_shape(layer, args.batch)
        print(f"{layer} B={batch} {args.dtype}{' tf32' if args.tf32 else ''} {args.layout}")
        for name, k in cudnn_kernels(shape, batch, args.dtype, args.layout, args.tf32).items():
            d = sorted(k["durations"])
            print(f"  {d[len(d) // 2]:8.2f} us  grid {k['grid']} block {k['block']} regs {k['registers']} "
                  f"smem {k['smem']} occupancy {k['occupancy']}%  x{len(d)}\n    {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
