"""Bad-argument fuzz (issue 41, item 7): every argument of every public entry point, bad values of every
kind, generated from one table. What each refusal case checks:
  * the refusal is a pyconv.ConvError (a ValueError) or a TypeError whose message names the argument;
    never AttributeError, OverflowError, UnicodeDecodeError, a bare NumPy / cffi / int() error, a crash;
  * an invalid value is never silently accepted;
  * the process stays usable: a valid call right after it gives the oracle's answer;
  * nothing expensive runs before the checks (a multi-GB zero-stride view of a wrong shape is refused
    without being copied).
Valid but unusual inputs (layouts that coincide, lists, NumPy integer scalars, ...) are the "must work"
group at the end, checked against the float64 oracle. Runs on the cpu variant and auto (the CPU here)."""
import functools
import os
import pathlib
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2

import pyconv
from pyconv import tuning

SEED = int.from_bytes(os.urandom(4), "little")  # printed by a failing must-work case
RNG = np.random.default_rng(SEED)
VARIANTS = ("cpu", "auto")
RMP = pyconv.ReluMaxPool
NAN, INF = float("nan"), float("inf")


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def nhwc(b, c, h, w):
    """A channels-last view of logical shape (B, C, H, W)."""
    return rand(b, h, w, c).transpose(0, 3, 1, 2)


def readonly(a):
    a.setflags(write=False)
    return a


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


X, W, B = rand(2, 3, 8, 8), rand(4, 3, 3, 3), rand(4)  # conv2d: y (2, 4, 6, 6)
X1, W1 = rand(2, 3, 16), rand(4, 3, 3)                 # conv1d: y (2, 4, 14)
Y = (2, 4, 6, 6)
BUF = rand(1000)  # out overlapping x: two views of one buffer
OVERLAP_X, OVERLAP_OUT = BUF[:384].reshape(X.shape), BUF[100:388].reshape(Y)

# ---- pools of bad values, by kind ----
# Wrong types where an int (or an int pair) is wanted.
WRONG_TYPES = {"str": "abc", "float": 1.5, "float-integral": 2.0, "bool": True, "None": None, "list3": [1, 2, 3],
               "dict": {}, "object": object(), "complex": 1j, "bytes": b"1", "np.float64": np.float64(2),
               "np.bool_": np.bool_(True), "np.complex64": np.complex64(1), "np.str_": np.str_("1")}
# Out of range for any size, stride or count.
OUT_OF_RANGE = {"0": 0, "-1": -1, "2**31": 2**31, "2**63": 2**63, "-2**63": -2**63, "10**100": 10**100,
                "nan": NAN, "inf": INF, "-inf": -INF, "np.int64(2**40)": np.int64(2**40)}
BAD_TUPLES = {"()": (), "(1,)": (1,), "(1,1,1)": (1, 1, 1), "nested": ((1, 1), 1), "(1,'a')": (1, "a"),
              "(1,0)": (1, 0), "(1,None)": (1, None)}
INTS = {**WRONG_TYPES, **OUT_OF_RANGE, **BAD_TUPLES}


def names(valid):
    """Bad values where a name is wanted: NUL (C would cut the string there), non-ASCII strings long enough
    that a C message cuts them inside a UTF-8 sequence (both parities; 2-, 3- and 4-byte characters),
    5000 characters, other case, empty, unknown, and the name in the wrong type."""
    return {"NUL": valid + "\x00junk", "e-acute*2500": "é" * 2500, "x+e-acute*2500": "x" + "é" * 2500,
            "euro*2000": "€" * 2000, "emoji*1500": "\U0001F600" * 1500, "x*5000": "x" * 5000,
            "swapcase": valid.swapcase(), "empty": "", "unknown": "nope", "bytes": valid.encode(),
            "list": [valid], "int": 5, "bool": True, "object": object()}


DEVICES = {"str": "abc", "str-digit": "0", "float": 1.5, "bool": True, "list": [0], "object": object(),
           "np.float64": np.float64(0), "-1": -1, "2**63": 2**63, "-2**63": -2**63, "10**100": 10**100}
