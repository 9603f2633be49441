"""The whole-network pieces of issue 13 on the device, through the C ABI.

- The fused conv layers: every launch configuration of direct_regblock and of mma_fp16 (bias, ReLU,
  ReLU + max-pool; mma_fp16 with every pair of fp32, fp16 and bf16 x and y, NCHW and NHWC) on LeNet-like shapes (C1 and C3 at their real
  geometry and scaled down: 2x2 pool, 4x4 ceil-mode pool with partial windows; F5: 9x9 conv to 1x1 + bias
  + ReLU, F6: 1x1 + bias) and on shapes that take the fallbacks (padding, overlapping windows,
  rectangular pools), against the float64 oracle; against conv + bias followed by ReLU / max-pool in
  NumPy on the same configuration's unfused output, element by element within 1e-6 of the largest
  value (a pooled path may sum the same products in another order, or come from other tile positions).
  (tests/test_problem_matrix.py runs each variant's default configuration over every capability.)
- conv_resize_bilinear_u8: fp32 bit-identical to pyconv.lenet.data.resize; fp16 the same float64
  values rounded once.
- conv_softmax_argmax: probabilities against NumPy, classes equal to NumPy's argmax (ties and NaN).
- Bad arguments: the status and a message naming the argument.
Data is fresh and random every run (seed printed); outputs are poisoned with 0xFF bytes first.
"""
import numpy as np
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, max_pool_reference, rel_l2, relu_reference

import problem_runner as pr
from problem_runner import ConvCase
from pyconv import ConvUnsupportedError
from pyconv._lib import check, ffi, lib
from pyconv.device import DeviceArray
from pyconv.lenet import data

INVALID = -1

# ---- fused conv layers, every launch configuration ----

FUSED_CASES = {
    # C1 scaled down: 1 -> 4 maps, 7x7, ReLU + 2x2/2 pool (24x24 -> 12x12); rows tile 8-row strips exactly.
    "c1_pool2": ConvCase(3, 1, 30, 30, 4, 7, 7, bias=True, epilogue="relu_maxpool", pool=(2, 2), pool_stride=(2, 2)),
    # C1's real geometry at B = 2: 86x86 -> 80x80 -> 40x40.
    "c1_lenet": ConvCase(2, 1, 86, 86, 4, 7, 7, bias=True, epilogue="relu_maxpool", pool=(2, 2), pool_stride=(2, 2)),
    # C1 without the pool (as the bench times it): 24x24 in tiles of 8 columns, stored straight from the
    # fragments.
    "c1_relu": ConvCase(2, 1, 30, 30, 4, 7, 7, bias=True, epilogue="relu"),
    # C3 scaled down: 4 -> 16 maps, 7x7, ReLU + 4x4/4 ceil pool (14x16 -> 4x4, the last window rows partial).
    "c3_pool4_ceil": ConvCase(2, 4, 20, 22, 16, 7, 7, bias=True, epilogue="relu_maxpool", pool=(4, 4),
                              pool_stride=(4, 4), pool_ceil=True),
    # C3's real geometry at B = 2: 40x40 -> 34x34 -> 9x9, columns 32, 33 a partial window.
    "c3_lenet": ConvCase(2, 4, 40, 40, 16, 7, 7, bias=True, epilogue="relu_maxpool", pool=(4, 4), pool_stride=(4, 4),
                         pool_ceil=True),
    # C3's geometry without the pool: 34 columns, the last tile moved left onto its neighbour (NHWC y: stored
    # straight from the fragments; NCHW: through shared memory).
    "c3_relu": ConvCase(2, 4, 40, 40, 16, 7, 7, bias=True, epilogue="relu"),
    # Rows padded above and below ('same' along H; the banded configurations: the row window refuses them).
    "c3_pad_rows": ConvCase(2, 4, 18, 22, 8, 7, 5, padding=(3, 0), bias=True, epilogue="relu"),
    # Column strides 2 and 3 (the banded configurations; the row window refuses them), 5- and 7-row filters.
    "stride_w2": ConvCase(2, 2, 20, 37, 8, 5, 5, stride=(1, 2), bias=True, epilogue="relu"),
    "stride_w3_m4": ConvCase(2, 3, 22, 40, 4, 7, 6, stride=(1, 3), bias=True),
    # Odd sizes, padding (checked loads), ceil mode partial windows in rows and columns, no bias.
    "pad_pool2_ceil": ConvCase(2, 3, 13, 15, 6, 3, 3, padding=(1, 1), epilogue="relu_maxpool", pool=(2, 2),
                               pool_stride=(2, 2), pool_ceil=True),
    # Overlapping and rectangular windows: the generic pooled kernel.
    "pool3s2_ceil": ConvCase(2, 2, 17, 16, 5, 5, 5, bias=True, epilogue="relu_maxpool", pool=(3, 3),
                             pool_stride=(2, 2), pool_ceil=True),
    "pool2x4_stride": ConvCase(1, 3, 16, 21, 8, 3, 3, stride=(1, 2), bias=True, epilogue="relu_maxpool", pool=(2, 4),
                               pool_stride=(2, 4), pool_ceil=True),
    # F5 and F6: conv to 1x1 with bias (+ ReLU), F6 a 1x1 conv.
    "f5": ConvCase(5, 16, 9, 9, 32, 9, 9, bias=True, epilogue="relu"),
    "f6": ConvCase(5, 32, 1, 1, 10, 1, 1, bias=True),
    "relu_3x3": ConvCase(2, 5, 12, 19, 12, 3, 3, padding=(1, 1), bias=True, epilogue="relu"),
}


