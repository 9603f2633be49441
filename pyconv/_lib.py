"""Finding, loading and talking to libconv.so: the cffi handle, the error types, and `check`.

The library is loaded on first use, not at import, so `import pyconv` works everywhere; a missing or
unloadable library raises LibraryNotFoundError naming every path tried.
"""
from __future__ import annotations

import os
import re
import threading
import weakref
from importlib import metadata, resources
from pathlib import Path

import cffi

LIBRARY_ENV = "PYCONV_LIBRARY"  # path of another libconv.so (or the directory holding it)
LIBRARY_NAME = "libconv.so"
# The public headers, conv.h first: the convolution ABI, the demo's device ops, the bench's ceilings and
# timer. cffi declares all three; each of the others includes conv.h.
HEADERS = ("conv.h", "conv_ops.h", "conv_bench.h")


class ConvError(ValueError):
    """Invalid arguments: the message names the argument and what is wrong with it."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ConvRuntimeError(RuntimeError):
    """The GPU or the library failed; carries the C status and the library's message."""

    def __init__(self, message: str, status: int, status_name: str):
        super().__init__(f"{status_name}: {message}" if message else status_name)
        self.status = status
        self.status_name = status_name
        self.message = message


class ConvUnsupportedError(ConvRuntimeError):
    """The chosen variant cannot run this shape (the message says which parameter)."""


class ConvNoDeviceError(ConvRuntimeError):
    """No CUDA driver or GPU, or a library built without CUDA."""


class ConvOutOfMemoryError(ConvRuntimeError, MemoryError):
    """A GPU or pinned-memory allocation failed; the message says how many bytes."""


class LibraryNotFoundError(ImportError):
    """libconv.so could not be found or loaded."""


def package_dir() -> Path:
    return Path(str(resources.files("pyconv")))


def _installed_file(relative: str) -> Path | None:
    """A file of the installed pyconv distribution. Python imports a source checkout's pyconv/ (which
    has no built library) ahead of the installed one when run from the checkout's root; the
    installed copy still has the library and header."""
    try:
        path = Path(str(metadata.distribution("pyconv").locate_file(relative)))
    except metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def _package_file(relative: str) -> Path:
    """pyconv/<relative> of this package, else of the installed distribution."""
    here = package_dir() / relative
    return here if here.is_file() else (_installed_file(f"pyconv/{relative}") or here)


def _library_candidates() -> list[Path]:
    override = os.environ.get(LIBRARY_ENV)
    if override:
        path = Path(override)
        return [path / LIBRARY_NAME if path.is_dir() else path]
    return [_package_file(f"lib/{LIBRARY_NAME}")]


def include_dir() -> Path:
    """The directory of the headers (conv.h, conv_ops.h, conv_bench.h) that ship beside libconv.so."""
    return _package_file("include/conv.h").parent


def library_dir() -> Path:
    return _library_candidates()[0].parent


def header_dir() -> Path:
    """The directory holding every public header: installed beside the library, or include/ of a source
    checkout (all of them from one place, so that they are of one version)."""
    for candidate in (include_dir(), package_dir().parent / "include"):
        if all((candidate / name).is_file() for name in HEADERS):
            return candidate
    raise LibraryNotFoundError(f"{', '.join(HEADERS)} not all found in {include_dir()}; reinstall pyconv")


def header_path(name: str = "conv.h") -> Path:
    """A public header (conv.h by default): installed beside the library, or include/ of a source checkout."""
    return header_dir() / name