NO_SUCH_GPU = {"10**6 (no such GPU)": 10**6}
STREAMS = {"str": "abc", "float": 1.5, "bool": True, "-1": -1, "2**64": 2**64, "-2**63": -2**63,
           "object": object(), "list": [0], "bytes": b"0", "np.float64": np.float64(0)}
OUT_DTYPES = {"float64": "float64", "np.float64": np.float64, "int8": "int8", "np.dtype(int32)": np.dtype("int32"),
              **without(names("float32"), "swapcase")}
EPILOGUES = {**names("relu"), "class": RMP, "kernel=0": RMP(0), "kernel=-1": RMP(-1), "kernel=1.5": RMP(1.5),
             "kernel='2'": RMP("2"), "kernel=None": RMP(None), "kernel=2**31": RMP(2**31),
             "kernel=2**63": RMP(2**63), "kernel=(2,2,2)": RMP((2, 2, 2)), "kernel>output": RMP(100),
             "stride=0": RMP(2, 0), "stride=-1": RMP(2, -1), "stride=1.5": RMP(2, 1.5),
             "ceil_mode='no'": RMP(2, ceil_mode="no")}
SHAPES = {"3-tuple": (2, 3, 8), "5-tuple": (2, 3, 8, 8, 1), "str": "abc", "None": None, "int": 5, "dict": {},
          "object": object(), "float dim": (2, 3, 8.0, 8), "negative dim": (2, 3, -8, 8), "zero dim": (2, 3, 0, 8),
          "2**63 dim": (2, 3, 2**63, 8), "nested": ((2, 3), 8, 8, 8)}
# Operands: wrong kind, ndim, dtype, zero or mismatched sizes.
ARRAYS = {"None": None, "str": "abc", "float": 1.5, "dict": {}, "object": object(), "nested list": X.tolist(),
          "float64": X.astype(np.float64), "int64": X.astype(np.int64), "bool": X > 0,
          "complex64": X.astype(np.complex64), "object-dtype": X.astype(object)}
BIASES = {"(3,)": rand(3), "(5,)": rand(5), "(4,1)": rand(4, 1), "0-d": np.float32(1), "int64": np.arange(4),
          "float64": rand(4, dtype=np.float64), "float16": rand(4, dtype=np.float16), "list": B.tolist(),
          "str": "abc", "object": object()}
OUTS = {"wrong shape": rand(2, 4, 6, 5), "3-D": rand(2, 4, 36), "float64": rand(*Y, dtype=np.float64),
        "float16": rand(*Y, dtype=np.float16), "int64": np.zeros(Y, np.int64), "read-only": readonly(rand(*Y)),
        "strided": rand(2, 4, 6, 12)[..., ::2], "NHWC (x NCHW)": nhwc(*Y), "zero-size": rand(0, 4, 6, 6),
        "list": rand(*Y).tolist(), "str": "abc", "x itself": X}
# x and w may be named as such, by a dimension of theirs (B, C, H, W / M, KH, KW), or as the input / kernel.
XNAME, WNAME = r"\bx\b|x_shape|\b[BCHW]\b|input", r"\bw\b|w_shape|\b(M|C|KH|KW)\b|kernel"


def conv_args(one_d):
    """argument -> (regex its refusal must match, bad values), for conv2d / conv1d / Conv2dPlan."""
    ints = {**without(INTS, "(1,)"), "(1,1)": (1, 1)} if one_d else INTS  # conv1d takes 1-tuples
    pads = without(ints, "0", *(() if one_d else ("(1,0)",)))           # conv2d takes (1, 0)
    return {"stride": ("stride", ints), "dilation": ("dilation", {**ints, "100 (extent > input)": 100}),
            "padding": ("pad", {**pads, "SAME": "SAME", "full": "full", **without(names("same"), "list", "int")}),
            "groups": ("groups", {**without(INTS, *BAD_TUPLES), "2 (C=3)": 2, "(1,1)": (1, 1), "(1,)": (1,)}),
            "epilogue": ("epilogue|pool", {**EPILOGUES, "kernel=(2,2)": RMP((2, 2))} if one_d else EPILOGUES),
            "precision": ("precision", names("exact"))}