def variant_configs(name):
    count = ffi().new("int*")
    check(lib().conv_variant_config_count(pr.variant_id(name), count))
    names = []
    for i in range(count[0]):
        text = ffi().new("const char**")
        check(lib().conv_variant_config_name(pr.variant_id(name), i, text))
        names.append(ffi().string(text[0]).decode())
    return names


def run_config(variant, config, case, x, w, bias):
    """case through a plan pinned to one launch configuration, in the case's layouts; y as float64 NCHW
    (poisoned first)."""
    return pr.run_config(variant, config, case, x, w, bias)[0]


# x, w, y layouts each variant takes: mma_fp16 in both, NHWC and MKKC, and y in the other layout than x.
LAYOUT_SETS = {"direct_regblock": [("NCHW", "MCKK", "NCHW")],
               "mma_fp16": [("NCHW", "MCKK", "NCHW"), ("NHWC", "MKKC", "NHWC"), ("NHWC", "MCKK", "NCHW"),
                            ("NCHW", "MKKC", "NHWC")]}
# What a launch configuration of mma_fp16 may refuse, in its words; any other refusal fails. No
# configuration keeps F5's 16*9*9 taps x 32 maps of weights in shared memory; the row window also takes
# only stride 1, no padding along the rows, 5- and 7-row filters, and x, y of one dtype or fp16 x, fp32 y.
MAY_REFUSE = {config: ("A-fragment tiles in shared memory",) for config in ("n4_w8", "n4_w8_short")}
MAY_REFUSE.update({config: ("A-fragment tiles in shared memory", "mma_fp16 row window:")
                   for config in ("rowwin_r12", "rowwin_r16")})


def fused_rows():
    rows = []
    for name in ("direct_regblock", "mma_fp16"):
        caps = pr.variant_caps(name)
        for config in variant_configs(name):
            for case_id, case in FUSED_CASES.items():
                for k, (x_layout, w_layout, y_layout) in enumerate(LAYOUT_SETS[name]):
                    for y_dtype in caps["out_dtypes"]:
                        for x_dtype in caps["in_dtypes"]:
                            if k >= 2 and (x_dtype, y_dtype) != ("f16", "f16"):
                                continue  # the mixed layouts in one dtype pair
                            layouts = "" if k == 0 else f"-{x_layout}_{w_layout}_{y_layout}"
                            rows.append(pytest.param(
                                name, config, case.with_(x_dtype=x_dtype, y_dtype=y_dtype, x_layout=x_layout,
                                                         w_layout=w_layout, y_layout=y_layout,
                                                         compute=caps["compute"]),
                                id=f"{name}-{config}-{case_id}-{x_dtype}_{y_dtype}{layouts}"))
    return rows


