"""Bad input gets a clear error naming the problem — never a crash, a hang, garbage, an AttributeError,
an OverflowError or a NumPy error from a helper — and the process stays usable: after every refusal a
normal call in the same process still gives the right answer (`refused` checks both).

Host-side refusals run everywhere; refusals that need device memory are in test_devices_streams.py and
test_interop.py."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import GPU_SKIP_REASON, requires_gpu
from oracle import conv2d_reference, rel_l2

import pyconv


def assert_still_works():
    """One ordinary call on fresh data, checked against the float64 oracle: the refusal before it left
    nothing behind (no poisoned context, no stale error, no broken plan cache)."""
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, (2, 3, 9, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    y = pyconv.conv2d(x, w, b, padding=1)
    assert isinstance(y, np.ndarray) and y.shape == (2, 4, 9, 8)
    assert rel_l2(y, conv2d_reference(x, w, padding=(1, 1), bias=b)) <= 1e-5


def refused(match, call, *args, error=pyconv.ConvError, **kwargs):
    """call(*args, **kwargs) raises `error` with a message matching `match`; then a good call works."""
    with pytest.raises(error, match=match) as info:
        call(*args, **kwargs)
    assert_still_works()
    return info.value


class FakeDeviceArray:
    """Exposes only __cuda_array_interface__, with a pointer into host memory: the checks that come
    before the pointer's device is asked (dtype, layout) still name the problem, and the pointer itself
    is refused (host memory where device memory is needed), never dereferenced."""

    def __init__(self, shape, typestr="<f4", strides=None):
        self._host = np.zeros(16, np.float32)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (self._host.ctypes.data, False),
                                         "strides": strides, "version": 3}


X = np.ones((2, 3, 10, 10), np.float32)
W = np.ones((4, 3, 3, 3), np.float32)
OUT_SHAPE = (2, 4, 8, 8)


def conv(*args, **kwargs):
    return pyconv.conv2d(*args, **kwargs)


# ---- operands ----

def test_wrong_ndim():
    refused(r"x must have 4 dimensions \(B, C, H, W\), got shape \(3, 10, 10\)", conv, X[0], W)
    refused(r"w must have 4 dimensions", conv, X, W[0])
    refused(r"bias must have 1 dimensions", conv, X, W, np.ones((4, 1), np.float32))


def test_channel_mismatch():
    refused(r"channel mismatch: x has C=3 channels but w has 2", conv, X, W[:, :2].copy())


def test_missing_operand():
    refused(r"x is None", conv, None, W)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.complex64, object, np.bool_])
def test_numpy_of_another_dtype_is_refused_not_cast(dtype):
    """NumPy float64 (and anything else not float32/float16) is refused with a message that says how
    to convert it: nothing is cast silently."""
    refused(rf"x has dtype {np.dtype(dtype)}; pyconv takes float32 or float16 NumPy arrays: convert it first "
            rf"\(e\.g\. x\.astype\(np\.float32\)\) .* nothing is cast silently", conv, X.astype(dtype), W)
    refused(rf"w has dtype {np.dtype(dtype)}", conv, X, W.astype(dtype))
    refused(rf"bias has dtype {np.dtype(dtype)}", conv, X, W, np.ones(4, dtype))


def test_python_lists_and_strings_are_refused_with_their_dtype():
    refused(r"x has dtype float64", conv, X.tolist(), W)  # Python floats are float64: not cast
    refused(r"x has dtype <U3", conv, "abc", W)


def test_x_and_w_of_different_dtypes():
    refused(r"w has dtype float16 but x has float32", conv, X, W.astype(np.float16))


def test_bias_of_the_wrong_shape_or_dtype():
    refused(r"bias must have shape \(4,\) and the result's dtype float32, got \(3,\)", conv, X, W,
            np.ones(3, np.float32))
    refused(r"bias must have shape \(4,\) and the result's dtype float32, got \(4,\) float16", conv, X, W,
            np.ones(4, np.float16))


def test_cuda_array_interface_checks_dtype_and_layout_before_the_pointer():
    refused(r"x has dtype float64 on the device; pyconv takes float32 or float16", conv,
            FakeDeviceArray((2, 3, 10, 10), "<f8"), W)
    refused(r"w must be dense in NCHW \(C-contiguous\) or NHWC \(channels_last\) order", conv, X,
            FakeDeviceArray((4, 3, 3, 3), strides=(4, 144, 48, 16)))


def test_cuda_array_interface_with_a_host_pointer_is_refused():
    """A __cuda_array_interface__ whose pointer is host memory: refused (on a GPU machine as a
    ConvError naming the operand; without a GPU as ConvNoDeviceError), never dereferenced."""
    if GPU_SKIP_REASON:  # a CUDA build without a device cannot ask; a CPU-only build knows it is host memory
        refused(r"CONV_ERR_NO|x exposes __cuda_array_interface__ but its pointer is host memory", conv,
                FakeDeviceArray((2, 3, 10, 10)), W, error=(pyconv.ConvNoDeviceError, pyconv.ConvError))
    else:
        refused(r"x exposes __cuda_array_interface__ but its pointer is host memory", conv,
                FakeDeviceArray((2, 3, 10, 10)), W)
        refused(r"w exposes __cuda_array_interface__ but its pointer is host memory", conv, X,
                FakeDeviceArray((4, 3, 3, 3)))


# ---- sizes and geometry (checked in C, named there) ----

@pytest.mark.parametrize("shape, name", [((2, 3, 0, 10), "H"), ((2, 3, 10, 0), "W")])
def test_zero_sizes(shape, name):
    refused(rf"{name} must be >= 1, got 0", conv, np.ones(shape, np.float32), W)


@pytest.mark.parametrize("x_shape, w_shape, expected", [((0, 3, 10, 10), (4, 3, 3, 3), (0, 4, 8, 8)),
                                                        ((2, 0, 10, 10), (4, 0, 3, 3), (2, 0, 8, 8))])
def test_empty_batches_and_channels_give_an_empty_result_as_pytorch(x_shape, w_shape, expected):
    """B = 0 and C = 0 give F.conv2d's empty results ((B, M, OH, OW) with B = 0; (B, 0, OH, OW) with C = 0),
    after the usual checks."""
    assert conv(np.ones(x_shape, np.float32), np.ones(w_shape, np.float32)).shape == expected
    refused(r"stride_h must be >= 1", conv, np.ones(x_shape, np.float32), np.ones(w_shape, np.float32), stride=0)


def test_zero_maps_and_kernel():
    refused(r"M must be >= 1", conv, X, np.ones((0, 3, 3, 3), np.float32))
    refused(r"KH must be >= 1", conv, X, np.ones((4, 3, 0, 3), np.float32))


@pytest.mark.parametrize("kwargs, match", [
    (dict(stride=0), r"stride_h must be >= 1, got 0"),
    (dict(stride=(1, -2)), r"stride_w must be >= 1, got -2"),
    (dict(dilation=0), r"dilation_h must be >= 1"),
    (dict(padding=-1), r"pad_h must be >= 0, got -1"),
    (dict(padding=(0, -3)), r"pad_w must be >= 0, got -3"),
    (dict(stride=(1, 2, 3)), r"stride must be an int or an \(h, w\) pair"),
    (dict(padding=1.5), r"padding must be an int"),
    (dict(padding=None), r"padding must be an int"),
    (dict(stride="2"), r"stride must be an int"),
    (dict(stride=2.0), r"stride must be an int"),
    (dict(stride=True), r"stride must be an int"),
    (dict(dilation=(1, 1.0)), r"dilation must be an int"),
    (dict(stride=2**63), r"stride"),
    (dict(stride=-2**63), r"stride"),
    (dict(padding=2**64), r"padding"),
    (dict(dilation=2**31), r"dilation"),
    (dict(padding="full"), r"padding must be an int, an \(h, w\) pair, 'valid', 'same' or 'causal'"),
    (dict(padding="same", stride=2), r"padding='same' needs stride 1"),
    (dict(groups=0), r"groups must be >= 1"),
    (dict(groups=1.0), r"groups must be an int"),
    (dict(groups=2), r"channel mismatch"),
])
def test_bad_stride_padding_dilation_groups(kwargs, match):
    """Each a ConvError naming the argument — never an OverflowError from cffi or a TypeError from a
    helper."""
    refused(match, conv, X, W, **kwargs)


def test_a_refused_argument_is_refused_even_after_the_same_call_with_a_good_one():
    """stride=1.0 / True after stride=1 (equal and of equal hash in Python): a per-call cache must not
    let the second call through unchecked."""
    conv(X, W, stride=1, padding=1)
    refused(r"stride must be an int", conv, X, W, stride=1.0, padding=1)
    refused(r"stride must be an int", conv, X, W, stride=True, padding=1)
    refused(r"padding must be an int", conv, X, W, stride=1, padding=1.0)


def test_groups_must_divide_the_maps():
    refused(r"groups = 3 must divide both C = 3 and M = 4", conv, X, np.ones((4, 1, 3, 3), np.float32), groups=3)


def test_kernel_larger_than_padded_input():
    refused(r"kernel extent 11x11 .* larger than the padded input 10x10", conv, X, np.ones((4, 3, 11, 11), np.float32))
    refused(r"kernel extent 13x13 .* padded input 12x12", conv, X, W, dilation=6, padding=1)


def test_sizes_past_32bit_indexing_are_rejected_with_a_message():
    # One image of 50000 x 50000 = 2.5e9 elements cannot be indexed with int32 (the batch can).
    refused(r"more than 2\^30 elements .*CONV_ERR_TOO_LARGE", pyconv.Conv2dPlan, (1, 1, 50000, 50000),
            (1, 1, 3, 3), variant="cpu")


def test_padding_that_overflows_the_output_size_is_too_large_not_wrapped():
    """padding 2^30 - 1 on a 2x2 image gives a 2^31 x 2^31 output: M*OH*OW overflows int64 and must be
    refused (CONV_ERR_TOO_LARGE), not accepted with a wrapped size."""
    error = refused(r"overflows 64-bit sizes .*CONV_ERR_TOO_LARGE", pyconv.Conv2dPlan, (1, 1, 2, 2),
                    (4, 1, 1, 1), padding=2**30 - 1, variant="cpu")
    assert error.status == pyconv._lib.lib().CONV_ERR_TOO_LARGE
    refused(r"CONV_ERR_TOO_LARGE", conv, np.ones((1, 1, 2, 2), np.float32), np.ones((4, 1, 1, 1), np.float32),
            padding=2**30 - 1)


def test_batch_past_the_limit_is_too_large():
    refused(r"B = 2147483648 is larger than the limit .*CONV_ERR_TOO_LARGE", pyconv.Conv2dPlan,
            (2**31, 1, 2, 2), (1, 1, 1, 1), variant="cpu")


def _python(code, timeout=120, **env):
    environment = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                          timeout=timeout, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_zero_stride_huge_batch_is_refused_before_any_copy():
    """A broadcast (zero-stride) NumPy x of B = 2^31 images is 32 GB once copied: it must be refused from
    its shape, before a copy is made. The child process may not allocate more than 4 GB, so a copy
    shows up as a MemoryError instead of filling the machine."""
    code = textwrap.dedent("""
        import resource, time, numpy as np, pyconv
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        x2 = np.broadcast_to(np.ones((1, 1, 2, 2), np.float32), (2**31, 1, 2, 2))  # strides (0, ...)
        x1 = np.broadcast_to(np.ones((1, 1, 4), np.float32), (2**31, 1, 4))
        for label, call in (("conv2d", lambda: pyconv.conv2d(x2, np.ones((1, 1, 1, 1), np.float32))),
                            ("conv1d", lambda: pyconv.conv1d(x1, np.ones((1, 1, 1), np.float32)))):
            start = time.perf_counter()
            try:
                call()
                print(label, "ACCEPTED")
            except pyconv.ConvError as e:
                print(label, "REFUSED", round(time.perf_counter() - start, 3), e)
            except MemoryError:
                print(label, "COPIED (MemoryError)")
    """)
    result = _python(code, timeout=120, CUDA_VISIBLE_DEVICES="")
    assert result.returncode == 0, result.stderr[-3000:]
    for label in ("conv2d", "conv1d"):
        line = next(line for line in result.stdout.splitlines() if line.startswith(label))
        assert "REFUSED" in line and "B = 2147483648" in line and "CONV_ERR_TOO_LARGE" in line, line
        assert float(line.split()[2]) < 5.0, f"the refusal took {line.split()[2]} s: something was copied ({line})"


# ---- variant, precision, configuration, epilogue, dtypes ----

def test_unknown_variant_and_precision():
    refused(r"unknown variant 'nope' \(known: auto, auto_fast, cpu, direct", conv, X, W, variant="nope")
    refused(r"precision must be one of", conv, X, W, precision="approximate")
    refused(r"precision must be one of", pyconv.Conv2dPlan, X.shape, W.shape, precision="approximate")


def test_default_precision_is_the_named_variants_own():
    """precision=None: exact for auto, and what a named variant's arithmetic needs (no refusal)."""
    assert pyconv.Conv2dPlan(X.shape, W.shape, variant="cpu").variant == "cpu"
    if "wmma" in pyconv.variants():
        with pytest.raises(pyconv.ConvUnsupportedError, match=r"computes in fp16/bf16 with fp32 sums, but the "
                                                              r"problem allows only exact fp32"):
            conv(X, W, variant="wmma", precision="exact")
        assert_still_works()


