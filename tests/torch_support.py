"""What the PyTorch test files share; imported after pytest.importorskip("torch") has passed.

Importing `no_tf32` into a test module applies it to every test there (it is autouse)."""
import pytest
import torch
from conftest import GPU_SKIP_REASON

CUDA_REASON = GPU_SKIP_REASON or ("" if torch.cuda.is_available() else "PyTorch has no CUDA device")
requires_cuda = pytest.mark.skipif(bool(CUDA_REASON), reason=CUDA_REASON or "ok")


@pytest.fixture(autouse=True)
def no_tf32():
    """fp32 results compared exactly: PyTorch's convs and matmuls without TF32 (pyconv then defaults to exact)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.fixture
def fresh_dynamo():
    """Compiled lambdas share code objects across tests: each test compiles afresh (no recompile limit)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def gen(rng):
    """A torch generator for data, and torch's global seed for the weights (module initialisation), both from
    the test's fresh seed."""
    torch.manual_seed(int(rng.integers(2**31)))
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def uniform(gen, *shape):
    """Values uniform in [-1, 1) from `gen`."""
    return torch.rand(*shape, generator=gen).mul_(2).sub_(1)


def assert_close(actual, expected, tol=1e-5):
    """Max relative error (against expected's largest magnitude) at most tol."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=tol * float(expected.detach().abs().max()))


def capture(fn, warmups: int = 1):
    """(graph, output): fn() called `warmups` times on a side stream (plans made and tuned outside the capture),
    then one call of it captured in a CUDA graph (run graph.replay() to compute again)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out
