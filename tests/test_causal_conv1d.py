"""Causal depthwise conv1d (sequence models' short conv): padding="causal", the SiLU epilogue, the
depthwise_conv1d variant's three kernels and the one-step state update, against the float64 oracle on
fresh random data with poisoned outputs; odd lengths and channel counts that do not divide the kernels'
8-element vectors; NaN / Inf placement. The torch ops are in test_torch_causal.py."""
import numpy as np
import pytest
import problem_runner as pr
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv

# depthwise_conv1d's configurations: rows_* (NCL, 4 or 1 pieces a lane), cols_* (NLC, 16 / 8 / 4 steps a thread), simple
CONFIGS = ["rows_p4", "rows_p1", "cols_r16", "cols_r8", "cols_r4", "simple"]
HALF_BOUND = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 8e-3}


def silu(v):
    with np.errstate(over="ignore", invalid="ignore"):
        return v / (1.0 + np.exp(-v))


def causal_reference(x, w, bias=None, dilation=1, epilogue=None):
    """(B, D, L) x, (D, 1, K) w: y[b, d, l] = act(bias[d] + sum_k w[d, k] x[b, d, l - d*(K-1) + d*k])."""
    D, _, K = w.shape
    pad = dilation * (K - 1)
    y = conv2d_reference(x[:, :, None, :], w[:, :, None, :], (1, 1), (0, pad), (1, dilation), groups=D, bias=bias,
                         padding_extra=(0, -pad), epilogue="relu" if epilogue == "relu" else "none")[:, :, 0, :]
    return silu(y) if epilogue == "silu" else y


def exact_half(a):
    """fp16 data and the float64 of its exact values (the oracle's input)."""
    h = a.astype(np.float16)
    return h, h.astype(np.float64)


@pytest.mark.parametrize("epilogue", [None, "relu", "silu"])
@pytest.mark.parametrize("B, D, L, K, dilation, bias", [
    (2, 6, 37, 4, 1, True), (1, 3, 9, 2, 1, False), (3, 5, 64, 3, 2, True), (1, 4, 5, 7, 1, True),
])
def test_cpu_variant_computes_the_causal_conv(B, D, L, K, dilation, bias, epilogue, rng):
    """The cpu variant (every machine, CI included) takes causal padding and SiLU: output l sees inputs <= l."""
    x = rng.uniform(-2, 2, (B, D, L)).astype(np.float32)
    w = rng.uniform(-1, 1, (D, 1, K)).astype(np.float32)
    b = rng.uniform(-1, 1, D).astype(np.float32) if bias else None
    out = np.full((B, D, L), np.nan, np.float32)
    y = pyconv.conv1d(x, w, b, padding="causal", dilation=dilation, groups=D, epilogue=epilogue, variant="cpu",
                      out=out)
    assert y is out and y.shape == (B, D, L)
    assert rel_l2(y, causal_reference(x, w, b, dilation, epilogue)) <= 1e-6
    # causality: changing the last input changes only the last output (before a ReLU could hide it)
    x2 = x.copy()
    x2[:, :, -1] += 1.0
    y1, y2 = (pyconv.conv1d(a, w, b, padding="causal", dilation=dilation, groups=D, variant="cpu") for a in (x, x2))
    assert np.array_equal(y2[:, :, :-1], y1[:, :, :-1]) and not np.array_equal(y2[:, :, -1], y1[:, :, -1])