@pytest.mark.parametrize("call", [lambda **kw: pyconv.Conv2dPlan(X.shape, W.shape, **kw),
                                  lambda **kw: conv(X, W, **kw)], ids=["plan", "conv2d"])
def test_half_precision_keeps_fp32_sums(call):
    """precision "half" (fp16 / bf16 operands, fp32 sums: what pyconv.torch asks for fp16 / bf16 tensors) refuses
    the fp16 variant, whose runs of products are summed in fp16; "fast" allows it. (The capability check comes
    before any device is needed: this runs without a GPU too.)"""
    with pytest.raises(pyconv.ConvUnsupportedError, match=r"variant 'fp16' computes in fp16 with fp16 partial "
                                                          r"sums, but the problem allows only fp16/bf16 with fp32 "
                                                          r"sums \(compute = 2; allow compute = 3 or more"):
        call(variant="fp16", precision="half")
    assert_still_works()


def test_variant_name_with_a_nul_is_not_truncated():
    """'cpu\\x00junk' must not reach C as 'cpu'."""
    refused(r"variant name 'cpu\\x00junk' contains a NUL character", conv, X, W, variant="cpu\x00junk")
    refused(r"NUL", pyconv.Conv2dPlan, X.shape, W.shape, variant="cpu\x00junk")


