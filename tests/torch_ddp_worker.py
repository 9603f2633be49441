"""Launched by tests/test_torch_ddp.py as `torchrun --nproc-per-node 2 tests/torch_ddp_worker.py OUT_DIR`:
a converted LeNet-5 (pyconv kernels, fallback off) trained for a few SGD steps under
DistributedDataParallel, each rank on its own GPU with its half of every global batch; rank 0 then
trains the same initial model on one GPU with the whole batches. Each rank writes OUT_DIR/rank<r>.json
(losses averaged over the ranks, its device, the devices and engines of its pyconv calls); rank 0 also
writes single.json (the one-GPU losses, and the largest parameter difference from the DDP run)."""
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from test_torch_models import sgd_losses  # noqa: E402

import pyconv.torch as pct  # noqa: E402
from pyconv.lenet import model as lenet_model  # noqa: E402
from pyconv.torch.models import lenet5  # noqa: E402

STEPS, BATCH = 4, 32


def main(out: Path) -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(1234)
    batches = [(torch.rand(BATCH, *lenet_model.INPUT_SHAPE, generator=gen), torch.randint(10, (BATCH,), generator=gen))
               for _ in range(STEPS)]
    torch.manual_seed(0)
    initial = lenet5()
    model = pct.convert(initial, engine="pyconv", fallback=False).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    half = BATCH // world
    local = [(x[rank * half:(rank + 1) * half].to(device), y[rank * half:(rank + 1) * half].to(device))
             for x, y in batches]
    losses = []
    for loss in sgd_losses(ddp, local):
        t = torch.tensor([loss], device=device)
        dist.all_reduce(t)
        losses.append(t.item() / world)
    decisions = pct.decisions()
    result = {"rank": rank, "device": str(device), "losses": losses,
              "call_devices": sorted({d["device"] for d in decisions}),
              "engines": sorted({d["engine"] for d in decisions}), "fallbacks": pct.fallback_counts()}
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    if rank == 0:
        single = pct.convert(initial, engine="pyconv", fallback=False).to(device)
        single_losses = sgd_losses(single, [(x.to(device), y.to(device)) for x, y in batches])
        diff = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), single.parameters()))
        (out / "single.json").write_text(json.dumps({"losses": single_losses, "max_param_diff": diff}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
