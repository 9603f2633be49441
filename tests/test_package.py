"""The installed package: headers beside the library, build flags, the library's exports exactly the
functions of the public headers (include/conv.h, conv_ops.h, conv_bench.h), one version everywhere, the
shipped data and type marker, and a C program that links libconv."""
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import pyconv
from pyconv import _lib
from pyconv.lenet import data

REPO = Path(__file__).resolve().parent.parent


def pyconv_cli(*args):
    return subprocess.run([sys.executable, "-m", "pyconv", *args], capture_output=True, text=True, timeout=300)


def declared_functions() -> tuple[set, set]:
    """(functions declared in the public headers as cffi parsed them, those the library does not export)."""
    lib = _lib.lib()
    declared, missing = set(), set()
    for name in dir(lib):               # every declaration: functions and enum constants
        try:
            value = getattr(lib, name)  # resolves a function's symbol in the library
        except AttributeError:
            declared.add(name)
            missing.add(name)
            continue
        if not isinstance(value, int):
            declared.add(name)
    return declared, missing


def exported_functions(library: Path) -> set:
    """The functions libconv.so exports (its defined dynamic symbols)."""
    if shutil.which("nm"):
        listing = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                                 check=True).stdout
        return {line.split()[-1] for line in listing.splitlines() if line.split()[-2:-1] in (["T"], ["W"])}
    if shutil.which("readelf"):
        listing = subprocess.run(["readelf", "--dyn-syms", "-W", str(library)], capture_output=True, text=True,
                                 check=True).stdout
        rows = [line.split() for line in listing.splitlines()]
        return {row[7].split("@")[0] for row in rows
                if len(row) >= 8 and row[3] == "FUNC" and row[4] in ("GLOBAL", "WEAK") and row[6] != "UND"}
    pytest.skip("neither nm nor readelf on this machine")


def header_functions(name: str) -> set:
    """The functions a public header declares (its text, comments removed, as cffi reads it)."""
    text = re.sub(r"/\*.*?\*/", "", _lib.header_path(name).read_text(), flags=re.S)
    return set(re.findall(r"^\s*(?:const\s+)?\w+\s*\*?\s*(conv\w*)\(", text, flags=re.M))


def test_headers_ship_beside_the_library():
    includes = pyconv_cli("--includes").stdout.strip()
    assert includes.startswith("-I")
    libdir = Path(pyconv_cli("--libdir").stdout.strip())
    assert (libdir / "libconv.so").is_file()
    for name in _lib.HEADERS:
        header = Path(includes[2:]) / name
        assert header.is_file(), f"{header} missing from the installed package"
        if (REPO / "include" / name).is_file():
            assert header.read_text() == (REPO / "include" / name).read_text(), f"installed {name} is stale"


def test_includes_name_a_source_checkouts_headers(monkeypatch, tmp_path, capsys):
    """Run from a source checkout with PYCONV_LIBRARY (no headers inside pyconv/), --includes names the checkout's
    include/ (it named the package's missing include directory, and C programs did not compile)."""
    from pyconv import cli
    monkeypatch.setattr(_lib, "include_dir", lambda: tmp_path / "no-headers-here")
    monkeypatch.setattr(_lib, "package_dir", lambda: REPO / "pyconv")
    assert cli.main(["--includes"]) == 0
    assert capsys.readouterr().out.strip() == f"-I{REPO / 'include'}"


def test_conv_h_is_the_convolution_abi():
    """The demo's device ops and the bench's ceilings and timer have headers of their own; each function is
    declared in one header, and cffi binds those of all three."""
    by_header = {name: header_functions(name) for name in _lib.HEADERS}
    assert {"conv_resize_bilinear_u8", "conv_softmax_argmax"} <= by_header["conv_ops.h"]
    assert {"conv_measure_ceilings", "conv2d_time"} <= by_header["conv_bench.h"]
    assert not by_header["conv.h"] & (by_header["conv_ops.h"] | by_header["conv_bench.h"])
    assert not by_header["conv_ops.h"] & by_header["conv_bench.h"]
    declared, _ = declared_functions()
    for name, functions in by_header.items():
        assert functions <= declared, f"declared in {name} but not bound by cffi: {sorted(functions - declared)}"


