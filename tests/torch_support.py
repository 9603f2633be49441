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
