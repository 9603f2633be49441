"""Runs every available GPU variant, in each of its launch configurations, on small shapes, for
compute-sanitizer (see run.sh).

Small shapes keep the sanitizer's slowdown bearable while still covering edges: padding, stride,
dilation, rectangular kernels, sizes that divide no tile, C=1, M=1, B=1, 32 maps with an odd output
width, stride along the width only.
"""
import sys

import numpy as np

import pyconv

SHAPES = [  # x shape, w shape, stride, padding, dilation
    ((2, 1, 86, 86), (4, 1, 7, 7), 1, 0, 1),
    ((2, 4, 40, 40), (16, 4, 7, 7), 1, 0, 1),
    ((1, 3, 17, 13), (5, 3, 3, 3), 1, 1, 1),
    ((2, 2, 30, 45), (3, 2, 5, 20), 2, 0, 1),
    ((2, 3, 19, 23), (9, 3, 3, 4), (2, 3), (1, 2), (2, 1)),
    ((1, 1, 9, 9), (1, 1, 1, 1), 1, 0, 1),
    ((2, 2, 14, 17), (32, 2, 3, 3), 1, 0, 1),
    ((2, 3, 20, 31), (6, 3, 7, 5), (1, 2), (3, 1), 1),
]


def main() -> int:
    rng = np.random.default_rng(0)
    names = [v.name for v in pyconv.variant_info() if v.available and v.on_device]
    if not names:
        print("no GPU variant is available here", file=sys.stderr)
        return 1
    runs = [(name, None) for name in names + ["auto"]]
    runs += [(name, config) for name in names for config in pyconv.variant_configs(name)]
    for name, config in runs:
        label = f"{name}[{config}]" if config else name
        for x_shape, w_shape, stride, padding, dilation in SHAPES:
            x = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, x_shape).astype(np.float32))
            w = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, w_shape).astype(np.float32))
            try:
                y = pyconv.conv2d(x, w, stride, padding, dilation, variant=name, precision="fast", config=config)
            except pyconv.ConvUnsupportedError as exc:
                print(f"{label:32s} {x_shape} unsupported: {exc}")
                continue
            print(f"{label:32s} {x_shape} x {w_shape} -> {y.shape}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
