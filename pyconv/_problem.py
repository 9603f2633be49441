"""Arguments -> the C problem descriptor (conv_problem): padding modes, the epilogue, precision.

Everything here is checked once, with a ConvError naming the argument; the library validates the
resulting problem again in C (sizes, overflow), which is the one place shape rules live.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np

from . import _args
from ._args import flag
from ._lib import ConvError, check, ffi, lib

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}         # conv_dtype
LAYOUTS = {"NCHW": 0, "NHWC": 1}                              # conv_layout; w: MCKK = 0, MKKC = 1
PRECISIONS = {"exact": 0, "tf32": 1, "half": 2, "fast": 3}   # conv_compute
EPILOGUE_NONE, EPILOGUE_RELU, EPILOGUE_RELU_MAXPOOL, EPILOGUE_SILU = 0, 1, 2, 3

IntPair = Union[int, Tuple[int, int]]


@dataclass(frozen=True)
class ReluMaxPool:
    """The fused epilogue ReLU then max-pool (as torch.nn.functional.max_pool2d, no padding).

    kernel: window (int or (h, w)); stride: default the window; ceil_mode: a last partial window
    that starts inside the convolution output counts."""
    kernel: IntPair = 2
    stride: Optional[IntPair] = None
    ceil_mode: bool = False

    def __post_init__(self):
        # Lists (ReluMaxPool([2, 2])) as tuples: the epilogue keys the plan caches, which need it hashable.
        for name in ("kernel", "stride"):
            value = getattr(self, name)
            if isinstance(value, (list, np.ndarray)):
                object.__setattr__(self, name, tuple(value.tolist() if isinstance(value, np.ndarray) else value))


Epilogue = Union[None, str, ReluMaxPool]


def conv1d_as_2d(stride, padding, dilation, epilogue):
    """conv1d's arguments as conv2d's on (B, C, 1, L): (stride, padding, dilation, epilogue), each a pair
    along (H, W) (a string padding stays a string; ReluMaxPool pools along L)."""
    one = _args.int1d
    if isinstance(epilogue, ReluMaxPool):
        k = one(epilogue.kernel, "epilogue kernel")
        epilogue = ReluMaxPool((1, k), (1, one(epilogue.stride if epilogue.stride is not None else k,
                                               "epilogue stride")), epilogue.ceil_mode)
    padding = padding if isinstance(padding, str) else (0, one(padding, "padding"))
    return (1, one(stride, "stride")), padding, (1, one(dilation, "dilation")), epilogue


def integer(value, name: str) -> int:
    """An int argument of the geometry (sizes, stride, padding, groups): ConvError for any other type."""
    return _args.integer(value, name, ConvError)


def pair(value, name: str) -> Tuple[int, int]:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2:
        raise ConvError(f"{name} must be an int or an (h, w) pair, got {value!r}")
    return integer(items[0], name), integer(items[1], name)


def padding_of(padding, kernel: Tuple[int, int], stride: Tuple[int, int], dilation: Tuple[int, int]):
    """((pad_h, pad_w), (extra_h, extra_w)): zeros before, and the extra zeros after, as PyTorch.

    "same" splits an odd total d*(K-1) as PyTorch does: the larger half after. "causal" pads along W
    only, d*(K-1) zeros before and none after (a negative extra), so that output o sees inputs <= o."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "causal":
            before = dilation[1] * (kernel[1] - 1)
            return (0, before), (0, -before)
        if padding != "same":
            raise ConvError(f"padding must be an int, an (h, w) pair, 'valid', 'same' or 'causal', got {padding!r}")
        if stride != (1, 1):
            raise ConvError(f"padding='same' needs stride 1 (as in PyTorch), got stride={stride}")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return (totals[0] // 2, totals[1] // 2), (totals[0] - 2 * (totals[0] // 2), totals[1] - 2 * (totals[1] // 2))
    return pair(padding, "padding"), (0, 0)


def epilogue_fields(epilogue: Epilogue) -> dict:
    if epilogue is None or epilogue == "none":
        return {"epilogue": EPILOGUE_NONE}
    if epilogue == "relu":
        return {"epilogue": EPILOGUE_RELU}
    if epilogue == "silu":
        return {"epilogue": EPILOGUE_SILU}
    if isinstance(epilogue, ReluMaxPool):
        kh, kw = pair(epilogue.kernel, "epilogue kernel")
        sh, sw = pair(epilogue.stride if epilogue.stride is not None else epilogue.kernel, "epilogue stride")
        return {"epilogue": EPILOGUE_RELU_MAXPOOL, "pool_h": kh, "pool_w": kw, "pool_stride_h": sh,
                "pool_stride_w": sw, "pool_ceil": int(flag(epilogue.ceil_mode, "epilogue ceil_mode"))}
    raise ConvError(f"epilogue must be None, 'relu', 'silu' or pyconv.ReluMaxPool(...), got {epilogue!r}")


def compute_of(precision: str) -> int:
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ConvError(f"precision must be one of {tuple(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


def dtype_code(dtype: str, name: str) -> int:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ConvError(f"{name} must be one of {tuple(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def make_problem(x_shape, w_shape, *, bias: bool = False, stride=1, padding=0, dilation=1, groups=1,
                 epilogue: Epilogue = None, precision: str = "exact", x_dtype="float32", y_dtype=None,
                 x_layout="NCHW", y_layout=None, w_layout="MCKK"):
    """(the conv_problem cdata, its key tuple, the output shape (B, M, OH, OW)).

    x_shape is (B, C, H, W) and w_shape (M, C/groups, KH, KW) whatever their memory layouts."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ConvError(f"x must be (B, C, H, W) and w (M, C/groups, KH, KW), got {tuple(x_shape)}, {tuple(w_shape)}")
    B, C, H, W = (integer(v, "x shape") for v in x_shape)
    M, Cg, KH, KW = (integer(v, "w shape") for v in w_shape)
    groups = integer(groups, "groups")
    if groups < 1:
        raise ConvError(f"groups must be >= 1, got {groups}")
    if C != Cg * groups:
        raise ConvError(f"channel mismatch: x has C={C} channels but w has {Cg} per group x groups={groups} "
                        f"(w is (M, C/groups, KH, KW))")
    (sh, sw), (dh, dw) = pair(stride, "stride"), pair(dilation, "dilation")
    (ph, pw), (eh, ew) = padding_of(padding, (KH, KW), (sh, sw), (dh, dw))
    fields = dict(B=B, C=C, H=H, W=W, M=M, KH=KH, KW=KW, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                  pad_h_extra=eh, pad_w_extra=ew, dilation_h=dh, dilation_w=dw, groups=groups,
                  x_dtype=dtype_code(x_dtype, "x dtype"), w_dtype=dtype_code(x_dtype, "x dtype"),
                  y_dtype=dtype_code(x_dtype if y_dtype is None else y_dtype, "out_dtype"),
                  x_layout=LAYOUTS[x_layout], y_layout=LAYOUTS[y_layout or x_layout],
                  w_layout=0 if w_layout == "MCKK" else 1, compute=compute_of(precision), bias=int(bool(bias)))
    fields.update(epilogue_fields(epilogue))
    key = tuple(sorted(fields.items()))
    return problem_from_key(key)


_shapes: dict = {}


def problem_from_key(key: tuple):
    """The conv_problem of a key (cached with its output shape: the C validation runs once per key)."""
    cached = _shapes.get(key)
    f, l = ffi(), lib()
    p = f.new("conv_problem*")
    l.conv_problem_init(p)
    for name, value in key:
        setattr(p, name, value)
    if cached is None:
        shape = f.new("int64_t[4]")
        check(l.conv_problem_output_shape(p, shape))
        cached = tuple(int(v) for v in shape)
        if len(_shapes) > 4096:
            _shapes.clear()
        _shapes[key] = cached
    return p, key, cached