def cdef_source(header_text: str) -> str:
    """The declarations of one header as cffi wants them: no preprocessor lines, no extern "C" guard."""
    text = re.sub(r"#ifdef __cplusplus.*?#endif", "", header_text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def cdef_all() -> str:
    """What cffi declares: every public header's declarations, conv.h first (the others use its types)."""
    directory = header_dir()
    return "\n".join(cdef_source((directory / name).read_text()) for name in HEADERS)


_lock = threading.Lock()
_loaded: tuple | None = None
# RTLD_NODELETE: libconv (and, through it, its OpenMP runtime) stays mapped until the process ends.
# cffi dlcloses the library when the interpreter shuts down; unmapping libgomp while its idle worker
# threads still spin inside it (OMP_WAIT_POLICY=active) crashes the exit. The library is also linked
# with -z nodelete; the flag here covers libraries built without it (PYCONV_LIBRARY).
_DLOPEN_FLAGS = os.RTLD_NOW | os.RTLD_NODELETE


def load():
    """(ffi, lib, path) — loads libconv once."""
    global _loaded
    with _lock:
        if _loaded is None:
            ffi = cffi.FFI()
            ffi.cdef(cdef_all())
            errors = []
            for path in _library_candidates():
                if not path.is_file():
                    errors.append(f"{path}: no such file")
                    continue
                try:
                    handle = ffi.dlopen(str(path), _DLOPEN_FLAGS)
                except OSError as exc:
                    errors.append(f"{path}: {exc}")
                    continue
                missing = _missing_functions(handle)
                if missing:
                    errors.append(f"{path} is not a libconv of this pyconv (it lacks {', '.join(missing[:3])}"
                                  f"{' and more' if len(missing) > 3 else ''})")
                    continue
                _loaded = (ffi, handle, path)
                break
            else:
                raise LibraryNotFoundError(
                    "cannot load libconv: " + "; ".join(errors)
                    + f". Install pyconv with `pip install .`, or set {LIBRARY_ENV} to a built libconv.so.")
    return _loaded


def _missing_functions(handle) -> list:
    """The declared functions a loaded library lacks (another library named by PYCONV_LIBRARY, or an old
    build): refused at load, not an AttributeError at the first call that needs one."""
    missing = []
    for name in dir(handle):
        try:
            getattr(handle, name)
        except AttributeError:
            missing.append(name)
    return missing


def release_on_collect(owner, release, *args) -> None:
    """Calls release(*args) when `owner` is collected, but not at interpreter exit: the process is ending
    and its memory, streams and plans go with it, while a daemon thread may still be inside a launch
    that uses them (a plan freed under a running call crashed the exit)."""
    weakref.finalize(owner, release, *args).atexit = False


def package_version() -> str:
    """The version of the installed distribution (pyproject.toml's, the one source of it); in a source
    checkout that is not installed, the version the library was built with."""
    try:
        return metadata.version("pyconv")
    except metadata.PackageNotFoundError:
        pass
    try:
        f, l, _ = load()
    except LibraryNotFoundError:
        return "0+unknown"
    return f.string(l.conv_version()).decode()


def ffi():
    return load()[0]


def lib():
    return load()[1]


def library_path() -> Path:
    return load()[2]


_RUNTIME_ERRORS = {
    "CONV_ERR_UNSUPPORTED": ConvUnsupportedError,
    "CONV_ERR_NO_CUDA_BUILD": ConvNoDeviceError,
    "CONV_ERR_NO_DEVICE": ConvNoDeviceError,
    "CONV_ERR_OUT_OF_MEMORY": ConvOutOfMemoryError,
}


def error_for(status: int) -> Exception:
    """The exception for a failed status, with the library's thread-local message."""
    f, l = ffi(), lib()
    name = f.string(l.conv_status_string(status)).decode()
    # The message may quote the caller's text (a variant name) cut at the buffer's end.
    message = f.string(l.conv_last_error()).decode("utf-8", errors="replace")
    if name in ("CONV_ERR_INVALID_ARGUMENT", "CONV_ERR_TOO_LARGE", "CONV_ERR_WORKSPACE_TOO_SMALL"):
        return ConvError(f"{message} ({name})", status)
    return _RUNTIME_ERRORS.get(name, ConvRuntimeError)(message, status, name)


def check(status: int) -> None:
    """Raises the matching exception when a libconv call did not return CONV_OK."""
    if status != 0:
        raise error_for(status)
