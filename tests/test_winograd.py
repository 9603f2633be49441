"""winograd (F(2x2, 3x3) and F(2, 7) along rows, in fp32, cuda/variants/winograd/) on the shapes that reach its
edges, every launch configuration.

The capability matrix (test_problem_matrix.py) runs the default configuration on one 3x3 shape per
declared capability. Here: channels that are not a multiple of the k-step (8) and several k-steps, maps
that are not a multiple of the tile (32), tile counts that do not divide the block's (32 tiles), odd
outputs (a last half tile in each direction), paddings 0 / 1 / 2 and asymmetric 'same', batches > 1,
groups (2, ResNeXt-like 8, depthwise), every dtype, NCHW / NHWC, MCKK / MKKC, bias + ReLU; a long
reduction (1152 channels) for the error bound. The F(2, 7) rows (7x7 filters): LeNet's C3, paddings 0 / 2 / 3,
maps that do not fill the 8-map group, odd outputs (a last half tile), strips past the output, items that do not
fill the last block, channels over several shared-memory fills (64: 448 filter rows for the error bound), groups
and depthwise, asymmetric padding, the same dtype / layout / epilogue cycle. Then the workspace check and the
refusals (other filters, stride, dilation). float64 oracle, fresh random data, outputs poisoned with NaN.
"""
import numpy as np
import pytest

import problem_runner as pr
from problem_runner import ConvCase
from pyconv._lib import check, ffi, lib

NAME = "winograd"
UNSUPPORTED = -2

SHAPES = {
    "c3_m5_pad1_odd": ConvCase(2, 3, 11, 13, 5, 3, 3, padding=(1, 1)),
    "c40_m33_valid": ConvCase(1, 40, 12, 9, 33, 3, 3),
    "c20_m70_pad2": ConvCase(3, 20, 9, 8, 70, 3, 3, padding=(2, 2)),
    "same_extra": ConvCase(2, 16, 10, 7, 24, 3, 3, padding=(1, 0), extra=(0, 1)),
    "pad_rows_only": ConvCase(1, 9, 6, 17, 40, 3, 3, padding=(1, 0)),
    "tiny_3x3_valid": ConvCase(1, 2, 3, 3, 1, 3, 3),
    "many_tiles": ConvCase(4, 8, 30, 31, 16, 3, 3, padding=(1, 1)),
    "groups2": ConvCase(2, 24, 9, 10, 48, 3, 3, padding=(1, 1), groups=2),
    "resnext_g8": ConvCase(2, 64, 8, 7, 64, 3, 3, padding=(1, 1), groups=8),
    "depthwise": ConvCase(1, 12, 9, 9, 12, 3, 3, padding=(1, 1), groups=12),
    "long_reduction": ConvCase(1, 1152, 6, 6, 64, 3, 3, padding=(1, 1)),
}
ROW_SHAPES = {  # the F(2, 7) rows configuration
    "rows_lenet_c3": ConvCase(3, 4, 40, 40, 16, 7, 7),
    "rows_c1_m4_pad3_odd": ConvCase(2, 1, 23, 21, 4, 7, 7, padding=(3, 3)),
    "rows_c9_m20_pad3": ConvCase(2, 9, 12, 17, 20, 7, 7, padding=(3, 3)),
    "rows_pad2x3": ConvCase(1, 3, 30, 19, 10, 7, 7, padding=(2, 3)),
    "rows_narrow": ConvCase(1, 2, 40, 9, 8, 7, 7),
    "rows_asymmetric_pad": ConvCase(2, 5, 10, 9, 8, 7, 7, padding=(2, 3), extra=(1, 0)),
    "rows_many_items": ConvCase(5, 3, 37, 41, 16, 7, 7),
    "rows_one_output": ConvCase(2, 2, 7, 7, 3, 7, 7),
    "rows_c64_fills": ConvCase(1, 64, 9, 10, 24, 7, 7, padding=(3, 3)),
    "rows_groups2": ConvCase(2, 12, 14, 13, 18, 7, 7, padding=(3, 3), groups=2),
    "rows_depthwise": ConvCase(1, 6, 11, 12, 6, 7, 7, padding=(3, 3), groups=6),
}
ROWS_CONFIG = "f2x7_rows_m8_p12"
DTYPES = ["f32", "f16", "bf16"]


def variant_of(k, case, layout):
    """Case k of the sweep in `layout`, with a dtype, filter layout and the bias + ReLU epilogue cycling
    over the cases (so that each meets the others across the sweep)."""
    dtype = DTYPES[k % len(DTYPES)]
    return case.with_(x_layout=layout, y_layout=layout, w_layout="MKKC" if k % 2 else "MCKK", x_dtype=dtype,
                      y_dtype=dtype, bias=bool(k % 2), epilogue="relu" if k % 3 == 0 else "none")


ROWS = ([pytest.param(shape, layout, config, id=f"{shape}-{layout}-{config}")
         for shape in SHAPES for layout in ("NCHW", "NHWC") for config in ["f2x2_32x32", "f2x2_32x64"]]
        + [pytest.param(shape, layout, config, id=f"{shape}-{layout}-{config}")
           for shape in ROW_SHAPES for layout in ("NCHW", "NHWC") for config in [ROWS_CONFIG]])
ALL_SHAPES = {**SHAPES, **ROW_SHAPES}


def test_config_list_is_the_swept_one():
    pr.check_swept_configs(NAME, [row.values[2] for row in ROWS])


@pytest.mark.parametrize("shape,layout,config", ROWS)
def test_shapes_every_config(shape, layout, config, rng):
    pr.skip_unless_available(NAME)
    case = variant_of(list(ALL_SHAPES).index(shape), ALL_SHAPES[shape], layout)
    assert pr.check_config(NAME, config, case, rng) > 0, "the transformed filters live in the workspace"


