"""Every variant x every capability it declares, against the float64 oracle, through the C ABI.

The rows come from the C table (conv_variant_get_caps), so a variant that declares a new dtype,
layout, epilogue, groups, bias or dilation is covered here without editing this file:
  - a shape sweep in fp32 NCHW (strides 1/2, padding 0/1 and asymmetric 'same' padding, dilation where
    declared, rectangular kernels, sizes that do not divide tiles, batches > 1); a variant may refuse a
    shape for its own limits (skipped, with its reason);
  - one case per declared capability (dtype pair, layout triple, groups / depthwise, bias, each
    epilogue incl. ceil-mode pooling with partial windows) and a few cases mixing them all: a declared
    capability must run;
  - the fused epilogue equal to conv + bias followed by ReLU / max-pool in NumPy float32 (exact variants);
  - every undeclared capability refused with CONV_ERR_UNSUPPORTED and a message naming the parameter;
  - an Inf weight at a padded border gives NaN exactly where the float64 oracle does.
Data is fresh and random every run (the seed is printed), outputs are poisoned with NaN before each
call, and the error is relative L2 within problem_runner.error_bound. The cpu variant's half-precision
conversions are checked bit for bit at the end.
"""
import itertools

import numpy as np
import pytest
from conftest import OWN_FAMILY, OWN_FILTER, TILE_TRANSFORMS
from oracle import conv2d_reference, max_pool_reference, rel_l2, relu_reference

import problem_runner as pr
from problem_runner import ConvCase
from pyconv import ConvUnsupportedError

UNSUPPORTED = -2
NAMES = pr.variant_names()
CAPS = {name: pr.variant_caps(name) for name in NAMES}
FACTS = {name: pr.variant_facts(name) for name in NAMES}


# The variants that take fewer zeros after than before (causal padding: pad_w_extra < 0), as registry.c says.
CAUSAL = {"cpu", "direct", "depthwise_conv1d"}


def as_family(name, case: ConvCase) -> ConvCase:
    """The case in the form of the variant's own problem family (conftest.OWN_FAMILY), else as it is:
    depthwise_conv1d's are depthwise 1-D convolutions (H = KH = 1, groups = C = M, no padding along H), fft's
    depthwise 2-D ones (groups = C, two maps a channel)."""
    if name not in OWN_FAMILY:
        return case
    if name == "fft":
        return case.with_(M=2 * case.C, groups=case.C)
    return case.with_(H=1, KH=1, M=case.C, groups=case.C, padding=(0, case.padding[1]), extra=(0, case.extra[1]),
                      stride=(1, case.stride[1]), dilation=(1, case.dilation[1]), pool=(1, case.pool[1]),
                      pool_stride=(1, case.pool_stride[1]))


def skip_unavailable(name):
    if not FACTS[name].available:
        pytest.skip(f"{name} unavailable here: {FACTS[name].reason}")


def for_variant(name, case: ConvCase) -> ConvCase:
    """The case at the compute level the variant needs (a problem must allow it)."""
    return case.with_(compute=CAPS[name]["compute"])


def check_against_oracle(name, case, rng):
    """Runs the case on fresh data and holds the variant to its bound; returns nothing."""
    x, w, bias = pr.random_operands(case, rng)
    y = pr.run_case(name, case, x, w, bias)
    ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert y.shape == ref.shape
    assert not np.isnan(y).any(), f"{name}: {int(np.isnan(y).sum())} outputs not written (NaN poison left) on {case}"
    err, bound = rel_l2(y, ref), pr.error_bound(name, case.x_dtype, case.y_dtype)
    assert err <= bound, f"{name} on {case}: relative L2 error {err:.2e} > {bound:.2e}"


# ---- the shape sweep (fp32, NCHW, no epilogue) ----