def test_exports_are_exactly_the_functions_of_the_headers():
    """cffi parses the public headers (conv.h, conv_ops.h, conv_bench.h) themselves, so its declarations
    cannot drift from them; the library must export each of them (a symbol cffi resolves) and nothing else
    (the version script built from the same headers hides every internal helper and the static CUDA
    runtime)."""
    declared, missing = declared_functions()
    assert len(declared) > 30 and "conv_problem_init" in declared and "conv2d_plan_run" in declared
    assert not missing, f"declared in a public header but not exported by libconv: {sorted(missing)}"
    exported = exported_functions(_lib.library_path())
    assert not exported - declared, f"exported by libconv but in no public header: {sorted(exported - declared)}"
    assert declared <= exported


def test_every_variant_has_its_entry_point():
    declared, _ = declared_functions()
    for info in pyconv.variant_info():
        assert f"conv2d_{info.name}" in declared, f"variant {info.name} has no conv2d_{info.name} in conv.h"


def test_one_version_everywhere():
    """pyproject.toml's [project] version is the only one written down: the package metadata, the
    library (CMake gets it from scikit-build-core, or reads pyproject.toml) and pyconv.__version__."""
    f, l = _lib.ffi(), _lib.lib()
    library_version = f.string(l.conv_version()).decode()
    assert pyconv.__version__ == library_version
    if (REPO / "pyproject.toml").is_file():
        written = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
        assert library_version == written
    try:
        assert metadata.version("pyconv") == library_version
    except metadata.PackageNotFoundError:
        pass  # a source checkout run against a library build (PYCONV_LIBRARY), not installed


def test_package_is_typed():
    installed = _lib._installed_file("pyconv/py.typed")
    assert (_lib.package_dir() / "py.typed").is_file() or installed is not None


def test_test_set_ships_with_the_package(monkeypatch, tmp_path):
    """The main job runs on any machine: with no other copy found, the shipped test split is read."""
    monkeypatch.delenv("PYCONV_LENET_DATA", raising=False)
    monkeypatch.setattr(data, "DEFAULT_DIR", tmp_path / "nowhere")
    monkeypatch.setattr(data, "_dpkg_dirs", lambda: [])
    assert data.find_data_dir() == data.SHIPPED_DIR
    assert (data.SHIPPED_DIR / "LICENSE").is_file()
    images, labels = data.load_split("test")
    assert images.shape == (10000, 28, 28) and labels.shape == (10000,)
    assert sorted(set(labels.tolist())) == list(range(10)) and (labels == 0).sum() == 1000
    with pytest.raises(data.DataError, match="only the test split ships"):
        data.find_data_dir(split="train")


def test_cli_prints_devices_and_convolves_a_sample():
    result = pyconv_cli("info", "--batch", "4")
    assert result.returncode == 0, result.stderr
    assert "sample: x (4, 1, 86, 86)" in result.stdout
    assert "relative L2 difference from cpu" in result.stdout
    if "device 0:" not in result.stdout:  # without a GPU, why is said once, not once for each GPU variant
        assert result.stdout.count("no usable CUDA device") <= 1 and "unavailable: no usable GPU" in result.stdout


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
def test_c_program_links_libconv(tmp_path):
    flags = pyconv_cli("--includes").stdout.split() + pyconv_cli("--ldflags").stdout.split()
    exe = tmp_path / "conv_example"
    build = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(REPO / "tests" / "c" / "conv_example.c"),
                            *flags, "-lm", "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("OK "), run.stdout
    assert f"libconv {pyconv.__version__}" in run.stdout
