"""pyconv.torch.causal_conv1d and causal_conv1d_update (the ops pyconv::causal_conv1d / _update): against
a float64 reference on CPU (the cpu variant, every machine) and CUDA (depthwise_conv1d), channel-first and
channel-last x, gradients against PyTorch's own, the ops' fake kernels (opcheck), CUDA-graph capture, and
arguments refused in words."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch_support import no_tf32, requires_cuda  # noqa: E402,F401

import pyconv  # noqa: E402
import pyconv.torch as pct  # noqa: E402


def reference(x, w, b, activation):
    """float64: nn.Conv1d(D, D, K, groups=D, padding=K-1)(x)[..., :L] then the activation."""
    x, w = x.double(), w.double().reshape(w.shape[0], 1, -1)
    y = F.conv1d(x, w, None if b is None else b.double(), padding=w.shape[-1] - 1, groups=x.shape[1])[..., :x.shape[-1]]
    return F.silu(y) if activation in ("silu", "swish") else F.relu(y) if activation == "relu" else y


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("activation", [None, "silu", "relu"])
@pytest.mark.parametrize("B, D, L, K", [(2, 24, 37, 4), (1, 16, 8, 2), (3, 13, 50, 3)])
def test_causal_conv1d_matches_reference(device, channel_last, activation, B, D, L, K):
    x = torch.randn(B, L, D, device=device).transpose(1, 2) if channel_last else torch.randn(B, D, L, device=device)
    w, b = torch.randn(D, K, device=device), torch.randn(D, device=device)
    y = pct.causal_conv1d(x, w, b, activation)
    assert y.shape == x.shape and y.stride() == x.stride() and y.dtype == x.dtype
    assert rel(y, reference(x, w, b, activation)) <= 1e-5


@requires_cuda
@pytest.mark.parametrize("dtype, bound", [(torch.float16, 2e-3), (torch.bfloat16, 1.5e-2)])
@pytest.mark.parametrize("channel_last", [False, True])
def test_half_precision_within_pytorchs_own_error(dtype, bound, channel_last):
    B, D, L, K = 2, 64, 256, 4
    x = torch.randn(B, L, D, device="cuda").transpose(1, 2) if channel_last else torch.randn(B, D, L, device="cuda")
    x, w, b = x.to(dtype), torch.randn(D, 1, K, device="cuda").to(dtype), torch.randn(D, device="cuda").to(dtype)
    y = pct.causal_conv1d(x, w, b, "silu")
    exact = reference(x, w, b, "silu")
    theirs = F.silu(F.conv1d(x, w, b, padding=K - 1, groups=D)[..., :L])
    assert rel(y, exact) <= max(bound, 2 * rel(theirs, exact))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_are_pytorchs(device):
    B, D, L, K = 2, 8, 21, 4
    x = torch.randn(B, D, L, device=device, requires_grad=True)
    w = torch.randn(D, K, device=device, requires_grad=True)
    b = torch.randn(D, device=device, requires_grad=True)
    g = torch.randn(B, D, L, device=device)
    grads = torch.autograd.grad(pct.causal_conv1d(x, w, b, "silu"), (x, w, b), g)
    expected = torch.autograd.grad(reference(x, w, b, "silu").float(), (x, w, b), g)
    for got, want in zip(grads, expected):
        assert rel(got, want) <= 1e-5
    only_x = torch.autograd.grad(pct.causal_conv1d(x, w.detach(), None), x, g)[0]
    assert rel(only_x, torch.autograd.grad(reference(x, w.detach(), None, None).float(), x, g)[0]) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_ops_pass_opcheck(device):
    """Fake kernels, schemas and the autograd registration agree with the real kernels."""
    x = torch.randn(2, 16, 12, device=device)
    w, b = torch.randn(16, 4, device=device), torch.randn(16, device=device)
    torch.library.opcheck(torch.ops.pyconv.causal_conv1d, (x, w, b, 2))
    torch.library.opcheck(torch.ops.pyconv.causal_conv1d, (x.requires_grad_(), w, None, 0))
    state = torch.randn(2, 16, 3, device=device)
    torch.library.opcheck(torch.ops.pyconv.causal_conv1d_update, (x[:, :, :1].detach().contiguous(), state, w, b, 2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("T", [1, 4])
def test_update_steps_equal_the_whole_sequence(device, T):
    B, D, K, S, steps = 3, 16, 4, 5, 4
    seq = torch.randn(B, D, steps * T, device=device)
    w, b = torch.randn(D, 1, K, device=device), torch.randn(D, device=device)
    state = torch.zeros(B, D, S, device=device)
    outs = []
    for i in range(steps):
        x = seq[:, :, i * T:(i + 1) * T]
        y = pct.causal_conv1d_update(x[:, :, 0] if T == 1 else x, state, w, b, "silu")
        outs.append(y.unsqueeze(2) if T == 1 else y)
    assert rel(torch.cat(outs, 2), reference(seq, w, b, "silu")) <= 1e-5
    assert torch.equal(state, torch.cat([torch.zeros(B, D, S, device=device), seq], 2)[:, :, -S:])


@requires_cuda
def test_ops_capture_in_cuda_graphs():
    B, D, L, K = 2, 32, 64, 4
    x, w, b = torch.randn(B, D, L, device="cuda"), torch.randn(D, K, device="cuda"), torch.randn(D, device="cuda")
    token, state = torch.randn(B, D, device="cuda"), torch.randn(B, D, K - 1, device="cuda")
    pct.causal_conv1d(x, w, b, "silu")  # plans made eagerly
    start = state.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = pct.causal_conv1d(x, w, b, "silu")
        t = pct.causal_conv1d_update(token, state, w, b, "silu")
    state.copy_(start)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert rel(y, reference(x, w, b, "silu")) <= 1e-5
    window = torch.cat([start, token.unsqueeze(2)], 2)
    assert rel(t, F.silu((window * w).sum(2) + b)) <= 1e-5
    assert torch.equal(state, window[:, :, 1:])


@requires_cuda
def test_compiled_with_fullgraph():
    def block(x, w, b, token, state):
        return pct.causal_conv1d(x, w, b, "silu") * 2, pct.causal_conv1d_update(token, state, w, b, "silu")
    x, w, b = torch.randn(1, 32, 40, device="cuda"), torch.randn(32, 4, device="cuda"), torch.randn(32, device="cuda")
    token, state = torch.randn(1, 32, device="cuda"), torch.zeros(1, 32, 3, device="cuda")
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    y, t = compiled(x, w, b, token, state)
    assert rel(y, 2 * reference(x, w, b, "silu")) <= 1e-5
    assert torch.equal(state[:, :, -1], token)


def test_refusals_name_the_argument():
    x = torch.randn(1, 8, 10)
    with pytest.raises(pyconv.ConvError, match="activation must be None, 'silu', 'swish' or 'relu'"):
        pct.causal_conv1d(x, torch.randn(8, 4), activation="gelu")
    with pytest.raises(pyconv.ConvError, match=r"needs weight \(D, K\)"):
        pct.causal_conv1d(x, torch.randn(6, 4))
    with pytest.raises(pyconv.ConvError, match=r"conv_state \(B, D, S >= K-1\)"):
        pct.causal_conv1d_update(x[:, :, 0], torch.zeros(1, 8, 2), torch.randn(8, 4))
    with pytest.raises(pyconv.ConvError, match="pyconv.torch.causal_conv1d runs the causal"):
        pct.conv1d(x, torch.randn(8, 1, 4), padding="causal", groups=8)
    y = pct.causal_conv1d(x, torch.randn(8, 4))  # still usable
    assert y.shape == x.shape
