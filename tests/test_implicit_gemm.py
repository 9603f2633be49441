"""implicit_gemm's launch configurations, each on the paths it chooses per problem, against the float64 oracle.

The problem matrix (test_problem_matrix.py) runs every variant's default configuration and
test_conv2d.py every configuration on fp32 NCHW shapes; the tuned configurations (simt128x128,
simt128x64, simt64x128, simt32x256, simt32x128 with k-steps of 8; quad64x64, quad64x32, quad32x64, 4 x 4
outputs a thread, with k-steps of 16: variants/implicit_gemm/igemm_pipeline.cuh) pick among paths by
layout, alignment and grid size, and each path is reached here by every configuration:
  - the Xunroll loader: tap-order gather (NCHW x, MCKK w, C a multiple of the k-step, grids without
    split-K: the filter staged in that order in the workspace), scalar gather (other NCHW; NHWC with
    MCKK filters or C % 4 != 0), 16-byte quad gather (NHWC, MKKC, C % 4 == 0) with stride, padding,
    'same' end padding and dilation, and the plain GEMM of 1x1 stride-1 unpadded layers: along channels
    (NHWC) and along pixels (NCHW: 16-byte pixel quads where H*W % 4 == 0 and x is aligned, else per
    pixel, quads straddling two images);
  - W loads as quads (C*KH*KW % 4 == 0) or scalars with a k tail;
  - split-K (batch-1 grids with a long reduction) with its reduction kernel's bias, ReLU, y dtypes and
    both y layouts (NCHW through the transposing tile, M and pixel counts not multiples of 32);
  - f16 and bf16 inputs (8-byte quads) and outputs.
Grouped convolutions (GROUPED_CASES) run only on the tuned configurations, again through every path:
the scalar gathers, the quad gather (C/groups % 4 == 0), the 1x1 GEMM, split-K, with map tiles that
end inside a group (M/groups not a multiple of the tile: the next group's filters must stay out) and
16-byte NHWC stores where M/groups % 4 == 0 (else per map, since a group's first map may then sit
mid-quad), up to more groups' map tiles than gridDim.y holds; simple64x64 refuses groups.
Fresh random data, outputs poisoned with NaN, relative L2 within the variant's bound (1e-5 for fp32).
"""
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import problem_runner as pr
from problem_runner import ConvCase
from pyconv import ConvUnsupportedError
from pyconv._lib import check, ffi, lib

VARIANT = "implicit_gemm"
CONFIGS = ["simple64x64", "simt128x128", "simt128x64", "simt64x128", "simt32x256", "simt32x128", "quad64x64",
           "quad64x32", "quad32x64"]
TUNED = CONFIGS[1:]
# The configurations compiled for f16 / bf16 x and w (igemm_simt_tiles.h); the others refuse them.
HALF_INPUTS = ["simple64x64", "simt128x64"]

