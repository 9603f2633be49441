"""The installed package: header beside the library, build flags, cffi declarations in step with
include/conv.h, and a C program that links libconv."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyconv
from pyconv import _lib

REPO = Path(__file__).resolve().parent.parent


def pyconv_cli(*args):
    return subprocess.run([sys.executable, "-m", "pyconv", *args], capture_output=True, text=True, timeout=300)


def declared_functions(header_text):
    return re.findall(r"^\s*(?:const\s+)?\w+\**\s+\**(\w+)\(", _lib.cdef_source(header_text), re.M)


def test_header_ships_beside_the_library():
    includes = pyconv_cli("--includes").stdout.strip()
    assert includes.startswith("-I")
    header = Path(includes[2:]) / "conv.h"
    assert header.is_file(), f"{header} missing from the installed package"
    libdir = Path(pyconv_cli("--libdir").stdout.strip())
    assert (libdir / "libconv.so").is_file()
    if (REPO / "include" / "conv.h").is_file():
        assert header.read_text() == (REPO / "include" / "conv.h").read_text(), "installed conv.h is stale"


def test_every_declared_function_is_exported():
    """cffi parses conv.h itself, so the declarations cannot drift; each must resolve in the library."""
    names = declared_functions(_lib.header_path().read_text())
    assert len(names) > 30
    missing = [n for n in names if not hasattr(_lib.lib(), n)]
    assert not missing, f"declared in conv.h but not exported by libconv: {missing}"


def test_every_variant_has_its_entry_point():
    names = set(declared_functions(_lib.header_path().read_text()))
    for info in pyconv.variant_info():
        assert f"conv2d_{info.name}" in names, f"variant {info.name} has no conv2d_{info.name} in conv.h"


def test_cli_prints_devices_and_convolves_a_sample():
    result = pyconv_cli("info", "--batch", "4")
    assert result.returncode == 0, result.stderr
    assert "sample: x (4, 1, 86, 86)" in result.stdout
    assert "relative L2 difference from cpu" in result.stdout


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
def test_c_program_links_libconv(tmp_path):
    flags = pyconv_cli("--includes").stdout.split() + pyconv_cli("--ldflags").stdout.split()
    exe = tmp_path / "conv_example"
    build = subprocess.run(["cc", str(REPO / "tests" / "c" / "conv_example.c"), *flags, "-lm", "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("OK ")
