"""The tensor-core implicit GEMM (implicit_gemm_tf32, implicit_gemm_f16: kernels/tc_igemm.cuh), every
launch configuration on each path it chooses per problem, against the float64 oracle.

The problem matrix runs each variant's default configuration; here every configuration meets:
  - operands read in place (x NHWC, w MKKC in the operand dtype, channels per group whole 16-byte
    chunks) and staged (NCHW, MCKK, another dtype, channels per group padded per group: 4 fp16
    channels of a 32-group layer become 8);
  - groups as side-by-side GEMMs: 2, 3, 4 and 32 groups, depthwise, maps per group not a multiple of
    the tile (7, 12) and smaller than one m16n8 tile (1, 2, 4); on the 128 x 32 tile, groups of few maps
    packed 2, 4 or 8 to a GEMM with block-diagonal staged filters (from MCKK and MKKC), packs whose
    channels are whole chunks (read in place) or not (padded per pack);
  - the staged epilogue (NHWC y whose maps per group are whole 16-byte chunks: 16-byte stores, fp32
    128 x 128 tiles in two passes) and the register epilogue (NCHW y, odd map counts, a y that is not
    16-byte aligned);
  - split-K (batch 1, long reductions) with its partial sums through either epilogue, and the reduction's
    bias, ReLU and y dtypes; split-K within thread-block clusters (sm_90: the sums reduced through
    distributed shared memory) on the same problems and on uneven k-ranges over 7 and 3 blocks;
  - f32, f16 and bf16 inputs and outputs, bias + ReLU, stride, padding, dilation, rectangular filters;
  - implicit_gemm_f16's wgmma configurations (Hopper, sm_90a) on every case above, on problems of
    many pixel tiles and k-tiles, so that the pipeline's stages wrap around several times, and on a
    reduction of a single k-tile;
  - its TMA configurations (operand tiles copied by tensor maps: 1x1 layers as plain GEMMs, the rest
    through im2col maps) on every ungrouped case above and on layers whose pixels, maps and channels
    divide no tile (the maps' zero fill), channels of less than one k-tile or of many (stages reused),
    padding, stride, dilation and windows of every kind, operands in place and staged, both epilogues,
    every y dtype; and their refusal of what the maps cannot describe;
  - its NCHW configurations (x read from fp32 NCHW in registers) on every ungrouped fp32 NCHW case
    above and on 1x1 and larger windows whose channels are no whole chunk, reductions of one, two and
    many k-tiles, pixels across rows and images, padding (extra too), stride, dilation, both epilogues
    and y dtypes; and their refusal of other x;
  - implicit_gemm_f16's depthwise configurations (each channel's filter rows as banded B matrices): 3x3,
    5x5 and 7x7 filters, rectangular and dilated ones, stride 1 and 2 (one and two k-steps of input
    columns), planes and channel counts that divide no tile or block, f16 / bf16 NHWC x and y read and
    written by 16-byte vectors, element by element (channels not a multiple of the vector, operands one
    element off alignment) and f32 / NCHW ones, batches of several images, bias and ReLU; their refusal of
    other groups, of a y dtype other than x's, and of windows wider than two k-steps;
  - implicit_gemm_f16's grouped configurations (a GEMM per group or pack of groups from a staged window):
    1, 2, 4 (packed 8, 4, 2 to a chunk, block-diagonal filters), 8, 16, 32 and 64 channels a group, maps
    per group odd, even and a multiple of the channels, packs and channel slabs cut by C, 3x3, 5x5, 1x1,
    rectangular and dilated windows, stride 1 and 2 and per axis, extra padding, f16 / bf16 NHWC x by
    16-byte copies and element by element (C no whole chunk, x one element off alignment), f32 NCHW x,
    MKKC and MCKK w, NHWC y staged for 16-byte stores (odd maps per pack too), by pairs of maps and
    element by element (M no whole vector, y one element off), NCHW y, bias and ReLU; their refusal
    of ungrouped layers, of groups of other channel counts, of another y dtype and of windows past the
    GPU's shared memory; batches of thousands of tiles, so that each block loops over several (the next
    tile's window copied in while one is multiplied);
  - implicit_gemm_tf32's nchw_mma configurations (1x1 windows, fp32 NCHW x and w read in place by
    cp.async, tf32 mma.sync): x by 16-byte copies (stride 1, no padding, planes of whole 4-pixel
    chunks, aligned x) and by 4-byte ones (odd planes, stride, padding, x one element off alignment),
    w likewise (channels a multiple of 4 or not, w one element off), tiles cut on every side, pixels
    across images, one and many k-tiles, both epilogues and every y dtype; cluster split-K on batch-1
    grids, with uneven ranges; their refusal of other windows and other x.
Fresh random data, outputs poisoned with NaN, relative L2 within the variant's bound.
"""
import numpy as np
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference

import problem_runner as pr
from pyconv._lib import ConvUnsupportedError
from problem_runner import ConvCase

VARIANTS = ["implicit_gemm_tf32", "implicit_gemm_f16"]
PLAIN = ["tile128x128_s3", "tile128x64_s4", "tile64x128_s4", "tile64x64_s6", "tile128x32_s4"]
SPLIT = ["tile64x64_s6_splitk"]
CLUSTER = ["tile64x64_s6_cluster"]
WGMMA = ["wgmma128x128_s3", "wgmma128x64_s4", "wgmma128x64_s6", "wgmma64x128_s4", "wgmma64x64_s4",
         "wgmma64x64_s6"]  # implicit_gemm_f16 only (sm_90a)
WGMMA_CLUSTER = ["wgmma64x64_s4_cluster"]
# implicit_gemm_f16 only (sm_90a), 1x1 convolutions with stride 1, no padding and one group
TMA = ["tma128x256_s4", "tma128x128_s4", "tma128x64_s4", "tma64x128_s4", "tma64x64_s4", "tma64x64_s6",
       "tma128x128_s4_persistent", "tma128x64_s4_persistent"]
TMA_PERSISTENT = [c for c in TMA if c.endswith("_persistent")]  # a wave of blocks looping over the tiles
TMA_CLUSTER = ["tma64x64_s4_cluster"]  # the TMA GEMM with cluster split-K: small grids only
# implicit_gemm_f16 only (sm_90a), x fp32 NCHW read in place and converted in registers, one group
NCHW_CONFIGS = ["nchw128x128_s3", "nchw128x64_s4", "nchw64x64_s4"]
# implicit_gemm_tf32 only: 1x1 windows on fp32 NCHW x, read in place with w (tc_nchw_mma.cuh)
NCHW_MMA = ["nchw_mma64x64_s4", "nchw_mma128x64_s3", "nchw_mma128x32_s4"]
NCHW_MMA_CLUSTER = ["nchw_mma64x64_s4_cluster"]  # sm_90, small grids only
# implicit_gemm_f16 only: depthwise layers as banded GEMMs per channel (tc_depthwise.cu)
DEPTHWISE = ["dw32x32_c16", "dw16x16_c32"]
# implicit_gemm_f16 only: grouped layers as GEMMs per group from a staged window (tc_grouped.cu)
GROUPED = ["grp128_c64", "grp128_c32", "grp64_c32"]
# implicit_gemm_f16 only: ungrouped 1x1 layers of 8-64 channels, 16-bit NHWC, streamed by warps (tc_pointwise.cu)
POINTWISE = ["pw32x64"]
# implicit_gemm_f16 only: ungrouped layers of 1-8 channels (stems), 16-bit NHWC, each window gathered (tc_stem.cu)
STEM = ["stem32x64"]

