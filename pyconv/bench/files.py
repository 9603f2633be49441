"""Writing the bench's files: each replaced in one step (a reader never sees half a file, and an
interrupted run leaves the last complete one), CSV from row dicts."""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path


def atomic_write(path, text: str) -> None:
    """Writes `text` to a temporary file of this process beside `path`, then renames it over `path`; a
    failed write removes its temporary file (two processes writing one path never share one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def csv_text(dicts, columns) -> str:
    """dicts as CSV with these columns (others ignored; None as an empty field)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: ("" if v is None else v) for k, v in d.items()})
    return buf.getvalue()
