"""The modified LeNet-5 on Fashion-MNIST, images in to predictions out, on pyconv.

    python -m pyconv lenet --batch 10000 [--precision exact|fast|both] [--images N] [--variant NAME|auto|all]

data.py        the idx files and the one 28x28 -> 86x86 bilinear resize (training uses it too)
model.py       the network's shapes and the shipped weights (weights.npz)
network.py     the layers as pyconv convolutions with fused epilogues, the precision mode, a run's result
host_net.py    the network on the host (cpu variant)
device_ops.py  libconv's whole-network helpers: device resize, softmax/argmax
device_net.py  the network on one stream of one GPU: one upload, every layer on the device, one download
pipeline.py    batches over several streams and GPUs from page-locked memory, timed
floors.py      each stage's bytes, flops and floor from the GPU's measured ceilings
torch_ref.py   the same network in PyTorch + cuDNN (optional), timed the same way
report.py, results.py, progress.py, cli.py   the command: tables on stdout, JSON, progress on stderr
train.py       how weights.npz was made (development only: needs PyTorch)
"""
