"""Runs any variant on a conv_problem straight through the C ABI (cffi), for the capability tests.

A ConvCase names one problem (shape, groups, dtypes, layouts, bias, epilogue). random_operands() makes
its data as float64 holding values exact in the case's dtypes (NCHW x, MCKK w), which is what the
float64 oracle takes; run_case() stores them in the case's dtypes and layouts, runs a variant with
conv2d_execute (host arrays for cpu; device arrays for GPU variants), the output poisoned first with
0xFF bytes (NaN in f32, f16 and bf16), and returns y as float64 NCHW. error_bound() is the relative
L2 bound a variant is held to for a pair of dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pytest
from oracle import conv2d_reference, rel_l2

from pyconv._lib import check, ffi, lib
from pyconv.api import variant_info
from pyconv.device import DeviceArray

DTYPES = {"f32": 0, "f16": 1, "bf16": 2}
LAYOUTS = {"NCHW": 0, "NHWC": 1}
FILTER_LAYOUTS = {"MCKK": 0, "MKKC": 1}
EPILOGUES = {"none": 0, "relu": 1, "relu_maxpool": 2, "silu": 3}
COMPUTE = {"exact": 0, "tf32": 1, "half": 2, "fast": 3}  # conv_compute (conv.h)
# How each dtype is held in NumPy: bf16 as its 16-bit pattern.
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
# Unit roundoff of an fp16 / bf16 value (2^-(significand bits): 11 / 8 of them) beyond fp32's: what
# storing an fp32 result in that dtype can add.
HALF_ROUNDING = {"f32": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


# ---- bf16 as uint16 bit patterns ----

def _special_values_allowed():
    """NaN, Inf and overflow to Inf are data here (the IEEE tests use them), not NumPy warnings."""
    return np.errstate(invalid="ignore", over="ignore")


def bf16_bits_from_f32(values) -> np.ndarray:
    """float32 -> bf16 bit patterns, round to nearest even; NaN stays a (quiet) NaN, overflow gives Inf."""
    with _special_values_allowed():
        f32 = np.ascontiguousarray(values, np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet_nan = (bits >> 16) | 0x40
    return np.where(np.isnan(f32), quiet_nan, rounded).astype(np.uint16)


def f32_from_bf16_bits(bits) -> np.ndarray:
    """bf16 bit patterns -> float32 (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(values, dtype: str) -> np.ndarray:
    """float values (already exact in dtype, see quantize) as the NumPy array C reads for dtype."""
    with _special_values_allowed():
        f32 = np.asarray(values, np.float32)
        return bf16_bits_from_f32(f32) if dtype == "bf16" else f32.astype(STORAGE[dtype])


def from_storage(array, dtype: str) -> np.ndarray:
    """An array in dtype's storage as float64 of its exact values."""
    with _special_values_allowed():
        return (f32_from_bf16_bits(array) if dtype == "bf16" else np.asarray(array)).astype(np.float64)


def quantize(values, dtype: str) -> np.ndarray:
    """values rounded (to nearest even) to dtype, as float64."""
    return from_storage(to_storage(np.asarray(values, np.float32), dtype), dtype)


# ---- the problem ----

@dataclass(frozen=True)
class ConvCase:
    B: int
    C: int
    H: int
    W: int
    M: int
    KH: int
    KW: int
    stride: tuple = (1, 1)
    padding: tuple = (0, 0)
    extra: tuple = (0, 0)       # pad_h_extra, pad_w_extra: zeros after the last row / column
    dilation: tuple = (1, 1)
    groups: int = 1
    x_dtype: str = "f32"        # x and w
    y_dtype: str = "f32"        # y and bias
    x_layout: str = "NCHW"
    y_layout: str = "NCHW"
    w_layout: str = "MCKK"
    bias: bool = False
    epilogue: str = "none"
    pool: tuple = (2, 2)
    pool_stride: tuple = (2, 2)
    pool_ceil: bool = False
    compute: str = "exact"

    def with_(self, **changes) -> "ConvCase":
        return replace(self, **changes)

    @property
    def w_shape(self) -> tuple:
        return (self.M, self.C // self.groups, self.KH, self.KW)

    def oracle_kwargs(self) -> dict:
        """The arguments of oracle.conv2d_reference (after x, w) for this case."""
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups,
                    padding_extra=self.extra, epilogue=self.epilogue, pool=self.pool,
                    pool_stride=self.pool_stride, pool_ceil=self.pool_ceil)

    def __str__(self) -> str:
        text = (f"B{self.B} C{self.C} {self.H}x{self.W} M{self.M} K{self.KH}x{self.KW} s{self.stride} "
                f"p{self.padding}+{self.extra} d{self.dilation} g{self.groups} {self.x_dtype}->{self.y_dtype} "
                f"{self.x_layout}/{self.w_layout}/{self.y_layout} bias={int(self.bias)} {self.epilogue}")
        if self.epilogue == "relu_maxpool":
            text += f" pool{self.pool}/{self.pool_stride}{' ceil' if self.pool_ceil else ''}"
        return text


def make_problem(case: ConvCase):
    """The case as a cffi conv_problem (conv_problem_init, then every field)."""
    p = ffi().new("conv_problem*")
    check(lib().conv_problem_init(p))
    p.B, p.C, p.H, p.W, p.M, p.KH, p.KW = case.B, case.C, case.H, case.W, case.M, case.KH, case.KW
    p.stride_h, p.stride_w = case.stride
    p.pad_h, p.pad_w = case.padding
    p.pad_h_extra, p.pad_w_extra = case.extra
    p.dilation_h, p.dilation_w = case.dilation
    p.groups = case.groups
    p.x_dtype = p.w_dtype = DTYPES[case.x_dtype]
    p.y_dtype = DTYPES[case.y_dtype]
    p.x_layout, p.y_layout = LAYOUTS[case.x_layout], LAYOUTS[case.y_layout]
    p.w_layout = FILTER_LAYOUTS[case.w_layout]
    p.compute = COMPUTE[case.compute]
    p.bias = int(case.bias)
    p.epilogue = EPILOGUES[case.epilogue]
    p.pool_h, p.pool_w = case.pool
    p.pool_stride_h, p.pool_stride_w = case.pool_stride
    p.pool_ceil = int(case.pool_ceil)
    return p


def output_shape(case: ConvCase) -> tuple:
    """y's (B, M, OH, OW) as the library computes it (pooled under the max-pool epilogue)."""
    shape = ffi().new("int64_t[4]")
    check(lib().conv_problem_output_shape(make_problem(case), shape))
    return tuple(int(n) for n in shape)


def random_operands(case: ConvCase, rng: np.random.Generator, low=-1.0, high=1.0):
    """(x, w, bias): uniform random float64 values exact in the case's dtypes (x, w in x_dtype; bias in
    y_dtype, None without one); x NCHW, w MCKK. The range keeps fp16 sums far from overflow."""
    x = quantize(rng.uniform(low, high, (case.B, case.C, case.H, case.W)), case.x_dtype)
    w = quantize(rng.uniform(low, high, case.w_shape), case.x_dtype)
    bias = quantize(rng.uniform(low, high, case.M), case.y_dtype) if case.bias else None
    return x, w, bias


# ---- variants, from the C table ----

def variant_names() -> list:
    names = []
    for i in range(lib().conv_variant_count()):
        info = ffi().new("conv_variant_info*")
        check(lib().conv_variant_get_info(i, info))
        names.append(ffi().string(info.name).decode())
    return names


def variant_id(name: str) -> int:
    vid = ffi().new("int*")
    check(lib().conv_variant_find(name.encode(), vid))
    return vid[0]


def _mask_names(mask: int, names: dict) -> list:
    return [name for name, value in names.items() if mask & (1 << value)]


@lru_cache(maxsize=None)
def variant_caps(name: str) -> dict:
    """What a variant declares (conv_variant_get_caps), with the masks as lists of names."""
    caps = ffi().new("conv_variant_caps*")
    check(lib().conv_variant_get_caps(variant_id(name), caps))
    return dict(unit=caps.unit, compute=next(k for k, v in COMPUTE.items() if v == caps.compute),
                in_dtypes=_mask_names(caps.in_dtypes, DTYPES), out_dtypes=_mask_names(caps.out_dtypes, DTYPES),
                layouts=_mask_names(caps.layouts, LAYOUTS),
                filter_layouts=_mask_names(caps.filter_layouts, FILTER_LAYOUTS),
                epilogues=_mask_names(caps.epilogues, EPILOGUES), groups=bool(caps.groups), bias=bool(caps.bias),
                dilation=bool(caps.dilation), max_stride=caps.max_stride)


@lru_cache(maxsize=None)
def variant_facts(name: str):
    """pyconv.api's VariantInfo of a variant (on_device, exact, max_rel_error, available, reason)."""
    return next(v for v in variant_info() if v.name == name)


def error_bound(variant: str, x_dtype: str, y_dtype: str) -> float:
    """The relative L2 error a variant may have against the float64 oracle for x/w in x_dtype and y
    (and bias) in y_dtype:

        bound = max_rel_error(variant) + u(y_dtype) + u(x_dtype),   u(f32) = 0, u(f16) = 2^-11, u(bf16) = 2^-8

    max_rel_error is the variant's bound for fp32 data (variants.def). A y stored in fp16/bf16 is the
    fp32 result rounded to nearest, an error of at most u(y) of each element, so at most u(y) in
    relative L2. The oracle sees the inputs' exact half-precision values, so u(x) is headroom for a
    variant that rounds its operands to its own internal format on the way in (e.g. bf16 data through
    an fp16 mainloop). Inputs are drawn from [-1, 1], where fp16 does not overflow."""
    return variant_facts(variant).max_rel_error + HALF_ROUNDING[y_dtype] + HALF_ROUNDING[x_dtype]


# ---- running ----

def _in_layout(x, w, case: ConvCase):
    """x from NCHW and w from MCKK into the case's layouts, C-contiguous."""
    if case.x_layout == "NHWC":
        x = x.transpose(0, 2, 3, 1)
    if case.w_layout == "MKKC":
        w = w.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), np.ascontiguousarray(w)