@requires_gpu
@pytest.mark.parametrize("name,config,case", fused_rows())
def test_fused_layer_every_config(name, config, case, rng):
    x, w, bias = pr.random_operands(case, rng)
    try:
        y = run_config(name, config, case, x, w, bias)
    except ConvUnsupportedError as exc:
        assert name == "mma_fp16" and config in MAY_REFUSE, f"{name}[{config}] refused {case}: {exc}"
        assert any(words in str(exc) for words in MAY_REFUSE[config]), \
            f"{name}[{config}] refused {case} in other words: {exc}"
        return
    ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert y.shape == ref.shape
    assert not np.isnan(y).any(), f"{name}[{config}]: {int(np.isnan(y).sum())} outputs not written on {case}"
    err, bound = rel_l2(y, ref), pr.error_bound(name, case.x_dtype, case.y_dtype)
    assert err <= bound, f"{name}[{config}] on {case}: relative L2 error {err:.2e} > {bound:.2e}"
    exact = pr.variant_facts(name).exact
    if exact or (case.epilogue != "none" and case.y_dtype == "f32"):
        plain = run_config(name, config, case.with_(epilogue="none"), x, w, bias).astype(np.float32)
        separate = relu_reference(plain) if case.epilogue != "none" else plain
        if case.epilogue == "relu_maxpool":
            separate = max_pool_reference(separate, case.pool, case.pool_stride, case.pool_ceil)
        pr.assert_fused_matches(y, separate, 1e-6, f"{name}[{config}] on {case}")


@requires_gpu
@pytest.mark.parametrize("y_offset", [1, 3])
@pytest.mark.parametrize("y_dtype", ["f32", "f16", "bf16"])
def test_row_window_nhwc_y_off_alignment(y_dtype, y_offset, rng):
    """NHWC y an odd number of values past an 8-byte boundary, stored straight from the fragments (C1's
    and C3's geometry without a pool: 24 and 34 columns)."""
    for case in (FUSED_CASES["c1_relu"], FUSED_CASES["c3_relu"]):
        case = case.with_(x_dtype=y_dtype, y_dtype=y_dtype, x_layout="NHWC", w_layout="MKKC", y_layout="NHWC")
        for config in ("rowwin_r12", "rowwin_r16"):
            pr.check_config("mma_fp16", config, case, rng, y_offset=y_offset)


@requires_gpu
@pytest.mark.parametrize("config", ["rowwin_r12", "rowwin_r16"])
@pytest.mark.parametrize("layouts", LAYOUT_SETS["mma_fp16"][:2], ids=lambda t: "_".join(t))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("value", [np.inf, np.nan], ids=["inf", "nan"])
def test_row_window_non_finite_input(value, dtype, layouts, config, rng):
    """The row window's 4-row groups (C1: M <= 4) also multiply the group's other input rows by zero
    weights, so an Inf or NaN in x reaches outputs whose windows do not hold it; those lanes recompute in
    fp32 from x and w (in x's and w's layouts and dtype): non-finite exactly where the oracle is."""
    x_layout, w_layout, y_layout = layouts
    case = ConvCase(2, 3, 22, 30, 4, 5, 7, bias=True, x_dtype=dtype, y_dtype=dtype, x_layout=x_layout,
                    w_layout=w_layout, y_layout=y_layout, compute=pr.variant_caps("mma_fp16")["compute"])
    x, w, bias = pr.random_operands(case, rng)
    x[1, 2, 9, 11] = value  # one image and channel, inside the plane: 5x7 outputs see it
    y = run_config("mma_fp16", config, case, x, w, bias)
    with np.errstate(invalid="ignore"):
        ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert not np.isfinite(ref).all()
    pr.check_non_finite(f"mma_fp16[{config}] {value} in x, {case}", y, ref, pr.error_bound("mma_fp16", dtype, dtype))


@requires_gpu
@pytest.mark.parametrize("x_dtype,y_dtype", [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("f16", "f32")])
@pytest.mark.parametrize("case_id", ["c1_lenet", "c3_lenet"])
def test_row_window_is_the_default_on_lenet_layers(case_id, x_dtype, y_dtype):
    """mma_fp16's default configuration for LeNet's C1 and C3 in the dtype pairs the bench and the main job
    run (the fast job's C3: fp16 maps in, fp32 out) is the row window, which runs them 2.5-4x faster than
    the banded kernel: a pair the row window stops taking sends the job to the banded kernel unseen (the
    fast job's C3 ran 2.6x slower for that once)."""
    case = FUSED_CASES[case_id].with_(B=64, x_dtype=x_dtype, y_dtype=y_dtype,
                                      compute=pr.variant_caps("mma_fp16")["compute"])
    config = pr.default_config("mma_fp16", case)
    assert config.startswith("rowwin_"), f"mma_fp16's default for {case_id} in {x_dtype} -> {y_dtype} is {config}"


