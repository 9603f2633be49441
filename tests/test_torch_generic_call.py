"""pyconv.conv2d / conv1d (the generic calls) on PyTorch tensors, as a PyTorch user writes them:
- with a tensor that requires grad, the call is recorded by autograd (it goes through the pyconv::conv2d
  operator) instead of returning a detached result whose gradients silently vanished; arguments the
  operator has no place for are refused in words;
- under torch.jit.trace the call goes through the operator too, so that the trace records it (a call by
  pointers would leave the trace an empty tensor);
- B = 0 and C = 0 give F.conv2d's empty results;
- on CUDA, a `stream=` other than PyTorch's current one gets the output and workspace from its own pool, and a
  pyconv.Stream works with torch operands and a variant that needs a workspace;
- the plain call (no out=, stream=, ...) on CUDA tensors runs through pyconv.torch's engine: same results."""
import gc

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")

import torch.nn.functional as F  # noqa: E402
from torch_support import no_tf32, requires_cuda  # noqa: E402,F401 - no_tf32 applies to every test here

import pyconv  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


def rand(gen, *shape, device="cpu", requires_grad=False):
    t = torch.rand(*shape, generator=gen).mul_(2).sub_(1).to(device)
    return t.requires_grad_(requires_grad)


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def close(a, b, tol=1e-5):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    assert a.shape == b.shape and float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) <= tol


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["x", "w", "bias"])
def test_gradients_reach_tensors_that_require_them(gen, device, which):
    x, w, b = rand(gen, 2, 3, 9, 9, device=device), rand(gen, 4, 3, 3, 3, device=device), rand(gen, 4, device=device)
    ours = {"x": x.clone(), "w": w.clone(), "bias": b.clone()}
    theirs = {k: v.clone() for k, v in ours.items()}
    ours[which].requires_grad_()
    theirs[which].requires_grad_()
    y = pyconv.conv2d(ours["x"], ours["w"], ours["bias"], padding=1, epilogue="relu")
    expected = F.relu(F.conv2d(theirs["x"], theirs["w"], theirs["bias"], padding=1))
    assert y.grad_fn is not None
    close(y, expected)
    y.square().sum().backward()
    expected.square().sum().backward()
    close(ours[which].grad, theirs[which].grad)


def test_conv1d_gradients(gen):
    x, w = rand(gen, 2, 3, 20, requires_grad=True), rand(gen, 4, 3, 5)
    y = pyconv.conv1d(x, w, stride=2)
    y.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    F.conv1d(x2, w, stride=2).sum().backward()
    close(x.grad, x2.grad)


def test_numpy_operands_beside_a_tensor_autograd_records_are_refused_in_words(gen):
    """A tensor that requires grad sends the call through the op, which takes tensors: a NumPy w or bias
    beside it is refused naming it (was an AttributeError from inside the op)."""
    x, w = rand(gen, 2, 3, 9, 9, requires_grad=True), rand(gen, 4, 3, 3, 3)
    with pytest.raises(pyconv.ConvError, match=r"w is a numpy.ndarray, but autograd records .*torch.as_tensor"):
        pyconv.conv2d(x, w.numpy())
    with pytest.raises(pyconv.ConvError, match=r"bias is a numpy.ndarray"):
        pyconv.conv1d(x[:, :, 0].contiguous(), w[:, :, 0].contiguous(), w[:, 0, 0, 0].contiguous().numpy())
    with torch.no_grad():  # nothing to record: the generic call takes both kinds
        close(pyconv.conv2d(x, w.numpy()), F.conv2d(x, w))


@requires_cuda
@pytest.mark.parametrize("case", ["numpy_w", "channels_last", "bfloat16", "cuda_x_numpy_w"])
def test_host_operands_on_a_gpu_variant(gen, case):
    """CPU tensors of any dtype and layout, and NumPy arrays beside them, on a GPU: `auto` runs a GPU variant, the
    operands go up as bytes and the result comes back into a CPU tensor of the input's dtype and layout (a torch
    dtype reached DeviceArray: TypeError; a channels-last tensor was transposed as if it were NumPy)."""
    dtype = torch.bfloat16 if case == "bfloat16" else torch.float32
    x, w, b = rand(gen, 2, 6, 11, 13).to(dtype), rand(gen, 5, 6, 3, 3).to(dtype), rand(gen, 5).to(dtype)
    if case == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    args = {"numpy_w": lambda: (x, w.numpy(), b.numpy()), "channels_last": lambda: (x, w, b),
            "bfloat16": lambda: (x, w, b), "cuda_x_numpy_w": lambda: (x.cuda(), w.numpy(), b.numpy())}[case]()
    y = pyconv.conv2d(*args, padding=1, precision="exact" if dtype == torch.float32 else None, sync=True)
    assert y.device == args[0].device and y.dtype == dtype
    assert y.is_contiguous(memory_format=torch.channels_last if case == "channels_last" else torch.contiguous_format)
    close(y, F.conv2d(x.float(), w.float(), b.float(), padding=1), 1e-5 if dtype == torch.float32 else 2e-2)


