"""Networks to convert, for the tests and bench/torch_models.py: the main job's LeNet-5 and twelve torchvision
networks (random weights; torchvision is imported only when one of those is asked for)."""
from __future__ import annotations

import torch
from torch import nn

from ..lenet import model as lenet_model
from ..lenet.train import build_network


def lenet5() -> nn.Sequential:
    """The main job's LeNet-5 as pyconv/lenet/train.py defines it (an nn.Sequential, so that convert can
    fuse each conv's ReLU + max-pool), with PyTorch's default initialisation."""
    return build_network(torch)


def _torchvision(name: str):
    def build():
        import torchvision
        return getattr(torchvision.models, name)()
    return build


# name: (builder, input (C, H, W))
NETWORKS = {
    "lenet5": (lenet5, lenet_model.INPUT_SHAPE),
    "resnet18": (_torchvision("resnet18"), (3, 224, 224)),
    "mobilenet_v2": (_torchvision("mobilenet_v2"), (3, 224, 224)),
    "convnext_tiny": (_torchvision("convnext_tiny"), (3, 224, 224)),
    "resnet50": (_torchvision("resnet50"), (3, 224, 224)),
    "resnext50_32x4d": (_torchvision("resnext50_32x4d"), (3, 224, 224)),
    "mobilenet_v3_large": (_torchvision("mobilenet_v3_large"), (3, 224, 224)),
    "efficientnet_b0": (_torchvision("efficientnet_b0"), (3, 224, 224)),
    "regnet_y_400mf": (_torchvision("regnet_y_400mf"), (3, 224, 224)),
    "shufflenet_v2_x1_0": (_torchvision("shufflenet_v2_x1_0"), (3, 224, 224)),
    "densenet121": (_torchvision("densenet121"), (3, 224, 224)),
    "googlenet": (_torchvision("googlenet"), (3, 224, 224)),
}
# The four the suite and the default bench run; the rest for --models (the project does not tune for them).
DEFAULT_NETWORKS = ("lenet5", "resnet18", "mobilenet_v2", "convnext_tiny")


def build(name: str, device, dtype=torch.float32, seed: int = 0) -> nn.Module:
    """The network in eval mode, initialised from `seed`."""
    torch.manual_seed(seed)
    return NETWORKS[name][0]().to(device=device, dtype=dtype).eval()