NHWC = dict(x_layout="NHWC", w_layout="MKKC", y_layout="NHWC")
CASES = {
    "g2_nchw_staged": ConvCase(2, 16, 9, 11, 24, 3, 3, padding=(1, 1), groups=2, bias=True),
    "g4_f16_in_place_staged_store": ConvCase(2, 32, 10, 9, 64, 3, 3, padding=(1, 1), groups=4, x_dtype="f16",
                                             y_dtype="f16", bias=True, epilogue="relu", **NHWC),
    "g2_odd_maps_register_store": ConvCase(2, 16, 8, 7, 14, 3, 3, padding=(1, 1), groups=2, x_dtype="bf16",
                                           y_dtype="bf16", **NHWC),
    # 4 maps a group: packs of 8 (32 channels, whole chunks: in place)
    "g32_pack8_stride2_f32": ConvCase(2, 128, 13, 12, 128, 3, 3, stride=(2, 2), padding=(1, 1), groups=32,
                                      bias=True, **NHWC),
    # 8 maps a group: packs of 4 (16 channels: whole fp16 chunks)
    "g32_pack4_f16": ConvCase(1, 128, 9, 10, 256, 3, 3, padding=(1, 1), groups=32, x_dtype="f16",
                              y_dtype="f16", epilogue="relu", **NHWC),
    # 3 channels and 2 maps a group: packs of 8 with 24 channels, padded per pack to 32 (fp16) / 24 (fp32)
    "g32_pack8_padded_mckk": ConvCase(2, 96, 8, 9, 64, 3, 3, padding=(1, 1), groups=32, x_dtype="f16",
                                      y_dtype="f32", bias=True, x_layout="NHWC", w_layout="MCKK",
                                      y_layout="NHWC"),
    "g3_dilated_rect_mixed": ConvCase(2, 12, 14, 13, 36, 3, 5, padding=(2, 1), dilation=(2, 1), groups=3,
                                      y_dtype="bf16", x_layout="NHWC", w_layout="MCKK", y_layout="NCHW"),
    "depthwise": ConvCase(2, 8, 9, 9, 8, 3, 3, padding=(1, 1), groups=8, bias=True, **NHWC),
    "depthwise_x2_nchw_f16": ConvCase(2, 6, 11, 9, 12, 5, 5, padding=(2, 2), groups=6, x_dtype="f16",
                                      y_dtype="f32"),
    "two_pass_fp32_tile": ConvCase(2, 64, 16, 16, 256, 3, 3, padding=(1, 1), groups=2, bias=True, **NHWC),
    "ungrouped_nhwc_f16_1x1": ConvCase(3, 64, 7, 9, 96, 1, 1, x_dtype="f16", y_dtype="f16", **NHWC),
    # split-K: one or two block tiles per group, dozens of k-tiles each
    "split_g2_staged_partials": ConvCase(1, 256, 7, 7, 64, 3, 3, padding=(1, 1), groups=2, x_dtype="f16",
                                         y_dtype="f16", bias=True, epilogue="relu", **NHWC),
    "split_g2_odd_maps": ConvCase(1, 256, 6, 7, 14, 3, 3, padding=(1, 1), groups=2, bias=True),
    "split_ungrouped_nchw_bf16": ConvCase(1, 192, 7, 7, 40, 3, 3, padding=(1, 1), x_dtype="bf16",
                                          y_dtype="bf16", epilogue="relu"),
    # cluster split-K, uneven ranges: K = 224 is 14 tf32 k-tiles (7 blocks of 2) and 7 f16 ones (3, 3, 1);
    # the tile's 64 rows reduced 10 / 22 per block, the last block fewer
    "cluster_uneven_ranges": ConvCase(1, 56, 5, 5, 24, 2, 2, padding=(1, 0), bias=True, epilogue="relu"),
}
SPLIT_CASES = [k for k in CASES if k.startswith("split_")]
CLUSTER_CASES = SPLIT_CASES + ["cluster_uneven_ranges"]


def arch_refused(e):
    """Whether an error is a cluster or wgmma configuration's refusal of this GPU (not compute capability
    9.0) or of this build (no sm_90a code)."""
    return "compute capability 9.0" in str(e) or "no sm_90a code" in str(e)


def check_where_it_runs(variant, config, case, rng, limit=None):
    """pr.check_config(). Given `limit`, a refusal passes only where it accepts it as the configuration's own
    limit on the case (the row checks the words, it does not skip); without, a refusal skips only where it is
    this GPU's or build's (arch_refused: the kernel cannot run here). Any other refusal raises."""
    try:
        return pr.check_config(variant, config, case, rng)
    except ConvUnsupportedError as e:
        if limit is not None:
            if limit(e):
                return None
            raise
        if not arch_refused(e):
            raise
        pytest.skip(f"{variant}[{config}]: {e}")


@requires_gpu
@pytest.mark.parametrize("case_id", list(CASES))
@pytest.mark.parametrize("config", PLAIN)
@pytest.mark.parametrize("variant", VARIANTS)
def test_plain_config_matches_oracle(variant, config, case_id, rng):
    pr.skip_unless_available(variant)
    pr.check_config(variant, config, CASES[case_id], rng)


@requires_gpu
@pytest.mark.parametrize("case_id", SPLIT_CASES)
@pytest.mark.parametrize("config", SPLIT)
@pytest.mark.parametrize("variant", VARIANTS)
def test_split_config_matches_oracle(variant, config, case_id, rng):
    """Each split case has a grid small enough for both split configurations to split it: the plan
    asks for the partial sums' workspace."""
    pr.skip_unless_available(variant)
    assert pr.check_config(variant, config, CASES[case_id], rng) > 0, f"{variant}[{config}] did not split {CASES[case_id]}"


# (variant, configuration) of every cluster split-K configuration: both families' mma.sync one, and
# implicit_gemm_f16's wgmma ones.
CLUSTER_CONFIGS = [(v, c) for v in VARIANTS for c in CLUSTER] + [("implicit_gemm_f16", c) for c in WGMMA_CLUSTER]


@requires_gpu
@pytest.mark.parametrize("case_id", CLUSTER_CASES)
@pytest.mark.parametrize("variant,config", CLUSTER_CONFIGS)
def test_cluster_config_matches_oracle(variant, config, case_id, rng):
    """Split-K within thread-block clusters: every output written (y poisoned), in both layouts and all
    dtypes, bias and ReLU after the whole sum. The configuration refuses problems it would not split, so
    running here means it split. Skips only on a GPU older than sm_90, which has no clusters."""
    pr.skip_unless_available(variant)
    check_where_it_runs(variant, config, CASES[case_id], rng)


# Many pixel tiles and k-tiles: every stage reused several times, tiles cut at the image edges; and one
# k-tile (16 channels of a 1x1 filter), fewer than any pipeline's stages.
WGMMA_CASES = dict(CASES, **{
    "one_k_tile_f16": ConvCase(3, 16, 13, 11, 40, 1, 1, x_dtype="f16", y_dtype="f16", bias=True, **NHWC),
    "deep_nhwc_f16": ConvCase(4, 96, 17, 15, 160, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", bias=True,
                              epilogue="relu", **NHWC),
    "deep_nchw_bf16_strided": ConvCase(3, 72, 21, 19, 200, 3, 3, stride=(2, 1), padding=(1, 1), x_dtype="bf16",
                                       y_dtype="f32", bias=True),
})


@requires_gpu
@pytest.mark.parametrize("case_id", list(WGMMA_CASES))
@pytest.mark.parametrize("config", WGMMA)
def test_wgmma_config_matches_oracle(config, case_id, rng):
    """The Hopper mainloop on the same tiles and epilogues. Skips only on a GPU that is not compute
    capability 9.0, where sm_90a code cannot run, or in a build without sm_90a code."""
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, WGMMA_CASES[case_id], rng)