def test_silu_epilogue_on_an_ordinary_conv(rng):
    x = rng.uniform(-3, 3, (2, 3, 11, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    y = pyconv.conv2d(x, w, b, padding=1, epilogue="silu", variant="cpu")
    assert rel_l2(y, silu(conv2d_reference(x, w, padding=(1, 1), bias=b))) <= 1e-6


def test_causal_padding_rules():
    x = np.ones((1, 2, 8), np.float32)
    w = np.ones((2, 1, 3), np.float32)
    assert pyconv.conv1d(x, w, padding="causal", groups=2, variant="cpu").shape == (1, 2, 8)
    assert pyconv.conv1d(x, w, padding="causal", dilation=3, groups=2, variant="cpu").shape == (1, 2, 8)
    with pytest.raises(pyconv.ConvError, match="'valid', 'same' or 'causal'"):
        pyconv.conv1d(x, w, padding="left", groups=2, variant="cpu")
    with pytest.raises(pyconv.ConvError, match="epilogue must be None, 'relu', 'silu'"):
        pyconv.conv1d(x, w, groups=2, epilogue="gelu", variant="cpu")


def inf_weight_on_causal_padding(variant, config, rng, layout="NCHW"):
    """An Inf first tap meets the causal zeros of the first K-1 outputs: 0 * Inf = NaN there, as in the
    oracle (and PyTorch); the rest stay finite (positive data, so Inf + finite)."""
    B, D, L, K = 2, 16, 20, 4
    x = rng.uniform(0.5, 1, (B, D, 1, L)).astype(np.float32)
    w = rng.uniform(0.5, 1, (D, 1, 1, K)).astype(np.float32)
    w[3, 0, 0, 0] = np.inf
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    y = pyconv.conv2d(x, w, padding="causal", groups=D, variant=variant, config=config)
    with np.errstate(invalid="ignore"):
        ref = causal_reference(x[:, :, 0, :].astype(np.float64), w[:, :, 0, :].astype(np.float64))
    got = np.asarray(y)[:, :, 0, :]
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.isnan(got).sum() == B * (K - 1)
    assert np.array_equal(np.isposinf(got), np.isposinf(ref))


def test_cpu_inf_weight_on_causal_padding(rng):
    inf_weight_on_causal_padding("cpu", None, rng)


@requires_gpu
@pytest.mark.parametrize("config", CONFIGS)
def test_gpu_inf_weight_on_causal_padding(config, rng):
    inf_weight_on_causal_padding("depthwise_conv1d", config, rng, "NHWC" if config.startswith("cols") else "NCHW")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("B, D, T, K, S, bias, activation", [
    (2, 5, 1, 4, 3, True, "silu"), (1, 7, 1, 4, 6, False, None), (3, 4, 3, 3, 2, True, "relu"),
    (1, 3, 5, 2, 4, True, "silu"), (2, 6, 1, 1, 1, True, None),
    (2, 6, 1, 1, 0, True, "relu"), (1, 3, 4, 1, 0, False, None),  # K = 1: an empty state (NumPy: zero strides)
])
def test_update_on_host_arrays_matches_a_full_recompute(B, D, T, K, S, bias, activation, dtype, rng):
    """NumPy operands run the step on the host (every machine, CI included): steps over a sequence give the
    causal conv of the whole sequence, the state (updated in place) holds its last S inputs, and a one-token
    x (B, D) gives y (B, D)."""
    steps = 4
    seq = rng.uniform(-2, 2, (B, D, steps * T)).astype(dtype)
    w = rng.uniform(-1, 1, (D, K)).astype(dtype)
    b = rng.uniform(-1, 1, D).astype(dtype) if bias else None
    state = np.zeros((B, D, S), dtype)
    outs = []
    for i in range(steps):
        x = seq[:, :, i * T:(i + 1) * T].copy()
        y = pyconv.conv1d_causal_update(x[:, :, 0] if T == 1 else x, state, w, b, activation=activation)
        assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == ((B, D) if T == 1 else (B, D, T))
        outs.append(y[:, :, None] if T == 1 else y)
    ref = causal_reference(seq.astype(np.float64), w.astype(np.float64)[:, None, :],
                           None if b is None else b.astype(np.float64), epilogue=activation)
    assert rel_l2(np.concatenate(outs, axis=2), ref) <= HALF_BOUND[dtype]
    whole = pyconv.conv1d(seq, w[:, None, :], b, padding="causal", groups=D, epilogue=activation, variant="cpu")
    assert np.array_equal(np.concatenate(outs, axis=2), whole)  # the same sums, step by step
    last = np.concatenate([np.zeros((B, D, S), dtype), seq], axis=2)[:, :, seq.shape[2]:]
    assert np.array_equal(state, last)


def test_update_on_torch_cpu_tensors_in_bf16(rng):
    """PyTorch's CPU tensors run on the host too (bf16 included); the result is a tensor of x's dtype."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")
    B, D, K = 2, 6, 4
    seq = torch.tensor(rng.uniform(-2, 2, (B, D, 5)), dtype=torch.bfloat16)
    w, b = (torch.tensor(rng.uniform(-1, 1, shape), dtype=torch.bfloat16) for shape in ((D, 1, K), (D,)))
    state = torch.zeros(B, D, K, dtype=torch.bfloat16)
    ys = [pyconv.conv1d_causal_update(seq[:, :, t].contiguous(), state, w, b, activation="silu") for t in range(5)]
    assert all(type(y) is torch.Tensor and y.dtype == torch.bfloat16 for y in ys)
    got = torch.stack(ys, 2).double().numpy()
    ref = causal_reference(seq.double().numpy(), w.double().numpy(), b.double().numpy(), epilogue="silu")
    assert rel_l2(got, ref) <= HALF_BOUND["bfloat16"]
    assert torch.equal(state, seq[:, :, 1:])


def test_update_on_host_refuses_bad_arguments_in_words():
    x, w = np.ones((2, 8), np.float32), np.ones((8, 4), np.float32)
    with pytest.raises(pyconv.ConvError, match=r"state_len must be in \[K-1, 2\^20\] = \[3, 1048576\], got 2"):
        pyconv.conv1d_causal_update(x, np.zeros((2, 8, 2), np.float32), w)
    with pytest.raises(pyconv.ConvError, match="B and D must agree"):
        pyconv.conv1d_causal_update(x, np.zeros((3, 8, 3), np.float32), w)
    with pytest.raises(pyconv.ConvError, match="share one dtype"):
        pyconv.conv1d_causal_update(x, np.zeros((2, 8, 3), np.float16), w)
    frozen = np.zeros((2, 8, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(pyconv.ConvError, match="state is read-only"):
        pyconv.conv1d_causal_update(x, frozen, w)
    with pytest.raises(pyconv.ConvError, match="dense"):
        pyconv.conv1d_causal_update(x, np.zeros((2, 8, 6), np.float32)[:, :, ::2], w)
    state = np.zeros((2, 8, 3), np.float32)
    assert np.array_equal(pyconv.conv1d_causal_update(x, state, w), np.ones((2, 8)))  # still usable
    assert np.array_equal(state, np.concatenate([np.zeros((2, 8, 2)), np.ones((2, 8, 1))], axis=2))


def test_update_refuses_numpy_beside_torch_tensors():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")
    x, w = np.ones((2, 8), np.float32), np.ones((8, 4), np.float32)
    with pytest.raises(pyconv.ConvError, match="all NumPy arrays or all PyTorch CPU tensors, got x ndarray, "
                                               "state Tensor, w ndarray"):
        pyconv.conv1d_causal_update(x, torch.zeros(2, 8, 3), w)


# ---- the GPU kernels ----

SHAPES = [  # B, D, L, K, dilation: vectors of 8 that fit, that do not, K = 1..7, short and odd lengths;
    # rows of 45 / 90 and 125 / 250 aligned pieces, so that warps (32 or 128 pieces) start inside rows
    (2, 16, 64, 4, 1), (1, 24, 37, 3, 1), (3, 8, 5, 2, 1), (1, 13, 100, 4, 1), (2, 32, 129, 4, 2),
    (1, 40, 16, 7, 1), (2, 8, 9, 1, 1), (1, 64, 1, 4, 1), (1, 8, 360, 4, 1), (3, 24, 1000, 3, 1),
]


def _cuda_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


def layouts_of(config):
    """The layouts a configuration computes: rows_* NCL (NCHW), cols_* NLC (NHWC), simple both."""
    return ["NCHW"] if config.startswith("rows") else ["NHWC"] if config.startswith("cols") else ["NCHW", "NHWC"]


KERNEL_DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}  # and their bytes


def takes(config, shape, dtype):
    """Whether a configuration computes the shape (depthwise_conv1d.cu's supports_*): the fast kernels
    K = 2-4 without dilation (rows_p4 fp32 only; cols_* channels a multiple of a thread's 8 bytes), simple
    every one."""
    B, D, L, K, dilation = shape
    if config == "simple":
        return True
    if not 2 <= K <= 4 or dilation != 1:
        return False
    if config == "rows_p4":
        return dtype == "float32"
    return not config.startswith("cols") or D % (8 // KERNEL_DTYPES[dtype]) == 0


KERNEL_CASES = [(c, lay, dt, sh) for c in CONFIGS for lay in layouts_of(c) for dt in KERNEL_DTYPES for sh in SHAPES]


@requires_gpu
@pytest.mark.parametrize("config, layout, dtype, shape", [case for case in KERNEL_CASES if takes(case[0], case[3], case[2])])
def test_depthwise_conv1d_kernels_match_oracle(config, layout, dtype, shape, rng):
    torch = _cuda_torch()
    B, D, L, K, dilation = shape
    tdtype = getattr(torch, dtype)
    x64 = rng.uniform(-2, 2, (B, D, 1, L))
    w64 = rng.uniform(-1, 1, (D, 1, 1, K))
    b64 = rng.uniform(-1, 1, D)
    x, w, b = (torch.tensor(a).to(tdtype) for a in (x64, w64, b64))
    x64, w64, b64 = (t.double().numpy() for t in (x, w, b))  # the exact values the kernel reads
    fmt = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    x = x.cuda().contiguous(memory_format=fmt)
    w, b = w.cuda(), b.cuda()
    for epilogue in (None, "silu", "relu"):
        out = torch.full((B, D, 1, L), float("nan"), dtype=tdtype, device="cuda").contiguous(memory_format=fmt)
        pyconv.conv2d(x, w, b, padding="causal", dilation=(1, dilation), groups=D, epilogue=epilogue,
                      variant="depthwise_conv1d", config=config, out=out, sync=True)
        ref = causal_reference(x64[:, :, 0, :], w64[:, :, 0, :], b64, dilation, epilogue)
        got = out.float().cpu().numpy()[:, :, 0, :]
        assert np.isfinite(got).all()
        bound = 1e-5 if dtype == "float32" else 4e-3 if dtype == "float16" else 2e-2
        assert rel_l2(got, ref) <= bound, (epilogue, rel_l2(got, ref))


@requires_gpu
def test_fast_configurations_refuse_what_they_do_not_take():
    """The shapes, dtypes and layouts the kernel test leaves out are refused in words, naming the
    configuration (the default then takes the simple kernel)."""
    pr.skip_unless_available("depthwise_conv1d")
    refused = [case for case in KERNEL_CASES if not takes(case[0], case[3], case[2])]
    assert refused
    for config, layout, dtype, (B, D, L, K, dilation) in refused:
        with pytest.raises(pyconv.ConvUnsupportedError, match=r"depthwise_conv1d\[(rows|cols)"):
            pyconv.Conv2dPlan((B, D, 1, L), (D, 1, 1, K), padding="causal", dilation=(1, dilation), groups=D,
                              variant="depthwise_conv1d", config=config, dtype=dtype, layout=layout)


def test_every_configuration_is_swept():
    pr.skip_unless_available("depthwise_conv1d")
    pr.check_swept_configs("depthwise_conv1d", CONFIGS)


def _causal_case(B, D, L, K, dtype="f32", layout="NCHW"):
    return pr.ConvCase(B, D, 1, L, D, 1, K, padding=(0, K - 1), extra=(0, -(K - 1)), groups=D, x_dtype=dtype,
                       y_dtype=dtype, x_layout=layout, y_layout=layout, bias=True, epilogue="silu")


def test_default_config_per_shape():
    """The untuned choice by thread count (the kernels' comments give the H200 timings behind it)."""
    pr.skip_unless_available("depthwise_conv1d")
    name = "depthwise_conv1d"
    assert pr.default_config(name, _causal_case(1, 1536, 128, 4, "bf16")) == "rows_p1"
    assert pr.default_config(name, _causal_case(8, 4096, 2048, 4, "bf16")) == "rows_p1"  # 16-bit: p1 everywhere
    assert pr.default_config(name, _causal_case(1, 12288, 16384, 4)) == "rows_p4"  # fp32, 12M threads of p4
    assert pr.default_config(name, _causal_case(1, 1536, 128, 4)) == "rows_p1"  # fp32, 12K threads of p4
    nlc = dict(layout="NHWC")
    assert pr.default_config(name, _causal_case(1, 1536, 128, 4, "bf16", **nlc)) == "cols_r4"  # 6K threads of r8
    assert pr.default_config(name, _causal_case(8, 4096, 2048, 4, "bf16", **nlc)) == "cols_r16"
    assert pr.default_config(name, _causal_case(8, 5120, 128, 4, "bf16", **nlc)) == "cols_r8"  # 82K threads of r16
    assert pr.default_config(name, _causal_case(8, 4096, 2048, 4, "f32", **nlc)) == "cols_r8"
    assert pr.default_config(name, _causal_case(2, 13, 64, 4, "f32", **nlc)) == "simple"  # 13 channels: no 8-byte words
    assert pr.default_config(name, _causal_case(2, 16, 64, 5)) == "simple"  # K = 5


@requires_gpu
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_mixed_dtypes_take_the_simple_kernel(layout, rng):
    """The fast configurations are built for x and y of one dtype and refuse others in words; the default
    then takes the simple kernel, which computes bf16 x into fp32 y."""
    torch = _cuda_torch()
    B, D, L, K = 2, 16, 40, 4
    fmt = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    x = torch.tensor(rng.uniform(-2, 2, (B, D, 1, L))).to(torch.bfloat16).cuda().contiguous(memory_format=fmt)
    w = torch.tensor(rng.uniform(-1, 1, (D, 1, 1, K))).to(torch.bfloat16).cuda()
    fast = "rows_p1" if layout == "NCHW" else "cols_r8"
    with pytest.raises(pyconv.ConvUnsupportedError, match=r"depthwise_conv1d\[(rows|cols)\] takes x and y of one"):
        pyconv.conv2d(x, w, padding="causal", groups=D, variant="depthwise_conv1d", config=fast, out_dtype="float32")
    out = torch.full((B, D, 1, L), float("nan"), device="cuda").contiguous(memory_format=fmt)
    pyconv.conv2d(x, w, padding="causal", groups=D, epilogue="silu", variant="depthwise_conv1d", out=out,
                  out_dtype="float32", sync=True)
    ref = causal_reference(x.double().cpu().numpy()[:, :, 0], w.double().cpu().numpy()[:, :, 0], epilogue="silu")
    assert rel_l2(out.cpu().numpy()[:, :, 0], ref) <= 1e-5


def test_rows_p4_takes_fp32_alone():
    """rows_p4 is built for fp32 rows; 16-bit ones are refused in words (rows_p1 computes them)."""
    pr.skip_unless_available("depthwise_conv1d")
    assert pr.default_config("depthwise_conv1d", _causal_case(8, 4096, 2048, 4, "bf16")) == "rows_p1"
    with pytest.raises(pyconv.ConvUnsupportedError, match=r"depthwise_conv1d\[rows_p4\] takes fp32 x and y"):
        pyconv.Conv2dPlan((2, 16, 1, 64), (16, 1, 1, 4), padding="causal", groups=16, variant="depthwise_conv1d",
                          config="rows_p4", dtype="bfloat16")


@requires_gpu
@pytest.mark.parametrize("config", ["cols_r16", "cols_r8", "cols_r4"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cols_on_operands_off_word_boundaries(config, dtype, rng):
    """x and y one element into their buffers (off the cols kernel's 8-byte words): the cols
    configurations hand them to the simple kernel, which gives the same result."""
    torch = _cuda_torch()
    B, D, L, K = 2, 16, 24, 4
    tdtype = getattr(torch, dtype)

    def nlc_view(buf):  # (B, D, 1, L) channels-last, starting one element into buf
        return buf[1:].view(B, 1, L, D).permute(0, 3, 1, 2)

    x = nlc_view(torch.empty(B * L * D + 1, dtype=tdtype, device="cuda"))
    x.copy_(torch.tensor(rng.uniform(-2, 2, (B, D, 1, L))).to(tdtype))
    w = torch.tensor(rng.uniform(-1, 1, (D, 1, 1, K))).to(tdtype).cuda()
    b = torch.tensor(rng.uniform(-1, 1, D)).to(tdtype).cuda()
    out = nlc_view(torch.full((B * L * D + 1,), float("nan"), dtype=tdtype, device="cuda"))
    assert x.data_ptr() % 8 and out.data_ptr() % 8
    pyconv.conv2d(x, w, b, padding="causal", groups=D, epilogue="silu", variant="depthwise_conv1d", config=config,
                  out=out, sync=True)
    ref = causal_reference(*(t.double().cpu().numpy()[:, :, 0] for t in (x, w)), b.double().cpu().numpy(),
                           epilogue="silu")
    assert rel_l2(out.float().cpu().numpy()[:, :, 0], ref) <= HALF_BOUND[dtype]


@requires_gpu
@pytest.mark.parametrize("config", CONFIGS)
def test_depthwise_conv1d_places_nan_and_inf_as_the_oracle(config, rng):
    torch = _cuda_torch()
    B, D, L, K = 2, 16, 40, 4
    x = rng.uniform(-1, 1, (B, D, 1, L))
    x[0, 3, 0, 10] = np.nan
    x[1, 5, 0, 0] = np.inf
    x[1, 7, 0, 39] = -np.inf
    w = rng.uniform(0.1, 1, (D, 1, 1, K))
    layout = torch.channels_last if config.startswith("cols") else torch.contiguous_format
    xt = torch.tensor(x, dtype=torch.float32, device="cuda").contiguous(memory_format=layout)
    out = torch.full((B, D, 1, L), 7.0, device="cuda").contiguous(memory_format=layout)
    pyconv.conv2d(xt, torch.tensor(w, dtype=torch.float32, device="cuda"), padding="causal", groups=D,
                  variant="depthwise_conv1d", config=config, out=out, sync=True)
    ref = causal_reference(x[:, :, 0, :], w[:, :, 0, :])
    got = out.cpu().numpy()[:, :, 0, :]
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(np.isinf(got), np.isinf(ref))
    assert np.isnan(got).sum() == K and np.isinf(got).sum() == K + 1  # each bad input reaches K outputs (or 1)
    finite = np.isfinite(ref)
    assert rel_l2(got[finite], ref[finite]) <= 1e-6


@requires_gpu
def test_auto_and_other_variants_on_causal_problems(rng):
    """auto picks among the variants that take causal padding; the rest refuse it in words."""
    torch = _cuda_torch()
    x = torch.tensor(rng.uniform(-1, 1, (2, 32, 1, 50)), dtype=torch.float32, device="cuda")
    w = torch.tensor(rng.uniform(-1, 1, (32, 1, 1, 4)), dtype=torch.float32, device="cuda")
    y = pyconv.conv2d(x, w, padding="causal", groups=32, epilogue="silu", sync=True)
    ref = causal_reference(x.double().cpu().numpy()[:, :, 0], w.double().cpu().numpy()[:, :, 0], epilogue="silu")
    assert rel_l2(y.cpu().numpy()[:, :, 0], ref) <= 1e-5
    with pytest.raises(pyconv.ConvUnsupportedError, match="no fewer zeros after than before"):
        pyconv.conv2d(x, w, padding="causal", groups=32, variant="grouped_direct")
    with pytest.raises(pyconv.ConvUnsupportedError, match="does not fuse the epilogue SiLU"):
        pyconv.conv2d(x, w, padding=3, groups=32, epilogue="silu", variant="grouped_direct")


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("B, D, T, K, S", [
    (1, 64, 1, 4, 3), (3, 37, 1, 4, 5), (2, 16, 3, 2, 1), (4, 8, 6, 3, 2),
    # one token with K-1 or K state values: the one-step kernel (odd D too)
    (5, 40, 1, 4, 4), (2, 19, 1, 3, 2), (2, 24, 1, 3, 3), (3, 16, 1, 2, 1), (1, 9, 1, 2, 2),
    # states of 3 values (6-byte rows in 16-bit) over grids ending in a partial warp (111 rows: 3 warps
    # and 15 rows; 400 rows: two blocks, the second ending in a warp of 16)
    (3, 37, 1, 4, 3), (2, 200, 1, 4, 3),
    # 16-bit states of 1 or 3 values with D even on few rows (one a thread: too few for two), over two
    # blocks, the second partial; and 16-bit rows of 2 values, one a thread
    (3, 1032, 1, 4, 3), (2, 520, 1, 2, 1), (2, 1096, 1, 3, 2),
])
@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("off_16_bytes", [None, "state", "x"])
def test_state_update_matches_a_full_recompute(B, D, T, K, S, dtype, activation, off_16_bytes, rng):
    """Steps of the update over a sequence give the causal conv of the whole sequence, and the state
    holds its last S inputs. A state that does not start on a 16-byte boundary takes the general kernel; x
    that does not, the one-step kernel's one row a thread. With SiLU a bias, without it none."""
    _check_update_steps(B, D, T, K, S, dtype, activation, off_16_bytes, rng)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("K, S", [(4, 3), (2, 1), (3, 3), (4, 4), (3, 2)])
@pytest.mark.parametrize("off_16_bytes", [None, "x"])
def test_state_update_on_more_rows_than_the_device_holds(K, S, dtype, off_16_bytes, rng):
    """Past 1024 rows a streaming multiprocessor, a thread of the one-step kernel takes two adjacent rows where
    a 16-bit state is no multiple of 16 bytes (16 rows past the bound: the last block partial); x off its
    boundary keeps one row a thread; fp32 states, one row."""
    torch = _cuda_torch()
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    _check_update_steps(2, 512 * sms + 8, 1, K, S, dtype, "silu", off_16_bytes, rng)


def _check_update_steps(B, D, T, K, S, dtype, activation, off_16_bytes, rng):
    torch = _cuda_torch()
    tdtype = getattr(torch, dtype)
    steps = 3
    seq = torch.tensor(rng.uniform(-2, 2, (B, D, steps * T)), dtype=tdtype, device="cuda")
    w = torch.tensor(rng.uniform(-1, 1, (D, K)), dtype=tdtype, device="cuda")
    b = torch.tensor(rng.uniform(-1, 1, D) if activation else np.zeros(D), dtype=tdtype, device="cuda")
    shift = 1 if off_16_bytes == "state" else 0
    state = torch.zeros(B * D * S + 1, dtype=tdtype, device="cuda")[shift:][:B * D * S].view(B, D, S)
    outs = []
    for i in range(steps):
        x = seq[:, :, i * T:(i + 1) * T].contiguous()
        if off_16_bytes == "x":
            x = torch.empty(x.numel() + 1, dtype=tdtype, device="cuda")[1:].view(x.shape).copy_(x)
        y = pyconv.conv1d_causal_update(x[:, :, 0] if T == 1 else x, state, w, b if activation else None,
                                        activation=activation)
        outs.append(y[:, :, None] if T == 1 else y)
    got = torch.cat(outs, dim=2).double().cpu().numpy()
    s64 = seq.double().cpu().numpy()
    ref = causal_reference(s64, w.double().cpu().numpy()[:, None, :], b.double().cpu().numpy(), epilogue=activation)
    assert rel_l2(got, ref) <= HALF_BOUND[dtype]
    assert np.isfinite(got).all()
    last = np.concatenate([np.zeros((B, D, S)), s64], axis=2)[:, :, -S:]
    assert np.array_equal(state.double().cpu().numpy(), last)


@requires_gpu
def test_state_update_refuses_bad_arguments_in_words():
    torch = _cuda_torch()
    x, w = torch.ones((2, 8), device="cuda"), torch.ones((8, 4), device="cuda")
    with pytest.raises(pyconv.ConvError, match=r"state_len must be in \[K-1"):
        pyconv.conv1d_causal_update(x, torch.zeros((2, 8, 2), device="cuda"), w)
    with pytest.raises(pyconv.ConvError, match="B and D must agree"):
        pyconv.conv1d_causal_update(x, torch.zeros((3, 8, 3), device="cuda"), w)
    with pytest.raises(pyconv.ConvError, match="share one dtype"):
        pyconv.conv1d_causal_update(x, torch.zeros((2, 8, 3), device="cuda", dtype=torch.float16), w)
    y = pyconv.conv1d_causal_update(x, torch.zeros((2, 8, 3), device="cuda"), w)  # still usable
    assert torch.equal(y, torch.ones((2, 8), device="cuda"))


@requires_gpu
def test_state_update_on_a_stream_of_its_own(rng):
    """stream= another stream than PyTorch's current one: the result comes from that stream's pool and is
    right once that stream is done; a pyconv.Stream with DeviceArray operands too."""
    torch = _cuda_torch()
    B, D, K = 2, 24, 4
    x64, s64, w64 = rng.uniform(-1, 1, (B, D)), rng.uniform(-1, 1, (B, D, K - 1)), rng.uniform(-1, 1, (D, K))
    expected = (np.concatenate([s64, x64[:, :, None]], axis=2) * w64).sum(axis=2)
    x, w = (torch.tensor(a, dtype=torch.float32, device="cuda") for a in (x64, w64))
    state = torch.tensor(s64, dtype=torch.float32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    y = pyconv.conv1d_causal_update(x, state, w, stream=side)
    side.synchronize()
    assert rel_l2(y.cpu().numpy(), expected) <= 1e-6
    stream = pyconv.Stream()
    xd, wd = pyconv.DeviceArray.from_host(x64.astype(np.float32)), pyconv.DeviceArray.from_host(w64.astype(np.float32))
    sd = pyconv.DeviceArray.from_host(s64.astype(np.float32))
    pyconv.synchronize()
    yd = pyconv.conv1d_causal_update(xd, sd, wd, stream=stream)
    assert isinstance(yd, pyconv.DeviceArray)
    assert rel_l2(yd.get(stream), expected) <= 1e-6
    assert np.allclose(sd.get(stream), np.concatenate([s64, x64[:, :, None]], axis=2)[:, :, 1:].astype(np.float32))