def cases():
    out = []

    def add(entry, arg, match, values, variants=VARIANTS, base=None):
        for vid, value in values.items():
            for v in variants:
                where = f"{entry}[{v}]" if v else entry
                out.append(pytest.param(entry, v, {**(base or {}), arg: value}, match, id=f"{where}-{arg}={vid}"))

    one = (None,)  # entries without a variant
    # the arguments conv2d, conv1d and Conv2dPlan share
    for entry in ("conv2d", "conv1d", "Conv2dPlan"):
        for arg, (match, values) in conv_args(entry == "conv1d").items():
            add(entry, arg, match, values)
        add(entry, "padding", "stride|same", {"same (stride 2)": "same"}, base={"stride": 2})
        add(entry, "variant", "variant", {**names("cpu"), "None": None}, variants=one)
        add(entry, "config", "config", names("default"), variants=one, base={"variant": "cpu"})
        add(entry, "device", "device", {**DEVICES, **NO_SUCH_GPU})
        dtypes = OUT_DTYPES if entry == "Conv2dPlan" else {**OUT_DTYPES, "bfloat16 (NumPy)": "bfloat16"}
        add(entry, "out_dtype", "out_dtype", dtypes, base={"bias": None})  # no bias: its dtype check would answer
    for entry in ("conv2d", "conv1d"):
        add(entry, "stream", "stream", STREAMS)
        add(entry, "sync", "sync", {"str 'no'": "no", "2": 2, "list": [], "object": object()})
        add(entry, "bias", "bias", BIASES)
    # operands of conv2d and conv1d
    add("conv2d", "x", XNAME, {**ARRAYS, "3-D": X[0], "5-D": X[None], "float16 (w float32)": X.astype(np.float16),
                               "H=0": rand(2, 3, 0, 8), "C=4 (w has 3)": rand(2, 4, 8, 8),
                               "smaller than w": rand(2, 3, 2, 2)})
    add("conv2d", "w", WNAME, {**without(ARRAYS, "float64", "int64", "bool", "complex64", "object-dtype"),
                               "3-D": W[0], "float64": W.astype(np.float64), "C=2": rand(4, 2, 3, 3),
                               "float16 (x float32)": W.astype(np.float16), "KH=0": rand(4, 3, 0, 3)})
    add("conv2d", "w", WNAME, {"M=0": rand(0, 3, 3, 3)}, base={"bias": None})
    add("conv2d", "out", r"\bout\b", OUTS)
    add("conv2d", "out", r"\bout\b", {"overlaps x": OVERLAP_OUT}, base={"x": OVERLAP_X})
    add("conv1d", "x", r"\bx\b|\b[BCL]\b", {**without(ARRAYS, "float64", "int64"), "4-D": X, "2-D": X1[0],
                                           "float64": X1.astype(np.float64), "L=0": rand(2, 3, 0),
                                           "C=4 (w has 3)": rand(2, 4, 16)})
    add("conv1d", "w", r"\bw\b|\b(M|C|K|KW)\b", {"None": None, "4-D": W, "float64": W1.astype(np.float64),
                                                "K=0": rand(4, 3, 0), "C=2": rand(4, 2, 3),
                                                "float16 (x float32)": W1.astype(np.float16)})
    add("conv1d", "out", r"\bout\b", {"wrong shape": rand(2, 4, 13), "4-D": rand(2, 4, 1, 14), "str": "abc",
                                      "float64": rand(2, 4, 14, dtype=np.float64), "strided": rand(2, 4, 28)[..., ::2],
                                      "read-only": readonly(rand(2, 4, 14))})
    # Conv2dPlan's own arguments
    add("Conv2dPlan", "x_shape", XNAME, SHAPES)
    add("Conv2dPlan", "w_shape", WNAME, SHAPES)
    add("Conv2dPlan", "bias", "bias", {"array": B, "str 'no'": "no", "2": 2, "object": object()})
    add("Conv2dPlan", "dtype", "dtype", {**names("float32"), "float64": "float64", "None": None})
    add("Conv2dPlan", "layout", "layout", {**names("NCHW"), "None": None})
    add("Conv2dPlan", "w_layout", "w_layout", {**names("MCKK"), "None": None})
    # Conv2dPlan.launch: by default x, w, a fresh y and a bias, on a plan made with bias=True. Host arrays
    # on a cpu plan only: an auto plan on a GPU machine takes device arrays (tests/test_errors.py covers it)
    L = "Conv2dPlan.launch"
    add = functools.partial(add, variants=("cpu",))
    add(L, "x", r"\bx\b", {"None": None, "str": "abc", "float": 1.5, "float64": X.astype(np.float64), "3-D": X[0],
                           "wrong shape": rand(2, 3, 8, 9), "NHWC (plan NCHW)": nhwc(2, 3, 8, 8),
                           "float16": X.astype(np.float16)})
    add(L, "w", r"\bw\b", {"None": None, "float64": W.astype(np.float64), "wrong shape": rand(4, 3, 3, 2),
                           "MKKC (plan MCKK)": rand(4, 3, 3, 3).transpose(0, 3, 1, 2)})
    add(L, "y", r"\by\b", {"None": None, "read-only": readonly(rand(*Y)), "strided": rand(2, 4, 6, 12)[..., ::2],
                           "float64": rand(*Y, dtype=np.float64), "wrong shape": rand(2, 4, 6, 5),
                           "NHWC (plan NCHW)": nhwc(*Y)})
    add(L, "y", r"\by\b", {"overlaps x": OVERLAP_OUT}, base={"x": OVERLAP_X})
    add(L, "bias", "bias", {"missing (plan has bias)": None, **without(BIASES, "list", "str", "object")})
    add(L, "plan_bias", "bias", {"False (launch gets a bias)": False})
    add(L, "stream", "stream", STREAMS)
    # pyconv.tuning
    add("tuning.set_cache_path", "path", "path|cache", {
        "int": 5, "float": 1.5, "object": object(), "list": ["/tmp/t"], "NUL": "/tmp/a\x00b", "empty": "",
        "4096+ bytes": "/tmp/" + "d/" * 2500 + "t", "4096+ bytes non-ASCII": "/tmp/" + "é" * 2100}, variants=one)
    add("tuning.set_budget_ms", "ms", r"budget|\bms\b", {
        "inf": INF, "-inf": -INF, "nan": NAN, "-1": -1, "str": "abc", "str-digit": "100", "None": None,
        "bool": True, "complex": 1j, "object": object(), "list": [100]}, variants=one)
    for arg, (match, values) in {
            "x_shape": (XNAME, without(SHAPES, "dict", "object")),
            "w_shape": (WNAME, {"None": None, "3-tuple": (4, 3, 3)}),
            "stride": ("stride", {"0": 0, "str": "abc"}), "padding": ("pad", {"full": "full", "-1": -1}),
            "dilation": ("dilation", {"-1": -1}), "groups": ("groups", {"0": 0, "float": 1.5}),
            "precision": ("precision", names("exact"))}.items():
        add("tuning.describe", arg, match, values, variants=one, base={"x_shape": X.shape, "w_shape": W.shape})
    # pyconv.device helpers: malformed arguments are refused before any device is asked
    for arg, (match, values) in {
            "shape": ("shape", {"(-1,)": (-1,), "('a',)": ("a",), "(1.5,)": (1.5,), "None": None,
                                "(2**63,)": (2**63,), "(2**64,)": (2**64,), "object": object()}),
            "dtype": ("dtype", {"str": "abc", "object": object, "int": 5}),
            "layout": ("layout", {"XYZ": "XYZ", "int": 5, "NHWC of a 1-D shape": "NHWC"}),
            "device": ("device", DEVICES), "stream": ("stream", STREAMS)}.items():
        add("DeviceArray", arg, match, values, variants=one, base={"shape": (4,)})
    add("device_name", "device", "device", DEVICES, variants=one)
    add("synchronize", "device", "device", DEVICES, variants=one)
    add("pinned_empty", "shape", "shape", {"(-1,)": (-1,), "('a',)": ("a",), "None": None}, variants=one)
    add("pinned_empty", "dtype", "dtype", {"str": "abc", "object": object}, variants=one, base={"shape": (4,)})
    return out


