"""grouped_direct's kernels on the shapes of depthwise and grouped layers, every launch configuration.

The capability matrix (test_problem_matrix.py) runs grouped_direct's default configuration on its
generic cases; those never reach the NHWC depthwise kernel (groups == C == M, C % 4 == 0, x and y NHWC)
nor most of the unrolled 3x3 / 5x5 / 7x7 paths at stride 2. Here: scaled-down shapes of the depthwise
and grouped suite (MobileNetV2 3x3, EfficientNet-B0 5x5, ConvNeXt-T 7x7 pad 3, a channel multiplier,
ResNeXt-50 32x4d-style groups of 4..32 channels that need several shared-memory fills), each in every
configuration that takes it, NCHW and NHWC, f32 / f16 / bf16, bias + ReLU; then every depthwise
configuration (depthwise_nhwc.cu, depthwise_nchw.cu) in every dtype on shapes that reach each of their
paths (3x3 / 5x5 at strides 1 and 2 and 7x7 unrolled, the generic kernel, 8-channel f16 / bf16 vectors
and the 4-channel ones where C % 8 != 0, the narrow configurations' 4-byte vectors (1 fp32 channel, 2
f16 / bf16) with their taps in registers or staged (7x7 in f16 / bf16, the generic kernel), channel
blocks split evenly, tiles and row bands that do not divide the output, a channel multiplier, mixed
dtypes); plus the NHWC kernel's fallbacks for operands its vectors cannot load, and the refusals. The
large-filter kernel (depthwise_large.cu, lk_q*) on RepLKNet / SLaK / InceptionNeXt-like filters at strides 1-3 in
every dtype and layout pair, with NaN / Inf placement in x and an Inf weight on padding.
float64 oracle, fresh random data, outputs poisoned with NaN.
"""
import numpy as np
import pytest

import problem_runner as pr
from problem_runner import ConvCase
from pyconv import ConvUnsupportedError
from pyconv._lib import ffi, lib

NAME = "grouped_direct"
UNSUPPORTED = -2

# Scaled-down suite shapes (odd sizes so that no tile divides them) and the kernels' edge cases.
SHAPES = {
    "mbv2_3x3_s1": ConvCase(2, 32, 21, 19, 32, 3, 3, padding=(1, 1), groups=32),
    "mbv2_3x3_s2": ConvCase(1, 24, 23, 22, 24, 3, 3, stride=(2, 2), padding=(1, 1), groups=24),
    "effnet_5x5_s1": ConvCase(1, 16, 15, 17, 16, 5, 5, padding=(2, 2), groups=16),
    "effnet_5x5_s2": ConvCase(2, 12, 28, 27, 12, 5, 5, stride=(2, 2), padding=(2, 2), groups=12),
    "convnext_7x7": ConvCase(1, 8, 37, 35, 8, 7, 7, padding=(3, 3), groups=8),
    "convnext_7x7_tiny": ConvCase(2, 20, 7, 7, 20, 7, 7, padding=(3, 3), groups=20),
    "dw_7x7_s2": ConvCase(1, 8, 19, 20, 8, 7, 7, stride=(2, 2), padding=(3, 3), groups=8),
    "dw_3x5_dil2_same": ConvCase(1, 8, 13, 16, 8, 3, 5, padding=(2, 4), dilation=(2, 2), groups=8),
    "dw_valid_large_plane": ConvCase(1, 4, 70, 67, 4, 3, 3, groups=4),
    "dw_multiplier3_s2": ConvCase(2, 6, 17, 15, 18, 3, 3, stride=(2, 2), padding=(1, 1), groups=6),
    "resnext_g8_cg4": ConvCase(2, 32, 14, 13, 32, 3, 3, padding=(1, 1), groups=8),
    "resnext_g2_cg32_s2": ConvCase(1, 64, 15, 16, 64, 3, 3, stride=(2, 2), padding=(1, 1), groups=2),
    # 16 maps a group: one block of two 8-map slices (m8x2), or half of a 32-map block (m8x4).
    "resnext_g4_cg16": ConvCase(2, 64, 11, 12, 64, 3, 3, padding=(1, 1), groups=4),
    "grouped_cg48_m24": ConvCase(1, 96, 9, 11, 48, 3, 3, padding=(1, 1), groups=2),
    # UniRepLKNet's 13x13 (what taps13 is built for; the other configurations too, where they take it)
    "unireplknet_13x13": ConvCase(1, 8, 15, 14, 8, 13, 13, padding=(6, 6), groups=8),
}
DTYPES = ["f32", "f16", "bf16"]


def configs():
    from pyconv.api import variant_configs
    return variant_configs(NAME)


def variant_of(k, case, layout):
    """Case k of the sweep in `layout`, with a dtype and the bias + ReLU epilogue cycling over the cases
    (so that every dtype meets every kernel family across the sweep)."""
    dtype = DTYPES[k % len(DTYPES)]
    return case.with_(x_layout=layout, y_layout=layout, w_layout="MKKC" if k % 2 else "MCKK", x_dtype=dtype,
                      y_dtype=dtype, bias=bool(k % 2), epilogue="relu" if k % 3 == 0 else "none")


ROWS = [pytest.param(shape, layout, config, id=f"{shape}-{layout}-{config}")
        for shape in SHAPES for layout in ("NCHW", "NHWC") for config in
        ["m1_t32x32", "m1_t32x32_p8", "m1_t16x16", "m1_t8x8", "m4_t32x16", "m4_t16x16", "m4_t8x8", "m8_t32x16",
         "m8_t16x16", "m8_t8x8", "m8x2_t16x16", "m8x4_t8x8", "m4_t8x8_k4", "m8_t8x8_k4",
         "nhwc_p4_t128", "nhwc_p2_t128", "nhwc_r2p2_t128", "nhwc_narrow_p1_t128",
         "nhwc_narrow_p2_t128", "nhwc_narrow_r2p2_t128", "nhwc_narrow_r4p2_t128", "nhwc_narrow_r8p2_t128",
         "nhwc_narrow_r4p4_t128", "nhwc_narrow_r8p2_t128_b4", "nhwc_narrow_r4p4_t128_b4", "nchw_r2", "nchw_r4",
         "nchw_r7", "nchw_t32x32", "lk_q16", "lk_q8", "plane", "plane_r8", "plane_mm", "rows_mm", "taps13", "taps"]]
NHWC_CONFIGS = ["nhwc_p4_t128", "nhwc_p2_t128", "nhwc_r2p2_t128",
                "nhwc_narrow_p1_t128", "nhwc_narrow_p2_t128", "nhwc_narrow_r2p2_t128", "nhwc_narrow_r4p2_t128",
                "nhwc_narrow_r8p2_t128", "nhwc_narrow_r4p4_t128", "nhwc_narrow_r8p2_t128_b4",
                "nhwc_narrow_r4p4_t128_b4"]
NCHW_CONFIGS = ["nchw_r2", "nchw_r4", "nchw_r7", "nchw_t32x32"]
# The tiles built for every dtype (f16, bf16, mixed); the other m* tiles take fp32 x and y only.
ALL_DTYPE_TILES = ["m1_t16x16", "m1_t8x8", "m4_t16x16"]


def dtypes_of(config):
    """The x / y dtypes a configuration is built for (grouped_direct.cu, grouped_direct.h): the small
    one-map tiles, m4_t16x16, the NCHW depthwise kernels, plane, plane_r8 and plane_mm every dtype (plane_r8 from batch 4
    f16 / bf16: lk_case), the other tiles and the wide NHWC depthwise ones fp32, the narrow NHWC ones f16 / bf16
    (and fp32 in the one-pixel tile)."""
    if config in ALL_DTYPE_TILES or config.startswith("nchw") or config in ("nhwc_narrow_p1_t128", "plane",
                                                                              "plane_r8", "plane_mm"):
        return DTYPES
    if config.startswith("nhwc_narrow"):
        return ["f16", "bf16"]
    return ["f32"]


