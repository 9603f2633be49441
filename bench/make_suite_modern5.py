"""Writes pyconv/bench/suites/modern5.csv: the distinct conv layers, the depthwise ones aside (those are suite
`groups`'s), of MobileNetV2, MobileNetV3-Large, EfficientNet-B0, ConvNeXt-T and RegNetY-400MF at a 224x224 input,
from torchvision's definitions: one forward of each network with a hook on every nn.Conv2d. Needs torchvision (not
a dependency of pyconv: only this script reads it).

    python bench/make_suite_modern5.py [--out pyconv/bench/suites/modern5.csv]
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch
from torch import nn

from pyconv.bench import roofline
from pyconv.bench.shapes import Shape

NETWORKS = (  # (name in the suite, torchvision builder, its file)
    ("mobilenetv2", "mobilenet_v2", "mobilenetv2.py"),
    ("mobilenetv3_l", "mobilenet_v3_large", "mobilenetv3.py"),
    ("efficientnet_b0", "efficientnet_b0", "efficientnet.py"),
    ("convnext_t", "convnext_tiny", "convnext.py"),
    ("regnety_400mf", "regnet_y_400mf", "regnet.py"),
)
COLUMNS = ("net", "layer", "H", "W", "C", "M", "K", "stride", "pad", "group", "out_H", "out_W", "n_layers",
           "all_layers", "gflop_n1", "source")


def conv_layers(model: nn.Module) -> list:
    """(module name, C, H, W, M, K, stride, pad, groups, OH, OW) of every Conv2d in one forward's order."""
    seen = []
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            def hook(m, args, y, name=name):
                (kh, kw), (sh, sw), (ph, pw) = m.kernel_size, m.stride, m.padding
                assert kh == kw and sh == sw and ph == pw and m.dilation == (1, 1), name  # the suite's columns
                _, c, h, w = args[0].shape
                seen.append((name, c, h, w, m.out_channels, kh, sh, ph, m.groups, y.shape[2], y.shape[3]))
            handles.append(module.register_forward_hook(hook))
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, 224, 224))
    for h in handles:
        h.remove()
    return seen


def kind(c, m, k, stride, groups) -> str:
    """A layer's label stem: pw (1x1 stride 1), else k<K>, s<stride> past 1, g<groups> past 1."""
    if k == 1 and stride == 1 and groups == 1:
        return "pw"
    return f"k{k}" + (f"s{stride}" if stride > 1 else "") + (f"g{groups}" if groups > 1 else "")


def rows() -> list:
    import torchvision.models as tvm
    out = []
    for net, builder, source in NETWORKS:
        layers = {}
        for name, c, h, w, m, k, stride, pad, groups, oh, ow in conv_layers(getattr(tvm, builder)(weights=None)):
            if groups == c == m:
                continue  # depthwise: suite groups
            layers.setdefault((h, w, c, m, k, stride, pad, groups, oh, ow), []).append(name)
        counters = {}
        for (h, w, c, m, k, stride, pad, groups, oh, ow), names in layers.items():
            stem = kind(c, m, k, stride, groups)
            counters[stem] = counters.get(stem, -1) + 1
            at_b1 = Shape(net, 1, c, h, w, m, k, k, (stride, stride), (pad, pad), groups=groups)
            out.append(dict(net=net, layer=f"{stem}_{counters[stem]}", H=h, W=w, C=c, M=m, K=k, stride=stride,
                            pad=pad, group=groups, out_H=oh, out_W=ow, n_layers=len(names),
                            all_layers=";".join(names),
                            gflop_n1=f"{roofline.flops(at_b1) / 1e9:.6g}",
                            source=f"pytorch/vision:torchvision/models/{source} ({builder})"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "pyconv" / "bench"
                        / "suites" / "modern5.csv")
    args = parser.parse_args()
    table = rows()
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    print(f"{args.out}: {len(table)} distinct layers")


if __name__ == "__main__":
    main()