NHWC_KKC = dict(x_layout="NHWC", w_layout="MKKC", y_layout="NHWC")
CASES = {
    # tap-order gather (NCHW x, MCKK w, C/groups a multiple of 8 or 16, reductions too short for split-K): several
    # channel blocks through all taps, padding on every side, y NHWC, f16 x, 1x1 stride 2
    "tap_3x3_pad1": ConvCase(2, 16, 11, 13, 40, 3, 2, padding=(1, 1)),
    "tap_stride2_dil2_rect_extra": ConvCase(2, 8, 17, 15, 70, 3, 5, stride=(2, 1), padding=(2, 1), extra=(1, 0),
                                            dilation=(2, 1), y_layout="NHWC"),
    "tap_f16_bias_relu": ConvCase(2, 16, 9, 10, 33, 1, 3, padding=(0, 1), x_dtype="f16", bias=True,
                                  epilogue="relu"),
    "tap_1x1_stride2": ConvCase(2, 16, 9, 9, 20, 1, 1, stride=(2, 2)),
    # scalar gather
    "nchw_3x3_pad1": ConvCase(2, 6, 11, 13, 40, 3, 3, padding=(1, 1)),
    "nchw_stride2_dil2_rect": ConvCase(2, 5, 17, 15, 70, 3, 5, stride=(2, 1), padding=(2, 1), dilation=(2, 1)),
    "nhwc_mckk_c8": ConvCase(2, 8, 9, 10, 33, 3, 3, padding=(1, 1), x_layout="NHWC", y_layout="NHWC"),
    "nhwc_mkkc_c6": ConvCase(2, 6, 9, 10, 33, 3, 3, padding=(1, 1), **NHWC_KKC),
    # quad gather (NHWC, MKKC, C % 4 == 0)
    "quad_3x3_pad1": ConvCase(2, 12, 11, 13, 65, 3, 3, padding=(1, 1), **NHWC_KKC),
    "quad_stride2_extra": ConvCase(3, 4, 13, 12, 20, 3, 3, stride=(2, 2), padding=(1, 1), extra=(1, 0),
                                   **NHWC_KKC),
    "quad_dil2_5x2": ConvCase(1, 8, 16, 15, 130, 5, 2, padding=(4, 1), dilation=(2, 1), **NHWC_KKC),
    "quad_1x1_stride2": ConvCase(2, 8, 9, 9, 17, 1, 1, stride=(2, 2), **NHWC_KKC),
    # 1x1 as a GEMM (any filter layout), and its fall-back when C % 4 != 0
    "gemm_1x1": ConvCase(3, 20, 7, 9, 72, 1, 1, **NHWC_KKC),
    "gemm_1x1_mckk_nchw_y": ConvCase(2, 16, 5, 11, 130, 1, 1, x_layout="NHWC", w_layout="MCKK"),
    "gemm_1x1_c3": ConvCase(2, 3, 6, 7, 40, 1, 1, **NHWC_KKC),
    # 1x1 as a GEMM along pixels (NCHW x): 16-byte pixel quads (H*W % 4 == 0), and per pixel where H*W is
    # odd (quads straddle two images), with a k tail and M not a multiple of any tile
    "pixel_gemm_1x1": ConvCase(3, 21, 8, 6, 40, 1, 1, bias=True, epilogue="relu"),
    "pixel_gemm_1x1_odd_hw": ConvCase(3, 20, 7, 9, 72, 1, 1, y_layout="NHWC"),
    "pixel_gemm_1x1_f16": ConvCase(2, 12, 4, 10, 33, 1, 1, x_dtype="f16", y_dtype="f16"),
    # split-K: batch 1, a long reduction (C*KH*KW >= 64 k-tiles), few blocks
    "split_nchw_bias_relu": ConvCase(1, 64, 9, 9, 70, 3, 3, padding=(1, 1), bias=True, epilogue="relu"),
    "split_nhwc_quad": ConvCase(1, 64, 7, 7, 150, 3, 3, padding=(1, 1), bias=True, **NHWC_KKC),
    "split_gemm_1x1": ConvCase(1, 512, 7, 7, 100, 1, 1, **NHWC_KKC),
    "split_pixel_gemm_1x1": ConvCase(1, 512, 8, 8, 100, 1, 1, bias=True),
    "split_pixel_gemm_1x1_odd_hw": ConvCase(1, 512, 7, 7, 36, 1, 1, epilogue="relu"),
    "split_ckk_tail": ConvCase(1, 67, 6, 5, 36, 3, 3, padding=(1, 1), epilogue="relu"),  # CKK = 603
    # dtypes, through the quad loaders and the reduction
    "f16_quad_split": ConvCase(1, 64, 7, 7, 48, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", bias=True,
                               **NHWC_KKC),
    "bf16_gemm_f32_y": ConvCase(2, 24, 5, 6, 40, 1, 1, x_dtype="bf16", **NHWC_KKC),
    "f32_in_bf16_nchw_y_split": ConvCase(1, 64, 6, 9, 45, 3, 3, padding=(1, 1), y_dtype="bf16",
                                         x_layout="NHWC", w_layout="MKKC", bias=True, epilogue="relu"),
}