@pytest.mark.parametrize("config,shape", [("f2x2_32x32", "c20_m70_pad2"), (ROWS_CONFIG, "rows_groups2")])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_mixed_output_dtype(dtype, config, shape, rng):
    """x in one dtype, y (and bias) in another: the epilogue narrows or widens on the store."""
    pr.skip_unless_available(NAME)
    other = "f16" if dtype == "f32" else "f32"
    case = ALL_SHAPES[shape].with_(x_dtype=dtype, y_dtype=other, bias=True, epilogue="relu")
    pr.check_config(NAME, config, case, rng)


def test_rows_non_finite_where_the_oracle_has_them(rng):
    """F(2, 7): an input reaches only the positions whose rows of B^T hold it (x_0 only position 0, which output 1
    does not read; x_7 only position 7, which output 0 does not): NaN and Inf of x give non-finite outputs
    exactly where a direct sum has them, NaN where it has NaN (an Inf may come out as NaN)."""
    pr.skip_unless_available(NAME)
    from oracle import conv2d_reference
    case = ConvCase(1, 2, 20, 21, 9, 7, 7, padding=(3, 3))
    x, w, _ = pr.random_operands(case, rng, low=0.5, high=1.0)
    x[0, 0, 3, 4] = np.nan
    x[0, 1, 12, 15] = np.inf
    x[0, 1, 17, 0] = -np.inf
    y = pr.run_config(NAME, ROWS_CONFIG, case, x, w, None)[0]
    with np.errstate(invalid="ignore"):
        ref = conv2d_reference(x, w, **case.oracle_kwargs())
    assert np.isnan(ref).sum() >= 9 * 49 and np.isinf(ref).sum() >= 9 * 40
    assert np.array_equal(np.isfinite(y), np.isfinite(ref))
    assert np.isnan(y[np.isnan(ref)]).all()


def test_default_config_per_filter():
    """A 3x3 layer runs the F(2x2, 3x3) tiles by default, a 7x7 one the rows."""
    pr.skip_unless_available(NAME)
    assert pr.default_config(NAME, SHAPES["many_tiles"]) == "f2x2_32x32"
    assert pr.default_config(NAME, ROW_SHAPES["rows_lenet_c3"]) == ROWS_CONFIG


def test_workspace_too_small_is_refused(rng):
    """A plan run with less workspace than the plan reports is refused with the status and the size, and
    writes nothing."""
    pr.skip_unless_available(NAME)
    from pyconv.device import DeviceArray
    case = SHAPES["c40_m33_valid"]
    plan_out = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(pr.variant_id(NAME), pr.make_problem(case), ffi().NULL, -1, plan_out))
    plan = ffi().gc(plan_out[0], lib().conv2d_plan_destroy)
    info = ffi().new("conv_plan_info*")
    check(lib().conv2d_plan_get_info(plan, info))
    assert info.workspace_bytes >= case.groups * 40 * 16 * 64 * 4  # channels to 40, maps to 64, 16 values
    x, w, _ = pr.random_operands(case, rng)
    d_x, d_w = DeviceArray.from_host(x.astype(np.float32)), DeviceArray.from_host(w.astype(np.float32))
    d_y = DeviceArray((1, 33, 10, 7), np.float32)
    d_y.fill_bytes(0xFF)
    status = lib().conv2d_plan_run(plan, d_x.handle, d_w.handle, ffi().NULL, d_y.handle, ffi().NULL, 0, ffi().NULL)
    assert status != 0
    assert "workspace" in ffi().string(lib().conv_last_error()).decode()
    check(lib().conv_device_synchronize())
    assert np.isnan(d_y.get()).all()


REFUSALS = {
    "5x5": (ConvCase(1, 4, 9, 9, 4, 5, 5, padding=(2, 2)), "3x3"),
    "3x5": (ConvCase(1, 4, 9, 9, 4, 3, 5), "3x3"),
    "7x5": (ConvCase(1, 4, 9, 9, 4, 7, 5), "7x7"),
    "5x7": (ConvCase(1, 4, 9, 9, 4, 5, 7), "7x7"),
    "1x1": (ConvCase(1, 4, 9, 9, 4, 1, 1), "3x3"),
    "stride2": (ConvCase(1, 4, 9, 9, 4, 3, 3, stride=(2, 2)), "stride"),
    "7x7_stride2": (ConvCase(1, 4, 19, 19, 4, 7, 7, stride=(2, 2)), "stride"),
    "stride1x2": (ConvCase(1, 4, 9, 9, 4, 3, 3, stride=(1, 2)), "stride"),
    "dilation2": (ConvCase(1, 4, 9, 9, 4, 3, 3, dilation=(2, 2)), "dilation"),
    "7x7_dilation2": (ConvCase(1, 4, 19, 19, 4, 7, 7, dilation=(2, 2)), "dilation"),
}


@pytest.mark.parametrize("case_id", list(REFUSALS))
def test_refuses_other_filters_strides_dilations(case_id):
    """Shapes neither F(2x2, 3x3) nor the F(2, 7) rows compute are refused with the reason. Dilation is a declared capability
    (checked without a GPU); the filter and stride limits are the variant's own, which the library asks
    it about once the variant is available here."""
    case, word = REFUSALS[case_id]
    if word != "dilation":
        pr.skip_unless_available(NAME)
    status, message = pr.supports(NAME, case)
    assert status == UNSUPPORTED, f"{case_id} accepted"
    assert word in message, f"{case_id} refused with {message!r}, which does not name {word!r}"
