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
    """The network of model.py in PyTorch; parameters named as in weights.npz."""
    nn, F = torch.nn, torch.nn.functional

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(model.C1_SHAPE[1], model.C1_SHAPE[0], model.C1_SHAPE[2], bias=False)
            self.c3 = nn.Conv2d(model.C3_SHAPE[1], model.C3_SHAPE[0], model.C3_SHAPE[2], bias=False)
            self.f5 = nn.Linear(model.F5_SHAPE[1], model.F5_SHAPE[0])
            self.f6 = nn.Linear(model.F6_SHAPE[1], model.F6_SHAPE[0])

        def forward(self, x):                      # x is (B, 1, 86, 86)
            x = F.max_pool2d(F.relu(F.conv2d(x, self.c1.weight)), model.POOL1)             # (B, 4, 40, 40)
            x = F.max_pool2d(F.relu(F.conv2d(x, self.c3.weight)), model.POOL3, ceil_mode=True)  # (B, 16, 9, 9)
            x = F.relu(self.f5(torch.flatten(x, 1)))
            return self.f6(x)                      # logits; softmax is in the loss

    return LeNet5()


def export(net) -> dict:
    p = {name: t.detach().cpu().numpy().astype(np.float32) for name, t in net.state_dict().items()}
    return {"c1": p["c1.weight"], "c3": p["c3.weight"], "f5_w": p["f5.weight"], "f5_b": p["f5.bias"],
            "f6_w": p["f6.weight"], "f6_b": p["f6.bias"]}


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