SHAPES = {
    "3x3_pad1_b2": ConvCase(2, 3, 11, 13, 5, 3, 3, padding=(1, 1)),
    "3x3_stride2": ConvCase(1, 4, 15, 12, 6, 3, 3, stride=(2, 2)),
    "5x2_stride2x1_pad2x1": ConvCase(2, 2, 14, 17, 3, 5, 2, stride=(2, 1), padding=(2, 1)),
    "same_even_4x2": ConvCase(2, 3, 10, 9, 4, 4, 2, padding=(1, 0), extra=(1, 1)),
    "extra_stride2": ConvCase(1, 3, 13, 12, 5, 3, 3, stride=(2, 2), padding=(1, 1), extra=(1, 0)),
    "1x1_b3": ConvCase(3, 7, 5, 9, 9, 1, 1),
    "7x7_c1": ConvCase(2, 1, 32, 30, 4, 7, 7),
    "m33_c20": ConvCase(1, 20, 9, 11, 33, 3, 3, padding=(1, 1)),
    "dilation2": ConvCase(1, 3, 16, 15, 4, 3, 3, padding=(2, 2), dilation=(2, 2)),
    "dilation2x1_stride1x2_extra": ConvCase(2, 3, 13, 17, 5, 3, 5, stride=(1, 2), padding=(2, 1), extra=(0, 1),
                                            dilation=(2, 1)),
}


# OWN_FILTER (conftest): variants of one filter shape, refused elsewhere with the reason and swept above as
# skips; the capability cases give them that shape, so that they still meet every capability they
# declare, alone and in combination. TILE_TRANSFORMS: variants whose Inf outputs widen to whole tiles.


def within_stride(name, case):
    limit = CAPS[name]["max_stride"]
    return not limit or max(case.stride) <= limit


def shape_rows():
    return [pytest.param(name, shape, id=f"{name}-{shape}") for name in NAMES for shape, case in SHAPES.items()
            if (CAPS[name]["dilation"] or case.dilation == (1, 1)) and within_stride(name, case)]


@pytest.mark.parametrize("name,shape", shape_rows())
def test_shape_sweep(name, shape, rng):
    skip_unavailable(name)
    case = for_variant(name, SHAPES[shape])
    try:
        check_against_oracle(name, case, rng)
    except ConvUnsupportedError as exc:
        # A limit of the variant's own (checked, not skipped: test_declared_capability holds it to what it
        # declares), in words that name it.
        assert name in str(exc), f"{name} refused {shape} without naming itself: {exc}"


# ---- one case per declared capability, and cases mixing them ----

BASE = ConvCase(2, 4, 11, 13, 6, 3, 3, padding=(1, 1))  # C and M divisible by 2; output 11x13 (odd)
GROUPED = {
    "groups2": BASE.with_(groups=2),
    "depthwise": ConvCase(2, 5, 12, 10, 5, 3, 3, padding=(1, 1), groups=5),
    "depthwise_x2_stride2": ConvCase(1, 3, 13, 14, 6, 3, 3, stride=(2, 2), padding=(1, 1), groups=3),
}
POOLS = {
    "pool2_floor": dict(pool=(2, 2), pool_stride=(2, 2), pool_ceil=False),   # 11x13 -> 5x6, last row/col dropped
    "pool2_ceil": dict(pool=(2, 2), pool_stride=(2, 2), pool_ceil=True),     # 11x13 -> 6x7, partial windows
    "pool3s2_ceil": dict(pool=(3, 3), pool_stride=(2, 2), pool_ceil=True),   # overlapping, 11x13 -> 5x6 (+partial)
    "pool3x2s2x1_ceil": dict(pool=(3, 2), pool_stride=(2, 1), pool_ceil=True),
    "pool4_ceil": dict(pool=(4, 4), pool_stride=(4, 4), pool_ceil=True),     # 11x13 -> 3x4, last row/col partial
}
# Shapes of the mixed cases: stride 2 with end padding and a batch of 3, a rectangular kernel with
# dilation, an even kernel with 'same' padding and stride along w, a tiny 'valid' one.
MIXED_SHAPES = [
    ConvCase(3, 6, 12, 10, 6, 3, 3, stride=(2, 2), padding=(1, 1), extra=(1, 0)),
    ConvCase(2, 4, 9, 14, 8, 3, 5, padding=(1, 2), dilation=(2, 1)),
    ConvCase(1, 6, 16, 11, 12, 2, 3, stride=(1, 2), padding=(0, 1), extra=(1, 0)),
    ConvCase(2, 2, 7, 7, 4, 3, 3),
]