def _stored_shape(case: ConvCase) -> tuple:
    B, M, OH, OW = output_shape(case)
    return (B, OH, OW, M) if case.y_layout == "NHWC" else (B, M, OH, OW)


def _host_pointer(array):
    return ffi().NULL if array is None else ffi().cast("void*", array.ctypes.data)


def run_case(variant: str, case: ConvCase, x, w, bias=None) -> np.ndarray:
    """Runs `variant` on the case with x (NCHW), w (MCKK), bias (M,) given as float64 exact in the case's
    dtypes; returns y as float64 NCHW. The output is poisoned with 0xFF bytes (NaN) before the call:
    NaN left in the result means an element was not written (or the computation gave NaN). Raises the
    pyconv error of a failed call (ConvUnsupportedError for a refused problem)."""
    problem = make_problem(case)
    vid = variant_id(variant)
    x_host, w_host = _in_layout(x, w, case)
    x_host, w_host = to_storage(x_host, case.x_dtype), to_storage(w_host, case.x_dtype)
    b_host = None if bias is None else to_storage(bias, case.y_dtype)
    y_shape = _stored_shape(case)
    ws_bytes = ffi().new("size_t*")
    check(lib().conv2d_execute_workspace_size(vid, problem, ws_bytes))
    if variant_facts(variant).on_device:
        y = _run_on_device(vid, problem, x_host, w_host, b_host, y_shape, case.y_dtype, ws_bytes[0])
    else:
        y = np.empty(y_shape, STORAGE[case.y_dtype])
        y.view(np.uint8).fill(0xFF)
        ws = np.empty(max(ws_bytes[0], 1), np.uint8)
        check(lib().conv2d_execute(vid, problem, _host_pointer(x_host), _host_pointer(w_host), _host_pointer(b_host),
                                   _host_pointer(y), _host_pointer(ws) if ws_bytes[0] else ffi().NULL, ws_bytes[0],
                                   ffi().NULL))
    y = from_storage(y, case.y_dtype)
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if case.y_layout == "NHWC" else y


