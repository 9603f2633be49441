"""Runs one launch configuration of one variant on one layer, for a profiler to look at.

    ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:rowwin \\
        python3 bench/profile_config.py mma_fp16 rowwin_r12 c3 [--batch 10000] [--runs 2]
    ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:dw_nhwc \\
        python3 bench/profile_config.py grouped_direct nhwc_p2_t128 groups:mobilenetv2/dw2 --batch 32 \\
        --dtype f16 --layout NHWC

Layers: c1 = (B, 1, 86, 86) * (4, 1, 7, 7), c3 = (B, 4, 40, 40) * (16, 4, 7, 7), or SUITE:NAME, a layer of
a bench suite (pyconv/bench/suites/). Data is uniform(-1, 1); the result is checked against the direct
kernel, so a profile is never of a wrong kernel. fp16 / bf16 and NHWC operands are PyTorch CUDA tensors
(channels_last for NHWC, MKKC filters), so those need PyTorch.
"""
import argparse
import sys

import numpy as np

import pyconv
from pyconv.bench.shapes import LENET_LAYERS, load_suite

LAYERS = {"c1": LENET_LAYERS[0], "c3": LENET_LAYERS[1]}


def layer_shape(name: str, batch: int):
    if name in LAYERS:
        return LAYERS[name], batch
    suite, _, layer = name.partition(":")
    for shape in load_suite(suite, [batch]):
        if shape.name == layer:
            return shape, batch
    raise SystemExit(f"no layer {layer!r} in suite {suite!r} (names as in its CSV, e.g. mobilenetv2/dw2)")


def operands(shape, batch, dtype, layout, rng):
    x = rng.uniform(-1, 1, (batch,) + shape.x_shape[1:]).astype(np.float32)
    w = rng.uniform(-1, 1, shape.w_shape).astype(np.float32)
    if dtype == "f32" and layout == "NCHW":
        return pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w), lambda y: y.get()
    import torch  # optional: only for these operands
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    memory = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    xt, wt = (torch.from_numpy(a).to("cuda", torch_dtype).contiguous(memory_format=memory) for a in (x, w))
    return xt, wt, lambda y: y.float().cpu().numpy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant")
    parser.add_argument("config", help="a name from pyconv.variant_configs(variant), or 'default'")
    parser.add_argument("layer", help="c1, c3, or SUITE:NAME (e.g. groups:mobilenetv2/dw2)")
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=2, help="launches (profile the last with --launch-skip)")
    parser.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f32")
    parser.add_argument("--layout", choices=("NCHW", "NHWC"), default="NCHW")
    args = parser.parse_args()
    shape, batch = layer_shape(args.layer, args.batch)
    x, w, to_host = operands(shape, batch, args.dtype, args.layout, np.random.default_rng(0))
    geometry = dict(stride=shape.stride, padding=shape.pad, dilation=shape.dilation, groups=shape.groups)
    config = None if args.config == "default" else args.config
    for _ in range(args.runs):
        y = pyconv.conv2d(x, w, variant=args.variant, config=config, **geometry)
    ref = to_host(pyconv.conv2d(x, w, variant="direct", **geometry))
    err = float(np.linalg.norm(to_host(y) - ref) / np.linalg.norm(ref))
    print(f"{args.variant}[{args.config}] {args.layer} B={batch} {args.dtype} {args.layout}: "
          f"relative L2 error {err:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
