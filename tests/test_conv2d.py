"""Every variant against the float64 oracle on a matrix of shapes, on fresh random data, with the
output poisoned (NaN) before the call so that an unwritten element fails the test; then the Python
API's own semantics (PyTorch's argument order, bias, 'same'/'valid' padding, groups, epilogues, fp16
and channels-last NumPy arrays, the plan cache) on the variants that take every capability."""
import itertools
import numpy as np
import pytest
from conftest import FAMILY_CORE, GPU_SKIP_REASON, OWN_FAMILY, TILE_TRANSFORMS, family_skip, filter_hw
from oracle import conv2d_reference, rel_l2

import pyconv

# name: (x shape, w shape, stride, padding, dilation)
SHAPES = {
    "lenet_c1_b2": ((2, 1, 86, 86), (4, 1, 7, 7), 1, 0, 1),
    "lenet_c3_b3": ((3, 4, 40, 40), (16, 4, 7, 7), 1, 0, 1),
    "lenet_c1_b1000": ((1000, 1, 86, 86), (4, 1, 7, 7), 1, 0, 1),
    "lenet_c3_b1000": ((1000, 4, 40, 40), (16, 4, 7, 7), 1, 0, 1),
    "1x1": ((2, 16, 9, 11), (7, 16, 1, 1), 1, 0, 1),
    "3x3_pad1_c3": ((2, 3, 17, 13), (5, 3, 3, 3), 1, 1, 1),
    "5x20_stride2": ((2, 2, 30, 45), (3, 2, 5, 20), 2, 0, 1),
    "stride3_pad1": ((2, 3, 23, 19), (6, 3, 3, 3), 3, 1, 1),
    "stride4x2_pad2": ((2, 2, 29, 31), (5, 2, 5, 3), (4, 2), 2, 1),
    "dilation2": ((2, 3, 20, 21), (4, 3, 3, 3), 1, 2, 2),
    "b1_odd": ((1, 5, 33, 31), (17, 5, 5, 5), 1, 0, 1),
    "mixed_all": ((2, 3, 19, 23), (9, 3, 3, 4), (2, 3), (1, 2), (2, 1)),
    "wide_c": ((2, 64, 12, 12), (33, 64, 3, 3), 1, 1, 1),
    "many_maps": ((2, 8, 16, 16), (70, 8, 3, 3), 1, 1, 1),
    "c1_m1": ((3, 1, 15, 14), (1, 1, 3, 3), 1, 0, 1),
    "k7x5_stride_w2_pad": ((2, 3, 20, 31), (6, 3, 7, 5), (1, 2), (3, 1), 1),
    "m32_odd_ow": ((2, 2, 14, 17), (32, 2, 3, 3), 1, 0, 1),
}

VARIANTS = pyconv.variant_info()
BY_NAME = {v.name: v for v in VARIANTS}


def precision_of(info):
    """The least precision a variant's arithmetic needs (reduced-precision variants refuse "exact")."""
    return "exact" if info.exact else "fast"

_cache = {}


def case(shape_name):
    """Fresh random inputs and their oracle output, made once per run and shared by variants."""
    if shape_name not in _cache:
        x_shape, w_shape, stride, padding, dilation = SHAPES[shape_name]
        rng = np.random.default_rng()
        x = rng.uniform(-1, 1, x_shape).astype(np.float32)
        w = rng.uniform(-1, 1, w_shape).astype(np.float32)
        pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
        ref = conv2d_reference(x, w, pair(stride), pair(padding), pair(dilation))
        _cache[shape_name] = (x, w, dict(stride=stride, padding=padding, dilation=dilation), ref)
    return _cache[shape_name]