def _run_on_device(vid, problem, x_host, w_host, b_host, y_shape, y_dtype, ws_bytes):
    """conv2d_execute on device copies of the operands (legacy default stream); y comes back to the host."""
    d_x, d_w = DeviceArray.from_host(x_host), DeviceArray.from_host(w_host)
    d_b = None if b_host is None else DeviceArray.from_host(b_host)
    d_y = DeviceArray(y_shape, STORAGE[y_dtype])
    d_y.fill_bytes(0xFF)
    d_ws = DeviceArray((ws_bytes,), np.uint8) if ws_bytes else None
    check(lib().conv2d_execute(vid, problem, d_x.handle, d_w.handle, ffi().NULL if d_b is None else d_b.handle,
                               d_y.handle, ffi().NULL if d_ws is None else d_ws.handle, ws_bytes, ffi().NULL))
    check(lib().conv_device_synchronize())  # a kernel fault surfaces here, naming the kernel
    return d_y.get()


def run_config(variant: str, config: str, case: ConvCase, x, w, bias=None, x_offset=0, y_offset=0,
               w_offset=0) -> tuple:
    """Runs launch configuration `config` of `variant` through a C plan on device copies of the operands
    (given as in run_case), x, y and w placed x_offset / y_offset / w_offset elements past an allocation's
    start (to reach paths that need aligned operands, and their fall-backs), y poisoned with NaN, the plan's own
    workspace. Returns (y as float64 NCHW, the plan's workspace bytes)."""
    plan_out = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(variant_id(variant), make_problem(case), config.encode(), -1, plan_out))
    plan = ffi().gc(plan_out[0], lib().conv2d_plan_destroy)
    info = ffi().new("conv_plan_info*")
    check(lib().conv2d_plan_get_info(plan, info))
    assert ffi().string(info.config_name).decode() == config
    ws_bytes = info.workspace_bytes
    x_host, w_host = _in_layout(x, w, case)
    x_host, w_host = to_storage(x_host, case.x_dtype), to_storage(w_host, case.x_dtype)
    shape = _stored_shape(case)
    y_storage = STORAGE[case.y_dtype]
    d_x = DeviceArray.from_host(np.concatenate([np.zeros(x_offset, x_host.dtype), x_host.ravel()]))
    d_w = DeviceArray.from_host(np.concatenate([np.zeros(w_offset, w_host.dtype), w_host.ravel()]))
    d_b = None if bias is None else DeviceArray.from_host(to_storage(bias, case.y_dtype))
    d_y = DeviceArray((y_offset + int(np.prod(shape)),), y_storage)
    d_y.fill_bytes(0xFF)
    d_ws = DeviceArray((ws_bytes,), np.uint8) if ws_bytes else None
    x_ptr = ffi().cast("char*", d_x.handle) + x_offset * x_host.itemsize
    y_ptr = ffi().cast("char*", d_y.handle) + y_offset * np.dtype(y_storage).itemsize
    w_ptr = ffi().cast("char*", d_w.handle) + w_offset * w_host.itemsize
    check(lib().conv2d_plan_run(plan, x_ptr, w_ptr, ffi().NULL if d_b is None else d_b.handle, y_ptr,
                                ffi().NULL if d_ws is None else d_ws.handle, ws_bytes, ffi().NULL))
    check(lib().conv_device_synchronize())
    y = from_storage(d_y.get()[y_offset:].reshape(shape), case.y_dtype)
    return (np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if case.y_layout == "NHWC" else y), ws_bytes