def capability_cases(name) -> dict:
    """id -> case for every capability the variant declares beyond fp32 NCHW/MCKK, no bias, no epilogue."""
    caps = CAPS[name]
    cases = {}
    for x_dtype, y_dtype in itertools.product(caps["in_dtypes"], caps["out_dtypes"]):
        if (x_dtype, y_dtype) != ("f32", "f32"):
            cases[f"dtype_{x_dtype}_{y_dtype}"] = BASE.with_(x_dtype=x_dtype, y_dtype=y_dtype)
    for x_layout, w_layout, y_layout in itertools.product(caps["layouts"], caps["filter_layouts"], caps["layouts"]):
        if (x_layout, w_layout, y_layout) != ("NCHW", "MCKK", "NCHW"):
            cases[f"layout_{x_layout}_{w_layout}_{y_layout}"] = BASE.with_(x_layout=x_layout, w_layout=w_layout,
                                                                          y_layout=y_layout)
    if caps["groups"]:
        cases.update(GROUPED)
    if caps["bias"]:
        cases["bias"] = BASE.with_(bias=True)
    if "relu" in caps["epilogues"]:
        cases["relu"] = BASE.with_(epilogue="relu", bias=caps["bias"])
    if "relu_maxpool" in caps["epilogues"]:
        for pool_id, pool in POOLS.items():
            cases[f"relu_{pool_id}"] = BASE.with_(epilogue="relu_maxpool", bias=caps["bias"], **pool)
    if "silu" in caps["epilogues"]:
        cases["silu"] = BASE.with_(epilogue="silu", bias=caps["bias"])
    if name in CAUSAL:  # causal along w: KW-1 zeros before, none after
        cases["causal"] = BASE.with_(padding=(1, 2), extra=(0, -2), bias=caps["bias"])
    if cases:
        cases.update(mixed_cases(name))
    return {case_id: as_family(name, case.with_(**OWN_FILTER.get(name, {}))) for case_id, case in cases.items()}