# The TMA configurations run every ungrouped case above, and layers that reach the corners of their two
# x maps and of the y map their epilogue writes (y NHWC in whole 16-byte rows: 40 maps of bf16 a part box
# with bias and ReLU, 136 and 264 maps part tiles, fp32 y; 33 maps and NCHW y take the register store):
# 1x1 at stride 1 without padding (the pixels x channels matrix) with pixels and maps cut at every
# tile's edge, channels 8, 24 and 40 (one k-tile, mostly zero fill), 200 (a partial last k-tile per tap)
# and 1024 (16 k-tiles: each stage reused 2-4 times); every other window through the im2col map: padding,
# stride and dilation different along H and W, rectangular and even windows, 1x1 at stride 2, a 7x7
# stride-2 stem on 3 channels staged from NCHW fp32, columns of pixels that cross rows and images.
TMA_CASES = dict({k: c for k, c in WGMMA_CASES.items() if c.groups == 1}, **{
    "c200_edges_f16_relu": ConvCase(3, 200, 13, 11, 136, 1, 1, x_dtype="f16", y_dtype="f16", bias=True,
                                    epilogue="relu", **NHWC),
    "c1024_deep_bf16_to_f32": ConvCase(2, 1024, 9, 10, 72, 1, 1, x_dtype="bf16", y_dtype="f32", bias=True, **NHWC),
    "c8_nchw_register_store": ConvCase(2, 8, 15, 17, 40, 1, 1, x_dtype="f16", y_dtype="f16", x_layout="NHWC",
                                       w_layout="MKKC", y_layout="NCHW"),
    "c24_odd_maps_bf16": ConvCase(2, 24, 11, 13, 33, 1, 1, x_dtype="bf16", y_dtype="bf16", bias=True, **NHWC),
    "c24_part_box_bf16_relu": ConvCase(3, 24, 9, 13, 40, 1, 1, x_dtype="bf16", y_dtype="bf16", bias=True,
                                       epilogue="relu", **NHWC),
    "c40_wide_maps_f16": ConvCase(4, 40, 16, 16, 264, 1, 1, x_dtype="f16", y_dtype="f32", epilogue="relu", **NHWC),
    "c3_staged_nchw_f32": ConvCase(2, 3, 12, 11, 20, 1, 1, bias=True),
    "im2col_3x3_c200_f16": ConvCase(3, 200, 9, 9, 136, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16",
                                    bias=True, epilogue="relu", **NHWC),
    "im2col_rect_dilated_strided_bf16": ConvCase(2, 40, 17, 15, 72, 3, 5, stride=(1, 2), padding=(2, 1),
                                                 dilation=(2, 1), x_dtype="bf16", y_dtype="f32", bias=True, **NHWC),
    "im2col_even_window_asym_stride": ConvCase(2, 16, 14, 19, 24, 4, 2, stride=(3, 1), padding=(1, 0),
                                               x_dtype="f16", y_dtype="f16", **NHWC),
    "im2col_1x1_stride2": ConvCase(3, 48, 14, 13, 80, 1, 1, stride=(2, 2), x_dtype="f16", y_dtype="f16", **NHWC),
    "im2col_7x7_stem_nchw_f32": ConvCase(2, 3, 29, 31, 64, 7, 7, stride=(2, 2), padding=(3, 3), bias=True),
    "im2col_many_tiles_f16": ConvCase(8, 64, 28, 28, 256, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16",
                                      bias=True, **NHWC),
})


@requires_gpu
@pytest.mark.parametrize("case_id", list(TMA_CASES))
@pytest.mark.parametrize("config", TMA)
def test_tma_config_matches_oracle(config, case_id, rng):
    """The TMA-fed GEMM. Skips only where wgmma cannot run (as above)."""
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, TMA_CASES[case_id], rng)


# The persistent TMA configurations on more tiles than a wave of their blocks takes (two 128 x 64 blocks or
# one 128 x 128 an SM: 264 / 132 on the H100 and H200; these have 400-900 and 200-600), so that blocks loop
# and the pipeline's stages and phases run on from one tile into the next while the last one's TMA stores
# run: one k-tile a tile (40 channels, every position a new tile), three (136 channels: tiles end mid-way
# through the 4 stages), nine through the im2col map; y 16-bit and fp32 (two and four boxes a tile) by TMA
# stores from the block's buffer, NCHW y from registers.
TMA_PERSISTENT_CASES = {
    "loop_c40_one_k_tile_f16_relu": ConvCase(16, 40, 48, 50, 136, 1, 1, x_dtype="f16", y_dtype="f16", bias=True,
                                             epilogue="relu", **NHWC),
    "loop_c136_three_k_tiles_bf16_to_f32": ConvCase(16, 136, 40, 40, 72, 1, 1, x_dtype="bf16", y_dtype="f32",
                                                    bias=True, **NHWC),
    "loop_im2col_3x3_nchw_y": ConvCase(16, 24, 40, 40, 72, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16",
                                       x_layout="NHWC", w_layout="MKKC", y_layout="NCHW"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(TMA_PERSISTENT_CASES))
@pytest.mark.parametrize("config", TMA_PERSISTENT)
def test_tma_persistent_config_loops_over_tiles(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, TMA_PERSISTENT_CASES[case_id], rng)


# Grids small enough for the TMA cluster configuration to split (it refuses others, so each case runs
# split): the pixels x channels map on one pixel tile with 16 k-tiles (f16, y NHWC, bias) and on 4 x 2
# tiles of a staged fp32 NCHW x with NCHW y (the register store of the reduction); the im2col map on a
# padded 3x3 layer of 200 channels (4 channel tiles per tap, the last one mostly zeros: ranges that start
# inside a tap) with bias and ReLU, and on a strided, dilated rectangular window in bf16 to fp32.
TMA_CLUSTER_CASES = {
    "c1024_one_tile_f16": ConvCase(1, 1024, 7, 7, 64, 1, 1, x_dtype="f16", y_dtype="f16", bias=True, **NHWC),
    "c256_staged_nchw_f32": ConvCase(1, 256, 14, 14, 128, 1, 1, bias=True),
    "im2col_3x3_c200_relu": ConvCase(1, 200, 9, 9, 136, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16",
                                     bias=True, epilogue="relu", **NHWC),
    "im2col_rect_dilated_bf16": ConvCase(1, 96, 15, 13, 40, 3, 5, stride=(2, 1), padding=(2, 2), dilation=(1, 2),
                                         x_dtype="bf16", y_dtype="f32", **NHWC),
}


@requires_gpu
@pytest.mark.parametrize("config", TMA_CLUSTER)
def test_tma_cluster_config_refuses_unsplit_grids(config):
    """An ungrouped grid that fills the GPU without a split is not the TMA cluster configuration's either."""
    check_refused(config, ConvCase(16, 64, 16, 16, 256, 1, 1, x_dtype="f16", y_dtype="f16", **NHWC),
                  "split-K not used here")


@requires_gpu
@pytest.mark.parametrize("case_id", list(TMA_CLUSTER_CASES))
@pytest.mark.parametrize("config", TMA_CLUSTER)
def test_tma_cluster_config_matches_oracle(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, TMA_CLUSTER_CASES[case_id], rng)


# What the TMA configurations refuse, and the refusal's words: grouped layers (one GEMM only), strides past
# the im2col map's 8, windows whose extent less the padding passes the map's 128-pixel corners.
TMA_REFUSED = {
    "3x3_groups2": (CASES["two_pass_fp32_tile"], "ungrouped convolutions"),
    "1x1_groups2": (ConvCase(2, 32, 9, 9, 24, 1, 1, groups=2, x_dtype="f16", y_dtype="f16", **NHWC),
                    "ungrouped convolutions"),
    "depthwise": (CASES["depthwise"], "ungrouped convolutions"),
    "stride9": (ConvCase(1, 16, 40, 40, 8, 1, 1, stride=(9, 9), x_dtype="f16", y_dtype="f16", **NHWC),
                "at most 8 pixels"),
    "dilation70": (ConvCase(1, 16, 150, 9, 8, 3, 1, dilation=(70, 1), x_dtype="f16", y_dtype="f16", **NHWC),
                   "im2col box"),
}


def expect_refusal(variant, config, case, match):
    """variant[config] refuses case (at the variant's compute level) with ConvUnsupportedError matching `match`."""
    pr.skip_unless_available(variant)
    case = case.with_(compute=pr.variant_caps(variant)["compute"])
    with pytest.raises(ConvUnsupportedError, match=match):
        pr.run_config(variant, config, case, *pr.random_operands(case, np.random.default_rng(0)))


def check_refused(config, case, words):
    """implicit_gemm_f16[config] refuses case with a message holding `words` (or, on a GPU or build
    without wgmma, the architecture's refusal)."""
    expect_refusal("implicit_gemm_f16", config, case, f"{words}|compute capability 9.0|no sm_90a code")


@requires_gpu
@pytest.mark.parametrize("case_id", list(TMA_REFUSED))
@pytest.mark.parametrize("config", TMA)
def test_tma_config_refuses_what_its_maps_cannot_describe(config, case_id):
    check_refused(config, *TMA_REFUSED[case_id])


# The NCHW configurations: every ungrouped fp32 NCHW case above, and 1x1 layers of 13 channels (one
# k-tile, channels 13-15 of the last chunk read as zeros), 128 (two k-tiles: no refill in the loop), 520
# (nine, each stage reused); pixels that cross rows and images on odd grids; windows with padding (extra
# zeros after the last row and column too), stride, dilation, rectangular and even; a 7x7 stride-2 stem;
# y NHWC f16 (the staged store) and NCHW f32 with bias and ReLU; MKKC filters.
NCHW_CASES = dict({k: c for k, c in WGMMA_CASES.items()
                   if c.groups == 1 and c.x_dtype == "f32" and c.x_layout == "NCHW"}, **{
    "c13_one_k_tile": ConvCase(3, 13, 9, 11, 40, 1, 1, bias=True),
    "c128_two_k_tiles_relu": ConvCase(2, 128, 15, 13, 72, 1, 1, bias=True, epilogue="relu"),
    "c520_many_k_tiles_nhwc_f16": ConvCase(2, 520, 7, 9, 136, 1, 1, y_dtype="f16", y_layout="NHWC", bias=True),
    "c64_many_pixel_tiles": ConvCase(4, 64, 28, 28, 160, 1, 1, w_layout="MKKC"),
    "3x3_pad_extra_stride2": ConvCase(2, 24, 17, 15, 48, 3, 3, stride=(2, 2), padding=(1, 1), extra=(1, 1),
                                      bias=True),
    "rect_dilated_mixed_stride": ConvCase(2, 40, 19, 16, 72, 3, 5, stride=(1, 2), padding=(2, 1),
                                          dilation=(2, 1), y_dtype="bf16", y_layout="NHWC"),
    "even_window": ConvCase(2, 16, 14, 19, 24, 4, 2, stride=(3, 1), padding=(1, 0)),
    "7x7_stem_s2": ConvCase(2, 3, 29, 31, 64, 7, 7, stride=(2, 2), padding=(3, 3), bias=True, epilogue="relu"),
})


@requires_gpu
@pytest.mark.parametrize("case_id", list(NCHW_CASES))
@pytest.mark.parametrize("config", NCHW_CONFIGS)
def test_nchw_config_matches_oracle(config, case_id, rng):
    """The wgmma mainloop with x converted in registers. Skips only where wgmma cannot run."""
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, NCHW_CASES[case_id], rng)