def check_config_non_finite(variant: str, config: str, case: ConvCase, x, w, bias=None) -> np.ndarray:
    """Runs launch configuration `config` on operands that hold a NaN or an Inf (run_config) and checks it against
    the float64 oracle (check_non_finite: NaN, +Inf and -Inf exactly where the oracle has them, the finite outputs
    within the variant's bound). Returns the oracle's y, for the test's own checks of where the bad values went."""
    y, _ = run_config(variant, config, case, x, w, bias)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    check_non_finite(f"{variant}[{config}] on {case}", y, ref, error_bound(variant, case.x_dtype, case.y_dtype))
    return ref


def supports(variant: str, case: ConvCase) -> tuple:
    """(status, message) of conv_variant_supports_problem: the capability check runs before any device
    check, so refusals of undeclared capabilities can be tested without a GPU."""
    status = lib().conv_variant_supports_problem(variant_id(variant), make_problem(case))
    message = ffi().string(lib().conv_last_error()).decode() if status else ""
    return status, message


def assert_fused_matches(fused: np.ndarray, separate: np.ndarray, bound: float, what: str) -> None:
    """A fused epilogue's output against conv + the separate ops on the same variant's unfused output:
    NaN where NaN, every other element within bound x the largest magnitude. Not bit for bit: a fused
    path may run another kernel of the variant (a pooled strip, a generic fallback) that sums the same
    products in another order; a wrong window or a missed bias is off by O(1), far outside."""
    fused, separate = np.asarray(fused, np.float64), np.asarray(separate, np.float64)
    assert fused.shape == separate.shape, f"{what}: shape {fused.shape}, expected {separate.shape}"
    nan = np.isnan(fused) | np.isnan(separate)
    assert np.array_equal(np.isnan(fused), np.isnan(separate)), f"{what}: NaN where conv + separate ops has none (or not where it has)"
    scale = float(np.abs(separate[~nan]).max()) if (~nan).any() else 0.0
    worst = float(np.abs(fused - separate)[~nan].max()) if (~nan).any() else 0.0
    assert worst <= bound * scale, (f"{what}: fused epilogue differs from conv + separate ops by {worst:.3e} "
                                    f"(> {bound:.1e} x {scale:.3e}) at {int((np.abs(fused - separate)[~nan] > bound * scale).sum())} "
                                    f"of {fused.size} outputs")