@pytest.mark.parametrize("variant", [3, None, b"cpu"])
def test_variant_of_the_wrong_type(variant):
    refused(r"variant must be a name \(str\)", conv, X, W, variant=variant, error=(pyconv.ConvError, TypeError))


def test_bad_launch_configuration():
    assert pyconv.variant_configs("cpu") == []
    refused(r"variant 'cpu' has no launch configuration 'x' \(it has: default\)", conv, X, W, variant="cpu",
            config="x")
    refused(r"config pins a launch configuration of a named variant; auto picks its own", conv, X, W, config="x")
    import pyconv._lib as _lib
    l, f = _lib.lib(), _lib.ffi()
    count, name = f.new("int*"), f.new("const char**")
    assert l.conv_variant_config_count(-1, count) == l.CONV_ERR_INVALID_ARGUMENT
    assert "not to auto" in f.string(l.conv_last_error()).decode()
    assert l.conv_variant_config_name(0, 1, name) == l.CONV_ERR_INVALID_ARGUMENT
    assert "variant 'cpu' has no launch configuration 1 (it has 1)" in f.string(l.conv_last_error()).decode()
    assert l.conv_variant_config_count(99, count) == l.CONV_ERR_INVALID_ARGUMENT
    assert_still_works()


@pytest.mark.parametrize("epilogue, match", [
    ("sigmoid", r"epilogue must be None, 'relu', 'silu' or pyconv.ReluMaxPool"),
    ("relu_maxpool", r"epilogue must be None, 'relu', 'silu' or pyconv.ReluMaxPool"),
    (pyconv.ReluMaxPool(0), r"pool_h must be >= 1"),
    (pyconv.ReluMaxPool(2, stride=(1, 0)), r"pool_stride_w must be >= 1"),
    (pyconv.ReluMaxPool(9), r"pool window 9x9 is larger than the convolution output 8x8"),
    (pyconv.ReluMaxPool(2.0), r"epilogue kernel must be an int"),
    (pyconv.ReluMaxPool((2, 2, 2)), r"epilogue kernel must be an int or an \(h, w\) pair"),
])
def test_bad_epilogue(epilogue, match):
    refused(match, conv, X, W, epilogue=epilogue)