FUNCTIONS = {"tuning.set_cache_path": tuning.set_cache_path, "tuning.set_budget_ms": tuning.set_budget_ms,
             "tuning.describe": tuning.describe, "DeviceArray": pyconv.DeviceArray, "device_name": pyconv.device_name,
             "synchronize": pyconv.synchronize, "pinned_empty": pyconv.pinned_empty}


def call(entry, variant, kw):
    kw = dict(kw)
    if entry == "conv2d":
        return pyconv.conv2d(**{"x": X, "w": W, "bias": B, "variant": variant, **kw})
    if entry == "conv1d":
        return pyconv.conv1d(**{"x": X1, "w": W1, "bias": B, "variant": variant, **kw})
    if entry == "Conv2dPlan":
        return pyconv.Conv2dPlan(**{"x_shape": X.shape, "w_shape": W.shape, "bias": True, "variant": variant, **kw})
    if entry == "Conv2dPlan.launch":
        plan = pyconv.Conv2dPlan(X.shape, W.shape, variant=variant, bias=kw.pop("plan_bias", True))
        return plan.launch(**{"x": X, "w": W, "y": np.empty(plan.out_shape, np.float32), "bias": B, **kw})
    return FUNCTIONS[entry](**kw)


@pytest.fixture(scope="module")
def cache_file(tmp_path_factory):
    """The module's own tuning cache (cases change the path and budget); the caller's path comes back after."""
    before = tuning.cache_path()
    path = str(tmp_path_factory.mktemp("tune") / "tuning.txt")
    tuning.set_cache_path(path)
    yield path
    tuning.set_cache_path(before)
    tuning.set_budget_ms(3000)


