"""Stream order under programmatic dependent launch (cuda/kernels/grid_dependency.cuh).

The kernels of the performance families (implicit_gemm_f16, implicit_gemm_tf32, implicit_gemm, winograd,
grouped_direct: their GEMMs, operand staging, filter transforms, split-K reductions and direct kernels, plane_mm
and rows_mm aside; grid_dependency.cuh lists them) launch as programmatic dependents of the stream's previous kernel and may
start before it ends; each must wait on the GPU before it reads what that kernel wrote or overwrites what it
reads. Each launch configuration runs here four times back to back on one stream with one plan and one
workspace, each call reading the previous call's output, and later calls overwriting buffers earlier ones read:

    A -> B,  B -> C (reads B),  C -> A (overwrites A, which call 1 read),  A -> B (overwrites B)

B and C start poisoned (NaN). A call that reads too early sees NaN or the wrong values; one that writes
too early changes an earlier call's input. The three buffers are checked against the float64 chain.
Runs on a GPU machine (skipped with the reason elsewhere)."""
import numpy as np
import pytest
from conftest import requires_gpu
from oracle import conv2d_reference, rel_l2

import problem_runner as pr
from problem_runner import ConvCase
from pyconv._lib import ConvUnsupportedError, check, ffi, lib
from pyconv.api import variant_configs
from pyconv.device import DeviceArray, Stream, stream_handle, synchronize, use_device

NHWC = dict(x_layout="NHWC", w_layout="MKKC", y_layout="NHWC")
# Chains need C == M and y in x's dtype, layout and size (3x3 with padding 1, or 1x1). A configuration
# runs on every case of its variant's list it takes (at least one): staged and in-place operands, split
# and whole K.
CHAIN_CASES = {
    "implicit_gemm_f16": [
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", bias=True, **NHWC),
        ConvCase(1, 64, 24, 24, 64, 1, 1, x_dtype="bf16", y_dtype="bf16", **NHWC),  # the plain TMA map
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), bias=True),  # fp32 NCHW: staged, or read in place
        # depthwise fp16 NHWC: the dw tiles (banded GEMMs per channel)
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=64, x_dtype="f16", y_dtype="f16", bias=True,
                 **NHWC),
        # 8 channels: the stem tile (each window gathered as the reduction)
        ConvCase(2, 8, 20, 20, 8, 3, 3, padding=(1, 1), x_dtype="f16", y_dtype="f16", bias=True, **NHWC),
    ],
    "implicit_gemm_tf32": [
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), bias=True),
        ConvCase(2, 64, 20, 20, 64, 1, 1, bias=True),  # 1x1 fp32 NCHW: the nchw_mma tiles read x and w in place
        ConvCase(1, 128, 7, 7, 128, 1, 1, bias=True),  # and their cluster split-K (2-4 tiles, 8 k-tiles)
    ],
    "implicit_gemm": [
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), bias=True),
        ConvCase(1, 128, 9, 9, 128, 3, 3, padding=(1, 1), bias=True, **NHWC),  # split-K
    ],
    "winograd": [  # the filter transform (a dependent) into the workspace, then the GEMM that reads it
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), bias=True),
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=8, bias=True, **NHWC),
        ConvCase(2, 16, 20, 20, 16, 7, 7, padding=(3, 3), bias=True),  # the F(2, 7) rows
        ConvCase(2, 16, 20, 20, 16, 7, 7, padding=(3, 3), groups=2, bias=True, **NHWC),
    ],
    "grouped_direct": [
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=64, bias=True),
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=64, bias=True, **NHWC),
        # the narrow NHWC depthwise tiles, built for 16-bit operands
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=64, x_dtype="f16", y_dtype="f16", bias=True,
                 **NHWC),
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=8, bias=True),
        ConvCase(2, 64, 20, 20, 64, 3, 3, padding=(1, 1), groups=2, bias=True),  # 32 maps a group: m8x4
        # plane_r8: 16-bit x, batches of 4 or more
        ConvCase(5, 16, 20, 20, 16, 3, 3, padding=(1, 1), groups=16, x_dtype="bf16", y_dtype="bf16", bias=True,
                 **NHWC),
        # a channel's planes of 4 images past the 48 KB a block gets without opting in (plane: 51 KB)
        ConvCase(4, 4, 56, 56, 4, 9, 9, padding=(4, 4), groups=4, bias=True),
        # planes of at most 64 positions (plane_mm: a matrix a channel)
        ConvCase(2, 16, 7, 7, 16, 13, 13, padding=(6, 6), groups=16, bias=True),
        # a channel's filter rows as matrices and its planes past the 48 KB a block gets without opting in
        # (rows_mm: 66 KB)
        ConvCase(4, 4, 28, 28, 4, 13, 13, padding=(6, 6), groups=4, bias=True),
    ],
}
CONFIGS = [(v, c) for v in CHAIN_CASES for c in (variant_configs(v) or [""])]