def run_variant(info, x, w, kwargs, out_shape, config=None):
    """Runs on device arrays for GPU variants (the zero-copy path), NumPy for host ones; the output
    is poisoned with NaN first."""
    precision = precision_of(info)
    if not info.on_device:
        out = np.full(out_shape, np.nan, np.float32)
        pyconv.conv2d(x, w, variant=info.name, out=out, config=config, precision=precision, **kwargs)
        return out
    out = pyconv.DeviceArray(out_shape)
    out.fill_bytes(0xFF)
    result = pyconv.conv2d(pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w),
                           variant=info.name, out=out, config=config, precision=precision, **kwargs)
    assert result is out
    return out.get()


def skip_unavailable(info):
    if not info.available:
        pytest.skip(f"{info.name} unavailable here: {info.reason}")


@pytest.mark.parametrize("shape_name", list(SHAPES))
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_variant_matches_oracle(name, shape_name):
    info = BY_NAME[name]
    skip_unavailable(info)
    x, w, kwargs, ref = case(shape_name)
    try:
        y = run_variant(info, x, w, kwargs, ref.shape)
    except pyconv.ConvUnsupportedError as exc:
        # A limit of the variant's own, said in words that name it; then auto must never pick it here.
        # (Not a skip: the row checks the refusal, and test_variant_supports_core_shapes that the variant
        # takes its core shapes.)
        assert name in str(exc), f"{name} refused {shape_name} without naming itself: {exc}"
        plan = pyconv.Conv2dPlan(x.shape, w.shape, variant="auto", precision="fast", **kwargs)
        assert plan.variant != name
        return
    assert not np.isnan(y).any(), "some outputs were not written (NaN poison left)"
    err = rel_l2(y, ref)
    assert err <= info.max_rel_error, f"{name} on {shape_name}: relative L2 error {err:.2e}"


CORE_SHAPES = ["lenet_c1_b2", "lenet_c3_b3", "3x3_pad1_c3"]


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_variant_supports_core_shapes(name):
    """A variant that declared itself unsupported everywhere would pass the matrix vacuously."""
    info = BY_NAME[name]
    skip_unavailable(info)
    if name in OWN_FAMILY:  # its family's core layer
        x_shape, w_shape, kwargs = FAMILY_CORE[name]
        assert pyconv.Conv2dPlan(x_shape, w_shape, variant=name, **kwargs).variant == name
        return
    for shape_name in CORE_SHAPES:
        x, w, kwargs, _ = case(shape_name)
        if filter_hw(name, w.shape[2:]) != w.shape[2:]:
            continue  # a variant of one filter shape: 3x3_pad1_c3 is its core shape
        plan = pyconv.Conv2dPlan(x.shape, w.shape, variant=name, precision=precision_of(info), **kwargs)
        assert plan.variant == name


# Every launch configuration of every tunable variant (what auto's tuner may pick), on shapes that
# reach each kernel family: LeNet's, padding, 1, 17 and 32 maps, odd output widths, stride along w only.
CONFIGS = [(v.name, c) for v in VARIANTS for c in pyconv.variant_configs(v.name)]
CONFIG_SHAPES = ["lenet_c1_b2", "lenet_c3_b3", "3x3_pad1_c3", "b1_odd", "mixed_all", "k7x5_stride_w2_pad",
                 "c1_m1", "m32_odd_ow"]


@pytest.mark.parametrize("shape_name", CONFIG_SHAPES)
@pytest.mark.parametrize("name,config", CONFIGS)
def test_config_matches_oracle(name, config, shape_name):
    info = BY_NAME[name]
    skip_unavailable(info)
    x, w, kwargs, ref = case(shape_name)
    try:
        y = run_variant(info, x, w, kwargs, ref.shape, config=config)
    except pyconv.ConvUnsupportedError as exc:
        # A limit of the configuration's kernel, in words naming the variant or the configuration (not a
        # skip: test_every_config_runs_a_network_layer holds each configuration to a real layer).
        assert name in str(exc) or f"'{config}'" in str(exc), \
            f"{name}[{config}] refused {shape_name} without naming the variant or configuration: {exc}"
        return
    assert not np.isnan(y).any(), "some outputs were not written (NaN poison left)"
    err = rel_l2(y, ref)
    assert err <= info.max_rel_error, f"{name}[{config}] on {shape_name}: relative L2 error {err:.2e}"


