"""The build's choice of CUDA architectures (cmake/cuda_architectures.cmake): configured, not compiled.

By default the machine's GPUs (nvidia-smi), a Hopper as 90a-real, and 90a-real where no GPU answers;
PYCONV_CUDA_ARCHITECTURES (CONV_CUDA_ARCHITECTURES to CMake) = all gives the full list, a list is taken
as given, and CMAKE_CUDA_ARCHITECTURES overrides both. Needs cmake and nvcc (every developer and CI
machine has them); a configure takes a few seconds."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ALL = "75-real;80-real;86-real;89-real;90a-real;90-virtual"

pytestmark = pytest.mark.skipif(not shutil.which("cmake") or not shutil.which("nvcc"),
                                reason="needs cmake and nvcc on PATH to configure the CUDA build")


def configured_architectures(tmp_path, *defines):
    """CMAKE_CUDA_ARCHITECTURES as the configure step reports it, with -D `defines`."""
    run = subprocess.run(["cmake", "-S", str(REPO), "-B", str(tmp_path / "build"), *[f"-D{d}" for d in defines]],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    found = re.search(r"libconv: CUDA architectures (\S+) \((.*)\)", run.stdout)
    assert found, run.stdout
    return found.group(1), found.group(2)


def gpu_architectures():
    """What nvidia-smi reports here, as the build names it (None: no GPU answers)."""
    if not shutil.which("nvidia-smi"):
        return None
    run = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True)
    caps = [c.strip().replace(".", "") for c in run.stdout.split()] if run.returncode == 0 else []
    names = []
    for cap in caps:
        name = "90a-real" if cap == "90" else f"{cap}-real"
        if name not in names:
            names.append(name)
    return ";".join(names) or None


def test_default_is_this_machines_gpus_or_hopper(tmp_path):
    archs, why = configured_architectures(tmp_path)
    expected = gpu_architectures()
    if expected is None:
        assert archs == "90a-real" and "no GPU" in why
    else:
        assert archs == expected and "this machine's GPUs" in why


def test_default_without_a_gpu_is_hopper(tmp_path):
    """No GPU answers (an nvidia-smi that fails, as on a machine without a driver): 90a-real, and the
    reason says how to build for others."""
    archs, why = configured_architectures(tmp_path, f"CONV_NVIDIA_SMI={shutil.which('false')}")
    assert archs == "90a-real" and "PYCONV_CUDA_ARCHITECTURES" in why


def test_all_is_the_full_list(tmp_path):
    assert configured_architectures(tmp_path, "CONV_CUDA_ARCHITECTURES=all")[0] == ALL


def test_a_list_is_taken_as_given(tmp_path):
    assert configured_architectures(tmp_path, "CONV_CUDA_ARCHITECTURES=80-real 90a-real")[0] == "80-real;90a-real"


def test_cmake_cuda_architectures_overrides(tmp_path):
    archs, why = configured_architectures(tmp_path, "CONV_CUDA_ARCHITECTURES=all", "CMAKE_CUDA_ARCHITECTURES=89-real")
    assert archs == "89-real" and why == "CMAKE_CUDA_ARCHITECTURES"


def test_pip_passes_the_environment_variable():
    """pyproject.toml hands PYCONV_CUDA_ARCHITECTURES to CMake (scikit-build-core's cmake.define)."""
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'CONV_CUDA_ARCHITECTURES = \{ env = "PYCONV_CUDA_ARCHITECTURES", default = "auto" \}', text)
