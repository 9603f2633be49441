"""Fashion-MNIST from the standard idx files, and the one resize from 28x28 to the network's 86x86.

Where the files are read from, first found: --data DIR, $PYCONV_LENET_DATA, Debian's
`dataset-fashion-mnist` package (/usr/share/datasets/fashion-mnist, all four files), then, for the
test split only, the copy of the 10,000-image test set shipped inside this package (fashion_mnist/,
4.4 MB, MIT licence: see its LICENSE), so the main job runs on any machine. Any directory holding the
files (gzipped or not) works. Inference and training both go through `load_split` and `resize`, so
the network sees exactly the same pixels in both.
"""
from __future__ import annotations

import gzip
import math
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
SHIPPED_DIR = Path(__file__).resolve().parent / "fashion_mnist"   # the test split only
INSTALL_HINT = (f"install it with `apt-get install {DEBIAN_PACKAGE}` (Debian/Ubuntu), or pass --data DIR "
                f"with the four idx files from https://github.com/zalandoresearch/fashion-mnist")

SPLITS = {"test": "t10k", "train": "train"}
IMAGE_SIZE = 28       # Fashion-MNIST images are 28x28
NETWORK_SIZE = 86     # the modified LeNet-5 takes 86x86 inputs
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


class DataError(Exception):
    """The data set is missing or unreadable; the message says which file and what to do."""


def _dpkg_dirs() -> list[Path]:
    # Where the Debian package put its files, in case a release moves them from DEFAULT_DIR.
    try:
        listing = subprocess.run(["dpkg", "-L", DEBIAN_PACKAGE], capture_output=True, text=True,
                                 timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted({Path(line).parent for line in listing.splitlines() if line.endswith("-idx3-ubyte.gz")})


def _has_split(directory: Path, split: str) -> bool:
    stem = f"{SPLITS[split]}-images-idx3-ubyte"
    return (directory / f"{stem}.gz").is_file() or (directory / stem).is_file()


def find_data_dir(data_dir=None, split: str = "test") -> Path:
    """The directory to read `split` from: `data_dir` if given (it must exist), else
    $PYCONV_LENET_DATA if set, else the Debian package's, else (test split) the shipped copy."""
    if data_dir is None:
        data_dir = os.environ.get("PYCONV_LENET_DATA") or None
    if data_dir is not None:
        path = Path(data_dir)
        if not path.is_dir():
            raise DataError(f"data directory {path} does not exist")
        return path
    shipped = [SHIPPED_DIR] if split == "test" else []
    for path in [DEFAULT_DIR] + _dpkg_dirs() + shipped:
        if _has_split(path, split):
            return path
    raise DataError(f"the Fashion-MNIST {split} split is not in {DEFAULT_DIR}"
                    + (f" nor in {SHIPPED_DIR}" if shipped else " (only the test split ships with pyconv)")
                    + f": {INSTALL_HINT}")


def _idx_path(directory: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem):
        if (directory / name).is_file():
            return directory / name
    raise DataError(f"{directory} has no {stem}.gz or {stem}: it needs the standard Fashion-MNIST idx "
                    f"files; {INSTALL_HINT}")


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """An idx file (gzipped when its name ends in .gz) of unsigned bytes with `ndim` dimensions.

    Format: two zero bytes, type code 0x08 (uint8), the number of dimensions, that many big-endian
    uint32 sizes, then the data, which must fill the rest of the file exactly.
    """
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise DataError(f"{path} is corrupt (cannot decompress: {exc}); reinstall the data "
                        f"({INSTALL_HINT})") from exc
    header = 4 + 4 * ndim
    if len(raw) < header or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != ndim:
        raise DataError(f"{path} is not an idx file of {ndim}-D unsigned bytes (bad header "
                        f"{raw[:4].hex() or 'empty'}, expected 000008{ndim:02x}); reinstall the data")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
    expected = header + math.prod(dims)  # Python ints: three uint32 sizes can overflow int64
    if len(raw) != expected:
        raise DataError(f"{path} is corrupt: its header says {dims} ({expected} bytes) but it has "
                        f"{len(raw)} bytes; reinstall the data")
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims)


def load_split(split: str = "test", data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 28, 28) uint8, labels (N,) uint8) of the "test" or "train" split, checked."""
    directory = find_data_dir(data_dir, split)
    prefix = SPLITS[split]
    images_path = _idx_path(directory, f"{prefix}-images-idx3-ubyte")
    labels_path = _idx_path(directory, f"{prefix}-labels-idx1-ubyte")
    images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
    if images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise DataError(f"{images_path} holds {images.shape[1]}x{images.shape[2]} images, expected "
                        f"{IMAGE_SIZE}x{IMAGE_SIZE}")
    if len(images) == 0:
        raise DataError(f"{images_path} holds no images (its header says {images.shape}); reinstall the data")
    if len(images) != len(labels):
        raise DataError(f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} labels")
    if labels.max() >= len(CLASSES):
        raise DataError(f"{labels_path} is corrupt: label {labels.max()} is not a class 0..{len(CLASSES) - 1}")
    return images, labels


def _taps(size_in: int, size_out: int):
    # Source of each output pixel with align_corners=False: pixel centres at (i + 0.5) map linearly,
    # so src = (dst + 0.5) * in/out - 0.5, clamped at 0 on the low side (as PyTorch does) and the
    # upper neighbour clamped to the last pixel.
    src = np.maximum((np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out) - 0.5, 0.0)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, size_in - 1)
    frac = src - lo
    return lo, hi, frac


def resize(images: np.ndarray, size: int = NETWORK_SIZE, out: np.ndarray | None = None) -> np.ndarray:
    """Bilinear resize of (N, h, w) uint8 images to (N, 1, size, size) float32 pixels in [0, 1].

    Convention: align_corners=False (half-pixel centres), no antialiasing — the same as PyTorch's
    F.interpolate(x, size, mode="bilinear", align_corners=False). Pixel scale: byte / 255, no mean
    or std normalisation. Computed in float64 with plain NumPy element-wise arithmetic (no BLAS), so
    the result is the same on every machine, then rounded once to float32.
    `out`: optional (N, 1, size, size) float32 C-contiguous array to write into (e.g. pinned memory).
    """
    n, h, w = images.shape
    if out is None:
        out = np.empty((n, 1, size, size), np.float32)
    row_lo, row_hi, row_frac = _taps(h, size)
    col_lo, col_hi, col_frac = _taps(w, size)
    step = 1024  # images per block: keeps the float64 temporaries near 100 MB
    for start in range(0, n, step):
        block = images[start:start + step].astype(np.float64) / 255.0
        rows = block[:, row_lo, :] * (1.0 - row_frac)[:, None] + block[:, row_hi, :] * row_frac[:, None]
        both = rows[:, :, col_lo] * (1.0 - col_frac) + rows[:, :, col_hi] * col_frac
        out[start:start + step, 0] = both
    return out