@pytest.mark.parametrize("name,config", CONFIGS)
def test_every_config_runs_a_network_layer(name, config):
    """A configuration unsupported everywhere would pass the matrix above vacuously: each one must run
    C1 or C3 (in fp32 or, for a configuration of one operand type like wmma's bf16 one, in fp16 or bf16),
    or, for one made for depthwise layers, a channels-last depthwise 3x3 layer or 13x13 on 7x7 planes (fp32 or
    fp16), or, for one
    made for 1x1 layers, an fp32 NCHW or an fp16 channels-last 1x1 layer (implicit_gemm_f16's pw tile), or, for
    one made for stems, an fp16 channels-last 3x3 layer of 3 channels (its stem tile)."""
    info = BY_NAME[name]
    skip_unavailable(info)
    if name in OWN_FAMILY:  # its family's core layer in either layout, any dtype (batch 16: runs of 16 images)
        x_shape, w_shape, kwargs = FAMILY_CORE[name]
        for layout, dtype in (("NCHW", "float32"), ("NHWC", "bfloat16"), ("NCHW", "float16")):
            try:
                pyconv.Conv2dPlan((16,) + x_shape[1:], w_shape, variant=name, config=config, dtype=dtype, layout=layout,
                                  **kwargs)
                return
            except pyconv.ConvUnsupportedError:
                pass
        pytest.fail(f"{name}[{config}] runs no layer of its family: {OWN_FAMILY[name]}")
    ran = []
    for shape_name in ("lenet_c1_b2", "lenet_c3_b3"):
        x, w, kwargs, _ = case(shape_name)
        for dtype in ("float32", "float16", "bfloat16"):
            try:
                pyconv.Conv2dPlan(x.shape, w.shape, variant=name, config=config, precision=precision_of(info),
                                  dtype=dtype, **kwargs)
                ran.append((shape_name, dtype))
            except pyconv.ConvUnsupportedError:
                pass
    # the narrow NHWC tiles, plane_r8: 16-bit only (plane_r8: 4 images or more); plane_mm: planes of at most 64
    # positions (RepLKNet's 13x13 on 7x7)
    for (hw, k), dtype in itertools.product(((14, 3), (7, 13)), ("float32", "float16")) if not ran else ():
        try:
            pyconv.Conv2dPlan((4, 32, hw, hw), (32, 1, k, k), padding=k // 2, groups=32, variant=name, config=config,
                              precision=precision_of(info), layout="NHWC", w_layout="MKKC", dtype=dtype)
            ran.append(("depthwise_nhwc", dtype))
        except pyconv.ConvUnsupportedError:
            pass
    for dtype, layouts in (("float32", {}), ("float16", dict(layout="NHWC", w_layout="MKKC"))) if not ran else ():
        try:
            pyconv.Conv2dPlan((2, 64, 14, 14), (32, 64, 1, 1), variant=name, config=config,
                              precision=precision_of(info), dtype=dtype, **layouts)
            ran.append(("pointwise", dtype))
            break
        except pyconv.ConvUnsupportedError:
            pass
    if not ran:  # a tile for 16-bit channels-last stems of few channels (implicit_gemm_f16's stem tile)
        try:
            pyconv.Conv2dPlan((2, 3, 16, 16), (32, 3, 3, 3), stride=2, padding=1, variant=name, config=config,
                              precision=precision_of(info), dtype="float16", layout="NHWC", w_layout="MKKC")
            ran.append(("stem", "float16"))
        except pyconv.ConvUnsupportedError:
            pass
    assert ran, f"{name}[{config}] runs neither LeNet layer nor a depthwise, 1x1 or stem one"


