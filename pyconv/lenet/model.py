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
than 8x8. The two convolutions run on pyconv; everything else is the NumPy below. train.py builds the
same network from the same constants in PyTorch.
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


def relu_maxpool(y: np.ndarray, window: int, out: np.ndarray | None = None) -> np.ndarray:
    """ReLU then max-pool (window x window, stride window, ceil mode) of (B, M, H, W) float32.

    Max is separable: first over each row's windows, then over the columns of the result. Each
    pass is an element-wise maximum of `window` strided views (fast in NumPy, unlike a reduction
    over a 6-D reshape). In ceil mode the view starting at offset r has ceil((H - r) / window)
    entries, one fewer than the output when the last window is partial, so it is folded into the
    leading entries only: a partial window pools over the pixels it has, as PyTorch's ceil mode
    (padding with -inf) does. ReLU comes last: max and max(., 0) commute, and the clamp then
    touches window^2 times fewer values.
    `out`: optional (B, M, ceil(H/window), ceil(W/window)) float32 array to write into.
    """
    B, M, H, W = y.shape
    OH, OW = pooled_size(H, window), pooled_size(W, window)
    if out is None:
        out = np.empty((B, M, OH, OW), np.float32)
    elif out.shape != (B, M, OH, OW):
        raise ValueError(f"out must have shape {(B, M, OH, OW)}, got {out.shape}")
    step = 512  # images per block: the row-pooled temporary stays small enough to stay in cache
    for start in range(0, B, step):
        block = y[start:start + step]
        rows = block[..., ::window].copy()                      # (b, M, H, OW)
        for c in range(1, window):
            view = block[..., c::window]
            np.maximum(rows[..., :view.shape[3]], view, out=rows[..., :view.shape[3]])
        pooled = out[start:start + step]
        pooled[...] = rows[:, :, ::window]                      # (b, M, OH, OW)
        for r in range(1, window):
            view = rows[:, :, r::window]
            np.maximum(pooled[:, :, :view.shape[2]], view, out=pooled[:, :, :view.shape[2]])
    return np.maximum(out, 0.0, out=out)


def head(pooled: np.ndarray, weights: Weights) -> np.ndarray:
    """F5 (+ReLU) and F6 on (B, 16, 9, 9) features; returns the (B, 10) logits, float32."""
    features = pooled.reshape(len(pooled), -1)          # C-order flatten, as torch.flatten
    hidden = np.maximum(features @ weights.f5_w.T + weights.f5_b, 0.0)
    return hidden @ weights.f6_w.T + weights.f6_b


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