def test_jit_trace_records_the_generic_call(gen):
    """torch.jit.trace of a function calling pyconv.conv2d / conv1d records the operator: the traced function
    computes on new inputs. Options the operator has no place for are refused in words while tracing."""
    w2, w1 = rand(gen, 8, 3, 3, 3), rand(gen, 8, 3, 3)
    x2, x1 = rand(gen, 2, 3, 16, 16), rand(gen, 2, 3, 20)
    with torch.no_grad():
        traced2 = torch.jit.trace(lambda x: pyconv.conv2d(x, w2, None, 1, 1), x2)
        traced1 = torch.jit.trace(lambda x: pyconv.conv1d(x, w1, None, 2), x1)
        assert "pyconv::conv2d" in [n.kind() for n in traced2.graph.nodes()]
        assert "pyconv::conv1d" in [n.kind() for n in traced1.graph.nodes()]
        new2, new1 = rand(gen, 2, 3, 16, 16), rand(gen, 2, 3, 20)
        close(traced2(new2), F.conv2d(new2, w2, padding=1))
        close(traced1(new1), F.conv1d(new1, w1, stride=2))
        with pytest.raises(pyconv.ConvError, match="sync cannot be used while torch.jit.trace records.*outside"):
            torch.jit.trace(lambda x: pyconv.conv2d(x, w2, sync=True), x2)


@pytest.mark.parametrize("option", [dict(out_dtype="float32"), dict(config="default"), dict(sync=True),
                                    dict(device=0), dict(stream=0)])
def test_options_autograd_cannot_record_are_refused_in_words(gen, option):
    x, w = rand(gen, 2, 3, 9, 9), rand(gen, 4, 3, 3, 3, requires_grad=True)
    name = next(iter(option))
    with pytest.raises(pyconv.ConvError, match=rf"{name} cannot be used on tensors that require grad.*no_grad"):
        pyconv.conv2d(x, w, variant="cpu" if name == "config" else "auto", **option)
    with torch.no_grad():  # the same call without autograd works
        if name not in ("device", "stream", "sync"):
            close(pyconv.conv2d(x, w, variant="cpu", **option), F.conv2d(x, w))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch_and_channels_as_pytorch(gen, device):
    for x_shape, w_shape in (((0, 3, 8, 8), (4, 3, 3, 3)), ((2, 0, 8, 8), (4, 0, 3, 3))):
        x, w = rand(gen, *x_shape, device=device), rand(gen, *w_shape, device=device)
        assert pyconv.conv2d(x, w).shape == F.conv2d(x, w).shape


@requires_cuda
@pytest.mark.parametrize("variant", ["unroll_gemm", "auto"])
def test_pyconv_stream_with_torch_tensors(gen, variant):
    """A pyconv.Stream with torch operands, on a variant with a workspace (it raised TypeError from
    torch.cuda.ExternalStream); the output and workspace come from PyTorch's pool for that stream, so the
    stream may go before the output does (a record_stream'ed output crashed its free then)."""
    x, w = rand(gen, 4, 8, 20, 20, device="cuda"), rand(gen, 16, 8, 3, 3, device="cuda")
    s = pyconv.Stream()
    torch.cuda.current_stream().synchronize()  # x and w are written on PyTorch's stream
    y = pyconv.conv2d(x, w, padding=1, variant=variant, stream=s, precision="exact")
    s.synchronize()
    close(y, F.conv2d(x, w, padding=1), 1e-4 if variant == "unroll_gemm" else 1e-5)
    del s
    gc.collect()  # the pyconv.Stream is destroyed first
    del y
    torch.cuda.synchronize()


@requires_cuda
def test_plain_cuda_call_matches_the_generic_path(gen):
    x, w, b = rand(gen, 2, 8, 16, 16, device="cuda"), rand(gen, 8, 8, 3, 3, device="cuda"), rand(gen, 8, device="cuda")
    plain = pyconv.conv2d(x, w, b, padding=1, epilogue=pyconv.ReluMaxPool(2))
    generic = pyconv.conv2d(x, w, b, padding=1, epilogue=pyconv.ReluMaxPool(2), sync=True)  # sync=: generic path
    close(plain, generic, 1e-6)
    close(plain, F.max_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2))