# groups: C/groups channels and M/groups maps per group (Cg, Mg in the comments)
GROUPED_CASES = {
    # scalar gather: NCHW x (MCKK, MKKC), NHWC x with MCKK filters or Cg % 4 != 0
    "g2_nchw_mg150": ConvCase(2, 12, 11, 13, 300, 3, 3, padding=(1, 1), groups=2),  # 2-3 map tiles a group
    # tap-order gather: Cg = 8, Mg = 18 (tiles end inside a group)
    "g2_tap_nchw": ConvCase(2, 16, 9, 9, 36, 3, 3, padding=(1, 1), stride=(2, 2), groups=2, bias=True),
    # Cg = 16, a multiple of the quad tiles' k-step (16) too; a reduction too short for split-K (C/groups * 3 = 48)
    "g2_tap_nchw_cg16": ConvCase(2, 32, 9, 8, 36, 3, 1, padding=(1, 0), groups=2, epilogue="relu"),
    "g3_nchw_mkkc_stride2_dil2": ConvCase(2, 9, 17, 15, 21, 3, 3, stride=(2, 2), padding=(2, 2), dilation=(2, 2),
                                         groups=3, w_layout="MKKC", bias=True, epilogue="relu"),
    "g32_nhwc_cg2": ConvCase(2, 64, 9, 8, 64, 3, 3, padding=(1, 1), groups=32, **NHWC_KKC),  # Mg = 2, M % 4 == 0
    "g4_nhwc_mckk": ConvCase(2, 16, 9, 10, 12, 3, 3, padding=(1, 1), groups=4, x_layout="NHWC"),
    "depthwise_x2_nhwc_nchw_y": ConvCase(2, 8, 9, 9, 16, 3, 3, padding=(1, 1), groups=8, x_layout="NHWC",
                                         w_layout="MKKC"),
    "g3_f16_nchw_rect": ConvCase(2, 9, 10, 11, 15, 3, 2, padding=(1, 0), groups=3, x_dtype="f16", bias=True),
    # quad gather (NHWC, MKKC, Cg % 4 == 0): ResNeXt-like 32 groups of 4, 16-byte stores or not
    "g32_quad_cg4_stride2": ConvCase(2, 128, 8, 7, 128, 3, 3, stride=(2, 2), padding=(1, 1), groups=32,
                                     bias=True, epilogue="relu", **NHWC_KKC),
    "g2_quad_mg20": ConvCase(2, 24, 11, 13, 40, 3, 3, padding=(1, 1), groups=2, **NHWC_KKC),
    "g2_quad_mg21_dil2": ConvCase(1, 24, 12, 13, 42, 3, 3, padding=(2, 2), dilation=(2, 2), groups=2, **NHWC_KKC),
    # 1x1 as one GEMM per group, and its fall-back when Cg % 4 != 0
    "g4_gemm_1x1": ConvCase(3, 32, 7, 9, 24, 1, 1, groups=4, **NHWC_KKC),
    "g2_gemm_1x1_mckk_nchw_y": ConvCase(2, 40, 5, 11, 130, 1, 1, groups=2, x_layout="NHWC"),
    "g4_bf16_gemm_f32_y": ConvCase(2, 48, 5, 6, 40, 1, 1, groups=4, x_dtype="bf16", **NHWC_KKC),
    "g3_1x1_cg6": ConvCase(2, 18, 6, 7, 9, 1, 1, groups=3, **NHWC_KKC),
    "g2_pixel_gemm_1x1": ConvCase(2, 24, 6, 6, 70, 1, 1, groups=2, bias=True),
    "g3_pixel_gemm_1x1_odd_hw": ConvCase(3, 9, 5, 5, 12, 1, 1, groups=3, x_dtype="bf16"),
    # split-K at batch 1, a long reduction per group (AlexNet conv5: 2 groups of 192 channels)
    "g2_split_nchw_bias_relu": ConvCase(1, 384, 13, 13, 256, 3, 3, padding=(1, 1), groups=2, bias=True,
                                        epilogue="relu"),
    "g32_split_quad": ConvCase(1, 512, 7, 7, 512, 3, 3, padding=(1, 1), groups=32, bias=True, **NHWC_KKC),
    "g2_f16_split_mg25": ConvCase(1, 128, 7, 7, 50, 3, 3, padding=(1, 1), groups=2, x_dtype="f16", y_dtype="f16",
                                  bias=True, **NHWC_KKC),
    "g2_f32_in_bf16_nchw_y_split": ConvCase(1, 128, 6, 9, 46, 3, 3, padding=(1, 1), groups=2, y_dtype="bf16",
                                            x_layout="NHWC", w_layout="MKKC", bias=True, epilogue="relu"),
    # more map tiles (one per group) than gridDim.y's 65535: the kernel loops over them
    "g66000_1x1_tile_loop": ConvCase(1, 66000, 2, 3, 66000, 1, 1, groups=66000, bias=True),
}
# Cases whose batch-1 grid is small enough for every tuned configuration to split k, and those whose
# filter is staged in tap order: the ones that ask for a workspace.
GROUPED_SPLIT = ["g2_split_nchw_bias_relu", "g32_split_quad", "g2_f16_split_mg25", "g2_f32_in_bf16_nchw_y_split"]
GROUPED_TAPS = ["g2_tap_nchw", "g2_tap_nchw_cg16"]


def make_plan(config, case: ConvCase):
    """A C plan of implicit_gemm[config] for the case (config None: the default one); (plan, its info)."""
    plan_out = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(pr.variant_id(VARIANT), pr.make_problem(case),
                                   ffi().NULL if config is None else config.encode(), -1, plan_out))
    plan = ffi().gc(plan_out[0], lib().conv2d_plan_destroy)
    info = ffi().new("conv_plan_info*")
    check(lib().conv2d_plan_get_info(plan, info))
    return plan, info