def skip_unless_available(variant: str) -> None:
    """Skips the calling test, with the library's reason, where the variant cannot run here."""
    facts = variant_facts(variant)
    if not facts.available:
        pytest.skip(f"{variant} unavailable here: {facts.reason}")


def default_config(variant: str, case: ConvCase) -> str:
    """The configuration the variant's plan for the case takes when none is named."""
    info = ffi().new("conv_plan_info*")
    plan = ffi().new("conv_plan**")
    check(lib().conv2d_plan_create(variant_id(variant), make_problem(case), ffi().NULL, -1, plan))
    check(lib().conv2d_plan_get_info(plan[0], info))
    name = ffi().string(info.config_name).decode()
    check(lib().conv2d_plan_destroy(plan[0]))
    return name


def check_swept_configs(variant: str, swept) -> None:
    """A variant's tests sweep every configuration the library has (a new one must join them); skipped in
    a build without CUDA, where GPU variants have none."""
    if not lib().conv_built_with_cuda():
        pytest.skip(f"libconv built without CUDA: {variant} has no configurations")
    from pyconv.api import variant_configs
    assert sorted(variant_configs(variant)) == sorted(set(swept)), variant


def check_non_finite(label: str, y, ref, bound: float) -> None:
    """y against an oracle with non-finite outputs (an Inf weight, NaN where it meets padding): NaN and Inf of
    the same sign exactly where the oracle has them, the finite outputs within `bound` (relative L2)."""
    nan_y, nan_ref = np.isnan(y), np.isnan(ref)
    assert np.array_equal(nan_y, nan_ref), (f"{label}: NaN at {int(nan_y.sum())} outputs, the oracle at "
                                            f"{int(nan_ref.sum())}; they differ at {int((nan_y != nan_ref).sum())}")
    assert np.array_equal(np.isinf(y), np.isinf(ref)) and np.array_equal(np.sign(y[np.isinf(y)]),
                                                                         np.sign(ref[np.isinf(ref)]))
    finite = np.isfinite(ref)
    err = rel_l2(y[finite], ref[finite])
    assert err <= bound, f"{label}: relative L2 error {err:.2e} on the finite outputs"


def check_config(variant: str, config: str, case: ConvCase, rng: np.random.Generator, **offsets) -> int:
    """Runs the case (at the variant's compute level) on fresh data through launch configuration `config`
    (run_config: y poisoned with NaN; offsets as there), holds every output to be written and within the
    variant's bound against the float64 oracle; returns the plan's workspace bytes."""
    case = case.with_(compute=variant_caps(variant)["compute"])
    x, w, bias = random_operands(case, rng)
    y, ws_bytes = run_config(variant, config, case, x, w, bias, **offsets)
    ref = conv2d_reference(x, w, bias=bias, **case.oracle_kwargs())
    assert y.shape == ref.shape
    assert not np.isnan(y).any(), f"{variant}[{config}]: {int(np.isnan(y).sum())} outputs not written on {case}"
    err, bound = rel_l2(y, ref), error_bound(variant, case.x_dtype, case.y_dtype)
    assert err <= bound, f"{variant}[{config}] on {case}: relative L2 error {err:.2e} > {bound:.2e}"
    return ws_bytes

