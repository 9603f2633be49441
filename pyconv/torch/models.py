"""Networks to convert, for the tests and bench/torch_models.py: the main job's LeNet-5, twelve torchvision
networks (random weights; torchvision is imported only when one of those is asked for) and two parts of
RepLKNet-31B's stages (large-kernel depthwise blocks)."""
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


class _RepLKBlock(nn.Module):
    """RepLKNet's RepLKBlock in its inference form (DingXiaoH/RepLKNet-pytorch, replknet.py): BN, 1x1 conv + BN
    + ReLU, the depthwise K x K conv (its small-kernel branch merged: one conv with a bias), ReLU, 1x1 conv + BN,
    and the residual."""

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.prelkb_bn = nn.BatchNorm2d(channels)
        self.pw1 = nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
        self.large_kernel = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels)
        self.lk_nonlinear = nn.ReLU()
        self.pw2 = nn.Sequential(nn.Conv2d(channels, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        return x + self.pw2(self.lk_nonlinear(self.large_kernel(self.pw1(self.prelkb_bn(x)))))


class _ConvFFN(nn.Module):
    """RepLKNet's ConvFFN: BN, 1x1 conv to 4x the channels + BN, GELU, 1x1 conv back + BN, and the residual."""

    def __init__(self, channels: int):
        super().__init__()
        self.preffn_bn = nn.BatchNorm2d(channels)
        self.pw1 = nn.Sequential(nn.Conv2d(channels, 4 * channels, 1, bias=False), nn.BatchNorm2d(4 * channels))
        self.nonlinear = nn.GELU()
        self.pw2 = nn.Sequential(nn.Conv2d(4 * channels, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        return x + self.pw2(self.nonlinear(self.pw1(self.preffn_bn(x))))


def _replknet31b_stage(channels: int, kernel: int, pairs: int):
    """Part of a RepLKNet-31B stage (create_RepLKNet31B: channels 128 / 256 / 512 / 1024, kernels 31 / 29 /
    27 / 13 at 56 / 28 / 14 / 7 pixels): `pairs` RepLKBlock + ConvFFN pairs, as the stage alternates them."""
    def build():
        return nn.Sequential(*[m for _ in range(pairs) for m in (_RepLKBlock(channels, kernel), _ConvFFN(channels))])
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
    # Large-kernel depthwise blocks (issue 44): RepLKNet-31B's first stage whole (2 pairs, 31x31) and 2 of the
    # 18 pairs of its third (27x27).
    "replknet31b_s0": (_replknet31b_stage(128, 31, 2), (128, 56, 56)),
    "replknet31b_s2": (_replknet31b_stage(512, 27, 2), (512, 14, 14)),
}
# The four the suite and the default bench run; the rest for --models (the project does not tune for them).
DEFAULT_NETWORKS = ("lenet5", "resnet18", "mobilenet_v2", "convnext_tiny")


def build(name: str, device, dtype=torch.float32, seed: int = 0) -> nn.Module:
    """The network in eval mode, initialised from `seed`, its batch norms' running statistics those of two
    random batches (in float32, before the cast to dtype: every dtype's copy has the same ones). With the
    defaults (mean 0, variance 1) deep networks' outputs collapse (googlenet's to its last bias: 7.5e-11 from
    float64 on both sides), which no accuracy comparison sees through, and a folded norm is nearly the identity."""
    torch.manual_seed(seed)
    model = NETWORKS[name][0]().to(device=device)
    _calibrate_batch_norms(model, NETWORKS[name][1], seed)
    return model.to(dtype=dtype).eval()


def _calibrate_batch_norms(model: nn.Module, input_shape, seed: int) -> None:
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    model.train()
    with torch.no_grad():
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average of the batches
        for _ in range(2):
            model(torch.rand(4, *input_shape, generator=gen).to(device))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
