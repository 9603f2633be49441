"""Writing the bench's files: each replaced in one step (a reader never sees half a file, and an
interrupted run leaves the last complete one), CSV from row dicts."""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path


def atomic_write(path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def csv_text(dicts, columns) -> str:
    """dicts as CSV with these columns (others ignored; None as an empty field)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: ("" if v is None else v) for k, v in d.items()})
    return buf.getvalue()
