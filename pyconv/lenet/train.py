"""Trains the shipped LeNet-5 weights (development only: needs PyTorch, `pip install .[train]`).

    pip install '.[train]' && python -m pyconv.lenet.train [--epochs 10] [--out FILE.npz] [--data DIR]

The recipe (all fixed: a rerun with the same PyTorch build and thread count should reproduce the
weights): the 60,000
Fashion-MNIST training images resized by pyconv.lenet.data.resize (the function inference uses),
PyTorch's default initialisation after torch.manual_seed(SEED), Adam (lr 1e-3, betas 0.9/0.999),
batch 128 reshuffled each epoch by a seeded generator, cosine decay of the learning rate to 0 over
the run, cross-entropy loss, no augmentation, no weight decay; 10 epochs. Two CPU threads: an
epoch takes about 70 s on two idle cores (the whole run about 12 minutes). It prints the test
accuracy at the end and stores the recipe and that accuracy in the .npz beside the weights; the
test set is never used to choose anything.

The shipped weights.npz came from this script as it is, with PyTorch 2.13.0 (CPU): training loss
0.2348 after 10 epochs, train accuracy 0.9165, test accuracy 0.8961 (8961 of 10,000), the same
figure `python -m pyconv lenet --batch 10000` gives with the cpu variant.
"""
from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from . import data, model

SEED = 0
BATCH = 128
LEARNING_RATE = 1e-3
THREADS = 2


def _import_torch():
    try:
        import torch
    except ImportError:
        sys.exit("error: training needs PyTorch, a development-only extra: pip install '.[train]' "
                 "(or pip install torch)")
    return torch


def build_network(torch):
    """The network of model.py in PyTorch, as one nn.Sequential (so that pyconv.torch.convert can fuse
    each conv with its ReLU and max-pool); parameters named as in weights.npz (c1, c3, f5, f6), created
    in that order, so PyTorch's seeded default initialisation is the recipe's."""
    from collections import OrderedDict
    nn = torch.nn
    return nn.Sequential(OrderedDict([
        ("c1", nn.Conv2d(model.C1_SHAPE[1], model.C1_SHAPE[0], model.C1_SHAPE[2], bias=False)),  # (B, 4, 80, 80)
        ("relu1", nn.ReLU()),
        ("s2", nn.MaxPool2d(model.POOL1)),                                                       # (B, 4, 40, 40)
        ("c3", nn.Conv2d(model.C3_SHAPE[1], model.C3_SHAPE[0], model.C3_SHAPE[2], bias=False)),  # (B, 16, 34, 34)
        ("relu3", nn.ReLU()),
        ("s4", nn.MaxPool2d(model.POOL3, ceil_mode=True)),                                       # (B, 16, 9, 9)
        ("flatten", nn.Flatten()),
        ("f5", nn.Linear(model.F5_SHAPE[1], model.F5_SHAPE[0])),
        ("relu5", nn.ReLU()),
        ("f6", nn.Linear(model.F6_SHAPE[1], model.F6_SHAPE[0])),                                 # logits
    ]))


# weights.npz name -> the network's parameter name
PARAMETERS = {"c1": "c1.weight", "c3": "c3.weight", "f5_w": "f5.weight", "f5_b": "f5.bias",
              "f6_w": "f6.weight", "f6_b": "f6.bias"}


def export(net) -> dict:
    p = {name: t.detach().cpu().numpy().astype(np.float32) for name, t in net.state_dict().items()}
    return {key: p[name] for key, name in PARAMETERS.items()}


def load_into(torch, net, weights: model.Weights):
    """net with the parameters of `weights` (the inverse of export)."""
    net.load_state_dict({name: torch.from_numpy(getattr(weights, key)) for key, name in PARAMETERS.items()})
    return net


def accuracy(torch, net, images: np.ndarray, labels: np.ndarray) -> float:
    net.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(images), 1000):
            logits = net(torch.from_numpy(images[start:start + 1000]))
            correct += int((logits.argmax(1).numpy() == labels[start:start + 1000]).sum())
    return correct / len(images)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyconv.lenet.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name(model.WEIGHTS_FILE))
    parser.add_argument("--data", help="directory with the Fashion-MNIST idx files")
    args = parser.parse_args(argv)
    torch = _import_torch()
    torch.set_num_threads(THREADS)
    torch.manual_seed(SEED)

    try:
        train_images, train_labels = data.load_split("train", args.data)
        test_images, test_labels = data.load_split("test", args.data)
    except data.DataError as exc:
        sys.exit(f"error: {exc}")
    x_train, x_test = data.resize(train_images), data.resize(test_images)
    y_train = torch.from_numpy(train_labels.astype(np.int64))

    net = build_network(torch)
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE)
    steps_per_epoch = math.ceil(len(x_train) / BATCH)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * steps_per_epoch)
    shuffle = torch.Generator().manual_seed(SEED)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        net.train()
        order = torch.randperm(len(x_train), generator=shuffle)
        total_loss = 0.0
        for step in range(steps_per_epoch):
            idx = order[step * BATCH:(step + 1) * BATCH]
            x = torch.from_numpy(x_train[idx.numpy()])
            loss = torch.nn.functional.cross_entropy(net(x), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total_loss += loss.item() * len(idx)
        print(f"epoch {epoch + 1}/{args.epochs}: training loss {total_loss / len(x_train):.4f}, "
              f"{time.perf_counter() - start:.0f} s", flush=True)

    test_accuracy = accuracy(torch, net, x_test, test_labels)
    train_accuracy = accuracy(torch, net, x_train, train_labels)
    meta = {"recipe": (f"{args.epochs} epochs of Adam (lr {LEARNING_RATE}, cosine decay to 0), batch {BATCH}, "
                       f"cross-entropy, PyTorch default init, seed {SEED}, no augmentation, on the 60,000 "
                       f"training images resized to 86x86 by pyconv.lenet.data.resize (pixels in [0, 1])"),
            "epochs": args.epochs, "seed": SEED, "batch": BATCH, "learning_rate": LEARNING_RATE,
            "torch": torch.__version__, "python": platform.python_version(),
            "test_accuracy": test_accuracy, "train_accuracy": train_accuracy,
            "biases": "conv layers have none; F5 and F6 have biases"}
    model.save_weights(args.out, export(net), meta)
    print(f"test accuracy {test_accuracy:.4f} (train {train_accuracy:.4f}); weights in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