@pytest.mark.parametrize("out_dtype", [np.float64, "float64", "int8", "half-ish"])
def test_bad_out_dtype(out_dtype):
    refused(r"out_dtype", conv, X, W, out_dtype=out_dtype)


def test_bad_plan_arguments():
    refused(r"x_shape must be an int, got float 8\.0", pyconv.Conv2dPlan, (1, 1, 8.0, 8), (1, 1, 3, 3), error=TypeError)
    refused(r"w_shape must be an int", pyconv.Conv2dPlan, (1, 1, 8, 8), (1, 1, "3", 3), error=TypeError)
    refused(r"x_shape must have 4 entries", pyconv.Conv2dPlan, (1, 8, 8), (1, 1, 3, 3))
    refused(r"layout must be NCHW or NHWC", pyconv.Conv2dPlan, X.shape, W.shape, layout="nchw")
    refused(r"w_layout MCKK or MKKC", pyconv.Conv2dPlan, X.shape, W.shape, w_layout="NCHW")
    refused(r"x dtype must be one of", pyconv.Conv2dPlan, X.shape, W.shape, dtype="float64")


# ---- the stream and device arguments (refused as arguments wherever the call runs) ----

@pytest.mark.parametrize("stream, error", [(object(), TypeError), ("0", TypeError), (1.5, TypeError),
                                           (True, TypeError), (-1, pyconv.ConvError),
                                           (2**64, pyconv.ConvError)])
