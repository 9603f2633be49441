"""Runs one launch configuration of one variant on one LeNet layer, for a profiler to look at.

    ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:rowwin \\
        python3 bench/profile_config.py mma_fp16 rowwin_r8 c3 [--batch 10000] [--runs 2]

Layers: c1 = (B, 1, 86, 86) * (4, 1, 7, 7), c3 = (B, 4, 40, 40) * (16, 4, 7, 7). Data is uniform(-1, 1);
the result is checked against the direct kernel, so a profile is never of a wrong kernel.
"""
import argparse
import sys

import numpy as np

import pyconv

LAYERS = {"c1": ((1, 86, 86), (4, 1, 7, 7)), "c3": ((4, 40, 40), (16, 4, 7, 7))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant")
    parser.add_argument("config", help="a name from pyconv.variant_configs(variant), or 'default'")
    parser.add_argument("layer", choices=sorted(LAYERS))
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=2, help="launches (profile the last with --launch-skip)")
    args = parser.parse_args()
    image, w_shape = LAYERS[args.layer]
    rng = np.random.default_rng(0)
    x = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, (args.batch, *image)).astype(np.float32))
    w = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, w_shape).astype(np.float32))
    config = None if args.config == "default" else args.config
    for _ in range(args.runs):
        y = pyconv.conv2d(x, w, variant=args.variant, config=config)
    ref = pyconv.conv2d(x, w, variant="direct").get()
    err = float(np.linalg.norm(y.get() - ref) / np.linalg.norm(ref))
    print(f"{args.variant}[{args.config}] {args.layer} B={args.batch}: relative L2 error {err:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
