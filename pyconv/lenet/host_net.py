"""The network on the host: the same stages as on the GPU, with the `cpu` variant's fused epilogues
(ReLU + max-pool inside C1 and C3, bias + ReLU inside F5), NumPy's resize and softmax. Each stage is
timed with perf_counter; one run (the host is slow, and its time does not vary much)."""
from __future__ import annotations

import time

import numpy as np

from .. import api
from . import data, model, network


class HostNetwork:
    """Plans and buffers for batches of `batch` images on the host."""

    def __init__(self, batch: int, weights: model.Weights):
        self.batch = batch
        self.weights = network.layer_weights(weights)
        self.x = np.empty((batch,) + model.INPUT_SHAPE, np.float32)
        self.plans, self.outputs = {}, {}
        for layer in network.LAYERS:
            self.plans[layer.name] = api.Conv2dPlan((batch,) + layer.in_shape, layer.w_shape, bias=layer.bias,
                                                    epilogue=layer.epilogue, variant="cpu")
            self.outputs[layer.name] = np.empty((batch,) + layer.out_shape, np.float32)

    def run(self, images: np.ndarray, progress) -> tuple[np.ndarray, np.ndarray, dict]:
        """(classes, probabilities, stage ms) of `batch` uint8 images."""
        stages = {}
        begin = time.perf_counter()
        progress.start(f"resizing {len(images)} images to 86x86 (NumPy)")
        data.resize(images, out=self.x)
        progress.finish()
        stages["resize"] = _ms_since(begin)
        h = self.x
        for layer in network.LAYERS:
            w, bias = self.weights[layer.name]
            progress.start(f"{layer.label} on {len(images)} images (cpu)")
            begin = time.perf_counter()
            self.plans[layer.name].launch(h, w, self.outputs[layer.name], bias=bias)
            stages[layer.name] = _ms_since(begin)
            progress.finish()
            h = self.outputs[layer.name]
        begin = time.perf_counter()
        logits = h.reshape(len(h), network.CLASSES)
        probabilities = model.softmax(logits)
        classes = logits.argmax(axis=1).astype(np.int32)  # on the logits, as conv_softmax_argmax
        stages["softmax"] = _ms_since(begin)
        return classes, probabilities, stages


def _ms_since(begin: float) -> float:
    return (time.perf_counter() - begin) * 1e3


def run(images: np.ndarray, batch: int, weights: model.Weights, progress) -> network.Result:
    """The whole image set in batches of `batch` (the last one may be shorter), timed end to end; the
    stage times are summed over the batches."""
    nets: dict = {}
    classes = np.empty(len(images), np.int32)
    probabilities = np.empty((len(images), network.CLASSES), np.float32)
    stages: dict = {}
    begin = time.perf_counter()
    for start in range(0, len(images), batch):
        stop = min(start + batch, len(images))
        if stop - start not in nets:
            nets[stop - start] = HostNetwork(stop - start, weights)
        net = nets[stop - start]
        classes[start:stop], probabilities[start:stop], batch_stages = net.run(images[start:stop], progress)
        for name, ms in batch_stages.items():
            stages[name] = stages.get(name, 0.0) + ms
    total = _ms_since(begin)
    return network.Result(classes, probabilities, stages, [total], {layer.name: "cpu" for layer in network.LAYERS})