def test_bad_stream_argument(stream, error):
    """A stream that is no stream is refused, naming `stream`, also on the host path where it is not
    used (a typo must not pass silently until the code runs on a GPU)."""
    refused(r"stream", conv, X, W, stream=stream, error=error)


@pytest.mark.parametrize("device", ["cuda:0", 1.5, -2, object()])
def test_bad_device_argument(device):
    refused(r"device", conv, X, W, device=device, error=(pyconv.ConvError, TypeError))


# ---- out ----

def test_out_of_the_wrong_shape_dtype_layout_or_kind():
    refused(r"out must have shape \(2, 4, 8, 8\), got \(2, 4, 8, 7\)", conv, X, W, variant="cpu",
            out=np.empty((2, 4, 8, 7), np.float32))
    refused(r"out must have dtype float32, got float16", conv, X, W, out=np.empty(OUT_SHAPE, np.float16))
    refused(r"out has dtype float64", conv, X, W, out=np.empty(OUT_SHAPE))
    refused(r"out must have 4 dimensions", conv, X, W, out=np.empty((2, 4, 64), np.float32))
    nhwc = np.empty((2, 8, 8, 4), np.float32).transpose(0, 3, 1, 2)
    refused(r"out must be NCHW like the result \(x's layout\), got NHWC", conv, X, W, out=nhwc)


