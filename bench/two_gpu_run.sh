#!/usr/bin/env bash
# The two-GPU checks in one command (the lent two-H200 host): bash bench/two_gpu_run.sh OUT_DIR
# Installs as gpu_run.sh does, then runs the tests that need a second device (operands on cuda:1, one
# thread per GPU, torchrun DDP with pyconv.torch) and the main job spread over every GPU.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: bash bench/two_gpu_run.sh OUT_DIR}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
site="$(mktemp -d)"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$repo"/.whl/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pip install -q --no-build-isolation --no-deps "$repo" > "$out/install.log" 2>&1 \
    || { tail -n 30 "$out/install.log"; exit 1; }
cd "$out"  # the installed pyconv, not the checkout's
nvidia-smi --query-gpu=name --format=csv,noheader
status=0
python3 -m pytest -q -p no:cacheprovider "$repo/tests/test_multi_gpu.py" "$repo/tests/test_torch_ddp.py" \
    "$repo/tests/test_lenet_gpu.py" > "$out/two-gpu-tests.log" 2>&1 || status=1
tail -n 3 "$out/two-gpu-tests.log"
python3 -m pyconv lenet --batch 10000 --images 70000 --precision both --devices all --no-torch \
    > "$out/lenet-two-gpus.txt" 2>&1 || status=1
grep -E "streamed|end to end|accuracy" "$out/lenet-two-gpus.txt"
exit $status
