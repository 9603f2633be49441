"""The network as pyconv runs it, whatever the device: four conv layers with fused epilogues, the
choice of algorithm and precision (Mode), and what a run gives back (Result).

    images (B, 28, 28) uint8
    resize            -> x  (B, 1, 86, 86)   f32 (fp16 on the fast path)
    C1 + ReLU + pool  -> s2 (B, 4, 40, 40)   f32 (fp16 on the fast path)   one fused conv
    C3 + ReLU + pool  -> s4 (B, 16, 9, 9)    f32                           one fused conv, ceil mode
    F5 + bias + ReLU  -> (B, 32, 1, 1)       f32                           9x9 conv over the 9x9 map
    F6 + bias         -> logits (B, 10, 1, 1) f32                          1x1 conv
    softmax, argmax   -> classes (B,) int32, probabilities (B, 10) f32

host_net.py runs it on the host with the `cpu` variant, device_net.py on a GPU stream.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from .. import api
from .._lib import check, ffi, lib
from .._problem import EPILOGUE_RELU_MAXPOOL, Epilogue, ReluMaxPool
from . import model

# The bounds a reduced-precision run is held to against the exact `cpu` predictions.
MIN_AGREEMENT = 0.995       # share of images whose predicted class is the same
MAX_ACCURACY_LOSS = 0.002   # accuracy (as a fraction) it may lose

HEAD_VARIANT = "implicit_gemm"  # F5, F6 on the GPU: exact fp32 with bias + ReLU fused, no tuning needed
CLASSES = model.F6_SHAPE[0]


@dataclass(frozen=True)
class Layer:
    name: str             # "C1", "C3", "F5", "F6"
    label: str            # what the layer does, for tables
    in_shape: tuple       # one image's input (C, H, W)
    w_shape: tuple        # (M, C, KH, KW)
    bias: bool
    epilogue: Epilogue

    @property
    def conv_shape(self) -> tuple:
        """One image's convolution output before any pooling (M, OH, OW): stride 1, no padding."""
        return (self.w_shape[0],) + tuple(n - k + 1 for n, k in zip(self.in_shape[1:], self.w_shape[2:]))

    @property
    def out_shape(self) -> tuple:
        """One image's output, pooled where the epilogue pools (ceil mode as the epilogue says)."""
        if not isinstance(self.epilogue, ReluMaxPool):
            return self.conv_shape
        k = self.epilogue.kernel
        size = model.pooled_size if self.epilogue.ceil_mode else (lambda n, w: n // w)
        return (self.w_shape[0],) + tuple(size(n, k) for n in self.conv_shape[1:])

    def flops(self, batch: int) -> float:
        """Multiply-adds of the convolution x 2."""
        return 2.0 * batch * np.prod(self.conv_shape) * np.prod(self.w_shape[1:])


LAYERS = (
    Layer("C1", "C1 conv 1->4 7x7 + ReLU + max-pool 2x2", model.INPUT_SHAPE, model.C1_SHAPE, False,
          ReluMaxPool(model.POOL1)),
    Layer("C3", "C3 conv 4->16 7x7 + ReLU + max-pool 4x4 (ceil)", model.S2_OUT, model.C3_SHAPE, False,
          ReluMaxPool(model.POOL3, ceil_mode=True)),
    Layer("F5", "F5 1296->32 (9x9 conv) + bias + ReLU", model.S4_OUT, model.F5_CONV, True, "relu"),
    Layer("F6", "F6 32->10 (1x1 conv) + bias", (model.F5_CONV[0], 1, 1), model.F6_CONV, True, None),
)
CONV_LAYERS = ("C1", "C3")  # the layers --variant chooses the algorithm of; F5, F6 use HEAD_VARIANT


def layer_weights(weights: model.Weights) -> dict:
    """name -> (w, bias or None) in conv form, float32 (F5's rows as (32, 16, 9, 9): the same memory)."""
    return {"C1": (weights.c1, None), "C3": (weights.c3, None),
            "F5": (weights.f5_w.reshape(model.F5_CONV), weights.f5_b),
            "F6": (weights.f6_w.reshape(model.F6_CONV), weights.f6_b)}


def variant_caps(name: str):
    """The capabilities a concrete variant declares (conv_variant_caps)."""
    caps = ffi().new("conv_variant_caps*")
    check(lib().conv_variant_get_caps(api.variant_id(name), caps))
    return caps


_F16 = 1 << 1  # 1 << CONV_F16


@dataclass(frozen=True)
class Mode:
    """How C1 and C3 run: the variant (a name or 'auto'), the precision asked for, and whether the
    image and the pooled C1 map are kept in fp16 (the fast path with a variant that reads and writes
    fp16: half the bytes between resize, C1 and C3)."""
    variant: str
    precision: str        # "exact" or "fast"
    half: bool

    @classmethod
    def of(cls, variant: str, precision: str) -> "Mode":
        """`precision` for auto; a named variant runs at its own arithmetic's precision (an exact one
        in fp32 throughout, so that its predictions can be held to be cpu's)."""
        if variant == "auto":
            return cls(variant, precision, precision == "fast")
        caps = variant_caps(variant)
        if caps.compute == 0:  # CONV_COMPUTE_EXACT
            return cls(variant, "exact", False)
        return cls(variant, "fast", bool(caps.in_dtypes & _F16 and caps.out_dtypes & _F16))

    @property
    def label(self) -> str:
        name = self.variant if self.variant != "auto" else f"auto ({self.precision})"
        return name + (", fp16 image and C1 map" if self.half else "")

    def dtypes(self, layer: Layer) -> tuple[str, str]:
        """(x and w dtype, y and bias dtype) of a layer."""
        half = "float16" if self.half else "float32"
        return {"C1": (half, half), "C3": (half, "float32")}.get(layer.name, ("float32", "float32"))


def fuses_pool(variant: str) -> bool:
    """Whether a concrete variant (or auto, which picks among those that do) fuses ReLU + max-pool."""
    return variant == "auto" or bool(variant_caps(variant).epilogues & (1 << EPILOGUE_RELU_MAXPOOL))


@dataclass
class Result:
    """One run of the network over a set of images."""
    classes: np.ndarray                     # (N,) predicted class per image
    probabilities: np.ndarray | None        # (N, 10), where asked for
    stage_ms: dict                          # stage -> ms (GPU: one batch, median over runs; host: all batches)
    end_to_end_ms: list                     # each timed run, host images to host predictions
    variants: dict = field(default_factory=dict)  # layer -> the concrete variant[config] that ran
    streamed_ms: list = field(default_factory=list)  # GPU, more than one batch: each pass over all images
    recipe: list | None = None              # GPU: the launches (device_net.Recipe), for the floors

    @property
    def predictions(self) -> np.ndarray:
        return self.classes

    @property
    def median_ms(self) -> float:
        return statistics.median(self.end_to_end_ms)

    @property
    def median_ms_streamed(self) -> float:
        return statistics.median(self.streamed_ms)

    def accuracy(self, labels: np.ndarray) -> float:
        return float((self.classes == labels).mean())


def agreement_problem(result: Result, reference: Result, labels: np.ndarray, exact: bool) -> tuple[float, str]:
    """(share of predictions equal to the reference's, the problem or ''): exact runs must predict
    exactly as cpu does; reduced precision ones within MIN_AGREEMENT and MAX_ACCURACY_LOSS."""
    same = result.classes == reference.classes
    agreement = float(same.mean())
    loss = reference.accuracy(labels) - result.accuracy(labels)
    if exact and not same.all():
        return agreement, f"exact run differs from cpu on {int((~same).sum())} images"
    if not exact and (agreement < MIN_AGREEMENT or loss > MAX_ACCURACY_LOSS):
        return agreement, (f"agrees with cpu on {agreement:.2%} of images (needs {MIN_AGREEMENT:.1%}) and "
                           f"loses {loss:.4f} accuracy (at most {MAX_ACCURACY_LOSS})")
    return agreement, ""