def expect_dtype_refusal(case, config):
    status, message = supports(case, config)
    assert status == UNSUPPORTED and case.x_dtype in message and "only" in message, message


def test_config_list_is_the_swept_one():
    pr.check_swept_configs(NAME, [row.values[2] for row in ROWS])


def suite_case(shape, layout, config):
    """The sweep's case for a suite shape in `layout`, in a dtype the configuration is built for (refusals of
    other dtypes: test_depthwise_kernels_every_dtype)."""
    k = list(SHAPES).index(shape)
    case = lk_case(variant_of(k, SHAPES[shape], layout), config)
    if case.x_dtype not in dtypes_of(config):
        dtype = dtypes_of(config)[k % len(dtypes_of(config))]
        case = case.with_(x_dtype=dtype, y_dtype=dtype)
    return case


@pytest.mark.parametrize("shape,layout,config", ROWS)
def test_suite_shapes_every_config(shape, layout, config, rng):
    """The configuration computes the shape, or refuses it by its own limits: map quads need 2+ maps per
    group, the NHWC kernels depthwise NHWC with C % 4 == 0, the NCHW ones a channel per group in NCHW, the
    large-filter ones depthwise without dilation, plane a plane that fits, plane_mm planes of at most 64
    positions, rows_mm filter rows as matrices that fit, taps13 / taps fp32 filters 13 / 9+ wide. (That each configuration computes
    some of the shapes: test_every_config_takes_suite_shapes.)"""
    pr.skip_unless_available(NAME)
    case = suite_case(shape, layout, config)
    try:
        pr.check_config(NAME, config, case, rng)
    except ConvUnsupportedError as exc:
        assert any(words in str(exc) for words in ("maps per group", "NHWC depthwise", "NCHW depthwise",
                                                   "depthwise layers (groups = C = M)", "no dilation",
                                                   "stages whole planes", "as a matrix", "as matrices",
                                                   "taps wide")), str(exc)


def test_every_config_takes_suite_shapes():
    """No configuration refuses the whole sweep (its rows above would then test refusals alone)."""
    pr.skip_unless_available(NAME)
    taken = {}
    for row in ROWS:
        shape, layout, config = row.values
        status, _ = supports(suite_case(shape, layout, config), config)
        taken[config] = taken.get(config, 0) + (status == 0)
    assert all(taken.values()), [config for config, n in taken.items() if not n]


# Depthwise shapes for the depthwise kernels' paths (C % 8 == 0 takes 8-channel vectors in f16 / bf16).
DW_SHAPES = {
    "3x3_s1_c40": ConvCase(2, 40, 13, 11, 40, 3, 3, padding=(1, 1), groups=40),
    "3x3_s2_c24": ConvCase(1, 24, 15, 17, 24, 3, 3, stride=(2, 2), padding=(1, 1), groups=24),
    "3x3_valid_c8": ConvCase(1, 8, 9, 10, 8, 3, 3, groups=8),
    "5x5_s1_c16": ConvCase(1, 16, 11, 9, 16, 5, 5, padding=(2, 2), groups=16),
    "5x5_s2_c48": ConvCase(1, 48, 14, 13, 48, 5, 5, stride=(2, 2), padding=(2, 2), groups=48),
    "7x7_s1_c8": ConvCase(2, 8, 9, 10, 8, 7, 7, padding=(3, 3), groups=8),
    # 264 channels: 3 channel blocks of 11 vectors of 8 (or 22 of 4); narrow f16 / bf16: 132
    # vectors, no sector-sized block divides them, 9 blocks of up to 15 (the last one short).
    "7x7_plane7_c264": ConvCase(1, 264, 7, 7, 264, 7, 7, padding=(3, 3), groups=264),
    # 144 channels: 2 blocks of 9 vectors of 8 (or 18 of 4); narrow f16 / bf16: 9 blocks of 8 vectors
    # (32 bytes).
    "3x3_plane6x5_c144": ConvCase(1, 144, 6, 5, 144, 3, 3, padding=(1, 1), groups=144),
    "3x3_c12_4wide": ConvCase(1, 12, 9, 8, 12, 3, 3, padding=(1, 1), groups=12),
    "7x7_s2_generic": ConvCase(1, 16, 12, 11, 16, 7, 7, stride=(2, 2), padding=(3, 3), groups=16),
    "3x5_dil2_generic": ConvCase(1, 8, 10, 12, 8, 3, 5, padding=(2, 4), dilation=(2, 2), groups=8),
    "3x3_s2_multiplier2": ConvCase(1, 6, 11, 13, 12, 3, 3, stride=(2, 2), padding=(1, 1), groups=6),
    # Planes of several tiles (the nchw_t* kernels: 32, 16 and 8 outputs a side), 12 planes (blocks of 2,
    # 8 and 32 planes, the last one part empty)
    "7x7_plane40x37_c4": ConvCase(3, 4, 40, 37, 4, 7, 7, padding=(3, 3), groups=4),
    "5x5_s2_plane70x67_c4": ConvCase(1, 4, 70, 67, 4, 5, 5, stride=(2, 2), padding=(2, 2), groups=4),
    # W % 4 == 0 and padding K / 2: fp32 staged by 16-byte copies from the vector boundary left of the window
    "7x7_plane36x44_c8": ConvCase(2, 8, 36, 44, 8, 7, 7, padding=(3, 3), groups=8),
    "5x5_s2_plane33x36_c4": ConvCase(1, 4, 33, 36, 4, 5, 5, stride=(2, 2), padding=(2, 2), groups=4),
    # The most taps the NHWC kernel stages (93 x (128 + 4 padding) floats: all but 48 bytes of 48 KB).
    "3x31_c128_most_taps": ConvCase(1, 128, 5, 34, 128, 3, 31, padding=(1, 15), groups=128),
}
DW_ROWS = [pytest.param(shape, dtype, config, id=f"{shape}-{dtype}-{config}")
           for shape in DW_SHAPES for dtype in DTYPES for config in NHWC_CONFIGS + NCHW_CONFIGS]


@pytest.mark.parametrize("shape,dtype,config", DW_ROWS)
def test_depthwise_kernels_every_dtype(shape, dtype, config, rng):
    """Each depthwise configuration on its layout, every dtype, bias + ReLU on every other shape."""
    pr.skip_unless_available(NAME)
    k = list(DW_SHAPES).index(shape)
    layout = "NHWC" if config.startswith("nhwc") else "NCHW"
    case = DW_SHAPES[shape].with_(x_layout=layout, y_layout=layout, w_layout="MKKC" if k % 2 else "MCKK",
                                  x_dtype=dtype, y_dtype=dtype, bias=bool(k % 2),
                                  epilogue="relu" if k % 2 else "none")
    if layout == "NHWC" and case.M != case.C:
        status, message = supports(case, config)
        assert status == UNSUPPORTED and "groups == C == M" in message, message
        return
    if dtype not in dtypes_of(config):
        expect_dtype_refusal(case, config)
        return
    pr.check_config(NAME, config, case, rng)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("config", ["nchw_t32x32"])
def test_nchw_tiles_loop_over_many_tile_groups(config, dtype, rng):
    """More tile groups than a wave of blocks (512 planes of 80 x 80): each persistent block loops over
    several, the next windows copied in (f32: cp.async) while one is multiplied."""
    pr.skip_unless_available(NAME)
    case = ConvCase(8, 64, 80, 80, 64, 5, 5, padding=(2, 2), groups=64, x_dtype=dtype, y_dtype=dtype, bias=True,
                    epilogue="relu")
    pr.check_config(NAME, config, case, rng)


