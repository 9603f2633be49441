"""Every variant against the float64 oracle on a matrix of shapes, on fresh random data, with the
output poisoned (NaN) before the call so that an unwritten element fails the test."""
import numpy as np
import pytest
from conftest import GPU_SKIP_REASON
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
    if not info.on_device:
        out = np.full(out_shape, np.nan, np.float32)
        pyconv.conv2d(x, w, variant=info.name, out=out, config=config, **kwargs)
        return out
    out = pyconv.DeviceArray(out_shape)
    out.fill_bytes(0xFF)
    result = pyconv.conv2d(pyconv.DeviceArray.from_host(x), pyconv.DeviceArray.from_host(w),
                           variant=info.name, out=out, config=config, **kwargs)
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
        # Allowed only with a message, and then auto must never pick this variant for the shape.
        assert str(exc).strip(), "UNSUPPORTED needs a message naming the parameter"
        plan = pyconv.Conv2dPlan(x.shape, w.shape, variant="auto", precision="fast", **kwargs)
        assert plan.variant != name
        pytest.skip(f"{name} does not support {shape_name}: {exc}")
    assert not np.isnan(y).any(), "some outputs were not written (NaN poison left)"
    err = rel_l2(y, ref)
    assert err <= info.max_rel_error, f"{name} on {shape_name}: relative L2 error {err:.2e}"


CORE_SHAPES = ["lenet_c1_b2", "lenet_c3_b3", "3x3_pad1_c3"]


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_variant_supports_core_shapes(name):
    """A variant that declared itself unsupported everywhere would pass the matrix vacuously."""
    info = BY_NAME[name]
    skip_unavailable(info)
    for shape_name in CORE_SHAPES:
        x, w, kwargs, _ = case(shape_name)
        plan = pyconv.Conv2dPlan(x.shape, w.shape, variant=name, **kwargs)
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
        assert str(exc).strip(), "UNSUPPORTED needs a message naming the reason"
        pytest.skip(f"{name}[{config}] does not support {shape_name}: {exc}")
    assert not np.isnan(y).any(), "some outputs were not written (NaN poison left)"
    err = rel_l2(y, ref)
    assert err <= info.max_rel_error, f"{name}[{config}] on {shape_name}: relative L2 error {err:.2e}"


@pytest.mark.parametrize("name,config", CONFIGS)
def test_every_config_runs_lenet(name, config):
    """A configuration unsupported everywhere would pass the matrix above vacuously: each one must
    run C1 or C3."""
    info = BY_NAME[name]
    skip_unavailable(info)
    ran = []
    for shape_name in ("lenet_c1_b2", "lenet_c3_b3"):
        x, w, kwargs, _ = case(shape_name)
        try:
            pyconv.Conv2dPlan(x.shape, w.shape, variant=name, config=config, **kwargs)
            ran.append(shape_name)
        except pyconv.ConvUnsupportedError:
            pass
    assert ran, f"{name}[{config}] runs neither LeNet layer"


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
        if info.available:
            y = pyconv.conv2d(x, w, padding=1, variant=info.name)
            assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == ref.shape
            assert rel_l2(y, ref) <= info.max_rel_error


def test_float64_and_noncontiguous_numpy_are_converted(rng):
    x = rng.uniform(-1, 1, (2, 3, 12, 10))            # float64: converted to float32, as documented
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # non-contiguous view
    assert not xt.flags.c_contiguous
    ref = conv2d_reference(x.astype(np.float32), w)
    assert rel_l2(pyconv.conv2d(x, w), ref) <= 1e-5
    assert rel_l2(pyconv.conv2d(xt, w), ref) <= 1e-5


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_nan_and_inf_propagate(name, rng):
    """IEEE semantics: an output is NaN (Inf) exactly where its receptive field holds a NaN (Inf)."""
    info = BY_NAME[name]
    skip_unavailable(info)
    x = rng.uniform(0.5, 1, (1, 1, 12, 12)).astype(np.float32)
    w = rng.uniform(0.5, 1, (2, 1, 3, 3)).astype(np.float32)  # positive, so Inf stays +Inf
    x[0, 0, 2, 3] = np.nan
    x[0, 0, 9, 9] = np.inf
    y = pyconv.conv2d(x, w, variant=info.name)
    nan_region = np.zeros((10, 10), bool)
    nan_region[0:3, 1:4] = True
    inf_region = np.zeros((10, 10), bool)
    inf_region[7:10, 7:10] = True
    for m in range(2):
        assert np.isnan(y[0, m][nan_region]).all()
        assert np.isposinf(y[0, m][inf_region]).all()
        assert np.isfinite(y[0, m][~nan_region & ~inf_region]).all()