NCHW_REFUSED = {
    "nhwc_x": ConvCase(2, 16, 9, 9, 24, 1, 1, x_layout="NHWC"),
    "f16_x": ConvCase(2, 16, 9, 9, 24, 3, 3, padding=(1, 1), x_dtype="f16"),
    "groups2": ConvCase(2, 16, 9, 9, 24, 3, 3, padding=(1, 1), groups=2),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(NCHW_REFUSED))
@pytest.mark.parametrize("config", NCHW_CONFIGS)
def test_nchw_config_refuses_other_x(config, case_id):
    check_refused(config, NCHW_REFUSED[case_id], "read x as fp32 NCHW")


# 1x1 fp32 NCHW layers for the nchw_mma tiles. Planes of 80 and 36 pixels take 16-byte copies of x, 99
# and strided / padded ones 4-byte copies; C = 64 and 520 16-byte copies of w, C = 13 and 30 4-byte ones;
# maps and pixels that divide no tile; 5 images of 36 pixels, so tiles start inside images; 1 k-tile
# (C = 13), 4 and 33 (C = 520, the stages wrapping around).
NCHW_MMA_CASES = {
    "vec_x_vec_w_relu": ConvCase(2, 64, 8, 10, 72, 1, 1, bias=True, epilogue="relu"),
    "odd_plane_c13": ConvCase(3, 13, 9, 11, 40, 1, 1, bias=True),
    "c520_nhwc_f16_y": ConvCase(2, 520, 7, 8, 136, 1, 1, y_dtype="f16", y_layout="NHWC", bias=True),
    "pixels_across_images_bf16_y": ConvCase(5, 32, 6, 6, 20, 1, 1, y_dtype="bf16", w_layout="MKKC"),
    "stride2_padded_c30": ConvCase(2, 30, 17, 15, 48, 1, 1, stride=(2, 2), padding=(1, 1), bias=True),
    "stride_w_only_extra_pad": ConvCase(2, 24, 9, 14, 33, 1, 1, stride=(1, 2), padding=(0, 1), extra=(1, 0)),
}
# Batch-1 grids of one or two tiles and long reductions: 16 k-tiles in 8 splits (odd plane), 13 in 5
# (ranges of 3, the last of 1), both epilogues.
NCHW_MMA_CLUSTER_CASES = {
    "c256_odd_plane": ConvCase(1, 256, 7, 7, 64, 1, 1, bias=True, epilogue="relu"),
    "c200_uneven_nhwc": ConvCase(1, 200, 14, 14, 24, 1, 1, y_layout="NHWC", bias=True),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(NCHW_MMA_CASES))
