"""Host memory a call needs, checked before it allocates. Linux overcommits: a NumPy array larger than the
free memory is handed out, and the process is killed when it is written (`conv2d` on a zero-stride view of
12 GB, a batch of 100,000 images). A call whose need exceeds what is available is refused instead, with a
ConvOutOfMemoryError naming the bytes. Device memory needs no such check: the CUDA allocator refuses what
it cannot give, and pyconv reports that as ConvOutOfMemoryError with the bytes too."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ._lib import ConvOutOfMemoryError

# Needs below this are not checked: they cannot exhaust a machine that runs Python, and reading /proc costs
# tens of microseconds a call.
CHECK_FROM = 256 << 20

_CGROUP_LIMITS = (  # (limit, usage) of the process's memory cgroup, v2 then v1
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def _read_int(path: str) -> Optional[int]:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def host_available() -> Optional[int]:
    """Bytes this process can still allocate: the kernel's MemAvailable, or less where a cgroup (a container,
    a batch job's limit) allows less; None where neither can be read (not Linux)."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    for limit_path, usage_path in _CGROUP_LIMITS:
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < 1 << 60:
            room = max(limit - usage, 0)
            available = room if available is None else min(available, room)
            break
    return available


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def require_host(nbytes: int, what: str) -> None:
    """Raises ConvOutOfMemoryError when `nbytes` of new host memory (`what` they are for) exceed what is
    available."""
    if nbytes < CHECK_FROM:
        return
    available = host_available()
    if available is not None and nbytes > available:
        from ._lib import lib
        raise ConvOutOfMemoryError(
            f"this call needs {nbytes} bytes ({_size(nbytes)}) of new host memory for {what}, and {available} "
            f"bytes ({_size(available)}) are available: use a smaller batch, or pass `out=`",
            int(lib().CONV_ERR_OUT_OF_MEMORY), "CONV_ERR_OUT_OF_MEMORY")