@requires_gpu
@pytest.mark.parametrize("case_id", list(CASES))
@pytest.mark.parametrize("config", CONFIGS)
def test_config_path_matches_oracle(config, case_id, rng):
    check_or_refused(config, CASES[case_id], rng)


def check_or_refused(config, case: ConvCase, rng):
    """The case through `config` against the oracle, or, for half inputs on a tile built for fp32 x only, a
    refusal that names the configuration and the dtype. Returns the workspace bytes (None if refused)."""
    if case.x_dtype != "f32" and config not in HALF_INPUTS:
        with pytest.raises(ConvUnsupportedError, match=f"'{config}' does not take x_dtype = {case.x_dtype}"):
            make_plan(config, case)
        return None
    return pr.check_config(VARIANT, config, case, rng)


@requires_gpu
@pytest.mark.parametrize("x_offset", [1, 2])
@pytest.mark.parametrize("config", TUNED)
def test_pixel_gemm_unaligned_x(config, x_offset, rng):
    """x one or two elements past a 16-byte boundary: the NCHW 1x1 GEMM loads per pixel, not in quads."""
    case = CASES["pixel_gemm_1x1"]
    x, w, bias = pr.random_operands(case, rng)
    y, _ = pr.run_config(VARIANT, config, case, x, w, bias, x_offset=x_offset)
    ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert rel_l2(y, ref) <= pr.error_bound(VARIANT, "f32", "f32"), f"{config}, x at +{x_offset}"


@requires_gpu
@pytest.mark.parametrize("case_id", list(GROUPED_CASES))
@pytest.mark.parametrize("config", TUNED)
def test_grouped_config_path_matches_oracle(config, case_id, rng):
    ws_bytes = check_or_refused(config, GROUPED_CASES[case_id], rng)
    if ws_bytes is None:
        return
    # The plan's workspace is the largest any configuration asks for on the problem (implicit_gemm.cu).
    asks = case_id in GROUPED_SPLIT or case_id in GROUPED_TAPS
    assert (ws_bytes > 0) == asks, f"{config} on {case_id}: workspace {ws_bytes}"


@requires_gpu
def test_simple_config_refuses_groups():
    with pytest.raises(ConvUnsupportedError, match="simple64x64.*groups"):
        make_plan("simple64x64", GROUPED_CASES["g4_nhwc_mckk"])


@requires_gpu
@pytest.mark.parametrize("case, expected", [
    (ConvCase(1, 512, 7, 7, 2048, 1, 1), "quad64x32"),                      # few pixels: the 4 x 4 tile
    (ConvCase(1, 96, 55, 55, 16, 1, 1), "quad64x32"),                       # ... whatever the maps
    (ConvCase(1, 16, 64, 64, 16, 3, 3, padding=(1, 1)), "simt32x128"),      # 4096 pixels, 16 maps
    (ConvCase(4, 16, 64, 64, 64, 3, 3, padding=(1, 1)), "simt64x128"),
    (ConvCase(4, 16, 64, 64, 130, 3, 3, padding=(1, 1)), "simt128x128"),
    (ConvCase(1, 512, 7, 7, 2048, 1, 1, x_dtype="f16"), "simt128x64"),      # half inputs: the tile built for them
])
def test_default_config_by_pixels_then_maps(case, expected):
    _, info = make_plan(None, case)
    assert ffi().string(info.config_name).decode() == expected


@requires_gpu
@pytest.mark.parametrize("case_id", ["g32_nhwc_cg2", "g2_nchw_mg150"])
def test_grouped_default_config_is_tuned(case_id):
    """The default configuration of a grouped problem is one that takes groups (simple64x64 does not)."""
    _, info = make_plan(None, GROUPED_CASES[case_id])
    assert ffi().string(info.config_name).decode() in TUNED


@requires_gpu
@pytest.mark.parametrize("config", TUNED)
def test_split_k_runs_on_small_grids(config, rng):
    """A batch-1 layer with a long reduction (72 k-tiles, one or two blocks) asks for a workspace, i.e.
    runs split-K, and stays exact with it."""
    case = CASES["split_nhwc_quad"]
    x, w, bias = pr.random_operands(case, rng)
    y, ws_bytes = pr.run_config(VARIANT, config, case, x, w, bias)
    assert ws_bytes > 0, f"{config}: no split-K workspace for {case}"
    assert rel_l2(y, conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())) <= pr.error_bound(VARIANT, "f32", "f32")