@pytest.mark.parametrize("config", NCHW_MMA)
def test_nchw_mma_config_matches_oracle(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_tf32")
    pr.check_config("implicit_gemm_tf32", config, NCHW_MMA_CASES[case_id], rng)


@requires_gpu
@pytest.mark.parametrize("offsets", [dict(x_offset=1), dict(w_offset=1), dict(x_offset=1, w_offset=1)])
@pytest.mark.parametrize("config", NCHW_MMA)
def test_nchw_mma_config_reads_unaligned_operands(config, offsets, rng):
    """x or w one element past a 16-byte boundary: the 4-byte copies instead of the 16-byte ones."""
    pr.skip_unless_available("implicit_gemm_tf32")
    pr.check_config("implicit_gemm_tf32", config, NCHW_MMA_CASES["vec_x_vec_w_relu"], rng, **offsets)


@requires_gpu
@pytest.mark.parametrize("case_id", list(NCHW_MMA_CLUSTER_CASES))
@pytest.mark.parametrize("config", NCHW_MMA_CLUSTER)
def test_nchw_mma_cluster_config_matches_oracle(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_tf32")
    check_where_it_runs("implicit_gemm_tf32", config, NCHW_MMA_CLUSTER_CASES[case_id], rng)


NCHW_MMA_REFUSED = {
    "3x3_window": (ConvCase(2, 16, 9, 9, 24, 3, 3, padding=(1, 1)), "run 1x1 windows"),
    "nhwc_x": (ConvCase(2, 16, 9, 9, 24, 1, 1, x_layout="NHWC"), "read x as fp32 NCHW"),
    "f16_x": (ConvCase(2, 16, 9, 9, 24, 1, 1, x_dtype="f16"), "read x as fp32 NCHW"),
    "groups2": (ConvCase(2, 16, 9, 9, 24, 1, 1, groups=2), "read x as fp32 NCHW"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(NCHW_MMA_REFUSED))
@pytest.mark.parametrize("config", NCHW_MMA + NCHW_MMA_CLUSTER)
def test_nchw_mma_config_refuses_other_problems(config, case_id):
    expect_refusal("implicit_gemm_tf32", config, *NCHW_MMA_REFUSED[case_id])


DW = dict(x_layout="NHWC", w_layout="MKKC", y_layout="NHWC")
DEPTHWISE_CASES = {
    # C = 48: three blocks of 16 channels, one and a half of 32; 19 x 21 planes: tiles cut on both sides
    "3x3_f16_relu": ConvCase(2, 48, 19, 21, 48, 3, 3, padding=(1, 1), groups=48, x_dtype="f16", y_dtype="f16",
                             bias=True, epilogue="relu", **DW),
    "7x7_bf16_c40": ConvCase(1, 40, 17, 13, 40, 7, 7, padding=(3, 3), groups=40, x_dtype="bf16", y_dtype="bf16",
                             bias=True, **DW),
    "7x7_f16_56x56": ConvCase(2, 96, 56, 56, 96, 7, 7, padding=(3, 3), groups=96, x_dtype="f16", y_dtype="f16",
                              **DW),
    # stride 2: 19 (5x5) and 17 (3x3) input columns per 8 outputs, two k-steps
    "5x5_s2_f32_nchw": ConvCase(3, 12, 23, 20, 12, 5, 5, stride=(2, 2), padding=(2, 2), groups=12, bias=True),
    "3x3_s2_f16_c20_elementwise": ConvCase(2, 20, 15, 16, 20, 3, 3, stride=(2, 2), padding=(1, 1), groups=20,
                                           x_dtype="f16", y_dtype="f16", epilogue="relu", **DW),
    # 7 + 4 * 2 + 1 = 16 columns: one k-step exactly; x NHWC, y NCHW
    "3x5_dilated_mixed_layouts": ConvCase(2, 16, 20, 22, 16, 3, 5, padding=(2, 4), dilation=(2, 2), groups=16,
                                          x_dtype="f16", y_dtype="f16", x_layout="NHWC", w_layout="MCKK",
                                          y_layout="NCHW"),
    "stride_rows_only_extra_pad_f32_nhwc": ConvCase(1, 8, 33, 35, 8, 3, 3, stride=(2, 1), padding=(1, 1),
                                                    extra=(1, 0), groups=8, bias=True, **DW),
    "1x1_channels_c24": ConvCase(2, 24, 9, 10, 24, 1, 1, groups=24, x_dtype="bf16", y_dtype="bf16", **DW),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(DEPTHWISE_CASES))
@pytest.mark.parametrize("config", DEPTHWISE)
def test_depthwise_config_matches_oracle(config, case_id, rng):
    """Every case runs on the tiles whose window fits the GPU's shared memory (the 32-row tile's window of a
    stride-2 5x5 layer with f32 y does not: refused with the reason)."""
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, DEPTHWISE_CASES[case_id], rng,
                        limit=lambda e: "bytes of shared memory" in str(e))


@requires_gpu
@pytest.mark.parametrize("offsets", [dict(x_offset=1), dict(y_offset=1)])
@pytest.mark.parametrize("config", DEPTHWISE)
def test_depthwise_config_takes_unaligned_operands(config, offsets, rng):
    """x or y one element past a 16-byte boundary: element-by-element loads or stores."""
    pr.skip_unless_available("implicit_gemm_f16")
    pr.check_config("implicit_gemm_f16", config, DEPTHWISE_CASES["3x3_f16_relu"], rng, **offsets)


DEPTHWISE_REFUSED = {
    "groups2": (ConvCase(2, 16, 9, 9, 16, 3, 3, padding=(1, 1), groups=2, x_dtype="f16", y_dtype="f16", **DW),
                "run depthwise layers"),
    "channel_multiplier": (ConvCase(2, 8, 9, 9, 16, 3, 3, padding=(1, 1), groups=8, x_dtype="f16", y_dtype="f16",
                                    **DW), "run depthwise layers"),
    "f32_y_of_f16_x": (ConvCase(2, 16, 9, 9, 16, 3, 3, padding=(1, 1), groups=16, x_dtype="f16", **DW),
                       "write y in x's dtype"),
    # 7 * 4 + 4 + 1 = 33 columns per 8 outputs
    "stride4_5x5": (ConvCase(2, 16, 30, 30, 16, 5, 5, stride=(4, 4), groups=16, x_dtype="f16", y_dtype="f16", **DW),
                    "at most 32 input columns"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(DEPTHWISE_REFUSED))
@pytest.mark.parametrize("config", DEPTHWISE)
def test_depthwise_config_refuses_other_problems(config, case_id):
    expect_refusal("implicit_gemm_f16", config, *DEPTHWISE_REFUSED[case_id])


GROUPED_CASES = {
    # ResNeXt's 4 channels and maps a group: packs of two groups (block-diagonal B), 16-byte copies of
    # NHWC x, pairs of maps stored together; 19 x 21 planes cut by every tile
    "cg4_f16_relu": ConvCase(2, 128, 19, 21, 128, 3, 3, padding=(1, 1), groups=32, x_dtype="f16", y_dtype="f16",
                             bias=True, epilogue="relu", **DW),
    # 8 channels a group at stride 2 (stored by column phase); C = 96: the last 64-channel slab half empty
    "cg8_s2_bf16_c96": ConvCase(2, 96, 23, 20, 96, 3, 3, stride=(2, 2), padding=(1, 1), groups=12, x_dtype="bf16",
                                y_dtype="bf16", bias=True, **DW),
    # 16 and 32 channels a group: two and four n8 tiles per pack, k-steps over 9 and 18 pieces' pairs
    "cg16_f16_7x7_planes": ConvCase(3, 64, 7, 7, 64, 3, 3, padding=(1, 1), groups=4, x_dtype="f16",
                                    y_dtype="f16", **DW),
    "cg32_bf16_relu": ConvCase(1, 64, 14, 15, 64, 3, 3, padding=(1, 1), groups=2, x_dtype="bf16", y_dtype="bf16",
                               epilogue="relu", **DW),
    # f32 NCHW x and y rounded to fp16 in the staging, MCKK w
    "cg16_f32_nchw": ConvCase(2, 48, 11, 13, 48, 3, 3, padding=(1, 1), groups=3, bias=True),
    # 3 maps a group (odd: element stores) from 8 channels; 2 channels a group packed 4 to a chunk with
    # 3 maps each (12 maps a pack, two n8 tiles)
    "cg8_mg3": ConvCase(2, 32, 9, 10, 12, 3, 3, padding=(1, 1), groups=4, x_dtype="f16", y_dtype="f16", **DW),
    # odd maps a pack staged for 16-byte stores (24 maps: whole vectors on the 64-channel blocks)
    "cg8_mg3_staged_y": ConvCase(2, 64, 9, 10, 24, 3, 3, padding=(1, 1), groups=8, x_dtype="bf16",
                                 y_dtype="bf16", bias=True, epilogue="relu", **DW),
    "cg2_mg3": ConvCase(2, 24, 9, 10, 36, 3, 3, padding=(1, 1), groups=12, x_dtype="f16", y_dtype="f16",
                        bias=True, **DW),
    # 5 groups of 4: C = 20 is no whole chunk (element staging), the last pack holds one group
    "cg4_c20_odd_groups": ConvCase(2, 20, 8, 9, 20, 3, 3, padding=(1, 1), groups=5, x_dtype="bf16",
                                   y_dtype="bf16", bias=True, **DW),
    # depthwise with a channel multiplier: 8 groups of 1 channel in a chunk
    "cg1_multiplier2": ConvCase(2, 16, 10, 11, 32, 3, 3, padding=(1, 1), groups=16, x_dtype="f16",
                                y_dtype="f16", **DW),
    # rectangular, dilated, stride and extra padding on one axis; x NHWC, w MCKK, y NCHW
    "cg8_dilated_rect_mixed_layouts": ConvCase(2, 32, 17, 19, 32, 3, 5, stride=(2, 1), padding=(2, 3),
                                               extra=(1, 0), dilation=(2, 1), groups=4, x_dtype="f16",
                                               y_dtype="f16", bias=True, x_layout="NHWC", w_layout="MCKK",
                                               y_layout="NCHW"),
    # 1x1 grouped (one piece per chunk) and a 5x5 window
    "cg8_1x1_bf16": ConvCase(2, 64, 9, 7, 64, 1, 1, groups=8, x_dtype="bf16", y_dtype="bf16", **DW),
    "cg4_5x5_s2": ConvCase(1, 32, 21, 18, 32, 5, 5, stride=(2, 2), padding=(2, 2), groups=8, x_dtype="f16",
                           y_dtype="f16", **DW),
    # thousands of output tiles on one channel slab: each block (a wave of them) loops over several, the next
    # tile's window copied in while one is multiplied; staged y and (NCHW) fragment stores
    "many_tiles_per_block_f16": ConvCase(4, 8, 256, 256, 8, 3, 3, padding=(1, 1), groups=2, x_dtype="f16",
                                         y_dtype="f16", bias=True, **DW),
    "many_tiles_per_block_nchw_y": ConvCase(3, 16, 200, 190, 16, 3, 3, padding=(1, 1), groups=4, x_dtype="bf16",
                                            y_dtype="bf16", epilogue="relu", x_layout="NHWC", w_layout="MKKC",
                                            y_layout="NCHW"),
    # f32 x copied raw and rounded into the window once the tile before is done: NCHW over thousands of tiles
    # (the raw window's copies in flight while a tile is multiplied), NCHW at stride 2 with C = 20 (a part
    # chunk), and NHWC f32
    "many_tiles_per_block_f32_nchw": ConvCase(3, 16, 190, 170, 16, 3, 3, padding=(1, 1), groups=4, bias=True,
                                              epilogue="relu"),
    "cg4_f32_nchw_c20_s2": ConvCase(2, 20, 15, 17, 20, 3, 3, stride=(2, 2), padding=(1, 1), groups=5, bias=True),
    "cg8_f32_nhwc": ConvCase(2, 32, 11, 12, 32, 3, 3, padding=(1, 1), groups=4, **DW),
    # f32 NCHW x whose rows take 16-byte copies (W = 16, 40): stride 2 with C = 40 (the second 32-channel slab
    # 8 planes of x, the rest zeros), and planes several tiles wide (each tile's window from its own lead)
    "cg8_f32_nchw_w16_s2": ConvCase(2, 40, 15, 16, 40, 3, 3, stride=(2, 2), padding=(1, 1), groups=5, bias=True),
    "cg8_f32_nchw_w40_dilated": ConvCase(2, 16, 12, 40, 16, 3, 3, padding=(2, 1), dilation=(2, 1), groups=2),
    # ResNeXt's g32_3 plane (28 -> 14 at stride 2): grp128_c64's raw window with rows for 16-byte copies would
    # pass the shared memory of a block, so it copies by 4 bytes (refusing the layer would fail here)
    "cg16_f32_nchw_s2_raw_rows_at_the_limit": ConvCase(1, 64, 28, 28, 64, 3, 3, stride=(2, 2), padding=(1, 1),
                                                       groups=4, bias=True),
    # f32 MCKK filters of 25 values a map, 9 maps: 225 values, the last run of 24 a thread loads part past them
    "cg1_f32_nchw_5x5_c9": ConvCase(2, 9, 12, 11, 9, 5, 5, padding=(2, 2), groups=9, bias=True),
    # 16-bit NCHW x: 8 element loads a chunk
    "cg4_f16_nchw": ConvCase(2, 32, 13, 11, 32, 3, 3, padding=(1, 1), groups=8, x_dtype="f16", y_dtype="f16"),
    # depthwise (one channel a group, 8 to a chunk), as MobileNetV2's
    "cg1_depthwise_s2": ConvCase(2, 48, 29, 30, 48, 3, 3, stride=(2, 2), padding=(1, 1), groups=48,
                                 x_dtype="f16", y_dtype="f16", **DW),
    # 64 channels a group: the c64 blocks only (c32 refuses)
    "cg64_f16": ConvCase(1, 128, 9, 9, 128, 3, 3, padding=(1, 1), groups=2, x_dtype="f16", y_dtype="f16", **DW),
    # B read from the staged filter rows with other map counts: 8 channels and 16 maps a group (tasks of two
    # n8 tiles, 9 pieces: a k-step's unused half reads both zeros), 16 channels and 24 maps (three n8 tiles:
    # one a task), 32 channels and 8 maps (one n8 tile), at stride 2 on NCHW f32
    "cg8_mg16_runs_of_two": ConvCase(2, 32, 11, 9, 64, 3, 3, padding=(1, 1), groups=4, x_dtype="bf16",
                                     y_dtype="bf16", bias=True, **DW),
    "cg16_mg24_odd_n8_tiles": ConvCase(2, 32, 10, 12, 48, 3, 3, padding=(1, 1), groups=2, x_dtype="f16",
                                       y_dtype="f16", **DW),
    "cg32_mg8_f32_s2": ConvCase(2, 64, 13, 11, 16, 3, 3, stride=(2, 2), padding=(1, 1), groups=2, bias=True),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(GROUPED_CASES))
@pytest.mark.parametrize("config", GROUPED)
def test_grouped_config_matches_oracle(config, case_id, rng):
    """Every case on every configuration that takes its groups (64 channels a group: the c64 blocks)."""
    pr.skip_unless_available("implicit_gemm_f16")
    check_where_it_runs("implicit_gemm_f16", config, GROUPED_CASES[case_id], rng,
                        limit=lambda e: case_id == "cg64_f16" and config.endswith("_c32") and "divides 32" in str(e))


@requires_gpu
@pytest.mark.parametrize("case_id,offsets", [("cg4_f16_relu", dict(x_offset=1)), ("cg4_f16_relu", dict(y_offset=1)),
                                             ("cg4_f16_relu", dict(w_offset=1)), ("cg16_f32_nchw", dict(w_offset=2)),
                                             ("cg8_f32_nchw_w16_s2", dict(x_offset=1)),
                                             ("cg8_f32_nchw_w16_s2", dict(x_offset=2))])
@pytest.mark.parametrize("config", GROUPED)
def test_grouped_config_takes_unaligned_operands(config, case_id, offsets, rng):
    """x one element past a 16-byte boundary: element staging (16-bit NHWC), 4- or 8-byte copies (f32 NCHW
    rows of 16); y: element stores; w (16-bit MKKC, f32 MCKK): filters read element by element, not by
    16-byte loads."""
    pr.skip_unless_available("implicit_gemm_f16")
    pr.check_config("implicit_gemm_f16", config, GROUPED_CASES[case_id], rng, **offsets)


# An Inf weight of one map on a tap that meets the padding: NaN there, Inf of its sign inside, and no other
# map's outputs touched, through every way the grouped tiles read B: straight from the staged rows (16 and 8
# channels a group, the latter with a k-step's unused half reading the rows' zeros; 3 maps a group, where
# the lanes past them read the last map's row; tasks of two n8 tiles) and the block-diagonal fragments of
# packed groups (1 and 4 channels), on 16-bit and f32 x.
GROUPED_INF_CASES = ["cg16_f16_7x7_planes", "cg8_mg3", "cg8_mg16_runs_of_two", "cg16_f32_nchw", "cg1_multiplier2",
                     "cg4_c20_odd_groups"]


@requires_gpu
@pytest.mark.parametrize("case_id", GROUPED_INF_CASES)
@pytest.mark.parametrize("config", GROUPED)
def test_grouped_config_keeps_an_inf_weight_to_its_map(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_f16")
    case = GROUPED_CASES[case_id].with_(compute=pr.variant_caps("implicit_gemm_f16")["compute"])
    x, w, bias = pr.random_operands(case, rng)
    w[1, 0, 0, 0] = -np.inf  # map 1, its group's first channel, tap (0, 0): padding on the first row and column
    y, _ = pr.run_config("implicit_gemm_f16", config, case, x, w, bias)
    with np.errstate(invalid="ignore"):
        ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert np.isnan(ref).any() and np.isinf(ref).any(), "the Inf weight must meet padding and the image"
    pr.check_non_finite(f"implicit_gemm_f16[{config}] {case_id}", y, ref,
                        pr.error_bound("implicit_gemm_f16", case.x_dtype, case.y_dtype))


GROUPED_REFUSED = {
    "ungrouped": (ConvCase(2, 16, 9, 9, 16, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", **DW),
                  "run grouped layers"),
    "cg3": (ConvCase(2, 24, 9, 9, 24, 3, 3, padding=(1, 1), groups=8, x_dtype="f16", y_dtype="f16", **DW),
            "groups of 1, 2, 4 or a multiple of 8"),
    "cg24": (ConvCase(2, 48, 9, 9, 48, 3, 3, padding=(1, 1), groups=2, x_dtype="f16", y_dtype="f16", **DW),
             "groups of 1, 2, 4 or a multiple of 8"),
    "f32_y_of_f16_x": (ConvCase(2, 32, 9, 9, 32, 3, 3, padding=(1, 1), groups=8, x_dtype="f16", **DW),
                       "write y in x's dtype"),
    # a 128-pixel tile's window of a 31 x 31 filter at dilation 8 passes any GPU's shared memory
    "huge_window": (ConvCase(1, 64, 300, 300, 64, 31, 31, dilation=(8, 8), groups=8, x_dtype="f16",
                             y_dtype="f16", **DW), "bytes of shared memory"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(GROUPED_REFUSED))
@pytest.mark.parametrize("config", GROUPED)
def test_grouped_config_refuses_other_problems(config, case_id):
    expect_refusal("implicit_gemm_f16", config, *GROUPED_REFUSED[case_id])


POINTWISE_CASES = {
    # MobileNet's 16 -> 96: 390 pixels (12 tiles of 32 and one of 6), two passes of maps (64, 32)
    "c16_m96_bias": ConvCase(2, 16, 13, 15, 96, 1, 1, x_dtype="f16", y_dtype="f16", bias=True, **DW),
    # 24 channels: the second k16 step's upper half zeros; 40 maps: staged filter rows of zeros up to 48
    "c24_m40_bf16_relu": ConvCase(3, 24, 9, 14, 40, 1, 1, x_dtype="bf16", y_dtype="bf16", bias=True,
                                  epilogue="relu", **DW),
    # the smallest: one chunk a pixel, one n8 tile of maps
    "c8_m8_bf16": ConvCase(2, 8, 5, 7, 8, 1, 1, x_dtype="bf16", y_dtype="bf16", bias=True, **DW),
    # four k16 steps, four passes of 64 maps
    "c64_m256": ConvCase(1, 64, 10, 11, 256, 1, 1, x_dtype="f16", y_dtype="f16", **DW),
    # more tiles than a wave of warps takes (262,144 pixels: each warp several, the next tile's copies in flight,
    # on a GPU of up to 160 SMs at 4 blocks an SM); 136 maps: a last pass of one n8 tile
    "c40_m136_warps_loop": ConvCase(16, 40, 128, 128, 136, 1, 1, x_dtype="f16", y_dtype="f16", bias=True,
                                    epilogue="relu", **DW),
    "c48_m72_bf16": ConvCase(2, 48, 40, 40, 72, 1, 1, x_dtype="bf16", y_dtype="bf16", **DW),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(POINTWISE_CASES))
@pytest.mark.parametrize("config", POINTWISE)
def test_pointwise_config_matches_oracle(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_f16")
    pr.check_config("implicit_gemm_f16", config, POINTWISE_CASES[case_id], rng)


@requires_gpu
@pytest.mark.parametrize("case_id", ["c16_m96_bias", "c24_m40_bf16_relu"])
@pytest.mark.parametrize("config", POINTWISE)
def test_pointwise_config_keeps_non_finite_values_to_their_outputs(config, case_id, rng):
    """An Inf weight reaches only its map's outputs, a NaN input only its pixel's, through the k16 steps'
    zero padding (24 channels) and the staged filter rows past M."""
    check_non_finite_placement(config, POINTWISE_CASES[case_id], (1, 5, 2, 3), rng)


def check_non_finite_placement(config, case, nan_at, rng):
    """implicit_gemm_f16[config] on the case with w[1, 0, 0, 0] = -Inf and x[nan_at] = NaN: the same outputs
    non-finite as in the float64 oracle, the rest within the bound."""
    pr.skip_unless_available("implicit_gemm_f16")
    case = case.with_(compute=pr.variant_caps("implicit_gemm_f16")["compute"])
    x, w, bias = pr.random_operands(case, rng)
    w[1, 0, 0, 0] = -np.inf
    x[nan_at] = np.nan
    y, _ = pr.run_config("implicit_gemm_f16", config, case, x, w, bias)
    with np.errstate(invalid="ignore"):
        ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert np.isnan(ref).any() and np.isinf(ref).any()
    pr.check_non_finite(f"implicit_gemm_f16[{config}] {case}", y, ref,
                        pr.error_bound("implicit_gemm_f16", case.x_dtype, case.y_dtype))


POINTWISE_REFUSED = {
    "3x3": (ConvCase(2, 16, 9, 9, 16, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", **DW),
            "ungrouped 1x1 windows at stride 1"),
    "stride2": (ConvCase(2, 16, 9, 9, 16, 1, 1, stride=(2, 2), x_dtype="f16", y_dtype="f16", **DW),
                "ungrouped 1x1 windows at stride 1"),
    "grouped": (ConvCase(2, 16, 9, 9, 16, 1, 1, groups=2, x_dtype="f16", y_dtype="f16", **DW),
                "ungrouped 1x1 windows at stride 1"),
    "c72": (ConvCase(2, 72, 9, 9, 16, 1, 1, x_dtype="f16", y_dtype="f16", **DW), "C a multiple of 8 up to 64"),
    "c12": (ConvCase(2, 12, 9, 9, 16, 1, 1, x_dtype="f16", y_dtype="f16", **DW), "C a multiple of 8 up to 64"),
    "m20": (ConvCase(2, 16, 9, 9, 20, 1, 1, x_dtype="f16", y_dtype="f16", **DW), "M a multiple of 8; .* M=20"),
    "f32": (ConvCase(2, 16, 9, 9, 16, 1, 1, **DW), "fp16 or bf16 x and y of one dtype"),
    "f32_y_of_f16_x": (ConvCase(2, 16, 9, 9, 16, 1, 1, x_dtype="f16", **DW), "fp16 or bf16 x and y of one dtype"),
    "nchw": (ConvCase(2, 16, 9, 9, 16, 1, 1, x_dtype="f16", y_dtype="f16"), "NHWC x and y and MKKC w"),
    "filters_past_shared_memory": (ConvCase(1, 64, 4, 4, 2048, 1, 1, x_dtype="f16", y_dtype="f16", **DW),
                                   "bytes of shared memory"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(POINTWISE_REFUSED))
@pytest.mark.parametrize("config", POINTWISE)
def test_pointwise_config_refuses_other_problems(config, case_id):
    expect_refusal("implicit_gemm_f16", config, *POINTWISE_REFUSED[case_id])


@requires_gpu
@pytest.mark.parametrize("offsets", [dict(x_offset=1), dict(y_offset=1), dict(w_offset=1)])
@pytest.mark.parametrize("config", POINTWISE)
def test_pointwise_config_refuses_unaligned_operands(config, offsets):
    """An operand off a 16-byte boundary is refused with its name, not read in pieces."""
    pr.skip_unless_available("implicit_gemm_f16")
    case = POINTWISE_CASES["c16_m96_bias"].with_(compute=pr.variant_caps("implicit_gemm_f16")["compute"])
    name = next(iter(offsets))[0]
    with pytest.raises(ConvUnsupportedError, match=f"{name} at .* is not 16-byte aligned"):
        pr.run_config("implicit_gemm_f16", config, case, *pr.random_operands(case, np.random.default_rng(0)),
                      **offsets)


STEM_CASES = {
    # MobileNet's / EfficientNet's stem: 3 -> 32 maps, 3x3 at stride 2 (27 taps: two k16 steps), a part tile
    "c3_m32_3x3_s2_bias": ConvCase(2, 3, 17, 19, 32, 3, 3, stride=(2, 2), padding=(1, 1), x_dtype="f16",
                                   y_dtype="f16", bias=True, **DW),
    # ConvNeXt's patchify stem, 4x4 at stride 4 (48 taps), 96 maps: passes of 64 and 32
    "c3_m96_4x4_s4_bf16_relu": ConvCase(2, 3, 16, 18, 96, 4, 4, stride=(4, 4), x_dtype="bf16", y_dtype="bf16",
                                        bias=True, epilogue="relu", **DW),
    # 7x7 at stride 2 (SqueezeNet 1.0's stem) into 200 maps: four passes, the last of one n8 tile
    "c3_m200_7x7_s2": ConvCase(1, 3, 19, 17, 200, 7, 7, stride=(2, 2), x_dtype="f16", y_dtype="f16", bias=True,
                               **DW),
    # a 7x7 stem at stride 2 (147 taps: ten k16 steps, the last part zeros), rows and columns of padding
    "c3_m64_7x7_s2": ConvCase(1, 3, 23, 21, 64, 7, 7, stride=(2, 2), padding=(3, 3), x_dtype="f16",
                              y_dtype="f16", **DW),
    # LeNet's C3 (4 -> 16, 7x7: 196 taps), no padding
    "c4_m16_7x7_bf16": ConvCase(3, 4, 20, 20, 16, 7, 7, x_dtype="bf16", y_dtype="bf16", bias=True, **DW),
    # one channel, dilated, 8 maps: one n8 tile, staged filter rows of zeros up to 16
    "c1_m8_dilated": ConvCase(2, 1, 15, 13, 8, 3, 3, padding=(2, 2), dilation=(2, 2), x_dtype="f16",
                              y_dtype="f16", bias=True, **DW),
    # 8 channels in a 2x5 window at strides 1 x 2 (80 taps), 24 maps: a half-used n16 pair; zeros after (extra)
    "c8_m24_rect_extra": ConvCase(2, 8, 11, 9, 24, 2, 5, stride=(1, 2), padding=(0, 2), extra=(1, 1),
                                  x_dtype="bf16", y_dtype="bf16", epilogue="relu", **DW),
    # LeNet's C1 (1 -> 4, 7x7): y in 8-byte words, the n8 tile half staged, never stored
    "c1_m4_7x7_lenet": ConvCase(3, 1, 22, 20, 4, 7, 7, x_dtype="f16", y_dtype="f16", bias=True, **DW),
    # 20 maps (4-value words), 6 maps (2-value words), 5 maps (single values): the bias past M never read
    "c3_m20": ConvCase(2, 3, 13, 11, 20, 3, 3, padding=(1, 1), x_dtype="bf16", y_dtype="bf16", bias=True, **DW),
    "c2_m6": ConvCase(2, 2, 12, 13, 6, 5, 3, padding=(2, 1), x_dtype="f16", y_dtype="f16", bias=True,
                      epilogue="relu", **DW),
    "c3_m5_stride3": ConvCase(2, 3, 14, 16, 5, 3, 3, stride=(3, 3), x_dtype="f16", y_dtype="f16", bias=True, **DW),
    # windows of the most rows (31: the row masks' last bit, beside the row that marks taps past K) and columns,
    # long bands as InceptionNeXt's and SLaK's, padded and dilated so that most windows cross x's edges
    "c8_m16_31x1_band": ConvCase(2, 8, 40, 9, 16, 31, 1, padding=(15, 0), x_dtype="f16", y_dtype="f16", bias=True,
                                 **DW),
    "c2_m8_1x31_dilated": ConvCase(2, 2, 5, 70, 8, 1, 31, padding=(0, 20), dilation=(1, 2), x_dtype="bf16",
                                   y_dtype="bf16", **DW),
    # More tiles than a wave of warps takes, so that each warp loops over several (a wave is SMs x blocks an SM
    # x 4 warps, 32 pixels a tile: 262,144 pixels are 2.5 rounds and more on a GPU of up to 160 SMs at the stem's
    # 5 blocks an SM); the second with a 7x7 window of 4 channels (196 taps: a row's last k16 step part zeros) and
    # 16 maps
    "c3_m40_warps_loop": ConvCase(16, 3, 128, 128, 40, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16",
                                  bias=True, epilogue="relu", **DW),
    "c4_m16_7x7_warps_loop": ConvCase(16, 4, 128, 128, 16, 7, 7, padding=(3, 3), x_dtype="bf16", y_dtype="bf16",
                                      bias=True, **DW),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(STEM_CASES))
@pytest.mark.parametrize("config", STEM)
def test_stem_config_matches_oracle(config, case_id, rng):
    pr.skip_unless_available("implicit_gemm_f16")
    pr.check_config("implicit_gemm_f16", config, STEM_CASES[case_id], rng)


@requires_gpu
@pytest.mark.parametrize("offsets", [dict(x_offset=1), dict(w_offset=1), dict(y_offset=1), dict(y_offset=2),
                                     dict(y_offset=4)])
@pytest.mark.parametrize("config", STEM)
def test_stem_config_takes_operands_off_their_boundaries(config, offsets, rng):
    """The gather and the filter staging read 2-byte values, so x and w off any boundary are read as they are;
    y off a 16-byte boundary is written in narrower words (1, 2 or 4 values), every element, nothing outside."""
    pr.skip_unless_available("implicit_gemm_f16")
    pr.check_config("implicit_gemm_f16", config, STEM_CASES["c3_m32_3x3_s2_bias"], rng, **offsets)


@requires_gpu
@pytest.mark.parametrize("config", STEM)
def test_stem_config_keeps_non_finite_values_to_their_outputs(config, rng):
    """An Inf weight reaches only its map's outputs, a NaN input only the windows that hold it, through the
    k16 steps' zero padding and the staged filter rows past M; a padding tap of an Inf weight gives NaN, as
    PyTorch's conv."""
    check_non_finite_placement(config, STEM_CASES["c3_m32_3x3_s2_bias"], (1, 2, 6, 7), rng)


STEM_REFUSED = {
    "grouped": (ConvCase(2, 4, 9, 9, 8, 3, 3, padding=(1, 1), groups=2, x_dtype="f16", y_dtype="f16", **DW),
                "ungrouped layers of at most 8 channels"),
    "c16": (ConvCase(2, 16, 9, 9, 16, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", **DW),
            "ungrouped layers of at most 8 channels"),
    "taps_past_256": (ConvCase(1, 8, 12, 12, 8, 7, 7, x_dtype="f16", y_dtype="f16", **DW), "256 taps a window"),
    "columns_past_31": (ConvCase(1, 1, 4, 40, 8, 1, 32, x_dtype="f16", y_dtype="f16", **DW),
                        "at most 31 rows and columns"),
    # 256 taps for 2048 maps: the filters pass any GPU's shared memory
    "filters_past_shared_memory": (ConvCase(1, 4, 12, 12, 2048, 8, 8, x_dtype="f16", y_dtype="f16", **DW),
                                   "bytes of shared memory"),
    "f32": (ConvCase(2, 3, 9, 9, 16, 3, 3, **DW), "fp16 or bf16 x and y of one dtype"),
    "f32_y_of_f16_x": (ConvCase(2, 3, 9, 9, 16, 3, 3, x_dtype="f16", **DW), "fp16 or bf16 x and y of one dtype"),
    "nchw": (ConvCase(2, 3, 9, 9, 16, 3, 3, x_dtype="f16", y_dtype="f16"), "NHWC x and y and MKKC w"),
}


@requires_gpu
@pytest.mark.parametrize("case_id", list(STEM_REFUSED))
@pytest.mark.parametrize("config", STEM)
def test_stem_config_refuses_other_problems(config, case_id):
    expect_refusal("implicit_gemm_f16", config, *STEM_REFUSED[case_id])


@requires_gpu
@pytest.mark.parametrize("variant,config", CLUSTER_CONFIGS)
def test_cluster_config_refuses_unsplit_grids(variant, config):
    """A grid that fills the GPU without a split is not the cluster configuration's to run."""
    expect_refusal(variant, config, CASES["two_pass_fp32_tile"].with_(B=64), "split-K not used here")


@requires_gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_unaligned_y_takes_the_register_epilogue(variant, rng):
    """A y one element past a 16-byte boundary cannot take 16-byte stores: the register epilogue writes
    it, every element, nothing outside."""
    pr.skip_unless_available(variant)
    pr.check_config(variant, "tile64x64_s6", CASES["two_pass_fp32_tile"], rng, y_offset=1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_swept_configs_are_the_variants(variant):
    """The sweeps above name every configuration of both variants."""
    own = (WGMMA + WGMMA_CLUSTER + TMA + TMA_CLUSTER + NCHW_CONFIGS + DEPTHWISE + GROUPED + POINTWISE + STEM
           if variant == "implicit_gemm_f16" else NCHW_MMA + NCHW_MMA_CLUSTER)
    pr.check_swept_configs(variant, PLAIN + SPLIT + CLUSTER + own)


@requires_gpu
def test_default_config_is_wgmma_where_it_runs():
    """implicit_gemm_f16's default configuration, where the wgmma ones run, is one of them: cluster
    split-K for a batch-1 grid of one tile, a whole-K tile at batch 32; elsewhere an mma.sync one."""
    from pyconv import Conv2dPlan
    pr.skip_unless_available("implicit_gemm_f16")
    kw = dict(padding=1, variant="implicit_gemm_f16", precision="fast", dtype="float16", layout="NHWC",
              w_layout="MKKC")
    batch32, batch1 = ((32, 64, 28, 28), (128, 64, 3, 3)), ((1, 256, 7, 7), (64, 256, 3, 3))
    try:
        Conv2dPlan(*batch32, config=WGMMA[0], **kw)
        hopper = True
    except ConvUnsupportedError as e:
        if not arch_refused(e):
            raise
        hopper = False
    large, small = Conv2dPlan(*batch32, **kw).config, Conv2dPlan(*batch1, **kw).config
    assert (large in WGMMA, small in WGMMA_CLUSTER) == (hopper, hopper), (hopper, large, small)


@requires_gpu
def test_default_config_runs_small_groups_on_the_grouped_tiles():
    """implicit_gemm_f16's default for groups of at most 8 channels (ResNeXt's 4 a group) is grp64_c32; wider
    groups stay on the GEMM tiles."""
    from pyconv import Conv2dPlan
    pr.skip_unless_available("implicit_gemm_f16")
    kw = dict(padding=1, groups=32, variant="implicit_gemm_f16", precision="fast", dtype="float16", layout="NHWC",
              w_layout="MKKC")
    assert Conv2dPlan((8, 128, 28, 28), (128, 4, 3, 3), **kw).config == "grp64_c32"
    assert Conv2dPlan((1, 256, 28, 28), (256, 8, 3, 3), **kw).config == "grp64_c32"
    assert not Conv2dPlan((32, 512, 14, 14), (512, 16, 3, 3), **kw).config.startswith("grp")
