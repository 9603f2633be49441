"""The modified LeNet-5 on the real Fashion-MNIST test set, with its convolutions on pyconv.

    python -m pyconv lenet --batch 10000 --variant auto

data.py     the idx files and the one 28x28 -> 86x86 bilinear resize (training uses it too)
model.py    the network's shapes, the shipped weights (weights.npz), the host (NumPy) layers
layers.py   a conv layer over the batch for a variant; the cpu one; timing records
gpu_layer.py  the GPU one: whole batch on one stream, and chunks overlapped on several streams
network.py  the forward pass over a batch, timed per layer
report.py, progress.py, cli.py   the command
train.py    how weights.npz was made (development only: needs PyTorch)
"""