@pytest.mark.parametrize("x_dtype,y_dtype", [("f16", "f32"), ("bf16", "bf16"), ("f32", "f16")])
@pytest.mark.parametrize("config", ["m1_t32x32_p8", "m4_t32x16", "m8_t32x16", "m8x2_t16x16", "m4_t8x8_k4"])
def test_fp32_tiles_refuse_other_dtypes_and_default_avoids_them(config, x_dtype, y_dtype, rng):
    """Tiles built for fp32 alone refuse other dtypes by name; the default then takes a tile built for
    them, which computes the layer right."""
    pr.skip_unless_available(NAME)
    case = SHAPES["resnext_g8_cg4"].with_(x_dtype=x_dtype, y_dtype=y_dtype, bias=True)
    status, message = supports(case, config)
    assert status == UNSUPPORTED and f"x {x_dtype}, y {y_dtype}" in message, message
    assert default_of(case) in ALL_DTYPE_TILES
    pr.check_config(NAME, default_of(case), case, rng)


@pytest.mark.parametrize("x_dtype,y_dtype", [("f16", "f32"), ("f32", "bf16")])
@pytest.mark.parametrize("config", NCHW_CONFIGS)
def test_nchw_depthwise_mixed_dtypes(config, x_dtype, y_dtype, rng):
    """x and y of different dtypes: the generic kernel, with bias + ReLU."""
    pr.skip_unless_available(NAME)
    case = DW_SHAPES["3x3_s1_c40"].with_(x_dtype=x_dtype, y_dtype=y_dtype, bias=True, epilogue="relu")
    pr.check_config(NAME, config, case, rng)


@pytest.mark.parametrize("config", ["m1_t16x16", "m4_t8x8", "m8_t32x16", "m8x2_t16x16"])
@pytest.mark.parametrize("width,offset", [(16, 0), (16, 1), (16, 2), (18, 0), (18, 1), (17, 0)])
def test_fp32_window_copies_of_each_width(width, offset, config, rng):
    """The fp32 NCHW tiles stage their windows in copies of 4 elements where x's rows (W) and x are 16-byte
    aligned, 2 where 8-byte, else 1, each copy starting a multiple of its width from the row's start: every
    width, with x placed 0, 1 or 2 elements past an aligned start, at strides 1 and 2 (the window's first
    column 1 before a copy boundary)."""
    pr.skip_unless_available(NAME)
    for stride in (1, 2):
        case = ConvCase(2, 32, 13, width, 32, 3, 3, stride=(stride, stride), padding=(1, 1), groups=2, bias=True,
                        epilogue="relu")
        pr.check_config(NAME, config, case, rng, x_offset=offset)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", NHWC_CONFIGS)
@pytest.mark.parametrize("offset", [1, 4])
def test_nhwc_misaligned_operands_fall_back(offset, config, dtype, rng):
    """x and y one element past an aligned start: the configuration runs the tiled kernel instead; four
    elements past it (8 bytes in f16 / bf16): the 4-channel vectors instead of the 8-channel ones."""
    pr.skip_unless_available(NAME)
    case = DW_SHAPES["3x3_s1_c40"].with_(x_layout="NHWC", y_layout="NHWC", x_dtype=dtype, y_dtype=dtype,
                                         bias=True, epilogue="relu")
    if dtype not in dtypes_of(config):
        expect_dtype_refusal(case, config)
        return
    pr.check_config(NAME, config, case, rng, x_offset=offset, y_offset=offset)


@pytest.mark.parametrize("config", NHWC_CONFIGS)
def test_nhwc_blocks_loop_over_tiles(config, rng):
    """A grid of at most a few waves whose blocks loop over the rest of the tiles (depthwise_nhwc.cu's
    DW_WAVES): 512 channels (fp32, or f16 for the narrow configurations) make 4-32 channel blocks, which leave each of them a few hundred tile
    blocks on an H100 (fewer on smaller GPUs), so that on 136 x 136 planes the blocks of most
    configurations take more than one tile each."""
    pr.skip_unless_available(NAME)
    dtype = dtypes_of(config)[0]
    case = ConvCase(2, 512, 136, 136, 512, 3, 3, padding=(1, 1), groups=512, x_layout="NHWC", y_layout="NHWC",
                    w_layout="MKKC", x_dtype=dtype, y_dtype=dtype, bias=True, epilogue="relu")
    pr.check_config(NAME, config, case, rng)


# Large filters (depthwise_large.cu, the lk_q* configurations): RepLKNet's square filters, SLaK's bands (the
# tall ones slide down columns), InceptionNeXt's 1 x K / K x 1, at strides 1-3, planes that no strip of 8 or 16
# divides, padding other than K / 2 (less, more, uneven), a filter wider than the plane, channel counts that
# leave a block's last channels empty (NHWC blocks take 8 / 16 channels), and planes tall enough that a block
# takes part of one (a window of the whole plane would not fit its shared memory).
LK_SHAPES = {
    "31x31_c6": ConvCase(2, 6, 33, 29, 6, 31, 31, padding=(15, 15), groups=6),
    "51x5_c5": ConvCase(1, 5, 40, 23, 5, 51, 5, padding=(25, 2), groups=5),
    "5x51_c9": ConvCase(2, 9, 21, 45, 9, 5, 51, padding=(2, 25), groups=9),
    "13x13_s2_c10": ConvCase(1, 10, 29, 30, 10, 13, 13, stride=(2, 2), padding=(6, 6), groups=10),
    "11x1_c12": ConvCase(3, 12, 19, 14, 12, 11, 1, padding=(5, 0), groups=12),
    "1x11_c12": ConvCase(2, 12, 15, 26, 12, 1, 11, padding=(0, 5), groups=12),
    "9x14_s3x2_uneven": ConvCase(1, 7, 31, 37, 7, 9, 14, stride=(3, 2), padding=(2, 7), extra=(1, 2), groups=7),
    # row stride 2, column stride 1 (plane's runs of outputs: one a thread at B = 2; runs of 4, the last
    # past the row's end, at B = 5 in test_large_filter_kernel_many_blocks)
    "11x7_s2x1_uneven": ConvCase(2, 5, 17, 13, 5, 11, 7, stride=(2, 1), padding=(5, 3), extra=(0, 1), groups=5),
    "27x27_wider_than_plane": ConvCase(2, 17, 7, 9, 17, 27, 27, padding=(13, 13), groups=17),
    "63x63_valid_c3": ConvCase(1, 3, 70, 66, 3, 63, 63, groups=3),
    "31x31_tall_plane_c2": ConvCase(1, 2, 300, 41, 2, 31, 31, padding=(15, 15), groups=2),
    # row stride 2 over bands of rows (35 output rows of 4 planes: bands of 8, the last of 3)
    "11x7_s2x1_bands_c4": ConvCase(1, 4, 70, 33, 4, 11, 7, stride=(2, 1), padding=(5, 3), groups=4),
    "3x3_c20": ConvCase(2, 20, 12, 17, 20, 3, 3, padding=(1, 1), groups=20),
    # rows of 56 outputs: lk_q8's 7 strips of 8 in two tiles of 4, the last strip wholly past the row
    "31x31_rows_of_56_c3": ConvCase(1, 3, 18, 56, 3, 31, 31, padding=(15, 15), groups=3),
}
LK_LAYOUTS = [("NCHW", "NCHW"), ("NHWC", "NHWC"), ("NHWC", "NCHW"), ("NCHW", "NHWC")]


