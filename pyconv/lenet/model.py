"""The modified LeNet-5: its shapes, its shipped weights, and the layers that run on the host.

    input 1x86x86
    C1  conv 1->4, 7x7, stride 1, no padding, no bias        -> 4x80x80
        ReLU, max-pool 2x2 stride 2                           -> 4x40x40
    C3  conv 4->16, 7x7, stride 1, no padding, no bias       -> 16x34x34
        ReLU, max-pool 4x4 stride 4, ceil mode                -> 16x9x9
    F5  fully connected 1296->32 with bias, ReLU
    F6  fully connected 32->10 with bias, softmax            -> 10 class probabilities

Ceil mode for the 4x4 pool: 34 is not a multiple of 4, and the original framework keeps the partial
last window (rows/columns 32..33), as PyTorch's max_pool2d(ceil_mode=True) does, giving 9x9 rather
than 8x8. The fully connected layers are convolutions too: F5 is a 16->32 conv whose 9x9 kernel covers
the whole 9x9 map (its weights are F5's rows in C-order, as torch.flatten lays the features out), F6
a 32->10 1x1 conv; so every layer runs on pyconv (network.py). train.py builds the same network from
the same constants in PyTorch.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

INPUT_SHAPE = (1, 86, 86)
C1_SHAPE = (4, 1, 7, 7)      # (M, C, KH, KW)
C3_SHAPE = (16, 4, 7, 7)
POOL1, POOL3 = 2, 4          # max-pool window = stride


def pooled_size(size: int, window: int) -> int:
    """Output size of a max-pool with stride = window in ceil mode (partial last window kept)."""
    return -(-size // window)


def _conv_out(shape, w_shape):   # stride 1, no padding
    return (w_shape[0],) + tuple(n - k + 1 for n, k in zip(shape[1:], w_shape[2:]))


def _pool_out(shape, window):
    return (shape[0],) + tuple(pooled_size(n, window) for n in shape[1:])


C1_OUT = _conv_out(INPUT_SHAPE, C1_SHAPE)   # (4, 80, 80)
S2_OUT = _pool_out(C1_OUT, POOL1)           # (4, 40, 40)
C3_OUT = _conv_out(S2_OUT, C3_SHAPE)        # (16, 34, 34)
S4_OUT = _pool_out(C3_OUT, POOL3)           # (16, 9, 9)
F5_SHAPE = (32, S4_OUT[0] * S4_OUT[1] * S4_OUT[2])  # (out, in) = (32, 1296), PyTorch's Linear layout
F6_SHAPE = (10, 32)
F5_CONV = (F5_SHAPE[0],) + S4_OUT        # (32, 16, 9, 9): F5 as a conv over the pooled C3 map
F6_CONV = (F6_SHAPE[0], F6_SHAPE[1], 1, 1)
WEIGHTS_FILE = "weights.npz"


@dataclass(frozen=True)
class Weights:
    c1: np.ndarray       # (4, 1, 7, 7)
    c3: np.ndarray       # (16, 4, 7, 7)
    f5_w: np.ndarray     # (32, 1296)
    f5_b: np.ndarray     # (32,)
    f6_w: np.ndarray     # (10, 32)
    f6_b: np.ndarray     # (10,)
    meta: dict           # how they were trained and what they scored (see train.py)


EXPECTED = {"c1": C1_SHAPE, "c3": C3_SHAPE, "f5_w": F5_SHAPE, "f5_b": F5_SHAPE[:1],
            "f6_w": F6_SHAPE, "f6_b": F6_SHAPE[:1]}


def load_weights(path=None) -> Weights:
    """The trained weights shipped inside the package (or those in `path`), shape-checked."""
    if path is None:
        with resources.as_file(resources.files("pyconv.lenet") / WEIGHTS_FILE) as file:
            return _read_weights(file)
    return _read_weights(path)


def _read_weights(file) -> Weights:
    with np.load(file, allow_pickle=False) as npz:
        arrays = {}
        for name, shape in EXPECTED.items():
            if name not in npz or npz[name].shape != shape:
                raise ValueError(f"{file}: {name} must have shape {shape}")
            arrays[name] = np.ascontiguousarray(npz[name], dtype=np.float32)
        meta = json.loads(str(npz["meta"])) if "meta" in npz else {}
    return Weights(meta=meta, **arrays)


def save_weights(path, arrays: dict, meta: dict) -> None:
    """Writes the six arrays (float32) and the recipe/score as JSON text, loadable without pickle."""
    for name, shape in EXPECTED.items():
        if arrays[name].shape != shape:
            raise ValueError(f"{name} has shape {arrays[name].shape}, expected {shape}")
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)),
                        **{name: np.asarray(arrays[name], np.float32) for name in EXPECTED})


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (B, K) logits (the host path; the GPU path has conv_softmax_argmax)."""
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