def scaled_operands(case, rng):
    """x in [-1, 1], w scaled by its fan-in so that each call keeps the values' size; exact in the dtype."""
    fan_in = case.C // case.groups * case.KH * case.KW
    x = pr.quantize(rng.uniform(-1, 1, (case.B, case.C, case.H, case.W)), case.x_dtype)
    w = pr.quantize(rng.uniform(-1, 1, case.w_shape) * np.sqrt(3.0 / fan_in), case.x_dtype)
    bias = pr.quantize(rng.uniform(-0.1, 0.1, case.M), case.y_dtype) if case.bias else None
    return x, w, bias


def stored(values, case):
    """float64 NCHW values as the device array of the case's layout and dtype holds them."""
    if case.x_layout == "NHWC":
        values = values.transpose(0, 2, 3, 1)
    return pr.to_storage(np.ascontiguousarray(values), case.x_dtype)


def loaded(array, case):
    values = pr.from_storage(array, case.x_dtype)
    return np.ascontiguousarray(values.transpose(0, 3, 1, 2)) if case.x_layout == "NHWC" else values


def make_plan(variant, config, case, device=None):
    out = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(pr.variant_id(variant), pr.make_problem(case),
                                   config.encode() if config else ffi().NULL, -1 if device is None else device, out))
    return ffi().gc(out[0], lib().conv2d_plan_destroy)


def run_chain(variant, config, case, rng, device=None):
    """The four calls on one stream; the three buffers against the float64 chain. `device`: the GPU that
    holds the plan, operands and stream (default: the current one); the calls are made from whichever
    device is current (test_multi_gpu: another)."""
    plan = make_plan(variant, config, case, device)
    info = ffi().new("conv_plan_info*")
    check(lib().conv2d_plan_get_info(plan, info))
    x, w, bias = scaled_operands(case, rng)
    _, w_host = pr._in_layout(x, w, case)
    with use_device(device):
        stream = Stream()

    def on_device(values):
        return DeviceArray.from_host(values, device=device)

    d_w = on_device(pr.to_storage(w_host, case.x_dtype))
    d_b = None if bias is None else on_device(pr.to_storage(bias, case.y_dtype))
    bufs = {name: on_device(stored(x, case)) for name in "ABC"}
    bufs["B"].fill_bytes(0xFF)
    bufs["C"].fill_bytes(0xFF)
    synchronize(device)
    ws = DeviceArray((info.workspace_bytes,), np.uint8, device=device) if info.workspace_bytes else None
    for src, dst in [("A", "B"), ("B", "C"), ("C", "A"), ("A", "B")]:
        check(lib().conv2d_plan_run(plan, bufs[src].handle, d_w.handle, ffi().NULL if d_b is None else d_b.handle,
                                    bufs[dst].handle, ffi().NULL if ws is None else ws.handle,
                                    info.workspace_bytes, stream_handle(stream)))
    stream.synchronize()
    got = {name: loaded(bufs[name].get(), case) for name in "ABC"}
    # The reference chain rounds each output to the dtype, as the device stores it.
    def step(values):
        return pr.quantize(conv2d_reference(values, w, bias=bias, **case.oracle_kwargs()), case.y_dtype)
    b1 = step(x)
    want = {"C": step(b1)}
    want["A"] = step(want["C"])
    want["B"] = step(want["A"])
    bound = 4 * pr.error_bound(variant, case.x_dtype, case.y_dtype)  # up to four calls' errors compound
    for name in "CAB":
        assert not np.isnan(got[name]).any(), \
            f"{variant}[{config}] on {case}: buffer {name} holds NaN: a call read its input before it was written"
        err = rel_l2(got[name], want[name])
        assert err <= bound, f"{variant}[{config}] on {case}: buffer {name} off by {err:.2e} (bound {bound:.2e})"


def run_chains(variant, config, rng, device=None):
    """run_chain on every case of the variant's list that the configuration takes (at least one)."""
    pr.skip_unless_available(variant)
    ran, refusals = 0, []
    for case in CHAIN_CASES[variant]:
        case = case.with_(compute=pr.variant_caps(variant)["compute"])
        try:
            run_chain(variant, config, case, rng, device)
            ran += 1
        except ConvUnsupportedError as e:
            refusals.append(str(e))
    if not ran:
        if refusals and all("compute capability 9.0" in r or "no sm_90a code" in r for r in refusals):
            pytest.skip(f"{variant}[{config}]: {refusals[0]}")
        pytest.fail(f"{variant}[{config}] took none of its chain cases: {refusals}")


@requires_gpu
@pytest.mark.parametrize("variant,config", CONFIGS, ids=[f"{v}[{c}]" for v, c in CONFIGS])
def test_back_to_back_calls_keep_stream_order(variant, config, rng):
    run_chains(variant, config, rng)