def assert_still_works(variant="auto"):
    """A valid call on fresh data gives the oracle's answer: the refusal left nothing broken behind."""
    x, w, b = rand(2, 3, 9, 8), rand(4, 3, 3, 3), rand(4)
    y = pyconv.conv2d(x, w, b, padding=1, variant=variant or "auto")
    assert y.shape == (2, 4, 9, 8) and rel_l2(y, conv2d_reference(x, w, padding=(1, 1), bias=b)) <= 1e-5


@pytest.mark.parametrize("entry, variant, kwargs, match", cases())
def test_bad_argument_is_refused_naming_it(entry, variant, kwargs, match, cache_file):
    try:
        result = call(entry, variant, kwargs)
    except (pyconv.ConvError, TypeError) as exc:
        assert re.search(match, str(exc)), f"{type(exc).__name__} does not name the argument /{match}/: {exc}"
    except Exception as exc:  # noqa: BLE001 - any other type is the failure this test exists for
        pytest.fail(f"wrong exception type {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}")
    else:
        pytest.fail(f"invalid argument accepted (returned {type(result).__name__})")
    finally:
        tuning.set_cache_path(cache_file)
        tuning.set_budget_ms(3000)
    assert_still_works(variant)


# ---- no work before the checks: a 2 GiB zero-stride view of a wrong shape is refused without a copy ----
HUGE = {"conv2d x": ("x", (1, 4, 16384, 8192)), "conv2d w": ("w", (4, 4, 8192, 4096)),
        "conv1d x": ("x", (1, 4, 2**29)), "Conv2dPlan.launch x": ("x", (1, 4, 16384, 8192)),
        "Conv2dPlan.launch w": ("w", (4, 4, 8192, 4096))}


@pytest.mark.parametrize("case", HUGE)
def test_huge_view_of_a_wrong_shape_is_refused_before_any_copy(case):
    arg, shape = HUGE[case]
    view = np.broadcast_to(np.float32(1), shape)
    tracemalloc.start()  # NumPy reports its data allocations to tracemalloc
    try:
        with pytest.raises(pyconv.ConvError, match=rf"\b{arg}\b"):
            call(case.rsplit(" ", 1)[0], "cpu", {arg: view})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < view.nbytes // 32, f"{peak / 2**20:.0f} MiB allocated before refusing a {view.nbytes >> 30} GiB view"
    assert_still_works()


# ---- raw int pointers to launch are the caller's word, but a value no pointer can have must be refused, not cast
# (wrapped modulo 2**64 or sign-extended); each case in its own process, since the failure is a crash ----
RAW = {"x=-1": ("x", "-1"), "x=2**64+4096": ("x", "2**64 + 4096"), "y=-4096": ("y", "-4096")}