def test_read_only_out():
    out = np.empty(OUT_SHAPE, np.float32)
    out.flags.writeable = False
    refused(r"out is read-only", conv, X, W, out=out)


def test_strided_out_is_refused_not_written_to_a_copy():
    """A strided view cannot be written in place: refused (a copy would silently lose the result)."""
    out = np.zeros((2, 4, 8, 16), np.float32)[..., ::2]
    refused(r"out must be dense in NCHW \(C-contiguous\) or NHWC \(channels_last\) order", conv, X, W, out=out)


def test_out_overlapping_x_or_w_is_refused():
    x = np.random.default_rng().uniform(-1, 1, (2, 4, 8, 8)).astype(np.float32)
    w = np.ones((4, 4, 1, 1), np.float32)  # 1x1: out has x's shape
    refused(r"out overlaps x in memory", conv, x, w, out=x)
    buffer = np.zeros(x.size + 64, np.float32)
    xs = buffer[:x.size].reshape(x.shape)
    xs[...] = x
    refused(r"out overlaps x in memory", conv, xs, w, out=buffer[64:].reshape(x.shape))  # partial overlap
    big = np.zeros(1000, np.float32)
    w_in_big = big[:16].reshape(4, 4, 1, 1)
    refused(r"out overlaps w in memory", conv, x[:1].copy(), w_in_big, out=big[8:8 + 256].reshape(1, 4, 8, 8))
    b = np.zeros(300, np.float32)
    refused(r"out overlaps bias in memory", conv, x[:1].copy(), w, b[:4], out=b[2:2 + 256].reshape(1, 4, 8, 8))
    # Neighbours that only touch are fine.
    halves = np.zeros(2 * x.size, np.float32)
    x_first = halves[:x.size].reshape(x.shape)
    x_first[...] = x
    y = conv(x_first, w, out=halves[x.size:].reshape(x.shape))
    assert rel_l2(y, conv2d_reference(x, w)) <= 1e-5