@pytest.mark.parametrize("precision", ["exact", "fast"])
@pytest.mark.parametrize("shape_name", ["lenet_c1_b2", "lenet_c3_b3", "mixed_all", "wide_c"])
def test_auto(shape_name, precision):
    x, w, kwargs, ref = case(shape_name)
    plan = pyconv.Conv2dPlan(x.shape, w.shape, variant="auto", precision=precision, **kwargs)
    chosen = BY_NAME[plan.variant]
    assert chosen.available
    if precision == "exact":
        assert chosen.exact, f"auto picked reduced-precision {chosen.name} for an exact request"
    if not GPU_SKIP_REASON:
        assert chosen.on_device, "auto must use the GPU when there is one"
    y = pyconv.conv2d(x, w, variant="auto", precision=precision, **kwargs)
    assert rel_l2(y, ref) <= chosen.max_rel_error


def test_numpy_in_numpy_out_on_every_path(rng):
    x = rng.uniform(-1, 1, (2, 3, 11, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    ref = conv2d_reference(x, w, (1, 1), (1, 1), (1, 1))
    for info in VARIANTS:
        if info.available and info.name not in OWN_FAMILY:
            y = pyconv.conv2d(x, w, padding=1, variant=info.name, precision=precision_of(info))
            assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == ref.shape
            assert rel_l2(y, ref) <= info.max_rel_error


def test_float64_numpy_is_refused_and_noncontiguous_numpy_is_read(rng):
    """NumPy float64 is no longer cast silently (the message says how to convert); a non-contiguous
    float32 view is read right (copied on the host)."""
    x = rng.uniform(-1, 1, (2, 3, 12, 10))
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    with pytest.raises(pyconv.ConvError, match=r"x has dtype float64; .*x\.astype\(np\.float32\)"):
        pyconv.conv2d(x, w)
    x = x.astype(np.float32)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # neither NCHW nor NHWC
    assert not xt.flags.c_contiguous
    ref = conv2d_reference(x, w)
    assert rel_l2(pyconv.conv2d(x, w), ref) <= 1e-5
    assert rel_l2(pyconv.conv2d(xt, w), ref) <= 1e-5
    assert rel_l2(pyconv.conv2d(x[:, :, ::2], w), conv2d_reference(x[:, :, ::2], w)) <= 1e-5


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_nan_and_inf_propagate(name, rng):
    """IEEE semantics: an output is NaN (Inf) exactly where its receptive field holds a NaN (Inf)."""
    info = BY_NAME[name]
    skip_unavailable(info)
    family_skip(name)  # test_causal_conv1d places NaN and Inf for it
    x = rng.uniform(0.5, 1, (1, 1, 12, 12)).astype(np.float32)
    w = rng.uniform(0.5, 1, (2, 1, 3, 3)).astype(np.float32)  # positive, so Inf stays +Inf
    x[0, 0, 2, 3] = np.nan
    x[0, 0, 9, 9] = np.inf
    y = pyconv.conv2d(x, w, variant=info.name, precision=precision_of(info))
    nan_region = np.zeros((10, 10), bool)
    nan_region[0:3, 1:4] = True
    inf_region = np.zeros((10, 10), bool)
    inf_region[7:10, 7:10] = True
    if name in TILE_TRANSFORMS:  # the same non-finite outputs; where Inf, +Inf or NaN (opposite-sign terms)
        spread = nan_region | inf_region
        for m in range(2):
            assert np.isnan(y[0, m][nan_region]).all()
            assert np.array_equal(~np.isfinite(y[0, m]), spread)
        return
    for m in range(2):
        assert np.isnan(y[0, m][nan_region]).all()
        assert np.isposinf(y[0, m][inf_region]).all()
        assert np.isfinite(y[0, m][~nan_region & ~inf_region]).all()


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_inf_weight_at_a_padded_border_gives_nan(name, rng):
    """IEEE semantics at padded borders: a padded tap contributes 0 * w, so an Inf weight gives NaN
    where its tap falls in the padding (as PyTorch), +Inf inside."""
    info = BY_NAME[name]
    skip_unavailable(info)
    x = rng.uniform(0.5, 1, (1, 2, 10, 12)).astype(np.float32)
    w = rng.uniform(0.5, 1, (3, 2, 3, 3)).astype(np.float32)
    w[:, 0, 0, 0] = np.inf  # tap (0, 0) reads x[oh - 1, ow - 1]: padding on the first row and column
    try:
        y = pyconv.conv2d(x, w, padding=1, variant=name, precision=precision_of(info))
    except pyconv.ConvUnsupportedError as exc:
        pytest.skip(f"{name}: {exc}")
    border = np.zeros((10, 12), bool)
    border[0, :] = border[:, 0] = True
    if name in TILE_TRANSFORMS:  # the Inf weight reaches every output of every tile: NaN or Inf
        assert not np.isfinite(y).any()
        return
    assert np.isnan(y[0][:, border]).all(), f"{name}: a padded tap times Inf must give NaN"
    assert np.isposinf(y[0][:, ~border]).all()


# ---- the Python API: PyTorch's argument order and meaning, on the variants that take everything ----

FULL_VARIANTS = [name for name in ("cpu", "direct", "auto")
                 if name == "auto" or (BY_NAME[name].available if name in BY_NAME else False)]


def oracle_args(stride=1, padding=0, dilation=1):
    pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
    return dict(stride=pair(stride), padding=pair(padding), dilation=pair(dilation))


@pytest.mark.parametrize("variant", FULL_VARIANTS)
def test_seven_positionals_in_pytorchs_order(variant, rng):
    """conv2d(x, w, bias, stride, padding, dilation, groups): the third positional is the bias."""
    x = rng.uniform(-1, 1, (2, 4, 13, 11)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 2, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    y = pyconv.conv2d(x, w, b, 2, 1, 1, 2, variant=variant)
    ref = conv2d_reference(x, w, (2, 2), (1, 1), (1, 1), groups=2, bias=b)
    assert y.shape == ref.shape and rel_l2(y, ref) <= 1e-5
    y = pyconv.conv2d(x, w, b, stride=(1, 2), padding=(2, 0), dilation=(2, 1), groups=2, variant=variant)
    assert rel_l2(y, conv2d_reference(x, w, (1, 2), (2, 0), (2, 1), groups=2, bias=b)) <= 1e-5


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("variant", FULL_VARIANTS)
@pytest.mark.parametrize("kernel, dilation", [((3, 3), 1), ((4, 4), 1), ((2, 5), 1), ((4, 3), (2, 3)), ((1, 6), 1)])
def test_padding_same_and_valid(variant, kernel, dilation, rng):
    """'same' keeps H x W for odd and even kernels (stride 1), with PyTorch's split of an odd total
    d*(K-1): the larger half after; 'valid' is no padding."""
    x = rng.uniform(-1, 1, (2, 3, 9, 10)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3) + kernel).astype(np.float32)
    dh, dw = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    total_h, total_w = dh * (kernel[0] - 1), dw * (kernel[1] - 1)
    ref = conv2d_reference(x, w, (1, 1), (total_h // 2, total_w // 2), (dh, dw),
                           padding_extra=(total_h % 2, total_w % 2))
    y = pyconv.conv2d(x, w, padding="same", dilation=dilation, variant=variant)
    assert y.shape == (2, 4, 9, 10) and rel_l2(y, ref) <= 1e-5
    torch = _torch_or_none()
    if torch is not None:  # the same split as PyTorch's own 'same'
        expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding="same",
                                              dilation=dilation).numpy()
        assert rel_l2(y, expected) <= 1e-5
    y = pyconv.conv2d(x, w, padding="valid", dilation=dilation, variant=variant)
    assert rel_l2(y, conv2d_reference(x, w, (1, 1), (0, 0), (dh, dw))) <= 1e-5


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


@pytest.mark.parametrize("variant", FULL_VARIANTS)
@pytest.mark.parametrize("C, M, groups", [(6, 6, 6), (6, 12, 3), (4, 2, 2), (8, 16, 8)])
def test_groups_and_depthwise(variant, C, M, groups, rng):
    x = rng.uniform(-1, 1, (2, C, 11, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (M, C // groups, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, M).astype(np.float32)
    y = pyconv.conv2d(x, w, b, padding=1, groups=groups, variant=variant)
    assert rel_l2(y, conv2d_reference(x, w, (1, 1), (1, 1), groups=groups, bias=b)) <= 1e-5


EPILOGUES = [
    ("relu", dict(epilogue="relu")),
    (pyconv.ReluMaxPool(2), dict(epilogue="relu_maxpool", pool=(2, 2))),
    (pyconv.ReluMaxPool(3, stride=2), dict(epilogue="relu_maxpool", pool=(3, 3), pool_stride=(2, 2))),
    (pyconv.ReluMaxPool((2, 3), stride=(2, 2), ceil_mode=True),
     dict(epilogue="relu_maxpool", pool=(2, 3), pool_stride=(2, 2), pool_ceil=True)),
    (pyconv.ReluMaxPool(4, ceil_mode=True), dict(epilogue="relu_maxpool", pool=(4, 4), pool_ceil=True)),
]


@pytest.mark.parametrize("variant", FULL_VARIANTS)
@pytest.mark.parametrize("epilogue, reference", EPILOGUES, ids=[str(e[0]) for e in EPILOGUES])
def test_fused_epilogue(variant, epilogue, reference, rng):
    """(conv + bias) -> ReLU [-> max-pool] fused into the store, as the separate PyTorch ops."""
    x = rng.uniform(-1, 1, (2, 3, 15, 13)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, 5).astype(np.float32)
    ref = conv2d_reference(x, w, bias=b, **reference)
    y = pyconv.conv2d(x, w, b, epilogue=epilogue, variant=variant)
    assert y.shape == ref.shape and rel_l2(y, ref) <= 1e-5
    plan = pyconv.Conv2dPlan(x.shape, w.shape, bias=True, epilogue=epilogue, variant=variant)
    assert plan.out_shape == ref.shape
    torch = _torch_or_none()
    if torch is not None:
        F = torch.nn.functional
        expected = F.relu(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)))
        if isinstance(epilogue, pyconv.ReluMaxPool):
            expected = F.max_pool2d(expected, epilogue.kernel, epilogue.stride, ceil_mode=epilogue.ceil_mode)
        assert rel_l2(y, expected.numpy()) <= 1e-5


@pytest.mark.parametrize("variant", FULL_VARIANTS)
def test_float16_numpy_in_and_out(variant, rng):
    """fp16 NumPy arrays are taken as they are; the result is fp16 unless out_dtype says otherwise.
    Accumulation is fp32, so the error is the final rounding to fp16 (2^-11 relative)."""
    x = rng.uniform(-1, 1, (2, 3, 12, 10)).astype(np.float16)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float16)
    b = rng.uniform(-1, 1, 4).astype(np.float16)
    ref = conv2d_reference(x, w, padding=(1, 1), bias=b)
    y = pyconv.conv2d(x, w, b, padding=1, variant=variant)
    assert y.dtype == np.float16 and rel_l2(y, ref) <= 1e-3
    y32 = pyconv.conv2d(x, w, b.astype(np.float32), padding=1, out_dtype=np.float32, variant=variant)
    assert y32.dtype == np.float32 and rel_l2(y32, ref) <= 1e-5
    y32 = pyconv.conv2d(x, w, b.astype(np.float32), padding=1, out_dtype="float32", variant=variant)
    assert y32.dtype == np.float32


def nhwc(a):
    """The same logical array stored channels-last (a dense NHWC buffer seen as NCHW)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("variant", FULL_VARIANTS)
def test_channels_last_numpy_used_in_place(variant, rng):
    """NHWC x gives an NHWC y of logical shape (B, M, OH, OW); MKKC weights are read as they lie."""
    x = rng.uniform(-1, 1, (2, 5, 11, 12)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 5, 3, 2)).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    ref = conv2d_reference(x, w, (1, 1), (1, 0), bias=b)
    for xs, ws in ((nhwc(x), w), (x, nhwc(w)), (nhwc(x), nhwc(w))):
        y = pyconv.conv2d(xs, ws, b, padding=(1, 0), variant=variant)
        assert y.shape == ref.shape and rel_l2(y, ref) <= 1e-5
        x_is_nhwc = not xs.flags.c_contiguous
        assert y.transpose(0, 2, 3, 1).flags.c_contiguous == x_is_nhwc, "y is stored in x's layout"
    out = nhwc(np.full(ref.shape, np.nan, np.float32))
    assert pyconv.conv2d(nhwc(x), w, b, padding=(1, 0), variant=variant, out=out) is out
    assert rel_l2(out, ref) <= 1e-5


def test_plan_cache_makes_one_plan_per_problem(rng):
    """A repeated call reuses its plan (no new C plan); another shape, dtype or argument makes one."""
    x = rng.uniform(-1, 1, (1, 2, 9, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)
    pyconv.clear_plan_cache()
    assert len(pyconv.api._plans) == 0
    first = pyconv.conv2d(x, w)
    assert len(pyconv.api._plans) == 1
    for _ in range(5):
        assert np.array_equal(pyconv.conv2d(x, w), first)
    assert len(pyconv.api._plans) == 1
    pyconv.conv2d(x, w, padding=1)
    pyconv.conv2d(x.astype(np.float16), w.astype(np.float16))
    assert len(pyconv.api._plans) == 3
    pyconv.clear_plan_cache()
    assert len(pyconv.api._plans) == 0
    assert rel_l2(pyconv.conv2d(x, w), conv2d_reference(x, w)) <= 1e-5


@pytest.mark.parametrize("variant", ["cpu", pytest.param("auto", marks=pytest.mark.skipif(
    bool(GPU_SKIP_REASON), reason=GPU_SKIP_REASON or "GPU present"))])
def test_plans_pickle_and_copy_as_new_plans(variant, rng):
    """pickle, copy.copy and copy.deepcopy of a Conv2dPlan give a new plan (its own C plan and workspace)
    of the same problem, variant and configuration, computing the same y (was a TypeError about cffi)."""
    import copy
    import pickle
    x = rng.uniform(-1, 1, (2, 3, 13, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 5).astype(np.float32)
    plan = pyconv.Conv2dPlan(x.shape, w.shape, 2, (1, 0), bias=True, epilogue=pyconv.ReluMaxPool(2, ceil_mode=True),
                             variant=variant)

    def launch(p):
        if not p.on_device:
            y = np.full(p.out_shape, np.nan, np.float32)
            p.launch(x, w, y, bias=b)
            return y
        xs, ws, bs = (pyconv.DeviceArray.from_host(a, device=p.device) for a in (x, w, b))
        y = pyconv.DeviceArray(p.out_shape, np.float32, device=p.device)
        p.launch(xs, ws, y, bias=bs)
        return y.get()

    expected = launch(plan)
    assert rel_l2(expected, conv2d_reference(x, w, (2, 2), (1, 0), bias=b, epilogue="relu_maxpool",
                                             pool_ceil=True)) <= 1e-5
    for made in (pickle.loads(pickle.dumps(plan)), copy.copy(plan), copy.deepcopy(plan)):
        assert made._plan is not plan._plan
        assert (made.variant, made.config, made.out_shape, made.device) == (plan.variant, plan.config,
                                                                            plan.out_shape, plan.device)
        assert rel_l2(launch(made), expected) <= 1e-6


def test_results_are_fresh_arrays(rng):
    """Each call without out= returns a new array (never a cached buffer that a later call rewrites)."""
    x = rng.uniform(-1, 1, (1, 2, 9, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)
    y1 = pyconv.conv2d(x, w)
    y2 = pyconv.conv2d(x * 2, w)
    assert not np.shares_memory(y1, y2)
    assert rel_l2(y1, conv2d_reference(x, w)) <= 1e-5 and rel_l2(y2, conv2d_reference(x * 2, w)) <= 1e-5
