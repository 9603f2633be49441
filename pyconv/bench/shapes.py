"""Shapes to benchmark: the built-in suites and CSV files of the user's own.

Suites:
  lenet  LeNet-5's two conv layers, C1 (1 -> 4 maps, 7x7 on 86x86) and C3 (4 -> 16, 7x7 on 40x40),
         at B = 100, 1000, 5000, 10000.
  cnn5   the distinct conv layers of AlexNet, GoogLeNet, ResNet-50, SqueezeNet 1.0/1.1 and VGG-19
         (suites/cnn5.csv, from their public Caffe definitions) at B = 1 and 32.
  groups the distinct depthwise and grouped conv layers of MobileNetV2, EfficientNet-B0, ConvNeXt-T and
         ResNeXt-50 32x4d at a 224x224 input (suites/groups.csv, from torchvision's definitions) at
         B = 1 and 32.
  modern5
         the distinct conv layers, depthwise ones aside, of MobileNetV2, MobileNetV3-Large, EfficientNet-B0,
         ConvNeXt-T and RegNetY-400MF at a 224x224 input (suites/modern5.csv, from torchvision's definitions
         by bench/make_suite_modern5.py: pointwise layers, stems, ConvNeXt's patchify and downsampling convs,
         RegNet's grouped 3x3 convs, the squeeze-excitation 1x1 convs on 1x1 planes) at B = 1 and 32.
  large_kernel
         the distinct large-kernel depthwise layers of RepLKNet-31B (31x31 to 13x13), SLaK-T (51x5 / 5x51
         bands), UniRepLKNet-T / -S (13x13), InceptionNeXt-T (1x11 / 11x1 bands) and MixNet-M (9x9, the
         largest of its mixed depthwise kernels, at strides 1 and 2) at a 224x224 input, in
         their inference form (suites/large_kernel.csv, from each model's public code, named in its source
         column) at B = 1 and 32.

A CSV file of shapes: one row per shape, a header naming the columns (case does not matter; other
columns are ignored):
  C, H, W, M                 required: input channels, input height and width, output maps
  K, or KH and KW            required: kernel size
  name, or net and layer     optional: the row's label (default: the file name and row number)
  B (or batch)               optional: the batch; without it the shape runs at B = 1 and 32
  stride, or SH and SW       optional, default 1
  pad, or PH and PW          optional, default 0 (zeros on both sides)
  dilation, or DH and DW     optional, default 1
  group (or G)               optional, default 1; C and M divisible by it (w is (M, C/group, KH, KW))
The suites' CSV files and the anchor files with cuDNN timings (name,B,C,H,W,M,KH,KW,SH,SW,PH,PW,G,...)
are in this format. `--batch` replaces the batches of any suite or file.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from .._lib import ConvError

PACKAGED = ("cnn5", "groups", "modern5", "large_kernel")  # suites/<name>.csv, shipped with the package
SUITES = ("lenet",) + PACKAGED
LENET_BATCHES = (100, 1000, 5000, 10000)
DEFAULT_BATCHES = (1, 32)  # the packaged suites, and CSV files without a B column


@dataclass(frozen=True)
class Shape:
    """One convolution: x (B, C, H, W) * w (M, C/groups, KH, KW), no bias. B = 0 in a template.
    (Dtypes and layouts are the comparison's: comparisons.py.)"""
    name: str
    B: int
    C: int
    H: int
    W: int
    M: int
    KH: int
    KW: int
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1

    @property
    def x_shape(self) -> tuple:
        return (self.B, self.C, self.H, self.W)

    @property
    def w_shape(self) -> tuple:
        return (self.M, self.C // self.groups, self.KH, self.KW)

    @property
    def out_hw(self) -> tuple:
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.pad, self.dilation
        return ((self.H + 2 * ph - dh * (self.KH - 1) - 1) // sh + 1,
                (self.W + 2 * pw - dw * (self.KW - 1) - 1) // sw + 1)

    @property
    def y_shape(self) -> tuple:
        return (self.B, self.M) + self.out_hw

    @property
    def geometry(self) -> tuple:
        """Everything but the name and the batch: two shapes with one geometry are one shape."""
        return (self.C, self.H, self.W, self.M, self.KH, self.KW, self.stride, self.pad, self.dilation, self.groups)

    def as_dict(self) -> dict:
        oh, ow = self.out_hw
        return {"shape": self.name, "B": self.B, "C": self.C, "H": self.H, "W": self.W, "M": self.M,
                "KH": self.KH, "KW": self.KW, "stride_h": self.stride[0], "stride_w": self.stride[1],
                "pad_h": self.pad[0], "pad_w": self.pad[1], "dilation_h": self.dilation[0],
                "dilation_w": self.dilation[1], "groups": self.groups, "OH": oh, "OW": ow}


LENET_LAYERS = (Shape("lenet/C1", 0, 1, 86, 86, 4, 7, 7), Shape("lenet/C3", 0, 4, 40, 40, 16, 7, 7))


def _int(row: dict, keys, where: str, default=None) -> int:
    for key in keys:
        value = (row.get(key) or "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                raise ConvError(f"{where}: column '{key}' must be an integer, got {value!r}") from None
    if default is None:
        raise ConvError(f"{where}: needs a column {' or '.join(repr(k) for k in keys)}")
    return default


def _pair(row: dict, both: str, h: str, w: str, where: str, default: int) -> tuple:
    """(h, w) from columns h and w, or one column for both."""
    return (_int(row, (h, both), where, default), _int(row, (w, both), where, default))


def read_csv(path) -> list:
    """Shapes of a CSV file (see the module's docstring); B = 0 where the file has no B column."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConvError(f"cannot read the shape file {path}: {exc.strerror}") from None
    shapes = []
    for number, raw in enumerate(csv.DictReader(text.splitlines()), start=2):
        row = {(k or "").strip().lower(): v for k, v in raw.items()}
        where = f"{path.name} line {number}"
        name = (row.get("name") or "").strip() or "/".join(
            part for part in ((row.get("net") or "").strip(), (row.get("layer") or "").strip()) if part)
        shapes.append(Shape(
            name=name or f"{path.stem}:{number}", B=_int(row, ("b", "batch"), where, 0),
            C=_int(row, ("c",), where), H=_int(row, ("h",), where), W=_int(row, ("w",), where),
            M=_int(row, ("m",), where), KH=_int(row, ("kh", "k"), where), KW=_int(row, ("kw", "k"), where),
            stride=_pair(row, "stride", "sh", "sw", where, 1), pad=_pair(row, "pad", "ph", "pw", where, 0),
            dilation=_pair(row, "dilation", "dh", "dw", where, 1), groups=_int(row, ("group", "g"), where, 1)))
    if not shapes:
        raise ConvError(f"the shape file {path} has no rows")
    return shapes


def _with_batches(templates, batches) -> list:
    """Every template at every batch, batch-major (all layers at the first batch, then the next)."""
    return [replace(t, B=b) for b in batches for t in templates]


def label(suite: str) -> str:
    """A suite's name in tables: a built-in suite's name, or a CSV file's stem."""
    return suite if suite in SUITES else Path(suite).stem


def load_suite(suite: str, batches=None) -> list:
    """The shapes of a suite name or a CSV file path, at `batches` when given (else the suite's own)."""
    if suite == "lenet":
        return _with_batches(LENET_LAYERS, batches or LENET_BATCHES)
    if suite in PACKAGED:
        with resources.as_file(resources.files("pyconv.bench") / "suites" / f"{suite}.csv") as path:
            return _with_batches(read_csv(path), batches or DEFAULT_BATCHES)
    if not Path(suite).is_file():
        raise ConvError(f"--suite must be one of {', '.join(SUITES)} or a CSV file of shapes; "
                        f"{suite!r} is neither")
    shapes = read_csv(suite)
    if batches:  # one shape per geometry, then the batches asked for
        unique = {}
        for s in shapes:
            unique.setdefault(s.geometry, replace(s, B=0))
        return _with_batches(list(unique.values()), batches)
    fixed = [s for s in shapes if s.B > 0]
    return fixed + _with_batches([s for s in shapes if s.B == 0], DEFAULT_BATCHES)


def by_layer(suite) -> list:
    """The same shapes, each layer at all its batches before the next layer (a suite is batch-major):
    the order for a run with a time limit, so that where it stops every batch has the same layers."""
    layers = {}
    for s in suite:
        layers.setdefault((s.name, s.geometry), []).append(s)
    return [s for group in layers.values() for s in group]