def test_out_a_cpu_torch_tensor_with_numpy_inputs_is_written_in_place():
    """A CPU torch tensor is host memory like a NumPy array: written in place and returned (the table
    in issue 10 had an AttributeError here)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, X.shape).astype(np.float32)
    out = torch.full(OUT_SHAPE, float("nan"))
    assert pyconv.conv2d(x, W, variant="cpu", out=out) is out
    assert rel_l2(out.numpy(), conv2d_reference(x, W)) <= 1e-5
    refused(r"out has dtype torch.float64", conv, x, W, out=torch.empty(OUT_SHAPE, dtype=torch.float64))
    refused(r"out must have dtype float32, got float16", conv, x, W, out=torch.empty(OUT_SHAPE, dtype=torch.float16))


def test_host_variant_rejects_device_arrays():
    if GPU_SKIP_REASON:
        pytest.skip(f"needs device memory: {GPU_SKIP_REASON}")
    x = pyconv.DeviceArray.from_host(X)
    refused(r"variant 'cpu' runs on host memory", conv, x, W, variant="cpu")


# ---- Conv2dPlan.launch checks the arrays it is given ----

@pytest.fixture
def host_plan():
    return pyconv.Conv2dPlan(X.shape, W.shape, variant="cpu")


def test_launch_checks_size_dtype_layout_and_writeability(host_plan):
    y = np.empty(host_plan.out_shape, np.float32)
    launch = host_plan.launch
    refused(r"x must be \(2, 3, 10, 10\) float32 NCHW, got \(1, 3, 10, 10\)", launch, X[:1], W, y)
    refused(r"y must be \(2, 4, 8, 8\) float32 NCHW, got \(2, 4, 8, 7\)", launch, X, W, y[..., :7].copy())
    refused(r"x has dtype float64", launch, X.astype(np.float64), W, y)
    refused(r"w must be \(4, 3, 3, 3\) float32 NCHW, got .* float16", launch, X, W.astype(np.float16), y)
    nhwc = np.ascontiguousarray(X.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    refused(r"x must be \(2, 3, 10, 10\) float32 NCHW, got \(2, 3, 10, 10\) float32 NHWC", launch, nhwc, W, y)
    read_only = y.copy()
    read_only.flags.writeable = False
    refused(r"y is read-only", launch, X, W, read_only)
    refused(r"this plan was made without bias", launch, X, W, y, bias=np.ones(4, np.float32))


def _in_child(code: str, timeout=30):
    """Runs `code` (after `import numpy as np, pyconv`) in a child process: a launch that writes through
    a dangling pointer must fail this test, not corrupt the heap of the whole test run."""
    result = _python("import numpy as np, pyconv\n" + textwrap.dedent(code), timeout=timeout)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stdout[-2000:]} {result.stderr[-3000:]}"
    return result.stdout


def test_launch_refuses_a_strided_y():
    """A strided y cannot be written in place: refused (writing a temporary copy loses the result, and
    a copy freed before the launch is written after its free)."""
    out = _in_child("""
        plan = pyconv.Conv2dPlan((2, 3, 10, 10), (4, 3, 3, 3), variant="cpu")
        x, w = np.ones((2, 3, 10, 10), np.float32), np.ones((4, 3, 3, 3), np.float32)
        y = np.zeros((2, 4, 8, 16), np.float32)[..., ::2]
        try:
            plan.launch(x, w, y)
            print("ACCEPTED, y sum", float(y.sum()))
        except pyconv.ConvError as e:
            print("REFUSED", e)
    """)
    assert "REFUSED" in out and "y" in out, out
    assert_still_works()


def test_launch_reads_a_strided_x_right():
    """A strided x view is copied for the launch; the copy must live until the kernel has read it."""
    out = _in_child("""
        import sys
        sys.path.insert(0, "tests")
        from oracle import conv2d_reference, rel_l2
        rng = np.random.default_rng()
        plan = pyconv.Conv2dPlan((2, 3, 10, 10), (4, 3, 3, 3), variant="cpu")
        x = rng.uniform(-1, 1, (2, 3, 10, 20)).astype(np.float32)[..., ::2]
        w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
        y = np.full(plan.out_shape, np.nan, np.float32)
        for _ in range(3):
            plan.launch(x, w, y)
            junk = [np.full(600, 7.0, np.float32) for _ in range(100)]  # reuses memory freed too early
        print("ERROR", rel_l2(y, conv2d_reference(x, w)))
    """)
    error = float(out.split("ERROR")[1])
    assert error <= 1e-5, out


def test_launch_refuses_y_overlapping_x_or_w():
    x_shape, w_shape = (1, 4, 8, 8), (4, 4, 1, 1)
    plan = pyconv.Conv2dPlan(x_shape, w_shape, variant="cpu")
    buffer = np.zeros(2 * 256, np.float32)
    x = buffer[:256].reshape(x_shape)
    w = np.ones(w_shape, np.float32)
    refused(r"y .*(same memory as|overlaps) x", plan.launch, x, w, x)
    refused(r"y .*(same memory as|overlaps) x", plan.launch, x, w, buffer[100:356].reshape(x_shape))
    big = np.zeros(300, np.float32)
    refused(r"y .*(same memory as|overlaps) w", plan.launch, x, big[:16].reshape(w_shape), big[8:264].reshape(x_shape))


def test_launch_with_bias_plan(rng):
    plan = pyconv.Conv2dPlan(X.shape, W.shape, bias=True, variant="cpu")
    y = np.empty(plan.out_shape, np.float32)
    refused(r"this plan takes a bias", plan.launch, X, W, y)
    refused(r"bias must be \(4,\) float32", plan.launch, X, W, y, bias=np.ones(5, np.float32))
    x = rng.uniform(-1, 1, X.shape).astype(np.float32)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    plan.launch(x, W, y, bias=b)
    assert rel_l2(y, conv2d_reference(x, W, bias=b)) <= 1e-5


def test_launch_with_a_non_array(host_plan):
    y = np.empty(host_plan.out_shape, np.float32)
    refused(r"x", host_plan.launch, 1.5, W, y, error=(pyconv.ConvError, TypeError))
    refused(r"x is None", host_plan.launch, None, W, y)


# ---- conv1d ----

def test_conv1d_bad_arguments():
    x, w = np.ones((1, 1, 10), np.float32), np.ones((1, 1, 3), np.float32)
    refused(r"x must have 3 dimensions", pyconv.conv1d, np.ones((1, 10), np.float32), w)
    refused(r"padding='same' needs stride 1", pyconv.conv1d, x, w, padding="same", stride=2)
    refused(r"stride must be an int or a 1-tuple for conv1d", pyconv.conv1d, x, w, stride=(1, 2))
    refused(r"padding must be an int", pyconv.conv1d, x, w, padding=1.5)
    refused(r"x has dtype float64", pyconv.conv1d, x.astype(np.float64), w)
    refused(r"out must have shape", pyconv.conv1d, x, w, out=np.empty((1, 1, 9), np.float32))


# ---- no GPU / no library ----

@pytest.mark.skipif(not GPU_SKIP_REASON, reason="this machine has a GPU; see test_no_visible_gpu_*")
def test_gpu_variant_without_gpu_says_why():
    refused(r"(no usable CUDA device|without a CUDA compiler|without CUDA)", conv, X, W, variant="direct",
            error=pyconv.ConvNoDeviceError)
    with pytest.raises(pyconv.ConvNoDeviceError):
        pyconv.DeviceArray((4,))
    assert_still_works()


def test_no_visible_gpu_runs_on_cpu_and_gpu_calls_say_why():
    """With no GPU visible (as on a machine without one), import works, auto runs on the CPU and a
    GPU variant raises an error that says why. Runs on every machine."""
    code = ("import numpy as np, pyconv\n"
            "x = np.ones((1, 1, 8, 8), np.float32); w = np.ones((2, 1, 3, 3), np.float32)\n"
            "assert pyconv.device_count() == 0\n"
            "assert float(pyconv.conv2d(x, w)[0, 0, 0, 0]) == 9.0\n"
            "try:\n    pyconv.conv2d(x, w, variant='direct')\n"
            "except pyconv.ConvNoDeviceError as e:\n    print('ERR', e)\n"
            "assert float(pyconv.conv2d(x, w)[0, 1, 5, 5]) == 9.0\n")
    result = _python(code, CUDA_VISIBLE_DEVICES="")
    assert result.returncode == 0, result.stderr
    assert "ERR CONV_ERR_NO" in result.stdout


def test_missing_library_names_the_path():
    code = ("import pyconv\n"
            "try:\n    pyconv.variants()\n"
            "except pyconv.LibraryNotFoundError as e:\n    print('ERR', e)\n")
    result = _python(code, PYCONV_LIBRARY="/nonexistent/libconv.so")
    assert result.returncode == 0, result.stderr
    assert "ERR cannot load libconv: /nonexistent/libconv.so: no such file" in result.stdout


@requires_gpu
def test_allocation_larger_than_free_memory_says_how_many_bytes():
    free, total = pyconv.mem_info()
    ask = total * 4
    refused(rf"cannot allocate {ask} bytes on the GPU: \d+ bytes free", pyconv.DeviceArray, (ask,), np.uint8,
            error=pyconv.ConvOutOfMemoryError)
    pyconv.DeviceArray((16,))  # the device still works afterwards


def test_refusals_are_quick():
    """Refusing is cheap: no tuning, no allocation, no copy (100 refusals well under a second each)."""
    start = time.perf_counter()
    for _ in range(100):
        with pytest.raises(pyconv.ConvError):
            conv(X, W, stride=0)
    assert (time.perf_counter() - start) / 100 < 0.05
    assert_still_works()