# The kernels for large filters: the window-staging lk_q* (depthwise_large.cu) and plane / plane_r8, which
# stage whole planes (depthwise_small_plane.cu; the 300 x 41 plane of one image takes 53 KB: past the 48 KB of
# a launch that does not opt in; of four images, too many).
LK_CONFIGS = ["lk_q16", "lk_q8", "plane", "plane_r8"]


def lk_case(case, config):
    """plane_r8 from batch 4 (runs of 8 outputs for 4 images) takes f16 / bf16 x only
    (test_refusals_name_the_reason): its cases of 4 images or more take f16 x where they were fp32."""
    if config == "plane_r8" and case.B >= 4 and case.x_dtype == "f32":
        return case.with_(x_dtype="f16")
    return case


@pytest.mark.parametrize("config", LK_CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LK_SHAPES)
def test_large_filter_kernel(shape, dtype, config, rng):
    """Every large-filter shape in every dtype, the layouts cycling over the shapes (x and y in either),
    bias + ReLU on every other one. Batches of 1-3 split planes into bands of rows where channels are few
    (the 300 x 41 plane of 2 channels: 38 bands of 8 rows)."""
    pr.skip_unless_available(NAME)
    k = list(LK_SHAPES).index(shape)
    x_layout, y_layout = LK_LAYOUTS[(k + DTYPES.index(dtype)) % len(LK_LAYOUTS)]
    case = LK_SHAPES[shape].with_(x_layout=x_layout, y_layout=y_layout, w_layout="MKKC" if k % 2 else "MCKK",
                                  x_dtype=dtype, y_dtype=dtype, bias=bool(k % 2), epilogue="relu" if k % 2 else "none")
    if config == "plane_r8" and k % 2:  # every other shape at 5 images: plane_r8's runs for 4 images, then 1
        case = lk_case(case.with_(B=max(case.B, 5)), config)
    pr.check_config(NAME, config, case, rng)


def test_plane_stages_large_planes_of_four_images(rng):
    """RepLKNet's first stage in small: four images of a 57 x 53 plane take 48 KB and the 31x31 filter 4 KB, past
    what a launch gets without opting in; the fifth image is a group of one."""
    pr.skip_unless_available(NAME)
    case = ConvCase(5, 3, 57, 53, 3, 31, 31, padding=(15, 15), groups=3, bias=True, epilogue="relu")
    for config in ("plane", "plane_r8"):
        pr.check_config(NAME, config, lk_case(case, config), rng)
        pr.check_config(NAME, config, case.with_(x_layout="NHWC", y_layout="NHWC", w_layout="MKKC", x_dtype="bf16",
                                                 y_dtype="bf16"), rng)


def test_plane_refuses_planes_past_its_shared_memory():
    """Whole planes of 4 images (batch 4 or more; 1 below) and the filter in at most 110 KB: a 56 x 56 plane fits,
    a 96 x 96 one (149 KB: rows of 97 positions) does not, and the refusal says why."""
    pr.skip_unless_available(NAME)
    case = ConvCase(4, 8, 96, 96, 8, 31, 31, padding=(15, 15), groups=8)
    status, message = supports(case, "plane")
    assert status == UNSUPPORTED and "stages whole planes" in message and "110 KB" in message, message
    assert supports(case.with_(H=56, W=56), "plane")[0] == 0
    assert supports(case.with_(B=1), "plane")[0] == 0  # one image: 41 KB


@pytest.mark.parametrize("x_dtype,y_dtype", [("f16", "f32"), ("f32", "bf16"), ("bf16", "f16")])
def test_large_filter_kernel_mixed_dtypes(x_dtype, y_dtype, rng):
    """y (and bias) in another dtype than x: the store converts."""
    pr.skip_unless_available(NAME)
    case = LK_SHAPES["13x13_s2_c10"].with_(x_dtype=x_dtype, y_dtype=y_dtype, bias=True, epilogue="relu")
    for config in LK_CONFIGS:
        pr.check_config(NAME, config, lk_case(case, config), rng)


def test_large_filter_kernel_many_blocks(rng):
    """Enough images and channels that blocks take several channels and the grid is many waves; plane with
    full and partial groups of four images, and its runs of four outputs at row stride 2."""
    pr.skip_unless_available(NAME)
    case = ConvCase(16, 96, 14, 14, 96, 27, 27, padding=(13, 13), groups=96, x_layout="NHWC", y_layout="NHWC",
                    w_layout="MKKC", x_dtype="bf16", y_dtype="bf16", bias=True)
    pr.check_config(NAME, "lk_q16", case, rng)
    pr.check_config(NAME, "lk_q8", case.with_(x_layout="NCHW", y_layout="NCHW", x_dtype="f32", y_dtype="f32"), rng)
    pr.check_config(NAME, "plane", case, rng)
    pr.check_config(NAME, "plane", case.with_(B=6, x_layout="NCHW", y_layout="NCHW", x_dtype="f32", y_dtype="f32"), rng)
    pr.check_config(NAME, "plane", case.with_(B=3, y_layout="NCHW", x_dtype="f16", y_dtype="f32"), rng)
    pr.check_config(NAME, "plane", LK_SHAPES["11x7_s2x1_uneven"].with_(B=5, bias=True, epilogue="relu"), rng)
    pr.check_config(NAME, "plane_r8", case.with_(B=7, C=40, M=40, groups=40), rng)
    pr.check_config(NAME, "plane_r8", case.with_(B=9, x_layout="NCHW", y_layout="NCHW", x_dtype="f16", y_dtype="f32"),
                    rng)
    pr.check_config(NAME, "plane_r8", lk_case(LK_SHAPES["11x7_s2x1_uneven"].with_(bias=True, epilogue="relu"),
                                              "plane_r8"), rng)


# The large-filter kernels on non-finite operands, taps13 / taps (filters 13 wide, and 9 or more) among them.
NON_FINITE_CONFIGS = LK_CONFIGS + ["taps13", "taps"]


