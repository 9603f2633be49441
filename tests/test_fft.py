"""fft (cuda/variants/fft/): depthwise convolution through 2-D FFTs in shared memory, on every launch
configuration, against the float64 oracle (fresh random data, outputs poisoned with NaN).

Shapes chosen to reach each part of the kernel: RepLKNet's 31x31 on 56x56 scaled down in channels (72x72
transforms: radices 8, 3, 3), 13x13 on 7x7 planes (15: 5, 3), SLaK's 51x5 / 5x51 bands (54: 3, 3, 3, 2 by 32: 8, 4),
InceptionNeXt's 1x11, 60 x 72 (5, 4, 3), the largest transforms (128 x 120: 8, 8, 2 and 8, 5, 3; 112x97 with 31x31),
odd plane sizes (an unpaired last row), strides 2 and 3 and dilations (the strided output rows paired from anywhere
in the grid; 27 x 25 and 25 x 20), "same" padding of an even filter (one more zero after), no padding, a channel
multiplier, batches that do not divide the runs of 4, 8 and 16 images. Then every dtype and layout pair with bias + ReLU, the planes the transforms must not take
(an Inf or NaN in x or w, values of 2^48 and more: summed directly, non-finite values exactly where the oracle has
them) beside planes that do go through the transforms, and the refusals. The problem matrix runs its generic cases
in depthwise form on the default configuration (test_problem_matrix.as_family).
"""
import numpy as np
import pytest

import problem_runner as pr
from problem_runner import ConvCase

NAME = "fft"
CONFIGS = ["t256_i1", "t512_i1", "t256_i4", "t256_i8", "t512_i16"]

SHAPES = {
    "replknet_31x31": ConvCase(2, 3, 56, 56, 3, 31, 31, padding=(15, 15), groups=3),
    "unireplknet_13x13_7x7": ConvCase(9, 4, 7, 7, 4, 13, 13, padding=(6, 6), groups=4),
    "slak_51x5": ConvCase(2, 2, 28, 29, 2, 51, 5, padding=(25, 2), groups=2),
    "slak_5x51": ConvCase(1, 2, 30, 27, 2, 5, 51, padding=(2, 25), groups=2),
    "inceptionnext_1x11": ConvCase(5, 3, 13, 14, 3, 1, 11, padding=(0, 5), groups=3),
    "radix5_planes": ConvCase(2, 2, 45, 61, 2, 31, 15, padding=(15, 7), groups=2),
    "plane_112_31x31": ConvCase(1, 1, 112, 97, 1, 31, 31, padding=(15, 15), groups=1),
    "odd_rows_stride2": ConvCase(3, 3, 23, 21, 3, 9, 9, stride=(2, 2), padding=(4, 4), groups=3),
    "stride3x1_dil2": ConvCase(2, 2, 19, 17, 2, 7, 5, stride=(3, 1), padding=(6, 3), dilation=(2, 2), groups=2),
    "same_even_8x6": ConvCase(2, 2, 16, 15, 2, 8, 6, padding=(3, 2), extra=(1, 1), groups=2),
    "valid_no_padding": ConvCase(2, 3, 20, 18, 3, 11, 7, groups=3),
    "multiplier_3": ConvCase(5, 2, 17, 15, 6, 13, 13, padding=(6, 6), groups=2),
}


def case_for(config, case):
    """The case with a batch the configuration's runs of images take, one that does not divide them."""
    images = int(config.split("_i")[1])
    return case.with_(B=max(case.B, images + 3)) if images > 1 else case


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("config", CONFIGS)
def test_matches_the_oracle(config, shape, rng):
    pr.skip_unless_available(NAME)
    pr.check_config(NAME, config, case_for(config, SHAPES[shape]), rng)


@pytest.mark.parametrize("x_dtype,y_dtype", [("f16", "f16"), ("bf16", "bf16"), ("f16", "f32"), ("f32", "bf16")])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_dtypes_and_layouts(x_dtype, y_dtype, layout, rng):
    pr.skip_unless_available(NAME)
    case = ConvCase(4, 8, 28, 27, 8, 13, 13, padding=(6, 6), groups=8, x_dtype=x_dtype, y_dtype=y_dtype,
                    x_layout=layout, y_layout=layout, w_layout="MKKC" if layout == "NHWC" else "MCKK", bias=True,
                    epilogue="relu")
    pr.check_config(NAME, "t256_i4", case, rng)


@pytest.mark.parametrize("config", ["t256_i1", "t256_i4"])
def test_non_finite_planes_are_summed_directly(config, rng):
    """A NaN, a +Inf and a -Inf in x reach exactly the outputs whose windows hold them (a transform would spread
    them over the whole plane); the other planes of the same blocks go through the transforms."""
    pr.skip_unless_available(NAME)
    case = ConvCase(5, 3, 30, 27, 3, 11, 15, padding=(5, 7), groups=3, bias=True)
    x, w, bias = pr.random_operands(case, rng)
    x[1, 1, 4, 20] = np.nan
    x[3, 2, 17, 3] = np.inf
    x[4, 2, 25, 10] = -np.inf
    ref = pr.check_config_non_finite(NAME, config, case, x, w, bias)
    assert np.isnan(ref).sum() >= 100 and np.isinf(ref).sum() >= 50 and np.isfinite(ref[0]).all()


def test_inf_weight_on_padding(rng):
    """An Inf weight gives NaN wherever its tap meets the zero padding (0 * Inf), as in the oracle; the other maps
    stay finite."""
    pr.skip_unless_available(NAME)
    case = ConvCase(2, 6, 14, 15, 6, 27, 27, padding=(13, 13), groups=6, bias=True)
    x, w, bias = pr.random_operands(case, rng, low=0.5, high=1.0)  # positive: Inf * x never meets -Inf
    w[3, 0, 0, 26] = np.inf
    ref = pr.check_config_non_finite(NAME, "t256_i1", case, x, w, bias)
    assert np.isnan(ref[:, 3]).sum() > 0 and not np.isnan(np.delete(ref, 3, axis=1)).any()


def test_huge_values_are_summed_directly(rng):
    """Values of 2^48 and more could overflow fp32 inside the transforms (a plane's sums of x times the filter's):
    such planes are summed directly and come out as the oracle's; the plane beside them goes through the
    transforms."""
    pr.skip_unless_available(NAME)
    case = ConvCase(2, 2, 20, 20, 2, 9, 9, padding=(4, 4), groups=2)
    x, w, _ = pr.random_operands(case, rng, low=0.5, high=1.0)
    x[0, 0] *= 1e30
    x[1, 1] *= 1e36  # sums of 81 products stay below fp32's 3.4e38
    ref = pr.check_config_non_finite(NAME, "t256_i1", case, x, w, None)
    assert np.isfinite(ref).all() and ref[1, 1].min() > 1e35


@pytest.mark.parametrize("case,words", [
    (ConvCase(1, 4, 10, 10, 4, 3, 3, groups=2), "depthwise"),
    (ConvCase(1, 2, 300, 20, 2, 3, 3, padding=(1, 1), groups=2), "longer than"),
    (ConvCase(1, 2, 200, 200, 2, 31, 31, padding=(15, 15), groups=2), "shared memory"),
    (ConvCase(1, 2, 100, 20, 2, 3, 3, padding=(90, 1), groups=2), "outputs of"),
])
def test_refusals_name_the_limit(case, words):
    pr.skip_unless_available(NAME)  # the variant's own limits are checked where it can run
    status, message = pr.supports(NAME, case)
    assert status == -2  # CONV_ERR_UNSUPPORTED
    assert "fft" in message and words in message, message
