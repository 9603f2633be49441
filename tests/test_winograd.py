"""winograd (F(2x2, 3x3) in fp32, cuda/variants/winograd/winograd.cu) on the shapes that reach its edges, every
launch configuration.

The capability matrix (test_problem_matrix.py) runs the default configuration on one 3x3 shape per
declared capability. Here: channels that are not a multiple of the k-step (8) and several k-steps, maps
that are not a multiple of the tile (32), tile counts that do not divide the block's (32 tiles), odd
outputs (a last half tile in each direction), paddings 0 / 1 / 2 and asymmetric 'same', batches > 1,
groups (2, ResNeXt-like 8, depthwise), every dtype, NCHW / NHWC, MCKK / MKKC, bias + ReLU; a long
reduction (1152 channels) for the error bound; then the workspace check and the refusals (filters other
than 3x3, stride, dilation). float64 oracle, fresh random data, outputs poisoned with NaN.
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
DTYPES = ["f32", "f16", "bf16"]


def variant_of(k, case, layout):
    """Case k of the sweep in `layout`, with a dtype, filter layout and the bias + ReLU epilogue cycling
    over the cases (so that each meets the others across the sweep)."""
    dtype = DTYPES[k % len(DTYPES)]
    return case.with_(x_layout=layout, y_layout=layout, w_layout="MKKC" if k % 2 else "MCKK", x_dtype=dtype,
                      y_dtype=dtype, bias=bool(k % 2), epilogue="relu" if k % 3 == 0 else "none")


ROWS = [pytest.param(shape, layout, config, id=f"{shape}-{layout}-{config}")
        for shape in SHAPES for layout in ("NCHW", "NHWC") for config in ["f2x2_32x32", "f2x2_32x64"]]


def test_config_list_is_the_swept_one():
    pr.check_swept_configs(NAME, [row.values[2] for row in ROWS])


@pytest.mark.parametrize("shape,layout,config", ROWS)
def test_shapes_every_config(shape, layout, config, rng):
    pr.skip_unless_available(NAME)
    case = variant_of(list(SHAPES).index(shape), SHAPES[shape], layout)
    assert pr.check_config(NAME, config, case, rng) > 0, "the transformed filters live in the workspace"


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_mixed_output_dtype(dtype, rng):
    """x in one dtype, y (and bias) in another: the epilogue narrows or widens on the store."""
    pr.skip_unless_available(NAME)
    other = "f16" if dtype == "f32" else "f32"
    case = SHAPES["c20_m70_pad2"].with_(x_dtype=dtype, y_dtype=other, bias=True, epilogue="relu")
    pr.check_config(NAME, "f2x2_32x32", case, rng)


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
    "1x1": (ConvCase(1, 4, 9, 9, 4, 1, 1), "3x3"),
    "stride2": (ConvCase(1, 4, 9, 9, 4, 3, 3, stride=(2, 2)), "stride"),
    "stride1x2": (ConvCase(1, 4, 9, 9, 4, 3, 3, stride=(1, 2)), "stride"),
    "dilation2": (ConvCase(1, 4, 9, 9, 4, 3, 3, dilation=(2, 2)), "dilation"),
}


@pytest.mark.parametrize("case_id", list(REFUSALS))
def test_refuses_other_filters_strides_dilations(case_id):
    """Shapes F(2x2, 3x3) does not compute are refused with the reason. Dilation is a declared capability
    (checked without a GPU); the filter and stride limits are the variant's own, which the library asks
    it about once the variant is available here."""
    case, word = REFUSALS[case_id]
    if word != "dilation":
        pr.skip_unless_available(NAME)
    status, message = pr.supports(NAME, case)
    assert status == UNSUPPORTED, f"{case_id} accepted"
    assert word in message, f"{case_id} refused with {message!r}, which does not name {word!r}"