@pytest.mark.parametrize("config", NON_FINITE_CONFIGS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("batch", [2, 5])
def test_large_filter_kernel_places_nan_and_inf_as_the_oracle(batch, layout, config, rng):
    """A NaN, a +Inf and a -Inf in x reach exactly the outputs whose windows hold them (NaN where +Inf and
    -Inf meet, or Inf times a zero weight), as in the float64 oracle; every other output stays finite. At batch
    5 plane stages a position's four images at once, then the fifth alone: the bad values sit in images of both
    groups."""
    pr.skip_unless_available(NAME)
    kw = 13 if config == "taps13" else 15
    case = lk_case(ConvCase(batch, 3, 30, 27, 3, 11, kw, padding=(5, kw // 2), groups=3, x_layout=layout,
                            y_layout=layout, bias=True), config)
    x, w, bias = pr.random_operands(case, rng)
    b_nan, b_inf, b_neg = (0, 1, 1) if batch == 2 else (1, 3, 4)
    x[b_nan, 1, 4, 20] = np.nan
    x[b_inf, 2, 17, 3] = np.inf
    x[b_neg, 2, 25, 10] = -np.inf
    ref = pr.check_config_non_finite(NAME, config, case, x, w, bias)
    assert np.isnan(ref).sum() >= 100 and np.isinf(ref).sum() >= 50  # the bad values reach many outputs


@pytest.mark.parametrize("config", NON_FINITE_CONFIGS)
def test_large_filter_kernel_inf_weight_on_padding(config, rng):
    """An Inf weight makes every output whose window puts it on x's zero padding NaN (0 * Inf), as in the
    oracle and PyTorch: the kernel skips padding taps only where the block's weights are all finite. The
    other channels (finite weights, padding skipped) stay as the oracle has them."""
    pr.skip_unless_available(NAME)
    kw = 13 if config == "taps13" else 27
    case = lk_case(ConvCase(2, 20, 14, 15, 20, 27, kw, padding=(13, kw // 2), groups=20, bias=True), config)
    x, w, bias = pr.random_operands(case, rng, low=0.5, high=1.0)  # positive: Inf * x never meets -Inf
    w[3, 0, 0, kw - 1] = np.inf  # the top-right tap: on padding for all outputs but a few of row 13 ((13, 0) and
    # (13, 1) of the 27x27, (13, 0) .. (13, 8) of the 27x13)
    ref = pr.check_config_non_finite(NAME, config, case, x, w, bias)
    assert np.isnan(ref[:, 3]).sum() > 0 and not np.isnan(np.delete(ref, 3, axis=1)).any()


# plane_mm (depthwise_plane_matrix.cu): planes of at most 64 positions in and out as a matrix product a channel.
# Filters that cover the plane (every tap of A met) and ones that do not (zeros in A), strides, uneven and no
# padding, bands, a filter wider than the plane, one position, images past a block's 32 and groups of 4 that
# the batch leaves part empty, output positions that no group of 4 divides.
MM_SHAPES = {
    "13x13_plane7_b5": ConvCase(5, 6, 7, 7, 6, 13, 13, padding=(6, 6), groups=6),
    "7x7_plane7_b33": ConvCase(33, 3, 7, 7, 3, 7, 7, padding=(3, 3), groups=3),
    "3x3_s2_plane8": ConvCase(3, 5, 8, 8, 5, 3, 3, stride=(2, 2), padding=(1, 1), groups=5),
    "5x3_s2x1_uneven": ConvCase(2, 4, 6, 9, 4, 5, 3, stride=(2, 1), padding=(2, 1), extra=(1, 0), groups=4),
    "1x11_plane4x16": ConvCase(7, 8, 4, 16, 8, 1, 11, padding=(0, 5), groups=8),
    "31x31_wider_than_plane": ConvCase(2, 3, 5, 7, 3, 31, 31, padding=(15, 15), groups=3),
    "3x3_valid_plane8": ConvCase(4, 7, 8, 8, 7, 3, 3, groups=7),
    "13x13_plane1": ConvCase(3, 9, 1, 1, 9, 13, 13, padding=(6, 6), groups=9),
    "9x9_s3_plane7x9": ConvCase(36, 2, 7, 9, 2, 9, 9, stride=(3, 3), padding=(4, 4), groups=2),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", MM_SHAPES)
def test_plane_matrix_kernel(shape, dtype, rng):
    """Every plane_mm shape in every dtype, the layouts cycling (x and y in either), bias + ReLU on every other
    one, y in another dtype than x on every third."""
    pr.skip_unless_available(NAME)
    k = list(MM_SHAPES).index(shape)
    x_layout, y_layout = LK_LAYOUTS[(k + DTYPES.index(dtype)) % len(LK_LAYOUTS)]
    y_dtype = DTYPES[(DTYPES.index(dtype) + 1) % len(DTYPES)] if k % 3 == 0 else dtype
    case = MM_SHAPES[shape].with_(x_layout=x_layout, y_layout=y_layout, w_layout="MKKC" if k % 2 else "MCKK",
                                  x_dtype=dtype, y_dtype=y_dtype, bias=bool(k % 2), epilogue="relu" if k % 2 else "none")
    pr.check_config(NAME, "plane_mm", case, rng)


# rows_mm (depthwise_row_matrices.cu): a plane's output rows as matrix products with the filter's rows laid out as
# Toeplitz matrices, f32 x. MixNet-M's 9x9 and a 13x13 at stride 2 (what it is for), UniRepLKNet's 13x13 on 14x14
# with images past a block's 32, RepLKNet's 29x29 on 28x28 (16 images a block, 7 output quads a row), 27x27 on
# 14x14, strides and uneven padding, bands, rows of outputs that no quad divides, no padding, a filter wider than
# the plane, one position, a batch that leaves image quads part empty.
RM_SHAPES = {
    "9x9_s2_plane14_b33": ConvCase(33, 3, 14, 14, 3, 9, 9, stride=(2, 2), padding=(4, 4), groups=3),
    "13x13_s2_plane28": ConvCase(5, 2, 28, 28, 2, 13, 13, stride=(2, 2), padding=(6, 6), groups=2),
    "13x13_plane14_b33": ConvCase(33, 3, 14, 14, 3, 13, 13, padding=(6, 6), groups=3),
    "29x29_plane28_b3": ConvCase(3, 2, 28, 28, 2, 29, 29, padding=(14, 14), groups=2),
    "27x27_plane14_b17": ConvCase(17, 2, 14, 14, 2, 27, 27, padding=(13, 13), groups=2),
    "13x13_s2_uneven": ConvCase(6, 4, 15, 13, 4, 13, 13, stride=(2, 2), padding=(6, 5), extra=(1, 0), groups=4),
    "5x13_s1x2_band": ConvCase(9, 5, 9, 21, 5, 5, 13, stride=(1, 2), padding=(2, 6), groups=5),
    "7x7_valid_plane12x10": ConvCase(4, 3, 12, 10, 3, 7, 7, groups=3),
    "1x11_plane6x23": ConvCase(5, 6, 6, 23, 6, 1, 11, padding=(0, 5), groups=6),
    "31x31_wider_than_plane": ConvCase(2, 3, 5, 7, 3, 31, 31, padding=(15, 15), groups=3),
    "13x13_plane1": ConvCase(3, 9, 1, 1, 9, 13, 13, padding=(6, 6), groups=9),
    "9x9_s3_plane19x30": ConvCase(2, 2, 19, 30, 2, 9, 9, stride=(3, 3), padding=(4, 4), groups=2),
}


@pytest.mark.parametrize("y_dtype", DTYPES)
@pytest.mark.parametrize("shape", RM_SHAPES)
def test_row_matrix_kernel(shape, y_dtype, rng):
    """Every rows_mm shape with f32 x and y in every dtype, the layouts cycling (x and y in either), bias + ReLU on
    every other one."""
    pr.skip_unless_available(NAME)
    k = list(RM_SHAPES).index(shape)
    x_layout, y_layout = LK_LAYOUTS[(k + DTYPES.index(y_dtype)) % len(LK_LAYOUTS)]
    case = RM_SHAPES[shape].with_(x_layout=x_layout, y_layout=y_layout, w_layout="MKKC" if k % 2 else "MCKK",
                                  y_dtype=y_dtype, bias=bool(k % 2), epilogue="relu" if k % 2 else "none")
    pr.check_config(NAME, "rows_mm", case, rng)


# taps13 / taps (depthwise_row_taps.cu): rows of 13 taps unrolled whole / of any width from 9, f32 x, 4 outputs a
# thread. UniRepLKNet's 13x13 on 28x28 at batch 1 (bands of a plane), on 14x14 and 7x7 (the filter wider than the
# plane), SLaK-like 5x13 and 31x13 bands, row stride 2, no padding, uneven padding, rows of outputs no quad divides,
# rows of 700 (a window of 37 KB, one output row a band), several channels a block with the last group part empty
# (301 channels of 7x7 at batch 4). taps alone: rows whose last group of 4 taps has 1, 2, 3 or 4 (SLaK's 5x49 and
# 5x51, 9x9, 3x10, 27x27, a 1x12 row, an even width with "same" padding).
TT_SHAPES = {
    "13x13_plane28_c5": ConvCase(1, 5, 28, 28, 5, 13, 13, padding=(6, 6), groups=5),
    "13x13_plane14_b3": ConvCase(3, 7, 14, 14, 7, 13, 13, padding=(6, 6), groups=7),
    "13x13_plane7_b2": ConvCase(2, 9, 7, 7, 9, 13, 13, padding=(6, 6), groups=9),
    "5x13_band": ConvCase(1, 4, 9, 21, 4, 5, 13, padding=(2, 6), groups=4),
    "31x13_tall": ConvCase(2, 3, 40, 17, 3, 31, 13, padding=(15, 6), groups=3),
    "13x13_s2x1": ConvCase(2, 4, 29, 30, 4, 13, 13, stride=(2, 1), padding=(6, 6), groups=4),
    "13x13_valid_plane20x31": ConvCase(1, 3, 20, 31, 3, 13, 13, groups=3),
    "13x13_uneven": ConvCase(2, 3, 17, 19, 3, 13, 13, padding=(3, 9), extra=(2, 1), groups=3),
    "13x13_rows_of_700": ConvCase(1, 2, 9, 700, 2, 13, 13, padding=(6, 6), groups=2),
    "13x13_c301_b4": ConvCase(4, 301, 7, 7, 301, 13, 13, padding=(6, 6), groups=301),
    "5x49_plane28": ConvCase(1, 6, 28, 29, 6, 5, 49, padding=(2, 24), groups=6),
    "5x51_plane30_b2": ConvCase(2, 3, 30, 33, 3, 5, 51, padding=(2, 25), groups=3),
    "9x9_plane14": ConvCase(1, 5, 14, 14, 5, 9, 9, padding=(4, 4), groups=5),
    "3x10_same": ConvCase(2, 4, 11, 23, 4, 3, 10, padding=(1, 4), extra=(0, 1), groups=4),
    "27x27_plane14_s2x1": ConvCase(1, 3, 14, 15, 3, 27, 27, stride=(2, 1), padding=(13, 13), groups=3),
    "1x12_row": ConvCase(3, 5, 6, 40, 5, 1, 12, padding=(0, 3), groups=5),
    "11x11_plane17": ConvCase(1, 7, 17, 18, 7, 11, 11, padding=(5, 5), groups=7),
    # the staging's walk of the window with no padding columns, and with a padding of 4
    "13x13_valid_w32": ConvCase(2, 3, 20, 32, 3, 13, 13, groups=3),
    "9x9_pad4_w24": ConvCase(1, 4, 16, 24, 4, 9, 9, padding=(4, 4), groups=4),
}
TT_ROWS = [pytest.param(shape, config, id=f"{shape}-{config}") for config in ("taps13", "taps") for shape in TT_SHAPES
           if config == "taps" or TT_SHAPES[shape].KW == 13]


@pytest.mark.parametrize("y_dtype", DTYPES)
@pytest.mark.parametrize("shape, config", TT_ROWS)
def test_row_taps_kernel(shape, config, y_dtype, rng):
    """Every taps13 / taps shape with f32 x and y in every dtype, the layouts cycling (x and y in either), bias +
    ReLU on every other one."""
    pr.skip_unless_available(NAME)
    k = list(TT_SHAPES).index(shape)
    x_layout, y_layout = LK_LAYOUTS[(k + DTYPES.index(y_dtype)) % len(LK_LAYOUTS)]
    case = TT_SHAPES[shape].with_(x_layout=x_layout, y_layout=y_layout, w_layout="MKKC" if k % 2 else "MCKK",
                                  y_dtype=y_dtype, bias=bool(k % 2), epilogue="relu" if k % 2 else "none")
    pr.check_config(NAME, config, case, rng)


# The matrix kernels (plane_mm, rows_mm) on non-finite operands: a block with an Inf or NaN sums each output over
# the filter's taps instead of through its matrices. The plane, the places of a NaN, a +Inf and a -Inf in x.
MATRIX_NAN_CASES = {
    "plane_mm": (ConvCase(2, 4, 7, 8, 4, 5, 3, padding=(2, 1), groups=4, bias=True), [(0, 1, 0, 0), (1, 2, 3, 7),
                                                                                         (1, 2, 5, 6)]),
    "rows_mm": (ConvCase(2, 4, 14, 15, 4, 9, 7, padding=(4, 3), groups=4, bias=True), [(0, 1, 0, 0), (1, 2, 6, 14),
                                                                                          (1, 2, 13, 3)]),
}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("config", MATRIX_NAN_CASES)
def test_matrix_kernels_place_nan_and_inf_as_the_oracle(config, layout, rng):
    """A NaN, a +Inf and a -Inf in x reach exactly the outputs whose windows hold them, as in the float64
    oracle (through the matrices a zero times Inf would be NaN); the other channels' blocks stay finite and
    exact."""
    pr.skip_unless_available(NAME)
    case, places = MATRIX_NAN_CASES[config]
    case = case.with_(x_layout=layout, y_layout=layout)
    x, w, bias = pr.random_operands(case, rng)
    for at, value in zip(places, (np.nan, np.inf, -np.inf)):
        x[at] = value
    ref = pr.check_config_non_finite(NAME, config, case, x, w, bias)
    assert np.isnan(ref).sum() >= 6 and np.isinf(ref).sum() >= 4 and np.isfinite(ref[:, 1][1]).all()


@pytest.mark.parametrize("config,plane,meets_x", [
    ("plane_mm", 7, 1),    # 13x13 on 7x7: the top-right tap meets x only under output (6, 0)
    ("rows_mm", 14, 64),   # on 14x14: under the outputs of rows >= 6 and columns <= 7
])
def test_matrix_kernels_inf_weight_on_padding(config, plane, meets_x, rng):
    """An Inf weight makes every output whose window puts it on x's zero padding NaN (0 * Inf), as in PyTorch,
    and the others Inf: the matrices hold only the taps that meet x, so a block with a non-finite weight sums
    over every tap."""
    pr.skip_unless_available(NAME)
    case = ConvCase(2, 6, plane, plane, 6, 13, 13, padding=(6, 6), groups=6, bias=True)
    x, w, bias = pr.random_operands(case, rng, low=0.5, high=1.0)  # positive: Inf * x never meets -Inf
    w[3, 0, 0, 12] = np.inf  # the top-right tap
    ref = pr.check_config_non_finite(NAME, config, case, x, w, bias)
    assert np.isinf(ref[:, 3]).sum() == 2 * meets_x and np.isnan(ref[:, 3]).sum() == 2 * (plane * plane - meets_x)
    assert not np.isnan(np.delete(ref, 3, axis=1)).any()


def default_of(case):
    """The configuration grouped_direct's plan for the case takes when none is named."""
    return pr.default_config(NAME, case)


def test_default_config_per_shape():
    pr.skip_unless_available(NAME)
    nhwc = dict(x_layout="NHWC", y_layout="NHWC")
    # Small grids (fewer than 32768 16-byte vectors over the output): 4-byte vectors, one pixel each.
    assert default_of(SHAPES["mbv2_3x3_s1"].with_(**nhwc)) == "nhwc_narrow_p1_t128"
    assert default_of(SHAPES["convnext_7x7_tiny"].with_(**nhwc)) == "nhwc_narrow_p1_t128"
    assert default_of(ConvCase(4, 64, 28, 28, 64, 3, 3, padding=(1, 1), groups=64, x_dtype="f16", y_dtype="f16",
                               **nhwc)) == "nhwc_narrow_p1_t128"  # 25088 vectors of 8 channels
    # Larger ones, fp32: 16-byte vectors in strips that fit the plane's width.
    assert default_of(ConvCase(8, 64, 30, 30, 64, 3, 3, padding=(1, 1), groups=64, **nhwc)) == "nhwc_p4_t128"
    assert default_of(ConvCase(32, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=64, **nhwc)) == "nhwc_p2_t128"
    assert default_of(ConvCase(64, 128, 7, 7, 128, 7, 7, padding=(3, 3), groups=128, **nhwc)) == "nhwc_r2p2_t128"
    # f16 / bf16: 4-byte vectors in tall tiles, by filter and stride.
    half = dict(nhwc, x_dtype="f16", y_dtype="f16")
    assert default_of(ConvCase(16, 64, 30, 30, 64, 3, 3, padding=(1, 1), groups=64, **half)) == "nhwc_narrow_r4p2_t128"
    assert default_of(ConvCase(64, 64, 20, 20, 64, 3, 3, stride=(2, 2), padding=(1, 1), groups=64,
                               **half)) == "nhwc_narrow_r2p2_t128"
    assert default_of(ConvCase(64, 128, 7, 7, 128, 5, 5, padding=(2, 2), groups=128,
                               **dict(half, x_dtype="bf16", y_dtype="bf16"))) == "nhwc_narrow_r4p4_t128"
    assert default_of(SHAPES["convnext_7x7"]) == "nchw_t32x32"  # 5x5 / 7x7 NCHW depthwise, 24+ columns
    assert default_of(DW_SHAPES["5x5_s2_plane70x67_c4"]) == "nchw_t32x32"  # also at stride 2 (34 columns)
    assert default_of(SHAPES["effnet_5x5_s2"]) == "nchw_r7"  # 14 columns: the plain kernel, bands of 7 rows
    assert default_of(SHAPES["convnext_7x7"].with_(y_dtype="f16")) == "m1_t16x16"  # mixed dtypes: built there
    assert default_of(ConvCase(1, 8, 30, 32, 8, 5, 5, padding=(4, 4), dilation=(2, 2),
                               groups=8)) == "m1_t32x32_p8"  # dilated: no kernel of its own in the nchw_t tiles
    assert default_of(SHAPES["convnext_7x7_tiny"]) == "nchw_r7"  # 7x7 plane: one band of 7 rows
    assert default_of(SHAPES["mbv2_3x3_s2"]) == "nchw_r4"  # stride 2, 12 output rows
    assert default_of(SHAPES["resnext_g8_cg4"]) == "m4_t16x16"
    assert default_of(SHAPES["resnext_g4_cg16"]) == "m8x2_t16x16"  # 16 maps a group: two slices share a window
    assert default_of(SHAPES["resnext_g2_cg32_s2"]) == "m8x4_t8x8"  # 8 output columns
    assert default_of(ConvCase(2, 64, 60, 60, 64, 3, 3, padding=(1, 1), groups=8)) == "m8_t32x16"
    assert default_of(SHAPES["mbv2_3x3_s1"].with_(x_layout="NHWC")) == "m1_t16x16"  # y NCHW: tiled
    # Filters of 9 or more on a side and 64 taps or more: the large-filter kernel, 16 outputs a thread for square filters of 13+ on
    # planes 28+ wide along the sliding side in grids of 64K such threads, else 8.
    big = ConvCase(32, 128, 96, 96, 128, 31, 31, padding=(15, 15), groups=128)  # too large a plane for plane
    assert default_of(big) == "lk_q16"
    assert default_of(big.with_(B=1, H=56, W=56)) == "lk_q8"  # 3584 threads of 16
    assert default_of(big.with_(B=1, W=27, **nhwc)) == "lk_q8"  # 27 columns
    assert default_of(LK_SHAPES["31x31_c6"]) == "lk_q8"
    assert default_of(LK_SHAPES["51x5_c5"].with_(B=512, H=80)) == "lk_q8"  # 5 columns of taps
    assert not default_of(LK_SHAPES["1x11_c12"]).startswith("lk")  # 11 taps: the tiles
    assert not default_of(LK_SHAPES["11x1_c12"].with_(**nhwc)).startswith("lk")
    assert default_of(LK_SHAPES["13x13_s2_c10"].with_(dilation=(2, 2))) == "nchw_r4"  # dilated: the plain kernel
    # Small planes (49 values or 64; 196 or 256 from batch 4 or in NHWC; from batch 4, 784 or 1024, or any that
    # fits where filter rows have 9 taps or more): the small-plane kernel.
    small = ConvCase(32, 768, 7, 7, 768, 13, 13, padding=(6, 6), groups=768)
    assert default_of(small.with_(B=31)) == "plane" and default_of(small.with_(B=1, **nhwc)) == "plane"
    assert default_of(small.with_(**nhwc)) == "plane"
    # fp32 NCHW from batch 32, planes of at most 64 positions: the plane-matrix kernel
    assert default_of(small) == "plane_mm" and default_of(small.with_(B=64, H=8, W=8)) == "plane_mm"
    assert default_of(small.with_(H=9, W=8)) == "plane"
    mid = ConvCase(32, 512, 14, 14, 512, 27, 27, padding=(13, 13), groups=512)
    assert default_of(mid) == "plane" and default_of(mid.with_(B=4, **nhwc)) == "plane"
    assert default_of(mid.with_(B=1)) == "lk_q8" and default_of(mid.with_(B=1, **nhwc)) == "plane"
    mid13 = ConvCase(32, 384, 14, 14, 384, 13, 13, padding=(6, 6), groups=384)
    assert default_of(mid13) == "plane" and default_of(mid13.with_(**nhwc)) == "plane"
    s1 = ConvCase(32, 160, 28, 28, 160, 13, 13, padding=(6, 6), groups=160)
    assert default_of(s1.with_(B=64)) == "plane" and default_of(s1.with_(B=33)) == "plane"
    # ... but filters 13 taps wide at a column stride of 1, fp32 x NCHW, 28 or more output columns, batches 1-32:
    # the row-taps kernel (the rest as before: lk_q8 at batch 1, plane from batch 4)
    assert default_of(s1.with_(B=1)) == "taps13" and default_of(s1) == "taps13"
    assert default_of(s1.with_(B=2, H=56, W=40, KH=5, padding=(2, 6))) == "taps13"
    assert default_of(s1.with_(B=1, **nhwc)) == "lk_q8" and default_of(s1.with_(B=1, W=27)) == "lk_q8"
    assert default_of(s1.with_(B=1, x_dtype="f16", y_dtype="f16")) == "lk_q8"
    # ... and wider rows of at most 13 filter rows at batch 1: the row-taps kernel of any width
    assert default_of(s1.with_(B=1, KW=15, padding=(6, 7))) == "taps"
    assert default_of(s1.with_(B=1, KH=5, KW=49, padding=(2, 24))) == "taps"  # SLaK's 5x49
    assert default_of(s1.with_(B=2, KH=5, KW=49, padding=(2, 24))) == "lk_q8"
    assert default_of(s1.with_(B=1, KH=29, KW=29, padding=(14, 14))) == "lk_q8"  # 29 filter rows
    assert default_of(mid13.with_(B=1)) == "lk_q8" and default_of(mid13.with_(B=8)) == "plane"  # 14 columns
    assert default_of(s1.with_(KH=49, KW=5, padding=(24, 2))) == "plane"
    assert default_of(s1.with_(KH=49, KW=5, H=37, padding=(24, 2))) == "lk_q8"  # rows of 5 taps, 1036 values
    assert default_of(s1.with_(KH=5, KW=49, padding=(2, 24))) == "plane"
    assert default_of(big.with_(H=56, W=56)) == "plane" and default_of(big.with_(H=56, W=56, **nhwc)) == "plane"
    # At stride 2 plane sums a row's outputs one at a time: the large-filter kernel from batch 4, and at batches 1-3
    # on all but NHWC planes of at most 256 positions; planes of at most 64 positions stay with plane.
    s2 = ConvCase(32, 180, 14, 14, 180, 9, 9, stride=(2, 2), padding=(4, 4), groups=180)  # MixNet-M's s5.0
    # ... but fp32 NCHW from batch 16 to the row-matrix kernel, which folds the stride into its matrices
    assert default_of(s2) == "rows_mm" and default_of(s2.with_(H=28, W=28, KH=13, KW=13, padding=(6, 6))) == "rows_mm"
    assert default_of(s2.with_(B=16)) == "rows_mm" and default_of(s2.with_(B=15)) == "lk_q8"
    assert default_of(s2.with_(x_dtype="f16", y_dtype="f16")) == "lk_q8"
    assert default_of(s2.with_(**nhwc)) == "lk_q8"
    assert default_of(s2.with_(B=1)) == "lk_q8" and default_of(s2.with_(B=1, **nhwc)) == "plane"
    assert default_of(big.with_(H=56, W=56, stride=(2, 2))) == "lk_q16"
    assert default_of(small.with_(B=31, stride=(2, 2))) == "plane"


def supports(case, config=None):
    vid = pr.variant_id(NAME)
    if config is None:
        status = lib().conv_variant_supports_problem(vid, pr.make_problem(case))
    else:
        status = lib().conv_variant_config_supports_problem(vid, configs().index(config), pr.make_problem(case))
    return status, ffi().string(lib().conv_last_error()).decode() if status else ""


@pytest.mark.parametrize("case,config,words", [
    (ConvCase(1, 130, 9, 9, 2, 3, 3, groups=2), None, ["C/groups", "65"]),
    (SHAPES["mbv2_3x3_s1"], "m4_t16x16", ["maps per group"]),
    (SHAPES["resnext_g8_cg4"], "m8x4_t8x8", ["32-map", "16 maps per group"]),
    (SHAPES["mbv2_3x3_s1"], "nhwc_p4_t128", ["x_layout", "NHWC"]),
    (SHAPES["resnext_g8_cg4"].with_(x_layout="NHWC", y_layout="NHWC"), "nhwc_p4_t128", ["groups == C == M"]),
    (SHAPES["resnext_g8_cg4"], "nchw_r4", ["one input channel per group"]),
    (SHAPES["mbv2_3x3_s1"].with_(y_layout="NHWC"), "nchw_r7", ["NCHW"]),
    (ConvCase(1, 6, 9, 9, 6, 3, 3, groups=6, x_layout="NHWC", y_layout="NHWC"), "nhwc_p2_t128", ["multiple of 4"]),
    (ConvCase(1, 4, 60, 60, 4, 11, 11, groups=4, x_layout="NHWC", y_layout="NHWC"), "nhwc_p2_t128", ["KH*KW"]),
    (ConvCase(1, 4, 9, 60, 4, 2, 47, groups=4, x_layout="NHWC", y_layout="NHWC"), "nhwc_narrow_p1_t128", ["93"]),
    (ConvCase(1, 4, 400, 400, 4, 3, 3, dilation=(60, 60), groups=4), "m1_t32x32", ["shared memory"]),
    (SHAPES["resnext_g8_cg4"], "lk_q16", ["depthwise layers", "groups=8"]),
    (SHAPES["dw_3x5_dil2_same"], "lk_q8", ["no dilation", "2x2"]),
    (SHAPES["resnext_g8_cg4"], "plane", ["depthwise layers", "groups=8"]),
    (SHAPES["dw_3x5_dil2_same"], "plane", ["no dilation", "2x2"]),
    (LK_SHAPES["31x31_tall_plane_c2"].with_(W=100), "plane", ["whole planes", "1*30300 + 961", "KH*31"]),
    (LK_SHAPES["27x27_wider_than_plane"].with_(B=4, H=80, W=90), "plane", ["4 images", "4*H*91", "KH*33"]),
    (LK_SHAPES["27x27_wider_than_plane"].with_(B=4, H=75, W=90, x_dtype="f16"), "plane_r8",
     ["4 images", "4*6825 + 1107", "KH*41"]),
    (LK_SHAPES["31x31_c6"].with_(B=4), "plane_r8", ["f16 / bf16 x only from batch 4", "f32"]),
    (MM_SHAPES["13x13_plane7_b5"].with_(H=8, W=9), "plane_mm", ["as a matrix", "64 positions", "8x9 -> 8x9"]),
    (MM_SHAPES["3x3_valid_plane8"].with_(H=10, W=7), "plane_mm", ["64 positions", "10x7 -> 8x5"]),
    (MM_SHAPES["13x13_plane7_b5"].with_(KH=64, KW=63, padding=(32, 31)), "plane_mm", ["63x63", "64x63 filter"]),
    (SHAPES["resnext_g8_cg4"], "plane_mm", ["depthwise layers", "groups=8"]),
    (SHAPES["dw_3x5_dil2_same"], "plane_mm", ["no dilation", "2x2"]),
    (LK_SHAPES["31x31_c6"].with_(H=56, W=56, padding=(15, 15)), "rows_mm",
     ["as matrices", "200 KB", "56x56 -> 56x56", "31x31 filter"]),
    (ConvCase(8, 2, 1, 1, 2, 1, 1, padding=(0, 1100), groups=2), "rows_mm", ["2201 outputs a row", "512 threads"]),
    (RM_SHAPES["9x9_s2_plane14_b33"].with_(x_dtype="bf16", y_dtype="bf16"), "rows_mm", ["f32 x only", "bf16"]),
    (SHAPES["resnext_g8_cg4"], "rows_mm", ["depthwise layers", "groups=8"]),
    (SHAPES["dw_3x5_dil2_same"], "rows_mm", ["no dilation", "2x2"]),
    (TT_SHAPES["13x13_plane14_b3"].with_(KW=11, padding=(6, 5)), "taps13", ["13 taps wide", "13x11 filter"]),
    (TT_SHAPES["13x13_plane14_b3"].with_(x_dtype="f16", y_dtype="f16"), "taps13", ["f32 x only", "f16"]),
    (TT_SHAPES["13x13_s2x1"].with_(stride=(1, 2)), "taps13", ["column stride of 1", "stride 1x2"]),
    (TT_SHAPES["13x13_rows_of_700"].with_(W=1100), "taps13", ["48 KB", "9x1100 -> 9x1100"]),
    (SHAPES["resnext_g8_cg4"].with_(KH=13, KW=13, padding=(6, 6)), "taps13", ["depthwise layers", "groups=8"]),
    (SHAPES["dw_3x5_dil2_same"].with_(KW=13, padding=(2, 12)), "taps13", ["no dilation", "2x2"]),
    (TT_SHAPES["9x9_plane14"].with_(KW=7, padding=(4, 3)), "taps", ["9 taps wide or wider", "9x7 filter"]),
    (TT_SHAPES["9x9_plane14"].with_(x_dtype="bf16", y_dtype="bf16"), "taps", ["f32 x only", "bf16"]),
    (TT_SHAPES["5x49_plane28"].with_(stride=(1, 2)), "taps", ["column stride of 1", "stride 1x2"]),
    (TT_SHAPES["5x49_plane28"].with_(W=3000), "taps", ["48 KB", "28x3000 -> 28x3000"]),
])
def test_refusals_name_the_reason(case, config, words):
    pr.skip_unless_available(NAME)
    status, message = supports(case, config)
    assert status == UNSUPPORTED, f"{config} accepted {case}"
    for word in words:
        assert word in message, f"{message!r} does not name {word!r}"