def test_fused_capabilities_declared():
    """What issue 13's network needs from the two variants (lenetp's pipeline relies on it)."""
    regblock, mma = pr.variant_caps("direct_regblock"), pr.variant_caps("mma_fp16")
    assert regblock["bias"] and "relu_maxpool" in regblock["epilogues"]
    assert mma["bias"] and "relu_maxpool" in mma["epilogues"] and mma["out_dtypes"] == ["f32", "f16", "bf16"]


# ---- resize ----

def device_resize(images, size_h, size_w, y_dtype):
    n, h, w = images.shape
    d_x = DeviceArray.from_host(np.ascontiguousarray(images))
    storage = np.float16 if y_dtype == "f16" else np.float32
    d_y = DeviceArray((n, 1, size_h, size_w), storage)
    d_y.fill_bytes(0xFF)
    check(lib().conv_resize_bilinear_u8(d_x.handle, n, h, w, d_y.handle, size_h, size_w, pr.DTYPES[y_dtype],
                                        ffi().NULL))
    check(lib().conv_device_synchronize())
    return d_y.get()


def numpy_resize_f64(images, size):
    """data.resize's float64 values before its one rounding (it writes into any `out` dtype)."""
    out = np.empty((len(images), 1, size, size), np.float64)
    return data.resize(images, size, out=out)


RESIZE_CASES = {"lenet_28_to_86": (37, 28, 28, 86), "down_50_to_17": (5, 50, 50, 17), "same_9": (3, 9, 9, 9),
                "one_pixel_to_5": (2, 1, 1, 5)}


@requires_gpu
@pytest.mark.parametrize("case_id", list(RESIZE_CASES))
def test_resize_bit_identical_to_numpy(case_id, rng):
    n, h, w, size = RESIZE_CASES[case_id]
    images = rng.integers(0, 256, (n, h, w), dtype=np.uint8)
    images[0] = 255  # the extremes too
    if n > 1:
        images[1] = 0
    expected = numpy_resize_f64(images, size)
    y32 = device_resize(images, size, size, "f32")
    assert np.array_equal(y32, data.resize(images, size)), "f32 resize differs from pyconv.lenet.data.resize"
    assert np.array_equal(y32, expected.astype(np.float32))
    y16 = device_resize(images, size, size, "f16")
    assert np.array_equal(y16, expected.astype(np.float16)), "f16 resize is not the float64 value rounded once"


@requires_gpu
def test_resize_rectangular_matches_torch_convention(rng):
    """Non-square sizes: each axis as data._taps computes it (rows first, then columns)."""
    images = rng.integers(0, 256, (4, 11, 7), dtype=np.uint8)
    y = device_resize(images, 5, 13, "f32").astype(np.float64)
    rl, rh, rf = data._taps(11, 5)
    cl, ch, cf = data._taps(7, 13)
    v = images.astype(np.float64) / 255.0
    rows = v[:, rl, :] * (1.0 - rf)[:, None] + v[:, rh, :] * rf[:, None]
    expected = (rows[:, :, cl] * (1.0 - cf) + rows[:, :, ch] * cf).astype(np.float32)
    assert np.array_equal(y[:, 0], expected)


# ---- softmax / argmax ----

def device_softmax(logits, want_probabilities=True, want_classes=True):
    n, k = logits.shape
    d_l = DeviceArray.from_host(np.ascontiguousarray(logits, np.float32))
    d_p = DeviceArray((n, k), np.float32) if want_probabilities else None
    d_c = DeviceArray((n,), np.int32) if want_classes else None
    for d in (d_p, d_c):
        if d is not None:
            d.fill_bytes(0xFF)
    check(lib().conv_softmax_argmax(d_l.handle, n, k, ffi().NULL if d_p is None else d_p.handle,
                                    ffi().NULL if d_c is None else d_c.handle, ffi().NULL))
    check(lib().conv_device_synchronize())
    return (None if d_p is None else d_p.get()), (None if d_c is None else d_c.get())


