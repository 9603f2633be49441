"""Runs every available GPU variant (implicit_gemm is the plain fp32 implicit GEMM once called
`fused`), in each of its launch configurations, on small shapes, for compute-sanitizer (see run.sh).

Small shapes keep the sanitizer's slowdown bearable while still covering edges: padding, stride,
dilation, rectangular kernels, sizes that divide no tile, C=1, M=1, B=1, 32 maps with an odd output
width, stride along the width only; depthwise and grouped layers in every configuration. Each variant
also runs the problem descriptor's other capabilities (fp16 and bf16-free dtypes NumPy has, NHWC, MKKC,
groups, bias, the epilogues, 'same' padding) where it declares them; a refusal (ConvUnsupportedError) is
printed and skipped.
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
    ((1, 256, 7, 7), (64, 256, 3, 3), 1, 1, 1),  # one tile of output, K = 2304: split-K
    ((2, 40, 9, 11), (24, 40, 1, 1), 1, 0, 1),  # 1x1: the TMA configurations' GEMM, tiles cut on every side
    ((2, 24, 8, 8), (20, 24, 1, 1), 1, 0, 1),  # 1x1 NCHW, H*W % 4 == 0: implicit_gemm's pixel quads
    ((1, 200, 7, 7), (40, 200, 1, 1), 1, 0, 1),  # 1x1, one tile, 13 tf32 k-tiles: nchw_mma's cluster split-K
    ((2, 8, 13, 10), (40, 8, 3, 3), 2, 1, 1),  # C % 8 == 0, short reduction: implicit_gemm's tap-order gather
    ((2, 12, 9, 11), (40, 12, 3, 3), 1, 2, 1),  # 3x3 stride 1: winograd's padded channels and maps, half tiles
]

# The LeNet layers with their fused ReLU + max-pool (x shape, w shape, pool), unpadded as in the network.
FUSED_LENET = [
    ((2, 1, 86, 86), (4, 1, 7, 7), pyconv.ReluMaxPool(2)),
    ((2, 4, 40, 40), (16, 4, 7, 7), pyconv.ReluMaxPool(4, ceil_mode=True)),
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
    ("bias+relu+pool2", np.float32, False, True, dict(epilogue=pyconv.ReluMaxPool(2))),
    ("bias+relu+pool4ceil", np.float32, False, True, dict(epilogue=pyconv.ReluMaxPool(4, ceil_mode=True))),
    ("fp16+bias+relu->fp16", np.float16, False, True, dict(epilogue="relu")),
    ("fp16 nhwc+mkkc", np.float16, True, False, dict()),
    ("depthwise+bias+relu", np.float32, False, True, dict(groups=4, epilogue="relu")),
    ("depthwise nhwc stride2", np.float32, True, False, dict(groups=4, stride=2)),
    ("same_even_kernel", np.float32, False, False, dict(padding="same")),
]


def channels_last(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def half_channels_last(rng, shape, dtype: str):
    """Random values of `shape` channels-last in a 16-bit dtype: fp16 in NumPy; bf16, which NumPy does not
    have, as a CUDA tensor where PyTorch is installed (else None)."""
    values = rng.uniform(-1, 1, shape).astype(np.float32)
    if dtype == "float16":
        return channels_last(values.astype(np.float16))
    try:
        import torch
    except ImportError:
        return None
    return torch.from_numpy(values).to("cuda", torch.bfloat16).contiguous(memory_format=torch.channels_last)


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


# Depthwise and grouped layers as the networks have them (x shape, w shape, stride, padding, groups,
# dtype, NHWC x / MKKC w / NHWC y): ResNeXt-like 32-group ones in fp16 and fp32 channels-last too.
GROUPED_SHAPES = [
    ((2, 8, 15, 13), (8, 1, 3, 3), 1, 1, 8, np.float32, False),
    ((1, 6, 17, 19), (6, 1, 3, 3), 2, 1, 6, np.float32, False),
    ((2, 5, 11, 12), (5, 1, 5, 5), 2, 2, 5, np.float32, False),
    ((1, 4, 14, 14), (4, 1, 7, 7), 1, 3, 4, np.float32, False),
    ((2, 8, 9, 10), (16, 2, 3, 3), 1, 1, 4, np.float32, False),
    ((2, 64, 9, 11), (64, 2, 3, 3), 1, 1, 32, np.float16, True),
    ((2, 128, 10, 9), (128, 4, 3, 3), 2, 1, 32, np.float32, True),
    ((2, 20, 13, 15), (20, 1, 5, 5), 2, 2, 20, np.float16, True),  # implicit_gemm_f16's dw tiles: two k-steps,
    ((2, 40, 23, 21), (40, 1, 7, 7), 1, 3, 40, np.float16, True),  # element-wise and 16-byte channel vectors
    ((2, 128, 19, 21), (128, 4, 3, 3), 1, 1, 32, np.float16, True),  # implicit_gemm_f16's grp tiles: 16-byte
    ((2, 96, 15, 14), (24, 8, 3, 3), 2, 1, 12, np.float16, True),    # copies, staged y, odd maps, a part slab
    ((2, 64, 9, 10), (64, 16, 3, 3), 1, 1, 4, np.float16, True),     # 16 and 32 channels a group: B read from
    ((1, 64, 8, 9), (64, 32, 3, 3), 2, 1, 2, np.float32, False),     # the staged rows, two n8 tiles a task
    ((2, 40, 12, 16), (40, 8, 3, 3), 2, 1, 5, np.float32, False),    # f32 NCHW rows of 16-byte copies (W = 16)
    ((1, 32, 10, 14), (32, 16, 3, 3), 1, 1, 2, np.float32, False),   # and of 8-byte copies (W = 14)
    ((2, 6, 33, 29), (6, 1, 31, 31), 1, 15, 6, np.float32, False),   # large filters (grouped_direct's lk_*):
    ((1, 12, 40, 23), (12, 1, 11, 5), 2, 3, 12, np.float32, True),   # square, tall at stride 2 (columns slide),
    ((2, 16, 21, 19), (16, 1, 13, 13), 1, 6, 16, np.float16, True),  # f16 channel blocks
    ((5, 40, 7, 7), (40, 1, 13, 13), 1, 6, 40, np.float32, True),    # small planes (plane): runs of 4 outputs x
    ((2, 24, 7, 7), (24, 1, 13, 13), 2, 6, 24, np.float16, False),   # 4 images, the last block 1 image; 1 image at
    ((1, 20, 14, 13), (20, 1, 27, 27), 1, 13, 20, np.float16, True), # stride 2 (each output alone), and stride 1
    ((5, 2, 57, 53), (2, 1, 31, 31), 1, 15, 2, np.float32, False),   # planes of 4 images past 48 KB (opted in),
    ((5, 8, 57, 53), (8, 1, 31, 31), 1, 15, 8, np.float16, True),    # runs down the columns; plane_r8 (16-bit x,
    ((5, 16, 7, 9), (16, 1, 13, 13), 1, 6, 16, np.float16, True),    # batch 4 or more) on both
    ((1, 6, 28, 30), (6, 1, 13, 13), 1, 6, 6, np.float32, False),    # taps13 at batch 1: bands of a plane
    ((2, 5, 21, 30), (5, 1, 5, 51), 1, (2, 25), 5, np.float32, True),  # taps: 51-tap rows, NHWC
    ((2, 16, 13, 15), (96, 16, 1, 1), 1, 0, 1, np.float16, True),    # ungrouped pointwise (implicit_gemm_f16's
    ((3, 24, 21, 22), (40, 24, 1, 1), 1, 0, 1, np.float16, True),    # pw tile): a part tile, padded k16 steps
    ((2, 3, 19, 17), (32, 3, 3, 3), 2, 1, 1, np.float16, True),      # stems (implicit_gemm_f16's stem tile): 3x3
    ((1, 3, 23, 21), (64, 3, 7, 7), 2, 3, 1, np.float16, True),      # at stride 2, 7x7 (ten k16 steps), a part tile,
    ((2, 1, 20, 18), (4, 1, 7, 7), 1, 0, 1, np.float16, True),       # LeNet's C1 (4 maps: 8-byte words of y), and
    ((2, 3, 13, 11), (5, 3, 3, 3), 1, 1, 1, np.float16, True),       # 5 maps (single values)
]


# implicit_gemm_f16's warp-tile configurations (pw*, stem*) on more tiles than a wave of warps takes (4 warps a
# block, 32 pixels a tile, at most 4 blocks an SM for pw and 5 for the stem: over 81,920 and 102,400 pixels on a
# GPU of up to 160 SMs; the 7x7 stem's shared memory allows 3 blocks an SM), so that warps loop over several: pw's
# next-tile copies in flight, the stem's rows reused. The persistent TMA configurations (*_persistent: at most 2
# blocks of 128 pixels an SM) loop over their 512-1,024 tiles likewise, copies for the next tile beside this
# one's TMA stores. Only those configurations run them (every configuration would, under racecheck, for
# minutes).
WARP_TILE_LOOP_SHAPES = [
    ((6, 16, 128, 128), (24, 16, 1, 1), 1, 0, 1, np.float16, True),
    ((8, 3, 128, 128), (40, 3, 3, 3), 1, 1, 1, np.float16, True),
    ((4, 4, 128, 128), (16, 4, 7, 7), 1, 3, 1, np.float16, True),   # 196 taps: a row's last k16 step part zeros
]


def run_grouped(rng, name: str, config=None) -> None:
    label = f"{name}[{config}]" if config else name
    loops = WARP_TILE_LOOP_SHAPES if config and (config.startswith(("pw", "stem")) or config.endswith("_persistent")) \
        else []
    for x_shape, w_shape, stride, padding, groups, dtype, nhwc in GROUPED_SHAPES + loops:
        x = rng.uniform(-1, 1, x_shape).astype(dtype)
        w = rng.uniform(-1, 1, w_shape).astype(dtype)
        if nhwc:
            x, w = channels_last(x), channels_last(w)
        try:
            y = pyconv.conv2d(x, w, stride=stride, padding=padding, groups=groups, variant=name, precision="fast",
                              config=config)
        except pyconv.ConvUnsupportedError as exc:
            print(f"{label:32s} groups {groups} {x_shape} unsupported: {exc}")
            continue
        print(f"{label:32s} groups {groups} {x_shape} -> {y.shape}")


# Causal depthwise conv1d as (B, D, 1, L) layers (x shape, K, dilation, NHWC, dtype, epilogue): 8-element
# vectors that fit and do not, short rows, K beyond the register kernels, dilation.
CAUSAL_SHAPES = [
    ((2, 16, 1, 37), 4, 1, False, np.float32, "silu"),
    ((1, 24, 1, 64), 3, 1, True, np.float16, "silu"),
    ((2, 13, 1, 9), 2, 1, False, np.float16, None),
    ((1, 8, 1, 20), 5, 2, False, np.float32, "relu"),
    ((3, 8, 1, 5), 4, 1, True, np.float32, None),
    ((2, 16, 1, 45), 4, 1, True, np.float32, "silu"),  # the cols kernels' chunks, a partial last one
    ((1, 32, 1, 77), 3, 1, True, np.float16, "silu"),
]


def run_causal(rng, name: str, config=None) -> None:
    label = f"{name}[{config}]" if config else name
    for x_shape, K, dilation, nhwc, dtype, epilogue in CAUSAL_SHAPES:
        D = x_shape[1]
        x = rng.uniform(-1, 1, x_shape).astype(dtype)
        w = rng.uniform(-1, 1, (D, 1, 1, K)).astype(dtype)
        b = rng.uniform(-1, 1, D).astype(dtype)
        if nhwc:
            x = channels_last(x)
        try:
            y = pyconv.conv2d(x, w, b, padding="causal", dilation=(1, dilation), groups=D, epilogue=epilogue,
                              variant=name, precision="fast", config=config)
        except pyconv.ConvUnsupportedError as exc:
            print(f"{label:32s} causal {x_shape} K={K} unsupported: {exc}")
            continue
        print(f"{label:32s} causal {x_shape} K={K} -> {y.shape}")


def run_causal_update(rng) -> None:
    """conv1d_causal_update: one token and three, state longer than K-1, odd channel counts; the one-token
    kernel (state of K-1 or K values) in fp32 and fp16, 16-bit rows of 3 values (87 rows: two warps and a
    partial one), and its runs of two 16-bit rows a thread (odd state lengths, D even, past the 1024 rows an
    SM that it needs on any device of up to 256 SMs: 131,080 runs, the last block partial)."""
    for B, D, T, K, S, dtype in ((2, 13, 1, 4, 3, np.float32), (1, 16, 3, 4, 5, np.float32),
                                 (3, 8, 2, 2, 1, np.float32), (2, 13, 1, 4, 4, np.float32),
                                 (3, 24, 1, 3, 2, np.float16), (2, 40, 1, 4, 4, np.float16),
                                 (3, 29, 1, 4, 3, np.float16), (3, 1032, 1, 4, 3, np.float16),
                                 (2, 40, 1, 4, 3, np.float32), (2, 520, 1, 2, 1, np.float16),
                                 (2, 131080, 1, 4, 3, np.float16), (2, 131080, 1, 2, 1, np.float16),
                                 (2, 131080, 1, 4, 4, np.float16), (2, 131080, 1, 3, 2, np.float32)):
        x = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, (B, D, T)).astype(dtype))
        state = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, (B, D, S)).astype(dtype))
        w = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, (D, K)).astype(dtype))
        b = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, D).astype(dtype))
        y = pyconv.conv1d_causal_update(x, state, w, b, activation="silu")
        print(f"conv1d_causal_update ({B}, {D}, {T}) K={K} S={S} {np.dtype(dtype).name} -> {y.shape}")


def run_network_ops(rng) -> None:
    """The whole-network helpers (resize of uint8 images, softmax + argmax) on odd sizes."""
    from pyconv.lenet import device_ops

    stream = pyconv.device.Stream()
    images = pyconv.DeviceArray.from_host(rng.integers(0, 256, (3, 28, 27), dtype=np.uint8), stream)
    for dtype in ("float32", "float16"):
        y = pyconv.DeviceArray((3, 1, 86, 85), dtype, stream=stream)
        device_ops.resize_bilinear_u8(images.ptr, 3, (28, 27), y.ptr, (86, 85), dtype, stream.handle)
    logits = pyconv.DeviceArray.from_host(rng.uniform(-5, 5, (37, 10)).astype(np.float32), stream)
    probabilities = pyconv.DeviceArray((37, 10), np.float32, stream=stream)
    classes = pyconv.DeviceArray((37,), np.int32, stream=stream)
    device_ops.softmax_argmax(logits.ptr, 37, 10, probabilities.ptr, classes.ptr, stream.handle)
    stream.synchronize()
    print("network ops: resize (f32, f16), softmax + argmax ran")


def main(argv) -> int:
    """argv: what to run: GPU variant names, "auto", "ops" (the network ops); default: all of them.
    NAME:PREFIX runs only variant NAME's configurations whose names start with PREFIX (e.g.
    implicit_gemm_f16:nchw; several for one NAME add up), without its default run and capability cases."""
    rng = np.random.default_rng(0)
    names = [v.name for v in pyconv.variant_info() if v.available and v.on_device]
    if not names:
        print("no GPU variant is available here", file=sys.stderr)
        return 1
    prefixes = {}
    for name, prefix in (a.split(":", 1) for a in argv if ":" in a):
        prefixes.setdefault(name, []).append(prefix)
    argv = [a for a in argv if ":" not in a]
    wanted = set(argv) if argv or prefixes else set(names) | {"auto", "ops"}
    unknown = (wanted | set(prefixes)) - set(names) - {"auto", "ops"}
    if unknown:
        print(f"not an available GPU variant here: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 1
    runs = [(name, config) for name in names if name in prefixes for config in pyconv.variant_configs(name)
            if config.startswith(tuple(prefixes[name]))]
    names = [n for n in names if n in wanted] + (["auto"] if "auto" in wanted else [])
    runs += [(name, None) for name in names]
    runs += [(name, config) for name in names if name != "auto" for config in pyconv.variant_configs(name)]
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
        for x_shape, w_shape, pool in FUSED_LENET:
            x = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, x_shape).astype(np.float32))
            w = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, w_shape).astype(np.float32))
            b = pyconv.DeviceArray.from_host(rng.uniform(-1, 1, w_shape[:1]).astype(np.float32))
            try:
                y = pyconv.conv2d(x, w, b, epilogue=pool, variant=name, precision="fast", config=config, sync=True)
            except pyconv.ConvUnsupportedError as exc:
                print(f"{label:32s} {x_shape} + pool unsupported: {exc}")
                continue
            print(f"{label:32s} {x_shape} + bias, ReLU, pool {pool} -> {y.shape}")
        # the LeNet layers in 16-bit NHWC / MKKC, as the bench times them
        for dtype, (x_shape, w_shape, _) in ((d, layer) for d in ("float16", "bfloat16") for layer in FUSED_LENET):
            x, w = half_channels_last(rng, x_shape, dtype), half_channels_last(rng, w_shape, dtype)
            if x is None:
                print(f"{label:32s} {x_shape} {dtype} NHWC not run: needs PyTorch")
                continue
            try:
                y = pyconv.conv2d(x, w, variant=name, precision="fast", config=config)
            except pyconv.ConvUnsupportedError as exc:
                print(f"{label:32s} {x_shape} {dtype} NHWC unsupported: {exc}")
                continue
            print(f"{label:32s} {x_shape} {dtype} NHWC -> {tuple(y.shape)}")
        run_grouped(rng, name, config)
        run_causal(rng, name, config)
    for name in names:
        run_capabilities(rng, name)
    if "ops" in wanted:
        run_network_ops(rng)
        run_causal_update(rng)
    pyconv.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