@pytest.mark.parametrize("case", RAW)
def test_raw_pointer_out_of_range_is_refused(case):
    arg, value = RAW[case]
    code = ("import numpy as np, pyconv\nx, w = np.ones((2, 3, 8, 8), np.float32), np.ones((4, 3, 3, 3), np.float32)\n"
            "p = pyconv.Conv2dPlan(x.shape, w.shape, variant='cpu')\n"
            f"kw = dict(x=x, w=w, y=np.empty(p.out_shape, np.float32)); kw[{arg!r}] = {value}\n"
            "try:\n    p.launch(**kw)\nexcept (pyconv.ConvError, TypeError) as e:\n    print('refused:', e)\n"
            "else:\n    print('accepted')\n")
    root = pathlib.Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])})
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1500:]}"
    assert r.stdout.startswith("refused:") and re.search(rf"\b{arg}\b", r.stdout.split(":", 1)[1]), r.stdout


# ---- must work: valid but unusual input, through every entry point, against the float64 oracle ----
def reference(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, epilogue=None, one_d=False, **_):
    first = lambda v: np.ravel(v)[0]  # noqa: E731 - conv1d's int or 1-tuple
    ep = {"epilogue": "relu"} if epilogue == "relu" else {}
    if isinstance(epilogue, RMP):
        k, s = epilogue.kernel, epilogue.kernel if epilogue.stride is None else epilogue.stride
        k, s = ((1, first(k)), (1, first(s))) if one_d else (k, s)
        ep = dict(epilogue="relu_maxpool", pool=k, pool_stride=s, pool_ceil=epilogue.ceil_mode)
    if one_d:
        return conv2d_reference(x[:, :, None], w[:, :, None], (1, first(stride)), (0, first(padding)),
                                (1, first(dilation)), groups=int(groups), bias=bias, **ep)[:, :, 0]
    return conv2d_reference(x, w, stride, padding, dilation, groups=int(groups), bias=bias, **ep)