def mixed_cases(name) -> dict:
    """Cases that combine the declared capabilities, cycling through each list so that, between them,
    every dtype, layout and epilogue appears with the others."""
    caps = CAPS[name]
    cases = {}
    for k, shape in enumerate(MIXED_SHAPES):
        if shape.dilation != (1, 1) and not caps["dilation"]:
            shape = shape.with_(dilation=(1, 1))
        if not within_stride(name, shape):
            continue
        pick = lambda options, shift=0: options[(k + shift) % len(options)]  # noqa: E731
        groups = pick([2, shape.C, 1]) if caps["groups"] else 1
        epilogue = pick(caps["epilogues"], 1)
        case = shape.with_(x_dtype=pick(caps["in_dtypes"], 1), y_dtype=pick(caps["out_dtypes"], 2),
                           x_layout=pick(caps["layouts"]), y_layout=pick(caps["layouts"], 1),
                           w_layout=pick(caps["filter_layouts"], k // 2), groups=groups, bias=caps["bias"],
                           epilogue=epilogue, **(POOLS["pool2_ceil"] if k % 2 else POOLS["pool3s2_ceil"]))
        cases[f"mixed{k}"] = case
    return cases


CAPABILITY_CASES = {name: capability_cases(name) for name in NAMES}


@pytest.mark.parametrize("name,case_id", [pytest.param(name, case_id, id=f"{name}-{case_id}")
                                          for name in NAMES for case_id in CAPABILITY_CASES[name]])
def test_declared_capability(name, case_id, rng):
    skip_unavailable(name)
    case = for_variant(name, CAPABILITY_CASES[name][case_id])
    try:
        check_against_oracle(name, case, rng)
    except ConvUnsupportedError as exc:
        pytest.fail(f"{name} declares what {case_id} needs but refused {case}: {exc}")


# ---- bf16's range: a variant that takes bf16 must keep what bf16 can hold ----

BF16_SCALES = {"tiny": 1e-6, "huge": 1e6}  # fp16 holds neither (subnormal below 6e-5, infinite above 65504)


@pytest.mark.parametrize("scale_id", list(BF16_SCALES))
@pytest.mark.parametrize("name", [n for n in NAMES if "bf16" in CAPS[n]["in_dtypes"]])
def test_bf16_range(name, scale_id, rng):
    """bf16 activations of real networks span fp32's exponents (a random-init MobileNetV2's are about
    1e-6): operands of 1e-6 or 1e6 (products of 1e-12 or 1e12, held by fp32 accumulators) must come out
    within the variant's bound, not flushed by an fp16 stage on the way."""
    skip_unavailable(name)
    case = for_variant(name, as_family(name, BASE.with_(x_dtype="bf16", y_dtype="f32")))
    x, w, bias = pr.random_operands(case, rng)
    x = pr.quantize(x * BF16_SCALES[scale_id], "bf16")
    y = pr.run_case(name, case, x, w, bias)
    ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    err, bound = rel_l2(y, ref), pr.error_bound(name, case.x_dtype, case.y_dtype)
    assert err <= bound, f"{name} on bf16 x of scale {BF16_SCALES[scale_id]:g}: relative L2 error {err:.2e} > {bound:.2e}"


# ---- fused epilogue == conv (+ bias), then ReLU / max-pool in float32 ----

def fused_rows():
    rows = []
    for name in NAMES:
        caps = CAPS[name]
        if not FACTS[name].exact:
            continue
        low_y = caps["out_dtypes"][-1]  # the least precise y: rounding must commute with the epilogue
        nhwc = "NHWC" if "NHWC" in caps["layouts"] else "NCHW"
        if "relu" in caps["epilogues"]:
            rows.append(pytest.param(name, "relu", BASE.with_(epilogue="relu", bias=caps["bias"]),
                                     id=f"{name}-relu"))
        if "relu_maxpool" in caps["epilogues"]:
            for pool_id in ("pool2_floor", "pool3s2_ceil"):
                rows.append(pytest.param(name, pool_id, BASE.with_(epilogue="relu_maxpool", bias=caps["bias"],
                                                                   **POOLS[pool_id]), id=f"{name}-{pool_id}"))
            rows.append(pytest.param(name, "pool2_ceil_low_y",
                                     BASE.with_(epilogue="relu_maxpool", bias=caps["bias"], y_dtype=low_y,
                                                y_layout=nhwc, **POOLS["pool2_ceil"]),
                                     id=f"{name}-pool2_ceil_{low_y}_{nhwc}"))
    return rows


def separate_epilogue(y_conv, case):
    """ReLU and max-pool applied in NumPy float32 to the stored output of the unfused run."""
    y = relu_reference(y_conv.astype(np.float32))
    if case.epilogue == "relu_maxpool":
        y = max_pool_reference(y, case.pool, case.pool_stride, case.pool_ceil)
    return y


@pytest.mark.parametrize("name,label,case", fused_rows())
def test_fused_epilogue_matches_separate_ops(name, label, case, rng):
    skip_unavailable(name)
    case = for_variant(name, as_family(name, case))
    x, w, bias = pr.random_operands(case, rng)
    fused = pr.run_case(name, case, x, w, bias).astype(np.float32)
    separate = separate_epilogue(pr.run_case(name, case.with_(epilogue="none"), x, w, bias), case)
    # A y in fp16/bf16 may round one ulp the other way where the two paths' fp32 sums differ.
    pr.assert_fused_matches(fused, separate, 1e-6 + 2 * pr.HALF_ROUNDING[case.y_dtype], f"{name} {label} on {case}")


# ---- undeclared capabilities are refused, naming the parameter ----

def refusal_cases(name) -> dict:
    """id -> (case, words the message must contain) for each capability the variant does not declare."""
    caps = CAPS[name]
    base = for_variant(name, as_family(name, BASE))
    cases = {}
    for dtype in pr.DTYPES:
        if dtype not in caps["in_dtypes"]:
            cases[f"x_dtype_{dtype}"] = (base.with_(x_dtype=dtype), ["x_dtype", dtype])
        if dtype not in caps["out_dtypes"]:
            cases[f"y_dtype_{dtype}"] = (base.with_(y_dtype=dtype), ["y_dtype", dtype])
    for layout in pr.LAYOUTS:
        if layout not in caps["layouts"]:
            cases[f"x_layout_{layout}"] = (base.with_(x_layout=layout), ["x_layout", layout])
            cases[f"y_layout_{layout}"] = (base.with_(y_layout=layout), ["y_layout", layout])
    for layout in pr.FILTER_LAYOUTS:
        if layout not in caps["filter_layouts"]:
            cases[f"w_layout_{layout}"] = (base.with_(w_layout=layout), ["w_layout", layout])
    for epilogue in pr.EPILOGUES:
        if epilogue not in caps["epilogues"]:
            cases[f"epilogue_{epilogue}"] = (base.with_(epilogue=epilogue), ["epilogue"])
    if not caps["groups"]:
        cases["groups"] = (base.with_(groups=2), ["groups"])
    if not caps["bias"]:
        cases["bias"] = (base.with_(bias=True), ["bias"])
    if not caps["dilation"]:
        cases["dilation"] = (base.with_(dilation=(2, 1)), ["dilation"])
    if caps["max_stride"]:
        cases["stride"] = (base.with_(stride=(caps["max_stride"] + 1, 1)), ["stride"])
    if caps["compute"] != "exact":
        cases["compute_exact"] = (base.with_(compute="exact"), ["compute"])
        levels = list(pr.COMPUTE)  # the level just below the variant's own: e.g. fp16's partial sums need "fast"
        below = levels[levels.index(caps["compute"]) - 1]
        if below != "exact":
            cases[f"compute_{below}"] = (base.with_(compute=below), ["compute"])
    if name not in CAUSAL:
        cases["causal"] = (base.with_(padding=(1, 2), extra=(0, -2)), ["fewer zeros after", "causal"])
    return cases


REFUSAL_CASES = {name: refusal_cases(name) for name in NAMES}
REFUSAL_ROWS = [pytest.param(name, case_id, id=f"{name}-{case_id}")
                for name in NAMES for case_id in REFUSAL_CASES[name]]


@pytest.mark.parametrize("name,case_id", REFUSAL_ROWS)
def test_undeclared_capability_refused(name, case_id, rng):
    case, words = REFUSAL_CASES[name][case_id]
    status, message = pr.supports(name, case)
    assert status == UNSUPPORTED, f"{name} accepted {case_id} ({case}) without declaring it: status {status}"
    for word in words:
        assert word in message, f"{name} refused {case_id} with {message!r}, which does not name {word!r}"
    if FACTS[name].available:  # and a real call is refused the same way, before it writes anything
        x, w, bias = pr.random_operands(case, rng)
        with pytest.raises(ConvUnsupportedError, match=words[0]):
            pr.run_case(name, case, x, w, bias)


# ---- IEEE: an Inf weight at a padded border ----

INF_CASES = {
    # (case, (m, c, kh, kw) of the Inf weight, its sign)
    "pad1_corner": (ConvCase(2, 3, 9, 10, 4, 3, 3, padding=(1, 1)), (1, 2, 0, 2), 1.0),
    "same_even_end": (ConvCase(1, 2, 8, 7, 3, 4, 2, padding=(1, 0), extra=(1, 1)), (2, 1, 3, 1), -1.0),
}


@pytest.mark.parametrize("inf_case", list(INF_CASES))
@pytest.mark.parametrize("name", NAMES)
def test_inf_weight_at_padded_border(name, inf_case, rng):
    skip_unavailable(name)
    case, at, sign = INF_CASES[inf_case]
    case = for_variant(name, case)
    if name in OWN_FILTER and any(getattr(case, k) != v for k, v in OWN_FILTER[name].items()):
        pytest.skip(f"{name} computes {OWN_FILTER[name]} only")
    if name in OWN_FAMILY:  # test_causal_conv1d puts an Inf weight on its causal padding
        pytest.skip(f"{name} computes {OWN_FAMILY[name]}")
    x, w, _ = pr.random_operands(case, rng)
    w[at] = sign * np.inf
    y = pr.run_case(name, case, x, w)
    with np.errstate(invalid="ignore"):
        ref = conv2d_reference(x, w, **case.oracle_kwargs())
    assert np.isnan(ref).any(), "the case must put the Inf weight on padding"
    if name in TILE_TRANSFORMS:
        finite = np.isfinite(ref)
        assert np.array_equal(np.isfinite(y), finite), (f"{name}: {int((~np.isfinite(y)).sum())} non-finite "
                                                        f"outputs, the oracle {int((~finite).sum())}")
        err, bound = rel_l2(y[finite], ref[finite]), pr.error_bound(name, case.x_dtype, case.y_dtype)
        assert err <= bound, f"{name}: relative L2 error {err:.2e} on the finite outputs"
        return
    pr.check_non_finite(name, y, ref, pr.error_bound(name, case.x_dtype, case.y_dtype))


# ---- the cpu variant's half-precision conversions, bit for bit ----

def identity_case(n, x_dtype, y_dtype):
    """y = x through a 1x1 filter of 1.0: the conversions of x_dtype -> fp32 -> y_dtype alone."""
    return ConvCase(1, 1, 1, n, 1, 1, 1, x_dtype=x_dtype, y_dtype=y_dtype)


def same_values(a, b):
    return np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_cpu_widens_every_half_value_exactly(dtype):
    bits = np.arange(1 << 16, dtype=np.uint16)
    values = pr.from_storage(bits.view(np.float16) if dtype == "f16" else bits, dtype)
    y = pr.run_case("cpu", identity_case(bits.size, dtype, "f32"), values[None, None, None, :],
                    np.ones((1, 1, 1, 1)))
    assert same_values(y.ravel(), values)


def rounding_probes(rng):
    """float32 values that test round-to-nearest-even into f16 and bf16: random bit patterns (every
    exponent), the exact midpoints between neighbouring f16 values (ties, subnormals included) and
    the edges of overflow and underflow."""
    random = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f16 = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    midpoints = ((f16[:-1] + f16[1:]) / 2).astype(np.float32)  # exact: 12 significant bits
    edges = np.array([65504, 65519.996, 65520, 65536, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0001, 2.0 ** -26,
                      2.0 ** -14, 3.3895314e38, 3.4028235e38, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, np.inf, np.nan,
                      1e-45, 0.0], np.float32)
    values = np.concatenate([random, midpoints, edges])
    return np.concatenate([values, -values])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_cpu_rounds_to_half_like_numpy(dtype, rng):
    with np.errstate(over="ignore", invalid="ignore"):
        values = rounding_probes(rng)
        expected = pr.from_storage(pr.to_storage(values, dtype) if dtype == "bf16" else values.astype(np.float16),
                                   dtype)
        x = values.astype(np.float64)[None, None, None, :]
    y = pr.run_case("cpu", identity_case(values.size, "f32", dtype), x, np.ones((1, 1, 1, 1)))
    assert same_values(y.ravel(), expected), \
        f"differs at {values[~((y.ravel() == expected) | (np.isnan(expected) & np.isnan(y.ravel())))][:8]}"


def test_bf16_helper_rounds_to_nearest_even():
    one = np.float32(1.0)
    probes = np.array([one + 2.0 ** -8, one + 3 * 2.0 ** -8, one + 2.0 ** -8 + 2.0 ** -20, 3.4028235e38, -np.inf],
                      np.float32)
    expected = np.array([1.0, 1.0 + 2 * 2.0 ** -7, 1.0 + 2.0 ** -7, np.inf, -np.inf], np.float32)
    assert same_values(pr.f32_from_bf16_bits(pr.bf16_bits_from_f32(probes)), expected)
    assert np.isnan(pr.f32_from_bf16_bits(pr.bf16_bits_from_f32(np.array([np.nan], np.float32))))[0]
