"""Runs every available GPU variant (implicit_gemm is the plain fp32 implicit GEMM once called
`fused`), in each of its launch configurations, on small shapes, for compute-sanitizer (see run.sh).

Small shapes keep the sanitizer's slowdown bearable while still covering edges: padding, stride,
dilation, rectangular kernels, sizes that divide no tile, C=1, M=1, B=1, 32 maps with an odd output
width, stride along the width only. Each variant also runs the problem descriptor's other capabilities
(fp16 and bf16-free dtypes NumPy has, NHWC, MKKC, groups, bias, the epilogues, 'same' padding) where it
declares them; a refusal (ConvUnsupportedError) is printed and skipped.
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


# The descriptor's other capabilities, on x (2, 4, 17, 19) and w (8, 4/groups, 4, 3) with padding 1:
# (label, operand dtype, NHWC x and MKKC w, bias, conv2d keywords).
CAPABILITY_CASES = [
    ("fp16", np.float16, False, False, dict()),
    ("fp16->fp32", np.float16, False, False, dict(out_dtype=np.float32)),
    ("nhwc+mkkc", np.float32, True, False, dict()),
    ("groups4+bias", np.float32, False, True, dict(groups=4)),
    ("bias+relu", np.float32, False, True, dict(epilogue="relu")),
    ("bias+relu+pool3s2ceil", np.float32, False, True, dict(epilogue=pyconv.ReluMaxPool(3, stride=2, ceil_mode=True))),
    ("same_even_kernel", np.float32, False, False, dict(padding="same")),
]


def channels_last(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def run_capabilities(rng, name: str) -> None:
    """NumPy operands (uploaded, run on the GPU variant, downloaded): what a variant does not declare is
    refused and printed."""
    for label, dtype, nhwc, with_bias, kwargs in CAPABILITY_CASES:
        kwargs = dict(dict(padding=1), **kwargs)
        x = rng.uniform(-1, 1, (2, 4, 17, 19)).astype(dtype)
        w = rng.uniform(-1, 1, (8, 4 // kwargs.get("groups", 1), 4, 3)).astype(dtype)
        bias = rng.uniform(-1, 1, 8).astype(kwargs.get("out_dtype", dtype)) if with_bias else None
        if nhwc:
            x, w = channels_last(x), channels_last(w)
        try:
            y = pyconv.conv2d(x, w, bias, variant=name, precision="fast", **kwargs)
        except pyconv.ConvUnsupportedError as exc:
            print(f"{name:32s} {label} unsupported: {exc}")
            continue
        print(f"{name:32s} {label} -> {y.shape}")


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
                y = pyconv.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, variant=name,
                                  precision="fast", config=config, sync=True)
            except pyconv.ConvUnsupportedError as exc:
                print(f"{label:32s} {x_shape} unsupported: {exc}")
                continue
            print(f"{label:32s} {x_shape} x {w_shape} -> {y.shape}")
    for name in names + ["auto"]:
        run_capabilities(rng, name)
    pyconv.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
