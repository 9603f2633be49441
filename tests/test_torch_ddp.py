"""A converted model under DistributedDataParallel: `torchrun --nproc-per-node 2` runs
tests/torch_ddp_worker.py, in which each rank trains a converted LeNet-5 on its own GPU (our kernels,
fallback off); the losses and parameters match one GPU training on the whole batches. Skips with the
reason where PyTorch, NCCL or a second GPU is absent."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'pyconv[torch]')")


def _reason() -> str:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return f"needs 2 CUDA devices, PyTorch sees {torch.cuda.device_count() if torch.cuda.is_available() else 0}"
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return "PyTorch was built without NCCL"
    return ""


@pytest.mark.skipif(bool(_reason()), reason=_reason() or "ok")
def test_ddp_two_gpus_matches_one(tmp_path):
    worker = Path(__file__).with_name("torch_ddp_worker.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(worker.parent.parent), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(worker), str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    single = json.loads((tmp_path / "single.json").read_text())
    for r, result in enumerate(ranks):
        assert result["call_devices"] == [f"cuda:{r}"], "each rank runs our kernels on its own GPU"
        assert result["engines"] == ["pyconv"] and not result["fallbacks"]
    assert ranks[0]["losses"] == pytest.approx(ranks[1]["losses"], rel=1e-6)
    assert ranks[0]["losses"] == pytest.approx(single["losses"], rel=1e-4, abs=1e-6)
    assert single["max_param_diff"] <= 1e-4