C2, C1, PLAN = "conv2d", "conv1d", "plan"
MUST_WORK = {  # id: (entry, arguments); the coinciding layouts first (M = 1, 1x1 output, C = 1)
    "conv2d NHWC x, M=1": (C2, dict(x=nhwc(2, 3, 9, 9), w=rand(1, 3, 3, 3), bias=rand(1))),
    "conv2d NHWC x, 1x1 output": (C2, dict(x=nhwc(2, 3, 3, 3), w=rand(4, 3, 3, 3))),
    "conv2d NHWC x, C=1": (C2, dict(x=nhwc(2, 1, 9, 9), w=rand(4, 1, 3, 3))),
    "conv2d NHWC x, M=1, NHWC out=": (C2, dict(x=nhwc(2, 3, 9, 9), w=rand(1, 3, 3, 3), out=nhwc(2, 1, 7, 7))),
    "conv2d NHWC x, 1x1 output, out=": (C2, dict(x=nhwc(2, 3, 3, 3), w=rand(4, 3, 3, 3), out=nhwc(2, 4, 1, 1))),
    "conv1d M=1": (C1, dict(x=rand(2, 3, 16), w=rand(1, 3, 3), bias=rand(1))),
    "conv1d L_out=1": (C1, dict(x=rand(2, 3, 5), w=rand(4, 3, 5))),
    "conv1d C=1": (C1, dict(x=rand(2, 1, 16), w=rand(4, 1, 3))),
    "conv1d channels-last x, M=1": (C1, dict(x=rand(2, 16, 3).transpose(0, 2, 1), w=rand(1, 3, 3))),
    "conv1d M=1, out=": (C1, dict(x=rand(2, 3, 16), w=rand(1, 3, 3), out=rand(2, 1, 14))),
    "plan NHWC, M=1": (PLAN, dict(x=nhwc(2, 3, 9, 9), w=rand(1, 3, 3, 3), layout="NHWC")),
    "plan NHWC, M=1, y NHWC view": (PLAN, dict(x=nhwc(2, 3, 9, 9), w=rand(1, 3, 3, 3), layout="NHWC",
                                               y=nhwc(2, 1, 7, 7))),
    "plan NHWC, 1x1 output": (PLAN, dict(x=nhwc(2, 3, 3, 3), w=rand(4, 3, 3, 3), layout="NHWC")),
    "plan NHWC, C=1 contiguous x": (PLAN, dict(x=rand(2, 1, 9, 9), w=rand(4, 1, 3, 3), layout="NHWC")),
    "plan MKKC, 1x1 kernel contiguous w": (PLAN, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 1, 1), w_layout="MKKC")),
    # list arguments, NumPy integer scalars, NumPy dtypes, read-only and strided operands
    "conv2d ReluMaxPool([2, 2])": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), epilogue=RMP([2, 2]))),
    "conv2d ReluMaxPool([3, 2], [1, 2], ceil)": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3),
                                                          epilogue=RMP([3, 2], [1, 2], True))),
    "conv2d NumPy int scalars": (C2, dict(x=rand(2, 4, 9, 9), w=rand(4, 2, 3, 3), stride=np.int64(2),
                                          padding=np.int32(1), dilation=np.int64(1), groups=np.int64(2))),
    "conv2d lists of NumPy ints": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), stride=[2, np.int64(1)],
                                            padding=(np.int16(1), 0), dilation=[np.uint8(1), 2])),
    "conv2d read-only, strided x": (C2, dict(x=readonly(rand(2, 3, 9, 18)[..., ::2]), w=readonly(rand(4, 3, 3, 3)))),
    "conv2d out_dtype np.float32": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), out_dtype=np.float32)),
    "conv2d out_dtype np.dtype": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), out_dtype=np.dtype("float32"))),
    "conv2d epilogue 'none'": (C2, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), epilogue="none")),
    "conv1d ReluMaxPool([2])": (C1, dict(x=rand(2, 3, 16), w=rand(4, 3, 3), epilogue=RMP([2], stride=[1]))),
    "conv1d 1-tuples and NumPy ints": (C1, dict(x=rand(2, 3, 16), w=rand(4, 3, 3), stride=(np.int64(2),), padding=[1],
                                                dilation=np.int32(1))),
    "plan ReluMaxPool([2, 2]), bias": (PLAN, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), bias=rand(4),
                                                  epilogue=RMP([2, 2]))),
    "plan NumPy int shapes and stride": (PLAN, dict(x=rand(2, 3, 9, 9), w=rand(4, 3, 3, 3), np_shapes=True,
                                                    stride=np.int64(2), padding=[np.int64(1), 0])),
}
PLAN_ARGS = ("stride", "padding", "dilation", "groups", "epilogue", "layout", "w_layout")


# Plans take host arrays on the cpu variant (an auto plan on a GPU machine takes device arrays).
@pytest.mark.parametrize("case, variant", [(case, v) for case, (entry, _) in MUST_WORK.items()
                                           for v in (("cpu",) if entry == PLAN else VARIANTS)])
def test_valid_unusual_input_works(case, variant):
    entry, kw = MUST_WORK[case]
    if entry == PLAN:
        x, w, b = kw["x"], kw["w"], kw.get("bias")
        shapes = (tuple(np.array(x.shape)), tuple(np.array(w.shape))) if kw.get("np_shapes") else (x.shape, w.shape)
        plan_args = {k: kw[k] for k in PLAN_ARGS if k in kw}
        plan = pyconv.Conv2dPlan(*shapes, bias=b is not None, variant=variant, **plan_args)
        y = kw.get("y")
        if y is None:
            y = nhwc(*plan.out_shape) if kw.get("layout") == "NHWC" else rand(*plan.out_shape)
        plan.launch(x, w, y, bias=b)
    else:
        y = getattr(pyconv, entry)(**kw, variant=variant)
        assert "out" not in kw or y is kw["out"]
    expected = reference(**kw, one_d=entry == C1)
    assert y.shape == expected.shape and rel_l2(y, expected) <= 1e-5, f"data seed {SEED}"


def test_cache_path_takes_a_path_object(tmp_path, cache_file):
    """os.PathLike, as every path argument in Python (it gave AttributeError: no .encode)."""
    try:
        tuning.set_cache_path(tmp_path / "tuning.txt")
        assert tuning.cache_path() == str(tmp_path / "tuning.txt")
    finally:
        tuning.set_cache_path(cache_file)
