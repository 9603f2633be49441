"""Fashion-MNIST-style idx files for tests (the loader's, and the command's handling of bad data)."""
import gzip
import struct

import numpy as np


def write_idx(path, array: np.ndarray, header: bytes | None = None) -> None:
    """An idx file of uint8 `array`, gzipped when the name ends in .gz; `header` overrides the first 4 bytes."""
    head = header if header is not None else bytes([0, 0, 0x08, array.ndim])
    raw = head + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)


def make_data_dir(directory, n=6, gz=True, images=None, labels=None):
    """The test split's two idx files in `directory`: n random images and labels 0..9 in turn (or the
    given ones); returns (images, labels)."""
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8) if images is None else images
    labels = (np.arange(n) % 10).astype(np.uint8) if labels is None else labels
    suffix = ".gz" if gz else ""
    write_idx(directory / f"t10k-images-idx3-ubyte{suffix}", images)
    write_idx(directory / f"t10k-labels-idx1-ubyte{suffix}", labels)
    return images, labels