def numpy_softmax(logits):
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


@requires_gpu
@pytest.mark.parametrize("n,k", [(10000, 10), (300, 1024), (7, 1), (65, 33)])
def test_softmax_argmax_matches_numpy(n, k, rng):
    logits = (rng.standard_normal((n, k)) * 5).astype(np.float32)
    probabilities, classes = device_softmax(logits)
    np.testing.assert_allclose(probabilities, numpy_softmax(logits), rtol=1e-5, atol=1e-7)
    assert np.array_equal(classes, logits.argmax(axis=1))


@requires_gpu
def test_argmax_ties_and_nan_as_numpy(rng):
    logits = rng.standard_normal((6, 40)).astype(np.float32)
    logits[0, [3, 17, 35]] = 9.0           # equal maxima in different lanes: the lowest index
    logits[1, [33, 1]] = 9.0               # the lower index held by a later lane's first element
    logits[2, :] = -np.inf                 # all -inf: index 0
    logits[3, [5, 30]] = np.nan            # NaN: the first NaN, probabilities NaN
    logits[4, [0, 32]] = np.inf
    _, classes = device_softmax(logits, want_probabilities=False)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(classes, logits.argmax(axis=1))
    probabilities, none = device_softmax(logits, want_classes=False)
    assert none is None and np.isnan(probabilities[3]).all()
    assert np.allclose(probabilities[5], numpy_softmax(logits[5:6])[0], rtol=1e-5)


# ---- bad arguments: status and message naming the argument (checked before any device is needed) ----

def last_error():
    return ffi().string(lib().conv_last_error()).decode()


needs_cuda_build = pytest.mark.skipif(not lib().conv_built_with_cuda(),
                                      reason="the CPU-only library's stubs refuse every call (NO_CUDA_BUILD)")


@needs_cuda_build
@pytest.mark.parametrize("args,word", [
    ((-1, 28, 28, 86, 86, 0), "n must be >= 0"),
    ((1, 0, 28, 86, 86, 0), "in_h must be >= 1"),
    ((1, 28, 28, 86, -2, 0), "out_w must be >= 1"),
    ((1, 28, 28, 86, 86, 2), "y_dtype"),
])
def test_resize_bad_arguments(args, word):
    n, in_h, in_w, out_h, out_w, y_dtype = args
    status = lib().conv_resize_bilinear_u8(ffi().NULL, n, in_h, in_w, ffi().NULL, out_h, out_w, y_dtype, ffi().NULL)
    assert status == INVALID and word in last_error() and "conv_resize_bilinear_u8" in last_error()


@needs_cuda_build
@pytest.mark.parametrize("n,k,word", [(-3, 10, "n must be >= 0"), (4, 0, "k must be in 1..1024"),
                                      (4, 1025, "k must be in 1..1024")])
def test_softmax_bad_arguments(n, k, word):
    status = lib().conv_softmax_argmax(ffi().NULL, n, k, ffi().NULL, ffi().NULL, ffi().NULL)
    assert status == INVALID and word in last_error()


@requires_gpu
def test_ops_refuse_host_memory():
    host = np.zeros((1, 28, 28), np.uint8)
    d_y = DeviceArray((1, 1, 86, 86), np.float32)
    status = lib().conv_resize_bilinear_u8(ffi().cast("void*", host.ctypes.data), 1, 28, 28, d_y.handle, 86, 86, 0,
                                           ffi().NULL)
    assert status == INVALID and "x is host memory" in last_error()
    d_l = DeviceArray((2, 10), np.float32)
    classes = np.zeros(2, np.int32)
    status = lib().conv_softmax_argmax(d_l.handle, 2, 10, ffi().NULL, ffi().cast("void*", classes.ctypes.data),
                                       ffi().NULL)
    assert status == INVALID and "classes is host memory" in last_error()


def test_ops_exported():
    """Declared in conv_ops.h, hence exported and bound by cffi in both builds (stubs without CUDA)."""
    assert hasattr(lib(), "conv_resize_bilinear_u8") and hasattr(lib(), "conv_softmax_argmax")
